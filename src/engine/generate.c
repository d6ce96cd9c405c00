/* generate: plain autoregressive decoding (the baseline every speculative method must reproduce). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "specdec.h"
#include "util/err.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sd_status sd_generate(sd_ctx *ctx, sd_sampler *smp, const int32_t *prompt, int n_prompt, int n_predict,
                      bool ignore_eos, int32_t *out, int *n_out, sd_token_cb cb, void *user, sd_gen_stats *stats,
                      sd_error *err) {
    if (n_out) *n_out = 0;
    if (!ctx || !smp || !prompt) return err_set(err, SD_ERR_ARG, "sd_generate: NULL argument");
    if (n_prompt < 1) return err_set(err, SD_ERR_ARG, "the prompt is empty (at least one token is needed)");
    if (n_predict < 0) return err_set(err, SD_ERR_ARG, "number of tokens to predict %d must be >= 0", n_predict);
    const int n_ctx = sd_ctx_n_ctx(ctx), n_batch = sd_ctx_n_batch(ctx);
    if (n_prompt + n_predict > n_ctx)
        return err_set(err, SD_ERR_ARG, "prompt (%d tokens) + tokens to predict (%d) exceed the context (%d)", n_prompt,
                       n_predict, n_ctx);
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(ctx), &info);
    float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
    int32_t *hist = malloc((size_t)(n_prompt + n_predict + 1) * sizeof *hist);
    if (!logits || !hist) {
        free(logits);
        free(hist);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    int n_hist = n_prompt, n_gen = 0;
    sd_status st = sd_kv_truncate(ctx, 0, 0, err);
    double t0 = now_s();
    sd_forward_args fa = {.logits = logits};
    for (int i = 0; st == SD_OK && i < n_prompt; i += n_batch) {
        sd_block b = {.n = n_prompt - i < n_batch ? n_prompt - i : n_batch, .token = prompt + i};
        st = sd_forward(ctx, &b, &fa, err);
    }
    double t1 = now_s();
    while (st == SD_OK && n_gen < n_predict) {
        int32_t t = sd_sampler_sample(smp, logits, hist, n_hist);
        hist[n_hist++] = t;
        if (out) out[n_gen] = t;
        n_gen++;
        if (cb && !cb(t, user)) break;
        if (!ignore_eos && sd_token_is_eog(sd_ctx_model(ctx), t)) break;
        if (n_gen == n_predict) break;
        sd_block b = {.n = 1, .token = &t};
        st = sd_forward(ctx, &b, &fa, err);
    }
    double t2 = now_s();
    if (stats) *stats = (sd_gen_stats){n_prompt, n_gen, t1 - t0, t2 - t1};
    if (n_out) *n_out = n_gen;
    free(logits);
    free(hist);
    return st;
}
