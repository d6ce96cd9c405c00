/* wtype: the weight types, one table (as ggml's type traits): for each type its GGUF enum value, name, block layout,
 * row conversions to and from float, and the activation format its matmul kernels multiply with. The kernels
 * themselves are registered per table of kernels (kern.c: scalar reference, kern_avx2.c), indexed by the enum.
 * Adding a type: a row here (wtype.c), its to/from-float functions, and its kernels. */
#ifndef SD_KERNELS_WTYPE_H
#define SD_KERNELS_WTYPE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml tensor types (the values GGUF files store) this project knows the layout of. */
enum ggml_type {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q8_0 = 8,
    GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14,
    GGML_BF16 = 30,
    GGML_TYPE_LIMIT = 31 /* every known value is below this */
};

/* What a type's kernels take as the activations x: float rows, or rows of activation blocks (kern.h) made by
 * the matching quantiser: act_q8 (32 values) or act_q8k (256 values). */
enum wt_act { WT_ACT_F32, WT_ACT_Q8_0, WT_ACT_Q8_K };

typedef struct wtype_info {
    uint32_t type;    /* enum ggml_type */
    const char *name; /* ggml's name: "f32", "q4_K", ... */
    int block_elems;  /* elements per block (1 for float types) */
    int block_bytes;  /* bytes per block */
    enum wt_act act;  /* activation format of the kernels */
    /* out[n] = the values of a row of n elements (n a multiple of block_elems) */
    void (*to_float)(const void *row, float *out, int64_t n);
    /* the reference quantiser: a row of n floats into n / block_elems blocks */
    void (*from_float)(const float *x, void *out, int64_t n);
} wtype_info;

/* The table's i-th row (i from 0), NULL past the end. */
const wtype_info *wtype_at(int i);
/* The row for a type, NULL for types this project does not know. */
const wtype_info *wtype_get(uint32_t type);
/* The type named `name` (case-insensitive: "q4_k" and "q4_K"): true and *type set, false for other names. */
bool wtype_from_name(const char *name, uint32_t *type);
/* "f32, f16, ..." : every type's name, for messages (a static string: WTYPE_NAMES). */
#define WTYPE_NAMES "f32, f16, bf16, q8_0, q4_0, q2_K, q3_K, q4_K, q5_K, q6_K"
const char *wtype_names(void);

/* Layout of ggml types: elements per block and bytes per block; false for types this project does not know. */
bool ggml_type_layout(uint32_t type, int *block_elems, int *block_bytes);
/* A name for any ggml type value ("unknown" for values it has never had). */
const char *ggml_type_name(uint32_t type);
/* Byte boundary a tensor of this type must start on for the kernels' in-place reads: the element size of float
 * types (4 for f32), 2 for block types (their f16 scales); 1 for unknown types. */
size_t ggml_type_align(uint32_t type);
/* Bytes of a row of n elements (n a multiple of the block size); 0 for unknown types. */
size_t ggml_row_bytes(uint32_t type, int64_t n);
/* The type a row of `cols` elements is stored in when `type` is asked for: `type` when cols is a multiple of its
 * block, else q8_0 (cols a multiple of 32) or f16 (as llama-quantize falls back for such tensors). */
uint32_t wtype_fit(uint32_t type, int64_t cols);
#endif
