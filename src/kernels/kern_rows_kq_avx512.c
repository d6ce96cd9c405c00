/* The K-quant kernels of kern_rows_kq_avx2.c built with AVX-512 BW/VL/VNNI (KERN_ROWS_AVX512): two 32-value chunks
 * per 512-bit vector, dpwssd / dpbusd for the integer steps; the same integers per lane, so the same bits (the
 * avx512 table's K-quant kernels). */
#define KERN_ROWS_AVX512 1
#include "kernels/kern_rows_kq_avx2.c"
