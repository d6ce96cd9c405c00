/* AVX2 K-quant kernels for blocks of positions with eight rows in the lanes (kern_tile.h). Compiled with -mavx2
 * -mfma -mf16c; only reached through the AVX2 table, after its CPUID check.
 *
 * The walk is kern_tile_avx2.c's: position groups, groups of 8 rows, chunks of KQ_KB super-blocks staged into an
 * L1 buffer, every position of the group over the staged chunk. Staging a super-block of the 8 rows: the levels
 * (kq_levels) interleaved as for q4_0 (a vector per (half h, quarter q): values 8q..8q+7 of rows 4h..4h+3), the
 * scale of each group of 16 repeated over the int16 lanes of its row's pair sums, the mins and off * sc (the
 * offset correction of Q3_K/Q6_K) as int16 pairs per row, and d, dmin per row. Per position and super-block: two
 * maddubs per (half, group) (the quarters of the group; <= 2 * 2 * 63 * 127 fits int16), one madd with the group's
 * scales, one hadd of the halves at the end: the rows' exact isum; msum and the correction by madd of the pair
 * vectors with the activation's bsums. Then the scalar reference's float expression per (row, position), lane by
 * lane: s = s + ((d * x.d) * isum - (dmin * x.d) * msum), super-blocks in order: the same bits as the scalar table
 * (and as the AVX2 table's per-row kernel, which blocks of few positions keep using). */
#include "kernels/kern_tile.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kquant.h"
#include "kernels/kq_levels_avx2.h"

#define INLINE static inline __attribute__((always_inline))

enum {
    TR = 8,      /* rows per group */
    KQ_KB = 4,   /* super-blocks per staged chunk: 4 * 3.6 KiB */
    PG_MAX = 64  /* most positions per group */
};

static const int LANE_ROW[8] = {0, 1, 4, 5, 2, 3, 6, 7};

/* one super-block of 8 rows, staged */
typedef struct kq_stage {
    __m256i q[2][32];  /* [half][quarter] levels: values 8q..8q+7 of rows 4h..4h+3 */
    __m256i sc[2][16]; /* [half][group] int16: the group's scale of row 4h + j in lanes 4j..4j+3 */
    __m256i mn[8];     /* [group pair k] int16 lanes 2l, 2l+1: mn[2k], mn[2k+1] of row LANE_ROW[l] */
    __m256i corr[8];   /* the same for off * sc */
    __m256 d, dmin;    /* per lane */
} kq_stage;

INLINE __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

INLINE void stage_kq(int t, const unsigned char *const *wr, size_t off, kq_stage *st) {
    _Alignas(32) uint8_t u[TR][QK_K];
    _Alignas(32) int16_t sc[TR][16], mn[TR][16], co[TR][16];
    float d[TR], dm[TR];
    const int16_t offv = (int16_t)kq_offset((uint32_t)t);
    kq_fields f;
    for (int i = 0; i < TR; i++) {
        kq_unpack_scales((uint32_t)t, wr[i] + off, &f);
        memcpy(sc[i], f.sc, sizeof sc[i]);
        memcpy(mn[i], f.mn, sizeof mn[i]);
        for (int g = 0; g < 16; g++) co[i][g] = (int16_t)(offv * f.sc[g]);
        d[i] = f.d, dm[i] = f.dmin;
        kq_levels(t, wr[i] + off, u[i]);
    }
    /* levels: 4 x 4 transposes of 8-byte quarters */
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < 8; c++) {
            __m256i r0 = _mm256_load_si256((const __m256i *)(const void *)(u[4 * h] + 32 * c));
            __m256i r1 = _mm256_load_si256((const __m256i *)(const void *)(u[4 * h + 1] + 32 * c));
            __m256i r2 = _mm256_load_si256((const __m256i *)(const void *)(u[4 * h + 2] + 32 * c));
            __m256i r3 = _mm256_load_si256((const __m256i *)(const void *)(u[4 * h + 3] + 32 * c));
            __m256i t0 = _mm256_unpacklo_epi64(r0, r1), t1 = _mm256_unpackhi_epi64(r0, r1);
            __m256i t2 = _mm256_unpacklo_epi64(r2, r3), t3 = _mm256_unpackhi_epi64(r2, r3);
            st->q[h][4 * c] = _mm256_permute2x128_si256(t0, t2, 0x20);
            st->q[h][4 * c + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
            st->q[h][4 * c + 2] = _mm256_permute2x128_si256(t0, t2, 0x31);
            st->q[h][4 * c + 3] = _mm256_permute2x128_si256(t1, t3, 0x31);
        }
    /* scales: the 4 rows' int16 side by side, each repeated 4 times */
    const __m256i rep = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6,
                                         7, 6, 7, 6, 7);
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 16; g++) {
            int16_t v4[4] = {sc[4 * h][g], sc[4 * h + 1][g], sc[4 * h + 2][g], sc[4 * h + 3][g]};
            int64_t v;
            memcpy(&v, v4, 8);
            st->sc[h][g] = _mm256_shuffle_epi8(_mm256_set1_epi64x(v), rep);
        }
    for (int k = 0; k < 8; k++) {
        _Alignas(32) int32_t a[8], b[8];
        for (int l = 0; l < 8; l++) {
            memcpy(&a[l], &mn[LANE_ROW[l]][2 * k], 4);
            memcpy(&b[l], &co[LANE_ROW[l]][2 * k], 4);
        }
        st->mn[k] = _mm256_load_si256((const __m256i *)(const void *)a);
        st->corr[k] = _mm256_load_si256((const __m256i *)(const void *)b);
    }
    st->d = _mm256_setr_ps(d[0], d[1], d[4], d[5], d[2], d[3], d[6], d[7]);
    st->dmin = _mm256_setr_ps(dm[0], dm[1], dm[4], dm[5], dm[2], dm[3], dm[6], dm[7]);
}

