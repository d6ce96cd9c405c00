#define _POSIX_C_SOURCE 200809L
#include "run_opts.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"

void run_opts_init(run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->sp = sd_sampler_default_params();
    o->cp = sd_ctx_default_params();
    o->spec = sd_spec_default_params();
}

static int run_opts_take(run_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
#define IS(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
    bool flag_only = IS("--no-bos", "--no-bos") || IS("--ignore-eos", "--ignore-eos") || IS("--no-mmap", "--no-mmap") ||
                     IS("--mlock", "--mlock");
    if (flag_only) {
        if (IS("--no-bos", "--no-bos")) o->no_bos = true;
        else if (IS("--no-mmap", "--no-mmap")) o->no_mmap = true;
        else if (IS("--mlock", "--mlock")) o->mlock = true;
        else o->ignore_eos = true;
        return 1;
    }
    bool mine = IS("-m", "--model") || IS("--tokenizer", "--tokenizer") || IS("-n", "--n-predict") ||
                IS("--temp", "--temperature") || IS("--top-k", "--top-k") || IS("--top-p", "--top-p") ||
                IS("--min-p", "--min-p") || IS("--repeat-penalty", "--repeat-penalty") ||
                IS("--repeat-last-n", "--repeat-last-n") || IS("--draft-model", "--draft-model") ||
                IS("--draft-type", "--draft-type") || IS("--exit-heads", "--exit-heads") || IS("-s", "--seed") ||
                IS("--skip-set", "--skip-set") || IS("--accept-head", "--accept-head") ||
                IS("-t", "--threads") || IS("-c", "--ctx-size") || IS("-b", "--batch-size") ||
                IS("--companion", "--sv-profile") || IS("--sv-latency", "--sv-latency") || IS("--kv-type", "--kv-type") ||
                (a[0] == '-' && a[1] == '-' && sd_spec_param_find(a));
    if (!mine) return 0;
    if (!v) {
        fprintf(stderr, "error: %s needs a value (see --help)\n", a);
        return -1;
    }
    (*i)++;
    bool ok = true;
    if (IS("-m", "--model")) o->model_path = v;
    else if (IS("--tokenizer", "--tokenizer")) o->tok_path = v;
    else if (IS("--draft-model", "--draft-model")) o->draft_path = v;
    else if (IS("--draft-type", "--draft-type")) o->draft_type = v;
    else if (IS("--exit-heads", "--exit-heads")) o->heads_path = v;
    else if (IS("--skip-set", "--skip-set")) o->skip_set_path = v;
    else if (IS("--accept-head", "--accept-head")) {
        if (o->n_accept == RUN_MAX_HEADS) {
            fprintf(stderr, "error: at most %d --accept-head files\n", RUN_MAX_HEADS);
            ok = false;
        } else {
            o->accept_paths[o->n_accept++] = v;
        }
    }
    else if (IS("--companion", "--companion")) o->companion_path = v;
    else if (IS("--sv-profile", "--sv-profile")) o->sv_profile_path = v;
    else if (IS("--sv-latency", "--sv-latency")) o->sv_latency_path = v;
    else if (IS("-n", "--n-predict")) ok = cli_int(a, v, -1, 1 << 24, &o->n_predict);
    else if (IS("--temp", "--temperature")) ok = cli_float(a, v, 0, 1e6, &o->sp.temp);
    else if (IS("--top-k", "--top-k")) ok = cli_int(a, v, 0, 1 << 30, &o->sp.top_k);
    else if (IS("--top-p", "--top-p")) ok = cli_float(a, v, 1e-9, 1, &o->sp.top_p);
    else if (IS("--min-p", "--min-p")) ok = cli_float(a, v, 0, 1, &o->sp.min_p);
    else if (IS("--repeat-penalty", "--repeat-penalty")) ok = cli_float(a, v, 1e-6, 1e6, &o->sp.repeat_penalty);
    else if (IS("--repeat-last-n", "--repeat-last-n")) ok = cli_int(a, v, 0, 1 << 24, &o->sp.repeat_last_n);
    else if (IS("-t", "--threads")) ok = cli_int(a, v, 1, 512, &o->cp.n_threads);
    else if (IS("-c", "--ctx-size")) ok = cli_int(a, v, 1, SD_MAX_CTX, &o->cp.n_ctx);
    else if (IS("-b", "--batch-size")) ok = cli_int(a, v, 1, 4096, &o->cp.n_batch);
    else if (IS("--kv-type", "--kv-type")) { /* kv-type */
        if (!strcmp(v, "f32")) o->cp.kv_type = SD_KV_F32;
        else if (!strcmp(v, "f16")) o->cp.kv_type = SD_KV_F16;
        else {
            fprintf(stderr, "error: --kv-type '%s': expected f32 or f16\n", v);
            ok = false;
        }
    }
    else if (IS("-s", "--seed")) {
        unsigned long long s = 0;
        ok = cli_u64(a, v, &s);
        o->sp.seed = s;
        o->seed_set = true;
    } else {
        sd_error e = {0};
        if (sd_spec_set(&o->spec, a, v, &e) != SD_OK) {
            cli_spec_error("", e.msg, false);
            ok = false;
        }
    }
#undef IS
    return ok ? 1 : -1;
}

