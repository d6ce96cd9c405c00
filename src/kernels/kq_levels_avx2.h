/* kq_levels_avx2: the 256 levels of a K-quant super-block with AVX2 vectors (shared by the AVX2 kernel files;
 * include only from files compiled with -mavx2). */
#ifndef SD_KERNELS_KQ_LEVELS_AVX2_H
#define SD_KERNELS_KQ_LEVELS_AVX2_H
#include <immintrin.h>
#include <stdint.h>

#include "kernels/wtype.h"

static inline __attribute__((always_inline)) void st32(uint8_t *dst, __m256i v) { _mm256_storeu_si256((__m256i *)(void *)dst, v); }
static inline __attribute__((always_inline)) __m256i ld32(const unsigned char *src) { return _mm256_loadu_si256((const __m256i *)(const void *)src); }

/* The 256 levels of a super-block with vectors (the bit placement in kquant.h); the same bytes as kq_unpack. Byte
 * shifts are done as 16-bit shifts followed by a mask, which drops the bits that cross into the neighbour byte. */
static inline __attribute__((always_inline)) void kq_levels(int t, const unsigned char *b, uint8_t *u) {
    const __m256i m1 = _mm256_set1_epi8(1), m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    switch (t) {
    case GGML_Q2_K:
        for (int h = 0; h < 2; h++) {
            __m256i v = ld32(b + 16 + 32 * h);
            for (int j = 0; j < 4; j++) st32(u + 128 * h + 32 * j, _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3));
        }
        break;
    case GGML_Q3_K: {
        __m256i hm = ld32(b);
        for (int h = 0; h < 2; h++) {
            __m256i v = ld32(b + 32 + 32 * h);
            for (int j = 0; j < 4; j++) {
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), m1);
                st32(u + 128 * h + 32 * j, _mm256_or_si256(lo, _mm256_slli_epi16(hi, 2)));
            }
        }
        break;
    }
    case GGML_Q4_K:
        for (int j = 0; j < 4; j++) {
            __m256i v = ld32(b + 16 + 32 * j);
            st32(u + 64 * j, _mm256_and_si256(v, m15));
            st32(u + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m15));
        }
        break;
    case GGML_Q5_K: {
        __m256i qh = ld32(b + 16);
        for (int j = 0; j < 4; j++) {
            __m256i v = ld32(b + 48 + 32 * j);
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), m1), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), m1), 4);
            st32(u + 64 * j, _mm256_or_si256(_mm256_and_si256(v, m15), h0));
            st32(u + 64 * j + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m15), h1));
        }
        break;
    }
    case GGML_Q6_K:
        for (int h = 0; h < 2; h++) {
            __m256i l0 = ld32(b + 64 * h), l1 = ld32(b + 64 * h + 32), q = ld32(b + 128 + 32 * h);
            __m256i q0 = _mm256_slli_epi16(_mm256_and_si256(q, m3), 4);
            __m256i q1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 2), m3), 4);
            __m256i q2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3), 4);
            __m256i q3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 6), m3), 4);
            st32(u + 128 * h, _mm256_or_si256(_mm256_and_si256(l0, m15), q0));
            st32(u + 128 * h + 32, _mm256_or_si256(_mm256_and_si256(l1, m15), q1));
            st32(u + 128 * h + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15), q2));
            st32(u + 128 * h + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15), q3));
        }
        break;
    default: break;
    }
}

#endif
