#define _POSIX_C_SOURCE 200809L
#include "forward/forward.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/att_f16.h"
#include "kernels/kquant.h"
#include "model/exit_heads.h"
#include "util/err.h"

/* ------------------------------------------------------------------ matmul over the pool */
/* Work below this many multiply-adds runs on the calling thread: waking the pool costs more than it saves.
 * (Results do not depend on the thread split, so this never changes any bits.) */
enum { PAR_MIN_WORK = 1 << 17 };
typedef struct mm_item {
    kern_mm_fn fn;
    const tensor *w;
    const void *x;
    size_t x_stride;
    float *y;
    int ldy;
} mm_item;

/* Rows are handed out in chunks from a shared counter (over all items of the job), so a thread slowed by the host
 * or by a longer item takes fewer chunks instead of making the other wait at the end. A chunk is a multiple of
 * MM_CHUNK_ALIGN rows and about MM_CHUNK_BYTES of contiguous weights, but at most 1/n_threads of the matrix so that
 * small matrices still split evenly. Each chunk starts a new stream that the prefetchers must pick up (its first row
 * group is not prefetched by the kernel): 1 MiB chunks measured ~3% faster f16 blocks of 8 than 256 KiB. */
enum { MM_CHUNK_BYTES = 1024 << 10, MM_CHUNK_ALIGN = 12 }; /* 12: whole row groups of the kernels (2, 3 or 4 rows) */
static int mm_chunk_rows(const tensor *w, int nth) {
    const size_t a = MM_CHUNK_ALIGN;
    size_t r = (MM_CHUNK_BYTES / w->row_bytes + a - 1) / a * a;
    size_t cap = (((size_t)w->rows + (size_t)nth - 1) / (size_t)nth + a - 1) / a * a;
    if (r > cap) r = cap;
    return r < a ? (int)a : (int)r;
}
typedef struct mm_job {
    mm_item it[3];
    int n_it, n;
    int chunk_rows[3]; /* rows per chunk of each item */
    int chunk_end[3];  /* cumulative chunk counts per item */
    atomic_int next;  /* next chunk to claim */
} mm_job;

static void mm_worker(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    mm_job *j = arg;
    const int total = j->chunk_end[j->n_it - 1];
    for (;;) {
        int ch = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (ch >= total) break;
        int i = 0;
        while (ch >= j->chunk_end[i]) i++;
        const mm_item *m = &j->it[i];
        int r0 = (ch - (i ? j->chunk_end[i - 1] : 0)) * j->chunk_rows[i];
        int r1 = r0 + j->chunk_rows[i] < (int)m->w->rows ? r0 + j->chunk_rows[i] : (int)m->w->rows;
        m->fn(m->w->data, m->w->row_bytes, (int)m->w->cols, m->x, m->x_stride, j->n, m->y, m->ldy, r0, r1);
    }
}

static void run_par(sd_ctx *c, pool_fn fn, void *arg, double work) {
    if (work < c->par_min_work) fn(arg, 0, 1);
    else pool_run(c->pool, fn, arg);
}

/* Quantizing x[n][ldx] (cols values each) to the formats asked for: xq [n][cols/32], xk [n][cols/256] (NULL when not
 * needed); each thread takes a contiguous share of the positions. */
typedef struct quant_job {
    const kern_ops *ops;
    const float *x;
    int ldx, cols, n;
    act_q8 *xq;
    act_q8k *xk;
} quant_job;

static void quant_worker(void *arg, int ith, int nth) {
    const quant_job *q = arg;
    int p0, p1;
    pool_split(q->n, ith, nth, &p0, &p1);
    const int nq = q->cols / 32, nk = q->cols / QK_K;
    for (int p = p0; p < p1; p++) {
        if (q->xq) q->ops->quantize_q8(q->x + (size_t)p * q->ldx, q->cols, q->xq + (size_t)p * nq);
        if (q->xk) q->ops->quantize_q8k(q->x + (size_t)p * q->ldx, q->cols, q->xk + (size_t)p * nk);
    }
}

/* run_par's work units per quantized value: with PAR_MIN_WORK, blocks of 16+ positions of a 2048-wide input go to
 * the pool (quantizing them takes 15-30 us on one thread, 0.45-0.85 ns per value; a dispatch costs a few us), decode
 * and short blocks stay on the calling thread. */
enum { QUANT_WORK_PER_VALUE = 4 };

/* Several matmuls sharing one input (e.g. Q, K, V) in one pool dispatch. The input is first quantized to each
 * format the weight types ask for, once for all the matrices, its positions split over the pool when there are
 * enough of them (the bytes do not depend on which thread quantizes a position). */
