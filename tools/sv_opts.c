/* sv_opts: SV's files and companion for the CLI and the server (see the header). */
#define _POSIX_C_SOURCE 200809L
#include "sv_opts.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "out_file.h"

enum { PROFILE_VERSION = 1 };

static bool fail(char *err, size_t cap, const char *path, const char *what) {
    snprintf(err, cap, "%s: not a valid SV profile: %s", path, what);
    return false;
}

/* A JSON array of n numbers (n < 0: any length up to cap) into out; the length into *got. */
static bool num_array(const cJSON *a, float *out, int cap, int *got) {
    if (!cJSON_IsArray(a)) return false;
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        if (!cJSON_IsNumber(x) || n == cap) return false;
        out[n++] = (float)x->valuedouble;
    }
    *got = n;
    return true;
}

static bool int_field(const cJSON *o, const char *key, int *out) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x) || x->valuedouble != (double)(int)x->valuedouble) return false;
    *out = (int)x->valuedouble;
    return true;
}

bool sv_profile_read_json(const char *path, const sd_model *target, sd_sv_profile **out, char *err, size_t cap) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    sd_error e = {0};
    if (sd_read_text_file(path, 64u << 20, &text, &len, &e) != SD_OK) {
        snprintf(err, cap, "SV profile: %s", e.msg);
        return false;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return fail(err, cap, path, "corrupt JSON");
    bool ok = false;
    enum { M = SD_SV_MAX_BINS };
    float *beta = malloc((size_t)M * M * sizeof *beta), se[M], ae[M], row[M];
    int *count = calloc((size_t)M * M, sizeof *count);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"),
                *tg = cJSON_GetObjectItemCaseSensitive(root, "target"),
                *bt = cJSON_GetObjectItemCaseSensitive(root, "beta"),
                *ct = cJSON_GetObjectItemCaseSensitive(root, "count");
    sd_sv_profile_desc d = {0};
    int ver = 0, n_se = 0, n_ae = 0;
    const cJSON *chk = tg ? cJSON_GetObjectItemCaseSensitive(tg, "check") : NULL;
    if (!beta || !count) {
        snprintf(err, cap, "out of memory reading %s", path);
        goto done;
    }
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "specdec-sv-profile")) {
        fail(err, cap, path, "no \"format\": \"specdec-sv-profile\"");
        goto done;
    }
    if (!int_field(root, "version", &ver) || ver != PROFILE_VERSION) {
        fail(err, cap, path, "unknown version (expected 1)");
        goto done;
    }
    if (!cJSON_IsObject(tg) || !int_field(tg, "n_layer", &d.target.n_layer) || !int_field(tg, "n_embd", &d.target.n_embd) ||
        !int_field(tg, "n_vocab", &d.target.n_vocab) || !cJSON_IsString(chk) ||
        sscanf(chk->valuestring, "%8x", &d.target.check) != 1) {
        fail(err, cap, path, "\"target\" needs n_layer, n_embd, n_vocab and check");
        goto done;
    }
    if (!num_array(cJSON_GetObjectItemCaseSensitive(root, "s_edges"), se, M - 1, &n_se) ||
        !num_array(cJSON_GetObjectItemCaseSensitive(root, "a_edges"), ae, M - 1, &n_ae)) {
        fail(err, cap, path, "\"s_edges\" and \"a_edges\" must be arrays of numbers");
        goto done;
    }
    d.n_s = n_se + 1, d.n_a = n_ae + 1;
    if (!cJSON_IsArray(bt) || cJSON_GetArraySize(bt) != d.n_s || (ct && (!cJSON_IsArray(ct) || cJSON_GetArraySize(ct) != d.n_s))) {
        fail(err, cap, path, "\"beta\" (and \"count\") must hold one row per S bin");
        goto done;
    }
    for (int i = 0; i < d.n_s; i++) {
        int n = 0;
        if (!num_array(cJSON_GetArrayItem(bt, i), beta + (size_t)i * d.n_a, d.n_a, &n) || n != d.n_a) {
            fail(err, cap, path, "a \"beta\" row must hold one number per A bin");
            goto done;
        }
        if (ct) {
            if (!num_array(cJSON_GetArrayItem(ct, i), row, d.n_a, &n) || n != d.n_a) {
                fail(err, cap, path, "a \"count\" row must hold one number per A bin");
                goto done;
            }
            for (int j = 0; j < d.n_a; j++) count[i * d.n_a + j] = (int)row[j];
        }
    }
    d.s_edges = se, d.a_edges = ae, d.beta = beta, d.count = count;
    if (sd_sv_profile_new(target, &d, out, &e) != SD_OK) {
        snprintf(err, cap, "%s: %s", path, e.msg);
        goto done;
    }
    ok = true;
