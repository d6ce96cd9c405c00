/* exit_train: trains the per-depth affine exit heads (sd_train_exit_heads in specdec.h).
 * Phase 1 runs the target over corpus text and caches, per position, the hidden state after every trained depth
 * and the final layer's distribution p (the teacher). Phase 2 fits each depth independently (depths are spread
 * over threads): q = softmax(W (g * rmsnorm(A h + b))), loss KL(p || q), gradients by hand, AdamW. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kern.h"
#include "model/exit_heads.h"
#include "model/model.h"
#include "sample/rng.h"
#include "train/train_common.h"
#include "util/err.h"

sd_train_params sd_train_default_params(void) {
    sd_train_params p = {0};
    p.n_train_tokens = 48000;
    p.n_heldout_tokens = 4000;
    p.epochs = 3;
    p.batch = 32;
    p.lr = 3e-4f;
    p.weight_decay = 0.01f;
    p.seq_len = 256;
    p.seed = 1;
    return p;
}

typedef struct train_data {
    int D, V, n_dep, n_pos, n_train, n_val; /* positions: [0, n_train) train, then n_val validation, then held out */
    const int *depths;   /* [n_dep] */
    float *h;            /* [n_pos][n_dep][D] */
    float *p;            /* [n_pos][V] teacher distribution */
    int32_t *top;        /* [n_pos] teacher argmax */
    float *W;            /* [V][D] LM head, f32 */
    const float *g;      /* [D] final norm weight */
    float eps;
} train_data;

typedef struct train_shared {
    const train_data *td;
    const sd_train_params *tp;
    sd_exit_heads *heads;
    sd_train_report *rep;
    const kern_ops *ops;
    pthread_mutex_t mu;
    int next_dep; /* work queue over depths */
} train_shared;

static void say(train_shared *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(train_shared *s, const char *fmt, ...) {
    if (!s->tp->progress) return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&s->mu);
    s->tp->progress(s->tp->user, line);
    pthread_mutex_unlock(&s->mu);
}

/* Forward for one position: u = A h + b, y = g * rmsnorm(u), z = W y. Returns r (1/rms). */
static float head_forward(const train_data *td, const kern_ops *ops, const float *A, const float *b, const float *h,
                          float *u, float *y, float *z) {
    const int D = td->D;
    double ss = 0;
    for (int i = 0; i < D; i++) {
        u[i] = (A ? ops->dot(A + (size_t)i * D, h, D) : h[i]) + (b ? b[i] : 0.0f);
        ss += (double)u[i] * u[i];
    }
    float r = (float)(1.0 / sqrt(ss / D + td->eps));
    for (int i = 0; i < D; i++) y[i] = td->g[i] * u[i] * r;
    for (int v = 0; v < td->V; v++) z[v] = ops->dot(td->W + (size_t)v * D, y, D);
    return r;
}

static int argmax(const float *z, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[b]) b = i;
    return b;
}

/* softmax in place; returns log of the normaliser (so log q_v = z_v - lse) */
static double softmax_lse(float *z, int V) {
    float mx = z[argmax(z, V)];
    double s = 0;
    for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
    double lse = mx + log(s);
    for (int v = 0; v < V; v++) z[v] = (float)exp((double)z[v] - lse);
    return lse;
}

/* Top-1 agreement with the final layer over positions [from, to). */
static float agreement(const train_data *td, const kern_ops *ops, int di, const float *A, const float *b, float *u,
                       float *y, float *z, int from, int to) {
    int ok = 0;
    for (int pos = from; pos < to; pos++) {
        head_forward(td, ops, A, b, td->h + ((size_t)pos * td->n_dep + di) * td->D, u, y, z);
        ok += argmax(z, td->V) == td->top[pos];
    }
    return to > from ? (float)ok / (float)(to - from) : 0.0f;
}

