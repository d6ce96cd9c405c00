/* specdec profile sv: Speculative Verification's profile of a target (methods.md 6) — speculative decoding without
 * SV over a prompt set, recording (S, A, accepted?) for every drafted token whose acceptance was decided; then the
 * equal-count bins, the table beta(S, A), the entropy of acceptance and its reduction given (S, A), written as JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli_args.h"
#include "cmds.h"
#include "jsonl.h"
#include "out_file.h"
#include "run_opts.h"
#include "specdec.h"
#include "sv_opts.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec profile sv -m TARGET (--draft-model D | --spec early-exit --exit-layer E ...)\n"
            "                          (--companion C | --companion-exit E) --prompts FILE.jsonl --out PROFILE.json\n"
            "                          [-n N] [--s-bins 10..30] [--a-bins 10..20] [options]\n"
            "Runs speculative decoding without SV over the prompts (the first turn of each; greedy unless --temp),\n"
            "records for every drafted token whose acceptance was decided (the accepted ones and the first rejected\n"
            "of a round) its indicators S = sum_v min(P_d(v), P_c(v)) and A = min(1, P_c(x)/P_d(x)), builds\n"
            "equal-count bins (--s-bins, default 20; --a-bins, default 10) and beta(S, A) = the mean acceptance per\n"
            "bin, prints the entropy of acceptance and its reduction given (S, A), and writes the profile (tied to\n"
            "this target) for --verify sv --sv-profile FILE.\n"
            "  --prompts FILE     Spec-Bench JSONL prompts (required)\n"
            "  --out FILE         the profile (required)\n"
            "  --limit N          the first N prompts only\n"
            "  --eval PROFILE     instead of writing a profile: score PROFILE's beta on these prompts (held out):\n"
            "                     the cross-entropy of acceptance under beta vs the entropy at the base rate\n"
            "options as `specdec generate` (model, draft, sampling, method, engine):\n");
    run_opts_help(f);
}

typedef struct recs {
    int n, cap;
    float *s, *a;
    uint8_t *acc;
    bool oom;
} recs;

static void record(float s, float a, bool accepted, void *user) {
    recs *r = user;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 4096;
        float *s2 = realloc(r->s, (size_t)cap * sizeof *s2);
        if (s2) r->s = s2;
        float *a2 = realloc(r->a, (size_t)cap * sizeof *a2);
        if (a2) r->a = a2;
        uint8_t *c2 = realloc(r->acc, (size_t)cap);
        if (c2) r->acc = c2;
        if (!s2 || !a2 || !c2) {
            r->oom = true;
            return;
        }
        r->cap = cap;
    }
    r->s[r->n] = s, r->a[r->n] = a, r->acc[r->n] = accepted, r->n++;
}

int cmd_profile(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "sv")) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "error: specdec profile needs a kind: sv (see specdec profile sv --help)\n");
        return 2;
    }
    argc--, argv++;
    run_opts o;
    run_opts_init(&o);
    o.sp.temp = 0; /* greedy unless --temp */
    const char *prompts = NULL, *out_path = NULL, *eval_path = NULL;
    int limit = 0, n_s = 20, n_a = 10;
    static const char *const own[] = {"--prompts", "--out", "--limit", "--s-bins", "--a-bins", "--eval", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        run_arg r = run_opts_arg(&o, argc, argv, &i, own, "profile sv", usage, &v);
        if (r == RUN_ARG_SHARED) continue;
        if (r != RUN_ARG_OWN) return r == RUN_ARG_HELP ? 0 : 2;
        if (!strcmp(a, "--prompts")) prompts = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--eval")) eval_path = v;
        else if (!strcmp(a, "--limit") && !cli_int(a, v, 1, 1 << 30, &limit)) return 2;
        else if (!strcmp(a, "--s-bins") && !cli_int(a, v, 10, 30, &n_s)) return 2;
        else if (!strcmp(a, "--a-bins") && !cli_int(a, v, 10, 20, &n_a)) return 2;
    }
    if (!o.model_path || !prompts || !(out_path || eval_path) || (out_path && eval_path)) {
        fprintf(stderr, "error: specdec profile sv needs -m TARGET, --prompts FILE.jsonl and one of --out PROFILE.json "
                        "or --eval PROFILE.json\n");
        return 2;
    }
    if (o.draft_path && o.spec.method == SD_SPEC_NONE) o.spec.method = SD_SPEC_DRAFT;
    if (o.spec.method == SD_SPEC_NONE) {
        fprintf(stderr, "error: profile sv needs a drafter (--draft-model FILE, or --spec early-exit ...)\n");
        return 2;
    }
    if (!o.companion_path && o.spec.companion_exit == 0) {
        fprintf(stderr, "error: profile sv needs a companion (--companion FILE or --companion-exit E)\n");
        return 2;
    }
    if (o.spec.verify == SD_VERIFY_SV || o.sv_profile_path) {
        fprintf(stderr, "error: profile sv runs speculative decoding without SV (no --verify sv / --sv-profile)\n");
        return 2;
    }
    if (out_path && !out_check(out_path, "--out")) return 1;
    char jerr[256];
    jl_question *qs = NULL;
    int n_q = jl_load(prompts, &qs, jerr, sizeof jerr);
    if (n_q < 0) {
        fprintf(stderr, "error: %s\n", jerr);
        return 1;
    }
    const int n_loaded = n_q;
    if (limit && limit < n_q) n_q = limit;
    int rc = 1;
    run_env env;
    memset(&env, 0, sizeof env);
    recs r = {0};
    int32_t *toks = NULL;
    sd_sv_profile *prof = NULL;
    if (n_q == 0) {
        fprintf(stderr, "error: %s holds no prompts\n", prompts);
        goto done;
    }
    o.spec.sv_record_cb = record; /* before the method's checks (they refuse recording token trees) */
    o.spec.sv_record_user = &r;
    if (!run_env_open(&o, 1, &env)) goto done;
    const tpl_kind tpl = chat_detect(env.model);
    const int n_ctx = sd_ctx_n_ctx(env.ctx);
    if (!(toks = malloc((size_t)n_ctx * sizeof *toks))) goto done;
    sd_error err = {0};
    sd_spec_stats tot = {0};
    for (int q = 0; q < n_q; q++) {
        char *txt = chat_turn_text(tpl, qs[q].n_turns ? qs[q].turns[0] : "", true);
        int n_tok = 0;
        sd_session_params sp = sd_session_default_params();
        sp.sampling = o.sp;
        sp.spec = o.spec;
        sp.n_predict = o.n_predict;
        sp.ignore_eos = o.ignore_eos;
        sd_session *s = NULL;
        sd_status st = txt ? sd_tokenize(env.model, txt, strlen(txt), !o.no_bos && sd_model_add_bos(env.model), true,
                                         toks, n_ctx, &n_tok, &err)
                           : SD_ERR_NOMEM;
        free(txt);
        if (!st) st = sd_session_new(env.ctx, &sp, &s, &err);
        if (!st) st = sd_session_set_prompt(s, toks, n_tok, &err);
        while (!st && !sd_session_done(s)) st = sd_session_step(s, &err);
        if (st) {
            fprintf(stderr, "error: prompt %s: %s\n", qs[q].id, err.msg);
            sd_session_free(s);
            goto done;
        }
        sd_spec_stats x;
        sd_session_stats(s, &x);
        tot.n_gen += x.n_gen, tot.n_rounds += x.n_rounds, tot.n_drafted += x.n_drafted, tot.n_accepted += x.n_accepted;
        tot.t_companion_s += x.t_companion_s;
        sd_session_free(s);
    }
    if (r.oom) {
        fprintf(stderr, "error: out of memory recording the drafted tokens\n");
        goto done;
    }
    if (eval_path) { /* held out: the profile's beta as a prediction of these tokens' acceptance */
        char msg[768];
        if (!sv_profile_read_json(eval_path, env.model, &prof, msg, sizeof msg)) {
            fprintf(stderr, "error: %s\n", msg);
            goto done;
        }
        int n_acc = 0;
        double ce = 0;
        for (int i = 0; i < r.n; i++) {
            double b = sd_sv_profile_beta(prof, r.s[i], r.a[i]);
            b = b < 1e-3 ? 1e-3 : b > 1 - 1e-3 ? 1 - 1e-3 : b; /* an empty-cell 0 or 1 is not a certainty */
            ce -= log2(r.acc[i] ? b : 1 - b);
            n_acc += r.acc[i];
        }
        if (r.n == 0) {
            fprintf(stderr, "error: no drafted token reached verification\n");
            goto done;
        }
        ce /= r.n;
        const double p = (double)n_acc / r.n, h = p <= 0 || p >= 1 ? 0 : -(p * log2(p) + (1 - p) * log2(1 - p));
        printf("eval sv: %d prompts, %d tokens generated in %d rounds (tau %.2f), %d drafted, %d accepted\n", n_q,
               tot.n_gen, tot.n_rounds, tot.n_rounds ? (double)tot.n_gen / tot.n_rounds : 0.0, tot.n_drafted,
               tot.n_accepted);
        printf("records: %d decided, %d accepted (%.1f%%); entropy at the base rate %.4f bits; cross-entropy under "
               "%s's beta %.4f bits; held-out information gain %.4f bits = %.1f%%\n",
               r.n, n_acc, 100.0 * p, h, eval_path, ce, h - ce, h > 0 ? 100.0 * (h - ce) / h : 0.0);
        rc = 0;
        goto done;
    }
    sd_sv_profile_info info;
    if (sd_sv_profile_build(env.model, r.s, r.a, r.acc, r.n, n_s, n_a, &prof, &info, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    sd_sv_profile_desc d;
    sd_sv_profile_get(prof, &d);
    printf("profile sv: %d prompts, %d tokens generated in %d rounds (tau %.2f), %d drafted, %d accepted "
           "(acceptance %.1f%%)\n",
           n_q, tot.n_gen, tot.n_rounds, tot.n_rounds ? (double)tot.n_gen / tot.n_rounds : 0.0, tot.n_drafted,
           tot.n_accepted, tot.n_drafted ? 100.0 * tot.n_accepted / tot.n_drafted : 0.0);
    printf("records: %d drafted tokens with a decided acceptance, %d accepted (%.1f%%); bins %d (S) x %d (A)\n",
           info.n_records, info.n_accepted, 100.0 * info.n_accepted / info.n_records, d.n_s, d.n_a);
    printf("entropy of acceptance %.4f bits; given (S, A) %.4f bits; information gain %.4f bits = %.1f%% reduction\n",
           info.h_accept, info.h_given, info.h_accept - info.h_given, 100.0 * info.info_gain);
    printf("companion time %.3f s\n", tot.t_companion_s);
    const char *draft = o.draft_path ? o.draft_path : sd_spec_method_name(o.spec.method);
    char comp[512];
    if (o.companion_path && o.spec.companion_exit)
        snprintf(comp, sizeof comp, "%s, first %d layers", o.companion_path, o.spec.companion_exit);
    else if (o.companion_path) snprintf(comp, sizeof comp, "%s", o.companion_path);
    else snprintf(comp, sizeof comp, "the target's first %d layers", o.spec.companion_exit);
    char dr[512];
    if (o.spec.method == SD_SPEC_EARLY_EXIT) snprintf(dr, sizeof dr, "early-exit E=%d", o.spec.exit_layer);
    else snprintf(dr, sizeof dr, "%s", draft);
    if (!sv_profile_write_json(out_path, prof, &info, o.model_path, dr, comp)) goto done;
    fprintf(stderr, "profile written to %s\n", out_path);
    rc = 0;
done:
    sd_sv_profile_free(prof);
    free(r.s), free(r.a), free(r.acc);
    free(toks);
    run_env_free(&env);
    jl_free(qs, n_loaded);
    return rc;
}
