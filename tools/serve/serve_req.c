#define _POSIX_C_SOURCE 200809L
#include "serve_req.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"

bool sv_fail(sv_error *e, int http, const char *type, const char *code, const char *param, const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}

#define BAD(e, param, ...) sv_fail(e, 400, "invalid_request_error", "invalid_value", param, __VA_ARGS__)
#define BAD_TYPE(e, param, what) \
    sv_fail(e, 400, "invalid_request_error", "invalid_type", param, "'%s' must be %s", param, what)

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* A number field: absent -> true with *present false; present -> a finite number in [lo, hi]. */
static bool get_num(const cJSON *o, const char *key, double lo, double hi, bool integer, double *out, bool *present,
                    sv_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *present = v && !cJSON_IsNull(v);
    if (!*present) return true;
    if (!cJSON_IsNumber(v)) return BAD_TYPE(e, key, integer ? "an integer" : "a number");
    double x = v->valuedouble;
    if (!isfinite(x) || (integer && x != floor(x))) return BAD_TYPE(e, key, integer ? "an integer" : "a number");
    if (x < lo || x > hi) return BAD(e, key, "'%s' is %.17g; it must be in [%.17g, %.17g]", key, x, lo, hi);
    *out = x;
    return true;
}

static bool get_bool(const cJSON *o, const char *key, bool *out, sv_error *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) return BAD_TYPE(e, key, "true or false");
    *out = cJSON_IsTrue(v);
    return true;
}

/* Message content: a string, or an array of {"type": "text", "text": ...} parts (joined). */
static char *content_text(const cJSON *c, int i, sv_error *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) {
        char *s = dup_str(c->valuestring);
        if (!s) sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return s;
    }
    if (!cJSON_IsArray(c)) {
        BAD_TYPE(e, param, "a string or an array of text parts");
        return NULL;
    }
    size_t n = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type"), *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            BAD(e, param, "'%s' parts must be {\"type\": \"text\", \"text\": STRING} (only text is supported)", param);
            return NULL;
        }
        n += strlen(x->valuestring);
    }
    char *s = malloc(n);
    if (!s) {
        sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    s[0] = 0;
    cJSON_ArrayForEach(p, c) strcat(s, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    return s;
}

static bool read_messages(const cJSON *root, const sv_defaults *def, sv_request *r, sv_error *e) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms) return sv_fail(e, 400, "invalid_request_error", "missing_required_parameter", "messages",
                            "'messages' is required");
    if (!cJSON_IsArray(ms)) return BAD_TYPE(e, "messages", "an array of messages");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return BAD(e, "messages", "'messages' is empty");
    if (def->tpl == CT_NONE)
        return sv_fail(e, 400, "invalid_request_error", "no_chat_template", "messages",
                       "the model has no chat template; start the server with --chat-template NAME (%s) to serve chat "
                       "completions",
                       chat_tpl_names());
    chat_msg *msgs = calloc((size_t)n, sizeof *msgs);
    char **texts = calloc((size_t)n, sizeof *texts);
    bool ok = msgs && texts;
    if (!ok) sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (int i = 0; ok && i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(ms, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m)) ok = BAD_TYPE(e, param, "an object {\"role\", \"content\"}");
        else if (!cJSON_IsString(role) ||
                 (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") &&
                  strcmp(role->valuestring, "assistant") && strcmp(role->valuestring, "developer")))
            ok = BAD(e, param, "'%s.role' must be \"system\", \"user\" or \"assistant\"", param);
        else if (!(texts[i] = content_text(cJSON_GetObjectItemCaseSensitive(m, "content"), i, e)))
            ok = false;
        else {
            msgs[i].role = strcmp(role->valuestring, "developer") ? role->valuestring : "system";
            msgs[i].content = texts[i];
        }
    }
    if (ok && !(r->prompt = chat_tpl_render(def->tpl, msgs, n))) ok = sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    for (int i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(msgs);
    return ok;
}

static bool read_prompt(const cJSON *root, sv_request *r, sv_error *e) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!p) return sv_fail(e, 400, "invalid_request_error", "missing_required_parameter", "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (!cJSON_IsString(p)) return BAD_TYPE(e, "prompt", "a string (or an array of one string)");
    if (!(r->prompt = dup_str(p->valuestring))) return sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return true;
}

