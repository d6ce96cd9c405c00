/* Sampling: the processed distribution (penalty, top-k, top-p, min-p, temperature), seeded draws and their
 * frequencies (chi-square). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "testlib.h"

enum { V = 64 };

static sd_sampler *mk(float temp, int k, float p, float minp, float pen, uint64_t seed) {
    sd_sampler_params sp = {temp, k, p, minp, pen, 64, seed};
    sd_sampler *s = NULL;
    sd_error err;
    if (sd_sampler_new(&sp, V, &s, &err) != SD_OK) fprintf(stderr, "sampler: %s\n", err.msg);
    return s;
}

static int nonzero(const float *p) {
    int n = 0;
    for (int i = 0; i < V; i++) n += p[i] > 0;
    return n;
}

int main(void) {
    float logits[V], probs[V];
    for (int i = 0; i < V; i++) logits[i] = (float)sin(i * 1.7) * 3.0f;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    /* greedy */
    sd_sampler *s = mk(0, 0, 1, 0, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    CHECK(probs[best] == 1.0f && nonzero(probs) == 1, "greedy is one-hot on the argmax");
    CHECK(sd_sampler_sample(s, logits, NULL, 0) == best, "greedy sample");
    sd_sampler_free(s);
    /* plain softmax at T = 1: exact ratios */
    s = mk(1, 0, 1, 0, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    double sum = 0;
    for (int i = 0; i < V; i++) sum += probs[i];
    CHECK(fabs(sum - 1) < 1e-5 && nonzero(probs) == V, "softmax sums to 1 over all tokens");
    CHECK(fabs(probs[3] / probs[7] - exp(logits[3] - logits[7])) < 1e-4, "softmax ratio");
    sd_sampler_free(s);
    /* temperature 2: ratio exp((l_i - l_j) / 2) */
    s = mk(2, 0, 1, 0, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    CHECK(fabs(probs[3] / probs[7] - exp((logits[3] - logits[7]) / 2)) < 1e-4, "temperature ratio");
    sd_sampler_free(s);
    /* top-k */
    s = mk(1, 5, 1, 0, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    CHECK(nonzero(probs) == 5 && probs[best] > 0, "top-k 5 keeps 5 tokens");
    sd_sampler_free(s);
    /* top-p: the smallest prefix whose softmax mass >= p */
    s = mk(1, 0, 0.5f, 0, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    {
        sd_sampler *full = mk(1, 0, 1, 0, 1, 1);
        float pf[V];
        sd_sampler_probs(full, logits, NULL, 0, pf);
        double kept = 0, min_kept = 1, max_dropped = 0;
        for (int i = 0; i < V; i++) {
            if (probs[i] > 0) {
                kept += pf[i];
                if (pf[i] < min_kept) min_kept = pf[i];
            } else if (pf[i] > max_dropped) {
                max_dropped = pf[i];
            }
        }
        CHECK(kept >= 0.5 - 1e-6 && kept - min_kept < 0.5 && max_dropped <= min_kept, "top-p 0.5 set (mass %.3f)", kept);
        sd_sampler_free(full);
    }
    sd_sampler_free(s);
    /* min-p: keep p >= min_p * p_max */
    s = mk(1, 0, 1, 0.2f, 1, 1);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    {
        bool ok = true;
        for (int i = 0; i < V; i++) {
            bool keep = logits[i] - logits[best] >= logf(0.2f);
            ok &= keep == (probs[i] > 0);
        }
        CHECK(ok, "min-p 0.2 set");
    }
    sd_sampler_free(s);
    /* repetition penalty lowers a positive logit of a recent token */
    s = mk(1, 0, 1, 0, 1.5f, 1);
    int32_t hist[2] = {best, best};
    float pp[V];
    sd_sampler_probs(s, logits, hist, 2, pp);
    sd_sampler *s0 = mk(1, 0, 1, 0, 1, 1);
    sd_sampler_probs(s0, logits, NULL, 0, probs);
    CHECK(pp[best] < probs[best], "repetition penalty");
    sd_sampler_free(s);
    sd_sampler_free(s0);
    /* seeded draws: same seed -> same stream; frequencies match the distribution (chi-square, 63 dof) */
    s = mk(1, 0, 1, 0, 1, 1234);
    sd_sampler *s2 = mk(1, 0, 1, 0, 1, 1234);
    sd_sampler_probs(s, logits, NULL, 0, probs);
    int counts[V] = {0};
    bool same = true;
    const int N = 100000;
    for (int i = 0; i < N; i++) {
        int a = sd_sampler_draw(s, probs), b = sd_sampler_draw(s2, probs);
        same &= a == b;
        counts[a]++;
    }
    CHECK(same, "same seed gives the same draws");
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < V; i++) {
        double e = probs[i] * N;
        if (e < 5) continue;
        chi += (counts[i] - e) * (counts[i] - e) / e;
        dof++;
    }
    /* 99.9th percentile of chi-square with ~60 dof is about 99.6 */
    CHECK(chi < 1.0 * dof + 3.3 * sqrt(2.0 * dof) + 10, "draw frequencies: chi2 %.1f with %d dof", chi, dof);
    printf("  draws vs distribution: chi2 = %.1f (%d dof)\n", chi, dof);
    sd_sampler_free(s);
    sd_sampler_free(s2);
    return tl_finish("test_sampler");
}