static void matmul_multi(sd_ctx *c, const float *x, int ldx, int n, int count, const tensor *const *w, float *const *y,
                         const int *ldy) {
    mm_job j = {.n_it = count, .n = n};
    int cols = (int)w[0]->cols;
    /* the activations in each format a weight type asks for (wtype's act), quantized once for all the matrices */
    bool need[3] = {false, false, false};
    for (int i = 0; i < count; i++) need[wtype_get(w[i]->type)->act] = true;
    size_t qstride = (size_t)(cols / 32) * sizeof(act_q8), kstride = (size_t)(cols / QK_K) * sizeof(act_q8k);
    if (need[WT_ACT_Q8_0] || need[WT_ACT_Q8_K]) {
        quant_job q = {c->ops, x, ldx, cols, n, need[WT_ACT_Q8_0] ? c->xq : NULL, need[WT_ACT_Q8_K] ? c->xk : NULL};
        double qwork = (double)n * cols * QUANT_WORK_PER_VALUE * (need[WT_ACT_Q8_0] + need[WT_ACT_Q8_K]);
        run_par(c, quant_worker, &q, qwork);
    }
    double work = 0;
    for (int i = 0; i < count; i++) {
        const void *xi = x;
        size_t xs = (size_t)ldx * sizeof(float);
        switch (wtype_get(w[i]->type)->act) {
        case WT_ACT_Q8_0: xi = c->xq, xs = qstride; break;
        case WT_ACT_Q8_K: xi = c->xk, xs = kstride; break;
        case WT_ACT_F32: break;
        }
        j.it[i] = (mm_item){c->ops->mm[w[i]->type], w[i], xi, xs, y[i], ldy[i]};
        work += (double)w[i]->rows * (double)w[i]->cols * n;
        j.chunk_rows[i] = mm_chunk_rows(w[i], pool_size(c->pool));
        int chunks = (int)((w[i]->rows + j.chunk_rows[i] - 1) / j.chunk_rows[i]);
        j.chunk_end[i] = (i ? j.chunk_end[i - 1] : 0) + chunks;
    }
    atomic_init(&j.next, 0);
    run_par(c, mm_worker, &j, work);
}

void fwd_matmul(sd_ctx *c, const tensor *w, const float *x, int ldx, int n, float *y, int ldy) {
    matmul_multi(c, x, ldx, n, 1, &w, &y, &ldy);
}


/* cos/sin table for every position of the context (computed once; the same values every call), as ggml's CPU rope
 * computes them (ggml_rope_cache_init): theta starts at the position as a float and is multiplied by
 * theta_scale = powf(base, -2 / head_dim) per pair, then cosf, sinf. */
static void rope_table(float *cs, int n_ctx, int hd, float base) {
    const float theta_scale = powf(base, -2.0f / (float)hd);
    for (int p = 0; p < n_ctx; p++) {
        float theta = (float)p;
        for (int i = 0; i < hd / 2; i++) {
            cs[((size_t)p * (hd / 2) + i) * 2] = cosf(theta);
            cs[((size_t)p * (hd / 2) + i) * 2 + 1] = sinf(theta);
            theta *= theta_scale;
        }
    }
}

/* ------------------------------------------------------------------ context */
sd_ctx_params sd_ctx_default_params(void) {
    sd_ctx_params p = {.n_ctx = 0, .n_seq = 1, .n_batch = 64, .n_threads = 0, .n_kv_cells = 0, .kv_type = SD_KV_F32};
    return p;
}

