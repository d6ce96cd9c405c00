/* exit_heads: per-depth affine translators h' = A_d h + b_d (A: n_embd x n_embd) applied to the hidden state after d
 * layers before the shared final norm + LM head (a "tuned lens"), stored in their own GGUF file:
 *   general.architecture = "specdec-exit-heads"; specdec.exit_heads.{n_embd, n_layer, n_vocab, model_check}
 *   tensors exit.<d>.weight [n_embd, n_embd] f32 and exit.<d>.bias [n_embd] f32 for each trained depth d.
 * model_check is a hash of the model's final-norm weights and shape, so heads for another model are refused. */
#ifndef SD_MODEL_EXIT_HEADS_H
#define SD_MODEL_EXIT_HEADS_H
#include <stdint.h>

#include "model/model.h"

struct sd_exit_heads {
    int n_layer, n_embd, n_vocab;
    uint32_t model_check;
    tensor *A; /* [n_layer + 1] indexed by depth; data == NULL: no head at that depth */
    float **b; /* [n_layer + 1] */
    float *store; /* owned weights */
};

uint32_t exit_heads_model_check(const sd_model *m);
/* An empty set for a model (no depth has a head yet); storage for every depth 1..n_layer-1 is allocated and the
 * heads are initialised to identity (A = I, b = 0) but marked absent until set_present. */
sd_exit_heads *exit_heads_new(const sd_model *m);
void exit_heads_set_present(sd_exit_heads *h, int depth);
/* The storage of depth d's A (D x D, row-major [out][in]), present or not; b[d] follows it. */
float *exit_heads_A(sd_exit_heads *h, int d);
sd_status exit_heads_save(const sd_exit_heads *h, const char *path, sd_error *err);
/* Whether a head exists for depth d. */
static inline int exit_heads_has(const sd_exit_heads *h, int d) {
    return h && d >= 1 && d < h->n_layer && h->A[d].data != NULL;
}
#endif
