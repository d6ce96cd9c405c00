/* auto_choose: the decision logic of --spec auto, free of any model so that it can be tested on synthetic tables.
 *
 * Acceptance, per candidate family (n-gram, draft model, early exit at depth E, plain decoding): decayed run-length
 * statistics. An observation is how many drafts a chain started at a round start would have had accepted: L (the
 * first mismatch), cut at kp when the family proposes fewer (an n-gram lookup's continuation; model drafters always
 * propose). S[j] = decayed weight of the observations with min(L, kp) >= j, K[j] = of those with kp >= j, W = of all:
 *   E[accepted | gamma g] = sum_{j=1..g} S[j] / W,   E[drafted | g] = sum_{j=1..g} K[j] / W.
 * Cost of a round, seconds: c (d + x) + v T(d), d = E[drafted | g], where T(n) is the verification pass over n drafts
 * (n + 1 positions; interpolated), c the drafter's cost per drafted token, x its extra drafting steps per round (early
 * exit's last draft through its layers; a lookup's fixed cost), v the fraction of a full pass the verification runs
 * (early exit: (L - E) / L).
 * Expected tokens/s of (family, g) = (E[accepted | g] + 1) / cost. The choice is the (family, g) with the highest;
 * another family takes over from the current one only when it beats the current family's best g by the hysteresis
 * fraction (within a family gamma moves freely: switching it costs nothing). */
#ifndef SD_CTRL_AUTO_CHOOSE_H
#define SD_CTRL_AUTO_CHOOSE_H
#include <stdbool.h>

enum { AC_GMAX = 32 };

typedef struct ac_stats {
    double S[AC_GMAX + 1], K[AC_GMAX + 1]; /* [1..AC_GMAX] */
    double W;
    int n_obs;
} ac_stats;

/* A prior worth prior_w observations of per-token acceptance a (S[j] = w a^j, K[j] = w). */
void ac_stats_init(ac_stats *s, double prior_w, double a);
/* One observation (L accepted of a proposal of kp, kp >= AC_GMAX: unbounded) of weight w (1: a round; less: e.g.
 * one of the prompt's positions, which need not look like the answer); the old weight times decay^w. */
void ac_stats_observe(ac_stats *s, int L, int kp, double decay, double w);
double ac_stats_acc(const ac_stats *s, int g);
double ac_stats_drafted(const ac_stats *s, int g);

typedef struct ac_family {
    ac_stats st;
    double c, x, v; /* the cost model above */
    int gmax;       /* 0: plain decoding (no drafts) */
    bool off;       /* not a candidate now */
} ac_family;

/* T(n) from a table t[0..n_t] (seconds of a verification of n drafts), linear between entries and past the end. */
double ac_verify_time(const double *t, int n_t, double n);
/* Expected tokens/s of family f drafting with gamma g (g = 0: a plain step) and the expected accepted drafts. */
double ac_rate(const ac_family *f, int g, const double *t, int n_t, double *acc);

typedef enum { AC_BEST, AC_HELD, AC_PROBE } ac_reason;

typedef struct ac_pick {
    int fam, g;
    double rate;
    ac_reason why;
} ac_pick;

/* The best g of family i and its rate. */
double ac_best_g(const ac_family *f, const double *t, int n_t, int *g);
/* The choice over families fam[0..n) (cur: the family running now, -1 none yet; hyst: the hysteresis fraction). */
ac_pick ac_choose(const ac_family *fam, int n, const double *t, int n_t, int cur, double hyst);
#endif