static const char *run_opts_own(int argc, char **argv, int *i, const char *const *names, const char *cmd) {
    const char *a = argv[*i];
    bool known = false;
    for (int j = 0; names[j] && !known; j++) known = !strcmp(a, names[j]);
    if (!known) {
        fprintf(stderr, "error: unknown option '%s' (see specdec %s --help)\n", a, cmd);
        return NULL;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value (see specdec %s --help)\n", a, cmd);
        return NULL;
    }
    return argv[++*i];
}

run_arg run_opts_arg(run_opts *o, int argc, char **argv, int *i, const char *const *own, const char *cmd,
                     void (*usage)(FILE *), const char **val) {
    const char *a = argv[*i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        usage(stdout);
        return RUN_ARG_HELP;
    }
    int t = run_opts_take(o, argc, argv, i);
    if (t != 0) return t > 0 ? RUN_ARG_SHARED : RUN_ARG_BAD;
    *val = run_opts_own(argc, argv, i, own, cmd);
    return *val ? RUN_ARG_OWN : RUN_ARG_BAD;
}

void run_opts_help(FILE *f) {
    fprintf(f,
            "model:\n"
            "  -m, --model FILE        GGUF (v2/v3) or llama2.c .bin model (required)\n"
            "      --tokenizer FILE    llama2.c tokenizer.bin (default: tok<vocab>.bin or tokenizer.bin beside the model)\n"
            "      --no-bos            do not prepend the BOS token\n"
            "      --no-mmap           read the weights into memory the process owns instead of mapping the file\n"
            "      --mlock             lock the weights in RAM (needs RLIMIT_MEMLOCK, see `ulimit -l`)\n"
            "generation:\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1 = until the context is full)\n"
            "      --ignore-eos        keep generating after an end-of-generation token\n"
            "sampling (llama.cpp order: penalty, top-k, top-p, min-p, temperature):\n"
            "      --temp T            temperature (default 0.8; 0 = greedy)\n"
            "      --top-k K           keep the K most likely tokens (default 40; 0 = off)\n"
            "      --top-p P           nucleus: smallest set with probability >= P (default 0.95; 1 = off)\n"
            "      --min-p M           drop tokens below M x the top probability (default 0.05; 0 = off)\n"
            "      --repeat-penalty R  penalise the last --repeat-last-n tokens (default 1.0 = off)\n"
            "      --repeat-last-n N   window of the penalty (default 64)\n"
            "  -s, --seed S            RNG seed (default: from the clock, printed to stderr)\n"
            "speculative decoding (lossless: greedy output == plain greedy output):\n"
            "      --draft-model FILE  the draft model for --spec draft (same tokenizer as the target)\n"
            "      --draft-type TYPE   convert the draft's weights at load: f32|f16|bf16|q8_0|q4_0|q2_k..q6_k (e.g. the target\n"
            "                          file itself as a q4_0 self-draft)\n"
            "      --exit-heads FILE   trained exit heads (specdec train exit-heads) instead of the shared LM head\n"
            "                          (early-exit, del, specbound)\n"
            "      --skip-set FILE     SWIFT's optimiser state (best skip set, scored candidates): read at the start when\n"
            "                          FILE exists, written at the end (--spec swift)\n"
            "      --accept-head FILE  SpecDec++ acceptance head (specdec train accept-head) for --ctrl specdecpp; repeat it\n"
            "                          for several drafters (each method takes the first head made for its drafter)\n"
            "      --companion FILE    Speculative Verification (--verify sv): the companion model (the target's\n"
            "                          vocabulary); or --companion-exit E alone: the target's first E layers\n"
            "      --sv-profile FILE   the SV profile of this target (specdec profile sv)\n"
            "      --sv-latency FILE   SV's latency table T(n, b): read when it is this model's and thread count's,\n"
            "                          else measured and written there (default: measured at start-up)\n"
            "  method parameters (the same keys as bench spec --methods and the library's sd_spec_set;\n"
            "  lists take ',' between values):\n");
    cli_spec_help(f, false);
    fprintf(f,
            "engine:\n"
            "  -t, --threads N         threads (default: online CPUs)\n"
            "  -c, --ctx-size N        context size (default: the model's training context)\n"
            "  -b, --batch-size N      largest block per forward pass, e.g. prefill chunks (default 64)\n"
            "      --kv-type T         KV cache numbers: f32 (default) or f16 (llama.cpp's fp16 cache and its CPU\n"
            "                          attention arithmetic: logits follow llama.cpp's; half the KV memory)\n");
}