static bool read_stop(const cJSON *root, sv_request *r, sv_error *e) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!s || cJSON_IsNull(s)) return true;
    if (cJSON_IsString(s)) {
        if (!*s->valuestring) return true;
        if (!(r->stop[0] = dup_str(s->valuestring))) return sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        r->n_stop = 1;
        return true;
    }
    if (!cJSON_IsArray(s)) return BAD_TYPE(e, "stop", "a string or an array of strings");
    if (cJSON_GetArraySize(s) > SV_MAX_STOP) return BAD(e, "stop", "'stop' has more than %d strings", SV_MAX_STOP);
    const cJSON *x;
    cJSON_ArrayForEach(x, s) {
        if (!cJSON_IsString(x)) return BAD_TYPE(e, "stop", "a string or an array of strings");
        if (!*x->valuestring) continue;
        if (!(r->stop[r->n_stop] = dup_str(x->valuestring))) return sv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        r->n_stop++;
    }
    return true;
}

/* "speculative": {"method": NAME, KEY: VALUE...} -> "NAME:KEY=VALUE:..." through the registry's parser, which
 * rejects unknown keys, keys of other methods and values out of range. */
static bool read_spec(const cJSON *root, const sv_defaults *def, bool seeded, sv_request *r, sv_error *e) {
    r->spec = seeded && r->sampling.temp > 0 ? def->seeded : def->spec;
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(root, "speculative");
    if (!sp || cJSON_IsNull(sp)) return true;
    if (!cJSON_IsObject(sp)) return BAD_TYPE(e, "speculative", "an object {\"method\": NAME, KEY: VALUE, ...}");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(sp, "method");
    if (!cJSON_IsString(m))
        return BAD(e, "speculative.method", "'speculative.method' must be a method name (none, draft, ngram, "
                                            "early-exit, del, specbound, swift, auto)");
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "%s", m->valuestring);
    if (strchr(m->valuestring, ':')) return BAD(e, "speculative.method", "unknown method '%s'", m->valuestring);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, sp) {
        if (!strcmp(kv->string, "method")) continue;
        char param[96];
        snprintf(param, sizeof param, "speculative.%s", kv->string);
        if (strpbrk(kv->string, ":=") || !*kv->string) return BAD(e, param, "unknown key '%s'", kv->string);
        char val[512];
        size_t vn = 0;
        if (cJSON_IsNumber(kv)) vn = (size_t)snprintf(val, sizeof val, "%.17g", kv->valuedouble);
        else if (cJSON_IsString(kv)) {
            if (strpbrk(kv->valuestring, ":=+") || strlen(kv->valuestring) >= 64)
                return BAD(e, param, "'%s' is not a valid value of %s", kv->valuestring, kv->string);
            vn = (size_t)snprintf(val, sizeof val, "%s", kv->valuestring);
        } else if (cJSON_IsArray(kv)) {
            const cJSON *x;
            val[0] = 0;
            cJSON_ArrayForEach(x, kv) { /* numbers, or names (auto's candidates) */
                const bool name = cJSON_IsString(x) && !strpbrk(x->valuestring, ":=+,") && strlen(x->valuestring) < 24;
                if (!cJSON_IsNumber(x) && !name) return BAD_TYPE(e, param, "an array of numbers or names");
                if (vn + 32 >= sizeof val) return BAD(e, param, "'%s' has too many elements", param);
                if (name) vn += (size_t)snprintf(val + vn, sizeof val - vn, "%s%s", vn ? "+" : "", x->valuestring);
                else vn += (size_t)snprintf(val + vn, sizeof val - vn, "%s%.17g", vn ? "+" : "", x->valuedouble);
            }
            if (vn == 0) vn = (size_t)snprintf(val, sizeof val, "all");
        } else
            return BAD_TYPE(e, param, "a number, a name or an array of numbers or names");
        if (n + strlen(kv->string) + vn + 3 >= sizeof text) return BAD(e, "speculative", "'speculative' is too long");
        n += (size_t)snprintf(text + n, sizeof text - n, ":%s=%s", kv->string, val);
    }
    sd_error se = {0};
    sd_spec_params p = sd_spec_default_params();
    if (sd_spec_parse(&p, text, &se) != SD_OK) return BAD(e, "speculative", "speculative: %s", se.msg);
    if (p.method == SD_SPEC_DRAFT && !def->dctx)
        return BAD(e, "speculative.method", "this server has no draft model (start it with --draft-model FILE)");
    p.draft_ctx = p.method == SD_SPEC_DRAFT || p.method == SD_SPEC_AUTO ? def->dctx : NULL; /* auto: a candidate */
    p.exit_heads = def->heads;
    p.swift_state = p.method == SD_SPEC_SWIFT ? def->swift : NULL;
    p.auto_state = p.method == SD_SPEC_AUTO ? def->autos : NULL;
    cli_pick_accept_head(&p, def->model, def->dmodel, def->accept, def->n_accept); /* SpecDec++ */
    /* SV: the server's companion, profile and latency table (verify=sv needs them: the check says so) */
    p.companion_ctx = def->spec.companion_ctx;
    p.sv_profile = def->spec.sv_profile;
    p.sv_latency = def->spec.sv_latency;
    if (sd_spec_check(def->model, def->dmodel, &p, &se) != SD_OK || sd_spec_check_ctx(def->ctx, &p, &se) != SD_OK)
        return BAD(e, "speculative", "speculative: %s", se.msg);
    r->spec = p;
    return true;
}

