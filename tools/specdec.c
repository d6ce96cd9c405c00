/* specdec: the command-line front end. Uses only the public header. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "cmds.h"
#include "specdec.h"

static void usage_main(FILE *f) {
    fprintf(f,
            "specdec — lossless speculative decoding on the CPU (Llama-family GGUF and llama2.c models)\n\n"
            "usage: specdec <command> [options]\n\n"
            "commands:\n"
            "  generate   generate text from a prompt\n"
            "  batch      answer a prompt set, many sequences at once (continuous batching)\n"
            "  bench      benchmarks: decode (vs roofline), block (T(k)/T(1)), bandwidth\n"
            "  gen-model  write a seeded random-weight GGUF of a real shape (for speed work)\n"
            "  train      train exit heads (train exit-heads) for early-exit drafting\n"
            "  help       this text; `specdec <command> --help` for a command's options\n");
}

static void usage_generate(FILE *f) {
    fprintf(f,
            "usage: specdec generate -m MODEL -p PROMPT [options]\n\n"
            "Streams the prompt and the generated text to stdout; logs and timings go to stderr.\n\n"
            "model and prompt:\n"
            "  -m, --model FILE        GGUF (v2/v3) or llama2.c .bin model (required)\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from a file\n"
            "      --tokenizer FILE    llama2.c tokenizer.bin (default: tok<vocab>.bin or tokenizer.bin beside the model)\n"
            "      --no-bos            do not prepend the BOS token\n"
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
            "      --compare           also run plain decoding on the same prompt and print the speedup\n"
            "      --draft-model FILE  the draft model for --spec draft (same tokenizer as the target)\n"
            "      --draft-type TYPE   convert the draft's weights at load: f32|f16|bf16|q8_0|q4_0 (e.g. the target\n"
            "                          file itself as a q4_0 self-draft)\n"
            "      --exit-heads FILE   trained exit heads (specdec train exit-heads) instead of the shared LM head\n"
            "                          (early-exit, del, specbound)\n"
            "  method parameters (the same keys as bench spec --methods and the library's sd_spec_set;\n"
            "  lists take ',' between values):\n");
    cli_spec_help(f, false);
    fprintf(f,
            "engine:\n"
            "  -t, --threads N         threads (default: online CPUs)\n"
            "  -c, --ctx-size N        context size (default: the model's training context)\n"
            "  -b, --batch-size N      largest block per forward pass, e.g. prefill chunks (default 64)\n"
            "  -h, --help              this text\n");
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

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            }
            b = nb;
        }
    }
    fclose(f);
    if (b) b[n] = 0;
    return b;
}

int cmd_generate(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *tok_path = NULL;
    int n_predict = 128;
    bool ignore_eos = false, no_bos = false, seed_set = false;
    sd_sampler_params sp = sd_sampler_default_params();
    sd_ctx_params cp = sd_ctx_default_params();
    sd_spec_params spec = sd_spec_default_params();
    const char *draft_path = NULL, *draft_type = NULL, *heads_path = NULL;
    sd_exit_heads *heads = NULL;
    sd_error serr = {0};
    bool compare = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
#define NEED()                                                                   \
    do {                                                                         \
        if (!v) {                                                                \
            fprintf(stderr, "error: %s needs a value (see --help)\n", a);        \
            return 2;                                                            \
        }                                                                        \
        i++;                                                                     \
    } while (0)
        if (IS("-h", "--help")) {
            usage_generate(stdout);
            return 0;
        } else if (IS("-m", "--model")) { NEED(); model_path = v; }
        else if (IS("-p", "--prompt")) { NEED(); prompt = v; }
        else if (IS("-f", "--file")) { NEED(); prompt_file = v; }
        else if (IS("--tokenizer", "--tokenizer")) { NEED(); tok_path = v; }
        else if (IS("--no-bos", "--no-bos")) no_bos = true;
        else if (IS("--ignore-eos", "--ignore-eos")) ignore_eos = true;
        else if (IS("-n", "--n-predict")) { NEED(); if (!cli_int(a, v, -1, 1 << 24, &n_predict)) return 2; }
        else if (IS("--temp", "--temperature")) { NEED(); if (!cli_float(a, v, 0, 1e6, &sp.temp)) return 2; }
        else if (IS("--top-k", "--top-k")) { NEED(); if (!cli_int(a, v, 0, 1 << 30, &sp.top_k)) return 2; }
        else if (IS("--top-p", "--top-p")) { NEED(); if (!cli_float(a, v, 1e-9, 1, &sp.top_p)) return 2; }
        else if (IS("--min-p", "--min-p")) { NEED(); if (!cli_float(a, v, 0, 1, &sp.min_p)) return 2; }
        else if (IS("--repeat-penalty", "--repeat-penalty")) { NEED(); if (!cli_float(a, v, 1e-6, 1e6, &sp.repeat_penalty)) return 2; }
        else if (IS("--repeat-last-n", "--repeat-last-n")) { NEED(); if (!cli_int(a, v, 0, 1 << 24, &sp.repeat_last_n)) return 2; }
        else if (IS("--draft-model", "--draft-model")) { NEED(); draft_path = v; }
        else if (IS("--draft-type", "--draft-type")) { NEED(); draft_type = v; }
        else if (IS("--compare", "--compare")) compare = true;
        else if (IS("--exit-heads", "--exit-heads")) { NEED(); heads_path = v; }
        else if (a[0] == '-' && a[1] == '-' && sd_spec_param_find(a)) { /* a method parameter from the registry */
            NEED();
            if (sd_spec_set(&spec, a, v, &serr) != SD_OK) {
                cli_spec_error("", serr.msg, false);
                return 2;
            }
        }
        else if (IS("-s", "--seed")) {
            NEED();
            unsigned long long s;
            if (!cli_u64(a, v, &s)) return 2;
            sp.seed = s;
            seed_set = true;
        } else if (IS("-t", "--threads")) { NEED(); if (!cli_int(a, v, 1, 512, &cp.n_threads)) return 2; }
        else if (IS("-c", "--ctx-size")) { NEED(); if (!cli_int(a, v, 1, 1 << 20, &cp.n_ctx)) return 2; }
        else if (IS("-b", "--batch-size")) { NEED(); if (!cli_int(a, v, 1, 4096, &cp.n_batch)) return 2; }
        else {
            fprintf(stderr, "error: unknown option '%s' (see specdec generate --help)\n", a);
            return 2;
        }
