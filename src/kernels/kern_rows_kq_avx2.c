/* The K-quant matmul kernels of the avx2 and avx512 tables (kern_rows_kq.h): blocks of few positions (decode, short
 * verification blocks) row by row, straight from each type's layout; longer blocks through kern_tile_kq_avx2.c.
 * Compiled with -mavx2 -mfma -mf16c, and once more with AVX-512 BW/VL/VNNI as kern_rows_kq_avx512.c
 * (KERN_ROWS_AVX512): there a 512-bit vector holds two 32-value chunks whose activations are adjacent, and one
 * dpwssd (or, for Q2_K, one dpbusd on levels pre-multiplied by their scales) does the integer steps, so each
 * position costs half as many instructions or fewer. The integers are exact whatever the order, and every 32-bit
 * lane holds the same sum in both builds (the two chunks' lanes are added at the end), so the float steps, and the
 * bits, are the scalar table's (kquant.h). */
#include "kernels/kern_rows_kq.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_avx2_inl.h"
#include "kernels/kern_rows_inl.h"
#include "kernels/kern_tile.h"
#include "kernels/kquant.h"

/* most positions per tile: 8 in the AVX-512 build (32 registers; a block of 5-8 positions unpacks each row's
 * super-blocks once), 4 in the AVX2 one (16 registers) */
#ifdef KERN_ROWS_AVX512
enum { KQ_PT = 8 };
#define KQ_WITH WITH_R2P8
#else
enum { KQ_PT = 4 };
#define KQ_WITH WITH_R2P4
#endif

/* ------------------------------------------------------------------ K-quants (x as act_q8k blocks) */

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
INLINE void tile_zero(int R, int P, __m256 acc[4][KQ_PT]) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) acc[i][j] = _mm256_setzero_ps();
}
/* An R x P tile into y (row ri[i] of position p0 + j): hsum8 of the vector chain (when acc), plus add (when given),
 * minus sub (when given); the terms in this order, as the scalar table's. */
INLINE void tile_store(int R, int P, const __m256 acc[4][KQ_PT], const float add[4][KQ_PT], const float sub[4][KQ_PT], float *y,
                       int ldy, int p0, const int *ri) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) {
            float v = acc ? kern_hsum8(acc[i][j]) : add[i][j];
            if (acc && add) v += add[i][j];
            y[(size_t)(p0 + j) * ldy + ri[i]] = sub ? v - sub[i][j] : v;
        }
}


/* The two fma chains of Q4_K and Q2_K (ggml's repacked gemv, kquant.h), vectorised: per (row, position) and
 * super-block s = fma((float)isum, d * x.d, s) and m = fma((float)msum, dmin * x.d, m), the result s - m. A chain
 * vector holds 4 (row, position) pairs: s in lanes 0-3, m in lanes 4-7. Blocks of several positions keep one per
 * row (lane j: position j), decode (one position) one for all the tile's rows (lane i: row i), so a super-block
 * takes one reduction per row, or one per row group. Each lane takes the scalar steps (the same conversion, product
 * and fma), so the scalar table's bits. */
typedef struct chains {
    __m256 sm[4][2];       /* per row and 4 positions (blocks), or sm[0][0] (decode) */
    __m256i ia[4], mp[4];  /* decode: each row's isum and msum lanes, until chains_block */
    uint32_t dd[4];        /* decode: each row's d and dmin (two fp16) */
} chains;

/* lane L's sums: the 8 int32 lanes of ia[L] (isum) and mp[L] (msum) added (exact, any order), L < NL; d and dmin
 * of lane L's row in lanes L and 4 + L of dv; x.d in lanes L and 4 + L of xd */
