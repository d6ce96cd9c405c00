/* AVX-512 block kernels for the float weight types (kern_avx512.h). This file alone is compiled with -mavx512f
 * -mavx512bw -mavx512vl -mavx512vnni (plus the AVX2 flags); it is only called through the avx512 table, after its
 * CPUID check.
 *
 * The same bits as the AVX2 kernels (kern_avx2.c): there each (row, position) output is one 8-lane chain over the
 * columns in order (r = fma(w[c..c+8], x[c..c+8], r)), then hsum8 and the tail columns one at a time. Here a 512-bit
 * vector holds TWO such chains side by side, those of rows A and B of a pair for one position (weights [A | B], the
 * position's 8 activations in both halves), so every FMA is the AVX2 one, twice as wide, and the halves' hsum8 and
 * tails are computed as there.
 *
 * Loop order: positions in groups whose activations stay in L2; for each group, groups of 2 * KP rows (KP pairs),
 * columns in chunks of CC. A chunk of a row group is first converted to float and staged into an L1 buffer in the
 * pair layout (16-bit weights converted once per group of positions instead of once per tile); then the group's
 * positions, in tiles of up to PT, run over it: KP x PT accumulators (24 of the 32 registers), one broadcast
 * activation and KP weight loads per 8 columns. */
#include "kernels/kern_avx512.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX512)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_avx2_inl.h"

#define INLINE static inline __attribute__((always_inline))

enum {
    KP = 4,       /* row pairs per group (8 rows) */
    PT = 6,       /* most positions per tile (KP * PT = 24 accumulators) */
    CC = 512,     /* columns per staged chunk: 4 pairs x 512 x 8 bytes = 16 KiB */
    PG_MAX = 64   /* most positions per group */
};

/* The bytes [end, end + len) of the group's 2 KP rows wr (the next chunk: end = off + len), or when this chunk
 * [off, off + len) is the rows' last (row_len bytes used), the first chunk of the next row group (rows r + 2 KP..,
 * below r1) into L2, while this chunk computes: the weight stream from memory overlaps the arithmetic. */
INLINE void prefetch_next(const unsigned char *w, size_t rb, const unsigned char *const *wr, int r, int r1, size_t off,
                          size_t len, size_t row_len) {
    for (int i = 0; i < 2 * KP; i++) {
        const char *p;
        size_t n;
        if (off + len < row_len) p = (const char *)wr[i] + off + len, n = row_len - off - len;
        else if (r + 2 * KP + i < r1) p = (const char *)w + (size_t)(r + 2 * KP + i) * rb, n = row_len;
        else continue;
        n = n < len ? n : len;
        for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, _MM_HINT_T1);
    }
}

/* the 8 activations from x + c in both halves */
INLINE __m512 bcast8(const float *x) { return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x)))); }

/* A tile's K x P registers from the running sums acc[i * PG_MAX + j] (zero on the first chunk), and back. */
INLINE void acc_load(int K, int P, __m512 r[KP][PT], const __m512 *acc, int first) {
#pragma GCC unroll 4
    for (int i = 0; i < K; i++)
#pragma GCC unroll 6
        for (int j = 0; j < P; j++) r[i][j] = first ? _mm512_setzero_ps() : acc[i * PG_MAX + j];
}
INLINE void acc_store(int K, int P, __m512 r[KP][PT], __m512 *acc) {
#pragma GCC unroll 4
    for (int i = 0; i < K; i++)
#pragma GCC unroll 6
        for (int j = 0; j < P; j++) acc[i * PG_MAX + j] = r[i][j];
}

/* K pairs x P positions over the staged chunk (n8 steps of 8 columns): acc[i * PG_MAX + j] continued */
INLINE void tile(int K, int P, const __m512 *sw, int n8, const float *const *xp, int c0, __m512 *acc, int first) {
    __m512 r[KP][PT];
    acc_load(K, P, r, acc, first);
    for (int s = 0; s < n8; s++) {
        __m512 wv[KP];
#pragma GCC unroll 4
        for (int i = 0; i < K; i++) wv[i] = _mm512_load_ps((const float *)(sw + (size_t)i * (CC / 8) + s));
#pragma GCC unroll 6
        for (int j = 0; j < P; j++) {
            const __m512 xv = bcast8(xp[j] + c0 + 8 * s);
#pragma GCC unroll 4
            for (int i = 0; i < K; i++) r[i][j] = _mm512_fmadd_ps(wv[i], xv, r[i][j]);
        }
    }
    acc_store(K, P, r, acc);
}