bool run_env_open(run_opts *o, int n_seq, run_env *env) {
    memset(env, 0, sizeof *env);
    env->sv.lat_n = o->sv_lat_n;
    sd_error err = {0};
    if (!o->model_path) {
        fprintf(stderr, "error: no model given (-m FILE)\n");
        return false;
    }
    if (!o->seed_set) o->sp.seed = (unsigned long long)time(NULL);
    if (o->spec.method == SD_SPEC_DRAFT && !o->draft_path) {
        fprintf(stderr, "error: --spec draft needs --draft-model FILE\n");
        return false;
    }
    const bool draft_method = o->spec.method == SD_SPEC_DRAFT || o->spec.method == SD_SPEC_AUTO;
    if ((o->draft_path || o->draft_type) && !draft_method && !o->draft_any_method) {
        fprintf(stderr, "error: --draft-model/--draft-type need --spec draft (or auto)\n");
        return false;
    }
    if (sd_spec_check(NULL, NULL, &o->spec, &err) != SD_OK) { /* what needs no model, before loading one */
        cli_spec_error("", err.msg, true);
        return false;
    }
    sd_model_params mp = sd_model_default_params();
    mp.tokenizer_path = o->tok_path;
    mp.no_mmap = o->no_mmap;
    mp.mlock = o->mlock;
    if (sd_model_load(o->model_path, &mp, &env->model, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return false;
    }
    sd_model_info *info = &env->info;
    sd_model_get_info(env->model, info);
    fprintf(stderr, "model: %s (%s, %s weights, %d layers, dim %d, vocab %d, %.1f MiB)\n", o->model_path, info->arch,
            info->weight_type, info->n_layer, info->n_embd, info->n_vocab, (double)info->weight_bytes / (1 << 20));
    if (o->draft_path && (draft_method || o->draft_any_method)) {
        sd_model_params dp = sd_model_default_params();
        dp.convert_type = o->draft_type;
        dp.no_mmap = o->no_mmap;
        dp.mlock = o->mlock;
        if (sd_model_load(o->draft_path, &dp, &env->dmodel, &err) != SD_OK) {
            fprintf(stderr, "error: draft model: %s\n", err.msg);
            return false;
        }
        if (sd_vocab_compatible(env->model, env->dmodel, &err) != SD_OK) {
            fprintf(stderr, "error: draft model %s cannot draft for %s: %s\n", o->draft_path, o->model_path, err.msg);
            return false;
        }
        sd_model_info di;
        sd_model_get_info(env->dmodel, &di);
        fprintf(stderr, "draft: %s (%s weights%s, %d layers, dim %d, %.1f MiB)\n", o->draft_path, di.weight_type,
                o->draft_type ? ", converted at load" : "", di.n_layer, di.n_embd, (double)di.weight_bytes / (1 << 20));
    }
    if (o->heads_path) {
        if (sd_exit_heads_load(env->model, o->heads_path, &env->heads, &err) != SD_OK) {
            fprintf(stderr, "error: --exit-heads: %s\n", err.msg);
            return false;
        }
        o->spec.exit_heads = env->heads;
    }
    const bool swift = sd_spec_uses(&o->spec, SD_SPEC_SWIFT);
    if (o->skip_set_path && !swift && !o->swift_any_method) {
        fprintf(stderr, "error: --skip-set needs --spec swift (or auto with swift among its candidates)\n");
        return false;
    }
    if ((swift || o->swift_any_method) && info->n_layer >= 3) {
        FILE *f = o->skip_set_path ? fopen(o->skip_set_path, "r") : NULL;
        if (f) fclose(f);
        sd_status st = f ? sd_swift_state_load(o->skip_set_path, info->n_layer, &env->swift, &err)
                         : sd_swift_state_new(info->n_layer, &o->spec, o->sp.seed, &env->swift, &err);
        if (st != SD_OK) {
            fprintf(stderr, "error: --skip-set: %s\n", err.msg);
            return false;
        }
        if (f) fprintf(stderr, "SWIFT: optimiser state from %s\n", o->skip_set_path);
        o->spec.swift_state = env->swift;
    }
    if (o->spec.method == SD_SPEC_AUTO || o->auto_any_method) { /* auto: its estimates from prompt to prompt */
        if (sd_auto_state_new(&env->autos, &err) != SD_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            return false;
        }
        o->spec.auto_state = env->autos;
    }
    for (int i = 0; i < o->n_accept; i++) { /* SpecDec++ */
        if (sd_accept_head_load(o->accept_paths[i], &env->accept[i], &err) != SD_OK) {
            fprintf(stderr, "error: --accept-head: %s\n", err.msg);
            return false;
        }
        env->n_accept++;
    }
    run_env_pick_accept_head(env, &o->spec);
    if (sd_spec_check(env->model, env->dmodel, &o->spec, &err) != SD_OK) { /* against the models, before contexts */
        cli_spec_error("", err.msg, true);
        return false;
    }
    o->cp.n_seq = n_seq;
    if (sd_ctx_new(env->model, &o->cp, &env->ctx, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return false;
    }
    if (env->dmodel) {
        sd_ctx_params dcp = o->cp;
        dcp.n_ctx = sd_ctx_n_ctx(env->ctx);
        if (sd_ctx_new(env->dmodel, &dcp, &env->dctx, &err) != SD_OK) {
            fprintf(stderr, "error: draft context: %s\n", err.msg);
            return false;
        }
        o->spec.draft_ctx = env->dctx;
    }
    if ((o->companion_path || o->sv_profile_path || o->sv_latency_path || o->spec.companion_exit > 0 ||
         o->spec.verify == SD_VERIFY_SV || o->spec.tree_nodes < 0 || o->spec.method == SD_SPEC_AUTO) &&
        !sv_env_open(&env->sv, &o->spec, o->sv_profile_path, o->companion_path, o->sv_latency_path, env->model, env->ctx))
        return false;
    if (sd_spec_check_ctx(env->ctx, &o->spec, &err) != SD_OK) { /* the context's limits (n_batch) */
        cli_spec_error("", err.msg, true);
        return false;
    }
    return true;
}

void run_env_free(run_env *env) {
    sv_env_free(&env->sv);
    sd_ctx_free(env->dctx);
    sd_ctx_free(env->ctx);
    sd_exit_heads_free(env->heads);
    sd_swift_state_free(env->swift);
    sd_auto_state_free(env->autos);
    for (int i = 0; i < env->n_accept; i++) sd_accept_head_free(env->accept[i]);
    sd_model_free(env->dmodel);
    sd_model_free(env->model);
    memset(env, 0, sizeof *env);
}

void run_env_pick_accept_head(const run_env *env, sd_spec_params *sp) {
    cli_pick_accept_head(sp, env->model, env->dmodel, env->accept, env->n_accept);
}

bool run_env_save_swift(const run_opts *o, const run_env *env) {
    if (!o->skip_set_path || !env->swift) return true;
    sd_error err = {0};
    if (sd_swift_state_save(env->swift, o->skip_set_path, &err) != SD_OK) {
        fprintf(stderr, "error: --skip-set: %s\n", err.msg);
        return false;
    }
    return true;
}

void run_auto_add(sd_spec_stats *sum, const sd_spec_stats *st) {
    sum->t_aux_s += st->t_aux_s;
    sum->t_gen_s += st->t_gen_s;
    for (int i = 0; i < st->n_auto_cands; i++) {
        const sd_auto_cand_stats *c = &st->auto_cands[i];
        int j = 0;
        while (j < sum->n_auto_cands && strcmp(sum->auto_cands[j].name, c->name)) j++;
        if (j == SD_AUTO_MAX_CANDS) continue;
        if (j == sum->n_auto_cands) {
            sum->auto_cands[j] = (sd_auto_cand_stats){0};
            memcpy(sum->auto_cands[j].name, c->name, sizeof c->name);
            sum->n_auto_cands++;
        }
        sd_auto_cand_stats *a = &sum->auto_cands[j];
        a->rounds += c->rounds, a->best += c->best, a->held += c->held, a->probe += c->probe;
        a->gamma_sum += c->gamma_sum, a->drafted += c->drafted, a->accepted += c->accepted;
        a->accept_est = c->accept_est;
        a->est_accepted += c->est_accepted, a->est_s += c->est_s, a->meas_s += c->meas_s;
        a->timed_rounds += c->timed_rounds;
    }
}

void run_print_auto(FILE *f, const sd_spec_stats *st) {
    if (st->n_auto_cands <= 0) return;
    fprintf(f, "auto: rounds per candidate (why: best / held by hysteresis / probe; mean gamma; acceptance; estimated "
               "P(first draft accepted) at the end)\n");
    for (int i = 0; i < st->n_auto_cands; i++) {
        const sd_auto_cand_stats *c = &st->auto_cands[i];
        fprintf(f, "  %-14s %5d rounds (%d / %d / %d)", c->name, c->rounds, c->best, c->held, c->probe);
        if (c->rounds > 0 && c->drafted > 0)
            fprintf(f, ", gamma %.2f, acceptance %.1f%% (%d/%d)", (double)c->gamma_sum / c->rounds,
                    100.0 * c->accepted / c->drafted, c->accepted, c->drafted);
        if (strcmp(c->name, "none")) fprintf(f, ", estimate %.2f", c->accept_est);
        if (c->rounds > 0 && c->drafted > 0)
            fprintf(f, "; accepted per round %.2f (expected %.2f)", (double)c->accepted / c->rounds,
                    c->est_accepted / c->rounds);
        if (c->timed_rounds > 0)
            fprintf(f, "; ms per round %.1f (expected %.1f)", 1e3 * c->meas_s / c->timed_rounds,
                    1e3 * c->est_s / c->timed_rounds);
        fputc('\n', f);
    }
    fprintf(f, "auto: estimators (catch-up forwards, shadow tokens, lookups) %.3f s (%.1f%% of decode)\n", st->t_aux_s,
            st->t_gen_s > 0 ? 100.0 * st->t_aux_s / st->t_gen_s : 0.0);
}

void run_env_print_swift(FILE *f, const run_env *env, const sd_spec_stats *st) {
    if (!env->swift) return;
    char set[1024];
    float m = -1;
    int steps = 0, k = sd_swift_state_best(env->swift, NULL, &m, &steps);
    sd_swift_state_describe(env->swift, set, sizeof set);
    fprintf(f, "SWIFT: skip set %s (%d of %d sub-layers), matchness %s", set, k, 2 * (env->info.n_layer - 2),
            m < 0 ? "not scored yet" : "");
    if (m >= 0) fprintf(f, "%.3f", m);
    fprintf(f, "; %d optimisation steps (%d this run), %.3f s (%.1f%% of decode)\n", steps, st->opt_steps, st->t_opt_s,
            st->t_gen_s > 0 ? 100.0 * st->t_opt_s / st->t_gen_s : 0.0);
    fprintf(f, "SWIFT: matchness over time (best after each improvement @ step): ");
    swift_print_history(f, env->swift);
    fputc('\n', f);
    const int L2 = 2 * env->info.n_layer;
    uint8_t *hm = malloc((size_t)L2), *bm = malloc((size_t)L2);
    const sd_accept_head *head = NULL; /* SpecDec++ with a SWIFT head */
    for (int i = 0; i < env->n_accept && !head; i++)
        if (sd_accept_head_skip_set(env->accept[i], NULL) > 0) head = env->accept[i];
    if (hm && bm && head && sd_accept_head_skip_set(head, hm) > 0) {
        sd_swift_state_best(env->swift, bm, NULL, NULL);
        int d = 0;
        for (int i = 0; i < L2; i++) d += hm[i] != bm[i];
        if (d == 0) fprintf(f, "SWIFT: the acceptance head was trained on this skip set\n");
        else fprintf(f, "SWIFT: the acceptance head was trained on another skip set (%d sub-layer swap%s from the final "
                        "one): it reads states of a set it was not trained on\n", d / 2, d == 2 ? "" : "s");
    }
    free(hm);
    free(bm);
}

void swift_print_history(FILE *f, const sd_swift_state *st) {
    enum { CAP = 64 };
    int steps[CAP];
    float sc[CAP];
    int n = sd_swift_state_history(st, steps, sc, CAP);
    if (n > CAP) n = CAP;
    for (int i = 0; i < n; i++) fprintf(f, "%s%.3f@%d", i ? " " : "", sc[i], steps[i]);
    if (n == 0) fputc('-', f);
}
