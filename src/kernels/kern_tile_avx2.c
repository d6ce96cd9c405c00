/* AVX2 q4_0 kernel with eight rows in the lanes (kern_tile.h). Compiled with -mavx2 -mfma -mf16c; only
 * reached through the AVX2 table, after its CPUID check.
 *
 * Loop order: positions in groups (their activations stay in L2), then groups of 8 consecutive rows, then column
 * chunks of KB blocks. A chunk of the 8 rows is first "staged" into an L1 buffer in an interleaved layout (the idea
 * of ggml's repacked q4_0x8, done on the fly, so the model file and its mapping stay as they are): for each block
 * and each half h of the rows (rows 4h..4h+3) and each quarter c of the block (values 8c..8c+7), one vector holds
 * those 8 values of the 4 rows side by side. Every position of the group then runs over the staged chunk: the
 * activation quarter is broadcast to the 4 rows, one maddubs per (half, quarter) gives the pair sums of 4 rows,
 * two madd + one hadd fold them into the 8 rows' block sums (lane l holds row LANE_ROW[l]), and one convert and one
 * FMA per 8 rows continue the rows' chains. The arithmetic per output: one float chain over the blocks in order,
 * fma((float)isum, d_w * d_x, s), exactly the scalar reference's, so every block size gives the same bits.
 *
 * q4_0: the staged values are the nibbles 0..15 (unsigned, as maddubs wants); sum (n - 8) x = sum n x - 8 sum x,
 * with 8 sum x from the activation block (act_q8.s8). Pair sums <= 2 * 15 * 128 and the four
 * quarters' sums <= 15360 fit int16. (q8_0 tried the same way: 1.3x faster blocks of 64-256, but 1.7x slower decode,
 * where the sign trick's extra work is not shared; it keeps kern_avx2.c's kernel.) */
#include "kernels/kern_tile.h"

#if defined(__x86_64__) && defined(SPECDEC_HAVE_AVX2)
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"

#define INLINE static inline __attribute__((always_inline))

enum {
    TR = 8,          /* rows per group (the lanes) */
    KB_Q4 = 64,      /* blocks per staged chunk: 64 * (8 * 32 + 32) = 18 KiB */
    PG_MAX = 64      /* most positions per group */
};

/* lane l of a group's block sums holds row LANE_ROW[l] (the hadd of the two halves' pair sums) */
static const int LANE_ROW[8] = {0, 1, 4, 5, 2, 3, 6, 7};

INLINE __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

INLINE uint16_t ld16(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* the 8 rows' fp16 scales of one block as floats, in lane order */
INLINE __m256 stage_scales(const unsigned char *const *wr, size_t off) {
    __m128i h = _mm_setr_epi16((short)ld16(wr[0] + off), (short)ld16(wr[1] + off), (short)ld16(wr[4] + off),
                               (short)ld16(wr[5] + off), (short)ld16(wr[2] + off), (short)ld16(wr[3] + off),
                               (short)ld16(wr[6] + off), (short)ld16(wr[7] + off));
    return _mm256_cvtph_ps(h);
}

/* q4_0 block b of the 8 rows: v[2c + h] = nibbles of values 8c..8c+7 of rows 4h..4h+3 (the two halves of a
 * quarter side by side: one 512-bit vector in the AVX-512 build) */
INLINE void stage_q4(const unsigned char *const *wr, int b, __m256i *v, float *dw) {
    const size_t off = (size_t)b * 18;
    const __m256i m = _mm256_set1_epi8(15);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m128i a0 = _mm_loadu_si128((const __m128i *)(const void *)(wr[4 * h] + off + 2));
        __m128i a1 = _mm_loadu_si128((const __m128i *)(const void *)(wr[4 * h + 1] + off + 2));
        __m128i a2 = _mm_loadu_si128((const __m128i *)(const void *)(wr[4 * h + 2] + off + 2));
        __m128i a3 = _mm_loadu_si128((const __m128i *)(const void *)(wr[4 * h + 3] + off + 2));
        /* bytes 0-7 (values 0-7 low, 16-23 high) and 8-15 (8-15, 24-31) of the 4 rows */
        __m256i lo = _mm256_set_m128i(_mm_unpacklo_epi64(a2, a3), _mm_unpacklo_epi64(a0, a1));
        __m256i hi = _mm256_set_m128i(_mm_unpackhi_epi64(a2, a3), _mm_unpackhi_epi64(a0, a1));
        _mm256_store_si256(v + h, _mm256_and_si256(lo, m));
        _mm256_store_si256(v + 2 + h, _mm256_and_si256(hi, m));
        _mm256_store_si256(v + 4 + h, _mm256_and_si256(_mm256_srli_epi16(lo, 4), m));
        _mm256_store_si256(v + 6 + h, _mm256_and_si256(_mm256_srli_epi16(hi, 4), m));
    }
    _mm256_store_ps(dw, stage_scales(wr, off));
}