INLINE __m256 chains_sm(int NL, const __m256i *ia, const __m256i *mp, __m256 dv, __m256 xd, __m256 sm) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i a01 = _mm256_hadd_epi32(ia[0], NL > 1 ? ia[1] : z), m01 = _mm256_hadd_epi32(mp[0], NL > 1 ? mp[1] : z);
    const __m256i a23 = NL > 2 ? _mm256_hadd_epi32(ia[2], NL > 3 ? ia[3] : z) : z;
    const __m256i m23 = NL > 2 ? _mm256_hadd_epi32(mp[2], NL > 3 ? mp[3] : z) : z;
    const __m256i ga = _mm256_hadd_epi32(a01, a23), gm = _mm256_hadd_epi32(m01, m23); /* [L: lanes 0-3 | L: 4-7] */
    const __m256i v = _mm256_add_epi32(_mm256_permute2x128_si256(ga, gm, 0x20), _mm256_permute2x128_si256(ga, gm, 0x31));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(dv, xd), sm);
}
/* dv from 4 (d, dmin) fp16 pairs, one per lane */
INLINE __m256 chains_dv(__m128i dd) {
    return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(dd), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}
INLINE void chains_init(chains *c) {
    for (int i = 0; i < 4; i++) c->sm[i][0] = c->sm[i][1] = _mm256_setzero_ps();
}
/* xd of super-block b: blocks x_j.d in lanes j % 4 and 4 + j % 4 of xd[j / 4] (0 beyond P), decode x_0.d in every
 * lane of xd[0] */
INLINE void chains_xd(int P, const act_q8k *const *xp, int b, __m256 xd[2]) {
    if (P == 1) {
        xd[0] = _mm256_set1_ps(xp[0][b].d);
        return;
    }
#define XD(j) ((j) < P ? xp[j][b].d : 0.0f)
    const __m128 lo = _mm_setr_ps(XD(0), XD(1), XD(2), XD(3));
    xd[0] = _mm256_set_m128(lo, lo);
    if (P > 4) {
        const __m128 hi = _mm_setr_ps(XD(4), XD(5), XD(6), XD(7));
        xd[1] = _mm256_set_m128(hi, hi);
    }
#undef XD
}
/* row i's sums of super-block b (ia[j], mp[j] for its P positions; dd: its d and dmin) */
INLINE void chains_row(chains *c, int P, int i, const __m256i *ia, const __m256i *mp, const unsigned char *dd,
                       const __m256 xd[2]) {
    uint32_t h2;
    memcpy(&h2, dd, 4);
    if (P > 1) {
        const __m256 dv = chains_dv(_mm_set1_epi32((int)h2));
        c->sm[i][0] = chains_sm(P < 4 ? P : 4, ia, mp, dv, xd[0], c->sm[i][0]);
        if (P > 4) c->sm[i][1] = chains_sm(P - 4, ia + 4, mp + 4, dv, xd[1], c->sm[i][1]);
    } else {
        c->ia[i] = ia[0], c->mp[i] = mp[0], c->dd[i] = h2;
    }
}
/* after the R rows of super-block b: decode's one reduction */
INLINE void chains_block(chains *c, int R, int P, const __m256 xd[2]) {
    if (P == 1) {
        const __m128i dd = _mm_setr_epi32((int)c->dd[0], R > 1 ? (int)c->dd[1] : 0, R > 2 ? (int)c->dd[2] : 0,
                                          R > 3 ? (int)c->dd[3] : 0);
        c->sm[0][0] = chains_sm(R, c->ia, c->mp, chains_dv(dd), xd[0], c->sm[0][0]);
    }
}
/* the chains into y: s - m, as the scalar table */
INLINE void chains_store(const chains *c, int R, int P, float *y, int ldy, int p0, const int *ri) {
    float s[4][KQ_PT], m[4][KQ_PT], v[4][2][8];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        if (P > 1 || i == 0) _mm256_storeu_ps(v[i][0], c->sm[i][0]);
        if (P > 4) _mm256_storeu_ps(v[i][1], c->sm[i][1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) {
            s[i][j] = P > 1 ? v[i][j / 4][j % 4] : v[0][0][i];
            m[i][j] = P > 1 ? v[i][j / 4][4 + j % 4] : v[0][0][4 + i];
        }
    tile_store(R, P, NULL, s, m, y, ldy, p0, ri);
}

/* ------------------------------------------------------------------ the integer cores, one per build
 * Each type's core computes, for one row's super-block and the tile's P positions, the integer lanes its float
 * steps take: Q4_K/Q2_K 8 lanes per position that add up to its isum, Q6_K/Q5_K/Q3_K the 8 lanes of kq_lanes_ggml
 * (lane L: the sum over the chunks c of sc[2c + L/4] times the 4-value sums of values 32c + 4L..; Q6_K's before its
 * offset). AVX2: a 256-bit vector per 32-value chunk, maddubs + madd with the chunk's scales + add. AVX-512: a
 * 512-bit vector holds two chunks whose activations are adjacent (chunks c and c + 1: x.qs + 32c, 64 bytes), so one
 * load, one maddubs and one dpwssd serve both; the accumulator's lane L (low half) sums the even chunks' groups,
 * lane 8 + L the odd ones', and fold512 adds the halves: the same integers per lane. */
#ifdef KERN_ROWS_AVX512
enum { HI16 = (int)0xFFFF0000 }; /* the 16-bit lanes of the upper 256 bits */
INLINE __m512i bcast256(const unsigned char *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)p)); }
INLINE __m512i xload(const act_q8k *x, int off) { return _mm512_loadu_si512((const void *)(x->qs + off)); }
INLINE __m256i fold512(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }
/* v with its upper 256 bits shifted right by s bits per 16-bit lane (the lower ones kept) */
INLINE __m512i hi_srli(__m512i v, unsigned s) { return _mm512_mask_srli_epi16(v, (__mmask32)HI16, v, s); }
/* the int16 scale vector whose 16-bit lane w holds scale base + w / 8 (groups of 16 values: 4 per 64) or, with
 * wide, base + w / 16 (groups of 32), of the scales held as int16 in the low 256 bits of s */
