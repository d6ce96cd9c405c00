#include "speculative/accept.h"

#include <math.h>

double accept_residual(const float *p, const float *q, int32_t x, int V, float *r) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        float qi = q ? q[i] : (i == x ? 1.0f : 0.0f);
        float d = p[i] - qi;
        r[i] = d > 0.0f ? d : 0.0f;
        sum += r[i];
    }
    return sum;
}

/* One candidate x (draft distribution q, NULL = one-hot): true when accepted (u < min(1, p(x)/q(x))), else the
 * residual max(0, p - q) is in scratch and its sum in *sum. */
static bool try_candidate(const float *p, const float *q, int32_t x, int V, double u, float *scratch, double *sum,
                          accept_residual_fn residual_fn) {
    double px = p[x], qx = q ? q[x] : 1.0;
    if (qx > 0.0 && u < px / qx) return true;
    *sum = (residual_fn ? residual_fn : accept_residual)(p, q, x, V, scratch);
    return false;
}

/* The token after the last candidate was rejected: from the residual; p == q (up to rounding) leaves nothing, and
 * then rejection had probability 0: fall back to p itself. */
static int32_t draw_residual(sd_sampler *smp, const float *p, const float *scratch, double sum) {
    return sd_sampler_draw(smp, sum > 0.0 ? scratch : p);
}

bool accept_sample(const float *p, const float *q, int32_t x, int V, double u, sd_sampler *smp, float *scratch,
                   int32_t *repl, accept_residual_fn residual_fn) {
    double sum;
    if (try_candidate(p, q, x, V, u, scratch, &sum, residual_fn)) return true;
    *repl = draw_residual(smp, p, scratch, sum);
    return false;
}

/* Tries the children of node `cur` (-1 = root) whose distribution at the parent is p (sampling); returns the accepted
 * child, or -1 with *next drawn from what is left. p is overwritten (the running residual, renormalised). With one
 * child this is accept_sample, draw for draw. */
static int try_children(const draft_tree *t, int k, int cur, int V, sd_sampler *smp, float *p, float *scratch,
                        int32_t *next, accept_residual_fn residual_fn) {
    int last = -1;
    for (int j = cur + 1; j < k; j++)
        if (t->parent[j] == cur) last = j;
    for (int j = cur + 1; j <= last; j++) {
        if (t->parent[j] != cur) continue;
        const float *q = t->onehot ? NULL : t->q + (size_t)j * V;
        double sum;
        if (try_candidate(p, q, t->token[j], V, sd_sampler_uniform(smp), scratch, &sum, residual_fn)) return j;
        if (j == last) {
            *next = draw_residual(smp, p, scratch, sum);
            return -1;
        }
        if (sum > 0.0)
            for (int i = 0; i < V; i++) p[i] = (float)(scratch[i] / sum);
    }
    *next = sd_sampler_draw(smp, p); /* no children */
    return -1;
}

int accept_tree(const draft_tree *t, int k, const float *logits, int V, sd_sampler *smp, int32_t *hist, int n_hist,
                float *p, float *scratch, int32_t *path, int32_t *next, accept_residual_fn residual_fn) {
    const bool greedy = sd_sampler_is_greedy(smp);
    int acc = 0, cur = -1;
    for (;;) {
        const float *row = logits + (size_t)(cur + 1) * V;
        int child = -1;
        if (greedy) {
            int32_t best = accept_argmax(row, V);
            for (int j = cur + 1; j < k && child < 0; j++)
                if (t->parent[j] == cur && t->token[j] == best) child = j;
            if (child < 0) *next = best;
        } else {
            sd_sampler_probs(smp, row, hist, n_hist + acc, p); /* history: hist + the accepted path */
            child = try_children(t, k, cur, V, smp, p, scratch, next, residual_fn);
        }
        if (child < 0) return acc;
        hist[n_hist + acc] = t->token[child];
        path[acc++] = child;
        cur = child;
    }
}

int32_t accept_argmax(const float *l, int V) {
    int32_t b = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

float accept_top1_prob(const float *l, int V, int32_t best, float T) {
    double s = 0.0;
    for (int i = 0; i < V; i++) s += exp(((double)l[i] - l[best]) / T);
    return (float)(1.0 / s);
}

int32_t draft_chain_step(draft_tree *t, ctrl *c, sd_sampler *smp, bool greedy, const float *logits, int V,
                         const float *hidden, int D, int32_t *hist, int n, int i) {
    int32_t x = -1;
    float top1 = 1.0f, *q = greedy ? NULL : t->q + (size_t)i * V;
    if (greedy) {
        x = accept_argmax(logits, V);
        if (c->uses_conf) top1 = accept_top1_prob(logits, V, x, 1.0f);
    } else {
        sd_sampler_probs(smp, logits, hist, n + i, q);
        top1 = q[accept_argmax(q, V)];
    }
    ctrl_feat f = {top1, hidden, D, hist[n + i - 1]};
    if (!ctrl_keep(c, i, &f)) return -1;
    draft_tree_keep_logits(t, i, logits, V);
    if (!greedy) x = sd_sampler_draw(smp, q);
    t->token[i] = x;
    hist[n + i] = x;
    return x;
}

sd_status draft_sampler_new(const sd_sampler *target, int n_vocab, uint32_t salt, sd_sampler **out, uint64_t *seed,
                            sd_error *err) {
    sd_sampler_params sp;
    sd_sampler_get_params(target, &sp);
    sp.seed = sp.seed * 0x9e3779b97f4a7c15ull + salt;
    if (seed) *seed = sp.seed;
    return sd_sampler_new(&sp, n_vocab, out, err);
}