done:
    free(beta);
    free(count);
    cJSON_Delete(root);
    return ok;
}

bool sv_profile_write_json(const char *path, const sd_sv_profile *p, const sd_sv_profile_info *info,
                           const char *target_path, const char *draft, const char *companion) {
    FILE *f = out_open(path, "--out");
    if (!f) return false;
    sd_sv_profile_desc d;
    sd_sv_profile_get(p, &d);
    fprintf(f, "{\n  \"format\": \"specdec-sv-profile\",\n  \"version\": %d,\n  \"target\": {\"file\": ", PROFILE_VERSION);
    out_json_str(f, target_path);
    fprintf(f, ", \"n_layer\": %d, \"n_embd\": %d, \"n_vocab\": %d, \"check\": \"%08x\"},\n  \"draft\": ",
            d.target.n_layer, d.target.n_embd, d.target.n_vocab, d.target.check);
    out_json_str(f, draft);
    fprintf(f, ",\n  \"companion\": ");
    out_json_str(f, companion);
    fprintf(f, ",\n  \"n_records\": %d, \"n_accepted\": %d, \"h_accept_bits\": %.6f, \"h_given_bits\": %.6f, "
               "\"info_gain\": %.6f,\n  \"s_edges\": [",
            info->n_records, info->n_accepted, info->h_accept, info->h_given, info->info_gain);
    for (int i = 0; i + 1 < d.n_s; i++) fprintf(f, "%s%.9g", i ? ", " : "", d.s_edges[i]);
    fprintf(f, "],\n  \"a_edges\": [");
    for (int i = 0; i + 1 < d.n_a; i++) fprintf(f, "%s%.9g", i ? ", " : "", d.a_edges[i]);
    for (int t = 0; t < 2; t++) {
        fprintf(f, "],\n  \"%s\": [", t ? "count" : "beta");
        for (int i = 0; i < d.n_s; i++) {
            fprintf(f, "%s\n    [", i ? "," : "");
            for (int j = 0; j < d.n_a; j++)
                if (t) fprintf(f, "%s%d", j ? ", " : "", d.count[i * d.n_a + j]);
                else fprintf(f, "%s%.6g", j ? ", " : "", d.beta[i * d.n_a + j]);
            fprintf(f, "]");
        }
    }
    fprintf(f, "\n  ]\n}\n");
    return out_close(f, path);
}

static const int BATCHES[] = {1, 2, 4, 8, 16};

/* The methods that read the latency table: SV's verification length, SWIFT's automatic tree budget, auto's costs. */
static bool needs_latency(const sd_spec_params *sp) {
    return sp->verify == SD_VERIFY_SV || sp->tree_nodes < 0 || sp->method == SD_SPEC_AUTO;
}

/* The drafted tokens the latency table must reach for sp: its longest round (SWIFT's automatic tree budget: 32),
 * at most 32. */
static int latency_n(const sd_spec_params *sp) {
    const int n = sd_spec_max_drafts(sp);
    return n > 32 ? 32 : n;
}

/* Loads (when it reaches n 0..n_max and the context's batch sizes) or measures the latency table into e->lat. */
static bool latency_open(sv_env *e, int n_max, const char *path, sd_model *target, sd_ctx *tctx) {
    sd_error err = {0};
    const int threads = sd_ctx_n_threads(tctx);
    int nb = 0;
    while (nb < 5 && BATCHES[nb] <= sd_ctx_n_seq(tctx)) nb++;
    if (path) {
        sd_status st = sd_sv_latency_load(target, threads, path, &e->lat, &err);
        if (st == SD_OK && sd_sv_latency_n_max(e->lat) >= n_max && sd_sv_latency_max_batch(e->lat) >= BATCHES[nb - 1]) {
            fprintf(stderr, "latency table T(n, b) from %s\n", path);
            return true;
        }
        sd_sv_latency_free(e->lat);
        e->lat = NULL;
        if (st == SD_ERR_FORMAT) { /* not ours: never overwritten */
            fprintf(stderr, "error: --sv-latency: %s\n", err.msg);
            return false;
        }
    }
    fprintf(stderr, "measuring the latency table T(n, b) (n 0..%d, batch sizes up to %d, %d threads)%s\n", n_max,
            BATCHES[nb - 1], threads, path ? "" : "; --sv-latency FILE keeps it for the next start");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (sd_sv_latency_measure(target, threads, n_max, BATCHES, nb, 3, &e->lat, &err) != SD_OK) {
        fprintf(stderr, "error: measuring the SV latency table: %s\n", err.msg);
        return false;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "latency table T(n, b) measured in %.1f s%s%s\n",
            (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), path ? ", written to " : "",
            path ? path : "");
    if (path && sd_sv_latency_save(e->lat, target, threads, path, &err) != SD_OK) {
        fprintf(stderr, "error: --sv-latency: %s\n", err.msg);
        return false;
    }
    return true;
}

