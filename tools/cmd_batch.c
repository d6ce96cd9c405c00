/* specdec batch: the first turn of every question of a prompt set, up to P sequences in flight through the
 * continuous-batching scheduler; one JSON line per question in input order, statistics to stderr. */
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

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec batch -m MODEL --prompts FILE.jsonl [--parallel P] [options]\n\n"
            "Generates an answer to the first turn of every question (Spec-Bench JSONL: question_id, turns), with up\n"
            "to P sequences decoding at once: each step merges all sequences' verification passes into shared forward\n"
            "calls, and new sequences' prompts are prefilled in chunks between them. Every sequence's output is the\n"
            "one it would have alone (greedy; with sampling, question i uses seed S + i). Writes one line\n"
            "{\"question_id\": ..., \"output\": \"...\"} per question in input order; statistics go to stderr.\n\n"
            "batch:\n"
            "      --prompts FILE      the prompt set (required)\n"
            "      --parallel P        sequences in flight (default 4, 1..256)\n"
            "      --limit N           the first N questions only\n"
            "      --token-budget N    positions per step over all sequences (default: -b)\n"
            "      --out FILE          write the JSON lines there (default stdout)\n");
    run_opts_help(f);
    fprintf(f, "  -h, --help              this text\n");
}

typedef struct result {
    char *text;  /* the output, or NULL */
    char *error; /* why the question failed, or NULL */
    sd_spec_stats st;
} result;

static char *detok_all(const sd_model *m, const int32_t *t, int n) {
    char *s = malloc((size_t)n * 300 + 40), *w = s;
    if (!s) return NULL;
    sd_detok dt = {{0}, 0};
    for (int i = 0; i < n; i++) w += sd_detok_push(m, &dt, t[i], w);
    w += sd_detok_flush(&dt, w);
    *w = 0;
    return s;
}

static char *dup_msg(const char *m) {
    char *s = malloc(strlen(m) + 1);
    if (s) strcpy(s, m);
    return s;
}