void sd_ctx_free(sd_ctx *c) {
    if (!c) return;
    pool_free(c->pool);
    kv_free(&c->kv);
    void *bufs[] = {c->x, c->xn, c->q, c->k, c->v, c->gate, c->up, c->tmp, c->xq, c->xk, c->scores,
                    c->cell, c->base, c->chain, c->par, c->seqs, c->poss, c->anc, c->seen, c->held, c->rope_cs, c->att16};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

sd_status sd_ctx_new(const sd_model *m, const sd_ctx_params *params, sd_ctx **out, sd_error *err) {
    if (!out) return err_set(err, SD_ERR_ARG, "sd_ctx_new: out is NULL");
    *out = NULL;
    if (!m) return err_set(err, SD_ERR_ARG, "sd_ctx_new: model is NULL");
    sd_ctx_params p = params ? *params : sd_ctx_default_params();
    /* one message per parameter, naming it and its range (the CLI's flags say the same names in their help) */
    if (p.n_ctx < 0) return err_set(err, SD_ERR_ARG, "context size (n_ctx) %d is negative", p.n_ctx);
    if (p.n_seq < 1 || p.n_seq > 256)
        return err_set(err, SD_ERR_ARG, "sequences per context (n_seq) %d is out of range: 1..256", p.n_seq);
    if (p.n_batch < 1 || p.n_batch > SD_MAX_BATCH)
        return err_set(err, SD_ERR_ARG, "block size (n_batch) %d is out of range: a forward call takes 1..%d positions",
                       p.n_batch, SD_MAX_BATCH);
    if (p.n_threads < 0 || p.n_threads > 512)
        return err_set(err, SD_ERR_ARG, "thread count %d is out of range: 0 (all CPUs) .. 512", p.n_threads);
    if (p.n_kv_cells < 0) return err_set(err, SD_ERR_ARG, "KV pool size (n_kv_cells) %d is negative", p.n_kv_cells);
    if (p.kv_type != SD_KV_F32 && p.kv_type != SD_KV_F16)
        return err_set(err, SD_ERR_ARG, "KV cache type (kv_type) %d is not one of SD_KV_F32 (0), SD_KV_F16 (1)", p.kv_type);
    const hparams *hp = &m->hp;
    if (p.kv_type == SD_KV_F16 && hp->head_dim > ATT_F16_MAX_HD)
        return err_set(err, SD_ERR_ARG, "KV cache type f16 takes head sizes up to %d (this model: %d)", ATT_F16_MAX_HD,
                       hp->head_dim);
    if (p.n_ctx == 0 && hp->n_ctx_train > SD_MAX_CTX)
        return err_set(err, SD_ERR_ARG,
                       "%s: the model's training context (context_length %d) is more than the %d positions a context "
                       "supports: ask for a smaller context (n_ctx; -c N on the command line)",
                       m->path ? m->path : "model", hp->n_ctx_train, SD_MAX_CTX);
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train;
    if (p.n_ctx > SD_MAX_CTX)
        return err_set(err, SD_ERR_ARG, "context size (n_ctx) %d is more than the %d positions a context supports",
                       p.n_ctx, SD_MAX_CTX);
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n > 0 ? (int)n : 1;
    }
    sd_ctx *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, SD_ERR_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    c->n_threads = p.n_threads;
    c->ops = kern_best();
    /* SPECDEC_PAR_MIN_WORK overrides the inline threshold (tests set 0 to exercise every thread split) */
    const char *pm = getenv("SPECDEC_PAR_MIN_WORK");
    c->par_min_work = pm ? atof(pm) : PAR_MIN_WORK;
    const size_t B = (size_t)p.n_batch, E = (size_t)hp->n_embd, Q = (size_t)hp->n_head * hp->head_dim,
                 KV = (size_t)hp->n_head_kv * hp->head_dim, F = (size_t)hp->n_ff;
    size_t EQ = E > Q ? E : Q, maxc = EQ > F ? EQ : F;
    sd_status st = kv_init(&c->kv, p.n_seq, hp->n_layer, p.n_ctx, hp->n_head_kv, hp->head_dim, p.n_kv_cells,
                           p.kv_type == SD_KV_F16, err);
    if (st) {
        free(c);
        return st;
    }
    if (c->kv.f16 && !(c->att16 = malloc((size_t)p.n_threads * sizeof *c->att16))) {
        sd_ctx_free(c);
        return err_set(err, SD_ERR_NOMEM, "out of memory allocating the attention state");
    }
    c->x = malloc(B * E * sizeof(float));
    c->xn = malloc(B * EQ * sizeof(float));
    c->q = malloc(B * Q * sizeof(float));
    c->k = malloc(B * KV * sizeof(float));
    c->v = malloc(B * KV * sizeof(float));
    c->gate = malloc(B * F * sizeof(float));
    c->up = malloc(B * F * sizeof(float));
    c->tmp = malloc(B * E * sizeof(float));
    c->xq = malloc(B * (maxc / 32 + 1) * sizeof(act_q8));
    c->xk = malloc(B * (maxc / QK_K + 1) * sizeof(act_q8k));
    c->scores = malloc((size_t)p.n_threads * (size_t)(hp->n_head / hp->n_head_kv) * ((size_t)p.n_ctx + B) * sizeof(float));
    c->cell = malloc(B * sizeof(int));
    c->base = malloc(B * sizeof(int));
    c->chain = malloc(B * sizeof(int));
    c->par = malloc(B * sizeof(int));
    c->seqs = malloc(B * sizeof(int));
    c->poss = malloc(B * sizeof(int));
    c->anc = malloc((size_t)p.n_threads * 2 * B * sizeof(int));
    c->seen = malloc((size_t)p.n_seq * sizeof(int));
    c->held = malloc((size_t)p.n_seq * sizeof(int));
    c->rope_cs = malloc((size_t)p.n_ctx * hp->head_dim * sizeof(float));
    c->pool = pool_new(p.n_threads);
    if (!c->x || !c->xn || !c->q || !c->k || !c->v || !c->gate || !c->up || !c->tmp || !c->xq || !c->xk || !c->scores ||
        !c->cell || !c->base || !c->chain || !c->par || !c->seqs || !c->poss || !c->anc || !c->seen || !c->held || !c->rope_cs || !c->pool) {
        sd_ctx_free(c);
        return err_set(err, SD_ERR_NOMEM, "out of memory allocating context buffers (n_batch %d, n_ctx %d)", p.n_batch,
                       p.n_ctx);
    }
    rope_table(c->rope_cs, p.n_ctx, hp->head_dim, hp->rope_base);
    *out = c;
    return SD_OK;
}

