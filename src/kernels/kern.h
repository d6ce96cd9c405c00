/* kern: matrix-times-block kernels per weight type, a scalar reference for each and AVX2/FMA/F16C versions,
 * chosen once at run time.
 *
 * Y[p][r] = sum_c W[r][c] * X[p][c] for rows r in [r0, r1) and positions p in [0, n).
 * Batch invariance: the value of Y[p][r] is computed by the same sequence of operations whatever n, the tile
 * a position falls in, or the row range (thread split): one accumulation chain per (row, position) over the
 * columns in a fixed order. q4_0: one float chain over the 32-blocks, s = fma((float)isum_b, d_w * d_x, s) with isum_b
 * the exact integer dot of the block, in every table (so the AVX2 bits equal the scalar ones; kern_tile.h); the
 * K-quants: the scalar expression of kern.c in every table.
 * Quantized types take the activations pre-quantized, as llama.cpp does, in their
 * type's activation format (wtype.h): q8_0 and q4_0 to act_q8 blocks (kern_quantize_q8), the K-quants to act_q8k
 * blocks (kern_quantize_q8k, kquant.h), and use integer dot products per block. */
#ifndef SD_KERNELS_KERN_H
#define SD_KERNELS_KERN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

#include "kernels/wtype.h"

struct act_q8k; /* the K-quants' activation block (kquant.h) */

/* An activation block of 32 values: the fp16-rounded scale as float + 32 int8, and s8 = 8 * (sum of the qs)
 * (lets q4_0 kernels multiply the stored unsigned nibbles directly: sum (n - 8) x = sum n x - 8 sum x). */
typedef struct act_q8 {
    float d;
    int8_t qs[32];
    int32_t s8;
} act_q8;

/* w: [rows][row_bytes] weights; x: [n][x_stride bytes] float rows (float types) or activation block rows (quantized);
 * y: [n][ldy] floats. cols: elements per row. */
typedef void kern_mm(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                     float *y, int ldy, int r0, int r1);
typedef kern_mm *kern_mm_fn;

typedef struct kern_ops {
    const char *name;  /* "scalar" or "avx2" */
    kern_mm_fn mm[GGML_TYPE_LIMIT]; /* indexed by ggml type (wtype.h); NULL = unsupported */
    /* attention helpers (fixed order for a given n): sum a[i]*b[i]; y[i] += s * x[i] */
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float *y, float s, const float *x, int n);
    /* Attention of nh heads over n visible cells, keys and values at base + cell * stride (cell = cells[j], or j
     * when cells is NULL), hd values each; the heads' queries q and sums o are [nh][hd]. att_scores:
     * out[g * ldo + j] = dot(q_g, key_j) * scale, each dot the same chain as dot(). att_mix: o_g[e] += p[g * ldp + j]
     * * value_j[e] for j in order, each o_g[e] the same chain as repeated axpy(). So a head's results do not depend on
     * nh or on which heads it is computed with. */
    void (*att_scores)(const float *q, int nh, const float *k, size_t stride, const int *cells, int n, int hd,
                       float scale, float *out, size_t ldo);
    void (*att_mix)(float *o, int nh, const float *p, size_t ldp, const float *v, size_t stride, const int *cells, int n,
                    int hd);
    /* s[i] = exp(s[i] - max(s)) in place for i < n (n >= 1); returns their sum. The same n values give the same
     * bits whatever the caller. */
    float (*softmax)(float *s, int n);
    /* kern_quantize_q8, the same bits */
    void (*quantize_q8)(const float *x, int n_cols, act_q8 *out);
    /* kern_quantize_q8k (kquant.h), the same bits */
    void (*quantize_q8k)(const float *x, int n_cols, struct act_q8k *out);
    /* out[i] = x[i] * r * g[i], r = kern_rms_scale(x, n, eps) */
    void (*rmsnorm)(const float *x, const float *g, int n, float eps, float *out);
    /* g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n, as ggml's CPU swiglu on a row of n:
     * whole groups of 16 with kern_ggml_expf (its AVX-512 ggml_v_expf), the rest with libm expf. Both tables give
     * the same bits. */
    void (*silu_mul)(float *g, const float *u, size_t n);
    /* Runs iters steps of a type's inner arithmetic with every operand in registers; returns the multiply-adds
     * done (0: not provided). For measuring the compute ceiling (kern_peak). */
    double (*peak)(uint32_t type, long iters);
} kern_ops;

const kern_ops *kern_scalar(void);
const kern_ops *kern_avx2(void); /* NULL when the build or the CPU lacks AVX2+FMA+F16C */
/* AVX-512 F/BW/VL/VNNI on top of AVX2 (NULL without): the float types' blocks in 512-bit vectors, the same bits as
 * the avx2 table (kern_avx512.h); everything else is the avx2 table's. */
const kern_ops *kern_avx512(void);
/* The best table for this machine (avx512, else avx2, else scalar); SPECDEC_KERNELS=scalar or =avx2 forces that
 * table (when the CPU has it). */
const kern_ops *kern_best(void);

/* Multiply-adds per second of the best table's inner step for a ggml type on n_threads threads at once (each runs
 * the step for about `seconds`; best of 3). Returns 0 when the type has no such step (scalar table, other types)
 * and -1 when threads cannot be started. */
double kern_peak(uint32_t type, int n_threads, double seconds);

/* The RMSNorm scale of x[n] as ggml computes it on the CPU: float squares summed in double in order, the mean
 * rounded to float, r = 1 / sqrtf(mean + eps) (both tables' rmsnorm use it). */
static inline float kern_rms_scale(const float *x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float sq = x[i] * x[i];
        sum += (double)sq;
    }
    const float mean = (float)(sum / n);
    return 1.0f / sqrtf(mean + eps);
}

/* ggml's vector expf (ggml-cpu vec.h ggml_v_expf, AVX-512: within 1.5 ulp) one value at a time, the same operations
 * (fma where it uses one), so the same bits. */
static inline float kern_ggml_expf(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n); /* scalef: j * 2^n, rounded once */
}

/* Quantizes x[n_cols] (n_cols % 32 == 0) to n_cols/32 blocks: d = max |x| / 127 (stored fp16-rounded),
 * q = round(x / d) with halves away from zero (the reference; the tables' quantize_q8 gives the same bits). */
void kern_quantize_q8(const float *x, int n_cols, act_q8 *out);
#endif
