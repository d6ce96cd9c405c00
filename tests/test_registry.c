/* The method registry: defaults, set / parse round trips, range errors naming the key, enum names, and the
 * model-dependent checks that run before any context exists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "testlib.h"

/* Field-by-field equality of the parameters the registry sets (not memcmp: padding bytes are unspecified). */
static bool same_params(const sd_spec_params *a, const sd_spec_params *b) {
    bool eq = a->method == b->method && a->ctrl == b->ctrl && a->gamma == b->gamma && a->gamma_max == b->gamma_max &&
              a->p_min == b->p_min && a->dv_target == b->dv_target && a->dv_eps == b->dv_eps &&
              a->dv_theta0 == b->dv_theta0 && a->ngram_max == b->ngram_max && a->ngram_min == b->ngram_min &&
              a->exit_layer == b->exit_layer && a->del_omega == b->del_omega && a->del_dmax == b->del_dmax &&
              a->del_init_tokens == b->del_init_tokens && a->del_n_layers == b->del_n_layers &&
              a->del_every == b->del_every && a->sb_tau == b->sb_tau && a->sb_alpha == b->sb_alpha &&
              a->sb_depth == b->sb_depth && a->sb_width == b->sb_width && a->tree_nodes == b->tree_nodes &&
              a->n_tree_conf == b->n_tree_conf && a->exit_heads == b->exit_heads && a->draft_ctx == b->draft_ctx;
    /* SpecDec++ */
    eq = eq && a->stop_threshold == b->stop_threshold && a->accept_head == b->accept_head;
    eq = eq && a->verify == b->verify && a->companion_exit == b->companion_exit; /* SV */
    eq = eq && !memcmp(a->del_layers, b->del_layers, sizeof a->del_layers) &&
         !memcmp(a->tree_topk, b->tree_topk, sizeof a->tree_topk) &&
         !memcmp(a->tree_conf, b->tree_conf, sizeof a->tree_conf);
    /* SWIFT */
    eq = eq && a->swift_skip_ratio == b->swift_skip_ratio && a->swift_window == b->swift_window &&
         a->swift_opt_steps == b->swift_opt_steps && a->swift_patience == b->swift_patience &&
         a->swift_bayes_interval == b->swift_bayes_interval && a->swift_p_stop == b->swift_p_stop &&
         a->swift_max_draft == b->swift_max_draft && a->swift_stop_score == b->swift_stop_score &&
         a->swift_state == b->swift_state;
    /* auto */
    eq = eq && a->auto_candidates == b->auto_candidates && a->auto_n_exits == b->auto_n_exits &&
         !memcmp(a->auto_exits, b->auto_exits, sizeof a->auto_exits) && a->auto_hysteresis == b->auto_hysteresis &&
         a->auto_decay == b->auto_decay && a->auto_probe == b->auto_probe;
    return eq;
}

/* Every field moved away from its default. */
static sd_spec_params perturbed(void) {
    sd_spec_params p = sd_spec_default_params();
    p.method = SD_SPEC_SPECBOUND, p.ctrl = SD_CTRL_DV, p.gamma = 77, p.gamma_max = 78, p.p_min = 0.125f;
    p.dv_target = 0.25f, p.dv_eps = 0.375f, p.dv_theta0 = 0.625f, p.ngram_max = 40, p.ngram_min = 30;
    p.exit_layer = 99, p.del_omega = 0.5f, p.del_dmax = 55, p.del_init_tokens = 66, p.del_every = 3;
    p.del_n_layers = 2, p.del_layers[0] = 7, p.del_layers[1] = 9;
    p.sb_tau = 0.0625f, p.sb_alpha = 7, p.sb_depth = 17, p.sb_width = 19, p.tree_nodes = 33;
    for (int i = 0; i < 8; i++) p.tree_topk[i] = 60 - i;
    for (int i = 0; i < 7; i++) p.tree_conf[i] = 0.01f * (float)(i + 1);
    p.n_tree_conf = 7;
    /* SWIFT */
    p.swift_skip_ratio = 0.25f, p.swift_window = 11, p.swift_opt_steps = 12, p.swift_patience = 13;
    p.swift_bayes_interval = 14, p.swift_p_stop = 0.375f, p.swift_max_draft = 15, p.swift_stop_score = 0.5f;
    p.stop_threshold = 0.875f; /* SpecDec++ */
    p.verify = SD_VERIFY_SV, p.companion_exit = 5; /* SV */
    p.auto_candidates = 5, p.auto_n_exits = 2, p.auto_exits[0] = 3, p.auto_exits[1] = 1; /* auto */
    p.auto_hysteresis = 0.5f, p.auto_decay = 0.25f, p.auto_probe = 9;
    return p;
}

