/* att_f16: attention over an fp16 KV cache with the arithmetic of ggml's CPU flash attention (ggml-cpu ops.cpp,
 * ggml_compute_forward_flash_attn_ext_f16_one_chunk, F16 K and V, head sizes below its SIMD step), so that a model
 * run with kv_type f16 computes what llama.cpp computes:
 *   - the query is rounded to fp16 once; each score is the dot of the fp16 query and the fp16 key, exact products
 *     summed in double in element order, rounded to float, then times scale;
 *   - online softmax over the visible cells in order: a new maximum M rescales the fp16 accumulator by
 *     expf(M_old - M) (rounding each element to fp16), otherwise the cell's weight is expf(s - M);
 *   - the accumulator is fp16: acc[e] = fp16(fmaf(v[e], w, acc[e])) per cell; S = fmaf(S, ms, w);
 *   - out = acc * (1 / S).
 * One head at a time, one chain per head over the cells in order: the result does not depend on the block size,
 * the thread or the other heads (batch invariant). */
#ifndef SD_KERNELS_ATT_F16_H
#define SD_KERNELS_ATT_F16_H
#include <stddef.h>
#include <stdint.h>

enum { ATT_F16_MAX_HD = 512 }; /* the largest head size (kv_type f16) */

typedef struct att_f16_state {
    float M, S;                  /* running maximum score, running sum of weights */
    float q[ATT_F16_MAX_HD];     /* the query rounded to fp16 */
    float acc[ATT_F16_MAX_HD];   /* the fp16 accumulator (values that are exact fp16 numbers) */
} att_f16_state;

/* q[hd] -> st (hd <= ATT_F16_MAX_HD) */
void att_f16_begin(att_f16_state *st, const float *q, int hd);
/* n cells, key rows at k + cell * stride and value rows at v + cell * stride (cell = cells[j], or j when cells is
 * NULL), hd IEEE halves each (the kv_type f16 cache); cells in ascending order, runs given in order. */
void att_f16_run(att_f16_state *st, const uint16_t *k, const uint16_t *v, size_t stride, const int *cells, int n,
                 int hd, float scale);
/* o[hd] = acc / S */
void att_f16_end(const att_f16_state *st, int hd, float *o);
#endif
