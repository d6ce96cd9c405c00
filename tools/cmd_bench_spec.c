/* specdec bench spec: plain decoding and speculative methods on the same prompt set (Spec-Bench JSONL), in one
 * process; per-category and overall tokens/s, speedup, tau, alpha, discard and verification rates; Markdown,
 * JSON, and an SVG plot of speedup per category per method. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "cli_args.h"
#include "cmds.h"
#include "jsonl.h"
#include "out_file.h"
#include "run_opts.h"
#include "specdec.h"
#include "sv_opts.h"
#include "svg_plot.h"

enum { MAX_METHODS = 64, MAX_CATS = 32 };

typedef struct method {
    char label[96];
    bool plain, use_heads;
    sd_spec_params sp;
    sd_swift_state *swift; /* SWIFT: its optimiser state, kept across the questions (as a server keeps it) */
    sd_auto_state *autos;  /* auto: its estimates, kept across the questions (likewise) */
} method;

typedef struct acc {
    double tokens, secs, rounds, drafted, accepted, turns, t_draft, t_verify, t_aux, layer_passes;
    double t_opt, opt_steps; /* SWIFT */
    sd_spec_stats autos;     /* auto: its candidates' rounds, summed by name */
} acc;

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec bench spec -m MODEL --prompts FILE.jsonl [options]\n\n"
            "Runs plain decoding and each method on the same prompts (greedy by default) and prints, per category and\n"
            "overall: tokens/s, speedup over plain, mean accepted length tau, acceptance rate alpha, discard rate\n"
            "(discarded drafts / generated tokens) and verification rate (target passes / generated tokens).\n\n"
            "  -m, --model FILE       target model\n"
            "  --prompts FILE         Spec-Bench JSONL (question_id, category, turns); turn 2 follows the model's\n"
            "                         answer to turn 1\n"
            "  --methods LIST         comma-separated; each NAME[:key=value...] with NAME plain | none | draft | ngram\n"
            "                         | early-exit | del | specbound | swift | auto (default: plain,ngram; plain is always\n"
            "                         run first\n"
            "                         as the baseline). Every method is checked against the model(s) before any run.\n"
            "                         swift and auto keep their state across the questions, as a server keeps it\n"
            "                         across requests (SWIFT's optimiser; auto's estimates), the warm-up included.\n"
            "                         Keys of every method: label=TEXT (the name in the tables); of early-exit, del\n"
            "                         and specbound: heads=yes (use --exit-heads). Method keys (the registry's):\n"
            );
    cli_spec_help(f, true);
    fprintf(f,
            "  --draft-model FILE     draft model for 'draft' methods; --draft-type TYPE converts it at load\n"
            "  --companion FILE       SV's companion for methods with verify=sv (or their companion_exit=E alone)\n"
            "  --sv-profile FILE      SV's profile of this target (specdec profile sv); one for every method\n"
            "  --sv-latency FILE      SV's latency table cache (default: measured at start-up)\n"
            "  --exit-heads FILE      trained exit heads, used by methods with heads=yes\n"
            "  --accept-head FILE     SpecDec++ acceptance head(s) for ctrl=specdecpp methods (repeat the option for\n"
            "                         several drafters: each method takes the first head made for its drafter)\n"
            "  -n N                   tokens per turn (default 128; cut to fit the context)\n"
            "  --limit N              use the first N questions only; --per-category N: the first N of each category\n"
            "  --temp T               sampling instead of greedy (default 0); --seed S\n"
            "  --ignore-eos           always generate n tokens per turn\n"
            "  -t N                   threads; -c N context size (default: the model's)\n"
            "  --json FILE  --md FILE --plot FILE.svg   also write the results there\n");
}

/* One --methods entry: "plain", or NAME[:key=value]... parsed by the library's registry (sd_spec_parse) after the
 * keys of this tool (label, heads) are taken out. */
