/* specdec bench batch: aggregate decode tokens/s of P sequences at once through the continuous-batching scheduler,
 * for plain decoding and each speculative method, at each P. */
#define _POSIX_C_SOURCE 200809L
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
#include "svg_plot.h"

enum { MAX_M = 16, MAX_P = 16 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec bench batch -m MODEL [--methods LIST] [--parallel LIST] [options]\n\n"
            "Runs P sequences at once (greedy, every sequence generating -n tokens) and prints the aggregate decode rate\n"
            "(tokens/s over the steps after every prompt is prefilled), for plain decoding and each method at each P.\n\n"
            "  --methods LIST      comma-separated NAME[:key=value...] (as bench spec; keys from the registry, see\n"
            "                      specdec generate --help); default: plain. 'plain' always runs first.\n"
            "  --parallel LIST     sequence counts (default 1,2,4,8,16; each 1..%d)\n"
            "  --prompts FILE      Spec-Bench JSONL: sequence i gets question i's first turn (default: built-in texts)\n"
            "  --reps N            repeat every measurement N times, report the best (default 1)\n"
            "  --token-budget N    positions per step over all sequences (default: -b)\n"
            "  --plot FILE.svg     also draw the aggregate decode rate (goodput) by P and method (e.g. SD vs SV)\n",
            MAX_P * 16);
    run_opts_help(f);
}

static const char *BUILTIN[] = {
    "Once upon a time, there was a little girl named Lily.", "The quick brown fox jumps over the lazy dog. The",
    "Write a short story about a robot who learns to paint.", "In 1492, Columbus sailed across the ocean and",
    "Explain how a bicycle works, step by step.", "The little dog ran to the park and saw a big red ball.",
    "Here is a list of ten fruits: apple, banana,", "She opened the door and found"};

typedef struct meas {
    double rate, tau;
    long tokens;
    /* SV: verified drafted tokens per round, acceptance of the verified, fairness (verified per round of each
     * sequence: the mean and the five lowest) */
    double verified, acc_verified, fair_mean, fair_low[5];
    int n_low;
    sd_spec_stats autos; /* auto: its candidates' rounds over the sequences (run_auto_add) */
} meas;

/* One measurement: P sessions with method sp, greedy, n tokens each. */
static bool measure(sd_ctx *ctx, const sd_spec_params *sp, int P, int n, int budget, int32_t **prompts,
                    const int *n_prompt, int n_prompts, meas *m) {
    sd_error err = {0};
    sd_sched_params scp = sd_sched_default_params();
    scp.token_budget = budget;
    sd_sched *sc = NULL;
    sd_session *ss[256] = {0};
    bool ok = sd_sched_new(ctx, &scp, &sc, &err) == SD_OK;
    for (int i = 0; ok && i < P; i++) {
        sd_session_params p = sd_session_default_params();
        p.seq = i;
        p.sampling.temp = 0;
        p.spec = *sp;
        p.n_predict = n;
        p.ignore_eos = true;
        int k = i % n_prompts;
        ok = sd_session_new(ctx, &p, &ss[i], &err) == SD_OK &&
             sd_session_set_prompt(ss[i], prompts[k], n_prompt[k], &err) == SD_OK && sd_sched_add(sc, ss[i], &err) == SD_OK;
    }
    double t1 = 0;
    long g1 = 0;
    bool prefilled = false;
    while (ok && sd_sched_n_live(sc) > 0) {
        ok = sd_sched_step(sc, &err) == SD_OK;
        if (!prefilled) {
            int gen = 0, nt, left = 0;
            for (int i = 0; i < P; i++) {
                sd_session_tokens(ss[i], &nt);
                gen += nt;
                sd_spec_stats st;
                sd_session_stats(ss[i], &st);
                left += st.n_rounds == 0 && !sd_session_done(ss[i]);
            }
            if (!left) { /* every sequence has finished its prompt and run a round */
                prefilled = true;
                t1 = cmd_now();
                g1 = gen;
            }
        }
    }
    double t2 = cmd_now();
    long gen = 0, rounds = 0, verified = 0, accepted = 0;
    double per[256] = {0};
    memset(m, 0, sizeof *m);
    for (int i = 0; i < P; i++) {
        if (!ss[i]) continue;
        sd_spec_stats st;
        sd_session_stats(ss[i], &st);
        gen += st.n_gen;
        rounds += st.n_rounds;
        verified += st.n_verified, accepted += st.n_accepted;
        per[i] = st.n_rounds ? (double)st.n_verified / st.n_rounds : 0;
        run_auto_add(&m->autos, &st);
        m->fair_mean += per[i] / P;
        if (ok && sd_session_status(ss[i], &err) != SD_OK) ok = false;
        sd_session_free(ss[i]);
    }
    sd_sched_free(sc);
    if (!ok) {
        fprintf(stderr, "error: %s\n", err.msg);
        return false;
    }
    m->tokens = gen - g1;
    m->rate = t2 > t1 ? (gen - g1) / (t2 - t1) : 0;
    m->tau = rounds ? (double)gen / rounds : 0;
    m->verified = rounds ? (double)verified / rounds : 0;
    m->acc_verified = verified ? (double)accepted / verified : 0;
    for (int j = 0; j < 5 && j < P; j++) { /* the five lowest */
        int lo = j;
        for (int i = j + 1; i < P; i++) lo = per[i] < per[lo] ? i : lo;
        double t = per[j];
        per[j] = per[lo], per[lo] = t;
        m->fair_low[m->n_low++] = per[j];
    }
    return true;
}

