#include "kernels/kern.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kquant.h"
#include "util/fp16.h"

void kern_quantize_q8(const float *x, int n_cols, act_q8 *out) {
    for (int b = 0; b < n_cols / 32; b++) {
        const float *v = x + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = fp16_to_f32(f32_to_fp16(d));
        for (int j = 0; j < 32; j++) out[b].qs[j] = (int8_t)roundf(v[j] * id);
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += out[b].qs[j];
        out[b].s8 = 8 * sum;
    }
}

/* ------------------------------------------------------------------ scalar reference */
#define SCALAR_FLOAT_MM(name, T, CONV)                                                                            \
    static void name(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,   \
                     float *y, int ldy, int r0, int r1) {                                                         \
        for (int r = r0; r < r1; r++) {                                                                           \
            const T *wr = (const T *)(const void *)(w + (size_t)r * row_bytes);                                   \
            for (int p = 0; p < n; p++) {                                                                         \
                const float *xp = (const float *)(const void *)((const char *)x + (size_t)p * x_stride);          \
                float s = 0.0f;                                                                                   \
                for (int c = 0; c < cols; c++) s += CONV(wr[c]) * xp[c];                                          \
                y[(size_t)p * ldy + r] = s;                                                                       \
            }                                                                                                     \
        }                                                                                                         \
    }
#define ID(v) (v)
SCALAR_FLOAT_MM(mm_f32_scalar, float, ID)
SCALAR_FLOAT_MM(mm_f16_scalar, uint16_t, fp16_to_f32)
SCALAR_FLOAT_MM(mm_bf16_scalar, uint16_t, bf16_to_f32)

/* integer dot of one weight block with 32 activation int8s */
static int blk_dot_q8_0(const unsigned char *blk, const int8_t *x) {
    int isum = 0;
    for (int j = 0; j < 32; j++) isum += (int8_t)blk[2 + j] * x[j];
    return isum;
}

static int blk_dot_q4_0(const unsigned char *blk, const int8_t *x) {
    int isum = 0;
    for (int j = 0; j < 16; j++) isum += ((blk[2 + j] & 0x0f) - 8) * x[j] + ((blk[2 + j] >> 4) - 8) * x[16 + j];
    return isum;
}

/* q8_0: s += d_w * d_x * isum per block (FMA = 0); q4_0: s = fma(isum, d_w * d_x, s) (FMA = 1: the AVX2 kernel's
 * chain, the same bits); blocks in order */