/* Every entry's default text, set on params that differ from the defaults, gives the default value back. */
static void defaults_match(void) {
    const sd_spec_params def = sd_spec_default_params();
    for (int i = 0; i < sd_spec_n_params(); i++) {
        const sd_spec_param_info *in = sd_spec_param_at(i);
        CHECK(in && in->key && in->cli_flag && in->def && in->help && in->methods, "entry %d is incomplete", i);
        if (!in) continue;
        CHECK(!strncmp(in->cli_flag, "--", 2), "%s: flag %s", in->key, in->cli_flag);
        CHECK(sd_spec_param_find(in->key) == in && sd_spec_param_find(in->cli_flag) == in, "find %s", in->key);
        sd_spec_params sp = perturbed(), want = perturbed();
        CHECK(!same_params(&sp, &def), "perturbed() left a field at its default");
        sd_error err = {0};
        CHECK(sd_spec_set(&sp, in->key, in->def, &err) == SD_OK, "%s=%s: %s", in->key, in->def, err.msg);
        /* copy the one field from the defaults: the rest must be untouched, this one must equal the default */
        const char *k = in->key;
        if (!strcmp(k, "method")) want.method = def.method;
        else if (!strcmp(k, "ctrl")) want.ctrl = def.ctrl;
        else if (!strcmp(k, "gamma")) want.gamma = def.gamma;
        else if (!strcmp(k, "gamma_max")) want.gamma_max = def.gamma_max;
        else if (!strcmp(k, "p_min")) want.p_min = def.p_min;
        else if (!strcmp(k, "dv_target")) want.dv_target = def.dv_target;
        else if (!strcmp(k, "dv_eps")) want.dv_eps = def.dv_eps;
        else if (!strcmp(k, "dv_theta0")) want.dv_theta0 = def.dv_theta0;
        else if (!strcmp(k, "ngram_max")) want.ngram_max = def.ngram_max;
        else if (!strcmp(k, "ngram_min")) want.ngram_min = def.ngram_min;
        else if (!strcmp(k, "exit")) want.exit_layer = def.exit_layer;
        else if (!strcmp(k, "omega")) want.del_omega = def.del_omega;
        else if (!strcmp(k, "dmax")) want.del_dmax = def.del_dmax;
        else if (!strcmp(k, "init_tokens")) want.del_init_tokens = def.del_init_tokens;
        else if (!strcmp(k, "layers")) {
            memcpy(want.del_layers, def.del_layers, sizeof want.del_layers);
            want.del_n_layers = def.del_n_layers;
        } else if (!strcmp(k, "every")) want.del_every = def.del_every;
        else if (!strcmp(k, "tau")) want.sb_tau = def.sb_tau;
        else if (!strcmp(k, "alpha")) want.sb_alpha = def.sb_alpha;
        else if (!strcmp(k, "depth")) want.sb_depth = def.sb_depth;
        else if (!strcmp(k, "width")) want.sb_width = def.sb_width;
        else if (!strcmp(k, "tree_nodes")) want.tree_nodes = def.tree_nodes;
        else if (!strcmp(k, "tree_topk")) memcpy(want.tree_topk, def.tree_topk, sizeof want.tree_topk);
        else if (!strcmp(k, "tree_conf")) {
            memcpy(want.tree_conf, def.tree_conf, sizeof want.tree_conf);
            want.n_tree_conf = def.n_tree_conf;
        } else if (!strcmp(k, "skip_ratio")) want.swift_skip_ratio = def.swift_skip_ratio; /* SWIFT */
        else if (!strcmp(k, "window")) want.swift_window = def.swift_window;
        else if (!strcmp(k, "opt_steps")) want.swift_opt_steps = def.swift_opt_steps;
        else if (!strcmp(k, "patience")) want.swift_patience = def.swift_patience;
        else if (!strcmp(k, "bayes_interval")) want.swift_bayes_interval = def.swift_bayes_interval;
        else if (!strcmp(k, "p_stop")) want.swift_p_stop = def.swift_p_stop;
        else if (!strcmp(k, "max_draft")) want.swift_max_draft = def.swift_max_draft;
        else if (!strcmp(k, "stop_score")) want.swift_stop_score = def.swift_stop_score;
        else if (!strcmp(k, "stop_threshold")) want.stop_threshold = def.stop_threshold; /* SpecDec++ */
        else if (!strcmp(k, "verify")) want.verify = def.verify; /* SV */
        else if (!strcmp(k, "companion_exit")) want.companion_exit = def.companion_exit;
        else if (!strcmp(k, "candidates")) want.auto_candidates = def.auto_candidates; /* auto */
        else if (!strcmp(k, "exits")) {
            memcpy(want.auto_exits, def.auto_exits, sizeof want.auto_exits);
            want.auto_n_exits = def.auto_n_exits;
        } else if (!strcmp(k, "hysteresis")) want.auto_hysteresis = def.auto_hysteresis;
        else if (!strcmp(k, "decay")) want.auto_decay = def.auto_decay;
        else if (!strcmp(k, "probe")) want.auto_probe = def.auto_probe;
        else CHECK(0, "registry key %s is not known to this test (add it)", k);
        CHECK(same_params(&sp, &want), "%s: default text '%s' does not give sd_spec_default_params()'s value",
              k, in->def);
    }
    /* and every field the registry covers, from defaults text alone, equals the defaults */
    sd_spec_params sp = perturbed();
    sd_error err;
    for (int i = 0; i < sd_spec_n_params(); i++) sd_spec_set(&sp, sd_spec_param_at(i)->key, sd_spec_param_at(i)->def, &err);
    CHECK(same_params(&sp, &def), "defaults as text differ from sd_spec_default_params()");
    CHECK(sd_spec_check(NULL, NULL, &def, &err) == SD_OK, "the defaults fail the check: %s", err.msg);
    CHECK(sd_spec_param_at(-1) == NULL && sd_spec_param_at(sd_spec_n_params()) == NULL, "param_at outside the table");
    CHECK(sd_spec_param_find("bogus") == NULL && sd_spec_param_find("--bogus") == NULL, "find bogus");
}