INLINE __m512i scale_quad(__m512i s, int base, int wide) {
    const __m256i lo = wide ? _mm256_set1_epi16((short)base)
                            : _mm256_set_m128i(_mm_set1_epi16((short)(base + 1)), _mm_set1_epi16((short)base));
    const __m256i hi = wide ? _mm256_set1_epi16((short)(base + 1))
                            : _mm256_set_m128i(_mm_set1_epi16((short)(base + 3)), _mm_set1_epi16((short)(base + 2)));
    return _mm512_permutexvar_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), s);
}
/* the P accumulators zeroed, and folded into out */
#define ACC512(acc) __m512i acc[KQ_PT];                                                                           \
    for (int j_ = 0; j_ < P; j_++) acc[j_] = _mm512_setzero_si512()
INLINE void fold_all(int P, const __m512i *acc, __m256i *out) {
#pragma GCC unroll 8
    for (int j = 0; j < P; j++) out[j] = fold512(acc[j]);
}
#else
/* The int16 pair sums of a 32-value chunk times its two group scales (sc[2k] over the low 8 int16 lanes, sc[2k+1]
 * over the high 8): ggml's get_scale_shuffle_q3k on a vector holding 8 int16 scales in both 128-bit halves. */
INLINE __m256i scale_pair(__m256i sv, int k) {
    return _mm256_shuffle_epi8(sv, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k + 1))),
                                                     _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * k)))));
}
INLINE __m256i xload256(const act_q8k *x, int off) { return _mm256_loadu_si256((const __m256i *)(const void *)(x->qs + off)); }
#endif

/* Q4_K: chunk c from the low (c even) or high nibbles of qs[32(c/2) + l], scale sc[c] (sv: q45_scale_vecs) */
INLINE void q4k_core(int P, const unsigned char *blk, __m256i sv, const act_q8k *const *xp, int b, __m256i *out) {
#ifdef KERN_ROWS_AVX512
    const __m512i m15 = _mm512_set1_epi8(15), sv5 = _mm512_castsi256_si512(sv);
    ACC512(acc);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) { /* chunks 2c and 2c + 1: the same 32 bytes */
        const __m512i q = bcast256(blk + 16 + 32 * c);
        const __m512i u = _mm512_and_si512(hi_srli(q, 4), m15);
        const __m512i scs = scale_quad(sv5, 2 * c, 1);
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) acc[j] = _mm512_dpwssd_epi32(acc[j], _mm512_maddubs_epi16(u, xload(&xp[j][b], 64 * c)), scs);
    }
    fold_all(P, acc, out);