int cmd_bench_batch(int argc, char **argv) {
    run_opts o;
    run_opts_init(&o);
    o.n_predict = 64;
    const char *methods = "plain", *par = "1,2,4,8,16", *prompts_path = NULL, *plot = NULL;
    int reps = 1, budget = 0;
    static const char *const own[] = {"--methods", "--parallel", "--prompts", "--reps", "--token-budget", "--plot", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        run_arg r = run_opts_arg(&o, argc, argv, &i, own, "bench batch", usage, &v);
        if (r == RUN_ARG_SHARED) continue;
        if (r != RUN_ARG_OWN) return r == RUN_ARG_HELP ? 0 : 2;
        if (!strcmp(a, "--methods")) methods = v;
        else if (!strcmp(a, "--parallel")) par = v;
        else if (!strcmp(a, "--prompts")) prompts_path = v;
        else if (!strcmp(a, "--plot")) plot = v;
        else if (!strcmp(a, "--reps") && !cli_int(a, v, 1, 100, &reps)) return 2;
        else if (!strcmp(a, "--token-budget") && !cli_int(a, v, 1, 1 << 20, &budget)) return 2;
    }
    if (o.n_predict < 1) {
        fprintf(stderr, "error: bench batch needs -n >= 1\n");
        return 2;
    }
    if (!out_check(plot, "--plot")) return 1;
    /* parse everything before loading anything */
    int Ps[MAX_P], n_p = 0, max_p = 0;
    if (!cli_int_list("--parallel", par, 1, 256, MAX_P, Ps, &n_p)) return 2;
    for (int pi = 0; pi < n_p; pi++) max_p = Ps[pi] > max_p ? Ps[pi] : max_p;
    sd_spec_params ms[MAX_M];
    char labels[MAX_M][96];
    int n_m = 0;
    bool need_draft = false;
    char buf[1024];
    snprintf(buf, sizeof buf, "plain,%s", methods);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n_m > 0 && !strcmp(tok, "plain")) continue;
        if (n_m == MAX_M) {
            fprintf(stderr, "error: at most %d methods\n", MAX_M - 1);
            return 2;
        }
        sd_spec_params sp = o.spec;
        sd_error e = {0};
        if (strcmp(tok, "plain") && sd_spec_parse(&sp, tok, &e) != SD_OK) {
            fprintf(stderr, "error: --methods entry '%s': %s\n", tok, e.msg);
            return 2;
        }
        if (!strcmp(tok, "plain")) sp.method = SD_SPEC_NONE;
        need_draft |= sp.method == SD_SPEC_DRAFT;
        ms[n_m] = sp;
        snprintf(labels[n_m++], sizeof labels[0], "%s", tok);
    }
    if (need_draft && !o.draft_path) {
        fprintf(stderr, "error: a 'draft' method needs --draft-model FILE\n");
        return 2;
    }
    /* contexts: run_env_open validates the first draft-model method (or plain) against the models; --draft-model
     * is loaded whatever that is (auto takes it as a candidate) */
    for (int m = 0; m < n_m; m++)
        if (ms[m].method == SD_SPEC_DRAFT) {
            o.spec = ms[m];
            break;
        }
    if (!need_draft) o.spec = ms[0];
    o.draft_any_method = true;
    jl_question *qs = NULL;
    int n_q = 0, rc = 1;
    run_env env;
    memset(&env, 0, sizeof env);
    int32_t *prompts[64] = {0};
    int n_prompt[64] = {0}, n_prompts = 0;
    if (prompts_path) {
        char jerr[256];
        if ((n_q = jl_load(prompts_path, &qs, jerr, sizeof jerr)) <= 0) {
            fprintf(stderr, "error: %s\n", n_q < 0 ? jerr : "the prompt set is empty");
            return 1;
        }
    }
    o.sv_lat_n = sv_latency_reach(ms, n_m); /* run_env_open may open the latency table (for o.spec): for all */
    if (!run_env_open(&o, max_p, &env)) goto done;
    if (!sv_env_for_methods(&env.sv, ms, n_m, o.sv_profile_path, o.companion_path, o.sv_latency_path, env.model, env.ctx))
        goto done;
    sd_error err = {0};
    for (int m = 0; m < n_m; m++) { /* every method against the models and contexts, before any measurement */
        if (ms[m].method == SD_SPEC_DRAFT || ms[m].method == SD_SPEC_AUTO) ms[m].draft_ctx = env.dctx; /* auto: a candidate */
        ms[m].exit_heads = env.heads;
        run_env_pick_accept_head(&env, &ms[m]); /* SpecDec++ */
        if (sd_spec_check(env.model, env.dmodel, &ms[m], &err) != SD_OK || sd_spec_check_ctx(env.ctx, &ms[m], &err) != SD_OK) {
            fprintf(stderr, "error: method '%s': %s\n", labels[m], err.msg);
            goto done;
        }
    }
    const tpl_kind tpl = chat_detect(env.model);
    const int n_ctx = sd_ctx_n_ctx(env.ctx);
    n_prompts = prompts_path ? (n_q < 64 ? n_q : 64) : (int)(sizeof BUILTIN / sizeof BUILTIN[0]);
    for (int i = 0; i < n_prompts; i++) {
        const char *user = prompts_path ? (qs[i].n_turns ? qs[i].turns[0] : "") : BUILTIN[i];
        char *txt = chat_turn_text(prompts_path ? tpl : TPL_PLAIN, user, true);
        prompts[i] = malloc((size_t)n_ctx * sizeof(int32_t));
        if (!txt || !prompts[i] ||
            sd_tokenize(env.model, txt, strlen(txt), sd_model_add_bos(env.model), true, prompts[i], n_ctx, &n_prompt[i],
                        &err) != SD_OK ||
            n_prompt[i] < 1 || n_prompt[i] + o.n_predict > n_ctx) {
            fprintf(stderr, "error: prompt %d does not fit the context (%d) with -n %d%s%s\n", i, n_ctx, o.n_predict,
                    err.msg[0] ? ": " : "", err.msg);
            free(txt);
            goto done;
        }
        free(txt);
    }
    fprintf(stderr, "bench batch: %s (%s), %d methods, P = %s, %d tokens per sequence, n_batch %d, %d threads\n",
            o.model_path, env.info.weight_type, n_m, par, o.n_predict, sd_ctx_n_batch(env.ctx), sd_ctx_n_threads(env.ctx));
    meas res[MAX_M][MAX_P];
    bool untimed = false; /* some measurement had no decode steps after the first round to time */
    for (int pi = 0; pi < n_p; pi++)
        for (int m = 0; m < n_m; m++) {
            meas best = {0};
            for (int r = 0; r < reps; r++) {
                meas x;
                if (!measure(env.ctx, &ms[m], Ps[pi], o.n_predict, budget, prompts, n_prompt, n_prompts, &x)) goto done;
                if (r == 0 || x.rate > best.rate) best = x;
            }
            res[m][pi] = best;
            if (best.tokens > 0)
                fprintf(stderr, "  %-28s P=%-3d %8.1f tok/s  tau %.2f\n", labels[m], Ps[pi], best.rate, best.tau);
            else
                fprintf(stderr, "  %-28s P=%-3d      n/a tok/s  tau %.2f (every sequence ended in its first round)\n",
                        labels[m], Ps[pi], best.tau);
            untimed |= best.tokens <= 0;
            if (best.autos.n_auto_cands > 0) { /* what auto ran: rounds (mean gamma) per candidate */
                fprintf(stderr, "  %-28s        auto's rounds:", "");
                for (int c = 0; c < best.autos.n_auto_cands; c++) {
                    const sd_auto_cand_stats *a = &best.autos.auto_cands[c];
                    if (a->rounds > 0)
                        fprintf(stderr, " %s %d (gamma %.1f)", a->name, a->rounds, (double)a->gamma_sum / a->rounds);
                }
                fputc('\n', stderr);
            }
            if (ms[m].verify == SD_VERIFY_SV) {
                fprintf(stderr, "  %-28s        sv: %.2f verified per round, acceptance of the verified %.1f%%; "
                                "fairness: mean verified per round over sequences %.2f, the lowest", "", best.verified,
                        100 * best.acc_verified, best.fair_mean);
                for (int j = 0; j < best.n_low; j++) fprintf(stderr, " %.2f", best.fair_low[j]);
                fputc('\n', stderr);
            }
        }
    printf("\naggregate decode tokens/s (speedup over plain at the same P; tau = tokens per round)\n\n| method |");
    for (int pi = 0; pi < n_p; pi++) printf(" P=%d |", Ps[pi]);
    printf("\n|---|");
    for (int pi = 0; pi < n_p; pi++) printf("---|");
    printf("\n");
    for (int m = 0; m < n_m; m++) {
        printf("| %s |", labels[m]);
        for (int pi = 0; pi < n_p; pi++) {
            if (res[m][pi].tokens <= 0) printf(" n/a |");
            else if (m == 0) printf(" %.1f (%.2fx P=1) |", res[m][pi].rate, res[0][0].rate > 0 ? res[m][pi].rate / res[0][0].rate : 0.0);
            else printf(" %.1f (%.2fx, tau %.2f) |", res[m][pi].rate, res[0][pi].rate > 0 ? res[m][pi].rate / res[0][pi].rate : 0.0, res[m][pi].tau);
        }
        printf("\n");
    }
    if (untimed)
        printf("\nn/a: every sequence generated its -n %d tokens within its first round, so there were no decode steps "
               "after it to time; raise -n.\n", o.n_predict);
    if (plot) { /* the paper's figure: goodput by batch size, one bar per method (plain, SD, SV ...) */
        char groups[MAX_P][16];
        const char *gp[MAX_P], *sp[MAX_M];
        double val[MAX_P * MAX_M];
        for (int pi = 0; pi < n_p; pi++) {
            snprintf(groups[pi], sizeof groups[pi], "P=%d", Ps[pi]);
            gp[pi] = groups[pi];
            for (int m = 0; m < n_m; m++) val[pi * n_m + m] = res[m][pi].rate;
        }
        for (int m = 0; m < n_m; m++) sp[m] = labels[m];
        if (!svg_bars(plot, "--plot", "aggregate decode tokens/s (goodput) by batch size P", gp, n_p, sp, n_m, val, 0,
                      " tok/s"))
            goto done;
    }
    rc = 0;
done:
    for (int i = 0; i < 64; i++) free(prompts[i]);
    run_env_free(&env);
    jl_free(qs, n_q > 0 ? n_q : 0);
    return rc;
}
