/* AVX2 K-quant kernels for blocks of positions with eight rows in the lanes (kern_tile.h). Compiled with -mavx2
 * -mfma -mf16c (and once more with AVX-512 VNNI as kern_tile_kq_avx512.c, for the avx512 table); only reached through the AVX2 table, after its
 * CPUID check.
 *
 * The walk is kern_tile_avx2.c's: position groups, groups of 8 rows, chunks of KQ_KB super-blocks staged into an
 * L1 buffer, every position of the group over the staged chunk. Staging a super-block of the 8 rows: the levels
 * (kq_levels) interleaved as for q4_0 (a vector per (half h, quarter q): values 8q..8q+7 of rows 4h..4h+3, row j of
 * the half in bytes 8j..8j+7), each group's scale repeated over the int16 lanes of its row's pair sums, the mins (and
 * Q6_K's offset correction) as int16 pairs, d and dmin per lane.
 *
 * The integers are exact, so only the float steps decide the bits, and they are the per-row kernel's (kern.c,
 * kquant.h), lane by lane:
 *  - Q4_K, Q2_K (ggml's repacked gemv chain): per super-block the rows' isum and msum (8 rows in the lanes, in
 *    LANE_ROW order), s = fma(isum, d * x.d, s), m = fma(msum, dmin * x.d, m), result s - m.
 *  - Q6_K, Q5_K, Q3_K (ggml's vec_dot chain, kq_lanes_ggml): 8 integer lanes per (row, super-block), lane L the sum
 *    over the 8 chunks c of sc[2c + L/4] times the 4-value sums of values 32c + 4L.. . The madd of quarter q's pair
 *    sums with its group scale gives, for each of the 4 rows of a half, the lanes 2(q%4) and 2(q%4)+1 of chunk q/4,
 *    so 4 accumulators per half (quarters of the same q%4) hold the 8 rows x 8 lanes; then per lane
 *    acc = fma(x.d * d, lane, acc) and at the end ggml's hsum_float_8 per row (+ Q5_K's summs chain).
 * So every output has the per-row kernel's bits (test_kernels compares them), whatever the block size. */
#include "kernels/kern_tile.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kq_levels_avx2.h"
#include "kernels/kquant.h"

#define INLINE static inline __attribute__((always_inline))

enum {
    TR = 8,     /* rows per group */
    KQ_KB = 4,  /* super-blocks per staged chunk: 4 x 3.8 KiB */
    PG_MAX = 64 /* most positions per group */
};

static const int LANE_ROW[8] = {0, 1, 4, 5, 2, 3, 6, 7};

/* positions per step over a staged super-block: 2 in the AVX-512 build (they share the staged loads) */
#ifdef KERN_TILE_AVX512
enum { KQ_NP = 2 };
#else
enum { KQ_NP = 1 };
#endif

/* one super-block of 8 rows, staged; the two halves of each item side by side (one 512-bit vector in the AVX-512
 * build) */
typedef struct kq_stage {
    __m256i q[32][2];   /* [quarter][half] levels: values 8q..8q+7 of rows 4h..4h+3 */
    __m256i sc[16][2];  /* [group][half] int16: the group's scale of row 4h + j in lanes 4j..4j+3 */
    __m256i corr[4][2]; /* Q6_K, [q'][half]: int32 lane 2j+e holds (off sc[2L], off sc[2L+1]), L = 2q'+e, row 4h+j */
    __m256 dh[2];       /* [half]: d of row 4h+j in lanes 2j, 2j+1 */
    __m256i mn[8];      /* [group pair k] int16 lanes 2l, 2l+1: mn[2k], mn[2k+1] of row LANE_ROW[l] */
    __m256 d, dmin;     /* per LANE_ROW lane */
} kq_stage;