#else
    const __m256i m15 = _mm256_set1_epi8(15);
    for (int j = 0; j < P; j++) out[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * c));
        const __m256i lo = _mm256_and_si256(q, m15), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m15);
        const __m256i sl = _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
        const __m256i sh = _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) {
            out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xload256(&xp[j][b], 64 * c)), sl));
            out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xload256(&xp[j][b], 64 * c + 32)), sh));
        }
    }
#endif
}

/* Q6_K: chunk 4h + e the 6-bit levels from nibble e/2 of ql[64h + 32(e%2) + l] and bits 2e of qh[32h + l]
 * (kquant.h), scales sc[2c], sc[2c+1] (sc16: the 16 as int16) */
INLINE void q6k_core(int P, const unsigned char *blk, __m256i sc16, const act_q8k *const *xp, int b, __m256i *out) {
#ifdef KERN_ROWS_AVX512
    const __m512i m15 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3), sc5 = _mm512_castsi256_si512(sc16);
    ACC512(acc);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512((const void *)(blk + 64 * h)); /* ql[64h..]: l0 | l1 */
        const __m512i qh = hi_srli(bcast256(blk + 128 + 32 * h), 2);
        __m512i u[2]; /* chunks 4h, 4h + 1 | 4h + 2, 4h + 3 */
        u[0] = _mm512_or_si512(_mm512_and_si512(l, m15), _mm512_slli_epi16(_mm512_and_si512(qh, m3), 4));
        u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m15),
                               _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), m3), 4));
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) {
            const int c = 4 * h + 2 * e;
            const __m512i scs = scale_quad(sc5, 2 * c, 0);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++) acc[j] = _mm512_dpwssd_epi32(acc[j], _mm512_maddubs_epi16(u[e], xload(&xp[j][b], 32 * c)), scs);
        }
    }
    fold_all(P, acc, out);
#else
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    /* chunk c's scales: sc[2c] over the low 8 int16 lanes, sc[2c+1] over the high 8 */
    const __m256i lohi = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                          2, 3, 2, 3, 2, 3);
    for (int j = 0; j < P; j++) out[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 128 + 32 * h));
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
        u[1] = _mm256_or_si256(_mm256_and_si256(l1, m15), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) {
            const int c = 4 * h + e;
            /* (sc[2c], sc[2c+1]) in every 32-bit lane, then spread */
            const __m256i scs = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(c)), lohi);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++)
                out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u[e], xload256(&xp[j][b], 32 * c)), scs));
        }
    }
#endif
}

/* Q2_K: chunk c = 4h + k holds bits 2k of qs[32h + l] (kquant.h), scales sc[2c], sc[2c+1] (sc16: the 16 low
 * nibbles as int16). AVX-512: the levels (0..3) times their scales (0..15) fit a byte, and one 16-bit multiply makes
 * both bytes of a lane (the low byte's product < 256 carries nothing), so one dpbusd per 64 values and position. */
INLINE void q2k_core(int P, const unsigned char *blk, __m256i sc16, const act_q8k *const *xp, int b, __m256i *out) {
#ifdef KERN_ROWS_AVX512
    const __m512i m3 = _mm512_set1_epi8(3), sc5 = _mm512_castsi256_si512(sc16);
    ACC512(acc);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i q2 = hi_srli(bcast256(blk + 16 + 32 * h), 2); /* chunks 4h + k | 4h + k + 1 */
#pragma GCC unroll 2
        for (int k = 0; k < 4; k += 2) {
            const __m512i u = _mm512_and_si512(k ? _mm512_srli_epi16(q2, 2 * k) : q2, m3);
            const __m512i w = _mm512_mullo_epi16(u, scale_quad(sc5, 8 * h + 2 * k, 0));
#pragma GCC unroll 8
            for (int j = 0; j < P; j++) acc[j] = _mm512_dpbusd_epi32(acc[j], w, xload(&xp[j][b], 128 * h + 32 * k));
        }
    }
    fold_all(P, acc, out);
