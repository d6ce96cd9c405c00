/* draft_exit: early-exit self-speculation (LayerSkip; methods.md 1). Drafting runs the pending token and then each
 * drafted token through layers [0, E) of the target itself, one position at a time: their K/V go into the
 * target's own cache (layers below E) and their states after layer E-1 are kept (the exit cache); the exit's
 * logits (final norm + LM head, or a trained head) give the next draft. Verification runs layers [E, L) once over
 * the cached states of the whole block; layers below E are never recomputed. Rejected positions are dropped from
 * every layer by the engine's rollback. Exact because "layers [0, E) one position at a time" produces the same
 * bits as any block (batch invariance). */
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "ctrl/del.h"
#include "model/exit_heads.h"
#include "speculative/accept.h"
#include "speculative/spec.h"
#include "util/err.h"

typedef struct exit_drafter {
    drafter base;
    sd_ctx *ctx;
    int seq;
    int E, L, V, D;
    const sd_exit_heads *heads;
    sd_sampler *smp;
    bool greedy;
    float *hcache;  /* [gmax + 1][D] states after layer E-1 of the round's pending token and drafts */
    int n_cached;   /* entries of hcache filled this round */
    float *logits;  /* [V] */
    uint8_t *want;  /* [gmax + 1] all ones */
    /* DEL */
    del_state *del;
    int del_init, P;  /* prompt positions for the initial statistics; P = max(del_init, gmax + 1) */
    float *hall;      /* [P][L][D] state of each round position after every depth 1..L (index depth - 1) */
    float *hl;        /* [L][P][D] hidden_layers scratch */
    int32_t *tgt;     /* [P] target (argmax) token at each position */
    float *sh_in;     /* [P][D] gathered states of one depth */
    float *sh_logits; /* [P][V] */
    uint8_t *match;   /* [L][P] */
    float *conf;      /* [L][P] */
} exit_drafter;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* DEL: shadow tokens of positions [0, npos) at every candidate depth vs the target tokens tgt, into the stats. */
static void del_shadows(exit_drafter *ex, int npos) {
    double t0 = now_s();
    const int D = ex->D, L = ex->L, V = ex->V;
    for (int l = 1; l < L; l++) {
        if (!ex->del->cand[l]) continue;
        for (int i = 0; i < npos; i++)
            memcpy(ex->sh_in + (size_t)i * D, ex->hall + ((size_t)i * L + (l - 1)) * D, (size_t)D * sizeof(float));
        if (sd_lm_head(ex->ctx, ex->sh_in, npos, l, ex->heads, ex->sh_logits, NULL) != SD_OK) return;
        for (int i = 0; i < npos; i++) {
            const float *z = ex->sh_logits + (size_t)i * V;
            int32_t b = accept_argmax(z, V);
            ex->match[(size_t)l * npos + i] = b == ex->tgt[i];
            ex->conf[(size_t)l * npos + i] = accept_top1_prob(z, V, b, 1.0f);
        }
    }
    del_observe(ex->del, npos, ex->match, ex->conf);
    del_choose(ex->del);
    ex->base.t_aux += now_s() - t0;
}

/* Keeps the per-depth states of block positions [first, first + n) from a hidden_layers buffer of layers
 * [lb, le) over n positions. */
static void keep_states(exit_drafter *ex, const float *hl, int lb, int le, int first, int n) {
    const int D = ex->D, L = ex->L;
    for (int l = lb; l < le; l++)
        for (int i = 0; i < n; i++)
            memcpy(ex->hall + ((size_t)(first + i) * L + l) * D, hl + ((size_t)(l - lb) * n + i) * D, (size_t)D * sizeof(float));
}

static sd_status ex_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    exit_drafter *ex = (exit_drafter *)d;
    if (!ex->del) return SD_OK; /* the target's own cache is the draft's */
    /* DEL: statistics from the last prompt tokens — re-run them (same bits into the same cache cells) keeping
     * every depth's state and the target's tokens */
    int m = ex->del_init < n - 1 ? ex->del_init : n - 1;
    if (m > sd_ctx_n_batch(ex->ctx)) m = sd_ctx_n_batch(ex->ctx);
    if (m < 1) return SD_OK;
    sd_kv_truncate(ex->ctx, ex->seq, n - 1 - m, NULL);
    sd_forward_args a = {.want_logits = ex->want, .logits = ex->sh_logits, .hidden_layers = ex->hl};
    sd_status st = sd_forward(ex->ctx, &(sd_block){.n = m, .token = hist + n - 1 - m, .seq_all = ex->seq}, &a, err);
    if (st) return st;
    double t0 = now_s();
    keep_states(ex, ex->hl, 0, ex->L, 0, m);
    for (int i = 0; i < m; i++) ex->tgt[i] = accept_argmax(ex->sh_logits + (size_t)i * ex->V, ex->V);
    ex->base.t_aux += now_s() - t0;
    del_shadows(ex, m);
    return SD_OK;
}

/* Runs token x (at the next position) through layers [0, E): exit state into hcache[n_cached]; exit logits if asked. */
static sd_status exit_step(exit_drafter *ex, int32_t x, bool want_logits, sd_error *err) {
    sd_forward_args a = {.layer_begin = 0, .layer_end = ex->E, .hidden = ex->hcache + (size_t)ex->n_cached * ex->D,
                         .logits = want_logits ? ex->logits : NULL, .exit_heads = ex->heads,
                         .hidden_layers = ex->del ? ex->hl : NULL};
    sd_status st = sd_forward(ex->ctx, &(sd_block){.n = 1, .token = &x, .seq_all = ex->seq}, &a, err);
    if (st) return st;
    if (ex->del) keep_states(ex, ex->hl, 0, ex->E, ex->n_cached, 1);
    ex->n_cached++;
    return SD_OK;
}

