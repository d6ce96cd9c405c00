/* kv: the KV cache — per sequence and per layer, a prefix of positions [0, len) of roped K and V rows.
 * Layers keep their own length so that early-exit drafting can fill shallow layers ahead of deep ones. */
#ifndef SD_KV_KV_H
#define SD_KV_KV_H
#include <stddef.h>

#include "specdec.h"

typedef struct kv_cache {
    int n_seq, n_layer, n_ctx, kv_dim;
    float *k, *v; /* [n_seq][n_layer][n_ctx][kv_dim] */
    int *len;     /* [n_seq][n_layer] */
} kv_cache;

sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int kv_dim, sd_error *err);
void kv_free(kv_cache *kv);

static inline size_t kv_offset(const kv_cache *kv, int seq, int layer, int cell) {
    return (((size_t)seq * kv->n_layer + layer) * kv->n_ctx + cell) * kv->kv_dim;
}
static inline int *kv_len(const kv_cache *kv, int seq, int layer) { return &kv->len[seq * kv->n_layer + layer]; }

void kv_truncate(kv_cache *kv, int seq, int n_pos);
void kv_copy_seq(kv_cache *kv, int src, int dst);
#endif