int sd_ctx_n_ctx(const sd_ctx *c) { return c->n_ctx; }
int sd_ctx_n_seq(const sd_ctx *c) { return c->kv.n_seq; }
int sd_ctx_n_batch(const sd_ctx *c) { return c->n_batch; }
int sd_ctx_n_threads(const sd_ctx *c) { return c->n_threads; }
uint64_t sd_ctx_layer_passes(const sd_ctx *c) { return c->layer_passes; }
const sd_model *sd_ctx_model(const sd_ctx *c) { return c->m; }

/* ------------------------------------------------------------------ KV API */
int sd_kv_len(const sd_ctx *c, int seq, int layer) {
    if (!c || seq < 0 || seq >= c->kv.n_seq || layer < -1 || layer >= c->kv.n_layer) return -1;
    if (layer >= 0) return *kv_len(&c->kv, seq, layer);
    int mn = *kv_len(&c->kv, seq, 0);
    for (int l = 1; l < c->kv.n_layer; l++)
        if (*kv_len(&c->kv, seq, l) < mn) mn = *kv_len(&c->kv, seq, l);
    return mn;
}

sd_status sd_kv_truncate(sd_ctx *c, int seq, int n_pos, sd_error *err) {
    if (!c || seq < 0 || seq >= c->kv.n_seq || n_pos < 0)
        return err_set(err, SD_ERR_ARG, "sd_kv_truncate: invalid sequence %d or position %d", seq, n_pos);
    kv_truncate(&c->kv, seq, n_pos);
    return SD_OK;
}

sd_status sd_kv_copy_seq(sd_ctx *c, int src, int dst, sd_error *err) {
    if (!c || src < 0 || dst < 0 || src >= c->kv.n_seq || dst >= c->kv.n_seq)
        return err_set(err, SD_ERR_ARG, "sd_kv_copy_seq: invalid sequences %d -> %d (context has %d)", src, dst,
                       c ? c->kv.n_seq : 0);
    return kv_copy_seq(&c->kv, src, dst, err);
}

sd_status sd_kv_reserve(sd_ctx *c, int seq, int n_more, sd_error *err) {
    if (!c || seq < 0 || seq >= c->kv.n_seq || n_more < 0)
        return err_set(err, SD_ERR_ARG, "sd_kv_reserve: invalid sequence %d or count %d", seq, n_more);
    const int len = kv_max_len(&c->kv, seq);
    if (n_more > c->n_ctx - len)
        return err_set(err, SD_ERR_CTX_FULL, "sequence %d: %d cached + %d more positions exceed the context (%d)", seq,
                       len, n_more, c->n_ctx);
    return kv_reserve(&c->kv, seq, len + n_more, err);
}

void sd_kv_pool_usage(const sd_ctx *c, int *cells_used, int *cells_capacity) {
    if (cells_used) *cells_used = c ? kv_pages_used(&c->kv) * c->kv.page_cells : 0;
    if (cells_capacity) *cells_capacity = c ? c->kv.cap_pages * c->kv.page_cells : 0;
}

void sd_ctx_trim(sd_ctx *c) {
    if (c) kv_trim(&c->kv);
}

int sd_kv_page_cells(const sd_ctx *c) { return c ? c->kv.page_cells : 0; }

sd_status sd_kv_keep(sd_ctx *c, int seq, int start, const int32_t *cells, int n, sd_error *err) {
    if (!c || seq < 0 || seq >= c->kv.n_seq || start < 0 || n < 0 || (n > 0 && !cells))
        return err_set(err, SD_ERR_ARG, "sd_kv_keep: invalid sequence %d, start %d or count %d", seq, start, n);
    for (int i = 0; i < n; i++)
        if (cells[i] < i || (i > 0 && cells[i] <= cells[i - 1]) || start + cells[i] >= c->n_ctx)
            return err_set(err, SD_ERR_ARG, "sd_kv_keep: cell list must ascend from >= its index (entry %d: %d)", i, cells[i]);
    kv_keep(&c->kv, seq, start, cells, n);
    return SD_OK;
}

sd_status sd_kv_read(const sd_ctx *c, int seq, int layer, int pos, float *k_out, float *v_out, sd_error *err) {
    if (!c || seq < 0 || seq >= c->kv.n_seq || layer < 0 || layer >= c->kv.n_layer || pos < 0 ||
        pos >= *kv_len(&c->kv, seq, layer))
        return err_set(err, SD_ERR_ARG, "sd_kv_read: no cached position %d in layer %d of sequence %d", pos, layer, seq);
    kv_read_cell(&c->kv, seq, layer, pos, k_out, v_out);
    return SD_OK;
}

