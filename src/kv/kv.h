/* kv: the KV cache — per sequence and per layer, a prefix of positions [0, len) of roped K and V rows.
 * Layers keep their own length so that early-exit drafting can fill shallow layers ahead of deep ones.
 *
 * Memory follows the live tokens: the cells live in pages of page_cells consecutive cells taken from a pool shared
 * by all sequences. Page slot i of a sequence holds its cells [i * page_cells, (i + 1) * page_cells) in every layer.
 * A sequence holds the slots [0, n_pages): they are taken when it grows (kv_reserve) and given back to the pool
 * when it is cut (kv_release). Pages are mapped the first time the pool needs one (up to cap_pages), then kept
 * on a free list (their memory returned to the OS by kv_trim, mapped again when taken) until kv_free. */
#ifndef SD_KV_KV_H
#define SD_KV_KV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "specdec.h"

/* Cells per page: a multiple of the attention kernels' key block (32, att_mix) and of their 4-key score step, so
 * iterating a sequence page by page splits the keys where the kernels split them anyway. */
enum { KV_PAGE_CELLS = 64 };

typedef struct kv_cache {
    /* kv_type f16: K and V are stored as IEEE halves, every value written rounded to fp16 (llama.cpp's F16 cache,
     * half the memory of floats; the attention then uses att_f16.h); else as floats. */
    bool f16;
    size_t elem;      /* bytes per stored value: 2 (f16) or 4 (float) */
    int n_seq, n_layer, n_ctx, n_head_kv, head_dim, kv_dim; /* kv_dim = n_head_kv * head_dim */
    int page_cells;   /* cells per page: KV_PAGE_CELLS, or n_ctx when that is smaller */
    int max_pages;    /* page slots per sequence: ceil(n_ctx / page_cells) */
    int cap_pages;    /* most pages the pool may hold */
    int n_alloc;      /* pages malloc'd so far: ids [0, n_alloc) */
    int n_free;       /* allocated pages on the free list */
    size_t page_half; /* values of one page's K (or V): n_layer * n_head_kv * page_cells * head_dim */
    /* page memory, K then V, each [n_layer][n_head_kv][page_cells][head_dim] values of elem bytes: a KV head's rows
     * of a layer are contiguous (attention reads them in cell order as one stream) */
    unsigned char **page; /* [cap_pages] NULL until first needed (and after kv_trim, for free pages) */
    int *free_list;   /* [cap_pages] ids of free allocated pages (a stack) */
    int *table;       /* [n_seq][max_pages] page id of each slot a sequence holds */
    int *n_pages;     /* [n_seq] slots held */
    int *len;         /* [n_seq][n_layer] */
} kv_cache;

/* n_cells: the pool's capacity in cells over all sequences (rounded up to whole pages); 0 = n_seq * n_ctx.
 * f16: store halves (kv_type f16), else floats. */
sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int n_head_kv, int head_dim, int n_cells, bool f16,
                  sd_error *err);
void kv_free(kv_cache *kv);

static inline int *kv_len(const kv_cache *kv, int seq, int layer) { return &kv->len[seq * kv->n_layer + layer]; }
/* the longest layer of seq */
int kv_max_len(const kv_cache *kv, int seq);
static inline int kv_pages_for(const kv_cache *kv, int n_cells) {
    return (n_cells + kv->page_cells - 1) / kv->page_cells;
}
/* bytes from a K row to its V row */
static inline size_t kv_v_bytes(const kv_cache *kv) { return kv->page_half * kv->elem; }
/* K rows of (seq, page slot pg, layer, KV head h): [page_cells][head_dim] values (floats, or halves with f16); the
 * V rows are kv_v_bytes on */
static inline void *kv_page_rows(const kv_cache *kv, int seq, int pg, int layer, int h) {
    return kv->page[kv->table[seq * kv->max_pages + pg]] +
           ((size_t)layer * kv->n_head_kv + h) * kv->page_cells * kv->head_dim * kv->elem;
}
/* the K row of (seq, layer, KV head h, cell) (the cell's page must be held); V kv_v_bytes on */
static inline unsigned char *kv_row(const kv_cache *kv, int seq, int layer, int h, int cell) {
    return (unsigned char *)kv_page_rows(kv, seq, cell / kv->page_cells, layer, h) +
           (size_t)(cell % kv->page_cells) * kv->head_dim * kv->elem;
}

/* Makes seq hold the pages for cells [0, n_cells) (n_cells <= n_ctx). SD_ERR_NOMEM when the pool has not enough
 * pages left (or malloc fails); then seq holds what it held before. */
sd_status kv_reserve(kv_cache *kv, int seq, int n_cells, sd_error *err);
/* Gives the pages of seq beyond the first ones covering n_cells back to the pool (no length changes: the caller
 * makes sure no layer is longer than n_cells). */
void kv_release(kv_cache *kv, int seq, int n_cells);
/* Returns the memory of the pages on the free list to the OS (they keep their ids and are mapped again when
 * taken): e.g. when a server goes idle. Held pages are untouched. */
void kv_trim(kv_cache *kv);
/* pages held by sequences */
int kv_pages_used(const kv_cache *kv);

/* k[kv_dim], v[kv_dim] (all heads of one position, floats) into / out of a held cell (f16: rounded to halves on the
 * way in) */
void kv_write_cell(kv_cache *kv, int seq, int layer, int cell, const float *k, const float *v);
void kv_read_cell(const kv_cache *kv, int seq, int layer, int cell, float *k, float *v);

/* cuts every layer to n_pos and gives back the pages wholly at or past n_pos */
void kv_truncate(kv_cache *kv, int seq, int n_pos);
/* dst becomes a copy of src (its own pages); SD_ERR_NOMEM leaves dst as it was */
sd_status kv_copy_seq(kv_cache *kv, int src, int dst, sd_error *err);
/* In every layer: cell start + cells[i] moves to start + i (cells ascending, cells[i] >= i), then the layer is cut
 * to start + n (a layer that holds fewer cells keeps the moved ones it has); pages past start + n go back. */
void kv_keep(kv_cache *kv, int seq, int start, const int32_t *cells, int n);
#endif
