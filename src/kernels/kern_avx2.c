/* AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c; it is only called after a
 * CPUID check).
 *
 * Loop order (ROWS_MM): in decode a thread takes the rows of its range in pairs (r0 + i, r0 + h + i), one from each
 * half, so it streams two monotonic sequences (rows interleaved within a page defeat the hardware prefetcher:
 * measured 11 vs 23 GB/s per core for q8_0). In blocks it takes groups of consecutive rows (3 or 4 for float types,
 * 2 for quantized) and prefetches the next group into L2 while the tiles of up to 3 or 4 positions run over this
 * one, so the rows are read from memory once and reused from L1 by the whole block.
 * Invariance: each (row, position) output is ONE accumulation chain over the columns in order (8 columns or one
 * 32-block per step), then the same horizontal sum and tail, whatever the tile (1..4 rows x 1..4 positions), the
 * block size or the thread split. */
#include "kernels/kern.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kern_avx2_inl.h"
#include "kernels/kern_avx512.h"
#include "kernels/kern_tile.h"
#include "kernels/kquant.h"
#include "util/fp16.h"

#define INLINE static inline __attribute__((always_inline))
#define PREFETCH_AHEAD 1024


INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

/* hsum8 of 4 vectors at once, the same additions in the same pairs (lane i + lane i+4, then (0)+(2) and (1)+(3),
 * then those two), so each result has hsum8's bits. */
INLINE __m128 hsum8x4(const __m256 v[4]) {
    __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x20), _mm256_permute2f128_ps(v[0], v[1], 0x31));
    __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(v[2], v[3], 0x20), _mm256_permute2f128_ps(v[2], v[3], 0x31));
    /* ab = [a0..a3 | b0..b3] (a_i = v0 lane i + lane i+4), cd likewise */
    __m256 n = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    /* n = [a0+a2, a1+a3, c0+c2, c1+c3 | b0+b2, b1+b3, d0+d2, d1+d3] */
    __m256 t = _mm256_add_ps(_mm256_shuffle_ps(n, n, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(n, n, _MM_SHUFFLE(3, 1, 3, 1)));
    /* t = [A, C, A, C | B, D, B, D] */
    __m128 lo = _mm256_castps256_ps128(t), hi = _mm256_extractf128_ps(t, 1);
    return _mm_unpacklo_ps(lo, hi); /* [A, B, C, D] */
}

/* ------------------------------------------------------------------ float weight types */


enum { COL_CHUNK = 2048, POS_GROUP = 32 }; /* columns per pass (multiple of 32); most positions per pass over rows */

/* Prefetch for R rows at byte offset off: pf bytes further into L2 (the next row group), or, when pf is 0, a short
 * distance into L1. */
INLINE void prefetch_rows(int R, const unsigned char *const *wr, size_t off, size_t pf) {
    if (pf)
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) _mm_prefetch((const char *)wr[i] + off + pf, _MM_HINT_T1);
    else
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) _mm_prefetch((const char *)wr[i] + off + PREFETCH_AHEAD, _MM_HINT_T0);
}
/* prefetch_rows for every 64-byte line of a block of `bytes` at off (a super-block of K-quant rows) */
INLINE void prefetch_block(int R, const unsigned char *const *wr, size_t off, int bytes, size_t pf) {
#pragma GCC unroll 4
    for (int o = 0; o < bytes; o += 64) prefetch_rows(R, wr, off + (size_t)o, pf);
}

/* fn(t, R, P, ...) with R and P (each 1..4) turned into compile-time constants */
#define WITH_P(fn, t, R, P, ...)                                                                                  \
    do {                                                                                                          \
        if ((P) == 4) fn(t, R, 4, __VA_ARGS__);                                                                   \
        else if ((P) == 3) fn(t, R, 3, __VA_ARGS__);                                                              \
        else if ((P) == 2) fn(t, R, 2, __VA_ARGS__);                                                              \
        else fn(t, R, 1, __VA_ARGS__);                                                                            \
    } while (0)
#define WITH_RP(fn, t, R, P, ...)                                                                                 \
    do {                                                                                                          \
        if ((R) == 4) WITH_P(fn, t, 4, P, __VA_ARGS__);                                                           \
        else if ((R) == 3) WITH_P(fn, t, 3, P, __VA_ARGS__);                                                      \
        else if ((R) == 2) WITH_P(fn, t, 2, P, __VA_ARGS__);                                                      \
        else WITH_P(fn, t, 1, P, __VA_ARGS__);                                                                    \
    } while (0)

/* One step of 8 columns at c: each (row, position) chain takes one FMA. The loop order keeps R * P accumulators + P
 * or R operands + 1 in the 16 registers: activations held when the tile has more rows, weights when it has more
 * positions. */
INLINE void step_float(int t, int R, int P, const unsigned char *const *wr, int c, const float *const *xp,
                       __m256 r[4][4]) {
    if (R > P) {
        __m256 xv[4];
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) xv[j] = _mm256_loadu_ps(xp[j] + c);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256 wv = kern_ld8(t, wr[i], c);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) r[i][j] = _mm256_fmadd_ps(wv, xv[j], r[i][j]);
        }
    } else {
        __m256 wv[4];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) wv[i] = kern_ld8(t, wr[i], c);
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) {
            __m256 xv = _mm256_loadu_ps(xp[j] + c);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) r[i][j] = _mm256_fmadd_ps(wv[i], xv, r[i][j]);
        }
    }
}

/* R rows (1..4, anywhere in memory) x P positions (1..4, R * P <= 12) over columns [cb, ce) (multiples of 8),
 * continuing the accumulators acc[i * POS_GROUP + j] (starting them at zero when cb is 0): one accumulation chain
 * per (row, position), 8 columns at a time, 32 columns (64 bytes of 16-bit weights) per loop turn. pf: prefetch
 * distance in bytes from each row (0: the default short distance into L1; else into L2, used to fetch the next row
 * group while this one computes). */
INLINE void tile_float(int t, int R, int P, const unsigned char *const *wr, int cb, int ce, const float *const *xp,
                       __m256 *acc, size_t pf) {
    const int esz = t == KF_F32 ? 4 : 2;
    __m256 r[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) r[i][j] = cb == 0 ? _mm256_setzero_ps() : acc[i * POS_GROUP + j];
    int c = cb;
    for (; c + 32 <= ce; c += 32) {
        prefetch_rows(R, wr, (size_t)c * esz, pf);
        if (esz == 4) prefetch_rows(R, wr, (size_t)c * esz + 64, pf);
        step_float(t, R, P, wr, c, xp, r);
        step_float(t, R, P, wr, c + 8, xp, r);
        step_float(t, R, P, wr, c + 16, xp, r);
        step_float(t, R, P, wr, c + 24, xp, r);
    }
    for (; c < ce; c += 8) step_float(t, R, P, wr, c, xp, r);
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) acc[i * POS_GROUP + j] = r[i][j];
}