/* ------------------------------------------------------------------ the layer pieces */
static void rope(float *x, int n_heads, int hd, const float *cs_pos, rope_kind kind) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * hd;
        for (int i = 0; i < hd / 2; i++) {
            float cs = cs_pos[2 * i], sn = cs_pos[2 * i + 1];
            int a = kind == ROPE_KIND_NORM ? 2 * i : i, b = kind == ROPE_KIND_NORM ? 2 * i + 1 : i + hd / 2;
            float x0 = v[a], x1 = v[b];
            /* ggml's rotate_pairs as llama.cpp's build computes it (contracted: one fma each) */
            v[a] = fmaf(x0, cs, -(x1 * sn));
            v[b] = fmaf(x0, sn, x1 * cs);
        }
    }
}

/* A run of visible cells that share a page: scores [j0, j0 + n) of the score rows; k the page's K rows of the KV
 * head ([page_cells][hd] floats, or halves with kv_type f16; the V rows kv_v_bytes on); cells page-relative (NULL:
 * consecutive from row 0). */
typedef struct att_run {
    const unsigned char *k;
    const int *cells;
    int n;
} att_run;

/* The run starting at visible cell j0: the prefix [0, prefix) page by page (j0 is then a page start), then the
 * ancestors' cells anc[n_anc] (ascending) in runs on one page, made page-relative in rel. Returns false past the
 * end. In order, the runs give the keys in the order of one call over all visible cells. */
static bool att_next_run(const kv_cache *kv, int s, int layer, int kvh, int prefix, const int *anc, int *rel,
                         int n_anc, int j0, att_run *r) {
    const int P = kv->page_cells;
    if (j0 < prefix) {
        *r = (att_run){kv_page_rows(kv, s, j0 / P, layer, kvh), NULL, prefix - j0 < P ? prefix - j0 : P};
        return true;
    }
    const int a = j0 - prefix;
    if (a >= n_anc) return false;
    const int pg = anc[a] / P;
    int e = a;
    for (; e < n_anc && anc[e] / P == pg; e++) rel[e] = anc[e] - pg * P;
    *r = (att_run){kv_page_rows(kv, s, pg, layer, kvh), rel + a, e - a};
    return true;
}

typedef struct att_job {
    sd_ctx *c;
    int n, layer;
    int hs; /* query heads per task (a divisor of the heads per KV head) */
} att_job;

enum { ATT_MAX_HEADS = 64 }; /* query heads per task at most */

/* One task = one entry x hs query heads sharing a KV head: the keys and values are read from memory once per task
 * and reused from L1 by its heads (the attention kernels take several heads per call). Per head: scores over the
 * visible cells in ascending cell order, softmax, weighted sum of the values; each head's results are the same
 * whatever hs is or which thread runs it. */