static void train_depth(train_shared *s, int di, float *scratch) {
    const train_data *td = s->td;
    const sd_train_params *tp = s->tp;
    const kern_ops *ops = s->ops;
    const int D = td->D, V = td->V, d = td->depths[di];
    float *u = scratch, *y = u + D, *z = y + D, *gy = z + V, *gu = gy + D;
    float *A = exit_heads_A(s->heads, d), *b = s->heads->b[d];
    size_t nA = (size_t)D * D;
    float *gA = calloc(nA * 3 + (size_t)D * 3, sizeof(float));
    if (!gA) return;
    float *mA = gA + nA, *vA = mA + nA, *gb = vA + nA, *mb = gb + D, *vb = mb + D;
    const int v0 = td->n_train, v1 = td->n_train + td->n_val, h0 = v1;
    s->rep->agree_before[d] = agreement(td, ops, di, NULL, NULL, u, y, z, h0, td->n_pos);
    /* validation-based selection: the identity (no head) is the first candidate; checkpoints every quarter epoch */
    float best_val = agreement(td, ops, di, NULL, NULL, u, y, z, v0, v1);
    float *best = malloc((nA + (size_t)D) * sizeof *best);
    int32_t *order = malloc((size_t)td->n_train * sizeof *order);
    if (!order || !best) {
        free(order);
        free(best);
        free(gA);
        return;
    }
    memcpy(best, A, nA * sizeof *best);
    memcpy(best + nA, b, (size_t)D * sizeof *best);
    const int n_batches = (td->n_train + tp->batch - 1) / tp->batch, check_every = n_batches / 4 > 0 ? n_batches / 4 : 1;
    int kept_step = 0;
    for (int i = 0; i < td->n_train; i++) order[i] = i;
    rng r;
    rng_seed(&r, tp->seed * 1000003u + (uint64_t)d);
    const float b1 = 0.9f, b2 = 0.999f, ae = 1e-8f;
    int step = 0;
    for (int ep = 0; ep < tp->epochs; ep++) {
        for (int i = td->n_train - 1; i > 0; i--) { /* shuffle */
            int j = (int)(rng_next(&r) % (uint64_t)(i + 1));
            int32_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double loss = 0;
        for (int s0 = 0; s0 < td->n_train; s0 += tp->batch) {
            int bn = td->n_train - s0 < tp->batch ? td->n_train - s0 : tp->batch;
            memset(gA, 0, nA * sizeof(float));
            memset(gb, 0, (size_t)D * sizeof(float));
            for (int k = 0; k < bn; k++) {
                int pos = order[s0 + k];
                const float *h = td->h + ((size_t)pos * td->n_dep + di) * D, *p = td->p + (size_t)pos * V;
                float rr = head_forward(td, ops, A, b, h, u, y, z);
                double lse = 0;
                float mx = z[argmax(z, V)];
                for (int v = 0; v < V; v++) lse += exp((double)z[v] - mx);
                lse = mx + log(lse);
                for (int v = 0; v < V; v++) {
                    float q = (float)exp((double)z[v] - lse);
                    if (p[v] > 0) loss += p[v] * (log(p[v]) - ((double)z[v] - lse));
                    z[v] = (q - p[v]) / (float)bn; /* dL/dz */
                }
                memset(gy, 0, (size_t)D * sizeof(float));
                for (int v = 0; v < V; v++) ops->axpy(gy, z[v], td->W + (size_t)v * D, D);
                double un = 0;
                for (int i = 0; i < D; i++) {
                    gy[i] *= td->g[i]; /* dL/dn */
                    un += (double)u[i] * gy[i];
                }
                float c3 = (float)((double)rr * rr * rr / D * un);
                for (int i = 0; i < D; i++) {
                    gu[i] = rr * gy[i] - c3 * u[i];
                    gb[i] += gu[i];
                    ops->axpy(gA + (size_t)i * D, gu[i], h, D);
                }
            }
            step++;
            float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
            for (size_t i = 0; i < nA; i++) {
                mA[i] = b1 * mA[i] + (1 - b1) * gA[i];
                vA[i] = b2 * vA[i] + (1 - b2) * gA[i] * gA[i];
                float eye = (i / (size_t)D == i % (size_t)D) ? 1.0f : 0.0f;
                A[i] -= tp->lr * ((mA[i] / c1) / (sqrtf(vA[i] / c2) + ae) + tp->weight_decay * (A[i] - eye));
            }
            for (int i = 0; i < D; i++) {
                mb[i] = b1 * mb[i] + (1 - b1) * gb[i];
                vb[i] = b2 * vb[i] + (1 - b2) * gb[i] * gb[i];
                b[i] -= tp->lr * ((mb[i] / c1) / (sqrtf(vb[i] / c2) + ae) + tp->weight_decay * b[i]);
            }
            if (step % check_every == 0 || s0 + tp->batch >= td->n_train) {
                float va = agreement(td, ops, di, A, b, u, y, z, v0, v1);
                if (va > best_val) {
                    best_val = va;
                    kept_step = step;
                    memcpy(best, A, nA * sizeof *best);
                    memcpy(best + nA, b, (size_t)D * sizeof *best);
                }
            }
        }
        float mean = (float)(loss / td->n_train);
        if (ep == 0) s->rep->loss_first[d] = mean;
        s->rep->loss_last[d] = mean;
        say(s, "depth %d: epoch %d/%d, mean KL(final || exit) %.4f", d, ep + 1, tp->epochs, mean);
    }
    memcpy(A, best, nA * sizeof *best);
    memcpy(b, best + nA, (size_t)D * sizeof *best);
    exit_heads_set_present(s->heads, d);
    s->rep->agree_after[d] = agreement(td, ops, di, A, b, u, y, z, h0, td->n_pos);
    s->rep->kept_step[d] = kept_step;
    say(s, "depth %d: held-out top-1 agreement with the final layer %.3f -> %.3f (%s)", d, s->rep->agree_before[d],
        s->rep->agree_after[d], kept_step ? "head from the best validation checkpoint" : "no checkpoint beat the identity: identity kept");
    free(best);
    free(order);
    free(gA);
}

static void *train_worker(void *arg) {
    train_shared *s = arg;
    const train_data *td = s->td;
    float *scratch = malloc(((size_t)td->D * 4 + td->V) * sizeof(float));
    if (!scratch) return NULL;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int di = s->next_dep < td->n_dep ? s->next_dep++ : -1;
        pthread_mutex_unlock(&s->mu);
        if (di < 0) break;
        train_depth(s, di, scratch);
    }
    free(scratch);
    return NULL;
}

