/* AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c; it is only called after a
 * CPUID check).
 *
 * Loop order: one weight row at a time (a thread streams its rows front to back: several interleaved rows
 * defeat the hardware prefetcher here, measured 11 vs 23 GB/s per core for q8_0), and for each row every group
 * of up to 4 positions, so the row is read from memory once and reused from L1 by the whole block.
 * Invariance: each (row, position) output is computed the same way in every tile: two accumulators (even and
 * odd 8-column chunks, or even and odd 32-blocks), combined as hsum(a0 + a1), then the scalar tail. Two
 * chains hide the FMA latency in decode; the order never depends on n, the tile or the thread split. */
#include "kernels/kern.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <cpuid.h>
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "io/gguf.h"
#include "util/fp16.h"

#define INLINE static inline __attribute__((always_inline))
#define PREFETCH_AHEAD 1024

INLINE float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* ------------------------------------------------------------------ float weight types */
enum { T_F32, T_F16, T_BF16 };

INLINE __m256 ld8(int t, const unsigned char *w, int c) {
    if (t == T_F32) return _mm256_loadu_ps((const float *)(const void *)w + c);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)w + c));
    if (t == T_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
INLINE float ld1(int t, const unsigned char *w, int c) {
    if (t == T_F32) return ((const float *)(const void *)w)[c];
    uint16_t h;
    memcpy(&h, w + 2 * (size_t)c, 2);
    return t == T_F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

/* One row x P positions over columns [cb, ce) (cb, ce multiples of 16, or ce = the end of the 8-column chunks),
 * continuing the accumulators a0/a1 of each position: chunks of 8 columns alternate between them. */
INLINE void tile_float(int t, int P, const unsigned char *w, int cb, int ce, const float *const *xp, __m256 *a0,
                       __m256 *a1) {
    const int esz = t == T_F32 ? 4 : 2;
    const int c16 = cb + ((ce - cb) & ~15);
    __m256 r0[4], r1[4];
#pragma GCC unroll 4
    for (int j = 0; j < P; j++) r0[j] = a0[j], r1[j] = a1[j];
    int c = cb;
    for (; c < c16; c += 16) {
        if ((c * esz & 63) == 0) _mm_prefetch((const char *)w + (size_t)c * esz + PREFETCH_AHEAD, _MM_HINT_T0);
        __m256 w0 = ld8(t, w, c), w1 = ld8(t, w, c + 8);
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) {
            r0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xp[j] + c), r0[j]);
            r1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xp[j] + c + 8), r1[j]);
        }
    }
    if (c < ce) { /* a last lone chunk of 8 */
        __m256 w0 = ld8(t, w, c);
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) r0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xp[j] + c), r0[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < P; j++) a0[j] = r0[j], a1[j] = r1[j];
}

enum { COL_CHUNK = 512, POS_GROUP = 32 }; /* columns per pass (multiple of 16); positions whose accumulators wait */

/* One weight row against all n positions: positions in groups of POS_GROUP; for each group the row is walked in
 * column chunks so the group's activations stay in L1, with each position's two accumulators carried from
 * chunk to chunk (the arithmetic is the same as one pass over all columns). */
INLINE void row_float(int t, const unsigned char *w, int cols, const void *x, size_t xs, int n, float *y, int ldy,
                      int r) {
    const int c8 = cols & ~7;
    __m256 a0[POS_GROUP], a1[POS_GROUP];
    for (int g = 0; g < n; g += POS_GROUP) {
        int gn = n - g < POS_GROUP ? n - g : POS_GROUP;
        const float *xp[POS_GROUP];
        for (int j = 0; j < gn; j++) {
            xp[j] = (const float *)(const void *)((const char *)x + (size_t)(g + j) * xs);
            a0[j] = a1[j] = _mm256_setzero_ps();
        }
        int chunk = gn <= 1 ? c8 + 16 : COL_CHUNK; /* one position: its activations fit in L1 anyway */
        for (int cb = 0; cb < c8; cb += chunk) {
            int ce = cb + chunk < c8 ? cb + chunk : c8;
            int p = 0;
            for (; p + 4 <= gn; p += 4) tile_float(t, 4, w, cb, ce, xp + p, a0 + p, a1 + p);
            int rem = gn - p;
            if (rem == 3) tile_float(t, 3, w, cb, ce, xp + p, a0 + p, a1 + p);
            else if (rem == 2) tile_float(t, 2, w, cb, ce, xp + p, a0 + p, a1 + p);
            else if (rem == 1) tile_float(t, 1, w, cb, ce, xp + p, a0 + p, a1 + p);
        }
        for (int j = 0; j < gn; j++) {
            float s = hsum8(_mm256_add_ps(a0[j], a1[j]));
            for (int cc = c8; cc < cols; cc++) s += ld1(t, w, cc) * xp[j][cc];
            y[(size_t)(g + j) * ldy + r] = s;
        }
    }
}