static void att_worker(void *arg, int ith, int nth) {
    const att_job *j = arg;
    sd_ctx *c = j->c;
    const hparams *hp = &c->m->hp;
    const int H = hp->n_head, hd = hp->head_dim, grp = hp->n_head / hp->n_head_kv, hs = j->hs;
    const int Q = H * hd, per_entry = H / hs;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t ss = (size_t)c->n_ctx + c->n_batch;                   /* stride of a head's scores */
    float *sc = c->scores + (size_t)ith * (size_t)grp * ss;            /* [hs][ss] */
    int *anc = c->anc + (size_t)ith * 2 * c->n_batch; /* [B] ancestors' cells */
    int *rel = anc + c->n_batch;                       /* [B] the same, page-relative */
    const kv_cache *kv = &c->kv;
    const size_t vb = kv_v_bytes(kv);
    /* tasks dealt round-robin: later entries of a causal block see more cells, so contiguous ranges would give the
     * last thread most of a prefill's work */
    for (int t = ith; t < j->n * per_entry; t += nth) {
        int i = t / per_entry, h0 = (t % per_entry) * hs, kvh = h0 / grp, s = c->seqs[i];
        /* visible cells: [0, prefix) then the listed extras (ascending) */
        int prefix, n_anc = 0;
        if (c->par[i] == -2) { /* chain entry: everything up to its own cell */
            prefix = c->cell[i] + 1;
        } else {
            prefix = c->view_len > 0 && c->view_len < c->base[i] ? c->view_len : c->base[i];
            for (int a = i; a >= 0; a = c->par[a]) n_anc++;
            int r = n_anc; /* ancestors' cells, ascending (the walk meets them newest first) */
            for (int a = i; a >= 0; a = c->par[a]) anc[--r] = c->cell[a];
        }
        int n_vis = prefix + n_anc;
        const float *q = c->q + (size_t)i * Q + (size_t)h0 * hd; /* [hs][hd] */
        float *o = c->xn + (size_t)i * Q + (size_t)h0 * hd;      /* [hs][hd] */
        /* sc[g][n_vis]: scores of the visible cells, [0, prefix) then the ancestors, a page's run at a time (each
         * score is its own dot; each o element one chain over the keys in order: the bits of one call) */
        att_run r;
        if (kv->f16) { /* llama.cpp's arithmetic over an fp16 cache (att_f16.h), one head at a time */
            att_f16_state *st = c->att16 + ith;
            for (int g = 0; g < hs; g++) {
                att_f16_begin(st, q + (size_t)g * hd, hd);
                for (int j0 = 0; att_next_run(kv, s, j->layer, kvh, prefix, anc, rel, n_anc, j0, &r); j0 += r.n)
                    att_f16_run(st, (const uint16_t *)(const void *)r.k, (const uint16_t *)(const void *)(r.k + vb),
                                (size_t)hd, r.cells, r.n, hd, scale);
                att_f16_end(st, hd, o + (size_t)g * hd);
            }
            continue;
        }
        for (int j0 = 0; att_next_run(kv, s, j->layer, kvh, prefix, anc, rel, n_anc, j0, &r); j0 += r.n)
            c->ops->att_scores(q, hs, (const float *)(const void *)r.k, (size_t)hd, r.cells, r.n, hd, scale, sc + j0, ss);
        float inv[ATT_MAX_HEADS];
        for (int g = 0; g < hs; g++) inv[g] = 1.0f / c->ops->softmax(sc + g * ss, n_vis);
        for (int e = 0; e < hs * hd; e++) o[e] = 0.0f;
        for (int j0 = 0; att_next_run(kv, s, j->layer, kvh, prefix, anc, rel, n_anc, j0, &r); j0 += r.n)
            c->ops->att_mix(o, hs, sc + j0, ss, (const float *)(const void *)(r.k + vb), (size_t)hd, r.cells, r.n, hd);
        for (int g = 0; g < hs; g++)
            for (int e = 0; e < hd; e++) o[(size_t)g * hd + e] *= inv[g];
    }
}

/* Query heads per attention task: all the heads of a KV head, halved while that leaves fewer than 4 tasks per
 * thread (decode of a model with few KV heads); then the largest divisor of the group up to ATT_MAX_HEADS. */
static int att_heads_per_task(const sd_ctx *c, int n) {
    const hparams *hp = &c->m->hp;
    const int grp = hp->n_head / hp->n_head_kv, nth = pool_size(c->pool);
    int hs = grp;
    while (hs % 2 == 0 && n * (hp->n_head / hs) < 4 * nth) hs /= 2;
    while (hs > ATT_MAX_HEADS || grp % hs) hs--;
    return hs;
}

static void layer_attention(sd_ctx *c, int l, int n) {
    const sd_model *m = c->m;
    const hparams *hp = &m->hp;
    const layer_w *w = &m->layers[l];
    const int E = hp->n_embd, Q = hp->n_head * hp->head_dim, KV = hp->n_head_kv * hp->head_dim;
    for (int i = 0; i < n; i++)
        c->ops->rmsnorm(c->x + (size_t)i * E, w->attn_norm, E, hp->norm_eps, c->xn + (size_t)i * E);
    const tensor *ws[3] = {&w->wq, &w->wk, &w->wv};
    float *ys[3] = {c->q, c->k, c->v};
    int lds[3] = {Q, KV, KV};
    matmul_multi(c, c->xn, E, n, 3, ws, ys, lds);
    for (int i = 0; i < n; i++) {
        float *q = c->q + (size_t)i * Q, *k = c->k + (size_t)i * KV, *v = c->v + (size_t)i * KV;
        if (w->bq)
            for (int e = 0; e < Q; e++) q[e] += w->bq[e];
        if (w->bk)
            for (int e = 0; e < KV; e++) k[e] += w->bk[e];
        if (w->bv)
            for (int e = 0; e < KV; e++) v[e] += w->bv[e];
        const float *cs = c->rope_cs + (size_t)c->poss[i] * hp->head_dim;
        rope(q, hp->n_head, hp->head_dim, cs, m->arch->rope);
        rope(k, hp->n_head_kv, hp->head_dim, cs, m->arch->rope);
        kv_write_cell(&c->kv, c->seqs[i], l, c->cell[i], k, v);
    }
    att_job aj = {c, n, l, att_heads_per_task(c, n)};
    run_par(c, att_worker, &aj, 2.0 * n * Q * (double)(c->cell[n - 1] + 1));
    fwd_matmul(c, &w->wo, c->xn, Q, n, c->tmp, E);
    for (size_t i = 0; i < (size_t)n * E; i++) c->x[i] += c->tmp[i];
}

