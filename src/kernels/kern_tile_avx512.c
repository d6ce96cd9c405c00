/* The q4_0 block kernel of kern_tile_avx2.c compiled with AVX-512 (KERN_TILE_AVX512): its integer block sums by
 * 512-bit dpbusd, the same integers and float steps, so the same bits (the avx512 table's q4_0 kernel). */
#define KERN_TILE_AVX512 1
#include "kernels/kern_tile_avx2.c"
