/* simple: the smallest use of the library — load, tokenize, generate greedily, print, free.
 * usage: simple MODEL [PROMPT] [N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [PROMPT] [N]\n", argv[0]);
        return 2;
    }
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    int n_predict = argc > 3 ? atoi(argv[3]) : 32;
    sd_error err;
    sd_model *model;
    if (sd_model_load(argv[1], NULL, &model, &err) != SD_OK) {
        fprintf(stderr, "load failed: %s\n", err.msg);
        return 1;
    }
    sd_ctx *ctx;
    if (sd_ctx_new(model, NULL, &ctx, &err) != SD_OK) {
        fprintf(stderr, "context failed: %s\n", err.msg);
        sd_model_free(model);
        return 1;
    }
    sd_sampler_params sp = sd_sampler_default_params();
    sp.temp = 0.0f; /* greedy */
    sd_sampler *smp;
    sd_model_info info;
    sd_model_get_info(model, &info);
    sd_sampler_new(&sp, info.n_vocab, &smp, NULL);
    int32_t toks[512];
    int n = 0;
    if (sd_tokenize(model, prompt, strlen(prompt), sd_model_add_bos(model), false, toks, 512, &n, &err) != SD_OK) {
        fprintf(stderr, "tokenize failed: %s\n", err.msg);
        return 1;
    }
    int32_t *out = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *out);
    int n_out = 0;
    if (sd_generate(ctx, smp, toks, n, n_predict, false, out, &n_out, NULL, NULL, NULL, &err) != SD_OK) {
        fprintf(stderr, "generate failed: %s\n", err.msg);
        return 1;
    }
    printf("%s", prompt);
    sd_detok dt = {{0}, 0};
    char buf[320];
    for (int i = 0; i < n_out; i++) {
        sd_detok_push(model, &dt, out[i], buf);
        printf("%s", buf);
    }
    sd_detok_flush(&dt, buf);
    printf("%s\n", buf);
    free(out);
    sd_sampler_free(smp);
    sd_ctx_free(ctx);
    sd_model_free(model);
    return 0;
}
