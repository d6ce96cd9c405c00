/* tree_budget: SWIFT's automatic token-tree node budget (tree_nodes = SD_TREE_AUTO; methods.md 4, "on this CPU large
 * trees are expensive"). The SWIFT drafter adds a round's nodes in a fixed order — its chain first, then each chain
 * position's alternatives from the shallowest position down — and a smaller budget keeps a prefix of that list, with
 * the same nodes and the same acceptance of each (a node is accepted when its parent is and the target agrees with
 * its token; the nodes after it do not matter). So E[accepted | N] = sum_{j<N} p_j, p_j = P(node j of the list lies
 * on the accepted path), estimated per list index from decayed counts; the budget maximises the goodput
 *   (E[accepted | N] + 1) / T(N),  N = 1..cap,
 * T(N) = the measured latency of a target pass over N + 1 positions of one sequence (sd_sv_latency, b = 1). A list
 * index never offered counts p = 0, so the first rounds and every EXPLORE-th round offer the cap: the deep nodes'
 * estimates stay measured as acceptance changes. */
#ifndef SD_SPEC_TREE_BUDGET_H
#define SD_SPEC_TREE_BUDGET_H
#include <stdbool.h>
#include <stdint.h>

#include "specdec.h"

enum { TREE_BUDGET_WARMUP = 4, TREE_BUDGET_EXPLORE = 32 };

typedef struct tree_budget {
    int cap;           /* most nodes */
    double *offered;   /* [cap] decayed count of rounds that offered list index j */
    double *accepted;  /* [cap] decayed count of rounds where index j was on the accepted path */
    double *p;         /* [cap] scratch: the estimates */
    int rounds;        /* rounds observed */
    int last;          /* the budget of the latest round */
} tree_budget;

/* false when out of memory. */
bool tree_budget_init(tree_budget *b, int cap);
void tree_budget_free(tree_budget *b);
/* The budget of the next round: the cap while warming up and on exploration rounds, else the best N. */
int tree_budget_next(tree_budget *b, const sd_sv_latency *lat);
/* A verified round offered list indices [0, k); on_path[j]: index j was on the accepted path. */
void tree_budget_observe(tree_budget *b, int k, const uint8_t *on_path);
/* The rule alone: the N in [1, cap] maximising (sum_{j<N} p[j] + 1) / T(N) (the smallest N on ties); its goodput
 * (tokens per second) into *goodput when not NULL. */
int tree_budget_best(const double *p, int cap, const sd_sv_latency *lat, double *goodput);
#endif
