/* The K-quant block kernels of kern_tile_kq_avx2.c compiled with AVX-VNNI (-mavxvnni): the madd + add of the int16
 * pair sums by one dpwssd, the same integers and float steps, so the same bits (picked at run time by CPUID). */
#define KERN_TILE_VNNI 1
#include "kernels/kern_tile_kq_avx2.c"