/* acc below is written by the first column chunk's tiles (cb == 0) before any read; GCC cannot see that. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
/* Rows wr[0..R) (output rows ri[0..R)) against n <= POS_GROUP positions (the row walk groups longer blocks),
 * columns in chunks of COL_CHUNK (the activations come from L2; the rows' chunk stays in L1 for the tiles after the
 * first), accumulators carried from chunk to chunk; tiles of up to PT positions. COL_CHUNK 2048 measured 2-8% faster
 * than 512 for blocks of 16-64 positions (fewer tile switches) and the same for 8.
 * pf: as in tile_float, in every tile (repeats for lines already requested cost little). */
INLINE void rows_float(int t, int R, int PT, const unsigned char *const *wr, const int *ri, int cols, const void *x,
                       size_t xs, int n, float *y, int ldy, size_t pf) {
    const int c8 = cols & ~7;
    __m256 acc[4 * POS_GROUP];
    const float *xp[POS_GROUP];
    for (int j = 0; j < n; j++) xp[j] = (const float *)(const void *)((const char *)x + (size_t)j * xs);
    int chunk = n <= 1 ? c8 + 8 : COL_CHUNK;
    for (int cb = 0; cb < c8; cb += chunk) {
        int ce = cb + chunk < c8 ? cb + chunk : c8;
        /* ceil(n / PT) tiles of sizes as even as possible (with 3: 16 = 3+3+3+3+2+2, not 3*5+1) */
        int nt = (n + PT - 1) / PT;
        for (int ti = 0, p = 0; ti < nt; ti++) {
            int P = (n - p) / (nt - ti);
            WITH_RP(tile_float, t, R, P, wr, cb, ce, xp + p, acc + p, pf);
            p += P;
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < n; j++) {
            float s = c8 ? kern_hsum8(acc[i * POS_GROUP + j]) : 0.0f; /* no full 8-column step: tail only */
            for (int cc = c8; cc < cols; cc++) s += kern_ld1(t, wr[i], cc) * xp[j][cc];
            y[(size_t)j * ldy + ri[i]] = s;
        }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* Positions per pass over the rows in blocks: as many as keep their activations within ~256 KiB (L2), 4..POS_GROUP,
 * a multiple of 4. A long block (a prefill) then reads each chunk of rows once per group from L3 instead of reading
 * all its activations from L3 for every row group. */
INLINE int pos_group(size_t xs) {
    size_t g = ((size_t)256 << 10) / xs;
    g = g > POS_GROUP ? POS_GROUP : g < 4 ? 4 : g;
    return (int)(g & ~(size_t)3);
}

/* The row walk shared by every type. Decode (n = 1): the thread's rows are taken in pairs (r0 + i, r0 + h + i), one
 * from each half of its range: two monotonic streams (prefetcher-friendly) whose chains hide each other's FMA
 * latency; an odd last row goes alone. Blocks (n >= 2): positions in groups of pos_group(), then for each group,
 * groups of BR consecutive rows x tiles of up to PT positions,
 * the next group's rows prefetched into L2 while this group computes, so the weight stream from memory overlaps the
 * arithmetic instead of stalling it. Both give each (row, position) the same chain. ROWS is rows_float or
 * rows_quant; BR <= 4. */
#define ROWS_MM(name, ROWS, T, BR, PT)                                                                            \
    static void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        if (n >= 2) {                                                                                             \
            const int pg = pos_group(xs);                                                                         \
            for (int p0 = 0; p0 < n; p0 += pg) {                                                                  \
                const int np = n - p0 < pg ? n - p0 : pg;                                                         \
                const void *xg = (const char *)x + (size_t)p0 * xs;                                               \
                float *yg = y + (size_t)p0 * ldy;                                                                 \
                for (int r = r0; r < r1; r += BR) {                                                               \
                    int R = r1 - r < BR ? r1 - r : BR;                                                            \
                    const unsigned char *wr[4];                                                                   \
                    int ri[4];                                                                                    \
                    for (int i = 0; i < R; i++) wr[i] = w + (size_t)(r + i) * rb, ri[i] = r + i;                  \
                    size_t pf = r + BR < r1 ? (size_t)(BR) * rb : 0;                                              \
                    WITH_RP(ROWS, T, R, PT, wr, ri, cols, xg, xs, np, yg, ldy, pf);                               \
                }                                                                                                 \
            }                                                                                                     \
            return;                                                                                               \
        }                                                                                                         \
        int h = (r1 - r0) / 2;                                                                                    \
        for (int i = 0; i < h; i++) {                                                                             \
            const unsigned char *wr[2] = {w + (size_t)(r0 + i) * rb, w + (size_t)(r0 + h + i) * rb};              \
            int ri[2] = {r0 + i, r0 + h + i};                                                                     \
            ROWS(T, 2, 1, wr, ri, cols, x, xs, n, y, ldy, 0);                                                     \
        }                                                                                                         \
        if ((r1 - r0) % 2) {                                                                                      \
            const unsigned char *wr[1] = {w + (size_t)(r1 - 1) * rb};                                             \
            int ri[1] = {r1 - 1};                                                                                 \
            ROWS(T, 1, 1, wr, ri, cols, x, xs, n, y, ldy, 0);                                                     \
        }                                                                                                         \
    }

/* float types: 12 accumulators. 16-bit weights: 3 rows x 4 positions (3 converted weight vectors held, one
 * activation at a time), so blocks of 4, 8, 12, 16 are whole tiles and each weight is converted once per 4
 * positions (measured 3-4% faster than 4 x 3 at k = 8 and 16). f32: 4 rows x 3 positions (3 activations held); its
 * 4-byte weights load the L2 hardest, and 3 x 4 measured no better. */
ROWS_MM(mm_f32_avx2, rows_float, KF_F32, 4, 3)
ROWS_MM(mm_f16_avx2, rows_float, KF_F16, 3, 4)
ROWS_MM(mm_bf16_avx2, rows_float, KF_BF16, 3, 4)

/* ------------------------------------------------------------------ quantized weight types (x as q8 blocks) */
enum { T_Q8_0, T_Q4_0 };

/* q8_0: 8 lane chains per (row, position), then hsum8 (q4_0 and the K-quants of big blocks: kern_tile*.c, one
 * chain per output). peak_quant measures both types' steps. */
INLINE int blk_bytes(int t) { return t == T_Q8_0 ? 34 : 18; } /* fp16 scale + 32 int8 or 16 bytes of nibbles */
INLINE float blk_d(const unsigned char *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

/* One 32-block of R rows x P positions: one FMA per (row, position) chain. The integer pair sums are exact:
 * |w| * sign(x, w). */
INLINE void quant_block(int t, int R, int P, const unsigned char *const *wr, int b, const act_q8 *const *xp,
                        __m256 r[4][4]) {
    const int bb = blk_bytes(t);
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        const unsigned char *blk = wr[i] + (size_t)b * bb;
        __m256i wq = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
        __m256i ax = _mm256_sign_epi8(wq, wq);
        const __m256 dwv = _mm256_set1_ps(blk_d(blk));
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) {
            __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)xp[j][b].qs);
            __m256i d16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(xq, wq));
            __m256 q = _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, ones));
            /* the scale d_w * d_x as a vector product: the same bits as the scalar product, one operation */
            r[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, _mm256_broadcast_ss(&xp[j][b].d)), q, r[i][j]);
        }
    }
}