int cmd_batch(int argc, char **argv) {
    run_opts o;
    run_opts_init(&o);
    const char *prompts = NULL, *out_path = NULL;
    int P = 4, limit = 0, budget = 0;
    static const char *const own[] = {"--prompts", "--parallel", "--limit", "--out", "--token-budget", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        run_arg r = run_opts_arg(&o, argc, argv, &i, own, "batch", usage, &v);
        if (r == RUN_ARG_SHARED) continue;
        if (r != RUN_ARG_OWN) return r == RUN_ARG_HELP ? 0 : 2;
        if (!strcmp(a, "--prompts")) prompts = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--parallel") && !cli_int(a, v, 1, 256, &P)) return 2;
        else if (!strcmp(a, "--limit") && !cli_int(a, v, 1, 1 << 30, &limit)) return 2;
        else if (!strcmp(a, "--token-budget") && !cli_int(a, v, 1, 1 << 20, &budget)) return 2;
    }
    if (!o.model_path || !prompts) {
        fprintf(stderr, "error: specdec batch needs -m MODEL and --prompts FILE.jsonl (see --help)\n");
        return 2;
    }
    char jerr[256];
    jl_question *qs = NULL;
    int n_q = jl_load(prompts, &qs, jerr, sizeof jerr);
    if (n_q < 0) {
        fprintf(stderr, "error: %s\n", jerr);
        return 1;
    }
    const int n_loaded = n_q; /* all of them are freed at the end */
    if (limit && limit < n_q) n_q = limit;
    int rc = 1;
    run_env env;
    memset(&env, 0, sizeof env);
    FILE *out = NULL;
    result *res = calloc((size_t)(n_q > 0 ? n_q : 1), sizeof *res);
    sd_session **slot = calloc((size_t)P, sizeof *slot);
    int *slot_q = calloc((size_t)P, sizeof *slot_q);
    int32_t *toks = NULL;
    sd_sched *sc = NULL;
    if (!res || !slot || !slot_q) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    if (!run_env_open(&o, P, &env)) goto done;
    if (out_path && !(out = out_open(out_path, "--out"))) goto done;
    sd_error err = {0};
    sd_sched_params scp = sd_sched_default_params();
    scp.token_budget = budget;
    if (sd_sched_new(env.ctx, &scp, &sc, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    const tpl_kind tpl = chat_detect(env.model);
    const int n_ctx = sd_ctx_n_ctx(env.ctx);
    fprintf(stderr, "batch: %d questions from %s, %d in flight, %s format, %s (seed %llu), up to %d tokens each, "
                    "context %d, method %s\n",
            n_q, prompts, P, chat_name(tpl), o.sp.temp > 0 ? "sampling" : "greedy", (unsigned long long)o.sp.seed,
            o.n_predict, n_ctx, sd_spec_method_name(o.spec.method));
    toks = malloc((size_t)n_ctx * sizeof *toks);
    if (!toks) goto done;
    double t0 = cmd_now();
    int next = 0, live = 0, finished = 0;
    long total = 0;
    while (next < n_q || live > 0) {
        /* fill free slots */
        for (int s = 0; s < P && next < n_q; s++) {
            if (slot[s]) continue;
            int qi = next++;
            char *txt = chat_turn_text(tpl, qs[qi].n_turns ? qs[qi].turns[0] : "", true);
            int n_tok = 0;
            sd_status st = txt ? sd_tokenize(env.model, txt, strlen(txt), !o.no_bos && sd_model_add_bos(env.model), true,
                                              toks, n_ctx, &n_tok, &err)
                               : SD_ERR_NOMEM;
            free(txt);
            sd_session_params p = sd_session_default_params();
            p.seq = s;
            p.sampling = o.sp;
            p.sampling.seed = o.sp.seed + (uint64_t)qi;
            p.spec = o.spec;
            p.ignore_eos = o.ignore_eos;
            p.n_predict = o.n_predict < 0 || n_tok + o.n_predict > n_ctx ? n_ctx - n_tok : o.n_predict;
            if (!st && n_tok >= n_ctx) {
                snprintf(err.msg, sizeof err.msg, "the prompt has %d tokens but the context holds %d (raise -c)", n_tok,
                         n_ctx);
                st = SD_ERR_ARG;
            }
            if (!st) st = sd_session_new(env.ctx, &p, &slot[s], &err);
            if (!st) st = sd_session_set_prompt(slot[s], toks, n_tok, &err);
            if (!st) st = sd_sched_add(sc, slot[s], &err);
            if (st) {
                fprintf(stderr, "error: question %s: %s\n", qs[qi].id, err.msg);
                res[qi].error = dup_msg(err.msg);
                sd_session_free(slot[s]);
                slot[s] = NULL;
                finished++;
                continue;
            }
            slot_q[s] = qi;
            live++;
        }
        if (live == 0) continue;
        if (sd_sched_step(sc, &err) != SD_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            goto done;
        }
        /* collect the finished ones */
        for (int s = 0; s < P; s++) {
            if (!slot[s] || !sd_session_done(slot[s])) continue;
            result *r = &res[slot_q[s]];
            int n = 0;
            const int32_t *t = sd_session_tokens(slot[s], &n);
            sd_session_stats(slot[s], &r->st);
            if (sd_session_status(slot[s], &err) != SD_OK) {
                fprintf(stderr, "error: question %s: %s\n", qs[slot_q[s]].id, err.msg);
                r->error = dup_msg(err.msg);
            } else {
                r->text = detok_all(env.model, t, n);
            }
            const sd_spec_stats *st = &r->st;
            total += st->n_gen;
            finished++;
            fprintf(stderr, "  [%d/%d] question %s: %d + %d tokens, %.1f tok/s%s", finished, n_q, qs[slot_q[s]].id,
                    st->n_prompt, st->n_gen, st->t_gen_s > 0 ? st->n_gen / st->t_gen_s : 0.0,
                    o.spec.method == SD_SPEC_NONE ? "\n" : "");
            if (o.spec.method != SD_SPEC_NONE)
                fprintf(stderr, ", tau %.2f, alpha %.2f\n", st->n_rounds ? (double)st->n_gen / st->n_rounds : 0.0,
                        st->n_drafted ? (double)st->n_accepted / st->n_drafted : 0.0);
            sd_session_free(slot[s]);
            slot[s] = NULL;
            live--;
        }
    }
    double secs = cmd_now() - t0;
    long rounds = 0, drafted = 0, accepted = 0, gen = 0, failed = 0;
    for (int i = 0; i < n_q; i++) {
        rounds += res[i].st.n_rounds, drafted += res[i].st.n_drafted, accepted += res[i].st.n_accepted;
        gen += res[i].st.n_gen;
        failed += res[i].error != NULL;
    }
    fprintf(stderr, "batch: %d questions (%ld failed), %ld tokens generated in %.2f s: %.1f tok/s aggregate", n_q,
            failed, total, secs, secs > 0 ? total / secs : 0.0);
    if (o.spec.method != SD_SPEC_NONE)
        fprintf(stderr, ", tau %.2f, alpha %.2f", rounds ? (double)gen / rounds : 0.0,
                drafted ? (double)accepted / drafted : 0.0);
    fputc('\n', stderr);
    sd_spec_stats autos = {0}; /* auto: the candidates over every question */
    for (int i = 0; i < n_q; i++) run_auto_add(&autos, &res[i].st);
    run_print_auto(stderr, &autos);
    if (o.spec.verify == SD_VERIFY_SV) { /* SV's fairness: verified drafted tokens per round of each sequence */
        long verified = 0;
        double comp = 0, *per = malloc((size_t)n_q * sizeof *per);
        for (int i = 0; i < n_q; i++) {
            verified += res[i].st.n_verified, comp += res[i].st.t_companion_s;
            if (per) per[i] = res[i].st.n_rounds ? (double)res[i].st.n_verified / res[i].st.n_rounds : 0.0;
        }
        fprintf(stderr, "sv: verified %ld of %ld drafted tokens (%.2f per round), acceptance of the verified %.1f%%, "
                        "companion %.3f s; fairness, verified per round of each sequence, the lowest:",
                verified, drafted, rounds ? (double)verified / rounds : 0.0, verified ? 100.0 * accepted / verified : 0.0,
                comp);
        if (per) {
            double mean = 0;
            for (int i = 0; i < n_q; i++) mean += per[i] / n_q;
            for (int j = 0; j < 5 && j < n_q; j++) { /* the five lowest, by selection */
                int lo = j;
                for (int i = j + 1; i < n_q; i++) lo = per[i] < per[lo] ? i : lo;
                double t = per[j];
                per[j] = per[lo], per[lo] = t;
                fprintf(stderr, " %.2f", per[j]);
            }
            fprintf(stderr, " (mean over sequences %.2f)", mean);
            free(per);
        }
        fputc('\n', stderr);
    }
    FILE *f = out ? out : stdout;
    for (int i = 0; i < n_q; i++) {
        fputs("{\"question_id\": ", f);
        const char *id = qs[i].id;
        bool numeric = id[0] != 0 && strspn(id, "0123456789") == strlen(id);
        if (numeric) fputs(id, f);
        else out_json_str(f, id);
        if (res[i].error) {
            fputs(", \"error\": ", f);
            out_json_str(f, res[i].error);
        } else {
            fputs(", \"output\": ", f);
            out_json_str(f, res[i].text ? res[i].text : "");
        }
        fputs("}\n", f);
    }
    rc = failed ? 1 : 0;
    if (out && !out_close(out, out_path)) rc = 1;
    out = NULL;
done:
    if (out) fclose(out);
    for (int s = 0; slot && s < P; s++) sd_session_free(slot[s]);
    for (int i = 0; res && i < n_q; i++) {
        free(res[i].text);
        free(res[i].error);
    }
    sd_sched_free(sc);
    free(toks);
    free(res);
    free(slot);
    free(slot_q);
    run_env_free(&env);
    jl_free(qs, n_loaded);
    return rc;
}