INLINE __m256i bcast8(const void *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

INLINE __m256i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* acc + madd(a, b) (the int16 pair products summed into int32): one dpwssd with AVX-512 VNNI, the same integers */
INLINE __m256i madd_acc(__m256i acc, __m256i a, __m256i b) {
#ifdef KERN_TILE_AVX512
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

INLINE void stage_kq(int t, const unsigned char *const *wr, size_t off, kq_stage *st) {
    _Alignas(32) uint8_t u[TR][QK_K];
    _Alignas(32) int16_t sc[TR][16], mn[TR][16];
    float d[TR], dm[TR];
    const int offv = kq_offset((uint32_t)t);
    kq_fields f;
    for (int i = 0; i < TR; i++) {
        kq_unpack_scales((uint32_t)t, wr[i] + off, &f);
        memcpy(sc[i], f.sc, sizeof sc[i]);
        memcpy(mn[i], f.mn, sizeof mn[i]);
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
            st->q[4 * c][h] = _mm256_permute2x128_si256(t0, t2, 0x20);
            st->q[4 * c + 1][h] = _mm256_permute2x128_si256(t1, t3, 0x20);
            st->q[4 * c + 2][h] = _mm256_permute2x128_si256(t0, t2, 0x31);
            st->q[4 * c + 3][h] = _mm256_permute2x128_si256(t1, t3, 0x31);
        }
    /* scales: the 4 rows' int16 side by side, each repeated 4 times */
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 16; g++)
            st->sc[g][h] = _mm256_setr_epi16(sc[4 * h][g], sc[4 * h][g], sc[4 * h][g], sc[4 * h][g], sc[4 * h + 1][g],
                                             sc[4 * h + 1][g], sc[4 * h + 1][g], sc[4 * h + 1][g], sc[4 * h + 2][g],
                                             sc[4 * h + 2][g], sc[4 * h + 2][g], sc[4 * h + 2][g], sc[4 * h + 3][g],
                                             sc[4 * h + 3][g], sc[4 * h + 3][g], sc[4 * h + 3][g]);
    for (int k = 0; k < 8; k++) {
        _Alignas(32) int16_t a[16];
        for (int l = 0; l < 8; l++) a[2 * l] = mn[LANE_ROW[l]][2 * k], a[2 * l + 1] = mn[LANE_ROW[l]][2 * k + 1];
        st->mn[k] = _mm256_load_si256((const __m256i *)(const void *)a);
    }
    if (offv && t != GGML_Q3_K) /* Q6_K: off * (sc[2L] bsums[2L] + sc[2L+1] bsums[2L+1]) per lane */
        for (int h = 0; h < 2; h++)
            for (int qq = 0; qq < 4; qq++) {
                _Alignas(32) int16_t a[16];
                for (int j = 0; j < 4; j++)
                    for (int e = 0; e < 2; e++) {
                        const int L = 2 * qq + e;
                        a[4 * j + 2 * e] = (int16_t)(offv * sc[4 * h + j][2 * L]);
                        a[4 * j + 2 * e + 1] = (int16_t)(offv * sc[4 * h + j][2 * L + 1]);
                    }
                st->corr[qq][h] = _mm256_load_si256((const __m256i *)(const void *)a);
            }
    st->d = _mm256_setr_ps(d[0], d[1], d[4], d[5], d[2], d[3], d[6], d[7]);
    st->dmin = _mm256_setr_ps(dm[0], dm[1], dm[4], dm[5], dm[2], dm[3], dm[6], dm[7]);
    for (int h = 0; h < 2; h++)
        st->dh[h] = _mm256_setr_ps(d[4 * h], d[4 * h], d[4 * h + 1], d[4 * h + 1], d[4 * h + 2], d[4 * h + 2],
                                   d[4 * h + 3], d[4 * h + 3]);
}

/* msum of the 8 rows (LANE_ROW order): sum_g mn[g] bsums[g] */
INLINE __m256i msum_kq(const kq_stage *st, const act_q8k *x) {
    __m256i ms[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* two chains (latency) */
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) ms[k % 2] = madd_acc(ms[k % 2], st->mn[k], bcast4(x->bsums + 2 * k));
    return _mm256_add_epi32(ms[0], ms[1]);
}

#ifdef KERN_TILE_AVX512
INLINE __m512i ld512(const __m256i *p) { return _mm512_load_si512((const void *)p); }
INLINE __m512i bcast8z(const void *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}
#endif

/* The float steps of one super-block for one position from its integer sums (8 rows, halves h0 and h1) */
INLINE void gemv_float(const kq_stage *st, const act_q8k *x, __m256i a0, __m256i a1, __m256 *acc) {
    const __m256i is = _mm256_hadd_epi32(a0, a1), ms = msum_kq(st, x);
    const __m256 xd = _mm256_set1_ps(x->d);
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(st->d, xd), acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(st->dmin, xd), acc[1]);
}