sd_status sd_train_exit_heads(const sd_model *m, const sd_train_params *tp_in, sd_exit_heads **out,
                              sd_train_report *rep, sd_error *err) {
    if (!m || !tp_in || !out || !tp_in->corpus_path) return err_set(err, SD_ERR_ARG, "sd_train_exit_heads: NULL argument");
    *out = NULL;
    sd_train_params tp = *tp_in;
    const int L = m->hp.n_layer, D = m->hp.n_embd, V = m->hp.n_vocab;
    if (L < 2 || L > 256) return err_set(err, SD_ERR_ARG, "exit heads need a model with 2..256 layers (this one has %d)", L);
    if (tp.n_train_tokens < 16 || tp.n_heldout_tokens < 1 || tp.epochs < 1 || tp.batch < 1 || !(tp.lr > 0) ||
        !(tp.weight_decay >= 0) || tp.seq_len < 2)
        return err_set(err, SD_ERR_ARG, "invalid training parameters (tokens >= 16, held-out >= 1, epochs >= 1, batch >= 1, lr > 0)");
    int dep_all[256], n_dep = 0;
    if (tp.depths) {
        for (int i = 0; i < tp.n_depths; i++) {
            if (tp.depths[i] < 1 || tp.depths[i] >= L)
                return err_set(err, SD_ERR_ARG, "depth %d out of range (1..%d)", tp.depths[i], L - 1);
            dep_all[n_dep++] = tp.depths[i];
        }
    } else {
        for (int d = 1; d < L; d++) dep_all[n_dep++] = d;
    }
    /* teacher distributions take V floats per position: keep the cache within ~1.5 GB */
    double per_pos = (double)V + (double)n_dep * D;
    int max_pos = (int)(1.5e9 / 4 / per_pos);
    if (tp.n_train_tokens + 2 * tp.n_heldout_tokens > max_pos) {
        double f = (double)max_pos / (tp.n_train_tokens + 2 * tp.n_heldout_tokens);
        tp.n_train_tokens = (int)(tp.n_train_tokens * f);
        tp.n_heldout_tokens = (int)(tp.n_heldout_tokens * f) > 0 ? (int)(tp.n_heldout_tokens * f) : 1;
    }
    double t0 = train_now_s();
    sd_ctx_params cp = sd_ctx_default_params();
    if (tp.seq_len > m->hp.n_ctx_train) tp.seq_len = m->hp.n_ctx_train;
    cp.n_ctx = tp.seq_len;
    cp.n_batch = 64;
    cp.n_threads = tp.n_threads;
    sd_ctx *ctx = NULL;
    sd_status st = sd_ctx_new(m, &cp, &ctx, err);
    if (st) return st;
    int *lens = NULL, n_seq = 0;
    int32_t **seqs = train_read_stories(m, tp.corpus_path, tp.seq_len,
                                  tp.n_train_tokens + tp.n_heldout_tokens + tp.n_heldout_tokens / 2 + tp.seq_len, &lens,
                                  &n_seq, err);
    if (!seqs) {
        sd_ctx_free(ctx);
        return err ? err->status : SD_ERR_FORMAT;
    }
    train_data td = {.D = D, .V = V, .n_dep = n_dep, .depths = dep_all, .g = m->out_norm, .eps = m->hp.norm_eps};
    int total = 0;
    for (int i = 0; i < n_seq; i++) total += lens[i];
    int n_val = tp.n_heldout_tokens / 2 > 0 ? tp.n_heldout_tokens / 2 : 1; /* validation for checkpoint selection */
    int want_pos = tp.n_train_tokens + n_val + tp.n_heldout_tokens;
    td.n_pos = total < want_pos ? total : want_pos;
    int held = tp.n_heldout_tokens < td.n_pos / 3 ? tp.n_heldout_tokens : td.n_pos / 3;
    td.n_val = n_val < td.n_pos / 3 ? n_val : td.n_pos / 3;
    td.n_train = td.n_pos - held - td.n_val;
    td.h = malloc((size_t)td.n_pos * n_dep * D * sizeof(float));
    td.p = malloc((size_t)td.n_pos * V * sizeof(float));
    td.top = malloc((size_t)td.n_pos * sizeof *td.top);
    td.W = malloc((size_t)V * D * sizeof(float));
    float *hl = malloc((size_t)64 * L * D * sizeof(float)), *lg = malloc((size_t)64 * V * sizeof(float));
    uint8_t want[64];
    memset(want, 1, sizeof want);
    sd_exit_heads *heads = exit_heads_new(m);
    train_shared sh = {.td = &td, .tp = &tp, .heads = heads, .rep = rep, .ops = kern_best()};
    sd_train_report local_rep;
    if (!rep) sh.rep = rep = &local_rep;
    memset(rep, 0, sizeof *rep);
    for (int d = 0; d < 256; d++) rep->agree_before[d] = rep->agree_after[d] = -1;
    pthread_mutex_init(&sh.mu, NULL);
    if (!td.h || !td.p || !td.top || !td.W || !hl || !lg || !heads) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory caching %d positions of hidden states", td.n_pos);
        goto done;
    }
    for (int v = 0; v < V; v++) tensor_get_row(&m->output, v, td.W + (size_t)v * D);
    /* phase 1: hidden states and teacher distributions */
    say(&sh, "caching hidden states: %d positions (%d train, %d validation, %d held out), %d depths", td.n_pos, td.n_train,
        td.n_val, td.n_pos - td.n_train - td.n_val, n_dep);
    int pos = 0;
    for (int si = 0; si < n_seq && pos < td.n_pos && !st; si++) {
        sd_kv_truncate(ctx, 0, 0, NULL);
        for (int i = 0; i < lens[si] && pos < td.n_pos && !st; i += 64) {
            int k = lens[si] - i < 64 ? lens[si] - i : 64;
            sd_forward_args a = {.want_logits = want, .logits = lg, .hidden_layers = hl};
            st = sd_forward(ctx, &(sd_block){.n = k, .token = seqs[si] + i}, &a, err);
            for (int j = 0; j < k && pos < td.n_pos && !st; j++, pos++) {
                for (int di = 0; di < n_dep; di++)
                    memcpy(td.h + ((size_t)pos * n_dep + di) * D, hl + ((size_t)(dep_all[di] - 1) * k + j) * D,
                           (size_t)D * sizeof(float));
                float *pz = td.p + (size_t)pos * V;
                memcpy(pz, lg + (size_t)j * V, (size_t)V * sizeof(float));
                td.top[pos] = argmax(pz, V);
                softmax_lse(pz, V);
            }
        }
    }
    if (st) goto done;
    if (pos < td.n_pos) { /* fewer positions than planned: shrink the held-out part */
        td.n_pos = pos;
        if (td.n_train + td.n_val >= td.n_pos) td.n_train = td.n_pos * 2 / 3, td.n_val = td.n_pos / 6;
    }
    rep->n_train = td.n_train;
    rep->n_heldout = td.n_pos - td.n_train - td.n_val;
    rep->n_layer = L;
    say(&sh, "cached in %.1f s; training %d depths (%d epochs, batch %d, lr %g)", train_now_s() - t0, n_dep, tp.epochs, tp.batch,
        tp.lr);
    /* phase 2: depths in parallel */
    {
        int nth = sd_ctx_n_threads(ctx);
        if (nth > n_dep) nth = n_dep;
        pthread_t tid[64];
        int started = 0;
        for (int t = 1; t < nth && t < 64; t++)
            if (pthread_create(&tid[started], NULL, train_worker, &sh) == 0) started++;
        train_worker(&sh);
        for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    }
    for (int di = 0; di < n_dep; di++)
        if (!exit_heads_has(heads, dep_all[di])) st = err_set(err, SD_ERR_NOMEM, "out of memory training depth %d", dep_all[di]);
    rep->seconds = train_now_s() - t0;
done:
    pthread_mutex_destroy(&sh.mu);
    train_free_stories(seqs, lens, n_seq);
    free(td.h);
    free(td.p);
    free(td.top);
    free(td.W);
    free(hl);
    free(lg);
    sd_ctx_free(ctx);
    if (st) sd_exit_heads_free(heads);
    else *out = heads;
    return st;
}
