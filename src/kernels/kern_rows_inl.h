/* kern_rows_inl: the row walk shared by the AVX2 block kernels (kern_avx2.c, kern_rows_kq_avx2.c): prefetching,
 * the compile-time tile sizes, ROWS_MM (decode pairs, block row groups) and ROWS_OVER_TILES. Include only from
 * files compiled with the AVX2 flags. */
#ifndef SD_KERNELS_KERN_ROWS_INL_H
#define SD_KERNELS_KERN_ROWS_INL_H
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define PREFETCH_AHEAD 1024
enum { POS_GROUP = 32 }; /* most positions per pass over rows */

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

/* fn(t, R, P, ...) with P (1..4) turned into a compile-time constant */
#define WITH_P(fn, t, R, P, ...)                                                                                  \
    do {                                                                                                          \
        if ((P) == 4) fn(t, R, 4, __VA_ARGS__);                                                                   \
        else if ((P) == 3) fn(t, R, 3, __VA_ARGS__);                                                              \
        else if ((P) == 2) fn(t, R, 2, __VA_ARGS__);                                                              \
        else fn(t, R, 1, __VA_ARGS__);                                                                            \
    } while (0)
/* the same with P 1..8 */
#define WITH_P8(fn, t, R, P, ...)                                                                                 \
    do {                                                                                                          \
        if ((P) > 4) {                                                                                            \
            if ((P) == 8) fn(t, R, 8, __VA_ARGS__);                                                               \
            else if ((P) == 7) fn(t, R, 7, __VA_ARGS__);                                                          \
            else if ((P) == 6) fn(t, R, 6, __VA_ARGS__);                                                          \
            else fn(t, R, 5, __VA_ARGS__);                                                                        \
        } else WITH_P(fn, t, R, P, __VA_ARGS__);                                                                  \
    } while (0)
/* fn(t, R, P, ...) with R (1..BR, BR <= 4 a literal) a compile-time constant, P passed through. The arms above
 * BR are constant-false, so compilers emit no code for them (each arm inlines a whole row kernel: with every arm
 * clang's sanitizer builds of the K-quant kernels took minutes). */
#define WITH_R(BR, fn, t, R, P, ...)                                                                              \
    do {                                                                                                          \
        if ((BR) >= 4 && (R) == 4) fn(t, 4, P, __VA_ARGS__);                                                      \
        else if ((BR) >= 3 && (R) == 3) fn(t, 3, P, __VA_ARGS__);                                                 \
        else if ((BR) >= 2 && (R) == 2) fn(t, 2, P, __VA_ARGS__);                                                 \
        else fn(t, 1, P, __VA_ARGS__);                                                                            \
    } while (0)
/* fn(t, R, P, ...) with R (1..4) and P (1..4) compile-time constants; WITH_R2P8: R 1..2, P 1..8 */
#define WITH_RP(fn, t, R, P, ...)                                                                                 \
    do {                                                                                                          \
        if ((R) == 4) WITH_P(fn, t, 4, P, __VA_ARGS__);                                                           \
        else if ((R) == 3) WITH_P(fn, t, 3, P, __VA_ARGS__);                                                      \
        else if ((R) == 2) WITH_P(fn, t, 2, P, __VA_ARGS__);                                                      \
        else WITH_P(fn, t, 1, P, __VA_ARGS__);                                                                    \
    } while (0)
#define WITH_R2P8(fn, t, R, P, ...)                                                                               \
    do {                                                                                                          \
        if ((R) == 2) WITH_P8(fn, t, 2, P, __VA_ARGS__);                                                          \
        else WITH_P8(fn, t, 1, P, __VA_ARGS__);                                                                   \
    } while (0)
#define WITH_R2P4(fn, t, R, P, ...)                                                                               \
    do {                                                                                                          \
        if ((R) == 2) WITH_P(fn, t, 2, P, __VA_ARGS__);                                                           \
        else WITH_P(fn, t, 1, P, __VA_ARGS__);                                                                    \
    } while (0)

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
 * arithmetic instead of stalling it. Both give each (row, position) the same chain. ROWS is rows_float, rows_quant or
 * a K-quant walk (kern_rows_kq_avx2.c); BR <= 4. */
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
                    WITH_R(BR, ROWS, T, R, PT, wr, ri, cols, xg, xs, np, yg, ldy, pf);                            \
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

INLINE float blk_d(const unsigned char *blk) {
    uint16_t h;
    memcpy(&h, blk, 2);
    return _cvtsh_ss(h);
}

INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Rows wr[0..R) against all n positions in ceil(n / PT) tiles of even sizes; pf in the first tile only (the later
 * ones find the rows in L1). ACT: the activation block type, QB: the values per block, TILE: the tile kernel, PMAX
 * the most positions per tile (>= PT) and WITH its dispatcher (WITH_RP: 4, WITH_RP8: 8). */
#define ROWS_OVER_TILES(name, ACT, QB, TILE, PMAX, WITH)                                                          \
    INLINE void name(int t, int R, int PT, const unsigned char *const *wr, const int *ri, int cols, const void *x, \
                     size_t xs, int n, float *y, int ldy, size_t pf) {                                            \
        const int nb = cols / (QB);                                                                               \
        const ACT *xp[PMAX];                                                                                      \
        int nt = (n + PT - 1) / PT;                                                                               \
        for (int ti = 0, p = 0; ti < nt; ti++) {                                                                  \
            int P = (n - p) / (nt - ti);                                                                          \
            for (int j = 0; j < P; j++) xp[j] = (const ACT *)(const void *)((const char *)x + (size_t)(p + j) * xs); \
            WITH(TILE, t, R, P, wr, ri, nb, xp, y, ldy, p, ti == 0 ? pf : 0);                                     \
            p += P;                                                                                               \
        }                                                                                                         \
    }
#endif