static void enum_names(void) {
    sd_error err;
    for (int m = SD_SPEC_NONE; m <= SD_SPEC_AUTO; m++) {
        sd_spec_method got = (sd_spec_method)-1;
        const char *name = sd_spec_method_name((sd_spec_method)m);
        CHECK(sd_spec_method_from_name(name, &got, &err) == SD_OK && got == (sd_spec_method)m, "method %d '%s'", m, name);
        sd_spec_params sp = sd_spec_default_params();
        CHECK(sd_spec_set(&sp, "method", name, &err) == SD_OK && sp.method == (sd_spec_method)m, "method=%s", name);
    }
    for (int c = SD_CTRL_FIXED; c <= SD_CTRL_SPECDECPP; c++) {
        sd_ctrl_kind got = (sd_ctrl_kind)-1;
        const char *name = sd_ctrl_name((sd_ctrl_kind)c);
        CHECK(sd_ctrl_from_name(name, &got, &err) == SD_OK && got == (sd_ctrl_kind)c, "ctrl %d '%s'", c, name);
        sd_spec_params sp = sd_spec_default_params();
        CHECK(sd_spec_set(&sp, "ctrl", name, &err) == SD_OK && sp.ctrl == (sd_ctrl_kind)c, "ctrl=%s", name);
    }
    sd_spec_method m = SD_SPEC_DEL;
    CHECK(sd_spec_method_from_name("magic", &m, &err) == SD_ERR_ARG && m == SD_SPEC_DEL && strstr(err.msg, "magic"),
          "unknown method: %s", err.msg);
    CHECK(!strcmp(sd_spec_method_name((sd_spec_method)99), "?"), "name of a bad method");
}

