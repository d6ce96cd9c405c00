/* The K-quant block kernels of kern_tile_kq_avx2.c compiled with AVX-512 (KERN_TILE_AVX512): both halves of the 8
 * rows in one 512-bit vector, the madd + add of the int16 pair sums by one dpwssd; the same integers and float
 * steps, so the same bits (the avx512 table's K-quant block kernels). */
#define KERN_TILE_AVX512 1
#include "kernels/kern_tile_kq_avx2.c"
