#define _DEFAULT_SOURCE
#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/err.h"
#include "util/fp16.h"

sd_status kv_init(kv_cache *kv, int n_seq, int n_layer, int n_ctx, int n_head_kv, int head_dim, int n_cells, bool f16,
                  sd_error *err) {
    memset(kv, 0, sizeof *kv);
    kv->f16 = f16;
    kv->elem = f16 ? sizeof(uint16_t) : sizeof(float);
    kv->n_seq = n_seq;
    kv->n_layer = n_layer;
    kv->n_ctx = n_ctx;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->kv_dim = n_head_kv * head_dim;
    kv->page_cells = n_ctx < KV_PAGE_CELLS ? (n_ctx > 0 ? n_ctx : 1) : KV_PAGE_CELLS;
    kv->max_pages = kv_pages_for(kv, n_ctx);
    const long long full = (long long)n_seq * kv->max_pages; /* every sequence at n_ctx: never more is needed */
    long long cap = n_cells > 0 ? kv_pages_for(kv, n_cells) : full;
    kv->cap_pages = (int)(cap < full ? cap : full);
    kv->page_half = (size_t)n_layer * n_head_kv * kv->page_cells * head_dim;
    kv->page = calloc((size_t)kv->cap_pages, sizeof *kv->page);
    kv->free_list = malloc((size_t)kv->cap_pages * sizeof *kv->free_list);
    kv->table = malloc((size_t)full * sizeof *kv->table);
    kv->n_pages = calloc((size_t)n_seq, sizeof *kv->n_pages);
    kv->len = calloc((size_t)n_seq * n_layer, sizeof *kv->len);
    if (!kv->page || !kv->free_list || !kv->table || !kv->n_pages || !kv->len) {
        kv_free(kv);
        return err_set(err, SD_ERR_NOMEM, "out of memory allocating the KV page tables");
    }
    return SD_OK;
}

