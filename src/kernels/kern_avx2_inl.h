/* kern_avx2_inl: small AVX2 helpers shared by the kernel files compiled with AVX2 (kern_avx2.c, kern_avx512.c);
 * include only from such files. */
#ifndef SD_KERNELS_KERN_AVX2_INL_H
#define SD_KERNELS_KERN_AVX2_INL_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "util/fp16.h"

/* the float weight kinds of the float kernels */
enum { KF_F32, KF_F16, KF_BF16 };

/* the sum of 8 lanes in a fixed order: (lane i + lane i+4), then (0)+(2) and (1)+(3), then those two (ggml's
 * hsum_float_8 pairing) */
static inline __attribute__((always_inline)) float kern_hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* 8 weights of a row of kind t from column c, as floats */
static inline __attribute__((always_inline)) __m256 kern_ld8(int t, const unsigned char *w, int c) {
    if (t == KF_F32) return _mm256_loadu_ps((const float *)(const void *)w + c);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)w + c));
    if (t == KF_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* one weight of a row of kind t, as a float */
static inline __attribute__((always_inline)) float kern_ld1(int t, const unsigned char *w, int c) {
    if (t == KF_F32) return ((const float *)(const void *)w)[c];
    uint16_t h;
    memcpy(&h, w + 2 * (size_t)c, 2);
    return t == KF_F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}
#endif
