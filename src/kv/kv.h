/* kv: the KV cache — per sequence and per layer, a prefix of positions [0, len) of roped K and V rows.
 * Layers keep their own length so that early-exit drafting can fill shallow layers ahead of deep ones. */
#ifndef SD_KV_KV_H
#define SD_KV_KV_H
#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

/* Each KV head's rows are contiguous (attention reads one head's keys in cell order as one stream). */
typedef struct kv_cache {
    int n_seq, n_layer, n_ctx, n_head_kv, head_dim, kv_dim; /* kv_dim = n_head_kv * head_dim */
    float *k, *v; /* [n_seq][n_layer][n_head_kv][n_ctx][head_dim] */
    int *len;     /* [n_seq][n_layer] */
} kv_cache;

sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int n_head_kv, int head_dim, sd_error *err);
void kv_free(kv_cache *kv);

/* offset of (seq, layer, KV head h, cell 0) in k and v: that head's rows follow, head_dim floats each */
static inline size_t kv_head(const kv_cache *kv, int seq, int layer, int h) {
    return (((size_t)seq * kv->n_layer + layer) * kv->n_head_kv + h) * kv->n_ctx * kv->head_dim;
}
/* k[kv_dim], v[kv_dim] (all heads of one position) into / out of a cell */
void kv_write_cell(kv_cache *kv, int seq, int layer, int cell, const float *k, const float *v);
void kv_read_cell(const kv_cache *kv, int seq, int layer, int cell, float *k, float *v);
static inline int *kv_len(const kv_cache *kv, int seq, int layer) { return &kv->len[seq * kv->n_layer + layer]; }

void kv_truncate(kv_cache *kv, int seq, int n_pos);
void kv_copy_seq(kv_cache *kv, int src, int dst);
/* In every layer: cell start + cells[i] moves to start + i (cells ascending, cells[i] >= i), then the layer is cut
 * to start + n (a layer that holds fewer cells keeps the moved ones it has). */
void kv_keep(kv_cache *kv, int seq, int start, const int32_t *cells, int n);
#endif
