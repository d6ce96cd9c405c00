/* predictions: for each prompt given as a "category<TAB>text" line on stdin (newlines in the text written \n), the target's
 * greedy answer (n tokens) and whether the draft model's greedy prediction at each position matches the text's
 * next token. One line per prompt: category, prompt tokens, total tokens, the match string ('1'/'0' for positions
 * 0 .. total-2). Input for replay.py. Public API only:
 *     cc -O2 -I../../include predictions.c ../../build/libspecdec.a -lutf8proc -lm -lpthread -o predictions
 *     ./predictions TARGET.gguf DRAFT.gguf N < prompts.tsv > matches.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

enum { MAX_TOK = 1024 };

/* "\n" -> a newline, in place */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] == 'n') *o++ = '\n', s++;
        else *o++ = *s;
    }
    *o = 0;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TARGET.gguf DRAFT.gguf N < prompts.tsv\n", argv[0]);
        return 2;
    }
    const int n_pred = atoi(argv[3]);
    sd_error err = {0};
    sd_model *tm = NULL, *dm = NULL;
    sd_model_params mp = sd_model_default_params();
    if (sd_model_load(argv[1], &mp, &tm, &err) || sd_model_load(argv[2], &mp, &dm, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = MAX_TOK;
    cp.n_batch = MAX_TOK;
    cp.n_threads = 1;
    sd_ctx *tc = NULL, *dc = NULL;
    sd_sampler *smp = NULL;
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_model_info di;
    sd_model_get_info(dm, &di);
    if (sd_ctx_new(tm, &cp, &tc, &err) || sd_ctx_new(dm, &cp, &dc, &err) || sd_sampler_new(&spp, di.n_vocab, &smp, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    const int V = di.n_vocab;
    float *logits = malloc((size_t)MAX_TOK * V * sizeof *logits); /* [n][V] */
    if (!logits) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    static int32_t tok[MAX_TOK];
    static uint8_t want[MAX_TOK];
    char line[8192];
    while (fgets(line, sizeof line, stdin)) {
        if (!strchr(line, '\n') && !feof(stdin)) {
            fprintf(stderr, "error: a prompt line longer than %zu bytes\n", sizeof line - 2);
            return 1;
        }
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        unescape(tab + 1);
        int np = 0, nout = 0;
        if (sd_tokenize(tm, tab + 1, strlen(tab + 1), sd_model_add_bos(tm), true, tok, MAX_TOK, &np, &err) ||
            np + n_pred > MAX_TOK ||
            sd_generate(tc, smp, tok, np, n_pred, false, tok + np, &nout, NULL, NULL, NULL, &err)) {
            fprintf(stderr, "error: %s\n", err.msg[0] ? err.msg : "prompt too long");
            return 1;
        }
        const int n = np + nout;
        for (int i = 0; i < n; i++) want[i] = 1;
        if (sd_kv_truncate(dc, 0, 0, &err) ||
            sd_forward(dc, &(sd_block){.n = n, .token = tok}, &(sd_forward_args){.want_logits = want, .logits = logits}, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        printf("%s %d %d ", line, np, n);
        for (int q = 0; q + 1 < n; q++) putchar(argmax(logits + (size_t)q * V, V) == tok[q + 1] ? '1' : '0');
        putchar('\n');
    }
    free(logits);
    sd_sampler_free(smp);
    sd_ctx_free(tc);
    sd_ctx_free(dc);
    sd_model_free(tm);
    sd_model_free(dm);
    return 0;
}
