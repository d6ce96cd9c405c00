/* forward: the context (KV cache, work buffers sized at creation, thread pool) and the one forward call over a
 * block of positions: embed -> layers [begin, end) -> optional final norm + LM head. */
#ifndef SD_FORWARD_FORWARD_H
#define SD_FORWARD_FORWARD_H
#include "kernels/kern.h"
#include "kv/kv.h"
#include "model/model.h"
#include "util/pool.h"

struct sd_ctx {
    const sd_model *m;
    kv_cache kv;
    pool *pool;
    const kern_ops *ops;
    int n_ctx, n_batch, n_threads;
    double par_min_work; /* parallel dispatch only above this many multiply-adds */
    uint64_t layer_passes; /* layers run, once per forward call */
    /* work buffers, B = n_batch, E = n_embd, Q = n_head*head_dim, KV = n_head_kv*head_dim, F = n_ff */
    float *x;      /* [B][E] residual stream */
    float *xn;     /* [B][max(E, Q)] normed input of a sub-layer / attention output */
    float *q;      /* [B][Q] */
    float *k, *v;  /* [B][KV] */
    float *gate, *up; /* [B][F] */
    float *tmp;    /* [B][E] sub-layer output */
    act_q8 *xq;    /* [B][max(E, Q, F)/32] activations quantized for q8_0/q4_0 weights */
    struct act_q8k *xk; /* [B][max(E, Q, F)/256] activations quantized for K-quant weights */
    float *scores; /* [n_threads][n_ctx + B] attention scores */
    int *cell;     /* [B] cache cell of each entry */
    int *base;     /* [B] cached prefix length of each entry's sequence at the block start */
    int *chain;    /* [B] index of the entry among its sequence's entries in the block */
    int *par;      /* [B] effective parent (-1 = root) */
    int *seqs;     /* [B] sequence of each entry */
    int *poss;     /* [B] position of each entry */
    int *anc;      /* [n_threads][2][B] ancestor scratch: cells, page-relative cells */
    int *seen;     /* [n_seq] scratch: entries per sequence */
    int *held;     /* [n_seq] scratch: pages a sequence held before the block */
    struct att_f16_state *att16; /* [n_threads] kv_type f16: per-thread attention state (att_f16.h) */
    float *rope_cs; /* [n_ctx][head_dim/2][2] cos, sin of pos * base^(-2i/head_dim) */
    int view_len;   /* the call's sd_forward_args.view_len (0: every cached cell is visible to tree roots) */
};

/* Runs one matmul Y[n][ldy] = X[n][ldx] W^T over the thread pool (quantizing X first for quantized W). */
void fwd_matmul(sd_ctx *c, const tensor *w, const float *x, int ldx, int n, float *y, int ldy);
#endif
