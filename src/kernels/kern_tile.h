/* kern_tile: the AVX2 table's q4_0 matmul kernel (kern_mm_fn, kern.h), eight weight rows at a time in
 * the lanes of a vector, for every block size (decode included).
 *
 * q4_0: each output element is ONE float chain over the 32-blocks of its row in order, the same as the scalar reference
 * (kern.c): s = fma((float)isum_b, d_w_b * d_x_b, s) from s = 0, isum_b the exact integer dot of block b. So the bits
 * equal the scalar table's, whatever the block size, the position's place in it, or the row range (thread split). */
#ifndef SD_KERNELS_KERN_TILE_H
#define SD_KERNELS_KERN_TILE_H
#include <stdbool.h>
#include <stddef.h>

/* Defined only in builds with AVX2 (SPECDEC_HAVE_AVX2); called only by the AVX2 table. */
void kern_tile_mm_q4_0(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);

/* K-quants (x as act_q8k rows), kern_tile_kq_avx2.c: the per-row kernel's float chains (kern.c, kquant.h) per
 * (row, position) with the integer sums of 8 rows at once, so the same bits; pays for blocks of KERN_TILE_KQ_MIN
 * positions or more (the per-row kernel of kern_avx2.c takes smaller blocks). */
enum { KERN_TILE_KQ_MIN = 6 };
void kern_tile_mm_q2_k(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);
void kern_tile_mm_q3_k(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);
void kern_tile_mm_q4_k(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);
void kern_tile_mm_q5_k(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);
void kern_tile_mm_q6_k(const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride, int n,
                       float *y, int ldy, int r0, int r1);

/* True when the CPU has AVX-VNNI and SPECDEC_NO_VNNI is not set (the tiles then take their VNNI builds: the same
 * integers, so the same bits). */
bool kern_has_avx_vnni(void);
#endif