static bool parse_method(const char *spec, method *m) {
    memset(m, 0, sizeof *m);
    m->sp = sd_spec_default_params();
    snprintf(m->label, sizeof m->label, "%s", spec);
    if (!strcmp(spec, "plain")) {
        m->plain = true;
        return true;
    }
    char buf[1024], rest[1024];
    size_t n = 0;
    if (strlen(spec) >= sizeof buf) {
        fprintf(stderr, "error: method '%.40s...' is too long\n", spec);
        return false;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    rest[0] = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
        if (!strncmp(t, "label=", 6)) snprintf(m->label, sizeof m->label, "%s", t + 6);
        else if (!strncmp(t, "heads=", 6)) {
            const char *v = t + 6;
            if (!strcmp(v, "1") || !strcmp(v, "yes")) m->use_heads = true;
            else if (strcmp(v, "0") && strcmp(v, "no")) {
                fprintf(stderr, "error: method '%s': heads=%s (yes or no)\n", spec, v);
                return false;
            }
        } else n += (size_t)snprintf(rest + n, sizeof rest - n, "%s%s", n ? ":" : "", t);
    }
    sd_error err;
    if (sd_spec_parse(&m->sp, rest, &err) != SD_OK) {
        char prefix[160];
        snprintf(prefix, sizeof prefix, "--methods entry '%s': ", spec);
        cli_spec_error(prefix, err.msg, false);
        return false;
    }
    return true;
}

static void add(acc *a, int tokens, double secs, int rounds, int drafted, int accepted, double t_draft, double t_verify,
                double t_aux, double layer_passes) {
    a->t_aux += t_aux;
    a->layer_passes += layer_passes;
    a->t_draft += t_draft;
    a->t_verify += t_verify;
    a->tokens += tokens;
    a->secs += secs;
    a->rounds += rounds;
    a->drafted += drafted;
    a->accepted += accepted;
    a->turns += 1;
}

/* The speedup chart (groups: the categories and "overall"; bars: the methods but plain); false after a message when
 * the file cannot be written. */
static bool write_svg(const char *path, const char cats[][64], int n_cats, const method *ms, int n_m,
                      double sp[][MAX_METHODS]) {
    static const char *group[MAX_CATS + 1], *series[MAX_METHODS];
    static double val[(MAX_CATS + 1) * MAX_METHODS];
    for (int c = 0; c <= n_cats; c++) group[c] = c < n_cats ? cats[c] : "overall";
    for (int m = 1; m < n_m; m++) series[m - 1] = ms[m].label;
    for (int c = 0; c <= n_cats; c++)
        for (int m = 1; m < n_m; m++) val[c * (n_m - 1) + m - 1] = sp[c][m];
    return svg_bars(path, "--plot", "speedup over plain decoding", group, n_cats + 1, series, n_m - 1, val, 1.0, "x");
}

