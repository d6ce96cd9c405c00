/* draft_ngram: prompt lookup — find the latest earlier occurrence of the last n tokens (n = n_max..n_min) and
 * propose the tokens that followed it. No distribution: q is one-hot.
 *
 * The proposal is the lookup in the text extended by its own proposal: where the tokens that followed the
 * occurrence run into the end of the history (the occurrence is P tokens back, the text repeating with period P),
 * it goes on with its own proposal P tokens back. A text in a loop of P tokens is proposed up to the round's limit,
 * not only up to P. */
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
            const int P = n - (j + len); /* the occurrence's distance back: hist[j + len + k] for k < P */
            int k = 0;
            while (k < max) {
                ctrl_feat f = {1.0f, NULL, 0, k ? t->token[k - 1] : hist[n - 1]}; /* no distribution, no state */
                if (!ctrl_keep(c, k, &f)) break;
                t->token[k] = k < P ? hist[j + len + k] : t->token[k - P];
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
    g->base = (drafter){"ngram", 0, NULL, ng_draft, NULL, NULL, NULL, ng_free, NULL, NULL, NULL, NULL, NULL};
    g->n_max = n_max;
    g->n_min = n_min;
    return &g->base;
}