static void set_and_parse(void) {
    sd_error err;
    sd_spec_params sp = sd_spec_default_params();
    CHECK(sd_spec_set(&sp, "gamma", "7", &err) == SD_OK && sp.gamma == 7, "gamma=7");
    CHECK(sd_spec_set(&sp, "--gamma-max", "9", &err) == SD_OK && sp.gamma_max == 9, "--gamma-max 9 (by flag)");
    CHECK(sd_spec_set(&sp, "p_min", "0.25", &err) == SD_OK && sp.p_min == 0.25f, "p_min");
    CHECK(sd_spec_set(&sp, "layers", "1,3+4", &err) == SD_OK && sp.del_n_layers == 3 && sp.del_layers[2] == 4 &&
              sp.del_layers[3] == 0, "layers=1,3+4");
    CHECK(sd_spec_set(&sp, "layers", "all", &err) == SD_OK && sp.del_n_layers == 0, "layers=all");
    CHECK(sd_spec_set(&sp, "tree_topk", "4+2", &err) == SD_OK && sp.tree_topk[0] == 4 && sp.tree_topk[1] == 2 &&
              sp.tree_topk[2] == 0, "tree_topk=4+2");
    CHECK(sd_spec_set(&sp, "tree_conf", "0.7", &err) == SD_OK && sp.n_tree_conf == 1 && sp.tree_conf[0] == 0.7f,
          "tree_conf=0.7");
    /* out of range / malformed: rejected, params unchanged, the message names the key and the value */
    struct { const char *key, *value, *want; } bad[] = {
        {"gamma", "0", "[1, 256]"},       {"gamma", "1000000", "[1, 256]"}, {"gamma", "5x", "integer"},
        {"gamma", "", "integer"},         {"p_min", "1.5", "[0, 1]"},       {"tau", "0", "(0, 1]"},
        {"omega", "nan", "number"},       {"ctrl", "fast", "fixed|conf"},   {"method", "magic", "specbound"},
        {"layers", "1+0", "[1, 1024]"},   {"layers", "", "integers"},       {"tree_topk", "all", "integers"},
        {"tree_conf", "0.5+1.5", "(0, 1]"}, {"tree_nodes", "-2", "[-1, 256]"}, {"--exit-layer", "-2", "[0, 1024]"},
        {"dv_eps", "0.7", "[0, 0.5]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sd_spec_params before = sp, t = sp;
        sd_status st = sd_spec_set(&t, bad[i].key, bad[i].value, &err);
        CHECK(st == SD_ERR_ARG && same_params(&t, &before), "%s=%s accepted", bad[i].key, bad[i].value);
        CHECK(strstr(err.msg, bad[i].key) && strstr(err.msg, bad[i].value) && strstr(err.msg, bad[i].want),
              "%s=%s: message '%s' should name the key, the value and '%s'", bad[i].key, bad[i].value, err.msg,
              bad[i].want);
    }
    CHECK(sd_spec_set(&sp, "bogus", "1", &err) == SD_ERR_ARG && strstr(err.msg, "bogus"), "unknown key: %s", err.msg);
    /* parse: name then keys; each list spelled with '+' */
    sd_spec_params p = sd_spec_default_params();
    CHECK(sd_spec_parse(&p, "del:layers=1+2+3:every=2:dmax=6:omega=0.9", &err) == SD_OK && p.method == SD_SPEC_DEL &&
              p.del_n_layers == 3 && p.del_layers[2] == 3 && p.del_every == 2 && p.del_dmax == 6 && p.del_omega == 0.9f,
          "parse del: %s", err.msg);
    p = sd_spec_default_params();
    CHECK(sd_spec_parse(&p, "draft:ctrl=dv:gamma_max=8:tree_nodes=24:tree_topk=8+4+2+1", &err) == SD_OK &&
              p.method == SD_SPEC_DRAFT && p.ctrl == SD_CTRL_DV && p.gamma_max == 8 && p.tree_nodes == 24 &&
              p.tree_topk[0] == 8,
          "parse draft: %s", err.msg);
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_OK, "draft tree params: %s", err.msg);
    /* round trip: every parameter's default through parse for a method it applies to */
    for (int i = 1; i < sd_spec_n_params(); i++) {
        const sd_spec_param_info *in = sd_spec_param_at(i);
        int m = 0;
        while (!(in->methods & (1u << m))) m++;
        char text[256];
        snprintf(text, sizeof text, "%s:%s=%s", sd_spec_method_name((sd_spec_method)m), in->key, in->def);
        sd_spec_params q = sd_spec_default_params(), want = sd_spec_default_params();
        want.method = (sd_spec_method)m;
        CHECK(sd_spec_parse(&q, text, &err) == SD_OK && same_params(&q, &want), "parse '%s': %s", text, err.msg);
    }
    struct { const char *text, *want; } badp[] = {
        {"early-exit:exit=4:bogus=1", "bogus"}, {"draft:tau=0.5", "tau"},        {"magic:gamma=3", "magic"},
        {"ngram:gamma", "key=value"},          {"specbound:tau=2", "tau=2"},   {"ngram:method=draft", "method"},
        {"del:layers=1+x", "layers=1+x"},      {"", "method"},
    };
    for (size_t i = 0; i < sizeof badp / sizeof badp[0]; i++) {
        sd_spec_params q = sd_spec_default_params(), before = q;
        CHECK(sd_spec_parse(&q, badp[i].text, &err) == SD_ERR_ARG && same_params(&q, &before) &&
                  strstr(err.msg, badp[i].want),
              "parse '%s': %s", badp[i].text, err.msg);
    }
    /* cross-parameter rules */
    p = sd_spec_default_params();
    sd_spec_parse(&p, "ngram:tree_nodes=0", &err);
    p.tree_nodes = 8;
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "--spec draft"), "tree with ngram: %s",
          err.msg);
    p = sd_spec_default_params();
    sd_spec_parse(&p, "draft:tree_nodes=8:tree_topk=4+2", &err);
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "tree_conf"), "topk/conf lengths: %s",
          err.msg);
    p = sd_spec_default_params();
    sd_spec_parse(&p, "draft:tree_nodes=8:tree_conf=0.9+0.5:tree_topk=4+2+1", &err);
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "ascend"), "conf order: %s", err.msg);
    p = sd_spec_default_params();
    p.ngram_min = 4;
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "ngram_min"), "ngram min > max: %s",
          err.msg);
    p = sd_spec_default_params();
    p.gamma = 0;
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "gamma"), "gamma 0 in a struct: %s",
          err.msg);
    p = sd_spec_default_params();
    p.method = (sd_spec_method)42;
    CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, "method"), "method 42: %s", err.msg);
    /* SWIFT: the automatic tree budget is its own; its controllers are its p_stop rule or specdecpp (chains); SV
     * takes its chains, not its trees */
    struct { const char *text, *want; } sw[] = {
        {"draft:tree_nodes=-1", "SWIFT's"},          {"swift:ctrl=dv", "does not apply to swift"},
        {"swift:ctrl=specdecpp:tree_nodes=8", "token tree"}, {"swift:ctrl=specdecpp:tree_nodes=-1", "token tree"},
        {"swift:verify=sv:tree_nodes=8", "token trees"},
    };
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++) {
        p = sd_spec_default_params();
        CHECK(sd_spec_parse(&p, sw[i].text, &err) == SD_OK, "parse '%s': %s", sw[i].text, err.msg);
        CHECK(sd_spec_check(NULL, NULL, &p, &err) == SD_ERR_ARG && strstr(err.msg, sw[i].want), "'%s': %s", sw[i].text,
              err.msg);
    }
    const char *sw_ok[] = {"swift:tree_nodes=-1", "swift:ctrl=specdecpp:stop_threshold=0.5", "swift:verify=sv"};
    for (size_t i = 0; i < sizeof sw_ok / sizeof sw_ok[0]; i++) {
        p = sd_spec_default_params();
        CHECK(sd_spec_parse(&p, sw_ok[i], &err) == SD_OK && sd_spec_check(NULL, NULL, &p, &err) == SD_OK, "'%s': %s",
              sw_ok[i], err.msg);
    }
}

