/* draft_bound: SpecBound (methods.md 3). Each round's tokens go through the target layer by layer:
 *  - after each layer (depth d <= D) the exit head gives z; the token exits when max softmax(z / T_d) >= tau with
 *    T_d = 1 + alpha (1 - d/L); the draft is argmax z and the token's state stays cached at depth d;
 *  - a token that reaches the depth bound D without exiting stops the round (the verification pass decodes it); W bounds the width;
 *  - "reuse": before a token runs layer l, every earlier token of the round lacking layer l gets it from its cached
 *    state, in one block pass per layer (depths along the round never increase, so they form a suffix);
 *  - verification aligns all tokens to the deepest depth reached (block passes) and runs the remaining layers once
 *    over the whole block.
 * Every layer of every position is computed exactly once, so the cache and the logits equal plain decoding's. */
#include <stdlib.h>
#include <string.h>

#include "model/exit_heads.h"
#include "speculative/accept.h"
#include "speculative/spec.h"
#include "util/err.h"

typedef struct bound_drafter {
    drafter base;
    sd_ctx *ctx;
    int seq;
    const sd_exit_heads *heads;
    int L, V, D, n_tok;
    float tau, alpha;
    int depth_bound;
    float *st;      /* [gmax + 1][D] each round token's state at its current depth */
    int *dep;       /* [gmax + 1] layers run so far */
    float *tmp;     /* [gmax + 1][D] block pass output */
    float *logits;  /* [V] */
} bound_drafter;

/* Runs layer l for round tokens [a, b) (all at depth l) in one block. */
static sd_status run_layer(bound_drafter *bd, int a, int b, int l, sd_error *err) {
    const int D = bd->D;
    sd_forward_args fa = {.layer_begin = l, .layer_end = l + 1, .hidden = bd->tmp};
    sd_status st = sd_forward(bd->ctx, &(sd_block){.n = b - a, .embd = bd->st + (size_t)a * D, .seq_all = bd->seq}, &fa, err);
    if (st) return st;
    memcpy(bd->st + (size_t)a * D, bd->tmp, (size_t)(b - a) * D * sizeof(float));
    for (int j = a; j < b; j++) bd->dep[j] = l + 1;
    return SD_OK;
}

/* Brings round tokens [0, upto) to depth >= t ("reuse"): layer by layer over the suffix that lacks it. */
static sd_status extend(bound_drafter *bd, int upto, int t, sd_error *err) {
    if (upto == 0) return SD_OK;
    for (int l = bd->dep[upto - 1]; l < t; l++) {
        int s = upto;
        while (s > 0 && bd->dep[s - 1] <= l) s--;
        if (s < upto) {
            sd_status st = run_layer(bd, s, upto, l, err);
            if (st) return st;
        }
    }
    return SD_OK;
}

static int bd_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    bound_drafter *bd = (bound_drafter *)d;
    const int D = bd->D;
    (void)c;
    t->onehot = true;
    int k = 0;
    int32_t x = hist[n - 1];
    for (int i = 0;; i++) { /* token i of the round: the pending token, then the drafts */
        bd->n_tok = i + 1;
        bd->dep[i] = 0;
        if (k >= max) break; /* width bound reached: token i waits for the verification pass */
        /* layer 0 from the token id, later layers from the state */
        bool exited = false;
        for (int l = 0; l < bd->depth_bound && !exited; l++) {
            if (extend(bd, i, l + 1, err)) return -1;
            sd_forward_args fa = {.layer_begin = l, .layer_end = l + 1, .hidden = bd->tmp};
            sd_block blk = l == 0 ? (sd_block){.n = 1, .token = &x, .seq_all = bd->seq}
                                   : (sd_block){.n = 1, .embd = bd->st + (size_t)i * D, .seq_all = bd->seq};
            if (sd_forward(bd->ctx, &blk, &fa, err)) return -1;
            memcpy(bd->st + (size_t)i * D, bd->tmp, (size_t)D * sizeof(float));
            bd->dep[i] = l + 1;
            int depth = l + 1; /* exits are checked up to and including the bound D (D < L) */
            if (sd_lm_head(bd->ctx, bd->st + (size_t)i * D, 1, depth, bd->heads, bd->logits, err)) return -1;
            int32_t best = accept_argmax(bd->logits, bd->V);
            float T = 1.0f + bd->alpha * (1.0f - (float)depth / (float)bd->L);
            if (accept_top1_prob(bd->logits, bd->V, best, T) >= bd->tau) {
                t->token[k] = best;
                hist[n + k] = best;
                k++;
                x = best;
                exited = true;
            }
        }
        if (!exited) break; /* reached the depth bound: stop speculating */
    }
    return k;
}

