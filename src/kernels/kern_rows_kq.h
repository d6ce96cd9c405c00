/* kern_rows_kq: the K-quant matmul kernels (kern_mm, kern.h) of the avx2 and avx512 tables: blocks of fewer than 20-48
 * positions (by type and table) row by row (kern_rows_kq_avx2.c), longer ones through the 8-rows-in-the-lanes tile
 * (kern_tile.h). Every output has the scalar table's bits (kquant.h), whatever the block size or table. */
#ifndef SD_KERNELS_KERN_ROWS_KQ_H
#define SD_KERNELS_KERN_ROWS_KQ_H
#include "kernels/kern.h"

/* Defined only in builds with AVX2 (SPECDEC_HAVE_AVX2); called only by the avx2 table. */
kern_mm kern_rows_kq_mm_q2_k, kern_rows_kq_mm_q3_k, kern_rows_kq_mm_q4_k, kern_rows_kq_mm_q5_k, kern_rows_kq_mm_q6_k;
/* The same built with AVX-512 BW/VL/VNNI (kern_rows_kq_avx512.c, which the Makefile builds with the AVX2 flags plus
 * those); called only by the avx512 table, after its CPUID check. */
kern_mm kern_rows_kq_mm_q2_k_vnni, kern_rows_kq_mm_q3_k_vnni, kern_rows_kq_mm_q4_k_vnni, kern_rows_kq_mm_q5_k_vnni,
    kern_rows_kq_mm_q6_k_vnni;
#endif