/* The 8 rows' exact block sums (lane order) of one staged q4_0 block with one position's activation block:
 * sum n x over the block (the caller subtracts 8 sum x). In the AVX-512 build (this file compiled again as
 * kern_tile_avx512.c) one 512-bit dpbusd per quarter (both halves) gives the same integers in the same lanes. */
INLINE __m256i dot_q4(const __m256i *v, const int8_t *xq) {
#ifdef KERN_TILE_AVX512
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        int64_t xv;
        memcpy(&xv, xq + 8 * c, 8);
        s = _mm512_dpbusd_epi32(s, _mm512_load_si512((const void *)(v + 2 * c)), _mm512_set1_epi64(xv));
    }
    return _mm256_hadd_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
#else
    __m256i x0 = bcast8(xq), x1 = bcast8(xq + 8), x2 = bcast8(xq + 16), x3 = bcast8(xq + 24);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s0 = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(v[0], x0), _mm256_maddubs_epi16(v[2], x1)),
                                  _mm256_add_epi16(_mm256_maddubs_epi16(v[4], x2), _mm256_maddubs_epi16(v[6], x3)));
    __m256i s1 = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(v[1], x0), _mm256_maddubs_epi16(v[3], x1)),
                                  _mm256_add_epi16(_mm256_maddubs_epi16(v[5], x2), _mm256_maddubs_epi16(v[7], x3)));
    return _mm256_hadd_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));
#endif
}

/* positions per group: their activations within ~512 KiB (L2) */
INLINE int pos_group(size_t xs) {
    size_t g = ((size_t)512 << 10) / xs;
    return g > PG_MAX ? PG_MAX : g < 1 ? 1 : (int)g;
}

static void mm_tile_q4(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                    int ldy, int r0, int r1) {
    const int nb = cols / 32, KB = KB_Q4, bb = 18;
    _Alignas(64) __m256i sv[KB_Q4 * 8];      /* staged values [KB][8] */
    _Alignas(32) float sd[KB_Q4 * 8];        /* staged scales [KB][8 lanes] */
    _Alignas(32) __m256 acc[PG_MAX];         /* the chains of the 8 rows x the group's positions */
    const int pg = pos_group(xs);
    for (int p0 = 0; p0 < n; p0 += pg) {
        const int np = n - p0 < pg ? n - p0 : pg;
        const act_q8 *xg[PG_MAX];
        for (int p = 0; p < np; p++) xg[p] = (const act_q8 *)(const void *)((const char *)x + (size_t)(p0 + p) * xs);
        for (int r = r0; r < r1; r += TR) {
            const int R = r1 - r < TR ? r1 - r : TR;
            const unsigned char *wr[TR];
            for (int i = 0; i < TR; i++) wr[i] = w + (size_t)(r + (i < R ? i : R - 1)) * rb; /* repeats: unused lanes */
            for (int p = 0; p < np; p++) acc[p] = _mm256_setzero_ps();
            for (int k0 = 0; k0 < nb; k0 += KB) {
                const int kn = nb - k0 < KB ? nb - k0 : KB;
                for (int k = 0; k < kn; k++) {
                    if (((k0 + k) * bb & 63) < bb)
                        for (int i = 0; i < TR; i++) {
                            _mm_prefetch((const char *)wr[i] + (size_t)(k0 + k) * bb + 512, _MM_HINT_T0);
                            /* the next row group's same line into L2: a whole group ahead of the stream */
                            if (r + TR + i < r1) _mm_prefetch((const char *)wr[i] + (size_t)TR * rb + (size_t)(k0 + k) * bb, _MM_HINT_T1);
                        }
                    stage_q4(wr, k0 + k, sv + 8 * k, sd + 8 * k);
                }
                for (int p = 0; p < np; p++) {
                    const act_q8 *xb = xg[p] + k0;
                    __m256 s = acc[p];
                    for (int k = 0; k < kn; k++) {
                        __m256i is = _mm256_sub_epi32(dot_q4(sv + 8 * k, xb[k].qs), _mm256_set1_epi32(xb[k].s8));
                        __m256 dd = _mm256_mul_ps(_mm256_load_ps(sd + 8 * k), _mm256_set1_ps(xb[k].d));
                        s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), dd, s);
                    }
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

#ifdef KERN_TILE_AVX512
void kern_tile_mm_q4_0_vnni(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y,
                            int ldy, int r0, int r1) {
    mm_tile_q4(w, rb, cols, x, xs, n, y, ldy, r0, r1);
}
#else
void kern_tile_mm_q4_0(const unsigned char *w, size_t rb, int cols, const void *x, size_t xs, int n, float *y, int ldy,
                       int r0, int r1) {
    mm_tile_q4(w, rb, cols, x, xs, n, y, ldy, r0, r1);
}
#endif
#endif