/* R rows x P positions over all nb blocks of the rows; pf as in tile_float. */
INLINE void tile_quant(int t, int R, int P, const unsigned char *const *wr, const int *ri, int nb,
                       const act_q8 *const *xp, float *y, int ldy, int p0, size_t pf) {
    const int bb = blk_bytes(t);
    __m256 r[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) r[i][j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        if (((b * bb) & 63) < bb) prefetch_rows(R, wr, (size_t)b * bb, pf);
        quant_block(t, R, P, wr, b, xp, r);
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) y[(size_t)(p0 + j) * ldy + ri[i]] = kern_hsum8(r[i][j]);
}

/* Rows wr[0..R) against all n positions in ceil(n / PT) tiles of even sizes; pf in the first tile only (the later
 * ones find the rows in L1). ACT: the activation block type, QB: the values per block, TILE: the tile kernel. */
#define ROWS_OVER_TILES(name, ACT, QB, TILE)                                                                      \
    INLINE void name(int t, int R, int PT, const unsigned char *const *wr, const int *ri, int cols, const void *x, \
                     size_t xs, int n, float *y, int ldy, size_t pf) {                                            \
        const int nb = cols / (QB);                                                                               \
        const ACT *xp[4];                                                                                         \
        int nt = (n + PT - 1) / PT;                                                                               \
        for (int ti = 0, p = 0; ti < nt; ti++) {                                                                  \
            int P = (n - p) / (nt - ti);                                                                          \
            for (int j = 0; j < P; j++) xp[j] = (const ACT *)(const void *)((const char *)x + (size_t)(p + j) * xs); \
            WITH_RP(TILE, t, R, P, wr, ri, nb, xp, y, ldy, p, ti == 0 ? pf : 0);                                  \
            p += P;                                                                                               \
        }                                                                                                         \
    }
ROWS_OVER_TILES(rows_quant, act_q8, 32, tile_quant)

/* quantized types: 2 rows x 4 positions (8 accumulators; the integer steps need the other registers) */
ROWS_MM(mm_q8_0_avx2, rows_quant, T_Q8_0, 2, 4)

/* ------------------------------------------------------------------ K-quants (x as act_q8k blocks) */
INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Q4_K straight from its layout (blocks of few positions, decode): the 8 6-bit scales and mins by ggml's 32-bit
 * mask steps, the nibbles by and/shift, maddubs with the activations and madd with the chunk's scale; the same
 * exact isum and msum as kq_dot_ints, then the same two fma chains, so the scalar table's bits. */
INLINE void q4k_scales(const unsigned char *blk, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t u[3], v[4];
    memcpy(u, blk + 4, 12);
    v[0] = u[0] & 0x3f3f3f3fu;
    v[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    v[2] = u[1] & 0x3f3f3f3fu;
    v[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    memcpy(sc, v, 8);
    memcpy(mn, v + 2, 8);
}

/* Q4_K / Q5_K scales and mins as vectors: *sv the 8 scales as int16 in both 128-bit halves (scale s over all 16
 * lanes by one byte shuffle), *mnd each min twice (groups 2s, 2s+1 of 16 values), against the 16 group sums */
INLINE void q45_scale_vecs(const unsigned char *blk, __m256i *sv, __m256i *mnd) {
    uint8_t sc[8], mn[8];
    q4k_scales(blk, sc, mn);
    int64_t mn8, sc8;
    memcpy(&mn8, mn, 8);
    memcpy(&sc8, sc, 8);
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn8));
    *mnd = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    const __m128i s16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc8));
    *sv = _mm256_set_m128i(s16, s16);
}

/* An R x P tile's accumulators (R, P <= 4) set to zero. */
INLINE void tile_zero(int R, int P, __m256 acc[4][4]) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) acc[i][j] = _mm256_setzero_ps();
}
/* An R x P tile into y (row ri[i] of position p0 + j): hsum8 of the vector chain (when acc), plus add (when given),
 * minus sub (when given); the terms in this order, as the scalar table's. */
INLINE void tile_store(int R, int P, const __m256 acc[4][4], const float add[4][4], const float sub[4][4], float *y,
                       int ldy, int p0, const int *ri) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) {
            float v = acc ? kern_hsum8(acc[i][j]) : add[i][j];
            if (acc && add) v += add[i][j];
            y[(size_t)(p0 + j) * ldy + ri[i]] = sub ? v - sub[i][j] : v;
        }
}

/* isum (the lanes of acc) and msum (the lanes of mprod) added up together: [isum lanes | msum lanes] folded to
 * lanes 0 and 4 (exact integers: any order gives the same sums) */
INLINE void sum_is_ms(__m256i acc, __m256i mprod, int32_t *is, int32_t *ms) {
    __m256i t = _mm256_hadd_epi32(acc, mprod); /* a01 a23 m01 m23 | a45 a67 m45 m67 */
    t = _mm256_hadd_epi32(t, t);               /* A0 M0 . . | A1 M1 . . */
    const __m128i r2 = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    *is = _mm_cvtsi128_si32(r2);
    *ms = _mm_extract_epi32(r2, 1);
}

INLINE void tile_q4k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    float s[4][4] = {{0}}, m[4][4] = {{0}};
    const __m256i m15 = _mm256_set1_epi8(15);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 144, 144, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 144;
            __m256i sv, mnd;
            q45_scale_vecs(blk, &sv, &mnd);
            __m256i scs[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) scs[k] = _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x0100 + 0x0202 * k)));
            const float dw = blk_d(blk), dmw = blk_d(blk + 2);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) {
                const act_q8k *x = &xp[j][b];
                __m256i acc = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * c));
                    const __m256i lo = _mm256_and_si256(q, m15), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m15);
                    const __m256i xl = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 64 * c));
                    const __m256i xh = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 64 * c + 32));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), scs[2 * c]));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), scs[2 * c + 1]));
                }
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)x->bsums);
                int32_t is, ms;
                sum_is_ms(acc, _mm256_madd_epi16(mnd, bs), &is, &ms);
                s[i][j] = fmaf((float)is, dw * x->d, s[i][j]);
                m[i][j] = fmaf((float)ms, dmw * x->d, m[i][j]);
            }
        }
    }
    tile_store(R, P, NULL, s, m, y, ldy, p0, ri);
}

