/* registry: the one table of speculative method parameters, and the parsing and validation built on it. */
#include "speculative/registry.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/exit_heads.h"
#include "model/model.h"
#include "speculative/swift_opt.h"
#include "util/err.h"

#include "speculative/method.h"

static const char *const METHOD_NAMES[] = {"none", "draft", "ngram", "early-exit", "del", "specbound", "swift", "auto"};
static const char *const CTRL_NAMES[] = {"fixed", "conf", "fs", "dv", /* SpecDec++ */ "specdecpp"};
static const char *const VERIFY_NAMES[] = {"all", "sv"}; /* SV */
enum { N_METHODS = 8, N_CTRLS = 5, MAX_LIST = 64 };

enum { NO_COUNT = -1 };

typedef struct spec_param {
    sd_spec_param_info info;
    size_t off;               /* the field of sd_spec_params */
    int count_off;            /* lists: offset of the int holding the length; NO_COUNT: the length is where the
                                 array's nonzero prefix ends (the rest is zeroed) */
    const char *empty_word;   /* lists that may be empty: how the empty list is written ("all"); NULL: never empty */
} spec_param;

#define F(field) offsetof(sd_spec_params, field)
#define CAP(field) ((int)(sizeof ((sd_spec_params *)0)->field / sizeof ((sd_spec_params *)0)->field[0]))
#define MM(m) SD_MASK(SD_SPEC_##m)