/* Model-dependent checks, before any context. stories260K has 5 layers. */
static void model_checks(void) {
    sd_error err;
    sd_model *m = NULL, *g = NULL;
    if (sd_model_load(tl_shared("models/stories260K.gguf"), NULL, &m, &err) != SD_OK) {
        CHECK(0, "load: %s", err.msg);
        return;
    }
    struct { const char *text; bool ok; const char *want; } cases[] = {
        {"early-exit:exit=4", true, NULL},  {"early-exit:exit=5", false, "exit=5"},
        {"early-exit:exit=100", false, "[1, 4]"}, {"specbound:depth=4", true, NULL},
        {"specbound:depth=5", false, "depth=5"}, {"del:layers=1+4", true, NULL},
        {"del:layers=1+5", false, "5"},      {"ngram", true, NULL},
        {"draft", false, "draft model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sd_spec_params sp = sd_spec_default_params();
        CHECK(sd_spec_parse(&sp, cases[i].text, &err) == SD_OK, "parse %s: %s", cases[i].text, err.msg);
        sd_status st = sd_spec_check(m, NULL, &sp, &err);
        CHECK(cases[i].ok ? st == SD_OK : st == SD_ERR_ARG && strstr(err.msg, cases[i].want), "check %s: %s",
              cases[i].text, st ? err.msg : "accepted");
    }
    sd_spec_params sp = sd_spec_default_params();
    sd_spec_parse(&sp, "draft", &err);
    CHECK(sd_spec_check(m, m, &sp, &err) == SD_OK, "draft = target: %s", err.msg);
    if (sd_model_load(tl_shared("models/tiny-llama-gpt2-f32.gguf"), NULL, &g, &err) == SD_OK)
        CHECK(sd_spec_check(m, g, &sp, &err) == SD_ERR_ARG, "incompatible draft accepted");
    /* and through a context: n_batch limits */
    sd_ctx *c = NULL;
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = 64, cp.n_batch = 8, cp.n_threads = 1;
    if (sd_ctx_new(m, &cp, &c, &err) == SD_OK) {
        sp = sd_spec_default_params();
        sd_spec_parse(&sp, "ngram:gamma=8", &err);
        CHECK(sd_spec_check_ctx(c, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "n_batch"), "gamma 8, n_batch 8: %s",
              err.msg);
        sd_spec_parse(&sp, "ngram:gamma=7", &err);
        CHECK(sd_spec_check_ctx(c, &sp, &err) == SD_OK, "gamma 7, n_batch 8: %s", err.msg);
        sp = sd_spec_default_params(); /* plain decoding has no verification block: gamma 5 with n_batch 1 is fine */
        sp.gamma = 16;
        sd_ctx_params cp1 = cp;
        cp1.n_batch = 1;
        sd_ctx *c1 = NULL;
        if (sd_ctx_new(m, &cp1, &c1, &err) == SD_OK)
            CHECK(sd_spec_check_ctx(c1, &sp, &err) == SD_OK, "plain decoding refused for n_batch 1: %s", err.msg);
        sd_ctx_free(c1);
        sd_ctx_free(c);
    }
    sd_model_free(g);
    sd_model_free(m);
}

int main(void) {
    defaults_match();
    enum_names();
    set_and_parse();
    model_checks();
    return tl_finish("test_registry");
}
