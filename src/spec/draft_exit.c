/* draft_exit: early-exit self-speculation (LayerSkip; methods.md 1). Drafting runs the pending token and then each
 * drafted token through layers [0, E) of the target itself, one position at a time: their K/V go into the
 * target's own cache (layers below E) and their states after layer E-1 are kept (the exit cache); the exit's
 * logits (final norm + LM head, or a trained head) give the next draft. Verification runs layers [E, L) once over
 * the cached states of the whole block; layers below E are never recomputed. Rejected positions are dropped from
 * every layer by the engine's rollback. Exact because "layers [0, E) one position at a time" produces the same
 * bits as any block (batch invariance). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/exit_heads.h"
#include "spec/accept.h"
#include "spec/spec.h"
#include "util/err.h"

typedef struct exit_drafter {
    drafter base;
    sd_ctx *ctx;
    int E, L, V, D;
    const sd_exit_heads *heads;
    sd_sampler *smp;
    bool greedy;
    float *hcache;  /* [gmax + 1][D] states after layer E-1 of the round's pending token and drafts */
    int n_cached;   /* entries of hcache filled this round */
    float *logits;  /* [V] */
    uint8_t *want;  /* [gmax + 1] all ones */
} exit_drafter;

static sd_status ex_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    (void)d, (void)hist, (void)n, (void)err;
    return SD_OK; /* the target's own cache is the draft's */
}

/* Runs token x (at the next position) through layers [0, E): exit state into hcache[n_cached]; exit logits if asked. */
static sd_status exit_step(exit_drafter *ex, int32_t x, bool want_logits, sd_error *err) {
    sd_forward_args a = {.layer_begin = 0, .layer_end = ex->E, .hidden = ex->hcache + (size_t)ex->n_cached * ex->D,
                         .logits = want_logits ? ex->logits : NULL, .exit_heads = ex->heads};
    sd_status st = sd_forward(ex->ctx, &(sd_block){.n = 1, .token = &x}, &a, err);
    if (!st) ex->n_cached++;
    return st;
}

static float top1_prob(const float *l, int V, int32_t best) {
    double s = 0.0;
    for (int i = 0; i < V; i++) s += exp((double)l[i] - l[best]);
    return (float)(1.0 / s);
}

static int ex_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, int32_t *tokens, float *q, bool *q_onehot,
                    sd_error *err) {
    exit_drafter *ex = (exit_drafter *)d;
    *q_onehot = false;
    ex->n_cached = 0;
    int32_t x = hist[n - 1];
    int k = 0;
    while (k < max) {
        if (exit_step(ex, x, true, err)) return -1;
        float top1;
        int32_t nx;
        if (ex->greedy) {
            nx = accept_argmax(ex->logits, ex->V);
            top1 = top1_prob(ex->logits, ex->V, nx);
        } else {
            float *qk = q + (size_t)k * ex->V;
            sd_sampler_probs(ex->smp, ex->logits, hist, n + k, qk);
            int32_t b = 0;
            for (int i = 1; i < ex->V; i++)
                if (qk[i] > qk[b]) b = i;
            top1 = qk[b];
            nx = -1;
        }
        if (!c->keep_going(c, k, top1)) break;
        if (!ex->greedy) nx = sd_sampler_draw(ex->smp, q + (size_t)k * ex->V);
        tokens[k] = nx;
        hist[n + k] = nx;
        k++;
        x = nx;
    }
    return k;
}

static sd_status ex_verify(drafter *d, const int32_t *hist, int n, const int32_t *tokens, int k, float *logits,
                           sd_error *err) {
    exit_drafter *ex = (exit_drafter *)d;
    (void)hist, (void)n;
    /* the last draft has not been through layers [0, E) yet (unless drafting stopped on the controller) */
    if (ex->n_cached == k && k > 0 && exit_step(ex, tokens[k - 1], false, err)) return err ? err->status : SD_ERR_ARG;
    if (ex->n_cached == 0 && exit_step(ex, hist[n - 1], false, err)) return err ? err->status : SD_ERR_ARG;
    sd_forward_args a = {.layer_begin = ex->E, .layer_end = ex->L, .want_logits = ex->want, .logits = logits};
    return sd_forward(ex->ctx, &(sd_block){.n = k + 1, .embd = ex->hcache}, &a, err);
}

static void ex_on_verified(drafter *d, const int32_t *hist, int n, int n_acc) { (void)d, (void)hist, (void)n, (void)n_acc; }

static void ex_free(drafter *d) {
    exit_drafter *ex = (exit_drafter *)d;
    sd_sampler_free(ex->smp);
    free(ex->hcache);
    free(ex->logits);
    free(ex->want);
    free(ex);
}

drafter *drafter_exit_new(sd_ctx *target, int E, const sd_exit_heads *heads, const sd_sampler *smp, int gmax,
                          sd_error *err) {
    exit_drafter *ex = calloc(1, sizeof *ex);
    const sd_model *m = sd_ctx_model(target);
    sd_model_info info;
    sd_model_get_info(m, &info);
    sd_sampler_params sp;
    sd_sampler_get_params(smp, &sp);
    sp.seed = sp.seed * 0x9e3779b97f4a7c15ull + 0x2545f491u;
    if (!ex || sd_sampler_new(&sp, info.n_vocab, &ex->smp, err) != SD_OK ||
        !(ex->hcache = malloc((size_t)(gmax + 1) * info.n_embd * sizeof(float))) ||
        !(ex->logits = malloc((size_t)info.n_vocab * sizeof(float))) || !(ex->want = malloc((size_t)gmax + 1))) {
        if (ex) ex_free(&ex->base);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the early-exit drafter");
        return NULL;
    }
    memset(ex->want, 1, (size_t)gmax + 1);
    ex->base = (drafter){"early-exit", ex_begin, ex_draft, ex_verify, ex_on_verified, ex_free};
    ex->ctx = target;
    ex->E = E;
    ex->L = info.n_layer;
    ex->V = info.n_vocab;
    ex->D = info.n_embd;
    ex->heads = heads;
    ex->greedy = sd_sampler_is_greedy(smp);
    return &ex->base;
}