/* s (8 rows of one position) continued by one super-block */
INLINE __m256 dot_kq(int has_mn, int has_corr, const kq_stage *st, const act_q8k *x, __m256 s) {
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int g = 0; g < 16; g++) {
        __m256i xa = bcast8(x->qs + 16 * g), xb = bcast8(x->qs + 16 * g + 8);
        __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(st->q[0][2 * g], xa), _mm256_maddubs_epi16(st->q[0][2 * g + 1], xb));
        __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(st->q[1][2 * g], xa), _mm256_maddubs_epi16(st->q[1][2 * g + 1], xb));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(t0, st->sc[0][g]));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(t1, st->sc[1][g]));
    }
    __m256i is = _mm256_hadd_epi32(a0, a1), ms = _mm256_setzero_si256();
    if (has_mn || has_corr) {
        __m256i cs = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            int32_t pair;
            memcpy(&pair, x->bsums + 2 * k, 4);
            __m256i bk = _mm256_set1_epi32(pair);
            if (has_mn) ms = _mm256_add_epi32(ms, _mm256_madd_epi16(st->mn[k], bk));
            if (has_corr) cs = _mm256_add_epi32(cs, _mm256_madd_epi16(st->corr[k], bk));
        }
        if (has_corr) is = _mm256_sub_epi32(is, cs);
    }
    const __m256 xd = _mm256_set1_ps(x->d);
    __m256 a = _mm256_mul_ps(_mm256_mul_ps(st->d, xd), _mm256_cvtepi32_ps(is));
    __m256 b = _mm256_mul_ps(_mm256_mul_ps(st->dmin, xd), _mm256_cvtepi32_ps(ms));
    return _mm256_add_ps(s, _mm256_sub_ps(a, b));
}

INLINE void mm_tile_kq(int t, const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                       int ldy, int r0, int r1) {
    const int nb = cols / QK_K;
    const int bb = wtype_get((uint32_t)t)->block_bytes;
    const int has_mn = t == GGML_Q2_K || t == GGML_Q4_K || t == GGML_Q5_K, has_corr = t == GGML_Q3_K || t == GGML_Q6_K;
    _Alignas(32) kq_stage st[KQ_KB];
    _Alignas(32) __m256 acc[PG_MAX];
    size_t g = ((size_t)512 << 10) / xs;
    const int pg = g > PG_MAX ? PG_MAX : g < 1 ? 1 : (int)g;
    for (int p0 = 0; p0 < n; p0 += pg) {
        const int np = n - p0 < pg ? n - p0 : pg;
        const act_q8k *xg[PG_MAX];
        for (int p = 0; p < np; p++) xg[p] = (const act_q8k *)(const void *)((const char *)x + (size_t)(p0 + p) * xs);
        for (int r = r0; r < r1; r += TR) {
            const int R = r1 - r < TR ? r1 - r : TR;
            const unsigned char *wr[TR];
            for (int i = 0; i < TR; i++) wr[i] = w + (size_t)(r + (i < R ? i : R - 1)) * rb;
            for (int p = 0; p < np; p++) acc[p] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < nb; k0 += KQ_KB) {
                const int kn = nb - k0 < KQ_KB ? nb - k0 : KQ_KB;
                for (int k = 0; k < kn; k++) {
                    for (int i = 0; i < TR; i++)
                        for (int o = 0; o < bb; o += 64)
                            _mm_prefetch((const char *)wr[i] + (size_t)(k0 + k + KQ_KB) * bb + o, _MM_HINT_T0);
                    stage_kq(t, wr, (size_t)(k0 + k) * bb, &st[k]);
                }
                for (int p = 0; p < np; p++) {
                    const act_q8k *xb = xg[p] + k0;
                    __m256 s = acc[p];
                    for (int k = 0; k < kn; k++) s = dot_kq(has_mn, has_corr, &st[k], &xb[k], s);
                    acc[p] = s;
                }
            }
            for (int p = 0; p < np; p++) {
                _Alignas(32) float o[8];
                _mm256_store_ps(o, acc[p]);
                float *yp = y + (size_t)(p0 + p) * ldy + r;
                for (int l = 0; l < TR; l++)
                    if (LANE_ROW[l] < R) yp[LANE_ROW[l]] = o[l];
            }
        }
    }
}

#define TILE_KQ(name, T)                                                                                          \
    void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y, int ldy,    \
              int r0, int r1) {                                                                                   \
        mm_tile_kq(T, w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                     \
    }
TILE_KQ(kern_tile_mm_q2_k, GGML_Q2_K)
TILE_KQ(kern_tile_mm_q3_k, GGML_Q3_K)
TILE_KQ(kern_tile_mm_q4_k, GGML_Q4_K)
TILE_KQ(kern_tile_mm_q5_k, GGML_Q5_K)
TILE_KQ(kern_tile_mm_q6_k, GGML_Q6_K)
#endif