#define SCALAR_QUANT_MM(name, BB, DOT, FMA)                                                                            \
    static void name(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,   \
                     float *y, int ldy, int r0, int r1) {                                                         \
        for (int r = r0; r < r1; r++) {                                                                           \
            const unsigned char *wr = w + (size_t)r * row_bytes;                                                  \
            for (int p = 0; p < n; p++) {                                                                         \
                const act_q8 *xp = (const act_q8 *)(const void *)((const char *)x + (size_t)p * x_stride);        \
                float s = 0.0f;                                                                                   \
                for (int b = 0; b < cols / 32; b++) {                                                             \
                    const unsigned char *blk = wr + (BB) * (size_t)b;                                             \
                    uint16_t h;                                                                                   \
                    memcpy(&h, blk, 2);                                                                           \
                    if (FMA) s = fmaf((float)DOT(blk, xp[b].qs), fp16_to_f32(h) * xp[b].d, s);                    \
                    else s += fp16_to_f32(h) * xp[b].d * (float)DOT(blk, xp[b].qs);                               \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = s;                                                                       \
            }                                                                                                     \
        }                                                                                                         \
    }
SCALAR_QUANT_MM(mm_q8_0_scalar, 34, blk_dot_q8_0, 0)
SCALAR_QUANT_MM(mm_q4_0_scalar, 18, blk_dot_q4_0, 1)

/* K-quants (x as act_q8k rows): per super-block the exact integer sums, then the float chain of the kernel llama.cpp
 * runs for the type on x86, so that our products equal its bits: Q6_K, Q5_K and Q3_K its vec_dot's 8 lanes
 * (kq_lanes_ggml), Q4_K and Q2_K its repacked kernels' two fma chains (below). */
static void mm_kq_scalar(uint32_t type, const unsigned char *w, size_t row_bytes, int cols, const void *x,
                         size_t x_stride, int n, float *y, int ldy, int r0, int r1) {
    const int bb = wtype_get(type)->block_bytes, off = kq_offset(type);
    kq_fields f;
    for (int r = r0; r < r1; r++) {
        const unsigned char *wr = w + (size_t)r * row_bytes;
        for (int p = 0; p < n; p++) {
            const act_q8k *xp = (const act_q8k *)(const void *)((const char *)x + (size_t)p * x_stride);
            if (type == GGML_Q6_K || type == GGML_Q5_K || type == GGML_Q3_K) { /* ggml's 8-lane chains (kq_lanes_ggml) */
                float acc[8] = {0}, summs = 0.0f;
                for (int b = 0; b < cols / QK_K; b++) {
                    int32_t lane[8], is, ms;
                    kq_unpack(type, wr + (size_t)bb * b, &f);
                    kq_lanes_ggml(type, &f, off, &xp[b], lane);
                    const float dq = xp[b].d * f.d;
                    for (int l = 0; l < 8; l++) acc[l] = fmaf(dq, (float)lane[l], acc[l]);
                    if (type == GGML_Q5_K) {
                        kq_dot_ints(&f, off, &xp[b], &is, &ms);
                        summs = fmaf(-xp[b].d * f.dmin, (float)ms, summs);
                    }
                }
                y[(size_t)p * ldy + r] = kq_hsum8(acc) + summs;
                continue;
            }
            /* Q4_K, Q2_K: ggml's repacked kernels' chain (the 8x8 gemv/gemm llama.cpp runs them with on x86): one
             * integer sum per super-block, s = fmaf(isum, d_w * d_x, s), m = fmaf(msum, dmin_w * d_x, m); s - m */
            float s = 0.0f, mm = 0.0f;
            for (int b = 0; b < cols / QK_K; b++) {
                int32_t is, ms;
                kq_unpack(type, wr + (size_t)bb * b, &f);
                kq_dot_ints(&f, off, &xp[b], &is, &ms);
                s = fmaf((float)is, f.d * xp[b].d, s);
                mm = fmaf((float)ms, f.dmin * xp[b].d, mm);
            }
            y[(size_t)p * ldy + r] = s - mm;
        }
    }
}
#define SCALAR_KQ_MM(name, T)                                                                                     \
    static void name(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,   \
                     float *y, int ldy, int r0, int r1) {                                                         \
        mm_kq_scalar(T, w, row_bytes, cols, x, x_stride, n, y, ldy, r0, r1);                                      \
    }
SCALAR_KQ_MM(mm_q2_k_scalar, GGML_Q2_K)
SCALAR_KQ_MM(mm_q3_k_scalar, GGML_Q3_K)
SCALAR_KQ_MM(mm_q4_k_scalar, GGML_Q4_K)
SCALAR_KQ_MM(mm_q5_k_scalar, GGML_Q5_K)
SCALAR_KQ_MM(mm_q6_k_scalar, GGML_Q6_K)

static float dot_scalar(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_scalar(float *y, float s, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += s * x[i];
}

static void att_scores_scalar(const float *q, int nh, const float *k, size_t stride, const int *cells, int n, int hd,
                              float scale, float *out, size_t ldo) {
    for (int g = 0; g < nh; g++)
        for (int j = 0; j < n; j++)
            out[g * ldo + j] = dot_scalar(q + (size_t)g * hd, k + (size_t)(cells ? cells[j] : j) * stride, hd) * scale;
}

static void att_mix_scalar(float *o, int nh, const float *p, size_t ldp, const float *v, size_t stride,
                           const int *cells, int n, int hd) {
    for (int g = 0; g < nh; g++)
        for (int j = 0; j < n; j++)
            axpy_scalar(o + (size_t)g * hd, p[g * ldp + j], v + (size_t)(cells ? cells[j] : j) * stride, hd);
}

static float softmax_scalar(float *s, int n) {
    float mx = s[0], sum = 0.0f;
    for (int i = 1; i < n; i++)
        if (s[i] > mx) mx = s[i];
    for (int i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += s[i];
    }
    return sum;
}

static void rmsnorm_scalar(const float *x, const float *g, int n, float eps, float *out) {
    float r = kern_rms_scale(x, n, eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * g[i];
}

static void silu_mul_scalar(float *g, const float *u, size_t n) {
    const size_t n16 = n & ~(size_t)15;
    for (size_t i = 0; i < n16; i++) g[i] = g[i] / (1.0f + kern_ggml_expf(0.0f - g[i])) * u[i];
    for (size_t i = n16; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static const kern_ops SCALAR = {
    .name = "scalar",
    .dot = dot_scalar,
    .axpy = axpy_scalar,
    .att_scores = att_scores_scalar,
    .att_mix = att_mix_scalar,
    .softmax = softmax_scalar,
    .quantize_q8 = kern_quantize_q8,
    .quantize_q8k = kern_quantize_q8k,
    .silu_mul = silu_mul_scalar,
    .rmsnorm = rmsnorm_scalar,
    .mm = {[GGML_F32] = mm_f32_scalar, [GGML_F16] = mm_f16_scalar, [GGML_BF16] = mm_bf16_scalar,
           [GGML_Q8_0] = mm_q8_0_scalar, [GGML_Q4_0] = mm_q4_0_scalar, [GGML_Q2_K] = mm_q2_k_scalar,
           [GGML_Q3_K] = mm_q3_k_scalar, [GGML_Q4_K] = mm_q4_k_scalar, [GGML_Q5_K] = mm_q5_k_scalar,
           [GGML_Q6_K] = mm_q6_k_scalar},
};

const kern_ops *kern_scalar(void) { return &SCALAR; }

const kern_ops *kern_best(void) {
    const char *e = getenv("SPECDEC_KERNELS");
    if (e && strcmp(e, "scalar") == 0) return &SCALAR;
    const kern_ops *a = e && strcmp(e, "avx2") == 0 ? NULL : kern_avx512();
    if (!a) a = kern_avx2();
    return a ? a : &SCALAR;
}