#define FLOAT_MM(name, T)                                                                                        \
    static void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        for (int r = r0; r < r1; r++) row_float(T, w + (size_t)r * rb, cols, x, xs, n, y, ldy, r);               \
    }
FLOAT_MM(mm_f32_avx2, T_F32)
FLOAT_MM(mm_f16_avx2, T_F16)
FLOAT_MM(mm_bf16_avx2, T_BF16)

/* ------------------------------------------------------------------ quantized weight types (x as q8 blocks) */
enum { T_Q8_0, T_Q4_0 };

/* q8_0: the signed weights; q4_0: the unsigned nibbles 0..15 (elements 0..15 low, 16..31 high) */
INLINE __m256i unpack(int t, const unsigned char *blk) {
    if (t == T_Q8_0) return _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
    __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}
INLINE float blk_d(const unsigned char *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

/* One 32-block of one row for P positions, into accumulator set acc. The integer pair sums are exact either way:
 * q8_0 uses |w| * sign(x, w); q4_0 uses nibble * x - 8 (x0 + x1) (the precomputed s8). */
INLINE void quant_block(int t, int P, const unsigned char *blk, int b, const act_q8 *const *xp, __m256 *acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wq = unpack(t, blk);
    __m256i ax = t == T_Q8_0 ? _mm256_sign_epi8(wq, wq) : wq;
    float dw = blk_d(blk);
#pragma GCC unroll 4
    for (int j = 0; j < P; j++) {
        __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)xp[j][b].qs);
        __m256i d16;
        if (t == T_Q8_0) {
            d16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(xq, wq));
        } else {
            d16 = _mm256_sub_epi16(_mm256_maddubs_epi16(ax, xq),
                                   _mm256_loadu_si256((const __m256i *)(const void *)xp[j][b].s8));
        }
        __m256 q = _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, ones));
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xp[j][b].d), q, acc[j]);
    }
}

/* One row x P positions: even blocks into a0, odd blocks into a1. */
INLINE void tile_quant(int t, int P, const unsigned char *w, int nb, const act_q8 *const *xp, float *y, int ldy,
                       int r, int p0) {
    const int bb = t == T_Q8_0 ? 34 : 18;
    __m256 a0[4], a1[4];
#pragma GCC unroll 4
    for (int j = 0; j < P; j++) a0[j] = a1[j] = _mm256_setzero_ps();
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        _mm_prefetch((const char *)w + (size_t)b * bb + PREFETCH_AHEAD, _MM_HINT_T0);
        quant_block(t, P, w + (size_t)b * bb, b, xp, a0);
        quant_block(t, P, w + (size_t)(b + 1) * bb, b + 1, xp, a1);
    }
    if (b < nb) quant_block(t, P, w + (size_t)b * bb, b, xp, a0);
#pragma GCC unroll 4
    for (int j = 0; j < P; j++) y[(size_t)(p0 + j) * ldy + r] = hsum8(_mm256_add_ps(a0[j], a1[j]));
}

INLINE void row_quant(int t, const unsigned char *w, int cols, const void *x, size_t xs, int n, float *y, int ldy,
                      int r) {
    const int nb = cols / 32;
    const act_q8 *xp[4];
    int p = 0;
    for (; p + 4 <= n; p += 4) {
        for (int j = 0; j < 4; j++) xp[j] = (const act_q8 *)(const void *)((const char *)x + (size_t)(p + j) * xs);
        tile_quant(t, 4, w, nb, xp, y, ldy, r, p);
    }
    int rem = n - p;
    for (int j = 0; j < rem; j++) xp[j] = (const act_q8 *)(const void *)((const char *)x + (size_t)(p + j) * xs);
    if (rem == 3) tile_quant(t, 3, w, nb, xp, y, ldy, r, p);
    else if (rem == 2) tile_quant(t, 2, w, nb, xp, y, ldy, r, p);
    else if (rem == 1) tile_quant(t, 1, w, nb, xp, y, ldy, r, p);
}

#define QUANT_MM(name, T)                                                                                        \
    static void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        for (int r = r0; r < r1; r++) row_quant(T, w + (size_t)r * rb, cols, x, xs, n, y, ldy, r);               \
    }
QUANT_MM(mm_q8_0_avx2, T_Q8_0)
QUANT_MM(mm_q4_0_avx2, T_Q4_0)

/* ------------------------------------------------------------------ attention helpers */
static float dot_avx2(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float s = hsum8(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_avx2(float *y, float s, const float *x, int n) {
    __m256 sv = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += s * x[i];
}

static const kern_ops AVX2 = {
    .name = "avx2",
    .dot = dot_avx2,
    .axpy = axpy_avx2,
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
