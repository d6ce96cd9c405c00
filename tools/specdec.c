/* specdec: the command-line front end. Uses only the public header. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "cmds.h"
#include "out_file.h"
#include "run_opts.h"
#include "specdec.h"

static void usage_main(FILE *f) {
    fprintf(f,
            "specdec — lossless speculative decoding on the CPU (Llama-family GGUF and llama2.c models)\n\n"
            "usage: specdec <command> [options]\n\n"
            "commands:\n"
            "  generate   generate text from a prompt\n"
            "  batch      answer a prompt set, many sequences at once (continuous batching)\n"
            "  serve      an OpenAI-compatible HTTP server (per-request speculative method)\n"
            "  bench      benchmarks: decode (vs roofline), block (T(k)/T(1)), bandwidth\n"
            "  gen-model  write a seeded random-weight GGUF of a real shape (for speed work)\n"
            "  train      train exit heads (train exit-heads) for early-exit drafting, or SpecDec++'s acceptance head\n"
            "             (train accept-head)\n"
            "  profile    profile sv: Speculative Verification's acceptance table of a target (for --verify sv)\n"
            "  version    print the version (also --version)\n"
            "  help       this text; `specdec <command> --help` for a command's options\n");
}

static void usage_generate(FILE *f) {
    fprintf(f,
            "usage: specdec generate -m MODEL -p PROMPT [options]\n\n"
            "Streams the prompt and the generated text to stdout; logs and timings go to stderr.\n\n"
            "prompt:\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "      --compare           also run plain decoding on the same prompt and print the speedup\n");
    run_opts_help(f);
    fprintf(f, "  -h, --help              this text\n");
}

typedef struct stream_state {
    const sd_model *m;
    sd_detok dt;
} stream_state;

static bool on_token(int32_t tok, void *user) {
    stream_state *s = user;
    char buf[320];
    int n = sd_detok_push(s->m, &s->dt, tok, buf);
    if (n > 0) {
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
    }
    return true;
}

int cmd_generate(int argc, char **argv) {
    run_opts o;
    run_opts_init(&o);
    const char *prompt = NULL, *prompt_file = NULL;
    bool compare = false;
    static const char *const own[] = {"-p", "--prompt", "-f", "--file", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "--compare")) {
            compare = true;
            continue;
        }
        run_arg r = run_opts_arg(&o, argc, argv, &i, own, "generate", usage_generate, &v);
        if (r == RUN_ARG_SHARED) continue;
        if (r != RUN_ARG_OWN) return r == RUN_ARG_HELP ? 0 : 2;
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = v;
        else prompt_file = v;
    }
    if (!o.model_path) {
        fprintf(stderr, "error: no model given (-m FILE); see specdec generate --help\n");
        return 2;
    }
    if (prompt && prompt_file) {
        fprintf(stderr, "error: give either -p or -f, not both\n");
        return 2;
    }
    char *file_text = NULL;
    if (prompt_file) {
        sd_error ferr = {0};
        if (sd_read_text_file(prompt_file, (size_t)64 << 20, &file_text, NULL, &ferr) != SD_OK) {
            fprintf(stderr, "error: prompt file: %s\n", ferr.msg);
            return 1;
        }
        prompt = file_text;
    }
    if (!prompt) prompt = "";
    int rc = 1;
    sd_error err = {0};
    run_env env;
    int32_t *plain = NULL, *spec_out = NULL;
    sd_sampler *smp = NULL;
    int32_t *toks = NULL;
    if (!run_env_open(&o, 1, &env)) goto done;
    const sd_model *model = env.model;
    sd_ctx *ctx = env.ctx;
    const sd_model_info info = env.info;
    const sd_sampler_params sp = o.sp;
    const sd_spec_params spec = o.spec;
    int n_predict = o.n_predict;
    const bool ignore_eos = o.ignore_eos, no_bos = o.no_bos;
    if (sd_sampler_new(&sp, info.n_vocab, &smp, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    size_t plen = strlen(prompt);
    int cap = (int)plen + 8, n_tok = 0;
    toks = malloc((size_t)cap * sizeof *toks);
    if (!toks || sd_tokenize(model, prompt, plen, !no_bos && sd_model_add_bos(model), true, toks, cap, &n_tok, &err) != SD_OK) {
        fprintf(stderr, "error: cannot tokenize the prompt: %s\n", toks ? err.msg : "out of memory");
        goto done;
    }
    if (n_tok == 0) {
        fprintf(stderr, "error: the prompt is empty and the model has no BOS token to start from (give -p TEXT)\n");
        goto done;
    }
    int n_ctx = sd_ctx_n_ctx(ctx);
    if (n_tok >= n_ctx) {
        fprintf(stderr, "error: the prompt has %d tokens but the context holds %d (raise -c or shorten the prompt)\n", n_tok,
                n_ctx);
        goto done;
    }
    if (n_predict < 0 || n_tok + n_predict > n_ctx) {
        if (n_predict >= 0)
            fprintf(stderr, "warning: -n %d does not fit the context (%d) after the %d prompt tokens: generating %d\n",
                    n_predict, n_ctx, n_tok, n_ctx - n_tok);
        n_predict = n_ctx - n_tok;
    }
    fprintf(stderr, "prompt: %d tokens; generating up to %d (%s, seed %llu, %d threads)\n", n_tok, n_predict,
            sp.temp <= 0 ? "greedy" : "sampling", (unsigned long long)sp.seed,
            sd_ctx_n_threads(ctx));
    fwrite(prompt, 1, plen, stdout);
    fflush(stdout);
    stream_state ss = {model, {{0}, 0}};
    spec_out = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *spec_out);
    sd_spec_stats st;
    int n_spec = 0;
    if (!spec_out || sd_spec_generate(ctx, smp, &spec, toks, n_tok, n_predict, ignore_eos, spec_out, &n_spec, on_token,
                                      &ss, &st, &err) != SD_OK) {
        fprintf(stderr, "\nerror: %s\n", spec_out ? err.msg : "out of memory");
        goto done;
    }
    char tail[32];
    int tn = sd_detok_flush(&ss.dt, tail);
    fwrite(tail, 1, (size_t)tn, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    double tps = st.t_gen_s > 0 ? st.n_gen / st.t_gen_s : 0.0;
    fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s)\n", st.n_prompt, st.t_prompt_s,
            st.t_prompt_s > 0 ? st.n_prompt / st.t_prompt_s : 0.0);
    fprintf(stderr, "decode: %d tokens in %.3f s (%.1f tok/s)\n", st.n_gen, st.t_gen_s, tps);
    if (spec.method != SD_SPEC_NONE)
        fprintf(stderr,
                "speculative: %d rounds, mean accepted length tau %.2f, acceptance %.1f%% (%d/%d drafts); time: draft "
                "%.3f s, verify %.3f s, other %.3f s\n",
                st.n_rounds, st.n_rounds ? (double)st.n_gen / st.n_rounds : 0.0,
                st.n_drafted ? 100.0 * st.n_accepted / st.n_drafted : 0.0, st.n_accepted, st.n_drafted, st.t_draft_s,
                st.t_verify_s, st.t_gen_s - st.t_draft_s - st.t_verify_s);
    if (spec.verify == SD_VERIFY_SV)
        fprintf(stderr, "sv: verified %d of %d drafted tokens (%.2f per round), acceptance of the verified %.1f%%; "
                        "companion %.3f s\n",
                st.n_verified, st.n_drafted, st.n_rounds ? (double)st.n_verified / st.n_rounds : 0.0,
                st.n_verified ? 100.0 * st.n_accepted / st.n_verified : 0.0, st.t_companion_s);
    if (spec.method == SD_SPEC_EARLY_EXIT || spec.method == SD_SPEC_DEL || spec.method == SD_SPEC_SPECBOUND ||
        spec.method == SD_SPEC_SWIFT)
        fprintf(stderr, "self-speculation: %llu target layers run, eTPL %.3f tokens per layer (plain: %.3f)\n",
                (unsigned long long)st.layer_passes, st.layer_passes ? (double)st.n_gen / st.layer_passes : 0.0,
                1.0 / info.n_layer);
    if (spec.method == SD_SPEC_SWIFT) {
        run_env_print_swift(stderr, &env, &st);
        if (!run_env_save_swift(&o, &env)) goto done;
    }
    run_print_auto(stderr, &st);
    if (spec.method == SD_SPEC_DEL)
        fprintf(stderr, "DEL: mean exit depth %.2f, mean draft bound %.2f; shadow tokens + statistics %.3f s (%.1f%% of decode)\n",
                st.mean_exit, st.mean_gamma, st.t_aux_s, st.t_gen_s > 0 ? 100.0 * st.t_aux_s / st.t_gen_s : 0.0);
    if (compare) {
        sd_sampler *s2 = NULL;
        plain = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *plain);
        sd_gen_stats gs;
        int n_plain = 0;
        if (!plain || sd_sampler_new(&sp, info.n_vocab, &s2, &err) != SD_OK ||
            sd_generate(ctx, s2, toks, n_tok, n_predict, ignore_eos, plain, &n_plain, NULL, NULL, &gs, &err) != SD_OK) {
            fprintf(stderr, "error: plain run: %s\n", err.msg);
            sd_sampler_free(s2);
            goto done;
        }
        sd_sampler_free(s2);
        double ptps = gs.t_gen_s > 0 ? gs.n_gen / gs.t_gen_s : 0.0;
        bool same = n_plain == n_spec && memcmp(plain, spec_out, (size_t)n_spec * sizeof *plain) == 0;
        fprintf(stderr, "plain:  %d tokens in %.3f s (%.1f tok/s); speedup %.2fx; output %s\n", gs.n_gen, gs.t_gen_s,
                ptps, ptps > 0 ? tps / ptps : 0.0,
                sd_sampler_is_greedy(smp) ? (same ? "identical to plain greedy" : "DIFFERS from plain greedy")
                                          : (same ? "identical" : "differs (sampling: same distribution, other draws)"));
        if (sd_sampler_is_greedy(smp) && !same) goto done;
    }
    rc = 0;
done:
    free(plain);
    free(spec_out);
    free(toks);
    free(file_text);
    sd_sampler_free(smp);
    run_env_free(&env);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        usage_main(stdout);
        return out_stdout_ok() ? 0 : 1;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        /* the library's version (the one linked), which is the header's for this static build */
        printf("specdec %s\n", sd_version());
        return out_stdout_ok() ? 0 : 1;
    }
    int rc;
    if (!strcmp(cmd, "generate")) rc = cmd_generate(argc - 1, argv + 1);
    else if (!strcmp(cmd, "bench")) rc = cmd_bench(argc - 1, argv + 1);
    else if (!strcmp(cmd, "batch")) rc = cmd_batch(argc - 1, argv + 1);
    else if (!strcmp(cmd, "serve")) rc = cmd_serve(argc - 1, argv + 1);
    else if (!strcmp(cmd, "gen-model")) rc = cmd_gen_model(argc - 1, argv + 1);
    else if (!strcmp(cmd, "train")) rc = cmd_train(argc - 1, argv + 1);
    else if (!strcmp(cmd, "profile")) rc = cmd_profile(argc - 1, argv + 1);
    else {
        fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
        usage_main(stderr);
        return 2;
    }
    /* every command's standard output checked in one place: a write that failed (full disk) is a failure */
    if (!out_stdout_ok() && rc == 0) rc = 1;
    return rc;
}