/* Q6_K straight from its layout (blocks of few positions, decode): per 32-value chunk c the 6-bit levels from the
 * nibbles of ql and 2 bits of qh (kquant.h's placement), maddubs with the activations, madd with the chunk's two
 * group scales; the offset 32 through the bsums; the 8 lanes of kq_lanes_ggml exactly, then the same per-lane fma
 * chain and hsum8: the scalar table's bits. */
INLINE void tile_q6k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 acc[4][4];
    tile_zero(R, P, acc);
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 210, 210, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 210;
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)(blk + 192));
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8); /* the 16 group scales */
            /* chunk c's scales: sc[2c] over the low 8 int16 lanes, sc[2c+1] over the high 8 */
            const __m256i lohi = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2,
                                                  3, 2, 3, 2, 3, 2, 3);
            __m256i scs[8];
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) /* (sc[2c], sc[2c+1]) in every 32-bit lane, then spread */
                scs[c] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(c)), lohi);
            const float dw = blk_d(blk + 208);
            __m256i u[8]; /* the levels of the 8 chunks */
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 128 + 32 * h));
                u[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
                u[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
                u[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
                u[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
            }
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) {
                const act_q8k *x = &xp[j][b];
                __m256i lanes = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int c = 0; c < 8; c++) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + 32 * c));
                    lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], q), scs[c]));
                }
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)x->bsums);
                lanes = _mm256_sub_epi32(lanes, _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(lanes), acc[i][j]);
            }
        }
    }
    tile_store(R, P, acc, NULL, NULL, y, ldy, p0, ri);
}

/* The int16 pair sums of a 32-value chunk times its two group scales (sc[2k] over the low 8 int16 lanes, sc[2k+1]
 * over the high 8): ggml's get_scale_shuffle_q3k on a vector holding 8 int16 scales in both 128-bit halves. */
INLINE __m256i scale_pair(__m256i sv, int k) {
    return _mm256_shuffle_epi8(sv, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k + 1))),
                                                     _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k)))));
}

/* Q2_K straight from its layout (blocks of few positions, decode): chunk c = 4h + j holds bits 2j of qs[32h + l]
 * (kquant.h); its groups' scales by one byte shuffle of the 16 low nibbles as int16 (ggml's q2_K kernel), the mins
 * (high nibbles) against the bsums; the exact isum and msum of kq_dot_ints, then the scalar table's two fma chains
 * (ggml's repacked gemv), so its bits. Chunks outer, positions inner: one integer accumulator per position. */
INLINE void tile_q2k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    float s[4][4] = {{0}}, m[4][4] = {{0}};
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m15 = _mm_set1_epi8(15);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 84, 84, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 84;
            const __m128i sm = _mm_loadu_si128((const __m128i *)(const void *)blk);
            const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m15));
            const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15));
            const __m256i svl = _mm256_permute2x128_si256(sc16, sc16, 0x00), svh = _mm256_permute2x128_si256(sc16, sc16, 0x11);
            __m256i acc[4];
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) acc[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i q2 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * h));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const __m256i u = _mm256_and_si256(k ? _mm256_srli_epi16(q2, 2 * k) : q2, m3);
                    const __m256i scs = scale_pair(h ? svh : svl, k);
#pragma GCC unroll 4
                    for (int j = 0; j < P; j++) {
                        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(xp[j][b].qs + 128 * h + 32 * k));
                        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), scs));
                    }
                }
            }
            const float dw = blk_d(blk + 80), dmw = blk_d(blk + 82);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) {
                const act_q8k *x = &xp[j][b];
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)x->bsums);
                int32_t is, ms;
                sum_is_ms(acc[j], _mm256_madd_epi16(mn16, bs), &is, &ms);
                s[i][j] = fmaf((float)is, dw * x->d, s[i][j]);
                m[i][j] = fmaf((float)ms, dmw * x->d, m[i][j]);
            }
        }
    }
    tile_store(R, P, NULL, s, m, y, ldy, p0, ri);
}

/* Q3_K straight from its layout: the 16 signed 6-bit scales by ggml's 32-bit mask steps, chunk c = 4h + j from bits
 * 2j of qs[32h + l] and bit c of hmask[l] (kquant.h); the offset 4 per value as ggml: maddubs(low 2 bits, x) minus
 * maddubs(4 where the high bit is clear, x) (exact int16). The 8 lanes of kq_lanes_ggml, then the per-lane fma
 * chain and hsum8 of the scalar table. */
INLINE void tile_q3k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 facc[4][4];
    tile_zero(R, P, facc);
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 110, 110, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 110;
            uint32_t a[3];
            memcpy(a, blk + 96, 12);
            const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
            const __m128i s8 = _mm_sub_epi8(_mm_set_epi32((int)(((a[1] >> 4) & k2) | (((a[2] >> 6) & k1) << 4)),
                                                          (int)(((a[0] >> 4) & k2) | (((a[2] >> 4) & k1) << 4)),
                                                          (int)((a[1] & k2) | (((a[2] >> 2) & k1) << 4)),
                                                          (int)((a[0] & k2) | ((a[2] & k1) << 4))),
                                            _mm_set1_epi8(32));
            const __m256i sc16 = _mm256_cvtepi8_epi16(s8);
            const __m256i svl = _mm256_permute2x128_si256(sc16, sc16, 0x00), svh = _mm256_permute2x128_si256(sc16, sc16, 0x11);
            /* the high bits inverted: 4 where bit c of hmask[l] is clear */
            const __m256i nh = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)blk), _mm256_set1_epi8(-1));
            __m256i lanes[4];
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) lanes[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i q3 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 32 + 32 * h));
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const int c = 4 * h + k;
                    const __m256i lo = _mm256_and_si256(k ? _mm256_srli_epi16(q3, 2 * k) : q3, m3);
                    /* bit c to bit 2 of each byte: the 16-bit shift brings in only bits that the mask drops */
                    const __m256i hi = _mm256_and_si256(c <= 2 ? _mm256_slli_epi16(nh, 2 - c) : _mm256_srli_epi16(nh, c - 2), m4);
                    const __m256i scs = scale_pair(h ? svh : svl, k);
#pragma GCC unroll 4
                    for (int j = 0; j < P; j++) {
                        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(xp[j][b].qs + 32 * c));
                        const __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, q), _mm256_maddubs_epi16(hi, q));
                        lanes[j] = _mm256_add_epi32(lanes[j], _mm256_madd_epi16(pr, scs));
                    }
                }
            }
            const float dw = blk_d(blk + 108);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++)
                facc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(xp[j][b].d * dw), _mm256_cvtepi32_ps(lanes[j]), facc[i][j]);
        }
    }
    tile_store(R, P, facc, NULL, NULL, y, ldy, p0, ri);
}