bool sv_request_parse(const char *body, size_t len, sv_kind kind, const sv_defaults *def, uint64_t seed,
                      sv_request *r, sv_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return sv_fail(e, 400, "invalid_request_error", "invalid_json", NULL,
                       "the body is not valid JSON (error near byte %zu)", at);
    }
    for (; end && (size_t)(end - body) < len; end++)
        if (!strchr(" \t\r\n", *end)) {
            cJSON_Delete(root);
            return sv_fail(e, 400, "invalid_request_error", "invalid_json", NULL,
                           "the body has data after the JSON value (byte %zu)", (size_t)(end - body));
        }
    bool ok = cJSON_IsObject(root) || sv_fail(e, 400, "invalid_request_error", "invalid_json", NULL,
                                              "the body must be a JSON object");
    r->sampling = def->sampling;
    r->sampling.seed = seed;
    double x;
    bool has;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (ok && model && !cJSON_IsNull(model) && !cJSON_IsString(model)) ok = BAD_TYPE(e, "model", "a string");
    if (ok) ok = kind == SV_CHAT ? read_messages(root, def, r, e) : read_prompt(root, r, e);
    const char *mt = kind == SV_CHAT && cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
                         ? "max_completion_tokens"
                         : "max_tokens";
    if (ok && (ok = get_num(root, mt, 1, 1 << 30, true, &x, &has, e)) && has) r->max_tokens = (int)x;
    if (ok && (ok = get_num(root, "temperature", 0, 1e6, false, &x, &has, e)) && has) r->sampling.temp = (float)x;
    if (ok && (ok = get_num(root, "top_p", 0, 1, false, &x, &has, e)) && has) {
        if (x <= 0) ok = BAD(e, "top_p", "'top_p' must be in (0, 1]");
        r->sampling.top_p = (float)x;
    }
    if (ok && (ok = get_num(root, "top_k", 0, 1 << 30, true, &x, &has, e)) && has) r->sampling.top_k = (int)x;
    if (ok && (ok = get_num(root, "min_p", 0, 1, false, &x, &has, e)) && has) r->sampling.min_p = (float)x;
    if (ok && (ok = get_num(root, "repeat_penalty", 1e-6, 1e6, false, &x, &has, e)) && has)
        r->sampling.repeat_penalty = (float)x;
    bool seeded = false;
    if (ok && (ok = get_num(root, "seed", -9007199254740992.0, 9007199254740992.0, true, &x, &has, e)) && has)
        r->sampling.seed = (uint64_t)(int64_t)x, seeded = true;
    if (ok && (ok = get_num(root, "n", 1, 1 << 30, true, &x, &has, e)) && has && x != 1)
        ok = sv_fail(e, 400, "invalid_request_error", "unsupported_value", "n", "only n = 1 is supported");
    for (const char *const *z = (const char *const[]){"presence_penalty", "frequency_penalty", NULL}; ok && *z; z++)
        if ((ok = get_num(root, *z, -2, 2, false, &x, &has, e)) && has && x != 0)
            ok = sv_fail(e, 400, "invalid_request_error", "unsupported_value", *z, "'%s' is not supported (use 0)", *z);
    bool logprobs = false;
    if (ok && (ok = get_bool(root, "logprobs", &logprobs, e)) && logprobs)
        ok = sv_fail(e, 400, "invalid_request_error", "unsupported_value", "logprobs", "'logprobs' is not supported");
    if (ok) ok = get_bool(root, "stream", &r->stream, e);
    if (ok) ok = get_bool(root, "ignore_eos", &r->ignore_eos, e);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (ok && so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) ok = BAD_TYPE(e, "stream_options", "an object");
        else ok = get_bool(so, "include_usage", &r->include_usage, e);
    }
    if (ok) ok = read_stop(root, r, e);
    if (ok) ok = read_spec(root, def, seeded, r, e);
    cJSON_Delete(root);
    if (!ok) sv_request_free(r);
    return ok;
}

void sv_request_free(sv_request *r) {
    if (!r) return;
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
    r->max_tokens = -1;
}