/* Brings every round token to the deepest exit reached; the verification pass runs the remaining layers once. */
static sd_status bd_plan(drafter *d, const int32_t *hist, int n, const draft_tree *t, int k, verify_plan *vp,
                         sd_error *err) {
    bound_drafter *bd = (bound_drafter *)d;
    (void)hist, (void)n;
    const int D = bd->D;
    /* tokens with no layer yet (the last draft when the width bound ended the round) need the embedding pass */
    int nt = k + 1;
    int dstar = 0;
    for (int j = 0; j < nt; j++) dstar = bd->dep[j] > dstar ? bd->dep[j] : dstar;
    if (dstar == 0) dstar = 1;
    for (int j = 0; j < nt; j++)
        if (bd->dep[j] == 0) { /* only ever the last token */
            int32_t x = j == 0 ? hist[n - 1] : t->token[j - 1];
            sd_status st = extend(bd, j, 1, err);
            if (st) return st;
            st = sd_forward(bd->ctx, &(sd_block){.n = 1, .token = &x, .seq_all = bd->seq},
                            &(sd_forward_args){.layer_begin = 0, .layer_end = 1, .hidden = bd->st + (size_t)j * D}, err);
            if (st) return st;
            bd->dep[j] = 1;
        }
    sd_status st = extend(bd, nt, dstar, err); /* align everything to the deepest exit */
    if (st) return st;
    if (dstar >= bd->L) return err_set(err, SD_ERR_ARG, "internal: SpecBound depth reached L");
    *vp = (verify_plan){.layer_begin = dstar, .embd = bd->st};
    return SD_OK;
}

static void bd_free(drafter *d) {
    bound_drafter *bd = (bound_drafter *)d;
    free(bd->st);
    free(bd->dep);
    free(bd->tmp);
    free(bd->logits);
    free(bd);
}

drafter *drafter_bound_new(sd_ctx *target, int seq, const sd_spec_params *sp, const sd_exit_heads *heads, int gmax, sd_error *err) {
    bound_drafter *bd = calloc(1, sizeof *bd);
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(target), &info);
    if (bd) {
        bd->st = malloc((size_t)(gmax + 1) * info.n_embd * sizeof(float));
        bd->tmp = malloc((size_t)(gmax + 1) * info.n_embd * sizeof(float));
        bd->dep = calloc((size_t)gmax + 1, sizeof(int));
        bd->logits = malloc((size_t)info.n_vocab * sizeof(float));
    }
    if (!bd || !bd->st || !bd->tmp || !bd->dep || !bd->logits) {
        if (bd) bd_free(&bd->base);
        err_set(err, SD_ERR_NOMEM, "out of memory creating the SpecBound drafter");
        return NULL;
    }
    bd->base = (drafter){"specbound", 0, NULL, bd_draft, bd_plan, NULL, NULL, bd_free, NULL, NULL, NULL, NULL, NULL};
    bd->ctx = target;
    bd->seq = seq;
    bd->heads = heads;
    bd->L = info.n_layer;
    bd->V = info.n_vocab;
    bd->D = info.n_embd;
    bd->tau = sp->sb_tau;
    bd->alpha = sp->sb_alpha;
    bd->depth_bound = sp->sb_depth ? sp->sb_depth : (3 * info.n_layer) / 4;
    if (bd->depth_bound < 1) bd->depth_bound = 1;
    return &bd->base;
}