/* Q6_K, Q5_K, Q3_K: the float steps of one super-block for one position from its integer lanes a[i] (half h in
 * 256-bit part h: lanes 2i, 2i+1 of the half's 4 rows) */
INLINE void lanes_float(int t, const kq_stage *st, const act_q8k *x, const __m256i a[4][2], __m256 *acc) {
    const __m256 xd = _mm256_set1_ps(x->d);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256 dq = _mm256_mul_ps(xd, st->dh[h]);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) acc[2 * i + h] = _mm256_fmadd_ps(dq, _mm256_cvtepi32_ps(a[i][h]), acc[2 * i + h]);
    }
    if (t == GGML_Q5_K)
        acc[8] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-x->d), st->dmin), _mm256_cvtepi32_ps(msum_kq(st, x)),
                                 acc[8]);
}

#ifdef KERN_TILE_AVX512 /* both halves of the 8 rows in one 512-bit vector; NP (1, 2) positions share the loads */
/* Q4_K, Q2_K: the chains s (acc[0]) and m (acc[1]) of the 8 rows continued by one super-block, for NP positions */
INLINE void step_gemv(int NP, const kq_stage *st, const act_q8k *const *x, __m256 *const *acc) {
    __m512i a[2][2]; /* [position][chain]: 2 chains each (the integers are exact: any order) for dpwssd's latency */
#pragma GCC unroll 2
    for (int j = 0; j < NP; j++) a[j][0] = a[j][1] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int g = 0; g < 16; g++) {
        const __m512i q0 = ld512(st->q[2 * g]), q1 = ld512(st->q[2 * g + 1]), sc = ld512(st->sc[g]);
#pragma GCC unroll 2
        for (int j = 0; j < NP; j++) {
            /* two quarters' pair sums of one group: <= 2 * 2 * 15 * 127, int16 */
            __m512i t = _mm512_add_epi16(_mm512_maddubs_epi16(q0, bcast8z(x[j]->qs + 16 * g)),
                                         _mm512_maddubs_epi16(q1, bcast8z(x[j]->qs + 16 * g + 8)));
            a[j][g % 2] = _mm512_dpwssd_epi32(a[j][g % 2], t, sc);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < NP; j++) {
        const __m512i s = _mm512_add_epi32(a[j][0], a[j][1]);
        gemv_float(st, x[j], _mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1), acc[j]);
    }
}

/* Q6_K, Q5_K, Q3_K: the 8 lane chains of the 8 rows (acc[2i + h]: lane 2j+e is row 4h+j's lane 2i+e) and Q5_K's
 * summs (acc[8], LANE_ROW order) continued by one super-block, for NP positions */
INLINE void step_lanes(int t, int NP, const kq_stage *st, const act_q8k *const *x, __m256 *const *acc) {
    __m512i a[2][4];
#pragma GCC unroll 2
    for (int j = 0; j < NP; j++)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) a[j][i] = _mm512_setzero_si512();
    const __m512i four = _mm512_set1_epi8(4);
