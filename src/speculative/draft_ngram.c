/* draft_ngram: prompt lookup — find the latest earlier occurrence of the last n tokens (n = n_max..n_min) and
 * propose the tokens that followed it. No distribution: q is one-hot. */
#include <stdlib.h>
#include <string.h>

#include "speculative/spec.h"

typedef struct ngram_drafter {
    drafter base;
    int n_max, n_min;
} ngram_drafter;

static int ng_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    ngram_drafter *g = (ngram_drafter *)d;
    (void)err;
    t->onehot = true;
    for (int len = g->n_max; len >= g->n_min; len--) {
        if (len > n - 1) continue;
        const int32_t *pat = hist + n - len;
        for (int j = n - len - 1; j >= 0; j--) {
            if (memcmp(hist + j, pat, (size_t)len * sizeof *pat) != 0) continue;
            int k = 0;
            while (k < max && j + len + k < n) {
                ctrl_feat f = {1.0f, NULL, 0, k ? t->token[k - 1] : hist[n - 1]}; /* no distribution, no state */
                if (!ctrl_keep(c, k, &f)) break;
                t->token[k] = hist[j + len + k];
                k++;
            }
            if (k > 0) return k;
        }
    }
    return 0;
}

static void ng_free(drafter *d) { free(d); }

drafter *drafter_ngram_new(int n_max, int n_min) {
    ngram_drafter *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->base = (drafter){"ngram", 0, NULL, ng_draft, NULL, NULL, NULL, ng_free, NULL, NULL, NULL, NULL};
    g->n_max = n_max;
    g->n_min = n_min;
    return &g->base;
}
