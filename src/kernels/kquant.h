/* kquant: ggml's K-quant weight types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: super-blocks of 256 values) and the Q8_K
 * activation blocks their kernels multiply with.
 *
 * Every K-quant super-block is described here by the same fields (kq_fields): 256 unsigned levels u, 16 groups of
 * 16 values each with an integer scale sc[g] and min mn[g], and two float factors, so that value i of group g is
 *     d * sc[g] * (u[i] - off) - dmin * mn[g]
 * (off: 0, or 4 for Q3_K and 32 for Q6_K, whose levels are signed; types with sub-blocks of 32 repeat each scale
 * and min for both of its groups; symmetric types have dmin = 0). Layouts, in bytes (fp16 = IEEE half):
 *   Q2_K  84: scales[16] (sc low 4 bits, mn high 4) | qs[64] (2-bit u) | d fp16 | dmin fp16
 *   Q3_K 110: hmask[32] (u bit 2) | qs[64] (u bits 0-1) | scales[12] (16 x 6-bit sc + 32) | d fp16
 *   Q4_K 144: d fp16 | dmin fp16 | scales[12] (8 x 6-bit sc and mn) | qs[128] (4-bit u)
 *   Q5_K 176: d fp16 | dmin fp16 | scales[12] (as Q4_K) | qh[32] (u bit 4) | qs[128] (u bits 0-3)
 *   Q6_K 210: ql[128] (u bits 0-3) | qh[64] (u bits 4-5) | scales[16] (int8 sc) | d fp16
 * Bit placement as ggml: 2-bit fields of value 128 h + 32 j + l sit at bits 2j of byte 32 h + l; Q4_K/Q5_K values
 * 64 j + l and 64 j + 32 + l share byte 32 j + l (low, high nibble), their high bits at bits 2j and 2j + 1 of qh[l];
 * Q6_K values 128 h + l, +32, +64, +96 take the low and high nibbles of ql[64 h + l] and ql[64 h + 32 + l] and bits
 * 0-1, 2-3, 4-5, 6-7 of qh[32 h + l]; Q3_K's high bit of value i is bit i / 32 of hmask[i % 32]. */
#ifndef SD_KERNELS_KQUANT_H
#define SD_KERNELS_KQUANT_H
#include <stdbool.h>
#include <stdint.h>

#include "kernels/wtype.h"

enum { QK_K = 256 };

typedef struct kq_fields {
    uint8_t u[QK_K];  /* levels, 0 .. 2^bits - 1 */
    int16_t sc[16];   /* per group of 16 */
    int16_t mn[16];   /* per group of 16 (0 for symmetric types) */
    float d, dmin;    /* fp16 values as floats */
} kq_fields;

/* Q8_K activations, as ggml: d (float), 256 int8 q with value d * q, and the sums of each 16 q. */
typedef struct act_q8k {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[16];
} act_q8k;

/* True for the five K-quant types. */
bool kq_is_kquant(uint32_t type);
/* The level offset of a K-quant type (value = d * sc * (u - off) - dmin * mn). */
int kq_offset(uint32_t type);
/* A super-block's fields (blk: block_bytes of a K-quant type). */
void kq_unpack(uint32_t type, const unsigned char *blk, kq_fields *f);
/* The scales, mins, d and dmin only (what kernels that unpack the levels themselves need). */
void kq_unpack_scales(uint32_t type, const unsigned char *blk, kq_fields *f);
/* The inverse (fields in range for the type: u < 2^bits, sc/mn within their bits; d, dmin exact fp16 values). */
void kq_pack(uint32_t type, const kq_fields *f, unsigned char *blk);

/* wtype rows: to-float and the reference quantisers (RMSE-reducing per group; see kquant.c) */
void kq_to_float(uint32_t type, const void *row, float *out, int64_t n);
void kq_from_float(uint32_t type, const float *x, void *out, int64_t n);

/* Quantizes x[n_cols] (n_cols % 256 == 0) to n_cols / 256 Q8_K blocks as ggml's reference does: the value of
 * largest magnitude max maps to -127 (iscale = -127 / max), q = min(127, round-half-even(iscale * x)), d = 1 / iscale. */
void kern_quantize_q8k(const float *x, int n_cols, act_q8k *out);

/* The integer dot of one super-block with its activations: *isum = sum_g sc[g] sum_(i in g) (u[i] - off) x[i] and
 * *msum = sum_g mn[g] bsums[g]; its value is (d * x.d) * isum - (dmin * x.d) * msum. */
void kq_dot_ints(const kq_fields *f, int off, const act_q8k *x, int32_t *isum, int32_t *msum);

/* ggml's float chains for Q6_K, Q5_K and Q3_K (arch/x86 ggml_vec_dot_q{6,5,3}_K_q8_K: the AVX2 kernels llama.cpp
 * runs on x86), so that our products equal llama.cpp's to the bit. Per super-block 8 integer lanes:
 * lane L = sum over the 8 chunks c of 32 values of sc[2c + L/4] * sum_(k < 4) v[i] x[i], i = 32c + 4L + k, where
 * v = u - off for Q3_K (its offset per value), v = u otherwise, and Q6_K subtracts its offset through the bsums:
 * minus off * (sc[2L] bsums[2L] + sc[2L+1] bsums[2L+1]). acc[L] = fmaf(d_x * d_w, (float)lane[L], acc[L]) over the
 * super-blocks in order. Q5_K also keeps summs = fmaf(-d_x * dmin_w, (float)msum, summs) (msum of kq_dot_ints).
 * The result is kq_hsum8(acc) + summs. */
void kq_lanes_ggml(uint32_t type, const kq_fields *f, int off, const act_q8k *x, int32_t lane[8]);
/* ggml's hsum_float_8: (a0 + a4) + (a2 + a6) + ((a1 + a5) + (a3 + a7)) in that pairing */
static inline float kq_hsum8(const float a[8]) {
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t2) + (t1 + t3);
}
#endif
