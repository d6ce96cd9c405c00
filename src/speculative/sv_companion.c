/* sv_companion: the companion's cache and its one forward per round (see the header). */
#include "speculative/sv_companion.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

struct sv_companion {
    sd_ctx *ctx;
    int seq, layer_end, V, n_batch, gmax;
    const sd_exit_heads *heads;
    int len;        /* tokens of the history in the companion's cache */
    int pending;    /* the round's block: history entries in it */
    int32_t *block; /* [n_batch] */
    uint8_t *want;  /* [n_batch] */
    float *logits;  /* [gmax][V] */
};

sv_companion *svc_new(sd_ctx *ctx, int seq, int layer_end, const sd_exit_heads *heads, int gmax, sd_error *err) {
    sv_companion *c = calloc(1, sizeof *c);
    if (!c) {
        err_set(err, SD_ERR_NOMEM, "out of memory creating the SV companion");
        return NULL;
    }
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(ctx), &info);
    c->ctx = ctx, c->seq = seq, c->layer_end = layer_end, c->heads = heads, c->gmax = gmax;
    c->V = info.n_vocab;
    c->n_batch = sd_ctx_n_batch(ctx);
    c->block = malloc((size_t)c->n_batch * sizeof *c->block);
    c->want = malloc((size_t)c->n_batch);
    c->logits = malloc((size_t)gmax * c->V * sizeof *c->logits);
    if (!c->block || !c->want || !c->logits) {
        svc_free(c);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the SV companion");
        return NULL;
    }
    return c;
}

void svc_free(sv_companion *c) {
    if (!c) return;
    free(c->block);
    free(c->want);
    free(c->logits);
    free(c);
}

sd_ctx *svc_ctx(const sv_companion *c) { return c->ctx; }

void svc_clear(sv_companion *c) {
    sd_kv_truncate(c->ctx, c->seq, 0, NULL);
    c->len = 0;
}

sd_status svc_begin(sv_companion *c, const int32_t *hist, int n, sd_error *err) {
    svc_clear(c);
    while (c->len < n - 1) {
        int m = n - 1 - c->len < c->n_batch ? n - 1 - c->len : c->n_batch;
        fwd_req r = {.seq = c->seq, .n = m, .token = hist + c->len, .layer_end = c->layer_end};
        if (fwd_req_run(c->ctx, &r)) {
            if (err) *err = r.err;
            err_prefix(err, "SV companion: ");
            svc_clear(c);
            return r.status;
        }
        c->len += m;
    }
    return SD_OK;
}

void svc_request(sv_companion *c, const int32_t *hist, int n, const int32_t *drafts, int k, fwd_req *r) {
    int h = n - c->len; /* >= 1: at least the pending token */
    if (h + k - 1 > c->n_batch) { /* cannot happen after svc_begin (h <= 2); start over rather than overflow */
        svc_clear(c);
        h = n;
    }
    memcpy(c->block, hist + c->len, (size_t)h * sizeof *c->block);
    memcpy(c->block + h, drafts, (size_t)(k - 1) * sizeof *c->block);
    for (int i = 0; i < h + k - 1; i++) c->want[i] = i >= h - 1;
    c->pending = h;
    *r = (fwd_req){.seq = c->seq, .n = h + k - 1, .token = c->block, .want = c->want, .logits = c->logits,
                   .layer_end = c->layer_end, .exit_heads = c->heads};
}

const float *svc_done(sv_companion *c, const fwd_req *r) {
    if (r->status) { /* nothing changed in the cache */
        return NULL;
    }
    c->len += r->n; /* the history's entries and the drafts (cut back in svc_on_verified) */
    return c->logits;
}

void svc_on_verified(sv_companion *c, int n) {
    if (c->len > n - 1) c->len = n - 1;
    sd_kv_truncate(c->ctx, c->seq, c->len, NULL);
}
