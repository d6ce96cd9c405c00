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

bool accept_sample(const float *p, const float *q, int32_t x, int V, double u, sd_sampler *smp, float *scratch,
                   int32_t *repl, accept_residual_fn residual_fn) {
    double px = p[x], qx = q ? q[x] : 1.0;
    if (qx > 0.0 && u < px / qx) return true; /* u < min(1, p/q) */
    double sum = (residual_fn ? residual_fn : accept_residual)(p, q, x, V, scratch);
    /* p == q (up to rounding) leaves nothing: then rejection had probability 0, fall back to p itself */
    *repl = sd_sampler_draw(smp, sum > 0.0 ? scratch : p);
    return false;
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

int32_t draft_peek(sd_sampler *smp, bool greedy, const float *logits, int V, const int32_t *hist, int n_hist,
                   float *q, bool want_top1, float *top1) {
    if (greedy) {
        int32_t x = accept_argmax(logits, V);
        *top1 = want_top1 ? accept_top1_prob(logits, V, x, 1.0f) : 1.0f;
        return x;
    }
    sd_sampler_probs(smp, logits, hist, n_hist, q);
    int32_t b = 0;
    for (int i = 1; i < V; i++)
        if (q[i] > q[b]) b = i;
    *top1 = q[b];
    return -1;
}

int32_t draft_draw(sd_sampler *smp, bool greedy, int32_t peeked, const float *q) {
    return greedy ? peeked : sd_sampler_draw(smp, q);
}
