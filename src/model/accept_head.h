/* accept_head: SpecDec++'s acceptance-prediction head (methods.md 5) on a drafter's hidden state y:
 *   x_0 = y / rms(y)  (a parameter-free RMS normalisation: states of different drafters and depths differ in scale)
 *   x_j = x_{j-1} + SiLU(W_j x_{j-1} + b_j),  j = 1..k   (k = 0..4 residual blocks; "shared": W_j = W_1, b_j = b_1)
 *   a   = sigmoid(w . x_k + c)                           P(the drafted token is accepted | prefix)
 * Stored in its own small GGUF tied to the drafter whose states it reads:
 *   general.architecture = "specdec-accept-head"
 *   specdec.accept_head.{n_embd, n_layer, n_vocab, model_check, depth, blocks, shared}
 *     n_embd/n_layer/n_vocab/model_check: the model whose layers make the state (the draft model, or the target for
 *     early exit and SWIFT; model_check as exit_heads_model_check); depth: the layers it runs (n_layer for a draft
 *     model and SWIFT, E for early exit at E)
 *   specdec.accept_head.skip_mask (SWIFT heads only): the skip set the head was trained on, 2 n_layer characters
 *     '0' / '1' (2l: attention of layer l, 2l+1: its MLP; at least one 1, and layers 0 and n_layer - 1 not skipped: a
 *     file saying otherwise is damaged). A SWIFT head serves SWIFT on the same target with the
 *     same number of skipped sub-layers (the skip ratio's set size), whichever set the optimiser has moved to
 *   tensors accept.blk.<j>.weight [n_embd, n_embd] f32, accept.blk.<j>.bias [n_embd] f32 (j < blocks, or j = 0 when
 *   shared), accept.out.weight [n_embd] f32, accept.out.bias [1] f32. */
#ifndef SD_MODEL_ACCEPT_HEAD_H
#define SD_MODEL_ACCEPT_HEAD_H
#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

enum { ACCEPT_HEAD_MAX_BLOCKS = 4 };

struct sd_accept_head {
    int dim, blocks;  /* D, k */
    bool shared;      /* one block's weights used k times */
    int n_sets;       /* weight sets: shared ? (k > 0) : k */
    float *W;         /* [n_sets][D][D] row-major [out][in] */
    float *b;         /* [n_sets][D] */
    float *w_out;     /* [D] */
    float b_out;
    /* the drafter it was trained for */
    int n_embd, n_layer, n_vocab, depth;
    uint32_t model_check;
    /* SWIFT: the skip set it was trained on ([2 n_layer], 1 = skipped) and its size; NULL / 0 for the others */
    uint8_t *skip;
    int n_skip;
};

/* A head for states of m after `depth` layers, weights zero (a = 0.5). NULL when out of memory or blocks > 4. */
sd_accept_head *accept_head_new(const sd_model *m, int depth, int blocks, bool shared);
/* Makes h a SWIFT head trained on skip set mask[2 n_layer] (copied). false when out of memory. */
bool accept_head_set_skip(sd_accept_head *h, const uint8_t *mask);
/* Weight set of block j (0-based). */
static inline float *accept_head_W(const sd_accept_head *h, int j) {
    return h->W + (size_t)(h->shared ? 0 : j) * h->dim * h->dim;
}
static inline float *accept_head_b(const sd_accept_head *h, int j) {
    return h->b + (size_t)(h->shared ? 0 : j) * h->dim;
}
/* The acceptance logit of state y[D]; x: [blocks + 1][D] out, the block inputs/outputs (the backward pass reads
 * them), pre: [blocks][D] out, the pre-activations W x + b. Returns w . x_k + c. */
float accept_head_logit(const sd_accept_head *h, const float *y, float *x, float *pre);
/* sigmoid(logit) of y, with scratch [(2 blocks + 1) D] floats. */
float accept_head_prob(const sd_accept_head *h, const float *y, float *scratch);
sd_status accept_head_save(const sd_accept_head *h, const char *path, sd_error *err);
#endif
