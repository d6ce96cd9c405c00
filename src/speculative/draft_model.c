/* draft_model: a separate (smaller or cheaper) model with its own context and KV cache, kept in step with the
 * target's history: after each round its cache is cut back to the longest prefix of the new history it has
 * seen, and the next draft first feeds what it has not (at least the pending token). */
#include <stdlib.h>
#include <string.h>

#include "speculative/accept.h"
#include "speculative/spec.h"
#include "util/err.h"

typedef struct model_drafter {
    drafter base;
    sd_ctx *ctx;
    int seq;
    sd_sampler *smp; /* the target's processing, its own RNG */
    bool greedy;
    int V, n_batch;
    int len;         /* tokens of hist in the draft cache */
    float *logits;   /* [V] */
} model_drafter;

/* Feeds hist[from..to) in blocks; logits of the last position into md->logits. */
static sd_status feed(model_drafter *md, const int32_t *hist, int from, int to, bool want_logits, sd_error *err) {
    for (int i = from; i < to; i += md->n_batch) {
        int k = to - i < md->n_batch ? to - i : md->n_batch;
        sd_forward_args a = {.logits = (want_logits && i + k == to) ? md->logits : NULL};
        sd_status st = sd_forward(md->ctx, &(sd_block){.n = k, .token = hist + i, .seq_all = md->seq}, &a, err);
        if (st) return st;
    }
    md->len = to;
    return SD_OK;
}

static sd_status md_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    sd_kv_truncate(md->ctx, md->seq, 0, NULL);
    md->len = 0;
    sd_status st = feed(md, hist, 0, n - 1, false, err);
    if (st) err_prefix(err, "draft model: ");
    return st;
}

static int md_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    model_drafter *md = (model_drafter *)d;
    t->onehot = false;
    if (feed(md, hist, md->len, n, true, err)) return -1;
    int k = 0;
    while (k < max) {
        float top1, *qk = md->greedy ? NULL : t->q + (size_t)k * md->V;
        int32_t x = draft_peek(md->smp, md->greedy, md->logits, md->V, hist, n + k, qk, c->uses_conf, &top1);
        if (!c->keep_going(c, k, top1)) break;
        x = draft_draw(md->smp, md->greedy, x, qk);
        t->token[k] = x;
        hist[n + k] = x; /* the penalty's history for the next draft step */
        k++;
        if (k < max) {
            sd_forward_args a = {.logits = md->logits};
            if (sd_forward(md->ctx, &(sd_block){.n = 1, .token = &x, .seq_all = md->seq}, &a, err)) {
                err_prefix(err, "draft model: ");
                return -1;
            }
            md->len = n + k;
        }
    }
    return k;
}

static void md_on_verified(drafter *d, const int32_t *hist, int n, int n_acc) {
    model_drafter *md = (model_drafter *)d;
    (void)hist, (void)n_acc;
    /* the cache holds the old pending token and the drafts it ran; the accepted ones are hist's, so keep the
     * common prefix: everything up to the new pending token (hist[n-1]) at most */
    if (md->len > n - 1) md->len = n - 1;
    sd_kv_truncate(md->ctx, md->seq, md->len, NULL);
}

static void md_free(drafter *d) {
    model_drafter *md = (model_drafter *)d;
    sd_sampler_free(md->smp);
    free(md->logits);
    free(md);
}

drafter *drafter_model_new(sd_ctx *dctx, int seq, const sd_sampler *smp, const sd_spec_params *spp, sd_error *err) {
    model_drafter *md = calloc(1, sizeof *md);
    (void)spp;
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(dctx), &info);
    sd_sampler_params sp;
    sd_sampler_get_params(smp, &sp);
    sp.seed = sp.seed * 0x9e3779b97f4a7c15ull + 0x5bd1e995u; /* the draft's own stream */
    if (!md || sd_sampler_new(&sp, info.n_vocab, &md->smp, err) != SD_OK ||
        !(md->logits = malloc((size_t)info.n_vocab * sizeof(float)))) {
        if (md) {
            sd_sampler_free(md->smp);
            free(md);
        }
        err_set(err, SD_ERR_NOMEM, "out of memory creating the draft model's drafter");
        return NULL;
    }
    md->base = (drafter){"draft", 0, md_begin, md_draft, NULL, NULL, md_on_verified, md_free};
    md->ctx = dctx;
    md->seq = seq;
    md->greedy = sd_sampler_is_greedy(smp);
    md->V = info.n_vocab;
    md->n_batch = sd_ctx_n_batch(dctx);
    return &md->base;
}
