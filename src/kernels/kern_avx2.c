/* AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c; it is only called after a
 * CPU check). Tiling: 4 positions share each weight load (blocks, verification); leftover positions are done
 * 4 rows at a time (decode). Either way each (row, position) output is one accumulation chain over the
 * columns in the same order, then the same horizontal sum, so results do not depend on the tiling. */
#include "kernels/kern.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "io/gguf.h"
#include "util/fp16.h"

static inline float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

static inline __m256 ld_f32(const void *w, int c) { return _mm256_loadu_ps((const float *)w + c); }
static inline __m256 ld_f16(const void *w, int c) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + c)));
}
static inline __m256 ld_bf16(const void *w, int c) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
static inline float sc_f32(const void *w, int c) { return ((const float *)w)[c]; }
static inline float sc_f16(const void *w, int c) { return fp16_to_f32(((const uint16_t *)w)[c]); }
static inline float sc_bf16(const void *w, int c) { return bf16_to_f32(((const uint16_t *)w)[c]); }

#define XROW(p) ((const float *)(const void *)((const char *)x + (size_t)(p)*x_stride))

#define AVX2_FLOAT_MM(name, LD, SC)                                                                               \
    static void name(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,   \
                     float *y, int ldy, int r0, int r1) {                                                         \
        const int c8 = cols & ~7;                                                                                 \
        int p = 0;                                                                                                \
        for (; p + 4 <= n; p += 4) {                                                                              \
            const float *x0 = XROW(p), *x1 = XROW(p + 1), *x2 = XROW(p + 2), *x3 = XROW(p + 3);                  \
            for (int r = r0; r < r1; r++) {                                                                       \
                const void *wr = w + (size_t)r * row_bytes;                                                       \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                       \
                for (int c = 0; c < c8; c += 8) {                                                                 \
                    __m256 wv = LD(wr, c);                                                                        \
                    a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x0 + c), a0);                                        \
                    a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x1 + c), a1);                                        \
                    a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x2 + c), a2);                                        \
                    a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x3 + c), a3);                                        \
                }                                                                                                 \
                float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);                             \
                for (int c = c8; c < cols; c++) {                                                                 \
                    float wc = SC(wr, c);                                                                         \
                    s0 += wc * x0[c];                                                                             \
                    s1 += wc * x1[c];                                                                             \
                    s2 += wc * x2[c];                                                                             \
                    s3 += wc * x3[c];                                                                             \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = s0;                                                                      \
                y[(size_t)(p + 1) * ldy + r] = s1;                                                                \
                y[(size_t)(p + 2) * ldy + r] = s2;                                                                \
                y[(size_t)(p + 3) * ldy + r] = s3;                                                                \
            }                                                                                                     \
        }                                                                                                         \
        for (; p < n; p++) {                                                                                      \
            const float *x0 = XROW(p);                                                                            \
            int r = r0;                                                                                           \
            for (; r + 4 <= r1; r += 4) {                                                                         \
                const void *w0 = w + (size_t)r * row_bytes, *w1 = w + (size_t)(r + 1) * row_bytes;               \
                const void *w2 = w + (size_t)(r + 2) * row_bytes, *w3 = w + (size_t)(r + 3) * row_bytes;         \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                       \
                for (int c = 0; c < c8; c += 8) {                                                                 \
                    __m256 xv = _mm256_loadu_ps(x0 + c);                                                          \
                    a0 = _mm256_fmadd_ps(LD(w0, c), xv, a0);                                                      \
                    a1 = _mm256_fmadd_ps(LD(w1, c), xv, a1);                                                      \
                    a2 = _mm256_fmadd_ps(LD(w2, c), xv, a2);                                                      \
                    a3 = _mm256_fmadd_ps(LD(w3, c), xv, a3);                                                      \
                }                                                                                                 \
                float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);                             \
                for (int c = c8; c < cols; c++) {                                                                 \
                    s0 += SC(w0, c) * x0[c];                                                                      \
                    s1 += SC(w1, c) * x0[c];                                                                      \
                    s2 += SC(w2, c) * x0[c];                                                                      \
                    s3 += SC(w3, c) * x0[c];                                                                      \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = s0;                                                                      \
                y[(size_t)p * ldy + r + 1] = s1;                                                                  \
                y[(size_t)p * ldy + r + 2] = s2;                                                                  \
                y[(size_t)p * ldy + r + 3] = s3;                                                                  \
            }                                                                                                     \
            for (; r < r1; r++) {                                                                                 \
                const void *w0 = w + (size_t)r * row_bytes;                                                       \
                __m256 a0 = _mm256_setzero_ps();                                                                  \
                for (int c = 0; c < c8; c += 8) a0 = _mm256_fmadd_ps(LD(w0, c), _mm256_loadu_ps(x0 + c), a0);    \
                float s0 = hsum8(a0);                                                                             \
                for (int c = c8; c < cols; c++) s0 += SC(w0, c) * x0[c];                                          \
                y[(size_t)p * ldy + r] = s0;                                                                      \
            }                                                                                                     \
        }                                                                                                         \
    }

AVX2_FLOAT_MM(mm_f32_avx2, ld_f32, sc_f32)
AVX2_FLOAT_MM(mm_f16_avx2, ld_f16, sc_f16)
AVX2_FLOAT_MM(mm_bf16_avx2, ld_bf16, sc_bf16)

/* ---- quantized: integer dot of 32 int8 pairs, as 8 float lanes */
static inline __m256 dot_i8(__m256i wq, __m256i xq) {
    __m256i ax = _mm256_sign_epi8(wq, wq);
    __m256i sy = _mm256_sign_epi8(xq, wq);
    __m256i d16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, _mm256_set1_epi16(1)));
}

