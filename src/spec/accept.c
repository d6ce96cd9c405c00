#include "spec/accept.h"

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
