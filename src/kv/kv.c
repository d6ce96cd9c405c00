#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int n_head_kv, int head_dim, sd_error *err) {
    memset(kv, 0, sizeof *kv);
    const int kv_dim = n_head_kv * head_dim;
    size_t n = (size_t)n_seq * n_layer * n_ctx * kv_dim;
    kv->k = malloc(n * sizeof(float));
    kv->v = malloc(n * sizeof(float));
    kv->len = calloc((size_t)n_seq * n_layer, sizeof(int));
    if (!kv->k || !kv->v || !kv->len) {
        kv_free(kv);
        return err_set(err, SD_ERR_NOMEM, "out of memory allocating a KV cache of %zu MiB (reduce the context size)",
                       2 * n * sizeof(float) >> 20);
    }
    kv->n_seq = n_seq;
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->kv_dim = kv_dim;
    return SD_OK;
}

void kv_free(kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->len);
    memset(kv, 0, sizeof *kv);
}

void kv_truncate(kv_cache *kv, int seq, int n_pos) {
    for (int l = 0; l < kv->n_layer; l++) {
        int *len = kv_len(kv, seq, l);
        if (*len > n_pos) *len = n_pos;
    }
}

void kv_copy_seq(kv_cache *kv, int src, int dst) {
    if (src == dst) return;
    for (int l = 0; l < kv->n_layer; l++) {
        int n = *kv_len(kv, src, l);
        size_t bytes = (size_t)n * kv->head_dim * sizeof(float);
        for (int h = 0; h < kv->n_head_kv; h++) {
            memcpy(kv->k + kv_head(kv, dst, l, h), kv->k + kv_head(kv, src, l, h), bytes);
            memcpy(kv->v + kv_head(kv, dst, l, h), kv->v + kv_head(kv, src, l, h), bytes);
        }
        *kv_len(kv, dst, l) = n;
    }
}

void kv_write_cell(kv_cache *kv, int seq, int layer, int cell, const float *k, const float *v) {
    const size_t hd = (size_t)kv->head_dim;
    for (int h = 0; h < kv->n_head_kv; h++) {
        size_t o = kv_head(kv, seq, layer, h) + (size_t)cell * hd;
        memcpy(kv->k + o, k + h * hd, hd * sizeof(float));
        memcpy(kv->v + o, v + h * hd, hd * sizeof(float));
    }
}

void kv_read_cell(const kv_cache *kv, int seq, int layer, int cell, float *k, float *v) {
    const size_t hd = (size_t)kv->head_dim;
    for (int h = 0; h < kv->n_head_kv; h++) {
        size_t o = kv_head(kv, seq, layer, h) + (size_t)cell * hd;
        if (k) memcpy(k + h * hd, kv->k + o, hd * sizeof(float));
        if (v) memcpy(v + h * hd, kv->v + o, hd * sizeof(float));
    }
}

void kv_keep(kv_cache *kv, int seq, int start, const int32_t *cells, int n) {
    const size_t hd = (size_t)kv->head_dim;
    for (int l = 0; l < kv->n_layer; l++) {
        int *len = kv_len(kv, seq, l), kept = 0;
        for (int i = 0; i < n && start + cells[i] < *len; i++, kept++) {
            if (cells[i] == i) continue;
            for (int h = 0; h < kv->n_head_kv; h++) {
                size_t o = kv_head(kv, seq, l, h);
                memmove(kv->k + o + (size_t)(start + i) * hd, kv->k + o + (size_t)(start + cells[i]) * hd, hd * sizeof(float));
                memmove(kv->v + o + (size_t)(start + i) * hd, kv->v + o + (size_t)(start + cells[i]) * hd, hd * sizeof(float));
            }
        }
        if (*len > start + kept) *len = start + kept;
    }
}