static int ex_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    exit_drafter *ex = (exit_drafter *)d;
    t->onehot = false;
    ex->n_cached = 0;
    if (ex->del) ex->E = ex->del->E;
    int32_t x = hist[n - 1];
    int k = 0;
    while (k < max) {
        if (exit_step(ex, x, true, err)) return -1;
        const float *state = ex->hcache + (size_t)(ex->n_cached - 1) * ex->D;
        if ((x = draft_chain_step(t, c, ex->smp, ex->greedy, ex->logits, ex->V, state, ex->D, hist, n, k)) < 0) break;
        k++;
    }
    return k;
}

static sd_status ex_plan(drafter *d, const int32_t *hist, int n, const draft_tree *t, int k, verify_plan *vp,
                         sd_error *err) {
    exit_drafter *ex = (exit_drafter *)d;
    /* the last draft has not been through layers [0, E) yet (unless drafting stopped on the controller) */
    if (ex->n_cached == k && k > 0 && exit_step(ex, t->token[k - 1], false, err)) return err ? err->status : SD_ERR_ARG;
    if (ex->n_cached == 0 && exit_step(ex, hist[n - 1], false, err)) return err ? err->status : SD_ERR_ARG;
    *vp = (verify_plan){.layer_begin = ex->E, .embd = ex->hcache, .hidden_layers = ex->del ? ex->hl : NULL};
    return SD_OK;
}

/* DEL: the deep layers' states and the target's tokens of the round, for the shadow tokens */
static void ex_verified(drafter *d, const float *logits, int k) {
    exit_drafter *ex = (exit_drafter *)d;
    if (!ex->del) return;
    keep_states(ex, ex->hl, ex->E, ex->L, 0, k + 1);
    for (int i = 0; i <= k; i++) ex->tgt[i] = accept_argmax(logits + (size_t)i * ex->V, ex->V);
}

static void ex_on_verified(drafter *d, const int32_t *hist, int n, int n_acc) {
    exit_drafter *ex = (exit_drafter *)d;
    (void)hist, (void)n;
    /* DEL: positions 0..u of the round (u = accepted drafts) are compared with the target */
    if (ex->del && del_wants_shadows(ex->del)) del_shadows(ex, n_acc + 1);
}

void drafter_exit_set_depth(drafter *d, int E) { ((exit_drafter *)d)->E = E; }

static void ex_free(drafter *d) {
    exit_drafter *ex = (exit_drafter *)d;
    sd_sampler_free(ex->smp);
    free(ex->hcache);
    free(ex->logits);
    free(ex->want);
    free(ex->hall);
    free(ex->hl);
    free(ex->tgt);
    free(ex->sh_in);
    free(ex->sh_logits);
    free(ex->match);
    free(ex->conf);
    free(ex);
}

drafter *drafter_exit_new(sd_ctx *target, int seq, int E, const sd_exit_heads *heads, const sd_sampler *smp, int gmax,
                          del_state *del, int del_init, sd_error *err) {
    exit_drafter *ex = calloc(1, sizeof *ex);
    const sd_model *m = sd_ctx_model(target);
    sd_model_info info;
    sd_model_get_info(m, &info);
    if (!ex || draft_sampler_new(smp, info.n_vocab, 0x2545f491u, &ex->smp, NULL, err) != SD_OK ||
        !(ex->hcache = malloc((size_t)(gmax + 1) * info.n_embd * sizeof(float))) ||
        !(ex->logits = malloc((size_t)info.n_vocab * sizeof(float))) || !(ex->want = malloc((size_t)gmax + 1))) {
        if (ex) ex_free(&ex->base);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the early-exit drafter");
        return NULL;
    }
    if (del) {
        const int L = info.n_layer, D = info.n_embd, V = info.n_vocab;
        int P = del_init > gmax + 1 ? del_init : gmax + 1;
        ex->P = P;
        ex->hall = malloc((size_t)P * L * D * sizeof(float));
        ex->hl = malloc((size_t)L * P * D * sizeof(float));
        ex->tgt = malloc((size_t)P * sizeof *ex->tgt);
        ex->sh_in = malloc((size_t)P * D * sizeof(float));
        ex->sh_logits = malloc((size_t)P * V * sizeof(float));
        ex->match = malloc((size_t)L * P);
        ex->conf = malloc((size_t)L * P * sizeof(float));
        uint8_t *w = realloc(ex->want, (size_t)P);
        if (w) ex->want = w;
        if (!ex->hall || !ex->hl || !ex->tgt || !ex->sh_in || !ex->sh_logits || !ex->match || !ex->conf || !w) {
            ex_free(&ex->base);
            err_set(err, SD_ERR_NOMEM, "out of memory creating the DEL drafter");
            return NULL;
        }
        ex->del = del;
        ex->del_init = del_init;
        memset(ex->want, 1, (size_t)P);
    } else {
        memset(ex->want, 1, (size_t)gmax + 1);
    }
    ex->base = (drafter){del ? "del" : "early-exit", 0, ex_begin, ex_draft, ex_plan, ex_verified, ex_on_verified, ex_free, NULL, NULL, NULL, NULL, NULL};
    ex->ctx = target;
    ex->seq = seq;
    ex->E = E;
    ex->L = info.n_layer;
    ex->V = info.n_vocab;
    ex->D = info.n_embd;
    ex->heads = heads;
    ex->greedy = sd_sampler_is_greedy(smp);
    return &ex->base;
}
