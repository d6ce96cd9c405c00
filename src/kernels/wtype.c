#include "kernels/wtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kernels/kquant.h"
#include "util/fp16.h"

/* ------------------------------------------------------------------ float types */
static void f32_to_float(const void *row, float *out, int64_t n) { memcpy(out, row, (size_t)n * 4); }
static void f32_from_float(const float *x, void *out, int64_t n) { memcpy(out, x, (size_t)n * 4); }

static void f16_to_float(const void *row, float *out, int64_t n) {
    const unsigned char *p = row;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        out[i] = fp16_to_f32(h);
    }
}
static void f16_from_float(const float *x, void *out, int64_t n) {
    unsigned char *o = out;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f32_to_fp16(x[i]);
        memcpy(o + 2 * i, &h, 2);
    }
}

static void bf16_to_float(const void *row, float *out, int64_t n) {
    const unsigned char *p = row;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
    }
}
static void bf16_from_float(const float *x, void *out, int64_t n) {
    unsigned char *o = out;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f32_to_bf16(x[i]);
        memcpy(o + 2 * i, &h, 2);
    }
}

/* ------------------------------------------------------------------ 32-blocks: fp16 scale d + values */
/* q8_0: d, int8 q[32]; value = d * q */
static void q8_0_to_float(const void *row, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const unsigned char *blk = (const unsigned char *)row + 34 * b;
        uint16_t h;
        memcpy(&h, blk, 2);
        float d = fp16_to_f32(h);
        for (int j = 0; j < 32; j++) out[b * 32 + j] = d * (float)(int8_t)blk[2 + j];
    }
}
static void q8_0_from_float(const float *x, void *out, int64_t n) {
    unsigned char *o = out;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *v = x + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127, id = d ? 1 / d : 0;
        uint16_t h = f32_to_fp16(d);
        memcpy(o + 34 * b, &h, 2);
        for (int j = 0; j < 32; j++) o[34 * b + 2 + j] = (unsigned char)(int8_t)roundf(v[j] * id);
    }
}

/* q4_0: d, 16 bytes of nibbles (element j low nibble of byte j, element 16 + j high); value = d * (q - 8) */
static void q4_0_to_float(const void *row, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const unsigned char *blk = (const unsigned char *)row + 18 * b;
        uint16_t h;
        memcpy(&h, blk, 2);
        float d = fp16_to_f32(h);
        for (int j = 0; j < 16; j++) {
            out[b * 32 + j] = d * (float)((blk[2 + j] & 0x0f) - 8);
            out[b * 32 + 16 + j] = d * (float)((blk[2 + j] >> 4) - 8);
        }
    }
}
/* as ggml's reference: d = max / -8 (the signed value of largest magnitude) */
static void q4_0_from_float(const float *x, void *out, int64_t n) {
    unsigned char *o = out;
    for (int64_t b = 0; b < n / 32; b++) {
        const float *v = x + 32 * b;
        float amax = 0, mx = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                mx = v[j];
            }
        float d = mx / -8, id = d ? 1 / d : 0;
        uint16_t h = f32_to_fp16(d);
        memcpy(o + 18 * b, &h, 2);
        for (int j = 0; j < 16; j++) {
            int a = (int)(v[j] * id + 8.5f), c = (int)(v[16 + j] * id + 8.5f);
            a = a > 15 ? 15 : a < 0 ? 0 : a;
            c = c > 15 ? 15 : c < 0 ? 0 : c;
            o[18 * b + 2 + j] = (unsigned char)(a | (c << 4));
        }
    }
}

/* ------------------------------------------------------------------ K-quants (kquant.c) */
#define KQ_ROW_FNS(nm, T)                                                                                         \
    static void nm##_to_float(const void *row, float *out, int64_t n) { kq_to_float(T, row, out, n); }           \
    static void nm##_from_float(const float *x, void *out, int64_t n) { kq_from_float(T, x, out, n); }