#pragma GCC unroll 32
    for (int q = 0; q < 32; q++) {
        const __m512i u = ld512(st->q[q]), sc = ld512(st->sc[q / 2]);
#pragma GCC unroll 2
        for (int j = 0; j < NP; j++) {
            const __m512i xq = bcast8z(x[j]->qs + 8 * q);
            __m512i p = _mm512_maddubs_epi16(u, xq); /* <= 2 * 63 * 127 */
            if (t == GGML_Q3_K) p = _mm512_sub_epi16(p, _mm512_maddubs_epi16(four, xq));
            a[j][q % 4] = _mm512_dpwssd_epi32(a[j][q % 4], p, sc);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < NP; j++) {
        __m256i h[4][2];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            if (t == GGML_Q6_K)
                a[j][i] = _mm512_sub_epi32(a[j][i], _mm512_madd_epi16(ld512(st->corr[i]), bcast8z(x[j]->bsums + 4 * i)));
            h[i][0] = _mm512_castsi512_si256(a[j][i]), h[i][1] = _mm512_extracti64x4_epi64(a[j][i], 1);
        }
        lanes_float(t, st, x[j], (const __m256i(*)[2])h, acc[j]);
    }
}
#else
/* Q4_K, Q2_K: the chains s (acc[0]) and m (acc[1]) of the 8 rows continued by one super-block (NP = 1) */
INLINE void step_gemv(int NP, const kq_stage *st, const act_q8k *const *x, __m256 *const *acc) {
    (void)NP;
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int g = 0; g < 16; g++) {
        __m256i xa = bcast8(x[0]->qs + 16 * g), xb = bcast8(x[0]->qs + 16 * g + 8);
        /* two quarters' pair sums of one group: <= 2 * 2 * 15 * 127, int16 */
        __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(st->q[2 * g][0], xa), _mm256_maddubs_epi16(st->q[2 * g + 1][0], xb));
        __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(st->q[2 * g][1], xa), _mm256_maddubs_epi16(st->q[2 * g + 1][1], xb));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(t0, st->sc[g][0]));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(t1, st->sc[g][1]));
    }
    gemv_float(st, x[0], a0, a1, acc[0]);
}

/* Q6_K, Q5_K, Q3_K: as the AVX-512 build's, for one position (NP = 1) */
INLINE void step_lanes(int t, int NP, const kq_stage *st, const act_q8k *const *x, __m256 *const *acc) {
    (void)NP;
    __m256i a[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) a[i][0] = a[i][1] = _mm256_setzero_si256();
    const __m256i four = _mm256_set1_epi8(4);
#pragma GCC unroll 32
    for (int q = 0; q < 32; q++) {
        const __m256i xq = bcast8(x[0]->qs + 8 * q);
        /* Q3_K: the offset per value, maddubs(u, x) - maddubs(4, x) on the pairs (<= 2 * 7 * 127 + 2 * 4 * 127) */
        const __m256i m4 = t == GGML_Q3_K ? _mm256_maddubs_epi16(four, xq) : _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i p = _mm256_maddubs_epi16(st->q[q][h], xq); /* <= 2 * 63 * 127 */
            if (t == GGML_Q3_K) p = _mm256_sub_epi16(p, m4);
            a[q % 4][h] = _mm256_add_epi32(a[q % 4][h], _mm256_madd_epi16(p, st->sc[q / 2][h]));
        }
    }
    if (t == GGML_Q6_K)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            const __m256i bs = bcast8(x[0]->bsums + 4 * i);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) a[i][h] = _mm256_sub_epi32(a[i][h], _mm256_madd_epi16(st->corr[i][h], bs));
        }
    lanes_float(t, st, x[0], (const __m256i(*)[2])a, acc[0]);
}
#endif

/* the accumulators per position: 2 (Q4_K, Q2_K: s, m), 8 lanes (Q6_K, Q3_K), 8 lanes + summs (Q5_K) */
enum { NACC = 9 };

/* the rows' results of one position from its accumulators: yp[row] for rows < R */
INLINE void finish_kq(int t, int R, const __m256 *acc, float *yp) {
    _Alignas(32) float o[NACC][8];
    for (int i = 0; i < NACC; i++) _mm256_store_ps(o[i], acc[i]);
    if (t == GGML_Q4_K || t == GGML_Q2_K) {
        for (int l = 0; l < TR; l++)
            if (LANE_ROW[l] < R) yp[LANE_ROW[l]] = o[0][l] - o[1][l];
        return;
    }
    for (int l = 0; l < TR; l++) {
        const int row = LANE_ROW[l];
        if (row >= R) continue;
        const int h = row / 4, j = row % 4;
        float lanes[8];
        for (int L = 0; L < 8; L++) lanes[L] = o[2 * (L / 2) + h][2 * j + L % 2];
        yp[row] = kq_hsum8(lanes) + (t == GGML_Q5_K ? o[8][l] : 0.0f);
    }
}