int cmd_bench_spec(int argc, char **argv) {
    const char *model_path = NULL, *prompts = NULL, *methods_s = "plain,ngram", *draft_path = NULL, *draft_type = NULL;
    const char *json = NULL, *md = NULL, *plot = NULL, *heads_path = NULL;
    const char *companion_path = NULL, *sv_profile_path = NULL, *sv_latency_path = NULL; /* SV */
    sv_env sv = {0};
    sd_exit_heads *heads = NULL;
    enum { MAX_ACCEPT = 8 }; /* SpecDec++ */
    const char *accept_paths[MAX_ACCEPT];
    sd_accept_head *accept[MAX_ACCEPT] = {0};
    int n_accept = 0;
    int n_predict = 128, limit = 0, sample = 0;
    bool ignore_eos = false;
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_ctx_params cp = sd_ctx_default_params();
    static const char *const no_value[] = {"--ignore-eos", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, "bench spec", no_value, usage);
        if (tk >= 0) return tk;
        if (!v) { /* --ignore-eos */
            ignore_eos = true;
            continue;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--prompts")) prompts = v;
        else if (!strcmp(a, "--methods")) methods_s = v;
        else if (!strcmp(a, "--draft-model")) draft_path = v;
        else if (!strcmp(a, "--draft-type")) draft_type = v;
        else if (!strcmp(a, "--exit-heads")) heads_path = v;
        else if (!strcmp(a, "--accept-head")) {
            if (n_accept == MAX_ACCEPT) {
                fprintf(stderr, "error: at most %d --accept-head files\n", MAX_ACCEPT);
                return 2;
            }
            accept_paths[n_accept++] = v;
        } else if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--companion")) companion_path = v;
        else if (!strcmp(a, "--sv-profile")) sv_profile_path = v;
        else if (!strcmp(a, "--sv-latency")) sv_latency_path = v;
        else if (!strcmp(a, "--md")) md = v;
        else if (!strcmp(a, "--plot")) plot = v;
        else if (!strcmp(a, "-n")) { if (!cli_int(a, v, 1, 1 << 20, &n_predict)) return 2; }
        else if (!strcmp(a, "--limit")) { if (!cli_int(a, v, 1, 1 << 20, &limit)) return 2; }
        else if (!strcmp(a, "--per-category")) { if (!cli_int(a, v, 1, 1 << 20, &sample)) return 2; }
        else if (!strcmp(a, "--temp")) { if (!cli_float(a, v, 0, 100, &spp.temp)) return 2; }
        else if (!strcmp(a, "--seed")) {
            unsigned long long s;
            if (!cli_u64(a, v, &s)) return 2;
            spp.seed = s;
        } else if (!strcmp(a, "-t")) { if (!cli_int(a, v, 1, 512, &cp.n_threads)) return 2; }
        else if (!strcmp(a, "-c")) { if (!cli_int(a, v, 16, SD_MAX_CTX, &cp.n_ctx)) return 2; }
        else {
            fprintf(stderr, "error: unknown option '%s' (see specdec bench spec --help)\n", a);
            return 2;
        }
    }
    if (!model_path || !prompts) {
        fprintf(stderr, "error: bench spec needs -m MODEL and --prompts FILE (see --help)\n");
        return 2;
    }
    /* output paths checked before the run, not skipped after it */
    if (!out_check(json, "--json") || !out_check(md, "--md") || !out_check(plot, "--plot")) return 1;
    method ms[MAX_METHODS];
    int n_m = 1;
    parse_method("plain", &ms[0]);
    {
        char buf[8192];
        if (strlen(methods_s) >= sizeof buf) {
            fprintf(stderr, "error: --methods is too long\n");
            return 2;
        }
        snprintf(buf, sizeof buf, "%s", methods_s);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!strcmp(t, "plain")) continue;
            if (n_m == MAX_METHODS || !parse_method(t, &ms[n_m])) {
                if (n_m == MAX_METHODS) fprintf(stderr, "error: at most %d methods\n", MAX_METHODS - 1);
                return 2;
            }
            if (ms[n_m].sp.method == SD_SPEC_DRAFT && !draft_path) {
                fprintf(stderr, "error: method '%s' needs --draft-model\n", t);
                return 2;
            }
            if (ms[n_m].use_heads && !heads_path) {
                fprintf(stderr, "error: method '%s' needs --exit-heads\n", t);
                return 2;
            }
            n_m++;
        }
    }
    char err_s[512];
    jl_question *qs = NULL;
    int n_q = jl_load(prompts, &qs, err_s, sizeof err_s);
    if (n_q < 0) {
        fprintf(stderr, "error: %s\n", err_s);
        return 1;
    }
    if (n_q == 0) {
        fprintf(stderr, "error: %s holds no questions\n", prompts);
        return 1;
    }
    const int n_total = n_q;
    if (sample) { /* the first `sample` questions of every category, kept in file order */
        int kept = 0;
        for (int i = 0; i < n_q; i++) {
            int seen = 0;
            for (int j = 0; j < kept; j++) seen += !strcmp(qs[j].category, qs[i].category);
            if (seen < sample) {
                jl_question t = qs[kept];
                qs[kept] = qs[i];
                qs[i] = t;
                kept++;
            }
        }
        n_q = kept;
    }
    if (limit && limit < n_q) n_q = limit;
    int max_turns = 1;
    for (int q = 0; q < n_q; q++) max_turns = qs[q].n_turns > max_turns ? qs[q].n_turns : max_turns;
    int rc = 1;
    sd_error err;
    sd_model *model = NULL, *dmodel = NULL;
    sd_ctx *ctx = NULL, *dctx = NULL;
    sd_sampler *smp = NULL;
    int32_t *ctx_toks = NULL, *out = NULL, *answers = NULL; /* answers: plain outputs [n_q][max_turns][n_predict] */
    int *ans_len = NULL, *qcat = NULL; /* qcat: [n_q] category index */
    if (sd_model_load(model_path, NULL, &model, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    sd_model_info info;
    sd_model_get_info(model, &info);
    if (sd_ctx_new(model, &cp, &ctx, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    if (draft_path) {
        sd_model_params dp = sd_model_default_params();
        dp.convert_type = draft_type;
        sd_ctx_params dcp = cp;
        dcp.n_ctx = sd_ctx_n_ctx(ctx);
        if (sd_model_load(draft_path, &dp, &dmodel, &err) != SD_OK || sd_vocab_compatible(model, dmodel, &err) != SD_OK ||
            sd_ctx_new(dmodel, &dcp, &dctx, &err) != SD_OK) {
            fprintf(stderr, "error: draft model %s: %s\n", draft_path, err.msg);
            goto done;
        }
        for (int m = 0; m < n_m; m++) ms[m].sp.draft_ctx = dctx;
    }
    if (heads_path) {
        if (sd_exit_heads_load(model, heads_path, &heads, &err) != SD_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            goto done;
        }
        for (int m = 0; m < n_m; m++)
            if (ms[m].use_heads) ms[m].sp.exit_heads = heads;
    }
    for (int m = 1; m < n_m; m++) /* SWIFT (and auto's SWIFT): one optimiser state per method, for the whole run */
        if (sd_spec_uses(&ms[m].sp, SD_SPEC_SWIFT) && info.n_layer >= 3) {
            if (sd_swift_state_new(info.n_layer, &ms[m].sp, spp.seed, &ms[m].swift, &err) != SD_OK) {
                fprintf(stderr, "error: %s\n", err.msg);
                goto done;
            }
            ms[m].sp.swift_state = ms[m].swift;
        }
    for (int m = 1; m < n_m; m++) /* auto: one state of estimates per method, for the whole run */
        if (ms[m].sp.method == SD_SPEC_AUTO) {
            if (sd_auto_state_new(&ms[m].autos, &err) != SD_OK) {
                fprintf(stderr, "error: %s\n", err.msg);
                goto done;
            }
            ms[m].sp.auto_state = ms[m].autos;
        }
    for (int i = 0; i < n_accept; i++) /* SpecDec++: each specdecpp method takes the first head for its drafter */
        if (sd_accept_head_load(accept_paths[i], &accept[i], &err) != SD_OK) {
            fprintf(stderr, "error: --accept-head: %s\n", err.msg);
            goto done;
        }
    for (int m = 1; m < n_m; m++) cli_pick_accept_head(&ms[m].sp, model, dmodel, accept, n_accept);
    { /* SV: the companion, profile and latency table every method shares */
        sd_spec_params sps[MAX_METHODS];
        for (int m = 0; m < n_m; m++) sps[m] = ms[m].sp;
        if (!sv_env_for_methods(&sv, sps, n_m, sv_profile_path, companion_path, sv_latency_path, model, ctx)) goto done;
        for (int m = 0; m < n_m; m++) ms[m].sp = sps[m];
    }
    for (int m = 1; m < n_m; m++) { /* every method against the model(s) and the context before any run */
        if (sd_spec_check_ctx(ctx, &ms[m].sp, &err) != SD_OK) {
            char prefix[160];
            snprintf(prefix, sizeof prefix, "method '%s': ", ms[m].label);
            cli_spec_error(prefix, err.msg, false);
            goto done;
        }
    }
    const tpl_kind tpl = chat_detect(model);
    const int n_ctx = sd_ctx_n_ctx(ctx);
    fprintf(stderr, "bench spec: %s (%s), %d questions from %s, %d methods, %s, %s format, %d tokens per turn, context %d\n",
            model_path, info.weight_type, n_q, prompts, n_m, spp.temp > 0 ? "sampling" : "greedy",
            chat_name(tpl), n_predict, n_ctx);
    if (sd_sampler_new(&spp, info.n_vocab, &smp, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    char cats[MAX_CATS][64];
    int n_cats = 0;
    qcat = malloc((size_t)n_q * sizeof *qcat);
    if (!qcat) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    for (int q = 0; q < n_q; q++) {
        int c = 0;
        while (c < n_cats && strcmp(cats[c], qs[q].category)) c++;
        if (c == n_cats) {
            if (n_cats == MAX_CATS) c = MAX_CATS - 1;
            else snprintf(cats[n_cats++], 64, "%s", qs[q].category);
        }
        qcat[q] = c;
    }
    static acc A[MAX_CATS + 1][MAX_METHODS];
    memset(A, 0, sizeof A);
    ctx_toks = malloc((size_t)n_ctx * sizeof *ctx_toks);
    out = malloc((size_t)n_ctx * sizeof *out);
    answers = malloc((size_t)n_q * max_turns * n_predict * sizeof *answers);
    ans_len = calloc((size_t)n_q * max_turns, sizeof *ans_len);
    if (!ctx_toks || !out || !answers || !ans_len) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    int skipped = 0, mismatched = 0;
    double t_start = cmd_now();
    /* question by question, every method in turn (load that drifts during a run falls on all of them alike) */
    for (int q = -1; q < n_q; q++) { /* q = -1: warm-up on the first question, not recorded */
        for (int m = 0; m < n_m; m++) {
            const jl_question *Q = &qs[q < 0 ? 0 : q];
            int n_ctx_toks = 0;
            for (int t = 0; t < Q->n_turns; t++) {
                char *txt = chat_turn_text(tpl, Q->turns[t], t == 0);
                int nt = 0;
                bool bos = t == 0 && sd_model_add_bos(model);
                sd_status st = txt ? sd_tokenize(model, txt, strlen(txt), bos, true, ctx_toks + n_ctx_toks,
                                                 n_ctx - n_ctx_toks, &nt, &err)
                                   : SD_ERR_NOMEM;
                free(txt);
                if (st != SD_OK || n_ctx_toks + nt + 2 > n_ctx) { /* turn does not fit */
                    if (q >= 0 && m == 0) skipped++;
                    break;
                }
                n_ctx_toks += nt;
                int np = n_predict < n_ctx - n_ctx_toks ? n_predict : n_ctx - n_ctx_toks;
                int n_out = 0;
                double secs;
                int rounds, drafted = 0, accepted = 0;
                double t_draft = 0, t_verify, t_aux = 0, passes, t_opt = 0, opt_steps = 0;
                sd_spec_stats ss = {0};
                if (ms[m].plain) {
                    sd_gen_stats gs;
                    st = sd_generate(ctx, smp, ctx_toks, n_ctx_toks, np, ignore_eos, out, &n_out, NULL, NULL, &gs, &err);
                    secs = gs.t_gen_s;
                    t_verify = secs; /* every step is a target pass */
                    rounds = n_out;
                    passes = (double)n_out * info.n_layer;
                } else {
                    st = sd_spec_generate(ctx, smp, &ms[m].sp, ctx_toks, n_ctx_toks, np, ignore_eos, out, &n_out, NULL,
                                          NULL, &ss, &err);
                    secs = ss.t_gen_s;
                    t_draft = ss.t_draft_s;
                    t_verify = ss.t_verify_s;
                    t_aux = ss.t_aux_s;
                    passes = (double)ss.layer_passes;
                    rounds = ss.n_rounds;
                    drafted = ss.n_drafted;
                    accepted = ss.n_accepted;
                    t_opt = ss.t_opt_s;
                    opt_steps = ss.opt_steps;
                }
                if (st != SD_OK) {
                    fprintf(stderr, "\nerror: question %s, method %s: %s\n", Q->id, ms[m].label, err.msg);
                    goto done;
                }
                if (q >= 0 && spp.temp <= 0) { /* greedy: every method must reproduce plain decoding */
                    int32_t *ref = answers + ((size_t)q * max_turns + t) * n_predict;
                    int *rl = &ans_len[q * max_turns + t];
                    if (m == 0) {
                        memcpy(ref, out, (size_t)n_out * sizeof *out);
                        *rl = n_out;
                    } else if (*rl != n_out || memcmp(ref, out, (size_t)n_out * sizeof *out)) {
                        mismatched++;
                    }
                }
                if (q >= 0) {
                    A[n_cats][m].t_opt += t_opt;
                    A[n_cats][m].opt_steps += opt_steps;
                    add(&A[qcat[q]][m], n_out, secs, rounds, drafted, accepted, t_draft, t_verify, t_aux, passes);
                    run_auto_add(&A[qcat[q]][m].autos, &ss);
                    run_auto_add(&A[n_cats][m].autos, &ss);
                    add(&A[n_cats][m], n_out, secs, rounds, drafted, accepted, t_draft, t_verify, t_aux, passes);
                }
                memcpy(ctx_toks + n_ctx_toks, out, (size_t)n_out * sizeof *out);
                n_ctx_toks += n_out;
            }
            if (q >= 0) {
                double el = cmd_now() - t_start;
                fprintf(stderr, "\r[%d/%d %-18.18s] question %3d/%d  %-14.14s %7.1f tok/s  elapsed %5.0f s ", m + 1, n_m,
                        ms[m].label, q + 1, n_q, cats[qcat[q]],
                        A[n_cats][m].secs > 0 ? A[n_cats][m].tokens / A[n_cats][m].secs : 0.0, el);
            }
        }
    }
    fprintf(stderr, "\n");
    if (spp.temp <= 0)
        fprintf(stderr, "greedy outputs: %s\n",
                mismatched ? "SOME DIFFER FROM PLAIN DECODING (a bug: please report)" : "every method identical to plain decoding");
    if (skipped) fprintf(stderr, "note: %d turns did not fit the context (%d) and were skipped\n", skipped, n_ctx);
    /* tables */
    static double SP[MAX_CATS + 1][MAX_METHODS];
    FILE *mdf = NULL;
    if (md && !(mdf = out_open(md, "--md"))) goto done;
    FILE *outs[2] = {stdout, mdf};
    for (int o = 0; o < 2; o++) {
        FILE *f = outs[o];
        if (!f) continue;
        fprintf(f, "model: %s (%s), prompts: %s (%d questions), %s, %d tokens per turn, %d threads\n\n", model_path,
                info.weight_type, prompts, n_q, spp.temp > 0 ? "sampling" : "greedy", n_predict, sd_ctx_n_threads(ctx));
        fprintf(f, "| category | method | tokens | tok/s | speedup | tau | alpha | discard rate | verification rate |\n");
        fprintf(f, "|---|---|---|---|---|---|---|---|---|\n");
        for (int c = 0; c <= n_cats; c++)
            for (int m = 0; m < n_m; m++) {
                acc *a = &A[c][m], *p = &A[c][0];
                double tps = a->secs > 0 ? a->tokens / a->secs : 0, ptps = p->secs > 0 ? p->tokens / p->secs : 0;
                SP[c][m] = ptps > 0 ? tps / ptps : 0;
                fprintf(f, "| %s | %s | %.0f | %.2f | %.2fx | %.2f | ", c < n_cats ? cats[c] : "**overall**", ms[m].label,
                        a->tokens, tps, SP[c][m], a->rounds > 0 ? a->tokens / a->rounds : 0);
                if (ms[m].plain) fprintf(f, "- | - | %.3f |\n", a->tokens > 0 ? a->rounds / a->tokens : 0);
                else
                    fprintf(f, "%.3f | %.3f | %.3f |\n", a->drafted > 0 ? a->accepted / a->drafted : 0,
                            a->tokens > 0 ? (a->drafted - a->accepted) / a->tokens : 0,
                            a->tokens > 0 ? a->rounds / a->tokens : 0);
            }
    }
    for (int o = 0; o < 2; o++) {
        FILE *f = outs[o];
        if (!f) continue;
        fprintf(f, "\nwhere the time goes (overall): drafting, target passes (verification; plain: decode steps), the rest "
                   "(acceptance, sampling, cache rollback, bookkeeping; 'aux' is the part of it spent on DEL's shadow tokens);\n"
                   "eTPL = tokens per target layer run (self-speculation; a layer counted once per forward pass)\n\n"
                   "| method | ms/token | draft | verify | other | aux | ms per target pass | eTPL |\n|---|---|---|---|---|---|---|---|\n");
        for (int m = 0; m < n_m; m++) {
            acc *a = &A[n_cats][m];
            double tot = a->secs > 0 ? a->secs : 1;
            bool self = ms[m].plain || ms[m].sp.method == SD_SPEC_EARLY_EXIT || ms[m].sp.method == SD_SPEC_DEL ||
                        ms[m].sp.method == SD_SPEC_SPECBOUND;
            fprintf(f, "| %s | %.3f | %.0f%% | %.0f%% | %.0f%% | %.0f%% | %.3f | ", ms[m].label,
                    a->tokens > 0 ? 1000 * a->secs / a->tokens : 0, 100 * a->t_draft / tot, 100 * a->t_verify / tot,
                    100 * (a->secs - a->t_draft - a->t_verify) / tot, 100 * a->t_aux / tot,
                    a->rounds > 0 ? 1000 * a->t_verify / a->rounds : 0);
            if (self && a->layer_passes > 0) fprintf(f, "%.3f |\n", a->tokens / a->layer_passes);
            else fprintf(f, "- |\n");
        }
    }
    for (int o = 0; o < 2; o++) { /* SWIFT: the skip set the run ended with */
        FILE *f = outs[o];
        bool any = false;
        for (int m = 0; m < n_m; m++) any |= ms[m].swift != NULL;
        if (!f || !any) continue;
        fprintf(f, "\nSWIFT (the optimiser state carried across the questions): the final skip set (a = attention, m = MLP "
                   "of layer l), its matchness, optimisation steps (all, and those in the measured questions: the warm-up question's are not)\n"
                   "and their share of the measured generation time; matchness over time: the best matchness after each "
                   "improvement, @ the step it came at\n\n"
                   "| method | skip set | matchness | opt steps | opt share | matchness over time |\n|---|---|---|---|---|---|\n");
        for (int m = 0; m < n_m; m++) {
            if (!ms[m].swift) continue;
            char set[512];
            float mt = -1;
            int steps = 0;
            sd_swift_state_best(ms[m].swift, NULL, &mt, &steps);
            sd_swift_state_describe(ms[m].swift, set, sizeof set);
            acc *a = &A[n_cats][m];
            if (steps == 0) snprintf(set, sizeof set, "- (no step yet)"); /* the first candidate, never scored */
            char mts[16] = "-";
            if (steps > 0 && mt >= 0) snprintf(mts, sizeof mts, "%.3f", mt);
            fprintf(f, "| %s | %s | %s | %d (%.0f measured) | %.1f%% | ", ms[m].label, set, mts, steps, a->opt_steps,
                    a->secs > 0 ? 100 * a->t_opt / a->secs : 0);
            swift_print_history(f, ms[m].swift);
            fprintf(f, " |\n");
        }
    }
    for (int o = 0; o < 2; o++) { /* auto: which candidate ran, per category */
        FILE *f = outs[o];
        bool any = false;
        for (int m = 0; m < n_m; m++) any |= A[n_cats][m].autos.n_auto_cands > 0;
        if (!f || !any) continue;
        fprintf(f, "\nauto: rounds per candidate (why: the highest expected tokens/s, held by hysteresis, a probe), its mean "
                   "gamma and acceptance; accepted drafts per round and ms per round, each against what the choice "
                   "expected\n\n| category | method | candidate | rounds | best / held / probe | gamma | alpha | "
                   "accepted / round (expected) | ms / round (expected) |\n|---|---|---|---|---|---|---|---|---|\n");
        for (int c = 0; c <= n_cats; c++)
            for (int m = 0; m < n_m; m++) {
                const sd_spec_stats *au = &A[c][m].autos;
                for (int i = 0; i < au->n_auto_cands; i++) {
                    const sd_auto_cand_stats *x = &au->auto_cands[i];
                    if (!x->rounds) continue;
                    fprintf(f, "| %s | %s | %s | %d | %d / %d / %d | %.2f | %.3f | %.2f (%.2f) |",
                            c < n_cats ? cats[c] : "**overall**", ms[m].label, x->name, x->rounds, x->best, x->held,
                            x->probe, (double)x->gamma_sum / x->rounds, x->drafted ? (double)x->accepted / x->drafted : 0.0,
                            (double)x->accepted / x->rounds, x->est_accepted / x->rounds);
                    if (x->timed_rounds > 0)
                        fprintf(f, " %.1f (%.1f) |\n", 1e3 * x->meas_s / x->timed_rounds, 1e3 * x->est_s / x->timed_rounds);
                    else
                        fprintf(f, " - |\n");
                }
            }
    }
    if (mdf && !out_close(mdf, md)) goto done;
    if (json) {
        FILE *f = out_open(json, "--json");
        if (!f) goto done;
        {
            fputs("{\"model\": ", f);
            out_json_str(f, model_path);
            fputs(", \"prompts\": ", f);
            out_json_str(f, prompts);
            fprintf(f, ", \"questions\": %d, \"tokens_per_turn\": %d, \"greedy\": %s, \"results\": [", n_q, n_predict,
                    spp.temp > 0 ? "false" : "true");
            for (int c = 0; c <= n_cats; c++)
                for (int m = 0; m < n_m; m++) {
                    acc *a = &A[c][m];
                    fprintf(f, "%s\n  {\"category\": ", (c || m) ? "," : "");
                    out_json_str(f, c < n_cats ? cats[c] : "overall");
                    fputs(", \"method\": ", f);
                    out_json_str(f, ms[m].label);
                    fprintf(f,
                            ", \"tokens\": %.0f, \"seconds\": %.6f, \"tok_s\": %.4f, "
                            "\"speedup\": %.4f, \"tau\": %.4f, \"alpha\": %.4f, \"discard_rate\": %.4f, \"verification_rate\": %.4f, "
                            "\"draft_s\": %.6f, \"verify_s\": %.6f, \"aux_s\": %.6f, \"etpl\": %.5f",
                            a->tokens, a->secs,
                            a->secs > 0 ? a->tokens / a->secs : 0, SP[c][m], a->rounds > 0 ? a->tokens / a->rounds : 0,
                            a->drafted > 0 ? a->accepted / a->drafted : 0,
                            a->tokens > 0 ? (a->drafted - a->accepted) / a->tokens : 0,
                            a->tokens > 0 ? a->rounds / a->tokens : 0, a->t_draft, a->t_verify, a->t_aux,
                            a->layer_passes > 0 ? a->tokens / a->layer_passes : 0);
                    if (a->autos.n_auto_cands > 0) { /* auto: its candidates */
                        fputs(", \"auto_candidates\": [", f);
                        for (int i = 0; i < a->autos.n_auto_cands; i++) {
                            const sd_auto_cand_stats *x = &a->autos.auto_cands[i];
                            fprintf(f, "%s{\"name\": ", i ? ", " : "");
                            out_json_str(f, x->name);
                            fprintf(f, ", \"rounds\": %d, \"best\": %d, \"held\": %d, \"probe\": %d, \"gamma_sum\": %d, "
                                       "\"drafted\": %d, \"accepted\": %d, \"est_accepted\": %.4f, \"timed_rounds\": %d, "
                                       "\"est_s\": %.6f, \"meas_s\": %.6f}",
                                    x->rounds, x->best, x->held, x->probe, x->gamma_sum, x->drafted, x->accepted,
                                    x->est_accepted, x->timed_rounds, x->est_s, x->meas_s);
                        }
                        fputs("]", f);
                    }
                    fputs("}", f);
                }
            fprintf(f, "\n]}\n");
        }
        if (!out_close(f, json)) goto done;
    }
    if (plot && n_m > 1 && !write_svg(plot, (const char(*)[64])cats, n_cats, ms, n_m, SP)) goto done;
    rc = mismatched ? 3 : 0;
done:
    for (int m = 0; m < n_m; m++) sd_swift_state_free(ms[m].swift), sd_auto_state_free(ms[m].autos);
    sv_env_free(&sv);
    free(qcat);
    sd_exit_heads_free(heads);
    for (int i = 0; i < n_accept; i++) sd_accept_head_free(accept[i]);
    free(answers);
    free(ctx_toks);
    free(out);
    sd_sampler_free(smp);
    sd_ctx_free(ctx);
    sd_ctx_free(dctx);
    sd_model_free(model);
    sd_model_free(dmodel);
    free(ans_len);
    jl_free(qs, n_total);
    return rc;
}