#else
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i svl = _mm256_permute2x128_si256(sc16, sc16, 0x00), svh = _mm256_permute2x128_si256(sc16, sc16, 0x11);
    for (int j = 0; j < P; j++) out[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i q2 = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16 + 32 * h));
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i u = _mm256_and_si256(k ? _mm256_srli_epi16(q2, 2 * k) : q2, m3);
            const __m256i scs = scale_pair(h ? svh : svl, k);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++)
                out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xload256(&xp[j][b], 128 * h + 32 * k)), scs));
        }
    }
#endif
}

/* Q3_K: chunk c = 4h + k from bits 2k of qs[32h + l] and bit c of hmask[l] (kquant.h); the offset 4 per value as
 * ggml: maddubs(low 2 bits, x) minus maddubs(4 where the high bit is clear, x) (exact int16); scales sc[2c],
 * sc[2c+1] (sc16: the 16 signed scales as int16) */
INLINE void q3k_core(int P, const unsigned char *blk, __m256i sc16, const act_q8k *const *xp, int b, __m256i *out) {
#ifdef KERN_ROWS_AVX512
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), sc5 = _mm512_castsi256_si512(sc16);
    /* the high bits inverted, the upper copy shifted by 1 (bit c + 1 where the lower copy has bit c) */
    const __m512i nh = hi_srli(_mm512_xor_si512(bcast256(blk), _mm512_set1_epi8(-1)), 1);
    ACC512(acc);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m512i q3 = hi_srli(bcast256(blk + 32 + 32 * h), 2); /* chunks 4h + k | 4h + k + 1 */
#pragma GCC unroll 2
        for (int k = 0; k < 4; k += 2) {
            const int c = 4 * h + k;
            const __m512i lo = _mm512_and_si512(k ? _mm512_srli_epi16(q3, 2 * k) : q3, m3);
            const __m512i hi = _mm512_and_si512(c <= 2 ? _mm512_slli_epi16(nh, 2 - c) : _mm512_srli_epi16(nh, c - 2), m4);
            const __m512i scs = scale_quad(sc5, 8 * h + 2 * k, 0);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++) {
                const __m512i q = xload(&xp[j][b], 32 * c);
                acc[j] = _mm512_dpwssd_epi32(acc[j], _mm512_sub_epi16(_mm512_maddubs_epi16(lo, q), _mm512_maddubs_epi16(hi, q)), scs);
            }
        }
    }
    fold_all(P, acc, out);
#else
    const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(4);
    const __m256i svl = _mm256_permute2x128_si256(sc16, sc16, 0x00), svh = _mm256_permute2x128_si256(sc16, sc16, 0x11);
    /* the high bits inverted: 4 where bit c of hmask[l] is clear */
    const __m256i nh = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)blk), _mm256_set1_epi8(-1));
    for (int j = 0; j < P; j++) out[j] = _mm256_setzero_si256();
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
#pragma GCC unroll 8
            for (int j = 0; j < P; j++) {
                const __m256i q = xload256(&xp[j][b], 32 * c);
                const __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, q), _mm256_maddubs_epi16(hi, q));
                out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(pr, scs));
            }
        }
    }
#endif
}

/* Q5_K: chunk 2j + e from nibble e of qs[32j + l] and bit 2j + e of qh[l] moved to bit 4 by one 16-bit shift and a
 * mask (the shift brings in only bits the mask drops; kquant.h), scale sc[c] (sv: q45_scale_vecs) */
