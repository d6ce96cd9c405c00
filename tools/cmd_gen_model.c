/* specdec gen-model: seeded random-weight GGUF of a real shape. */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "cmds.h"
#include "specdec.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: specdec gen-model --shape NAME --type TYPE --vocab VOCAB.gguf -o OUT.gguf [--seed S]\n\n"
            "Writes a GGUF with seeded random weights of a real model shape (streaming: memory stays small).\n"
            "  --shape NAME   test-tiny | test-256 | llama-68m | llama-160m | tinyllama-1.1b | llama2-7b\n"
            "  --type TYPE    f32 | f16 | bf16 | q8_0 | q4_0 | q2_k | q3_k | q4_k | q5_k | q6_k (all matrices;\n"
            "                 norms stay f32; a matrix whose rows are not whole blocks of the type takes q8_0 or f16)\n"
            "  --vocab FILE   GGUF whose tokenizer is copied (e.g. ../shared/models/vocab/ggml-vocab-llama-spm.gguf)\n"
            "  -o, --out FILE output path\n"
            "  --seed S       default 1\n");
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
    p.seed = 1;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, "gen-model", NULL, usage);
        if (tk >= 0) return tk;
        if (!strcmp(a, "--shape")) p.shape = v;
        else if (!strcmp(a, "--type")) p.type = v;
        else if (!strcmp(a, "--vocab")) p.vocab_path = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--seed")) {
            unsigned long long s;
            if (!cli_u64(a, v, &s)) return 2;
            p.seed = s;
        } else {
            fprintf(stderr, "error: unknown option '%s' (see specdec gen-model --help)\n", a);
            return 2;
        }
    }
    if (!p.shape || !p.type || !p.vocab_path || !out) {
        fprintf(stderr, "error: --shape, --type, --vocab and -o are required (see specdec gen-model --help)\n");
        return 2;
    }
    double last = 0, t0 = cmd_now();
    p.progress = progress;
    p.user = &last;
    sd_error err;
    if (sd_model_generate(&p, out, &err) != SD_OK) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", out, p.shape, p.type, cmd_now() - t0);
    return 0;
}
