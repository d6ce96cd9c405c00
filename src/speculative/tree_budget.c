#include "speculative/tree_budget.h"

#include <stdlib.h>

static const double DECAY = 0.95; /* weight of the old counts per observed round */

bool tree_budget_init(tree_budget *b, int cap) {
    b->cap = cap < 1 ? 1 : cap;
    b->offered = calloc((size_t)b->cap, sizeof(double));
    b->accepted = calloc((size_t)b->cap, sizeof(double));
    b->p = calloc((size_t)b->cap, sizeof(double));
    b->rounds = 0;
    b->last = b->cap;
    if (b->offered && b->accepted && b->p) return true;
    tree_budget_free(b);
    return false;
}

void tree_budget_free(tree_budget *b) {
    free(b->offered);
    free(b->accepted);
    free(b->p);
    b->offered = b->accepted = b->p = NULL;
}

int tree_budget_best(const double *p, int cap, const sd_sv_latency *lat, double *goodput) {
    int best = 1;
    double e = 0, best_g = -1;
    for (int n = 1; n <= cap; n++) {
        e += p[n - 1];
        double t = sd_sv_latency_time(lat, n, 1), g = t > 0 ? (e + 1) / t : 0;
        if (g > best_g) best_g = g, best = n;
    }
    if (goodput) *goodput = best_g;
    return best;
}

int tree_budget_next(tree_budget *b, const sd_sv_latency *lat) {
    if (b->rounds < TREE_BUDGET_WARMUP || b->rounds % TREE_BUDGET_EXPLORE == 0 || !lat) return b->last = b->cap;
    for (int j = 0; j < b->cap; j++) b->p[j] = b->offered[j] > 0 ? b->accepted[j] / b->offered[j] : 0;
    return b->last = tree_budget_best(b->p, b->cap, lat, NULL);
}

void tree_budget_observe(tree_budget *b, int k, const uint8_t *on_path) {
    if (k > b->cap) k = b->cap;
    for (int j = 0; j < k; j++) {
        b->offered[j] = DECAY * b->offered[j] + 1;
        b->accepted[j] = DECAY * b->accepted[j] + (on_path[j] ? 1 : 0);
    }
    b->rounds++;
}