/* Q5_K straight from its layout: Q4_K's scales and mins (q4k_scales), chunk 2j + e from nibble e of qs[32j + l] and
 * bit 2j + e of qh[l] moved to bit 4 by one 16-bit shift and a mask (kquant.h). The 8 lanes of kq_lanes_ggml with
 * their per-lane fma chain and hsum8, and the mins' chain summs = fma(-d_x * dmin, msum, summs): the scalar table's
 * bits. */
INLINE void tile_q5k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 facc[4][4];
    float summs[4][4] = {{0}};
    tile_zero(R, P, facc);
    const __m256i m15 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 176, 176, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 176;
            __m256i sv, mnd;
            q45_scale_vecs(blk, &sv, &mnd);
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16));
            __m256i lanes[4];
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) lanes[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 48 + 32 * (c / 2)));
                const __m256i lo = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(q, 4) : q, m15);
                /* bit c of qh[l] to bit 4: the 16-bit shift brings in only bits that the mask drops */
                const __m256i hb = _mm256_and_si256(c <= 4 ? _mm256_slli_epi16(qh, 4 - c) : _mm256_srli_epi16(qh, c - 4), m16);
                const __m256i u = _mm256_or_si256(lo, hb);
                const __m256i scs = _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x0100 + 0x0202 * c)));
#pragma GCC unroll 4
                for (int j = 0; j < P; j++) {
                    const __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)(xp[j][b].qs + 32 * c));
                    lanes[j] = _mm256_add_epi32(lanes[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), scs));
                }
            }
            const float dw = blk_d(blk), dmw = blk_d(blk + 2);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++) {
                const act_q8k *x = &xp[j][b];
                facc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(lanes[j]), facc[i][j]);
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)x->bsums);
                summs[i][j] = fmaf(-x->d * dmw, (float)hsum_i32(_mm256_madd_epi16(mnd, bs)), summs[i][j]);
            }
        }
    }
    tile_store(R, P, facc, summs, NULL, y, ldy, p0, ri);
}

/* R rows x P positions over all super-blocks, straight from each type's layout: per (row, position) the scalar
 * table's float chains (llama.cpp's, kquant.h), so its bits */
INLINE void tile_kq(int t, int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                    float *y, int ldy, int p0, size_t pf) {
    switch (t) {
    case GGML_Q2_K: tile_q2k(R, P, wr, ri, nb, xp, y, ldy, p0, pf); break;
    case GGML_Q3_K: tile_q3k(R, P, wr, ri, nb, xp, y, ldy, p0, pf); break;
    case GGML_Q4_K: tile_q4k(R, P, wr, ri, nb, xp, y, ldy, p0, pf); break;
    case GGML_Q5_K: tile_q5k(R, P, wr, ri, nb, xp, y, ldy, p0, pf); break;
    default: tile_q6k(R, P, wr, ri, nb, xp, y, ldy, p0, pf); break;
    }
}

ROWS_OVER_TILES(rows_kq, act_q8k, QK_K, tile_kq)

/* K-quants: blocks of KERN_TILE_KQ_MIN positions or more through the 8-rows-in-the-lanes tile (kern_tile_kq_avx2.c),
 * smaller ones through the per-row kernel; both compute the per-row chains (llama.cpp's, kquant.h), so the same bits. */
#define KQ_MM(name, ROWS, TILE)                                                                                   \
    static void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        if (n >= KERN_TILE_KQ_MIN) TILE(w, rb, cols, x, xs, n, y, ldy, r0, r1);                                   \
        else ROWS(w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                         \
    }
ROWS_MM(mm_q2_k_rows, rows_kq, GGML_Q2_K, 2, 4)
ROWS_MM(mm_q3_k_rows, rows_kq, GGML_Q3_K, 2, 4)
ROWS_MM(mm_q4_k_rows, rows_kq, GGML_Q4_K, 2, 4)
ROWS_MM(mm_q5_k_rows, rows_kq, GGML_Q5_K, 2, 4)
ROWS_MM(mm_q6_k_rows, rows_kq, GGML_Q6_K, 2, 4)
KQ_MM(mm_q2_k, mm_q2_k_rows, kern_tile_mm_q2_k)
KQ_MM(mm_q3_k, mm_q3_k_rows, kern_tile_mm_q3_k)
KQ_MM(mm_q4_k, mm_q4_k_rows, kern_tile_mm_q4_k)
KQ_MM(mm_q5_k, mm_q5_k_rows, kern_tile_mm_q5_k)
KQ_MM(mm_q6_k, mm_q6_k_rows, kern_tile_mm_q6_k)

/* ------------------------------------------------------------------ attention helpers */
static float dot_avx2(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float s = kern_hsum8(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_avx2(float *y, float s, const float *x, int n) {
    __m256 sv = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += s * x[i];
}

/* Attention: the same chains as dot_avx2 / axpy_avx2 per (head, key), with independent work side by side so the
 * FMA latency is hidden and each key or value row loaded once serves up to three heads: the dots of 3 heads x 4 keys
 * at once (12 accumulators; every head group reads the 4 keys from L1); the weighted sums of 3 heads kept in
 * registers across a block of keys, 32 values of each at a time. */
INLINE const float *att_row(const float *base, size_t stride, const int *cells, int j) {
    return base + (size_t)(cells ? cells[j] : j) * stride;
}

/* heads taken together next, of `left` still to do: threes, then twos (8 = 3 + 3 + 2, 4 = 2 + 2) */
INLINE int head_group(int left) { return left >= 3 && left != 4 ? 3 : left >= 2 ? 2 : 1; }
/* fn(NH, ...) with NH (1..3) a compile-time constant */
#define WITH_HEADS(fn, NH, ...)                                                                                    \
    do {                                                                                                          \
        if ((NH) == 3) fn(3, __VA_ARGS__);                                                                        \
        else if ((NH) == 2) fn(2, __VA_ARGS__);                                                                   \
        else fn(1, __VA_ARGS__);                                                                                  \
    } while (0)
enum { ATT_KEY_BLOCK = 32 }; /* keys per pass of att_mix over its head groups: their value rows stay in L1 */

/* NH (1..3) heads' scores for keys kr[0..4), hd a multiple of 8: 4 NH accumulators, the heads' query vectors held,
 * one key vector at a time */
INLINE void att_scores4(int NH, const float *q, int hd, const float *const *kr, float scale, float *out, size_t ldo) {
    __m256 acc[3][4];
#pragma GCC unroll 3
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) acc[g][u] = _mm256_setzero_ps();
    for (int e = 0; e < hd; e += 8) {
        __m256 qv[3];
#pragma GCC unroll 3
        for (int g = 0; g < NH; g++) qv[g] = _mm256_loadu_ps(q + (size_t)g * hd + e);
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            __m256 kv = _mm256_loadu_ps(kr[u] + e);
#pragma GCC unroll 3
            for (int g = 0; g < NH; g++) acc[g][u] = _mm256_fmadd_ps(qv[g], kv, acc[g][u]);
        }
    }
#pragma GCC unroll 3
    for (int g = 0; g < NH; g++) _mm_storeu_ps(out + (size_t)g * ldo, _mm_mul_ps(hsum8x4(acc[g]), _mm_set1_ps(scale)));
}

