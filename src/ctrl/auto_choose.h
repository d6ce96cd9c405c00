/* auto_choose: the decision logic of --spec auto, free of any model so that it can be tested on synthetic tables.
 *
 * Acceptance, per candidate (family, gamma g), by replay. With greedy decoding the text does not depend on the
 * method, so what a family would have done with a fixed g over the text so far is known exactly: a round started at
 * position p (a chain drafted from text[0 .. p]) accepts L drafts — the run of the family's predictions from p that
 * match the text, at most g; an n-gram lookup proposes d <= g and is cut there — and the next round starts at
 * p + L + 1, after the target's own token. Every (family, g) replays its own rounds over the same text, so its
 * estimate is counted where that method's rounds would have started: after a miss a round starts at the target's
 * token, and the positions a method's rounds see are not a uniform sample of the text (an estimate from every
 * position undercounts a method whose misses come between long runs, more so the longer its gamma). With sampling
 * the text depends on the method and a greedy match stands for an acceptance: there it is an estimate.
 *
 * A replay keeps decayed sums (the old ones times decay^w per round of weight w): R rounds, A accepted drafts,
 * D drafted, Rd rounds that drafted, H[d] rounds that drafted d. Their cost, seconds:
 *     c (D + x Rd) + v sum_d H[d] T(d) + o R
 * where T(n) is the verification pass over n drafts (n + 1 positions), c the drafter's cost per drafted token, x its
 * extra steps per round that drafts (early exit's last draft through its layers; a lookup), v the fraction of a pass
 * the verification runs (early exit: (L - E) / L), o the per-round cost every candidate pays alike (the estimators).
 * Expected tokens/s of (family, g) = (A + R) / cost. A family that knows how many drafts it can propose now (the
 * lookup: avail, 0 when nothing matches) is rated for that round: with avail = 0 a plain step; else d = min(avail,
 * g) drafts accepting A / Rd (its replayed rounds that drafted), at most d, at the cost of those d.
 *
 * The choice is the (family, g) with the highest rate; a different g of the running family, or another family, takes
 * over only when it beats the running (family, g) by the hysteresis fraction. Switching costs nothing, but the
 * estimates are noisy and the highest of many noisy ones is the luckiest: without it a few lucky rounds of a long
 * gamma made it look best, and it then accepted less than expected (auto 4.5% behind the best fixed gamma in a
 * replay of the mixed set's texts, bench/auto_replay; held by 10%, 2.8% behind). */
#ifndef SD_CTRL_AUTO_CHOOSE_H
#define SD_CTRL_AUTO_CHOOSE_H
#include <stdbool.h>

enum { AC_GMAX = 32 };

/* One (family, gamma)'s replayed rounds. */
typedef struct ac_sim {
    int next;                 /* the text position its next round starts at */
    double R, A, D, Rd;
    double H[AC_GMAX + 1];    /* [0..g] */
} ac_sim;

/* A prior worth w rounds of g drafts with per-token acceptance a (A = w sum_{j<=g} a^j); the first round at start. */
void ac_sim_init(ac_sim *s, int g, double w, double a, int start);
/* One round of weight w: L accepted of d drafted (d = 0: a plain step). */
void ac_sim_round(ac_sim *s, int L, int d, double decay, double w);

typedef struct ac_family {
    ac_sim sim[AC_GMAX + 1]; /* [1..gmax] */
    double c, x, v;          /* the cost model above */
    bool alone;              /* its drafting runs per sequence (on the target: early exit, SWIFT), not merged with a
                              * batch's: where every sequence drafts, its drafting time adds up over them */
    int gmax;                /* 0: plain decoding (no drafts) */
    bool avail_known;        /* it knows how many drafts it can propose this round (a lookup): avail */
    int avail;
    bool off;                /* not a candidate now */
} ac_family;

/* The round of a chain of at most g drafts started at text position p: 1 (*L accepted of *d drafted), 0 (the text
 * does not decide it yet) or -1 (no observation at p: the replay moves on to p + 1). */
typedef int (*ac_outcome)(void *user, int p, int g, int *L, int *d);
/* Replays the rounds of every gamma of f that the text now decides; rounds started before p_full weigh w_before
 * (the prompt, which need not look like the answer), the others 1. */
void ac_replay(ac_family *f, ac_outcome out, void *user, double decay, int p_full, double w_before);

/* dst's replays start from src's (another generation's): each gamma of both (src's with rounds) takes src's sums,
 * scaled down to at most max_rounds rounds, its first round at start. */
void ac_carry(ac_family *dst, const ac_family *src, int start, double max_rounds);

/* T(n) from a table t[0..n_t] (seconds of a verification of n drafts), linear between entries and past the end. */
double ac_verify_time(const double *t, int n_t, double n);

/* What a round costs where it runs: t[0..n_t] the seconds of the verification pass when the round drafts n (alone:
 * T(n); in a batch: the merged pass with the other sequences' blocks as they are), o the per-round overhead every
 * candidate pays, others the tokens the other seqs - 1 sequences of the pass emit in it (0 alone). A round's rate
 * is the pass's, (others + accepted + 1) / seconds, so a round that makes everyone's pass dearer pays for it. In a
 * batch t_all (else NULL) is the merged pass when every sequence drafts n, and the rate is also the batch's if all
 * did as this round, seqs (accepted + 1) / seconds: a draft counts the lower of the two, a plain step the higher.
 * The first alone lets one sequence's long draft slow every other's pass; the second alone keeps a batch drafting
 * once all draft (their passes are dear already, so one more draft looks cheap) where all plain steps are faster. */
typedef struct ac_costs {
    const double *t;
    int n_t;
    double o, others;
    int seqs;
    const double *t_all;
} ac_costs;

/* Expected tokens/s of family f drafting with gamma g (g = 0: a plain step); acc: the expected accepted drafts per
 * round, secs: the expected seconds per round (either may be NULL). */
double ac_rate(const ac_family *f, int g, const ac_costs *k, double *acc, double *secs);

typedef enum { AC_BEST, AC_HELD, AC_PROBE } ac_reason;

typedef struct ac_pick {
    int fam, g;
    double rate;
    ac_reason why;
} ac_pick;

/* The best g of family f and its rate. */
double ac_best_g(const ac_family *f, const ac_costs *k, int *g);
/* The choice over families fam[0..n) (cur, cur_g: the family running now and its gamma, cur = -1 none yet; hyst:
 * the hysteresis fraction). */
ac_pick ac_choose(const ac_family *fam, int n, const ac_costs *k, int cur, int cur_g, double hyst);

struct sd_sv_latency;
/* A round in a batch of nb sequences whose verification passes merge, the others' blocks holding others_d drafts in
 * all, from the latency table, made non-decreasing: out[0..n] = T(others_d + d, nb), the merged pass when this round
 * drafts d; out_all[0..n] = T(nb d, nb), when every sequence does (ac_costs.t and t_all). On a CPU whose pass costs
 * the same up to a few positions, a batch that fills them leaves a round little room. */
void ac_batch_costs(const struct sd_sv_latency *l, int nb, int others_d, int n, double *out, double *out_all);

/* Makes t[0..n] non-decreasing with the least squared change (pool adjacent violators): a latency table measured
 * on a busy machine has cells that came out faster than their smaller neighbours. */
void ac_monotone(double *t, int n);
#endif