bool sv_env_open(sv_env *e, sd_spec_params *sp, const char *profile_path, const char *companion_path,
                 const char *latency_path, sd_model *target, sd_ctx *tctx) {
    sd_error err = {0};
    char msg[768];
    if (profile_path && !e->profile) {
        if (!sv_profile_read_json(profile_path, target, &e->profile, msg, sizeof msg)) {
            fprintf(stderr, "error: %s\n", msg);
            return false;
        }
        sp->sv_profile = e->profile;
    }
    if ((companion_path || sp->companion_exit > 0) && !e->cctx) {
        const sd_model *cm = target;
        if (companion_path) {
            if (sd_model_load(companion_path, NULL, &e->cmodel, &err) != SD_OK) {
                fprintf(stderr, "error: companion: %s\n", err.msg);
                return false;
            }
            cm = e->cmodel;
        }
        sd_ctx_params cp = sd_ctx_default_params();
        cp.n_ctx = sd_ctx_n_ctx(tctx);
        cp.n_seq = sd_ctx_n_seq(tctx);
        cp.n_batch = sd_ctx_n_batch(tctx);
        cp.n_threads = sd_ctx_n_threads(tctx);
        if (sd_ctx_new(cm, &cp, &e->cctx, &err) != SD_OK) {
            fprintf(stderr, "error: companion context: %s\n", err.msg);
            return false;
        }
        sp->companion_ctx = e->cctx;
        fprintf(stderr, "sv: companion %s%s", companion_path ? companion_path : "the target", sp->companion_exit ? "" : "\n");
        if (sp->companion_exit) fprintf(stderr, ", its first %d layers\n", sp->companion_exit);
    }
    if ((needs_latency(sp) || latency_path || profile_path) && !e->lat &&
        !latency_open(e, latency_n(sp) > e->lat_n ? latency_n(sp) : e->lat_n, latency_path, target, tctx))
        return false;
    sp->sv_profile = e->profile;
    sp->companion_ctx = e->cctx;
    sp->sv_latency = e->lat;
    return true;
}

int sv_latency_reach(const sd_spec_params *ms, int n_m) {
    int n = 0;
    for (int m = 0; m < n_m; m++)
        if (needs_latency(&ms[m]) && latency_n(&ms[m]) > n) n = latency_n(&ms[m]);
    return n;
}

bool sv_env_for_methods(sv_env *e, sd_spec_params *ms, int n_m, const char *profile_path, const char *companion_path,
                        const char *latency_path, sd_model *target, sd_ctx *tctx) {
    int need = -1;
    for (int m = 0; m < n_m && need < 0; m++)
        if (needs_latency(&ms[m]) || ms[m].companion_exit > 0) need = m;
    if (sv_latency_reach(ms, n_m) > e->lat_n) e->lat_n = sv_latency_reach(ms, n_m);
    if (need >= 0 || profile_path || companion_path || latency_path) { /* what is open already stays */
        sd_spec_params t = need >= 0 ? ms[need] : ms[0];
        if (e->lat_n > 0 && !e->lat && !latency_open(e, e->lat_n, latency_path, target, tctx)) return false;
        if (!sv_env_open(e, &t, profile_path, companion_path, latency_path, target, tctx)) return false;
    }
    for (int m = 0; m < n_m; m++) {
        ms[m].companion_ctx = e->cctx;
        ms[m].sv_profile = e->profile;
        ms[m].sv_latency = e->lat;
    }
    return true;
}

void sv_env_free(sv_env *e) {
    sd_ctx_free(e->cctx);
    sd_model_free(e->cmodel);
    sd_sv_profile_free(e->profile);
    sd_sv_latency_free(e->lat);
    memset(e, 0, sizeof *e);
}