#undef IS
#undef NEED
    }
    if (!model_path) {
        fprintf(stderr, "error: no model given (-m FILE); see specdec generate --help\n");
        return 2;
    }
    if (prompt && prompt_file) {
        fprintf(stderr, "error: give either -p or -f, not both\n");
        return 2;
    }
    char *file_text = NULL;
    if (prompt_file) {
        file_text = read_file(prompt_file);
        if (!file_text) {
            fprintf(stderr, "error: cannot read prompt file '%s'\n", prompt_file);
            return 1;
        }
        prompt = file_text;
    }
    if (!prompt) prompt = "";
    if (!seed_set) sp.seed = (unsigned long long)time(NULL);
    if (spec.method == SD_SPEC_DRAFT && !draft_path) {
        fprintf(stderr, "error: --spec draft needs --draft-model FILE\n");
        return 2;
    }
    if ((draft_path || draft_type) && spec.method != SD_SPEC_DRAFT) {
        fprintf(stderr, "error: --draft-model/--draft-type need --spec draft\n");
        return 2;
    }
    if (sd_spec_check(NULL, NULL, &spec, &serr) != SD_OK) { /* what needs no model, before loading one */
        cli_spec_error("", serr.msg, true);
        return 2;
    }

    int rc = 1;
    sd_error err = {0};
    sd_model *model = NULL, *dmodel = NULL;
    sd_ctx *ctx = NULL, *dctx = NULL;
    int32_t *plain = NULL, *spec_out = NULL;
    sd_sampler *smp = NULL;
    int32_t *toks = NULL;
    sd_model_params mp = sd_model_default_params();
    mp.tokenizer_path = tok_path;
    if (sd_model_load(model_path, &mp, &model, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    sd_model_info info;
    sd_model_get_info(model, &info);
    fprintf(stderr, "model: %s (%s, %s weights, %d layers, dim %d, vocab %d, %.1f MiB)\n", model_path, info.arch,
            info.weight_type, info.n_layer, info.n_embd, info.n_vocab, (double)info.weight_bytes / (1 << 20));
    if (spec.method == SD_SPEC_DRAFT) {
        sd_model_params dp = sd_model_default_params();
        dp.convert_type = draft_type;
        if (sd_model_load(draft_path, &dp, &dmodel, &err) != SD_OK) {
            fprintf(stderr, "error: draft model: %s\n", err.msg);
            goto done;
        }
        if (sd_vocab_compatible(model, dmodel, &err) != SD_OK) {
            fprintf(stderr, "error: draft model %s cannot draft for %s: %s\n", draft_path, model_path, err.msg);
            goto done;
        }
        sd_model_info di;
        sd_model_get_info(dmodel, &di);
        fprintf(stderr, "draft: %s (%s weights%s, %d layers, dim %d, %.1f MiB)\n", draft_path, di.weight_type,
                draft_type ? ", converted at load" : "", di.n_layer, di.n_embd, (double)di.weight_bytes / (1 << 20));
    }
    if (heads_path) {
        if (sd_exit_heads_load(model, heads_path, &heads, &err) != SD_OK) {
            fprintf(stderr, "error: --exit-heads: %s\n", err.msg);
            goto done;
        }
        spec.exit_heads = heads;
    }
    if (sd_spec_check(model, dmodel, &spec, &err) != SD_OK) { /* against the models, before any context */
        cli_spec_error("", err.msg, true);
        goto done;
    }
    if (sd_ctx_new(model, &cp, &ctx, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        goto done;
    }
    if (dmodel) {
        sd_ctx_params dcp = cp;
        dcp.n_ctx = sd_ctx_n_ctx(ctx);
        if (sd_ctx_new(dmodel, &dcp, &dctx, &err) != SD_OK) {
            fprintf(stderr, "error: draft context: %s\n", err.msg);
            goto done;
        }
        spec.draft_ctx = dctx;
    }
    if (sd_spec_check_ctx(ctx, &spec, &err) != SD_OK) { /* the context's limits (n_batch) */
        cli_spec_error("", err.msg, true);
        goto done;
    }
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
    if (spec.method == SD_SPEC_EARLY_EXIT || spec.method == SD_SPEC_DEL || spec.method == SD_SPEC_SPECBOUND)
        fprintf(stderr, "self-speculation: %llu target layers run, eTPL %.3f tokens per layer (plain: %.3f)\n",
                (unsigned long long)st.layer_passes, st.layer_passes ? (double)st.n_gen / st.layer_passes : 0.0,
                1.0 / info.n_layer);
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
    sd_exit_heads_free(heads);
    free(plain);
    free(spec_out);
    sd_ctx_free(dctx);
    sd_model_free(dmodel);
    free(toks);
    free(file_text);
    sd_sampler_free(smp);
    sd_ctx_free(ctx);
    sd_model_free(model);
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
        return 0;
    }
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "batch")) return cmd_batch(argc - 1, argv + 1);
    if (!strcmp(cmd, "gen-model")) return cmd_gen_model(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
    usage_main(stderr);
    return 2;
}