INLINE void q5k_core(int P, const unsigned char *blk, __m256i sv, const act_q8k *const *xp, int b, __m256i *out) {
#ifdef KERN_ROWS_AVX512
    const __m512i m15 = _mm512_set1_epi8(15), m16 = _mm512_set1_epi8(16), sv5 = _mm512_castsi256_si512(sv);
    const __m512i qh = hi_srli(bcast256(blk + 16), 1); /* the upper copy: bit c + 1 where the lower has bit c */
    ACC512(acc);
#pragma GCC unroll 4
    for (int jj = 0; jj < 4; jj++) { /* chunks 2jj and 2jj + 1: the same 32 bytes */
        const int c = 2 * jj;
        const __m512i lo = _mm512_and_si512(hi_srli(bcast256(blk + 48 + 32 * jj), 4), m15);
        const __m512i hb = _mm512_and_si512(c <= 4 ? _mm512_slli_epi16(qh, 4 - c) : _mm512_srli_epi16(qh, c - 4), m16);
        const __m512i u = _mm512_or_si512(lo, hb);
        const __m512i scs = scale_quad(sv5, c, 1);
#pragma GCC unroll 8
        for (int j = 0; j < P; j++) acc[j] = _mm512_dpwssd_epi32(acc[j], _mm512_maddubs_epi16(u, xload(&xp[j][b], 32 * c)), scs);
    }
    fold_all(P, acc, out);
#else
    const __m256i m15 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 16));
    for (int j = 0; j < P; j++) out[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 48 + 32 * (c / 2)));
        const __m256i lo = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(q, 4) : q, m15);
        const __m256i hb = _mm256_and_si256(c <= 4 ? _mm256_slli_epi16(qh, 4 - c) : _mm256_srli_epi16(qh, c - 4), m16);
        const __m256i u = _mm256_or_si256(lo, hb);
        const __m256i scs = _mm256_shuffle_epi8(sv, _mm256_set1_epi16((short)(0x0100 + 0x0202 * c)));
#pragma GCC unroll 8
        for (int j = 0; j < P; j++)
            out[j] = _mm256_add_epi32(out[j], _mm256_madd_epi16(_mm256_maddubs_epi16(u, xload256(&xp[j][b], 32 * c)), scs));
    }
#endif
}

/* ------------------------------------------------------------------ the walks and float steps, shared
 * R rows x P positions over all super-blocks, straight from each type's layout (blocks of few positions, decode):
 * per (row, position) the scalar table's float chains (llama.cpp's, kquant.h), so its bits. */

/* Q4_K: the 8 6-bit scales and mins by ggml's 32-bit mask steps; the isum and msum, then ggml's repacked-gemv
 * chains (chains_*) */
INLINE void tile_q4k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    chains ch;
    chains_init(&ch);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 144, 144, pf);
        __m256 xd[2];
        chains_xd(P, xp, b, xd);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 144;
            __m256i sv, mnd, ia[KQ_PT], mp[KQ_PT];
            q45_scale_vecs(blk, &sv, &mnd);
            q4k_core(P, blk, sv, xp, b, ia);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++)
                mp[j] = _mm256_madd_epi16(mnd, _mm256_loadu_si256((const __m256i *)(const void *)xp[j][b].bsums));
            chains_row(&ch, P, i, ia, mp, blk, xd);
        }
        chains_block(&ch, R, P, xd);
    }
    chains_store(&ch, R, P, y, ldy, p0, ri);
}

/* Q2_K: its groups' scales from the 16 low nibbles, the mins (high nibbles) against the bsums; the isum and msum of
 * kq_dot_ints, then the chains of Q4_K */
