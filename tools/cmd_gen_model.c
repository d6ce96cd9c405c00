/* specdec gen-model: seeded random-weight GGUF of a real shape, or a small trained model embedded in a wide one. */
#include <stdio.h>

#include "cmd_opts.h"
#include "cmds.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec gen-model --shape NAME --type TYPE --vocab VOCAB.gguf -o OUT.gguf [--seed S]\n"
            "       specdec gen-model --embed SMALL.gguf --dim D [--heads H] [--kv-heads K] [--ffn F] [--ctx N]\n"
            "                         --type TYPE -o OUT.gguf [--seed S]\n\n"
            "Writes a GGUF with seeded random weights of a real model shape (streaming: memory stays small).\n"
            "With --embed: a wide model that computes exactly SMALL's function (same layers, vocabulary, head size;\n"
            "the extra dims of the residual stream stay 0, extra heads and FFN units are random and feed nothing):\n"
            "a trained model's acceptance at a real model's cost.\n"
            "  --shape NAME   test-tiny | test-256 | llama-68m | llama-160m | tinyllama-1.1b | llama2-7b\n"
            "  --type TYPE    f32 | f16 | bf16 | q8_0 | q4_0 | q2_k | q3_k | q4_k | q5_k | q6_k (all matrices;\n"
            "                 norms stay f32; a matrix whose rows are not whole blocks of the type takes q8_0 or f16),\n"
            "                 or q4_k_m | q5_k_m: llama.cpp's mixes (Q6_K for output.weight and for attn_v and\n"
            "                 ffn_down of the first and last eighth of the layers and every third between)\n"
            "  --vocab FILE   GGUF whose tokenizer is copied (e.g. ../shared/models/vocab/ggml-vocab-llama-spm.gguf)\n"
            "  -o, --out FILE output path\n"
            "  --seed S       default 1\n"
            "  --embed FILE   the small trained GGUF model to embed (replaces --shape and --vocab)\n"
            "  --dim D        the wide model's dim (larger than SMALL's, a multiple of its head size)\n"
            "  --heads H      query heads (default D / head size; the head size is kept)\n"
            "  --kv-heads K   KV heads (default: SMALL's query heads per KV head kept)\n"
            "  --ffn F        FFN width (default SMALL's scaled by D / SMALL's dim, rounded up to 32)\n"
            "  --ctx N        context length written to the file (default SMALL's)\n");
}

static void progress(void *user, uint64_t done, uint64_t total) {
    double *last = user;
    double t = cmd_now();
    if (done < total && t - *last < 1.0) return;
    *last = t;
    fprintf(stderr, "\rwriting: %6.1f / %.1f MiB (%3.0f%%)", (double)done / (1 << 20), (double)total / (1 << 20),
            total ? 100.0 * (double)done / (double)total : 100.0);
    if (done >= total) fputc('\n', stderr);
}

int cmd_gen_model(int argc, char **argv) {
    sd_gen_model_params p = {0};
    sd_embed_params e = {0};
    p.seed = 1;
    const char *out = NULL;
    const cmd_opt opts[] = {
        CMD_STR("--shape", NULL, &p.shape),
        CMD_STR("--type", NULL, &p.type),
        CMD_STR("--vocab", NULL, &p.vocab_path),
        CMD_STR("-o", "--out", &out),
        CMD_STR("--embed", NULL, &e.small_path),
        CMD_INT("--dim", &e.dim, 1, 1 << 20),
        CMD_INT("--heads", &e.n_head, 1, 1 << 16),
        CMD_INT("--kv-heads", &e.n_head_kv, 1, 1 << 16),
        CMD_INT("--ffn", &e.n_ff, 1, 1 << 22),
        CMD_INT("--ctx", &e.n_ctx, 1, 1 << 24),
        CMD_U64("--seed", &p.seed),
        CMD_OPTS_END,
    };
    int rc_opts = cmd_opts_parse(argc, argv, 1, opts, "gen-model", usage);
    if (rc_opts >= 0) return rc_opts;
    if (e.small_path) {
        if (p.shape || p.vocab_path) {
            fprintf(stderr, "error: --embed takes its shape and vocabulary from SMALL: drop --shape / --vocab\n");
            return 2;
        }
        if (!e.dim || !p.type || !out) {
            fprintf(stderr, "error: --embed needs --dim, --type and -o (see specdec gen-model --help)\n");
            return 2;
        }
    } else if (e.dim || e.n_head || e.n_head_kv || e.n_ff || e.n_ctx) {
        fprintf(stderr, "error: --dim, --heads, --kv-heads, --ffn and --ctx go with --embed\n");
        return 2;
    }
    if (!e.small_path && (!p.shape || !p.type || !p.vocab_path || !out)) {
        fprintf(stderr, "error: --shape, --type, --vocab and -o are required (see specdec gen-model --help)\n");
        return 2;
    }
    double last = 0, t0 = cmd_now();
    p.progress = progress;
    p.user = &last;
    sd_error err;
    if (e.small_path) {
        e.type = p.type;
        e.seed = p.seed;
        e.progress = progress;
        e.user = &last;
        if (sd_model_embed(&e, out, &err) != SD_OK) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        fprintf(stderr, "wrote %s (%s embedded at dim %d, %s) in %.1f s\n", out, e.small_path, e.dim, p.type,
                cmd_now() - t0);
        return 0;
    }
    if (sd_model_generate(&p, out, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", out, p.shape, p.type, cmd_now() - t0);
    return 0;
}
