#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int kv_dim, sd_error *err) {
    memset(kv, 0, sizeof *kv);
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
        size_t bytes = (size_t)n * kv->kv_dim * sizeof(float);
        memcpy(kv->k + kv_offset(kv, dst, l, 0), kv->k + kv_offset(kv, src, l, 0), bytes);
        memcpy(kv->v + kv_offset(kv, dst, l, 0), kv->v + kv_offset(kv, src, l, 0), bytes);
        *kv_len(kv, dst, l) = n;
    }
}
