/* kern_tile: the q4_0 and K-quant matmul kernels (kern_mm, kern.h) with eight weight rows at a time in the lanes
 * of a vector: q4_0 for every block size (decode included), the K-quants for long blocks.
 *
 * q4_0: each output element is ONE float chain over the 32-blocks of its row in order, the same as the scalar reference
 * (kern.c): s = fma((float)isum_b, d_w_b * d_x_b, s) from s = 0, isum_b the exact integer dot of block b. So the bits
 * equal the scalar table's, whatever the block size, the position's place in it, or the row range (thread split). */
#ifndef SD_KERNELS_KERN_TILE_H
#define SD_KERNELS_KERN_TILE_H
#include <stddef.h>

#include "kernels/kern.h"

/* Defined only in builds with AVX2 (SPECDEC_HAVE_AVX2); called only by the AVX2 table. */
kern_mm kern_tile_mm_q4_0;

/* K-quants (x as act_q8k rows), kern_tile_kq_avx2.c: the per-row kernel's float chains (kern.c, kquant.h) per
 * (row, position) with the integer sums of 8 rows at once, so the same bits; pays for long blocks only (the
 * per-row kernels of kern_rows_kq_avx2.c take the others: kern_rows_kq.h). */
kern_mm kern_tile_mm_q2_k, kern_tile_mm_q3_k, kern_tile_mm_q4_k, kern_tile_mm_q5_k, kern_tile_mm_q6_k;

/* The same kernels built with AVX-512 (kern_tile_avx512.c, kern_tile_kq_avx512.c: both row halves in one 512-bit
 * vector, dpbusd / dpwssd for the integer sums; the same integers, so the same bits), for the avx512 table. Defined
 * only with SPECDEC_HAVE_AVX512. */
kern_mm kern_tile_mm_q4_0_vnni, kern_tile_mm_q2_k_vnni, kern_tile_mm_q3_k_vnni, kern_tile_mm_q4_k_vnni,
    kern_tile_mm_q5_k_vnni, kern_tile_mm_q6_k_vnni;
#endif