static void layer_mlp(sd_ctx *c, int l, int n) {
    const hparams *hp = &c->m->hp;
    const layer_w *w = &c->m->layers[l];
    const int E = hp->n_embd, F = hp->n_ff;
    for (int i = 0; i < n; i++) c->ops->rmsnorm(c->x + (size_t)i * E, w->ffn_norm, E, hp->norm_eps, c->xn + (size_t)i * E);
    const tensor *ws[2] = {&w->w_gate, &w->w_up};
    float *ys[2] = {c->gate, c->up};
    int lds[2] = {F, F};
    matmul_multi(c, c->xn, E, n, 2, ws, ys, lds);
    for (int i = 0; i < n; i++) /* row by row, as ggml's swiglu (its groups of 16 start at each row) */
        c->ops->silu_mul(c->gate + (size_t)i * F, c->up + (size_t)i * F, (size_t)F);
    fwd_matmul(c, &w->w_down, c->gate, F, n, c->tmp, E);
    for (size_t i = 0; i < (size_t)n * E; i++) c->x[i] += c->tmp[i];
}

/* ------------------------------------------------------------------ LM head */
/* rows[n][E] (overwritten) are states after `depth` layers: [exit head,] final norm, LM head -> logits[n][V]. */
static void lm_head_rows(sd_ctx *c, float *rows, int n, int depth, const sd_exit_heads *heads, float *logits) {
    const sd_model *m = c->m;
    const int E = m->hp.n_embd;
    if (depth < m->hp.n_layer && exit_heads_has(heads, depth)) {
        fwd_matmul(c, &heads->A[depth], rows, E, n, c->xn, E);
        for (int i = 0; i < n; i++)
            for (int e = 0; e < E; e++) rows[(size_t)i * E + e] = c->xn[(size_t)i * E + e] + heads->b[depth][e];
    }
    for (int i = 0; i < n; i++) c->ops->rmsnorm(rows + (size_t)i * E, m->out_norm, E, m->hp.norm_eps, rows + (size_t)i * E);
    fwd_matmul(c, &m->output, rows, E, n, logits, m->hp.n_vocab);
}

/* ------------------------------------------------------------------ the forward call */
/* Makes every sequence of the block hold the pages of its new cells (its last entry has its highest cell), before
 * anything is written; on failure gives back what this call took, so nothing changes. */
static sd_status reserve_block(sd_ctx *c, int n, sd_error *err) {
    kv_cache *kv = &c->kv;
    for (int i = 0; i < n; i++) c->held[c->seqs[i]] = kv->n_pages[c->seqs[i]];
    for (int i = 0; i < n; i++) {
        if (c->chain[i] != c->seen[c->seqs[i]] - 1) continue;
        sd_status st = kv_reserve(kv, c->seqs[i], c->cell[i] + 1, err);
        if (st) {
            for (int k = 0; k < i; k++) kv_release(kv, c->seqs[k], c->held[c->seqs[k]] * kv->page_cells);
            return st;
        }
    }
    return SD_OK;
}