INLINE void tile_q2k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    chains ch;
    chains_init(&ch);
    const __m128i m15 = _mm_set1_epi8(15);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 84, 84, pf);
        __m256 xd[2];
        chains_xd(P, xp, b, xd);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 84;
            const __m128i smb = _mm_loadu_si128((const __m128i *)(const void *)blk); /* scales | mins */
            const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(smb, 4), m15));
            __m256i ia[KQ_PT], mp[KQ_PT];
            q2k_core(P, blk, _mm256_cvtepu8_epi16(_mm_and_si128(smb, m15)), xp, b, ia);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++)
                mp[j] = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)(const void *)xp[j][b].bsums));
            chains_row(&ch, P, i, ia, mp, blk + 80, xd);
        }
        chains_block(&ch, R, P, xd);
    }
    chains_store(&ch, R, P, y, ldy, p0, ri);
}

/* Q6_K, Q3_K, Q5_K: the 8 lanes of kq_lanes_ggml (Q6_K less its offset 32 through the bsums), one fma per lane and
 * super-block, hsum8 at the end (Q5_K plus its mins' chain summs = fma(-d_x * dmin, msum, summs)): the scalar
 * table's bits */
INLINE void tile_q6k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 acc[4][KQ_PT];
    tile_zero(R, P, acc);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 210, 210, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 210;
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(blk + 192)));
            const float dw = blk_d(blk + 208);
            __m256i lanes[KQ_PT];
            q6k_core(P, blk, sc16, xp, b, lanes);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++) {
                const act_q8k *x = &xp[j][b];
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)x->bsums);
                const __m256i l8 = _mm256_sub_epi32(lanes[j], _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5));
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(x->d * dw), _mm256_cvtepi32_ps(l8), acc[i][j]);
            }
        }
    }
    tile_store(R, P, acc, NULL, NULL, y, ldy, p0, ri);
}

/* Q3_K's 16 signed 6-bit scales (12 bytes at blk + 96) by ggml's 32-bit mask steps */
INLINE __m128i q3k_scales(const unsigned char *blk) {
    uint32_t a[3];
    memcpy(a, blk + 96, 12);
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    return _mm_sub_epi8(_mm_set_epi32((int)(((a[1] >> 4) & k2) | (((a[2] >> 6) & k1) << 4)),
                                      (int)(((a[0] >> 4) & k2) | (((a[2] >> 4) & k1) << 4)),
                                      (int)((a[1] & k2) | (((a[2] >> 2) & k1) << 4)),
                                      (int)((a[0] & k2) | ((a[2] & k1) << 4))),
                        _mm_set1_epi8(32));
}

INLINE void tile_q3k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 facc[4][KQ_PT];
    tile_zero(R, P, facc);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 110, 110, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 110;
            __m256i lanes[KQ_PT];
            q3k_core(P, blk, _mm256_cvtepi8_epi16(q3k_scales(blk)), xp, b, lanes);
            const float dw = blk_d(blk + 108);
#pragma GCC unroll 8
            for (int j = 0; j < P; j++)
                facc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(xp[j][b].d * dw), _mm256_cvtepi32_ps(lanes[j]), facc[i][j]);
        }
    }
    tile_store(R, P, facc, NULL, NULL, y, ldy, p0, ri);
}