static inline __m256i unpack_q8(const unsigned char *blk) { return _mm256_loadu_si256((const __m256i *)(blk + 2)); }
static inline __m256i unpack_q4(const unsigned char *blk) {
    __m128i t = _mm_loadu_si128((const __m128i *)(blk + 2));
    __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_sub_epi8(_mm256_and_si256(b, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}
static inline float blk_d(const unsigned char *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

#define XQ(p) ((const act_q8 *)(const void *)((const char *)x + (size_t)(p)*x_stride))

#define AVX2_QUANT_MM(name, BB, UNPACK)                                                                           \
    static void name(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,   \
                     float *y, int ldy, int r0, int r1) {                                                         \
        const int nb = cols / 32;                                                                                 \
        int p = 0;                                                                                                \
        for (; p + 4 <= n; p += 4) {                                                                              \
            const act_q8 *x0 = XQ(p), *x1 = XQ(p + 1), *x2 = XQ(p + 2), *x3 = XQ(p + 3);                          \
            for (int r = r0; r < r1; r++) {                                                                       \
                const unsigned char *wr = w + (size_t)r * row_bytes;                                              \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                       \
                for (int b = 0; b < nb; b++) {                                                                    \
                    const unsigned char *blk = wr + (size_t)b * BB;                                               \
                    __m256i wq = UNPACK(blk);                                                                     \
                    float dw = blk_d(blk);                                                                        \
                    a0 = _mm256_fmadd_ps(_mm256_set1_ps(dw * x0[b].d),                                            \
                                         dot_i8(wq, _mm256_loadu_si256((const __m256i *)x0[b].qs)), a0);          \
                    a1 = _mm256_fmadd_ps(_mm256_set1_ps(dw * x1[b].d),                                            \
                                         dot_i8(wq, _mm256_loadu_si256((const __m256i *)x1[b].qs)), a1);          \
                    a2 = _mm256_fmadd_ps(_mm256_set1_ps(dw * x2[b].d),                                            \
                                         dot_i8(wq, _mm256_loadu_si256((const __m256i *)x2[b].qs)), a2);          \
                    a3 = _mm256_fmadd_ps(_mm256_set1_ps(dw * x3[b].d),                                            \
                                         dot_i8(wq, _mm256_loadu_si256((const __m256i *)x3[b].qs)), a3);          \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = hsum8(a0);                                                               \
                y[(size_t)(p + 1) * ldy + r] = hsum8(a1);                                                         \
                y[(size_t)(p + 2) * ldy + r] = hsum8(a2);                                                         \
                y[(size_t)(p + 3) * ldy + r] = hsum8(a3);                                                         \
            }                                                                                                     \
        }                                                                                                         \
        for (; p < n; p++) {                                                                                      \
            const act_q8 *x0 = XQ(p);                                                                             \
            int r = r0;                                                                                           \
            for (; r + 2 <= r1; r += 2) {                                                                         \
                const unsigned char *w0 = w + (size_t)r * row_bytes, *w1 = w0 + row_bytes;                       \
                __m256 a0 = _mm256_setzero_ps(), a1 = a0;                                                         \
                for (int b = 0; b < nb; b++) {                                                                    \
                    __m256i xv = _mm256_loadu_si256((const __m256i *)x0[b].qs);                                   \
                    const unsigned char *b0 = w0 + (size_t)b * BB, *b1 = w1 + (size_t)b * BB;                     \
                    a0 = _mm256_fmadd_ps(_mm256_set1_ps(blk_d(b0) * x0[b].d), dot_i8(UNPACK(b0), xv), a0);       \
                    a1 = _mm256_fmadd_ps(_mm256_set1_ps(blk_d(b1) * x0[b].d), dot_i8(UNPACK(b1), xv), a1);       \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = hsum8(a0);                                                               \
                y[(size_t)p * ldy + r + 1] = hsum8(a1);                                                           \
            }                                                                                                     \
            for (; r < r1; r++) {                                                                                 \
                const unsigned char *w0 = w + (size_t)r * row_bytes;                                              \
                __m256 a0 = _mm256_setzero_ps();                                                                  \
                for (int b = 0; b < nb; b++) {                                                                    \
                    const unsigned char *b0 = w0 + (size_t)b * BB;                                                \
                    a0 = _mm256_fmadd_ps(_mm256_set1_ps(blk_d(b0) * x0[b].d),                                     \
                                         dot_i8(UNPACK(b0), _mm256_loadu_si256((const __m256i *)x0[b].qs)), a0);  \
                }                                                                                                 \
                y[(size_t)p * ldy + r] = hsum8(a0);                                                               \
            }                                                                                                     \
        }                                                                                                         \
    }

AVX2_QUANT_MM(mm_q8_0_avx2, 34, unpack_q8)
AVX2_QUANT_MM(mm_q4_0_avx2, 18, unpack_q4)

static const kern_ops AVX2 = {
    .name = "avx2",
    .mm = {[GGML_F32] = mm_f32_avx2, [GGML_F16] = mm_f16_avx2, [GGML_BF16] = mm_bf16_avx2,
           [GGML_Q8_0] = mm_q8_0_avx2, [GGML_Q4_0] = mm_q4_0_avx2},
};

/* CPUID: AVX2 (leaf 7 EBX bit 5), FMA (leaf 1 ECX bit 12), F16C (bit 29), and the OS saving YMM state
 * (OSXSAVE bit 27 + XCR0 bits 1-2). */
const kern_ops *kern_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return NULL;
    bool fma = c & (1u << 12), f16c = c & (1u << 29), osx = c & (1u << 27);
    if (!fma || !f16c || !osx) return NULL;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6u) != 6u) return NULL;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return NULL;
    return (b & (1u << 5)) ? &AVX2 : NULL;
}
#else
const kern_ops *kern_avx2(void) { return NULL; }
#endif
