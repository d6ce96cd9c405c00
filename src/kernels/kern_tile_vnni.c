/* The q4_0 block kernel of kern_tile_avx2.c compiled with AVX-VNNI (-mavxvnni): its integer block sums by dpbusd,
 * the same integers and float steps, so the same bits (kern_tile_mm_q4_0 picks it at run time by CPUID). */
#define KERN_TILE_VNNI 1
#include "kernels/kern_tile_avx2.c"