/* Page memory is mapped (anonymous), not malloc'd, so a trimmed page goes back to the OS at once. */
static unsigned char *page_map(const kv_cache *kv) {
    void *p = mmap(NULL, 2 * kv_v_bytes(kv), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
static void page_unmap(const kv_cache *kv, unsigned char *p) {
    if (p) munmap(p, 2 * kv_v_bytes(kv));
}

void kv_free(kv_cache *kv) {
    for (int i = 0; i < kv->n_alloc; i++) page_unmap(kv, kv->page[i]);
    free(kv->page);
    free(kv->free_list);
    free(kv->table);
    free(kv->n_pages);
    free(kv->len);
    memset(kv, 0, sizeof *kv);
}

int kv_max_len(const kv_cache *kv, int seq) {
    int mx = 0;
    for (int l = 0; l < kv->n_layer; l++)
        if (*kv_len(kv, seq, l) > mx) mx = *kv_len(kv, seq, l);
    return mx;
}

int kv_pages_used(const kv_cache *kv) { return kv->n_alloc - kv->n_free; }

/* a page from the free list, else a new one while the cap allows; -1 when neither */
static int page_take(kv_cache *kv) {
    if (kv->n_free > 0) {
        int id = kv->free_list[kv->n_free - 1];
        if (!kv->page[id] && !(kv->page[id] = page_map(kv))) return -1; /* trimmed: mapped again */
        kv->n_free--;
        return id;
    }
    if (kv->n_alloc >= kv->cap_pages) return -1;
    unsigned char *p = page_map(kv);
    if (!p) return -1;
    kv->page[kv->n_alloc] = p;
    return kv->n_alloc++;
}

void kv_trim(kv_cache *kv) {
    for (int i = 0; i < kv->n_free; i++) {
        int id = kv->free_list[i];
        page_unmap(kv, kv->page[id]);
        kv->page[id] = NULL;
    }
}

sd_status kv_reserve(kv_cache *kv, int seq, int n_cells, sd_error *err) {
    const int need = kv_pages_for(kv, n_cells), had = kv->n_pages[seq];
    if (need <= had) return SD_OK;
    const int avail = kv->n_free + kv->cap_pages - kv->n_alloc;
    if (need - had > avail)
        return err_set(err, SD_ERR_NOMEM,
                       "KV pool exhausted: sequence %d needs %d more pages of %d cells, %d of the pool's %d are free "
                       "(raise n_kv_cells or free other sequences)",
                       seq, need - had, kv->page_cells, avail, kv->cap_pages);
    int *slots = kv->table + (size_t)seq * kv->max_pages;
    for (int i = had; i < need; i++) {
        int id = page_take(kv);
        if (id < 0) {
            kv_release(kv, seq, had * kv->page_cells);
            return err_set(err, SD_ERR_NOMEM, "out of memory allocating a KV page of %zu KiB",
                           2 * kv_v_bytes(kv) >> 10);
        }
        slots[i] = id;
        kv->n_pages[seq] = i + 1;
    }
    return SD_OK;
}

void kv_release(kv_cache *kv, int seq, int n_cells) {
    if (n_cells > kv->n_ctx) n_cells = kv->n_ctx;
    const int keep = kv_pages_for(kv, n_cells);
    const int *slots = kv->table + (size_t)seq * kv->max_pages;
    while (kv->n_pages[seq] > keep) kv->free_list[kv->n_free++] = slots[--kv->n_pages[seq]];
}

void kv_truncate(kv_cache *kv, int seq, int n_pos) {
    for (int l = 0; l < kv->n_layer; l++) {
        int *len = kv_len(kv, seq, l);
        if (*len > n_pos) *len = n_pos;
    }
    kv_release(kv, seq, n_pos);
}

/* the first n rows of every KV head of one layer, K and V, from src's page slot pg to dst's */
static void copy_page_rows(kv_cache *kv, int src, int dst, int pg, int layer, int n) {
    const size_t bytes = (size_t)n * kv->head_dim * kv->elem, vb = kv_v_bytes(kv);
    for (int h = 0; h < kv->n_head_kv; h++) {
        const unsigned char *s = kv_page_rows(kv, src, pg, layer, h);
        unsigned char *d = kv_page_rows(kv, dst, pg, layer, h);
        memcpy(d, s, bytes);
        memcpy(d + vb, s + vb, bytes);
    }
}

sd_status kv_copy_seq(kv_cache *kv, int src, int dst, sd_error *err) {
    if (src == dst) return SD_OK;
    const int n = kv_max_len(kv, src);
    sd_status st = kv_reserve(kv, dst, n, err);
    if (st) return st;
    kv_release(kv, dst, n);
    const int P = kv->page_cells;
    for (int l = 0; l < kv->n_layer; l++) {
        const int len = *kv_len(kv, src, l);
        for (int pg = 0; pg * P < len; pg++) copy_page_rows(kv, src, dst, pg, l, len - pg * P < P ? len - pg * P : P);
        *kv_len(kv, dst, l) = len;
    }
    return SD_OK;
}

void kv_write_cell(kv_cache *kv, int seq, int layer, int cell, const float *k, const float *v) {
    const size_t hd = (size_t)kv->head_dim, vb = kv_v_bytes(kv);
    for (int h = 0; h < kv->n_head_kv; h++) {
        unsigned char *r = kv_row(kv, seq, layer, h, cell);
        const float *kh = k + h * hd, *vh = v + h * hd;
        if (kv->f16) {
            uint16_t *rk = (uint16_t *)(void *)r, *rv = (uint16_t *)(void *)(r + vb);
            for (size_t e = 0; e < hd; e++) rk[e] = f32_to_fp16(kh[e]), rv[e] = f32_to_fp16(vh[e]);
        } else {
            memcpy(r, kh, hd * sizeof(float));
            memcpy(r + vb, vh, hd * sizeof(float));
        }
    }
}

void kv_read_cell(const kv_cache *kv, int seq, int layer, int cell, float *k, float *v) {
    const size_t hd = (size_t)kv->head_dim, vb = kv_v_bytes(kv);
    for (int h = 0; h < kv->n_head_kv; h++) {
        const unsigned char *r = kv_row(kv, seq, layer, h, cell);
        if (kv->f16) {
            const uint16_t *rk = (const uint16_t *)(const void *)r, *rv = (const uint16_t *)(const void *)(r + vb);
            for (size_t e = 0; e < hd && k; e++) k[h * hd + e] = fp16_to_f32(rk[e]);
            for (size_t e = 0; e < hd && v; e++) v[h * hd + e] = fp16_to_f32(rv[e]);
        } else {
            if (k) memcpy(k + h * hd, r, hd * sizeof(float));
            if (v) memcpy(v + h * hd, r + vb, hd * sizeof(float));
        }
    }
}

void kv_keep(kv_cache *kv, int seq, int start, const int32_t *cells, int n) {
    const size_t bytes = (size_t)kv->head_dim * kv->elem, vb = kv_v_bytes(kv);
    for (int l = 0; l < kv->n_layer; l++) {
        int *len = kv_len(kv, seq, l), kept = 0;
        for (int i = 0; i < n && start + cells[i] < *len; i++, kept++) {
            if (cells[i] == i) continue;
            for (int h = 0; h < kv->n_head_kv; h++) { /* distinct cells: the rows do not overlap */
                unsigned char *d = kv_row(kv, seq, l, h, start + i);
                const unsigned char *s = kv_row(kv, seq, l, h, start + cells[i]);
                memcpy(d, s, bytes);
                memcpy(d + vb, s + vb, bytes);
            }
        }
        if (*len > start + kept) *len = start + kept;
    }
    kv_release(kv, seq, start + n);
}
