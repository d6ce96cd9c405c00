/* wmix: the weight type of each tensor a writer (gen-model, gen-model --embed) gives a file: one type for every
 * matrix, or one of llama.cpp's K-quant mixes (llama_tensor_get_type for the Llama tensors): "q4_k_m" and "q5_k_m"
 * are Q4_K / Q5_K with Q6_K for output.weight and for attn_v and ffn_down of the layers use_more_bits picks (the
 * first and the last eighth of the layers and every third layer between), as `llama-quantize ... Q4_K_M` writes
 * them (llama.cpp's Q6_K for token_embd.weight when a file has no output.weight does not arise: both writers write
 * one). */
#ifndef SD_MODEL_WMIX_H
#define SD_MODEL_WMIX_H
#include <stdbool.h>
#include <stdint.h>

typedef struct wmix {
    uint32_t base;  /* enum ggml_type of every other matrix */
    bool more_bits; /* the _M mixes' Q6_K tensors */
} wmix;

/* A type name (wtype_from_name) or a mix name (case-insensitive): true and *m set, false for other names. */
bool wmix_from_name(const char *name, wmix *m);
/* The names wmix_from_name takes, for messages ("f32, f16, ..., q4_K_M, q5_K_M": a static string). */
const char *wmix_names(void);
/* The type of matrix `tensor` (its GGUF name: "output.weight", "blk.3.attn_v.weight", ...) of a file with
 * n_layer layers, before wtype_fit. */
uint32_t wmix_type(const wmix *m, const char *tensor, int n_layer);
#endif