static void att_scores_avx2(const float *q, int nh, const float *k, size_t stride, const int *cells, int n, int hd,
                            float scale, float *out, size_t ldo) {
    int j = 0;
    if (hd % 8 == 0)
        for (; j + 4 <= n; j += 4) {
            const float *kr[4];
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) kr[u] = att_row(k, stride, cells, j + u);
            for (int g = 0, gs; g < nh; g += gs) {
                gs = head_group(nh - g);
                WITH_HEADS(att_scores4, gs, q + (size_t)g * hd, hd, kr, scale, out + g * ldo + j, ldo);
            }
        }
    for (; j < n; j++)
        for (int g = 0; g < nh; g++)
            out[g * ldo + j] = dot_avx2(q + (size_t)g * hd, att_row(k, stride, cells, j), hd) * scale;
}

/* NH (1..3) heads x NV (1..4) vectors of their weighted sums over all n keys */
INLINE void att_mix_vecs(int NH, int NV, float *o, int hd, const float *p, size_t ldp, const float *v, size_t stride,
                         const int *cells, int n) {
    __m256 acc[3][4];
#pragma GCC unroll 3
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int r = 0; r < NV; r++) acc[g][r] = _mm256_loadu_ps(o + (size_t)g * hd + 8 * r);
    for (int j = 0; j < n; j++) {
        const float *vr = att_row(v, stride, cells, j);
        __m256 pv[3];
#pragma GCC unroll 3
        for (int g = 0; g < NH; g++) pv[g] = _mm256_set1_ps(p[g * ldp + j]);
#pragma GCC unroll 4
        for (int r = 0; r < NV; r++) {
            __m256 x = _mm256_loadu_ps(vr + 8 * r);
#pragma GCC unroll 3
            for (int g = 0; g < NH; g++) acc[g][r] = _mm256_fmadd_ps(pv[g], x, acc[g][r]);
        }
    }
#pragma GCC unroll 3
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int r = 0; r < NV; r++) _mm256_storeu_ps(o + (size_t)g * hd + 8 * r, acc[g][r]);
}

INLINE void att_mix_heads(int NH, float *o, int hd, const float *p, size_t ldp, const float *v, size_t stride,
                          const int *cells, int n) {
    int e = 0;
    for (; e + 32 <= hd; e += 32) att_mix_vecs(NH, 4, o + e, hd, p, ldp, v + e, stride, cells, n);
    if (e + 16 <= hd) att_mix_vecs(NH, 2, o + e, hd, p, ldp, v + e, stride, cells, n), e += 16;
    if (e + 8 <= hd) att_mix_vecs(NH, 1, o + e, hd, p, ldp, v + e, stride, cells, n), e += 8;
    for (int g = 0; g < NH; g++)
        for (int f = e; f < hd; f++)
            for (int j = 0; j < n; j++) o[(size_t)g * hd + f] += p[g * ldp + j] * att_row(v, stride, cells, j)[f];
}

/* keys in blocks of ATT_KEY_BLOCK, each block's value rows reused from L1 by every head group (a head's sums carry
 * from block to block in o: the same chain) */
static void att_mix_avx2(float *o, int nh, const float *p, size_t ldp, const float *v, size_t stride, const int *cells,
                         int n, int hd) {
    for (int b0 = 0; b0 < n; b0 += ATT_KEY_BLOCK) {
        const int nb = n - b0 < ATT_KEY_BLOCK ? n - b0 : ATT_KEY_BLOCK;
        const float *vb = cells ? v : v + (size_t)b0 * stride;
        const int *cb = cells ? cells + b0 : NULL;
        for (int g = 0, gs; g < nh; g += gs) {
            gs = head_group(nh - g);
            WITH_HEADS(att_mix_heads, gs, o + (size_t)g * hd, hd, p + g * ldp + b0, ldp, vb, stride, cb, nb);
        }
    }
}

/* exp(x) for 8 lanes: x = n ln2 + r (n = round(x / ln2), r in [-ln2/2, ln2/2] by a two-part ln2), exp(r) by its
 * Taylor polynomial to degree 7 (truncation < 6e-9 relative, below half an ulp), times 2^n built in the exponent
 * field. x below -87.33 (where exp leaves the normal floats) gives 0, above 88.37 the largest power used (the
 * callers add 1 or take ratios, so that saturates harmlessly); NaN stays NaN. Within 2 ulp of expf (tested). */
INLINE __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3365f), hi = _mm256_set1_ps(88.3762f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y);     /* underflow: 0 */
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN in, NaN out */
}

/* lanes i < m of 8 (the tail of an array) */
INLINE __m256i tail_mask(int m) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static float softmax_avx2(float *s, int n) {
    const int n8 = n & ~7;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < n8; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + i));
    float mx = hmax8(mv);
    for (int i = n8; i < n; i++)
        if (s[i] > mx) mx = s[i];
    const __m256 m = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    for (int i = 0; i < n8; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m));
        _mm256_storeu_ps(s + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (n8 < n) {
        __m256i k = tail_mask(n - n8);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + n8, k), m)), _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(s + n8, k, e);
        sum = _mm256_add_ps(sum, e);
    }
    return kern_hsum8(sum);
}

/* the scale from kern_rms_scale (as the scalar table), the scaling as the scalar table does it */
static void rmsnorm_avx2(const float *x, const float *g, int n, float eps, float *out) {
    const int n8 = n & ~7;
    float r = kern_rms_scale(x, n, eps);
    const __m256 rv = _mm256_set1_ps(r);
    for (int i = 0; i < n8; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), rv), _mm256_loadu_ps(g + i)));
    for (int i = n8; i < n; i++) out[i] = x[i] * r * g[i];
}

/* kern_ggml_expf in 8 lanes, for silu: the same operations up to the scaling by 2^n, which is exact here for
 * n in [-126, 127]; below, 1 + e is 1 either way (e < 2^-125), above, e is +inf as ggml's scalef gives. */
INLINE __m256 ggml_exp8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-126.0f)), _mm256_set1_ps(127.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nc), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_GT_OQ));
}

INLINE __m256 silu_mul8(__m256 g, __m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, ggml_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
}

