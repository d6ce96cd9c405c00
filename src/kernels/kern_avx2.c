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
#include "kernels/kern_rows_inl.h"
#include "kernels/kern_rows_kq.h"
#include "kernels/kern_tile.h"
#include "kernels/kquant.h"
#include "util/fp16.h"



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


enum { COL_CHUNK = 2048 }; /* columns per pass (multiple of 32) */

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

ROWS_OVER_TILES(rows_quant, act_q8, 32, tile_quant, 4, WITH_RP)

/* quantized types: 2 rows x 4 positions (8 accumulators; the integer steps need the other registers) */
ROWS_MM(mm_q8_0_avx2, rows_quant, T_Q8_0, 2, 4)


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
           [GGML_Q8_0] = mm_q8_0_avx2, [GGML_Q4_0] = kern_tile_mm_q4_0, [GGML_Q2_K] = kern_rows_kq_mm_q2_k,
           [GGML_Q3_K] = kern_rows_kq_mm_q3_k, [GGML_Q4_K] = kern_rows_kq_mm_q4_k, [GGML_Q5_K] = kern_rows_kq_mm_q5_k, [GGML_Q6_K] = kern_rows_kq_mm_q6_k},
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
static void mm_q8_0_avx512(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                           int ldy, int r0, int r1) {
    if (n >= AVX512_MIN_Q8) kern_avx512_mm_q8_0(w, rb, cols, x, xs, n, y, ldy, r0, r1);
    else mm_q8_0_avx2(w, rb, cols, x, xs, n, y, ldy, r0, r1);
}

static const kern_ops AVX512 = {
    .name = "avx512",
    AVX2_FIELDS,
    .mm = {[GGML_F32] = mm_f32_avx512, [GGML_F16] = mm_f16_avx512, [GGML_BF16] = mm_bf16_avx512,
           [GGML_Q8_0] = mm_q8_0_avx512, [GGML_Q4_0] = kern_tile_mm_q4_0_vnni, [GGML_Q2_K] = kern_rows_kq_mm_q2_k_vnni,
           [GGML_Q3_K] = kern_rows_kq_mm_q3_k_vnni, [GGML_Q4_K] = kern_rows_kq_mm_q4_k_vnni, [GGML_Q5_K] = kern_rows_kq_mm_q5_k_vnni,
           [GGML_Q6_K] = kern_rows_kq_mm_q6_k_vnni},
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