INLINE void tile_q5k(int R, int P, const unsigned char *const *wr, const int *ri, int nb, const act_q8k *const *xp,
                     float *y, int ldy, int p0, size_t pf) {
    __m256 facc[4][KQ_PT];
    float summs[4][KQ_PT] = {{0}};
    tile_zero(R, P, facc);
    for (int b = 0; b < nb; b++) {
        prefetch_block(R, wr, (size_t)b * 176, 176, pf);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const unsigned char *blk = wr[i] + (size_t)b * 176;
            __m256i sv, mnd, lanes[KQ_PT];
            q45_scale_vecs(blk, &sv, &mnd);
            q5k_core(P, blk, sv, xp, b, lanes);
            const float dw = blk_d(blk), dmw = blk_d(blk + 2);
#pragma GCC unroll 8
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

/* the row walk of each type (ROWS_OVER_TILES: tiles of up to KQ_PT positions, 1 or 2 rows; one walk per type, so
 * each inlines only its own tiles) */
#define KQ_TILE_T(tile)                                                                                           \
    INLINE void tile##_t(int t, int R, int P, const unsigned char *const *wr, const int *ri, int nb,            \
                         const act_q8k *const *xp, float *y, int ldy, int p0, size_t pf) {                        \
        (void)t;                                                                                                  \
        tile(R, P, wr, ri, nb, xp, y, ldy, p0, pf);                                                               \
    }                                                                                                             \
    ROWS_OVER_TILES(tile##_rows, act_q8k, QK_K, tile##_t, KQ_PT, KQ_WITH)
KQ_TILE_T(tile_q2k)
KQ_TILE_T(tile_q3k)
KQ_TILE_T(tile_q4k)
KQ_TILE_T(tile_q5k)
KQ_TILE_T(tile_q6k)


/* Blocks of `min` positions or more through the 8-rows-in-the-lanes tile (kern_tile_kq_avx2.c), smaller ones through
 * the per-row kernel above; both compute the per-row chains (llama.cpp's, kquant.h), so the same bits. The tile
 * stages every super-block of its rows before any position uses it (a cost per block, ~190 ms a pass for TinyLlama
 * shapes on 1 thread) and then costs less per position, so it pays only for long blocks: the crossovers measured on
 * tl-T.gguf files (`specdec bench block -t 1 --ctx 16 --ks 8,16,32,48`, once with the minimum at 6 and once at 64, 4-position row
 * tiles in both builds) are the minimums below. */
#define KQ_MM(name, ROWS, TILE, min)                                                                              \
    void name(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y, int ldy,    \
              int r0, int r1) {                                                                                   \
        if (n >= (min)) TILE(w, rb, cols, x, xs, n, y, ldy, r0, r1);                                              \
        else ROWS(w, rb, cols, x, xs, n, y, ldy, r0, r1);                                                         \
    }
/* 2 rows x up to KQ_PT positions per tile */
ROWS_MM(mm_q2_k_rows, tile_q2k_rows, GGML_Q2_K, 2, KQ_PT)
ROWS_MM(mm_q3_k_rows, tile_q3k_rows, GGML_Q3_K, 2, KQ_PT)
ROWS_MM(mm_q4_k_rows, tile_q4k_rows, GGML_Q4_K, 2, KQ_PT)
ROWS_MM(mm_q5_k_rows, tile_q5k_rows, GGML_Q5_K, 2, KQ_PT)
ROWS_MM(mm_q6_k_rows, tile_q6k_rows, GGML_Q6_K, 2, KQ_PT)
#ifdef KERN_ROWS_AVX512
KQ_MM(kern_rows_kq_mm_q2_k_vnni, mm_q2_k_rows, kern_tile_mm_q2_k_vnni, 40)
KQ_MM(kern_rows_kq_mm_q3_k_vnni, mm_q3_k_rows, kern_tile_mm_q3_k_vnni, 48)
KQ_MM(kern_rows_kq_mm_q4_k_vnni, mm_q4_k_rows, kern_tile_mm_q4_k_vnni, 24)
KQ_MM(kern_rows_kq_mm_q5_k_vnni, mm_q5_k_rows, kern_tile_mm_q5_k_vnni, 24)
KQ_MM(kern_rows_kq_mm_q6_k_vnni, mm_q6_k_rows, kern_tile_mm_q6_k_vnni, 48)
#else
KQ_MM(kern_rows_kq_mm_q2_k, mm_q2_k_rows, kern_tile_mm_q2_k, 32)
KQ_MM(kern_rows_kq_mm_q3_k, mm_q3_k_rows, kern_tile_mm_q3_k, 48)
KQ_MM(kern_rows_kq_mm_q4_k, mm_q4_k_rows, kern_tile_mm_q4_k, 20)
KQ_MM(kern_rows_kq_mm_q5_k, mm_q5_k_rows, kern_tile_mm_q5_k, 32)
KQ_MM(kern_rows_kq_mm_q6_k, mm_q6_k_rows, kern_tile_mm_q6_k, 48)
#endif
#endif