/* as the scalar table: whole groups of 16 with ggml's vector exp, the rest with libm expf */
static void silu_mul_avx2(float *g, const float *u, size_t n) {
    const size_t n16 = n & ~(size_t)15;
    for (size_t i = 0; i < n16; i += 8) _mm256_storeu_ps(g + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    for (size_t i = n16; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* kern_quantize_q8 with vectors: the same max, the same scalar scale, roundf's halves-away-from-zero rounding
 * (truncate, then step away from zero where the dropped part is >= 0.5; both exact), the same pair sums. */
static void quantize_q8_avx2(const float *x, int n_cols, act_q8 *out) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int b = 0; b < n_cols / 32; b++) {
        const float *v = x + 32 * b;
        __m256 xv[4], m = _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) xv[i] = _mm256_loadu_ps(v + 8 * i), m = _mm256_max_ps(m, _mm256_andnot_ps(sign, xv[i]));
        float amax = hmax8(m);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = fp16_to_f32(f32_to_fp16(d));
        const __m256 idv = _mm256_set1_ps(id);
        __m256i qi[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256 y = _mm256_mul_ps(xv[i], idv);
            __m256 t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(y, t)), half, _CMP_GE_OQ);
            t = _mm256_add_ps(t, _mm256_and_ps(away, _mm256_or_ps(one, _mm256_and_ps(sign, y))));
            qi[i] = _mm256_cvtps_epi32(t);
        }
        /* int32 x 32 -> int8 x 32 in order (the packs work within 128-bit lanes: fix the order with a permute) */
        __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
        __m256i q8 = _mm256_packs_epi16(w01, w23);
        q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)out[b].qs, q8);
        __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8); /* qs[2j] + qs[2j+1] */
        out[b].s8 = 8 * hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
}

/* kern_quantize_q8k with vectors: the same largest magnitude (its first occurrence gives the sign), the same scalar
 * scale, iscale * x rounded half to even by cvtps (rintf's rounding in the default mode), min 127, the same sums. */
static void quantize_q8k_avx2(const float *x, int n_cols, act_q8k *out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int b = 0; b < n_cols / QK_K; b++) {
        const float *v = x + QK_K * b;
        act_q8k *o = &out[b];
        __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        const __m256 inf = _mm256_set1_ps(INFINITY);
        for (int i = 0; i < QK_K; i += 8) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(v + i));
            m = _mm256_max_ps(m, a);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* NaN or infinite */
        }
        const float amax = hmax8(m);
        if (amax == 0.0f || _mm256_movemask_ps(bad)) { /* zeros, or non-finite values: the reference itself */
            kern_quantize_q8k(v, QK_K, o);
            continue;
        }
        const __m256 av = _mm256_set1_ps(amax);
        int first = 0;
        for (int i = 0; i < QK_K; i += 8) {
            int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v + i)), av, _CMP_EQ_OQ));
            if (mask) {
                first = i + __builtin_ctz((unsigned)mask);
                break;
            }
        }
        const float iscale = -127.0f / v[first];
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i q[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(v + i + 8 * k))), top);
            __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(void *)(o->qs + i), q8);
        }
        for (int g = 0; g < 16; g++) {
            /* 16 int8 -> int16 and their sum */
            __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(o->qs + 16 * g)));
            o->bsums[g] = (int16_t)hsum_i32(_mm256_madd_epi16(w, _mm256_set1_epi16(1)));
        }
        o->d = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------------ in-register peak of each inner step */
/* The arithmetic a block kernel must do per weight with no memory traffic beyond L1: the ceiling the real kernels
 * approach (bench peak). Float types: the kernels' own step (step_float) of their tile, 12 accumulators: 3 rows x 4
 * positions for 16-bit weights (3 weight vectors loaded and converted, 4 activation loads, 12 FMAs = 96 MACs), 4 x 3
 * for f32; operands re-read from L1 every step. Quantized: one 32-block of a 2-row x 4-position tile (per row: |w|
 * or the nibble unpack; per (row, position): the integer pair sums, their widening, the conversion and one FMA = 256
 * MACs per step). The empty asm keeps the compiler from hoisting the loads out of the loop. Returns the MACs done. */
#define KEEP(v) __asm__ volatile("" : "+x"(v))
INLINE double peak_float_tile(int t, int R, int P, long iters) {
    _Alignas(32) unsigned char wbuf[4][32]; /* R weight vectors (8 values each), as the kernel reads them */
    _Alignas(32) float xbuf[4][8];          /* P activation vectors */
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 8; c++) {
            float v = 0.001f * (float)(i * 8 + c + 1);
            uint16_t h = t == KF_F16 ? f32_to_fp16(v) : f32_to_bf16(v);
            if (t == KF_F32) memcpy(wbuf[i] + 4 * c, &v, 4);
            else memcpy(wbuf[i] + 2 * c, &h, 2);
            xbuf[i][c] = 1e-7f * (float)(i + 1);
        }
    __m256 r[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) r[i][j] = _mm256_setzero_ps();
    const unsigned char *wr[4] = {wbuf[0], wbuf[1], wbuf[2], wbuf[3]};
    const float *xp[4] = {xbuf[0], xbuf[1], xbuf[2], xbuf[3]};
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) __asm__ volatile("" : "+r"(wr[i]), "+r"(xp[i])); /* operands re-read each step */
        step_float(t, R, P, wr, 0, xp, r);
    }
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < P; j++) sum = _mm256_add_ps(sum, r[i][j]);
    volatile float sink = kern_hsum8(sum);
    (void)sink;
    return (double)iters * 8 * R * P;
}
INLINE double peak_float(int t, long iters) {
    return t == KF_F32 ? peak_float_tile(t, 4, 3, iters) : peak_float_tile(t, 3, 4, iters);
}

INLINE double peak_quant(int t, long iters) {
    __m256i w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(-5);
    __m128i n0 = _mm_set1_epi8(0x35), n1 = _mm_set1_epi8(0x4b);
    __m256i x[4] = {_mm256_set1_epi8(5), _mm256_set1_epi8(-6), _mm256_set1_epi8(7), _mm256_set1_epi8(-9)};
    const __m256i ones = _mm256_set1_epi16(1), s8 = _mm256_set1_epi16(40);
    const __m256 sc = _mm256_set1_ps(1e-9f);
    __m256 a[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
    for (long it = 0; it < iters; it++) {
        __m256i wq[2], ax[2];
        if (t == T_Q8_0) {
            KEEP(w0);
            KEEP(w1);
            wq[0] = w0, wq[1] = w1;
            ax[0] = _mm256_sign_epi8(w0, w0), ax[1] = _mm256_sign_epi8(w1, w1);
        } else {
            KEEP(n0);
            KEEP(n1);
            __m128i nn[2] = {n0, n1};
#pragma GCC unroll 2
            for (int i = 0; i < 2; i++) {
                __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(nn[i]), _mm_srli_epi16(nn[i], 4), 1);
                wq[i] = ax[i] = _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) KEEP(x[j]);
#pragma GCC unroll 2
        for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i d16 = t == T_Q8_0 ? _mm256_maddubs_epi16(ax[i], _mm256_sign_epi8(x[j], wq[i]))
                                          : _mm256_sub_epi16(_mm256_maddubs_epi16(ax[i], x[j]), s8);
                __m256 q = _mm256_cvtepi32_ps(_mm256_madd_epi16(d16, ones));
                a[4 * i + j] = _mm256_fmadd_ps(sc, q, a[4 * i + j]);
            }
    }
    __m256 sum = a[0];
    for (int i = 1; i < 8; i++) sum = _mm256_add_ps(sum, a[i]);
    volatile float sink = kern_hsum8(sum);
    (void)sink;
    return (double)iters * 256;
}