sd_status sd_forward(sd_ctx *c, const sd_block *b, const sd_forward_args *a, sd_error *err) {
    if (!c || !b || !a) return err_set(err, SD_ERR_ARG, "sd_forward: NULL argument");
    const sd_model *m = c->m;
    const hparams *hp = &m->hp;
    const int n = b->n, L = hp->n_layer, E = hp->n_embd;
    const int lb = a->layer_begin, le = a->layer_end ? a->layer_end : L;
    if (n < 1 || n > c->n_batch)
        return err_set(err, SD_ERR_ARG, "block of %d positions (1..%d allowed: n_batch)", n, c->n_batch);
    if (lb < 0 || lb >= L || le <= lb || le > L)
        return err_set(err, SD_ERR_ARG, "layer range [%d, %d) is invalid for a %d-layer model", lb, le, L);
    if (lb == 0 && !b->token) return err_set(err, SD_ERR_ARG, "block starting at layer 0 needs token ids");
    if (lb > 0 && !b->embd) return err_set(err, SD_ERR_ARG, "block starting at layer %d needs hidden states", lb);
    if (a->view_len < 0 || (a->view_len > 0 && !b->parent))
        return err_set(err, SD_ERR_ARG, "view_len %d: a limited view needs a tree block (parents)", a->view_len);
    /* the first layer whose attention runs decides the base length of each sequence */
    int ref_layer = -1;
    for (int l = lb; l < le && ref_layer < 0; l++)
        if (!a->skip || !a->skip[2 * l]) ref_layer = l;
    for (int s = 0; s < c->kv.n_seq; s++) c->seen[s] = 0;
    for (int i = 0; i < n; i++) {
        int s = b->seq ? b->seq[i] : b->seq_all;
        if (s < 0 || s >= c->kv.n_seq)
            return err_set(err, SD_ERR_ARG, "entry %d: sequence id %d (context has %d)", i, s, c->kv.n_seq);
        if (lb == 0 && (b->token[i] < 0 || b->token[i] >= hp->n_vocab))
            return err_set(err, SD_ERR_ARG, "entry %d: token id %d outside the vocabulary (%d)", i, b->token[i],
                           hp->n_vocab);
        int base = ref_layer >= 0 ? *kv_len(&c->kv, s, ref_layer) : 0;
        for (int l = lb; l < le; l++)
            if ((!a->skip || !a->skip[2 * l]) && *kv_len(&c->kv, s, l) != base)
                return err_set(err, SD_ERR_ARG,
                               "sequence %d: the cache of layer %d holds %d positions but layer %d holds %d (layers run "
                               "together must be in step)",
                               s, l, *kv_len(&c->kv, s, l), ref_layer, base);
        c->seqs[i] = s;
        c->base[i] = base;
        c->chain[i] = c->seen[s]++;
        c->cell[i] = base + c->chain[i];
        if (c->cell[i] >= c->n_ctx)
            return err_set(err, SD_ERR_CTX_FULL, "sequence %d: the KV cache is full (%d positions); nothing was written",
                           s, c->n_ctx);
        if (b->parent) {
            int pa = b->parent[i];
            if (pa < -1 || pa >= i || (pa >= 0 && c->seqs[pa] != s))
                return err_set(err, SD_ERR_ARG, "entry %d: parent %d must be -1 or an earlier entry of the same sequence", i, pa);
            c->par[i] = pa;
        } else {
            c->par[i] = -2; /* chain */
        }
        int pos = b->pos ? b->pos[i] : c->cell[i];
        if (pos < 0 || pos >= c->n_ctx)
            return err_set(err, SD_ERR_ARG, "entry %d: position %d outside [0, %d)", i, pos, c->n_ctx);
        c->poss[i] = pos;
    }
    sd_status st = reserve_block(c, n, err);
    if (st) return st;
    c->view_len = a->view_len;
    int n_logits = 0;
    for (int i = 0; i < n; i++) n_logits += a->want_logits ? a->want_logits[i] != 0 : i == n - 1;

    /* embed */
    if (lb == 0)
        for (int i = 0; i < n; i++) tensor_get_row(&m->tok_embd, b->token[i], c->x + (size_t)i * E);
    else
        memcpy(c->x, b->embd, (size_t)n * E * sizeof(float));
    for (int l = lb; l < le; l++) {
        if (!a->skip || !a->skip[2 * l]) layer_attention(c, l, n);
        if (!a->skip || !a->skip[2 * l + 1]) layer_mlp(c, l, n);
        if (a->hidden_layers) memcpy(a->hidden_layers + (size_t)(l - lb) * n * E, c->x, (size_t)n * E * sizeof(float));
    }
    c->layer_passes += (uint64_t)(le - lb);
    /* commit the new cache entries */
    for (int i = 0; i < n; i++)
        for (int l = lb; l < le; l++) {
            if (a->skip && a->skip[2 * l]) continue;
            int *len = kv_len(&c->kv, c->seqs[i], l);
            if (*len < c->cell[i] + 1) *len = c->cell[i] + 1;
        }
    if (a->hidden) memcpy(a->hidden, c->x, (size_t)n * E * sizeof(float));
    if (a->logits && n_logits > 0) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            bool want = a->want_logits ? a->want_logits[i] != 0 : i == n - 1;
            if (want) memcpy(c->tmp + (size_t)k++ * E, c->x + (size_t)i * E, (size_t)E * sizeof(float));
        }
        lm_head_rows(c, c->tmp, n_logits, le, a->exit_heads, a->logits);
    }
    return SD_OK;
}

sd_status sd_lm_head(sd_ctx *c, const float *h, int n, int depth, const sd_exit_heads *heads, float *logits,
                     sd_error *err) {
    if (!c || !h || !logits || n < 1 || n > c->n_batch || depth < 1 || depth > c->m->hp.n_layer)
        return err_set(err, SD_ERR_ARG, "sd_lm_head: %d states at depth %d (1..%d states, depth 1..%d)", n, depth,
                       c ? c->n_batch : 0, c ? c->m->hp.n_layer : 0);
    if (heads && heads->n_embd != c->m->hp.n_embd) return err_set(err, SD_ERR_ARG, "sd_lm_head: heads for another model");
    memcpy(c->tmp, h, (size_t)n * c->m->hp.n_embd * sizeof(float));
    lm_head_rows(c, c->tmp, n, depth, heads, logits);
    return SD_OK;
}