INLINE void mm_tile_kq(int t, const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                       int ldy, int r0, int r1) {
    const int nb = cols / QK_K;
    const int bb = wtype_get((uint32_t)t)->block_bytes;
    _Alignas(64) kq_stage st[KQ_KB];
    _Alignas(64) __m256 acc[PG_MAX][NACC + 1]; /* + 1: rows of 64-byte multiples */
    size_t g = ((size_t)512 << 10) / xs;
    const int pg = g > PG_MAX ? PG_MAX : g < 1 ? 1 : (int)g;
    for (int p0 = 0; p0 < n; p0 += pg) {
        const int np = n - p0 < pg ? n - p0 : pg;
        const act_q8k *xg[PG_MAX];
        for (int p = 0; p < np; p++) xg[p] = (const act_q8k *)(const void *)((const char *)x + (size_t)(p0 + p) * xs);
        for (int r = r0; r < r1; r += TR) {
            const int R = r1 - r < TR ? r1 - r : TR;
            const unsigned char *wr[TR];
            for (int i = 0; i < TR; i++) wr[i] = w + (size_t)(r + (i < R ? i : R - 1)) * rb; /* repeats: unused lanes */
            for (int p = 0; p < np; p++)
                for (int i = 0; i < NACC; i++) acc[p][i] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < nb; k0 += KQ_KB) {
                const int kn = nb - k0 < KQ_KB ? nb - k0 : KQ_KB;
                for (int k = 0; k < kn; k++) {
                    if (k0 + k + KQ_KB < nb)
                        for (int i = 0; i < TR; i++)
                            for (int o = 0; o < bb; o += 64)
                                _mm_prefetch((const char *)wr[i] + (size_t)(k0 + k + KQ_KB) * bb + o, _MM_HINT_T0);
                    stage_kq(t, wr, (size_t)(k0 + k) * bb, &st[k]);
                }
                for (int p = 0; p < np; p += KQ_NP) {
                    const int two = KQ_NP == 2 && p + 1 < np;
                    for (int k = 0; k < kn; k++) {
                        const act_q8k *xk[2] = {xg[p] + k0 + k, xg[p + two] + k0 + k};
                        __m256 *ak[2] = {acc[p], acc[p + two]};
                        if (t == GGML_Q4_K || t == GGML_Q2_K) {
                            if (two) step_gemv(2, &st[k], xk, ak);
                            else step_gemv(1, &st[k], xk, ak);
                        } else {
                            if (two) step_lanes(t, 2, &st[k], xk, ak);
                            else step_lanes(t, 1, &st[k], xk, ak);
                        }
                    }
                }
            }
            for (int p = 0; p < np; p++) finish_kq(t, R, acc[p], y + (size_t)(p0 + p) * ldy + r);
        }
    }
}

#ifdef KERN_TILE_AVX512
#define TILE_KQ(name, T)                                                                                          \
    void name##_vnni(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,      \
                     int ldy, int r0, int r1) {                                                                   \
        mm_tile_kq(T, w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                     \
    }
#else
#define TILE_KQ(name, T)                                                                                          \
    void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y, int ldy,    \
              int r0, int r1) {                                                                                   \
        mm_tile_kq(T, w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                     \
    }
#endif
TILE_KQ(kern_tile_mm_q2_k, GGML_Q2_K)
TILE_KQ(kern_tile_mm_q3_k, GGML_Q3_K)
TILE_KQ(kern_tile_mm_q4_k, GGML_Q4_K)
TILE_KQ(kern_tile_mm_q5_k, GGML_Q5_K)
TILE_KQ(kern_tile_mm_q6_k, GGML_Q6_K)
#endif
