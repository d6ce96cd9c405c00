/* kern_avx512: the avx512 table's block kernels for the float weight types and q8_0 (kern_avx512.c), the same bits as the
 * AVX2 kernels of kern_avx2.c (two of their 8-lane chains side by side in each 512-bit vector). */
#ifndef SD_KERNELS_KERN_AVX512_H
#define SD_KERNELS_KERN_AVX512_H
#include <stddef.h>

#include "kernels/kern.h"

/* kern_mm_fn (kern.h) for weights of float kind t (KF_* of kern_avx2_inl.h). Defined only in builds with AVX-512
 * (SPECDEC_HAVE_AVX512); called only by the avx512 table. */
void kern_avx512_mm_float(int t, const unsigned char *w, size_t row_bytes, int cols, const void *x, size_t x_stride,
                          int n, float *y, int ldy, int r0, int r1);
/* kern_mm_fn for q8_0 (x as act_q8 rows): the AVX2 kernel's 8-lane chains, two per 512-bit vector, the integers by
 * AVX-512 VNNI; the same bits. */
kern_mm kern_avx512_mm_q8_0;
#endif