/* fn(K, P, ...) with P (1..6, at most the tile limit of fn's caller) a compile-time constant */
#define WITH_P(fn, K, P, ...)                                                                                     \
    do {                                                                                                          \
        switch (P) {                                                                                              \
        case 6: fn(K, 6, __VA_ARGS__); break;                                                                     \
        case 5: fn(K, 5, __VA_ARGS__); break;                                                                     \
        case 4: fn(K, 4, __VA_ARGS__); break;                                                                     \
        case 3: fn(K, 3, __VA_ARGS__); break;                                                                     \
        case 2: fn(K, 2, __VA_ARGS__); break;                                                                     \
        default: fn(K, 1, __VA_ARGS__); break;                                                                    \
        }                                                                                                         \
    } while (0)

/* ------------------------------------------------------------------ q8_0 */
/* The AVX2 kernel's chains: per (row, position) 8 lanes, lane l of a 32-block the exact integer sum of its values
 * 4l..4l+3, r = fma(d_w * d_x, (float)lane, r) over the blocks in order, then hsum8. Here a 512-bit vector holds the
 * chains of rows A and B of a pair for one position. The integer lanes by one dpbusd: (x + 128) as unsigned bytes
 * (x ^ 0x80) times the signed weights, accumulated onto the staged -128 * (the weights' 4-value sums), which leaves
 * exactly sum w x (|sum| <= 4 * 255 * 128: no overflow), the integers maddubs/madd give the AVX2 kernel. */
enum {
    QKB = 16 /* blocks per staged chunk: 4 pairs x 16 blocks x 192 bytes = 12 KiB */
};

typedef struct q8_stage {
    __m512i w;    /* the 32 weights of row A | of row B */
    __m512i corr; /* -128 * 4-value sums of the weights, 8 int32 lanes per row */
    __m512 d;     /* d_w of row A in the low 8 lanes, row B in the high 8 */
} q8_stage;

INLINE __m512i bcast32(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

INLINE void stage_q8(const unsigned char *a, const unsigned char *b, q8_stage *st) {
    uint16_t ha, hb;
    memcpy(&ha, a, 2);
    memcpy(&hb, b, 2);
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(a + 2))),
                                         _mm256_loadu_si256((const __m256i *)(const void *)(b + 2)), 1);
    st->w = w;
    /* -128 * sum of 4 weights: dpbusd of 0x80 bytes (128 unsigned) with w, negated */
    st->corr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), w));
    st->d = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(fp16_to_f32(ha)))),
                                                _mm256_castps_pd(_mm256_set1_ps(fp16_to_f32(hb))), 1));
}

/* K pairs x P positions over kn staged blocks (stage[i * QKB + k]), acc continued */
INLINE void tile_q8(int K, int P, const q8_stage *stg, int kn, const act_q8 *const *xp, int k0, __m512 *acc, int first) {
    __m512 r[KP][PT];
    acc_load(K, P, r, acc, first);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int k = 0; k < kn; k++) {
#pragma GCC unroll 6
        for (int j = 0; j < P; j++) {
            const act_q8 *xb = xp[j] + k0 + k;
            const __m512i xu = _mm512_xor_si512(bcast32(xb->qs), flip);
            const __m512 dx = _mm512_set1_ps(xb->d);
#pragma GCC unroll 4
            for (int i = 0; i < K; i++) {
                const q8_stage *st = stg + i * QKB + k;
                const __m512 q = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(st->corr, xu, st->w));
                r[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(st->d, dx), q, r[i][j]);
            }
        }
    }
    acc_store(K, P, r, acc);
}

enum { PT8 = 4 }; /* q8_0 tiles: up to 4 pairs x 4 positions */
/* (q8_0 tiles never take 5 or 6 positions: PT8 = 4) */

/* ------------------------------------------------------------------ the walk of both */
enum { K_Q8 = 3 }; /* kind: a float kind (KF_*) or q8_0 */

/* Positions in groups whose activations stay in L2 (256 KiB); for each group, groups of KP row pairs; the columns in
 * chunks (CC columns / QKB blocks) staged for the pairs, the next chunk prefetched, every tile of positions over
 * it; then each row's chain: its half of the pair's vector, hsum8, and (float types) the tail columns. */