static double peak_avx2(uint32_t type, long iters) {
    switch (type) {
    case GGML_F32: return peak_float(KF_F32, iters);
    case GGML_F16: return peak_float(KF_F16, iters);
    case GGML_BF16: return peak_float(KF_BF16, iters);
    case GGML_Q8_0: return peak_quant(T_Q8_0, iters);
    case GGML_Q4_0: return peak_quant(T_Q4_0, iters);
    default: return 0;
    }
}

/* the fields the avx2 and avx512 tables share */
#define AVX2_FIELDS                                                                                               \
    .dot = dot_avx2, .axpy = axpy_avx2, .att_scores = att_scores_avx2, .att_mix = att_mix_avx2,                   \
    .softmax = softmax_avx2, .quantize_q8 = quantize_q8_avx2, .quantize_q8k = quantize_q8k_avx2,                \
    .silu_mul = silu_mul_avx2, .rmsnorm = rmsnorm_avx2,                                                           \
    .peak = peak_avx2

static const kern_ops AVX2 = {
    .name = "avx2",
    AVX2_FIELDS,
    .mm = {[GGML_F32] = mm_f32_avx2, [GGML_F16] = mm_f16_avx2, [GGML_BF16] = mm_bf16_avx2,
           [GGML_Q8_0] = mm_q8_0_avx2, [GGML_Q4_0] = kern_tile_mm_q4_0, [GGML_Q2_K] = mm_q2_k,
           [GGML_Q3_K] = mm_q3_k, [GGML_Q4_K] = mm_q4_k, [GGML_Q5_K] = mm_q5_k, [GGML_Q6_K] = mm_q6_k},
};

#ifdef SPECDEC_HAVE_AVX512
/* avx512: blocks of AVX512_MIN positions or more of the float types (AVX512_MIN_Q8 of q8_0) through kern_avx512.c
 * (the same bits as the AVX2 kernels: two of their chains per 512-bit vector; below these sizes staging the rows
 * costs more than the wider vectors save: measured crossovers on 2048 x 2048), everything else as the avx2 table. */
enum { AVX512_MIN = 6, AVX512_MIN_Q8 = 4 };
#define MM_512(name, T512, AVX2FN)                                                                                \
    static void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        if (n >= AVX512_MIN) kern_avx512_mm_float(T512, w, rb, cols, x, xs, n, y, ldy, r0, r1);                   \
        else AVX2FN(w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                       \
    }
MM_512(mm_f32_avx512, KF_F32, mm_f32_avx2)
MM_512(mm_f16_avx512, KF_F16, mm_f16_avx2)
MM_512(mm_bf16_avx512, KF_BF16, mm_bf16_avx2)
/* the K-quant and q4_0 tiles in their AVX-512 VNNI builds */
KQ_MM(mm_q2_k_vnni, mm_q2_k_rows, kern_tile_mm_q2_k_vnni)
KQ_MM(mm_q3_k_vnni, mm_q3_k_rows, kern_tile_mm_q3_k_vnni)
KQ_MM(mm_q4_k_vnni, mm_q4_k_rows, kern_tile_mm_q4_k_vnni)
KQ_MM(mm_q5_k_vnni, mm_q5_k_rows, kern_tile_mm_q5_k_vnni)
KQ_MM(mm_q6_k_vnni, mm_q6_k_rows, kern_tile_mm_q6_k_vnni)
static void mm_q8_0_avx512(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                           int ldy, int r0, int r1) {
    if (n >= AVX512_MIN_Q8) kern_avx512_mm_q8_0(w, rb, cols, x, xs, n, y, ldy, r0, r1);
    else mm_q8_0_avx2(w, rb, cols, x, xs, n, y, ldy, r0, r1);
}

static const kern_ops AVX512 = {
    .name = "avx512",
    AVX2_FIELDS,
    .mm = {[GGML_F32] = mm_f32_avx512, [GGML_F16] = mm_f16_avx512, [GGML_BF16] = mm_bf16_avx512,
           [GGML_Q8_0] = mm_q8_0_avx512, [GGML_Q4_0] = kern_tile_mm_q4_0_vnni, [GGML_Q2_K] = mm_q2_k_vnni,
           [GGML_Q3_K] = mm_q3_k_vnni, [GGML_Q4_K] = mm_q4_k_vnni, [GGML_Q5_K] = mm_q5_k_vnni,
           [GGML_Q6_K] = mm_q6_k_vnni},
};
#endif

/* CPUID: AVX2 (leaf 7 EBX bit 5), FMA (leaf 1 ECX bit 12), F16C (bit 29), and the OS saving YMM state
 * (OSXSAVE bit 27 + XCR0 bits 1-2). */
static bool cpu_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), f16c = c & (1u << 29), osx = c & (1u << 27);
    if (!fma || !f16c || !osx) return false;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & 6u) != 6u) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return b & (1u << 5);
}

/* AVX-512 F (leaf 7 EBX bit 16), BW (30), VL (31), VNNI (ECX bit 11), and the OS saving the opmask and ZMM state
 * (XCR0 bits 5-7) */
static bool cpu_avx512(void) {
    unsigned a, b, c, d;
    if (!cpu_avx2() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 16) | (1u << 30) | (1u << 31);
    if ((b & need) != need || !(c & (1u << 11))) return false;
    unsigned xlo, xhi;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    return (xlo & 0xe6u) == 0xe6u;
}

const kern_ops *kern_avx2(void) { return cpu_avx2() ? &AVX2 : NULL; }

const kern_ops *kern_avx512(void) {
#ifdef SPECDEC_HAVE_AVX512
    return cpu_avx512() ? &AVX512 : NULL;
#else
    return NULL;
#endif
}
#else
const kern_ops *kern_avx2(void) { return NULL; }
const kern_ops *kern_avx512(void) { return NULL; }
#endif