static const spec_param PARAMS[] = {
    {{"method", "--spec", SD_PARAM_ENUM, 0, 0, false, 0, "none|draft|ngram|early-exit|del|specbound|swift|auto", "none",
      "speculative method (auto: chosen every round)", SD_MASK_ANY},
     F(method), NO_COUNT, NULL},
    {{"ctrl", "--ctrl", SD_PARAM_ENUM, 0, 0, false, 0, "fixed|conf|fs|dv|specdecpp", "fixed",
      "draft length: fixed | conf (stop below p_min) | fs (+-1 per round) | dv (Draft&Verify threshold) | specdecpp "
      "(trained acceptance head, --accept-head); swift: fixed (its own p_stop rule) or specdecpp",
      SD_MASK_CHAIN | MM(SWIFT)},
     F(ctrl), NO_COUNT, NULL},
    {{"gamma", "--gamma", SD_PARAM_INT, 1, 256, false, 0, NULL, "5", "drafts per round (fixed), initial length (fs)",
      SD_MASK_CHAIN},
     F(gamma), NO_COUNT, NULL},
    {{"gamma_max", "--gamma-max", SD_PARAM_INT, 1, 256, false, 0, NULL, "16",
      "longest draft of conf / fs / dv; auto: the longest gamma it considers", SD_MASK_CHAIN | MM(AUTO)},
     F(gamma_max), NO_COUNT, NULL},
    {{"p_min", "--p-min", SD_PARAM_FLOAT, 0, 1, false, 0, NULL, "0.75",
      "conf: stop drafting when the draft's top-1 probability is below this", SD_MASK_CHAIN},
     F(p_min), NO_COUNT, NULL},
    {{"dv_target", "--dv-target", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.8", "dv: target acceptance rate",
      SD_MASK_CHAIN},
     F(dv_target), NO_COUNT, NULL},
    {{"dv_eps", "--dv-eps", SD_PARAM_FLOAT, 0, 0.5, false, 0, NULL, "0.01", "dv: threshold step per round",
      SD_MASK_CHAIN},
     F(dv_eps), NO_COUNT, NULL},
    {{"dv_theta0", "--dv-theta0", SD_PARAM_FLOAT, 0, 1, false, 0, NULL, "0.5", "dv: initial threshold", SD_MASK_CHAIN},
     F(dv_theta0), NO_COUNT, NULL},
    {{"ngram_max", "--ngram-max", SD_PARAM_INT, 1, 64, false, 0, NULL, "3", "longest n-gram looked up",
      MM(NGRAM) | MM(AUTO)},
     F(ngram_max), NO_COUNT, NULL},
    {{"ngram_min", "--ngram-min", SD_PARAM_INT, 1, 64, false, 0, NULL, "1", "shortest n-gram looked up",
      MM(NGRAM) | MM(AUTO)},
     F(ngram_min), NO_COUNT, NULL},
    {{"exit", "--exit-layer", SD_PARAM_INT, 0, 1024, false, 0, NULL, "0",
      "early exit: layers the draft runs, 1..L-1 (0: L/2)", MM(EARLY_EXIT)},
     F(exit_layer), NO_COUNT, NULL},
    {{"omega", "--del-omega", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.95", "DEL: decay of the statistics", MM(DEL)},
     F(del_omega), NO_COUNT, NULL},
    {{"dmax", "--del-dmax", SD_PARAM_INT, 1, 256, false, 0, NULL, "18", "DEL: longest draft", MM(DEL)},
     F(del_dmax), NO_COUNT, NULL},
    {{"init_tokens", "--del-init", SD_PARAM_INT, 0, 1 << 20, false, 0, NULL, "32",
      "DEL: prompt tokens that initialise the statistics", MM(DEL)},
     F(del_init_tokens), NO_COUNT, NULL},
    {{"layers", "--del-layers", SD_PARAM_INT_LIST, 1, 1024, false, CAP(del_layers), NULL, "all",
      "DEL bounded mode: candidate exit depths (all: 1..L-1)", MM(DEL)},
     F(del_layers), (int)F(del_n_layers), "all"},
    {{"every", "--del-every", SD_PARAM_INT, 1, 1 << 20, false, 0, NULL, "1",
      "DEL bounded mode: shadow tokens every k-th round only", MM(DEL)},
     F(del_every), NO_COUNT, NULL},
    {{"tau", "--sb-tau", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.8",
      "SpecBound: a token exits when max softmax(z_l / T_l) reaches tau", MM(SPECBOUND)},
     F(sb_tau), NO_COUNT, NULL},
    {{"alpha", "--sb-alpha", SD_PARAM_FLOAT, 0, 100, false, 0, NULL, "1",
      "SpecBound: annealing, T_l = 1 + alpha (1 - l/L)", MM(SPECBOUND)},
     F(sb_alpha), NO_COUNT, NULL},
    {{"depth", "--sb-depth", SD_PARAM_INT, 0, 1024, false, 0, NULL, "0",
      "SpecBound: depth bound D, 1..L-1 (0: 3L/4)", MM(SPECBOUND)},
     F(sb_depth), NO_COUNT, NULL},
    {{"width", "--sb-width", SD_PARAM_INT, 1, 256, false, 0, NULL, "8", "SpecBound: width bound W (drafts per round)",
      MM(SPECBOUND)},
     F(sb_width), NO_COUNT, NULL},
    {{"tree_nodes", "--tree-nodes", SD_PARAM_INT, -1, 256, false, 0, NULL, "0",
      "token tree: most draft nodes per round (0: a chain; swift: -1 = chosen from the latency table and the "
      "acceptance so far)", MM(DRAFT) | MM(SWIFT)},
     F(tree_nodes), NO_COUNT, NULL},
    {{"tree_topk", "--tree-topk", SD_PARAM_INT_LIST, 1, 64, false, CAP(tree_topk), NULL, "10+5+3+1",
      "token tree: children per node in each confidence bucket (one more than tree_conf)", MM(DRAFT) | MM(SWIFT)},
     F(tree_topk), NO_COUNT, NULL},
    {{"tree_conf", "--tree-conf", SD_PARAM_FLOAT_LIST, 0, 1, true, CAP(tree_conf), NULL, "0.5+0.8+0.95",
      "token tree: ascending bounds of the parent's top-1 probability between the buckets", MM(DRAFT) | MM(SWIFT)},
     F(tree_conf), (int)F(n_tree_conf), "none"},
    /* SWIFT */
    {{"skip_ratio", "--skip-ratio", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.45",
      "SWIFT: skipped sub-layers = floor(2 (L - 2) r) (first and last layers never skipped)", MM(SWIFT)},
     F(swift_skip_ratio), NO_COUNT, NULL},
    {{"window", "--context-window", SD_PARAM_INT, 1, 4096, false, 0, NULL, "32",
      "SWIFT: generated tokens the matchness is measured over (C)", MM(SWIFT)},
     F(swift_window), NO_COUNT, NULL},
    {{"opt_steps", "--opt-steps", SD_PARAM_INT, 0, 1 << 20, false, 0, NULL, "1000",
      "SWIFT: optimisation steps at most (one per round; 0: keep the starting set)", MM(SWIFT)},
     F(swift_opt_steps), NO_COUNT, NULL},
    {{"patience", "--opt-patience", SD_PARAM_INT, 1, 1 << 20, false, 0, NULL, "300",
      "SWIFT: stop optimising after this many steps without improvement", MM(SWIFT)},
     F(swift_patience), NO_COUNT, NULL},
    {{"bayes_interval", "--bayes-interval", SD_PARAM_INT, 1, 1 << 20, false, 0, NULL, "25",
      "SWIFT: every beta-th step a Gaussian-process (UCB) proposal, random search otherwise", MM(SWIFT)},
     F(swift_bayes_interval), NO_COUNT, NULL},
    {{"p_stop", "--p-stop", SD_PARAM_FLOAT, 0, 1, false, 0, NULL, "0.8",
      "SWIFT: stop drafting when the draft's top-1 probability is below this", MM(SWIFT)},
     F(swift_p_stop), NO_COUNT, NULL},
    {{"max_draft", "--swift-max-draft", SD_PARAM_INT, 1, 256, false, 0, NULL, "25",
      "SWIFT: longest draft chain per round", MM(SWIFT)},
     F(swift_max_draft), NO_COUNT, NULL},
    {{"stop_score", "--opt-stop-score", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.95",
      "SWIFT: stop optimising once the best matchness reaches this", MM(SWIFT)},
     F(swift_stop_score), NO_COUNT, NULL},
    /* SpecDec++ */
    {{"stop_threshold", "--stop-threshold", SD_PARAM_FLOAT, 0, 1, false, 0, NULL, "0.3",
      "specdecpp: stop drafting when 1 - prod(acceptance) exceeds this", MM(DRAFT) | MM(EARLY_EXIT) | MM(SWIFT)},
     F(stop_threshold), NO_COUNT, NULL},
    /* Speculative Verification (SV) */
    {{"verify", "--verify", SD_PARAM_ENUM, 0, 0, false, 0, "all|sv", "all",
      "which drafted tokens are verified: all | sv (the goodput-maximising prefix; needs an SV profile and a companion)",
      SD_MASK_SV},
     F(verify), NO_COUNT, NULL},
    {{"companion_exit", "--companion-exit", SD_PARAM_INT, 0, 1024, false, 0, NULL, "0",
      "SV: the companion runs only its model's layers [0, E) through the head (0: all; with no --companion, the "
      "companion is the target's first E layers)", SD_MASK_SV},
     F(companion_exit), NO_COUNT, NULL},
    /* auto */
    {{"candidates", "--spec-candidates", SD_PARAM_NAME_LIST, 0, 0, false, 7,
      "none|draft|ngram|early-exit|del|specbound|swift", "all",
      "auto: the methods it chooses from: none, draft, ngram, early-exit, swift (all: every one available; draft "
      "needs a draft model, swift 3 layers)", MM(AUTO)},
     F(auto_candidates), NO_COUNT, "all"},
    {{"exits", "--auto-exits", SD_PARAM_INT_LIST, 1, 1024, false, CAP(auto_exits), NULL, "auto",
      "auto: the exit depths early exit is tried at (auto: L/4, 3L/8 and L/2)", MM(AUTO)},
     F(auto_exits), (int)F(auto_n_exits), "auto"},
    {{"hysteresis", "--auto-hysteresis", SD_PARAM_FLOAT, 0, 10, false, 0, NULL, "0.1",
      "auto: another method or gamma takes over only when its expected tokens/s beat the current one's by this fraction",
      MM(AUTO)},
     F(auto_hysteresis), NO_COUNT, NULL},
    {{"decay", "--auto-decay", SD_PARAM_FLOAT, 0, 1, true, 0, NULL, "0.97",
      "auto: weight of the old acceptance statistics per replayed round", MM(AUTO)},
     F(auto_decay), NO_COUNT, NULL},
    {{"probe", "--auto-probe", SD_PARAM_INT, 0, 1 << 20, false, 0, NULL, "0",
      "auto: every N-th round runs the method run least recently, whatever the estimates (0: never)", MM(AUTO)},
     F(auto_probe), NO_COUNT, NULL},
};
enum { N_PARAMS = (int)(sizeof PARAMS / sizeof PARAMS[0]) };

/* ------------------------------------------------------------------ names */
static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *sd_spec_method_name(sd_spec_method m) {
    return (int)m >= 0 && (int)m < N_METHODS ? METHOD_NAMES[m] : "?";
}

const char *sd_ctrl_name(sd_ctrl_kind c) { return (int)c >= 0 && (int)c < N_CTRLS ? CTRL_NAMES[c] : "?"; }

sd_status sd_spec_method_from_name(const char *name, sd_spec_method *out, sd_error *err) {
    int i = name_index(METHOD_NAMES, N_METHODS, name);
    if (i < 0)
        return err_set(err, SD_ERR_ARG, "unknown speculative method '%s' (none, draft, ngram, early-exit, del, specbound, swift or auto)",
                       name ? name : "(null)");
    *out = (sd_spec_method)i;
    return SD_OK;
}

sd_status sd_ctrl_from_name(const char *name, sd_ctrl_kind *out, sd_error *err) {
    int i = name_index(CTRL_NAMES, N_CTRLS, name);
    if (i < 0)
        return err_set(err, SD_ERR_ARG, "unknown controller '%s' (fixed, conf, fs, dv or specdecpp)", name ? name : "(null)");
    *out = (sd_ctrl_kind)i;
    return SD_OK;
}

/* ------------------------------------------------------------------ the table */
int sd_spec_n_params(void) { return N_PARAMS; }

const sd_spec_param_info *sd_spec_param_at(int i) { return i >= 0 && i < N_PARAMS ? &PARAMS[i].info : NULL; }

static const spec_param *find(const char *key) {
    if (!key) return NULL;
    bool flag = key[0] == '-' && key[1] == '-';
    for (int i = 0; i < N_PARAMS; i++)
        if (!strcmp(key, flag ? PARAMS[i].info.cli_flag : PARAMS[i].info.key)) return &PARAMS[i];
    return NULL;
}

const sd_spec_param_info *sd_spec_param_find(const char *key) {
    const spec_param *p = find(key);
    return p ? &p->info : NULL;
}

/* ------------------------------------------------------------------ values */
static void range_text(const sd_spec_param_info *in, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%g, %g]", in->min_open ? "(" : "[", in->min, in->max);
}

static bool in_range(const sd_spec_param_info *in, double v) {
    return (in->min_open ? v > in->min : v >= in->min) && v <= in->max;
}

/* What a value must be, for messages: "an integer in [1, 256]", "one of fixed|conf|fs|dv", ... */
static void expect_text(const spec_param *p, char *buf, size_t cap) {
    const sd_spec_param_info *in = &p->info;
    char r[64];
    range_text(in, r, sizeof r);
    switch (in->type) {
    case SD_PARAM_INT: snprintf(buf, cap, "an integer in %s", r); break;
    case SD_PARAM_FLOAT: snprintf(buf, cap, "a number in %s", r); break;
    case SD_PARAM_ENUM: snprintf(buf, cap, "one of %s", in->choices); break;
    case SD_PARAM_INT_LIST:
    case SD_PARAM_FLOAT_LIST:
        snprintf(buf, cap, "1 to %d %s in %s separated by '+' or ','%s%s", in->max_count,
                 in->type == SD_PARAM_INT_LIST ? "integers" : "numbers", r, p->empty_word ? ", or " : "",
                 p->empty_word ? p->empty_word : "");
        break;
    case SD_PARAM_NAME_LIST:
        snprintf(buf, cap, "names from %s separated by '+' or ',', or %s", in->choices, p->empty_word);
        break;
    }
}

/* "key=value" or, when the caller named the parameter by its flag, "--flag value". */
static sd_status bad_value(sd_error *err, const spec_param *p, const char *name, const char *value, const char *why) {
    char want[160];
    expect_text(p, want, sizeof want);
    bool flag = name[0] == '-';
    return err_set(err, SD_ERR_ARG, "%s%s%s: %s%sexpected %s", name, flag ? " " : "=", value, why ? why : "",
                   why ? "; " : "", want);
}

static bool parse_number(const char *s, bool integer, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v;
    if (integer) {
        long l = strtol(s, &end, 10);
        v = (double)l;
    } else {
        v = strtod(s, &end);
    }
    if (*end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

static int *int_field(sd_spec_params *sp, size_t off) { return (int *)((char *)sp + off); }
static float *float_field(sd_spec_params *sp, size_t off) { return (float *)((char *)sp + off); }
static const int *int_cfield(const sd_spec_params *sp, size_t off) { return (const int *)((const char *)sp + off); }
static const float *float_cfield(const sd_spec_params *sp, size_t off) {
    return (const float *)((const char *)sp + off);
}

static sd_status set_enum(sd_spec_params *sp, const spec_param *p, const char *name, const char *v, sd_error *err) {
    if (p->off == F(method)) {
        int i = name_index(METHOD_NAMES, N_METHODS, v);
        if (i < 0) return bad_value(err, p, name, v, NULL);
        sp->method = (sd_spec_method)i;
    } else if (p->off == F(verify)) {
        int i = name_index(VERIFY_NAMES, 2, v);
        if (i < 0) return bad_value(err, p, name, v, NULL);
        sp->verify = i;
    } else {
        int i = name_index(CTRL_NAMES, N_CTRLS, v);
        if (i < 0) return bad_value(err, p, name, v, NULL);
        sp->ctrl = (sd_ctrl_kind)i;
    }
    return SD_OK;
}

static sd_status set_list(sd_spec_params *sp, const spec_param *p, const char *name, const char *v, sd_error *err) {
    const sd_spec_param_info *in = &p->info;
    const bool integer = in->type == SD_PARAM_INT_LIST;
    double vals[MAX_LIST];
    int n = 0;
    if (!(p->empty_word && !strcmp(v, p->empty_word))) {
        const char *q = v;
        for (;;) {
            char item[64];
            size_t len = strcspn(q, "+,");
            if (len == 0 || len >= sizeof item) return bad_value(err, p, name, v, len ? "an element is too long" : NULL);
            if (n == in->max_count) return bad_value(err, p, name, v, "too many elements");
            memcpy(item, q, len);
            item[len] = 0;
            if (!parse_number(item, integer, &vals[n]) || !in_range(in, vals[n])) {
                char why[128];
                snprintf(why, sizeof why, "element '%s' is out of range or not a number", item);
                return bad_value(err, p, name, v, why);
            }
            n++;
            if (!q[len]) break;
            q += len + 1;
        }
    }
    for (int i = 0; i < in->max_count; i++) {
        if (integer) int_field(sp, p->off)[i] = i < n ? (int)vals[i] : 0;
        else float_field(sp, p->off)[i] = i < n ? (float)vals[i] : 0.0f;
    }
    if (p->count_off != NO_COUNT) *int_field(sp, (size_t)p->count_off) = n;
    return SD_OK;
}

/* The index of the len bytes at s among the '|'-separated choices, or -1. */
static int choice_index(const char *choices, const char *s, size_t len) {
    int i = 0;
    for (const char *c = choices; *c; i++) {
        size_t cl = strcspn(c, "|");
        if (cl == len && !strncmp(c, s, len)) return i;
        c += cl + (c[cl] == '|');
    }
    return -1;
}

/* A set of names: each one's bit (its index among the choices); the empty word = the empty set (0). */
static sd_status set_names(sd_spec_params *sp, const spec_param *p, const char *name, const char *v, sd_error *err) {
    unsigned mask = 0;
    if (strcmp(v, p->empty_word)) {
        for (const char *q = v;;) {
            size_t len = strcspn(q, "+,");
            int i = choice_index(p->info.choices, q, len);
            if (i < 0) {
                char why[96];
                snprintf(why, sizeof why, "'%.*s' is not one of them", (int)(len < 40 ? len : 40), q);
                return bad_value(err, p, name, v, why);
            }
            mask |= 1u << i;
            if (!q[len]) break;
            q += len + 1;
        }
    }
    *(unsigned *)((char *)sp + p->off) = mask;
    return SD_OK;
}

static sd_status set_param(sd_spec_params *sp, const spec_param *p, const char *name, const char *v, sd_error *err) {
    const sd_spec_param_info *in = &p->info;
    if (in->type == SD_PARAM_ENUM) return set_enum(sp, p, name, v, err);
    if (in->type == SD_PARAM_NAME_LIST) return set_names(sp, p, name, v, err);
    if (in->type == SD_PARAM_INT_LIST || in->type == SD_PARAM_FLOAT_LIST) return set_list(sp, p, name, v, err);
    double x;
    if (!parse_number(v, in->type == SD_PARAM_INT, &x)) return bad_value(err, p, name, v, "not a number");
    if (!in_range(in, x)) return bad_value(err, p, name, v, "out of range");
    if (in->type == SD_PARAM_INT) *int_field(sp, p->off) = (int)x;
    else *float_field(sp, p->off) = (float)x;
    return SD_OK;
}

sd_status sd_spec_set(sd_spec_params *sp, const char *key, const char *value, sd_error *err) {
    if (!sp || !key) return err_set(err, SD_ERR_ARG, "sd_spec_set: NULL argument");
    const spec_param *p = find(key);
    if (!p) return err_set(err, SD_ERR_ARG, "unknown speculative parameter '%s'", key);
    if (!value) return err_set(err, SD_ERR_ARG, "%s needs a value", key);
    sd_spec_params tmp = *sp;
    sd_status st = set_param(&tmp, p, key, value, err);
    if (st == SD_OK) *sp = tmp;
    return st;
}

/* The keys of a method, for messages: "gamma, gamma_max, ...". */
static void method_keys(sd_spec_method m, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 1; i < N_PARAMS && n < cap; i++)
        if (PARAMS[i].info.methods & SD_MASK(m))
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", PARAMS[i].info.key);
    if (!buf[0]) snprintf(buf, cap, "none");
}

static sd_status parse_kv(sd_spec_params *sp, char *kv, const char *text, sd_error *err) {
    char *eq = strchr(kv, '=');
    if (!eq) return err_set(err, SD_ERR_ARG, "'%s' in '%s' is not key=value", kv, text);
    *eq = 0;
    const spec_param *p = kv[0] == '-' ? NULL : find(kv);
    char keys[300];
    method_keys(sp->method, keys, sizeof keys);
    if (!p || p->off == F(method))
        return err_set(err, SD_ERR_ARG, "unknown key '%s' in '%s' (keys of %s: %s)", kv, text,
                       sd_spec_method_name(sp->method), keys);
    if (!(p->info.methods & SD_MASK(sp->method)))
        return err_set(err, SD_ERR_ARG, "key '%s' does not apply to method %s (its keys: %s)", kv,
                       sd_spec_method_name(sp->method), keys);
    return set_param(sp, p, kv, eq + 1, err);
}

sd_status sd_spec_parse(sd_spec_params *sp, const char *text, sd_error *err) {
    if (!sp || !text) return err_set(err, SD_ERR_ARG, "sd_spec_parse: NULL argument");
    char buf[1024];
    if (strlen(text) >= sizeof buf) return err_set(err, SD_ERR_ARG, "method text of %zu bytes is too long", strlen(text));
    memcpy(buf, text, strlen(text) + 1);
    sd_spec_params tmp = *sp;
    char *save = NULL, *name = strtok_r(buf, ":", &save);
    sd_status st = sd_spec_method_from_name(name ? name : "", &tmp.method, err);
    for (char *kv = strtok_r(NULL, ":", &save); st == SD_OK && kv; kv = strtok_r(NULL, ":", &save))
        st = parse_kv(&tmp, kv, text, err);
    if (st == SD_OK) *sp = tmp;
    return st;
}

/* ------------------------------------------------------------------ validation */
static int list_len(const sd_spec_params *sp, const spec_param *p) {
    if (p->count_off != NO_COUNT) return *int_cfield(sp, (size_t)p->count_off);
    int n = 0;
    while (n < p->info.max_count && (p->info.type == SD_PARAM_INT_LIST ? int_cfield(sp, p->off)[n] != 0
                                                                        : float_cfield(sp, p->off)[n] != 0))
        n++;
    return n;
}

static sd_status check_list(const sd_spec_params *sp, const spec_param *p, sd_error *err) {
    const sd_spec_param_info *in = &p->info;
    int n = list_len(sp, p);
    if (n < (p->empty_word ? 0 : 1) || n > in->max_count)
        return err_set(err, SD_ERR_ARG, "%s has %d elements; expected %d to %d", in->key, n, p->empty_word ? 0 : 1,
                       in->max_count);
    for (int i = 0; i < n; i++) {
        double v = in->type == SD_PARAM_INT_LIST ? int_cfield(sp, p->off)[i] : float_cfield(sp, p->off)[i];
        if (!in_range(in, v)) {
            char r[64];
            range_text(in, r, sizeof r);
            return err_set(err, SD_ERR_ARG, "%s: element %d is %g; expected values in %s", in->key, i, v, r);
        }
    }
    return SD_OK;
}

static sd_status check_param(const sd_spec_params *sp, const spec_param *p, sd_error *err) {
    const sd_spec_param_info *in = &p->info;
    char v[48];
    switch (in->type) {
    case SD_PARAM_ENUM: {
        int x = p->off == F(method) ? (int)sp->method : p->off == F(verify) ? sp->verify : (int)sp->ctrl;
        int n = p->off == F(method) ? N_METHODS : p->off == F(verify) ? 2 : N_CTRLS;
        if (x >= 0 && x < n) return SD_OK;
        snprintf(v, sizeof v, "%d", x);
        return bad_value(err, p, in->key, v, NULL);
    }
    case SD_PARAM_NAME_LIST: {
        unsigned x = *(const unsigned *)((const char *)sp + p->off);
        if (x < (1u << in->max_count)) return SD_OK;
        snprintf(v, sizeof v, "0x%x", x);
        return bad_value(err, p, in->key, v, "unknown names in the set");
    }
    case SD_PARAM_INT: {
        int x = *int_cfield(sp, p->off);
        if (in_range(in, x)) return SD_OK;
        snprintf(v, sizeof v, "%d", x);
        return bad_value(err, p, in->key, v, "out of range");
    }
    case SD_PARAM_FLOAT: {
        float x = *float_cfield(sp, p->off);
        if (isfinite(x) && in_range(in, x)) return SD_OK;
        snprintf(v, sizeof v, "%g", x);
        return bad_value(err, p, in->key, v, "out of range");
    }
    default: return check_list(sp, p, err);
    }
}

static sd_status check_tree(const sd_spec_params *sp, sd_error *err) {
    if (sp->tree_nodes == 0) return SD_OK;
    if (sp->method != SD_SPEC_DRAFT && sp->method != SD_SPEC_SWIFT)
        return err_set(err, SD_ERR_ARG, "tree_nodes=%d: token trees need --spec draft or swift, not %s",
                       sp->tree_nodes, sd_spec_method_name(sp->method));
    if (sp->tree_nodes < 0 && sp->method != SD_SPEC_SWIFT)
        return err_set(err, SD_ERR_ARG, "tree_nodes=%d: the automatic node budget is SWIFT's (--spec swift); give the "
                       "draft model's trees a number of nodes", sp->tree_nodes);
    int n_topk = list_len(sp, find("tree_topk"));
    if (n_topk != sp->n_tree_conf + 1)
        return err_set(err, SD_ERR_ARG, "tree_topk has %d values but tree_conf has %d bounds: give %d children counts",
                       n_topk, sp->n_tree_conf, sp->n_tree_conf + 1);
    for (int i = 1; i < sp->n_tree_conf; i++)
        if (!(sp->tree_conf[i] > sp->tree_conf[i - 1]))
            return err_set(err, SD_ERR_ARG, "tree_conf bounds must ascend (%g then %g)", sp->tree_conf[i - 1],
                           sp->tree_conf[i]);
    return SD_OK;
}

sd_status registry_check_values(const sd_spec_params *sp, sd_error *err) {
    for (int i = 0; i < N_PARAMS; i++) {
        sd_status st = check_param(sp, &PARAMS[i], err);
        if (st) return st;
    }
    if (sp->ctrl == SD_CTRL_SPECDECPP && (SD_MASK(sp->method) & (SD_MASK_CHAIN | MM(SWIFT))) &&
        (sp->method == SD_SPEC_NGRAM || sp->tree_nodes != 0))
        return err_set(err, SD_ERR_ARG, "ctrl=specdecpp needs a chain drafter with hidden states (draft, early-exit or "
                       "swift), not %s", sp->tree_nodes != 0 ? "a token tree" : sd_spec_method_name(sp->method));
    if (sp->method == SD_SPEC_SWIFT && sp->ctrl != SD_CTRL_FIXED && sp->ctrl != SD_CTRL_SPECDECPP)
        return err_set(err, SD_ERR_ARG, "ctrl=%s does not apply to swift: it drafts until its own confidence rule "
                       "(p_stop) stops it, or with ctrl=specdecpp until the acceptance head does", sd_ctrl_name(sp->ctrl));
    if (sp->verify == SD_VERIFY_SV && !(SD_MASK(sp->method) & SD_MASK_SV))
        return err_set(err, SD_ERR_ARG, "verify=sv: Speculative Verification needs a drafter of chains (draft, ngram, "
                       "early-exit, del, swift), not %s", sd_spec_method_name(sp->method));
    if (sp->verify == SD_VERIFY_SV && sp->tree_nodes != 0)
        return err_set(err, SD_ERR_ARG, "verify=sv verifies chains: it does not take token trees (tree_nodes=%d)",
                       sp->tree_nodes);
    if (sp->sv_record_cb && sp->tree_nodes != 0) /* a tree's nodes are not positions of one chain */
        return err_set(err, SD_ERR_ARG, "SV's profile records the drafts of chains: it does not take token trees "
                       "(tree_nodes=%d)", sp->tree_nodes);
    if (sp->ngram_min > sp->ngram_max)
        return err_set(err, SD_ERR_ARG, "ngram_min=%d is larger than ngram_max=%d (n-gram sizes need min <= max)",
                       sp->ngram_min, sp->ngram_max);
    return check_tree(sp, err);
}

static sd_status check_layers(const sd_model *target, const sd_spec_params *sp, sd_error *err) {
    const int L = target->hp.n_layer;
    const char *name = sd_spec_method_name(sp->method);
    if (L < 2) return err_set(err, SD_ERR_ARG, "%s needs a model with at least 2 layers (this one has %d)", name, L);
    if ((sp->method == SD_SPEC_EARLY_EXIT || sp->method == SD_SPEC_DEL) && sp->exit_layer >= L)
        return err_set(err, SD_ERR_ARG,
                       "exit=%d: the exit layer must be in [1, %d] for this %d-layer model: the draft runs layers "
                       "[0, E) (0: L/2)", sp->exit_layer, L - 1, L);
    if (sp->method == SD_SPEC_SPECBOUND && sp->sb_depth >= L)
        return err_set(err, SD_ERR_ARG, "depth=%d: the SpecBound depth bound must be in [1, %d] for this %d-layer model "
                       "(0: 3L/4)", sp->sb_depth, L - 1, L);
    for (int i = 0; sp->method == SD_SPEC_DEL && i < sp->del_n_layers; i++)
        if (sp->del_layers[i] >= L)
            return err_set(err, SD_ERR_ARG, "layers: DEL candidate depth %d is out of range 1..%d for this %d-layer model",
                           sp->del_layers[i], L - 1, L);
    return SD_OK;
}

/* SWIFT: interior layers to skip, and a shared optimiser state made for this model */
static sd_status check_swift(const sd_model *target, const sd_spec_params *sp, sd_error *err) {
    const int L = target->hp.n_layer;
    if (L < 3) return err_set(err, SD_ERR_ARG, "swift needs a model with at least 3 layers (this one has %d)", L);
    if (sp->swift_state && swift_opt_n_layer(sp->swift_state) != L)
        return err_set(err, SD_ERR_ARG, "the SWIFT skip-set state is for a %d-layer model, this one has %d layers",
                       swift_opt_n_layer(sp->swift_state), L);
    return SD_OK;
}

/* SpecDec++: the head must read the states of this drafter (the draft model's last layer, or the target's exit). */
static sd_status check_accept_head(const sd_model *target, const sd_model *draft, const sd_spec_params *sp,
                                   sd_error *err) {
    if (sp->ctrl != SD_CTRL_SPECDECPP ||
        (sp->method != SD_SPEC_DRAFT && sp->method != SD_SPEC_EARLY_EXIT && sp->method != SD_SPEC_SWIFT))
        return SD_OK;
    if (!sp->accept_head)
        return err_set(err, SD_ERR_ARG, "ctrl=specdecpp needs an acceptance head (--accept-head FILE, made by "
                       "`specdec train accept-head`)");
    sd_status st;
    if (sp->method == SD_SPEC_DRAFT) {
        if (!draft) return SD_OK; /* the method's own check names the missing draft model */
        st = sd_accept_head_check(sp->accept_head, draft, draft->hp.n_layer, err);
    } else if (sp->method == SD_SPEC_SWIFT) { /* the target with a skip set of the ratio's size */
        st = sd_accept_head_check_swift(sp->accept_head, target,
                                        swift_opt_size_for(target->hp.n_layer, sp->swift_skip_ratio), err);
    } else {
        int E = sp->exit_layer ? sp->exit_layer : target->hp.n_layer / 2;
        st = sd_accept_head_check(sp->accept_head, target, E, err);
    }
    if (st) err_prefix(err, "--accept-head: ");
    return st;
}

/* SV: the profile is this target's; the companion has the target's vocabulary and at least E + 1 layers. */
static sd_status check_sv(const sd_model *target, const sd_spec_params *sp, sd_error *err) {
    sd_status st;
    if (sp->sv_profile && (st = sd_sv_profile_check(sp->sv_profile, target, err))) return st;
    if (!sp->companion_ctx) return SD_OK;
    const sd_model *c = sd_ctx_model(sp->companion_ctx);
    if (c->hp.n_vocab != target->hp.n_vocab)
        return err_set(err, SD_ERR_ARG, "the SV companion's vocabulary has %d tokens, the target's %d (it needs the "
                       "target's)", c->hp.n_vocab, target->hp.n_vocab);
    if ((st = sd_vocab_compatible(target, c, err))) {
        err_prefix(err, "SV companion: ");
        return st;
    }
    if (sp->companion_exit >= c->hp.n_layer)
        return err_set(err, SD_ERR_ARG, "companion_exit=%d: the companion's exit must be in [1, %d] for its %d-layer "
                       "model (0: all layers)", sp->companion_exit, c->hp.n_layer - 1, c->hp.n_layer);
    return SD_OK;
}

unsigned registry_auto_pool(const sd_model *target, const sd_model *draft, const sd_spec_params *sp) {
    if (sp->auto_candidates) return sp->auto_candidates;
    if (!draft && sp->draft_ctx) draft = sd_ctx_model(sp->draft_ctx);
    unsigned pool = SD_MASK(SD_SPEC_NONE) | SD_MASK(SD_SPEC_NGRAM);
    if (draft) pool |= SD_MASK(SD_SPEC_DRAFT);
    if (!target || target->hp.n_layer >= 2) pool |= SD_MASK(SD_SPEC_EARLY_EXIT);
    if (!target || target->hp.n_layer >= 3) pool |= SD_MASK(SD_SPEC_SWIFT);
    return pool;
}

/* auto: every candidate it is told to use has what it needs (the depths inside the model, a draft model) */
static sd_status check_auto(const sd_model *target, const sd_model *draft, const sd_spec_params *sp, sd_error *err) {
    const int L = target->hp.n_layer;
    const unsigned pool = registry_auto_pool(target, draft, sp);
    if ((pool & SD_MASK(SD_SPEC_DRAFT)) && !draft)
        return err_set(err, SD_ERR_ARG, "candidates: auto's candidate 'draft' needs a draft model (--draft-model FILE)");
    if (pool & (SD_MASK(SD_SPEC_DEL) | SD_MASK(SD_SPEC_SPECBOUND)))
        return err_set(err, SD_ERR_ARG, "candidates: auto chooses among none, draft, ngram, early-exit and swift (del and "
                       "specbound are not candidates)");
    if (pool & SD_MASK(SD_SPEC_SWIFT)) {
        sd_status st = check_swift(target, sp, err);
        if (st) return err_prefix(err, "candidates: auto's candidate: "), st;
    }
    if ((pool & SD_MASK(SD_SPEC_EARLY_EXIT)) && L < 2)
        return err_set(err, SD_ERR_ARG, "candidates: auto's candidate 'early-exit' needs a model with at least 2 layers "
                       "(this one has %d)", L);
    for (int i = 0; i < sp->auto_n_exits; i++)
        if (sp->auto_exits[i] >= L)
            return err_set(err, SD_ERR_ARG, "exits: auto's exit depth %d is out of range 1..%d for this %d-layer model",
                           sp->auto_exits[i], L - 1, L);
    return draft && (pool & SD_MASK(SD_SPEC_DRAFT)) ? sd_vocab_compatible(target, draft, err) : SD_OK;
}

sd_status registry_check_models(const sd_model *target, const sd_model *draft, const sd_spec_params *sp,
                                sd_error *err) {
    sd_status sv = check_sv(target, sp, err);
    if (sv) return sv;
    if (sp->exit_heads && sp->exit_heads->n_embd != target->hp.n_embd)
        return err_set(err, SD_ERR_ARG, "exit heads are for another model (n_embd %d, the target's is %d)",
                       sp->exit_heads->n_embd, target->hp.n_embd);
    if (!draft && sp->draft_ctx) draft = sd_ctx_model(sp->draft_ctx);
    sd_status st = check_accept_head(target, draft, sp, err);
    if (st) return st;
    if (sp->method == SD_SPEC_AUTO) return check_auto(target, draft, sp, err);
    if (SD_MASK(sp->method) & SD_MASK_SELF) return check_layers(target, sp, err);
    if (sp->method == SD_SPEC_SWIFT) return check_swift(target, sp, err);
    if (sp->method != SD_SPEC_DRAFT) return SD_OK;
    if (!draft) return err_set(err, SD_ERR_ARG, "speculative method 'draft' needs a draft model");
    return sd_vocab_compatible(target, draft, err);
}

sd_status sd_spec_check(const sd_model *target, const sd_model *draft, const sd_spec_params *sp, sd_error *err) {
    if (!sp) return err_set(err, SD_ERR_ARG, "sd_spec_check: NULL params");
    sd_status st = registry_check_values(sp, err);
    if (st || !target) return st;
    return registry_check_models(target, draft, sp, err);
}

static sd_status block_fits(sd_ctx *target, const char *what, int n, sd_error *err) {
    int nb = sd_ctx_n_batch(target);
    if (n + 1 <= nb) return SD_OK;
    return err_set(err, SD_ERR_ARG, "%s needs a verification block of %d but the context's n_batch is %d", what, n + 1,
                   nb);
}

sd_status sd_spec_check_ctx(sd_ctx *target, const sd_spec_params *sp, sd_error *err) {
    if (!target || !sp) return err_set(err, SD_ERR_ARG, "sd_spec_check_ctx: NULL argument");
    sd_status st = sd_spec_check(sd_ctx_model(target), NULL, sp, err);
    if (st) return st;
    char what[64];
    /* gamma sizes the blocks of the methods a length controller drives (not plain decoding, DEL or SpecBound) */
    const bool uses_gamma = sp->method == SD_SPEC_DRAFT || sp->method == SD_SPEC_NGRAM || sp->method == SD_SPEC_EARLY_EXIT;
    snprintf(what, sizeof what, "gamma=%d", sp->gamma);
    if (uses_gamma && (st = block_fits(target, what, sp->gamma, err))) return st;
    if (sp->method == SD_SPEC_SPECBOUND) {
        snprintf(what, sizeof what, "SpecBound width=%d", sp->sb_width);
        if ((st = block_fits(target, what, sp->sb_width, err))) return st;
    }
    if (sp->method == SD_SPEC_SWIFT) {
        snprintf(what, sizeof what, "SWIFT window=%d", sp->swift_window);
        if ((st = block_fits(target, what, sp->swift_window - 1, err))) return st;
    }
    if (sp->tree_nodes > 0) {
        snprintf(what, sizeof what, "tree_nodes=%d", sp->tree_nodes);
        if ((st = block_fits(target, what, sp->tree_nodes, err))) return st;
    }
    if (sp->tree_nodes < 0 && !sp->sv_latency) /* SWIFT's automatic budget */
        return err_set(err, SD_ERR_ARG, "tree_nodes=%d (automatic) needs the target's latency table "
                       "(sd_spec_params.sv_latency; the CLI measures it at start-up, or reads --sv-latency FILE)",
                       sp->tree_nodes);
    if ((sp->method == SD_SPEC_DRAFT || sp->method == SD_SPEC_AUTO) && sp->draft_ctx && sd_ctx_n_batch(sp->draft_ctx) < 1)
        return err_set(err, SD_ERR_ARG, "draft context has no batch");
    /* SV */
    if (sp->verify == SD_VERIFY_SV && !sp->sv_profile)
        return err_set(err, SD_ERR_ARG, "verify=sv needs an SV profile for this target (--sv-profile FILE, made by "
                       "`specdec profile sv`)");
    if (sp->verify == SD_VERIFY_SV && !sp->companion_ctx)
        return err_set(err, SD_ERR_ARG, "verify=sv needs a companion (--companion FILE or --companion-exit E)");
    if (sp->companion_ctx) {
        const int need = method_max_drafts(sp) + 1;
        if (sd_ctx_n_batch(sp->companion_ctx) < need)
            return err_set(err, SD_ERR_ARG, "the SV companion's context takes blocks of %d but a round needs %d",
                           sd_ctx_n_batch(sp->companion_ctx), need);
        if (sd_ctx_n_ctx(sp->companion_ctx) < sd_ctx_n_ctx(target))
            return err_set(err, SD_ERR_ARG, "the SV companion's context (%d positions) is shorter than the target's (%d)",
                           sd_ctx_n_ctx(sp->companion_ctx), sd_ctx_n_ctx(target));
    }
    return SD_OK;
}
