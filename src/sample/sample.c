/* sample: logit processing into a distribution, and drawing from it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rng.h"
#include "specdec.h"
#include "util/err.h"

struct sd_sampler {
    sd_sampler_params p;
    int n_vocab;
    rng r;
    float *work; /* [n_vocab] processed logits */
    int *idx;    /* [n_vocab] candidate ids, sorted by logit */
    float *probs; /* [n_vocab] scratch for sd_sampler_sample */
};

sd_sampler_params sd_sampler_default_params(void) {
    sd_sampler_params p = {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f, .repeat_last_n = 64,
        .seed = 0x5eedULL};
    return p;
}

sd_status sd_sampler_new(const sd_sampler_params *p, int n_vocab, sd_sampler **out, sd_error *err) {
    if (!out || !p) return err_set(err, SD_ERR_ARG, "sd_sampler_new: NULL argument");
    *out = NULL;
    if (!(p->temp >= 0.0f) || !isfinite(p->temp))
        return err_set(err, SD_ERR_ARG, "temperature %g must be >= 0 (0 = greedy)", p->temp);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) return err_set(err, SD_ERR_ARG, "top-p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) return err_set(err, SD_ERR_ARG, "min-p %g must be in [0, 1]", p->min_p);
    if (p->top_k < 0) return err_set(err, SD_ERR_ARG, "top-k %d must be >= 0 (0 = off)", p->top_k);
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
        return err_set(err, SD_ERR_ARG, "repeat penalty %g must be > 0 (1 = off)", p->repeat_penalty);
    if (p->repeat_last_n < 0) return err_set(err, SD_ERR_ARG, "repeat-last-n %d must be >= 0", p->repeat_last_n);
    if (n_vocab < 1) return err_set(err, SD_ERR_ARG, "vocabulary size %d", n_vocab);
    sd_sampler *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, SD_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->idx = malloc((size_t)n_vocab * sizeof *s->idx);
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    if (!s->work || !s->idx || !s->probs) {
        sd_sampler_free(s);
        return err_set(err, SD_ERR_NOMEM, "out of memory");
    }
    rng_seed(&s->r, p->seed);
    *out = s;
    return SD_OK;
}

void sd_sampler_free(sd_sampler *s) {
    if (!s) return;
    free(s->work);
    free(s->idx);
    free(s->probs);
    free(s);
}

bool sd_sampler_is_greedy(const sd_sampler *s) { return s->p.temp <= 0.0f; }
void sd_sampler_get_params(const sd_sampler *s, sd_sampler_params *out) { *out = s->p; }

/* descending by value, ascending id on ties (a total order, so results do not depend on the algorithm) */
static int cmp_desc(const void *a, const void *b, const float *v) {
    int i = *(const int *)a, j = *(const int *)b;
    if (v[i] > v[j]) return -1;
    if (v[i] < v[j]) return 1;
    return (i > j) - (i < j);
}

/* Sift-down in a heap whose root is the WORST entry (by cmp_desc). */
static void sift_worst(int *idx, int n, int root, const float *v) {
    for (;;) {
        int ch = 2 * root + 1;
        if (ch >= n) return;
        if (ch + 1 < n && cmp_desc(&idx[ch + 1], &idx[ch], v) > 0) ch++;
        if (cmp_desc(&idx[ch], &idx[root], v) <= 0) return;
        int t = idx[ch];
        idx[ch] = idx[root];
        idx[root] = t;
        root = ch;
    }
}

/* Heap sort, best first (deterministic: cmp_desc is a total order). */
static void sort_desc(int *idx, int n, const float *v) {
    for (int r = n / 2 - 1; r >= 0; r--) sift_worst(idx, n, r, v);
    for (int end = n - 1; end > 0; end--) {
        int t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        sift_worst(idx, end, 0, v);
    }
}

/* The k best of ids 0..V-1 into idx[0..k), best first: a k-entry heap with the worst at the root, O(V log k).
 * The same k ids in the same order as a full sort. */
static void top_k_desc(int *idx, int V, int k, const float *v) {
    for (int i = 0; i < k; i++) idx[i] = i;
    for (int r = k / 2 - 1; r >= 0; r--) sift_worst(idx, k, r, v);
    for (int i = k; i < V; i++)
        if (cmp_desc(&i, &idx[0], v) < 0) {
            idx[0] = i;
            sift_worst(idx, k, 0, v);
        }
    sort_desc(idx, k, v);
}

void sd_sampler_probs(sd_sampler *s, const float *logits, const int32_t *history, int n_hist, float *probs) {
    const int V = s->n_vocab;
    float *l = s->work;
    memcpy(l, logits, (size_t)V * sizeof *l);
    if (s->p.repeat_penalty != 1.0f && history && n_hist > 0) {
        int from = n_hist > s->p.repeat_last_n ? n_hist - s->p.repeat_last_n : 0;
        /* each distinct token of the window once */
        for (int i = from; i < n_hist; i++) {
            int t = history[i];
            if (t < 0 || t >= V) continue;
            bool dup = false;
            for (int k = from; k < i && !dup; k++) dup = history[k] == t;
            if (dup) continue;
            l[t] = l[t] > 0 ? l[t] / s->p.repeat_penalty : l[t] * s->p.repeat_penalty;
        }
    }
    memset(probs, 0, (size_t)V * sizeof *probs);
    if (s->p.temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[best]) best = i;
        probs[best] = 1.0f;
        return;
    }
    int n = V;
    if (s->p.top_k > 0 && s->p.top_k < V) {
        n = s->p.top_k;
        top_k_desc(s->idx, V, n, l);
    } else {
        for (int i = 0; i < V; i++) s->idx[i] = i;
        sort_desc(s->idx, V, l);
    }
    /* softmax at temperature 1 over the candidates for top-p / min-p */
    double mx = l[s->idx[0]], sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)l[s->idx[i]] - mx);
    if (s->p.top_p < 1.0f) {
        double cum = 0.0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += exp((double)l[s->idx[i]] - mx) / sum;
            if (cum >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (s->p.min_p > 0.0f) {
        double thr = log(s->p.min_p); /* p_i / p_max >= min_p  <=>  l_i - l_max >= log(min_p) */
        int keep = 1;
        while (keep < n && (double)l[s->idx[keep]] - mx >= thr) keep++;
        n = keep;
    }
    double z = 0.0;
    for (int i = 0; i < n; i++) z += exp(((double)l[s->idx[i]] - mx) / s->p.temp);
    for (int i = 0; i < n; i++) probs[s->idx[i]] = (float)(exp(((double)l[s->idx[i]] - mx) / s->p.temp) / z);
}

int32_t sd_sampler_draw(sd_sampler *s, const float *probs) {
    const int V = s->n_vocab;
    if (s->p.temp <= 0.0f) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (probs[i] > probs[best]) best = i;
        return best;
    }
    double total = 0.0;
    for (int i = 0; i < V; i++) total += probs[i];
    double u = rng_uniform(&s->r) * total, cum = 0.0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (probs[i] <= 0.0f) continue;
        cum += probs[i];
        last = i;
        if (u < cum) return i;
    }
    return last;
}

int32_t sd_sampler_sample(sd_sampler *s, const float *logits, const int32_t *history, int n_hist) {
    sd_sampler_probs(s, logits, history, n_hist, s->probs);
    return sd_sampler_draw(s, s->probs);
}

double sd_sampler_uniform(sd_sampler *s) { return rng_uniform(&s->r); }