INLINE void mm_pairs(int kind, const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                     int ldy, int r0, int r1) {
    const int q8 = kind == K_Q8, esz = kind == KF_F32 ? 4 : 2;
    const int c8 = cols & ~7;                                /* float types: columns in whole 8-column steps */
    const int nsteps = q8 ? cols / 32 : c8 / 8;              /* steps: 32-blocks or 8-column steps */
    const int chunk = q8 ? QKB : CC / 8;                     /* steps per staged chunk */
    const size_t step_bytes = q8 ? 34 : (size_t)8 * esz;     /* weight bytes per step of a row */
    _Alignas(64) __m512 sw[KP * (CC / 8)];                   /* float types: [pair][step] weights of rows A | B */
    _Alignas(64) q8_stage stg[KP * QKB];                     /* q8_0: [pair][block] */
    _Alignas(64) __m512 acc[KP * PG_MAX];                    /* [pair][position] */
    size_t g = ((size_t)256 << 10) / xs;
    const int pg = g > PG_MAX ? PG_MAX : g < 1 ? 1 : (int)g;
    for (int p0 = 0; p0 < n; p0 += pg) {
        const int np = n - p0 < pg ? n - p0 : pg;
        const void *xp[PG_MAX];
        for (int p = 0; p < np; p++) xp[p] = (const char *)x + (size_t)(p0 + p) * xs;
        for (int r = r0; r < r1; r += 2 * KP) {
            const int R = r1 - r < 2 * KP ? r1 - r : 2 * KP, K = (R + 1) / 2;
            const unsigned char *wr[2 * KP];
            for (int i = 0; i < 2 * KP; i++) wr[i] = w + (size_t)(r + (i < R ? i : R - 1)) * rb; /* repeats: unused */
            for (int s0 = 0; s0 < nsteps; s0 += chunk) {
                const int sn = nsteps - s0 < chunk ? nsteps - s0 : chunk;
                prefetch_next(w, rb, wr, r, r1, (size_t)s0 * step_bytes, (size_t)chunk * step_bytes,
                              (size_t)nsteps * step_bytes);
                for (int i = 0; i < K; i++)
                    for (int k = 0; k < sn; k++) {
                        if (q8) {
                            stage_q8(wr[2 * i] + (size_t)(s0 + k) * 34, wr[2 * i + 1] + (size_t)(s0 + k) * 34, &stg[i * QKB + k]);
                            continue;
                        }
                        const int c = 8 * (s0 + k);
                        sw[i * (CC / 8) + k] = _mm512_castpd_ps(_mm512_insertf64x4(
                            _mm512_castpd256_pd512(_mm256_castps_pd(kern_ld8(kind, wr[2 * i], c))),
                            _mm256_castps_pd(kern_ld8(kind, wr[2 * i + 1], c)), 1));
                    }
                const int pt = q8 ? PT8 : PT, nt = (np + pt - 1) / pt;
                for (int ti = 0, p = 0; ti < nt; ti++) {
                    const int P = (np - p) / (nt - ti);
                    const float *const *xf = (const float *const *)(xp + p);
                    const act_q8 *const *xq = (const act_q8 *const *)(xp + p);
#define TILES(KK)                                                                                                 \
    do {                                                                                                          \
        if (q8) WITH_P(tile_q8, KK, P > PT8 ? PT8 : P, stg, sn, xq, s0, acc + p, s0 == 0);                        \
        else WITH_P(tile, KK, P, sw, sn, xf, 8 * s0, acc + p, s0 == 0);                                           \
    } while (0)
                    switch (K) {
                    case 4: TILES(4); break;
                    case 3: TILES(3); break;
                    case 2: TILES(2); break;
                    default: TILES(1); break;
                    }
#undef TILES
                    p += P;
                }
            }
            for (int i = 0; i < R; i++)
                for (int p = 0; p < np; p++) {
                    float s = 0.0f; /* float types with no full 8-column step: the tail only */
                    if (nsteps) {
                        const __m512d a = _mm512_castps_pd(acc[(i / 2) * PG_MAX + p]);
                        s = kern_hsum8(_mm256_castpd_ps(i % 2 ? _mm512_extractf64x4_pd(a, 1) : _mm512_castpd512_pd256(a)));
                    }
                    for (int cc = c8; !q8 && cc < cols; cc++) s += kern_ld1(kind, wr[i], cc) * ((const float *)xp[p])[cc];
                    y[(size_t)(p0 + p) * ldy + r + i] = s;
                }
        }
    }
}

void kern_avx512_mm_q8_0(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y, int ldy,
                         int r0, int r1) {
    mm_pairs(K_Q8, w, rb, cols, x, xs, n, y, ldy, r0, r1);
}

void kern_avx512_mm_float(int t, const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                          int ldy, int r0, int r1) {
    if (t == KF_F16) mm_pairs(KF_F16, w, rb, cols, x, xs, n, y, ldy, r0, r1);
    else if (t == KF_BF16) mm_pairs(KF_BF16, w, rb, cols, x, xs, n, y, ldy, r0, r1);
    else mm_pairs(KF_F32, w, rb, cols, x, xs, n, y, ldy, r0, r1);
}
#endif