KQ_ROW_FNS(q2_k, GGML_Q2_K)
KQ_ROW_FNS(q3_k, GGML_Q3_K)
KQ_ROW_FNS(q4_k, GGML_Q4_K)
KQ_ROW_FNS(q5_k, GGML_Q5_K)
KQ_ROW_FNS(q6_k, GGML_Q6_K)

/* ------------------------------------------------------------------ the table */
static const wtype_info TYPES[] = {
    {GGML_F32, "f32", 1, 4, WT_ACT_F32, f32_to_float, f32_from_float},
    {GGML_F16, "f16", 1, 2, WT_ACT_F32, f16_to_float, f16_from_float},
    {GGML_BF16, "bf16", 1, 2, WT_ACT_F32, bf16_to_float, bf16_from_float},
    {GGML_Q8_0, "q8_0", 32, 34, WT_ACT_Q8_0, q8_0_to_float, q8_0_from_float},
    {GGML_Q4_0, "q4_0", 32, 18, WT_ACT_Q8_0, q4_0_to_float, q4_0_from_float},
    {GGML_Q2_K, "q2_K", 256, 84, WT_ACT_Q8_K, q2_k_to_float, q2_k_from_float},
    {GGML_Q3_K, "q3_K", 256, 110, WT_ACT_Q8_K, q3_k_to_float, q3_k_from_float},
    {GGML_Q4_K, "q4_K", 256, 144, WT_ACT_Q8_K, q4_k_to_float, q4_k_from_float},
    {GGML_Q5_K, "q5_K", 256, 176, WT_ACT_Q8_K, q5_k_to_float, q5_k_from_float},
    {GGML_Q6_K, "q6_K", 256, 210, WT_ACT_Q8_K, q6_k_to_float, q6_k_from_float},
};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

const wtype_info *wtype_at(int i) { return i >= 0 && i < N_TYPES ? &TYPES[i] : NULL; }

const wtype_info *wtype_get(uint32_t type) {
    for (int i = 0; i < N_TYPES; i++)
        if (TYPES[i].type == type) return &TYPES[i];
    return NULL;
}

bool wtype_from_name(const char *name, uint32_t *type) {
    for (int i = 0; name && i < N_TYPES; i++)
        if (!strcasecmp(name, TYPES[i].name)) {
            *type = TYPES[i].type;
            return true;
        }
    return false;
}

const char *wtype_names(void) { return WTYPE_NAMES; }

bool ggml_type_layout(uint32_t type, int *block_elems, int *block_bytes) {
    const wtype_info *t = wtype_get(type);
    if (!t) return false;
    if (block_elems) *block_elems = t->block_elems;
    if (block_bytes) *block_bytes = t->block_bytes;
    return true;
}

const char *ggml_type_name(uint32_t type) {
    const wtype_info *t = wtype_get(type);
    if (t) return t->name;
    switch (type) {
    case 3: return "q4_1";
    case 6: return "q5_0";
    case 7: return "q5_1";
    case 10: return "q2_K";
    case 11: return "q3_K";
    case 12: return "q4_K";
    case 13: return "q5_K";
    case 14: return "q6_K";
    case 15: return "q8_K";
    default: return "unknown";
    }
}

size_t ggml_row_bytes(uint32_t type, int64_t n) {
    const wtype_info *t = wtype_get(type);
    return t ? (size_t)(n / t->block_elems) * (size_t)t->block_bytes : 0;
}

uint32_t wtype_fit(uint32_t type, int64_t cols) {
    const wtype_info *t = wtype_get(type);
    if (!t || cols % t->block_elems == 0) return type;
    return cols % 32 == 0 ? GGML_Q8_0 : GGML_F16;
}

size_t ggml_type_align(uint32_t type) {
    const wtype_info *t = wtype_get(type);
    if (!t) return 1;
    return t->block_elems == 1 ? (size_t)t->block_bytes : 2;
}
