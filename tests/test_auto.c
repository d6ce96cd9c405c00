/* --spec auto:
 *  1. the chooser on synthetic cost / acceptance tables: run-length statistics, the best (family, gamma), a cost
 *     change that flips the choice, hysteresis that holds the running family and lets a clearly better one in,
 *     plain decoding when nothing is accepted;
 *  2. greedy: auto's output equals plain greedy on every model of the test set, with and without a draft model,
 *     choosing freely, switching method every round (probe = 1), and starting from the estimates earlier
 *     generations left (sd_auto_state); after every round the target's cache and the
 *     draft model's equal a plain run's over the same tokens (bit for bit);
 *  3. a batch of auto sessions in the scheduler gives every session its plain greedy output;
 *  4. sampling: the first sampled token follows the target's distribution (chi-square) with each drafting family
 *     alone (SWIFT included) and with all of them;
 *  5. the registry: candidates / exits parsing and the errors for what a pool lacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/auto_choose.h"
#include "specdec.h"
#include "testlib.h"

/* ------------------------------------------------------------------ 1. the chooser */
/* A synthetic text for the replay: m[q] = 1 when the family's prediction at q is the text's next token, 0 when not,
 * -1 when it has none; k[q] (when set) the length of a lookup's proposal at q. */
typedef struct synth {
    const int *m, *k;
    int n; /* positions 0..n-1 of the text exist */
} synth;

static int synth_outcome(void *user, int p, int g, int *L, int *d) {
    const synth *sy = user;
    if (p > sy->n - 1) return 0;
    *d = sy->k ? (sy->k[p] < g ? sy->k[p] : g) : g;
    for (int j = 0; j < *d; j++) {
        if (p + j + 1 > sy->n - 1) return 0;
        if (sy->m[p + j] < 0) return -1;
        if (!sy->m[p + j]) return *L = j, 1;
    }
    if (p + *d + 1 > sy->n - 1) return 0;
    return *L = *d, 1;
}

static void chooser(void) {
    /* the replay counts where each gamma's own rounds start: runs of 3 matches between misses. With g = 4 every
     * round starts after a miss (at the target's token) and accepts 3; with g = 2: 2 accepted, then a round that
     * starts on the miss. (Every position alike would say 1.5 and 1.25.) */
    const int m[13] = {1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1};
    synth sy = {m, NULL, 13};
    ac_family f0 = {.c = 0, .v = 1, .gmax = 4};
    for (int g = 1; g <= 4; g++) ac_sim_init(&f0.sim[g], g, 0, 0, 0);
    ac_replay(&f0, synth_outcome, &sy, 1.0, 0, 1.0);
    CHECK(f0.sim[4].R == 3 && f0.sim[4].A == 9 && f0.sim[4].D == 12 && f0.sim[4].next == 12,
          "g = 4: 3 rounds of 3 accepted (R %g A %g next %d)", f0.sim[4].R, f0.sim[4].A, f0.sim[4].next);
    CHECK(f0.sim[2].R == 6 && f0.sim[2].A == 6 && f0.sim[2].next == 12, "g = 2: 6 rounds, 6 accepted (R %g A %g)",
          f0.sim[2].R, f0.sim[2].A);
    /* more text decides the pending round; a gap is skipped; the prompt's rounds weigh less; decay per round */
    const int m2[10] = {1, 1, -1, 1, 1, 1, 1, 1, 0, 1};
    synth s2 = {m2, NULL, 4};
    ac_family f1 = {.v = 1, .gmax = 3};
    ac_sim_init(&f1.sim[3], 3, 0, 0, 0);
    ac_replay(&f1, synth_outcome, &s2, 0.5, 3, 0.25);
    CHECK(f1.sim[3].R == 0 && f1.sim[3].next == 3, "the gap at 2 skipped, round at 3 pending (R %g next %d)",
          f1.sim[3].R, f1.sim[3].next);
    s2.n = 10;
    ac_replay(&f1, synth_outcome, &s2, 0.5, 3, 0.25);
    /* rounds at 3 (L 3, next 7, weight 1) and 7 (L 1: miss at 8, next 9) */
    CHECK(f1.sim[3].R == 0.5 * 1 + 1 && f1.sim[3].A == 0.5 * 3 + 1 && f1.sim[3].next == 9, "decayed sums (R %g A %g)",
          f1.sim[3].R, f1.sim[3].A);
    ac_family f2 = {.v = 1, .gmax = 2};
    ac_sim_init(&f2.sim[2], 2, 0, 0, 0);
    ac_replay(&f2, synth_outcome, &(synth){m, NULL, 13}, 1.0, 4, 0.25); /* rounds at 0 and 3 are the prompt's */
    CHECK(fabs(f2.sim[2].R - 4.5) < 1e-12 && fabs(f2.sim[2].A - 4.5) < 1e-12, "prompt rounds weigh 0.25 (R %g A %g)",
          f2.sim[2].R, f2.sim[2].A);
    /* a lookup proposes fewer than g: drafted counts by length, rounds that drafted nothing are plain steps */
    const int mk[8] = {1, 1, 1, 1, 1, 1, 1, 1}, kk[8] = {0, 2, 5, 0, 0, 0, 0, 0};
    ac_family fl = {.c = 0.01, .x = 1, .v = 1, .gmax = 4};
    for (int g = 1; g <= 4; g++) ac_sim_init(&fl.sim[g], g, 0, 0, 0);
    ac_replay(&fl, synth_outcome, &(synth){mk, kk, 8}, 1.0, 0, 1.0);
    /* g = 4: rounds at 0 (d 0), 1 (d 2, L 2), 4 (d 0), 5, 6 (d 0) */
    const ac_sim *l4 = &fl.sim[4];
    CHECK(l4->R == 5 && l4->A == 2 && l4->D == 2 && l4->Rd == 1 && l4->H[0] == 4 && l4->H[2] == 1,
          "lookup rounds (R %g A %g D %g Rd %g)", l4->R, l4->A, l4->D, l4->Rd);
    const double Tl[5] = {1, 1.5, 2, 3, 4};
    double acc, secs, r = ac_rate(&fl, 4, &(ac_costs){Tl, 4, 0.1, 0, 1, NULL}, &acc, &secs);
    const double want_s = (0.01 * (2 + 1) + 4 * 1 + 1 * 2) / 5 + 0.1;
    CHECK(fabs(secs - want_s) < 1e-12 && fabs(acc - 0.4) < 1e-12 && fabs(r - 1.4 / want_s) < 1e-12,
          "rate = (A + R) / cost (%g s, %g acc)", secs, acc);
    /* the lookup's proposal of this round is known: none -> a plain step's cost and nothing accepted; d drafts ->
     * the acceptance of its rounds that drafted (2 of 1), capped at d, at the cost of d */
    fl.avail_known = true, fl.avail = 0;
    r = ac_rate(&fl, 4, &(ac_costs){Tl, 4, 0.1, 0, 1, NULL}, &acc, &secs);
    CHECK(acc == 0 && fabs(secs - (0.01 + 1 + 0.1)) < 1e-12, "no proposal now: a plain step (%g s)", secs);
    fl.avail = 3;
    r = ac_rate(&fl, 4, &(ac_costs){Tl, 4, 0.1, 0, 1, NULL}, &acc, &secs);
    CHECK(fabs(acc - 2) < 1e-12 && fabs(secs - (0.01 * 4 + 3 + 0.1)) < 1e-12 && fabs(r - 3 / secs) < 1e-12,
          "a proposal of 3 now (acc %g, %g s)", acc, secs);
    fl.avail = 1;
    ac_rate(&fl, 4, &(ac_costs){Tl, 4, 0.1, 0, 1, NULL}, &acc, NULL);
    CHECK(fabs(acc - 1) < 1e-12, "capped at the proposal (%g)", acc);
    fl.avail_known = false;
    /* T(n) interpolation; a measured table made non-decreasing */
    CHECK(fabs(ac_verify_time(Tl, 4, 2.5) - 2.5) < 1e-12 && fabs(ac_verify_time(Tl, 4, 6) - 6) < 1e-12,
          "T interpolated and extended");
    double mt[6] = {1, 0.8, 1.2, 1.1, 2, 2};
    ac_monotone(mt, 5);
    CHECK(fabs(mt[0] - 0.9) < 1e-12 && fabs(mt[1] - 0.9) < 1e-12 && fabs(mt[2] - 1.15) < 1e-12 &&
              fabs(mt[3] - 1.15) < 1e-12 && mt[4] == 2 && mt[5] == 2,
          "monotone table (%g %g %g %g)", mt[0], mt[1], mt[2], mt[3]);

    /* families on synthetic tables: 0 plain, 1 a free lookup accepting 90% per token, 2 a costly drafter 95% */
    double Tf[AC_GMAX + 1], Ts[AC_GMAX + 1];
    for (int i = 0; i <= AC_GMAX; i++) Tf[i] = 1 + 0.02 * i, Ts[i] = 1 + 0.5 * i; /* flat and steep T */
    static ac_family f[3];
    f[0] = (ac_family){.v = 1, .gmax = 0};
    f[1] = (ac_family){.c = 0.001, .x = 1, .v = 1, .gmax = 16};
    f[2] = (ac_family){.c = 0.3, .v = 1, .gmax = 16};
#define PLANT(fam, a)                                                                                                \
    for (int g = 1; g <= 16; g++) ac_sim_init(&(fam).sim[g], g, 100, a, 0)
    PLANT(f[1], 0.9);
    PLANT(f[2], 0.95);
    ac_pick p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, -1, -1, 0.05);
    int g_lookup = p.g;
    CHECK(p.fam == 1 && p.why == AC_BEST && p.g >= 8, "flat T: the free lookup with a long gamma (got family %d, g %d)",
          p.fam, p.g);
    double a = 0, q = 1; /* the pick's rate by hand */
    for (int j = 1; j <= p.g; j++) q *= 0.9, a += q;
    CHECK(fabs(p.rate - (a + 1) / (0.001 * (p.g + 1) + 1 + 0.02 * p.g)) < 1e-9, "rate formula (%g)", p.rate);
    p = ac_choose(f, 3, &(ac_costs){Ts, 16, 0, 0, 1, NULL}, 1, g_lookup, 0.05); /* a steep T shortens gamma */
    CHECK(p.fam == 1 && p.g >= 1 && p.g < g_lookup, "steep T: a shorter gamma (%d vs %d)", p.g, g_lookup);
    f[1].c = 0.5, f[2].c = 0.001; /* a cost change flips it */
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, -1, -1, 0.05);
    CHECK(p.fam == 2 && p.why == AC_BEST, "cost change: the drafter (got %d)", p.fam);
    /* an overhead every candidate pays favours longer rounds */
    int g_o0, g_o1;
    ac_best_g(&f[2], &(ac_costs){Ts, 16, 0, 0, 1, NULL}, &g_o0);
    ac_best_g(&f[2], &(ac_costs){Ts, 16, 5, 0, 1, NULL}, &g_o1);
    CHECK(g_o1 > g_o0, "a per-round overhead lengthens gamma (%d vs %d)", g_o1, g_o0);
    /* hysteresis: the lookup runs and the drafter is better by less than the fraction -> held */
    f[1].c = 0.001, f[2].c = 0.001;
    PLANT(f[2], 0.905);
    int g1, g2;
    double r1 = ac_best_g(&f[1], &(ac_costs){Tf, 16, 0, 0, 1, NULL}, &g1), r2 = ac_best_g(&f[2], &(ac_costs){Tf, 16, 0, 0, 1, NULL}, &g2);
    CHECK(r2 > r1 && r2 < r1 * 1.05, "the planted margin (%g vs %g)", r2, r1);
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, 1, g1, 0.05);
    CHECK(p.fam == 1 && p.why == AC_HELD && p.g == g1, "hysteresis holds the running family (got %d, why %d)", p.fam,
          p.why);
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, 1, g1, 0.0);
    CHECK(p.fam == 2 && p.why == AC_BEST, "no hysteresis: the better one (got %d)", p.fam);
    PLANT(f[2], 0.97);
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, 1, g1, 0.05);
    CHECK(p.fam == 2 && p.why == AC_BEST, "a clearly better family takes over (got %d)", p.fam);
    /* nothing accepted: plain decoding; a family that is off is never chosen */
    PLANT(f[1], 0);
    PLANT(f[2], 0);
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, -1, -1, 0.05);
    CHECK(p.fam == 0 && p.g == 0, "no acceptance: plain decoding (got %d, g %d)", p.fam, p.g);
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, 2, 1, 0.05); /* within the hysteresis of plain decoding: held */
    CHECK(p.fam == 2 && p.why == AC_HELD, "no acceptance, running family held (got %d)", p.fam);
    PLANT(f[2], 0.9);
    f[2].off = true;
    p = ac_choose(f, 3, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, 0, 0, 0.05);
    CHECK(p.fam == 0, "a family that is off is not chosen (got %d)", p.fam);
    /* early exit's cost model: per-token cost c, one more step per round, verification share v */
    ac_family e = {.c = 0.25, .x = 1, .v = 0.75, .gmax = 4};
    ac_sim_init(&e.sim[2], 2, 1, 1.0, 0);
    r = ac_rate(&e, 2, &(ac_costs){Tf, 16, 0, 0, 1, NULL}, &acc, NULL);
    CHECK(fabs(acc - 2) < 1e-12 && fabs(r - 3 / (0.25 * 3 + 0.75 * Tf[2])) < 1e-12, "early exit cost (%g)", r);
    /* gamma's hysteresis: the running gamma stays while another beats it by less than the fraction */
    f[2].off = false;
    PLANT(f[1], 0.9);
    int gb;
    const double rb = ac_best_g(&f[1], &(ac_costs){Ts, 16, 0, 0, 1, NULL}, &gb);
    const int gn = gb + 1;
    const double rn = ac_rate(&f[1], gn, &(ac_costs){Ts, 16, 0, 0, 1, NULL}, NULL, NULL);
    CHECK(rn < rb, "the planted gammas (%g < %g)", rn, rb);
    p = ac_choose(f, 2, &(ac_costs){Ts, 16, 0, 0, 1, NULL}, 1, gn, rb / rn - 1 + 0.01);
    CHECK(p.fam == 1 && p.g == gn && p.why == AC_HELD, "a gamma within the hysteresis is held (got g %d)", p.g);
    p = ac_choose(f, 2, &(ac_costs){Ts, 16, 0, 0, 1, NULL}, 1, gn, rb / rn - 1 - 0.01);
    CHECK(p.fam == 1 && p.g == gb && p.why == AC_BEST, "a clearly better gamma takes over (got g %d)", p.g);
#undef PLANT
    /* another generation's estimates: scaled to at most 8 rounds, the same acceptance per round, from start */
    static ac_family src, dst;
    src = (ac_family){.v = 1, .gmax = 4};
    dst = (ac_family){.v = 1, .gmax = 3};
    ac_sim_init(&src.sim[2], 2, 20, 0.8, 0);
    ac_sim_init(&src.sim[3], 3, 5, 0.6, 40);
    ac_sim_init(&src.sim[4], 4, 30, 0.9, 0);
    for (int g = 1; g <= 3; g++) ac_sim_init(&dst.sim[g], g, 1, 0.5, 7);
    ac_carry(&dst, &src, 12, 8);
    CHECK(dst.sim[2].R == 8 && fabs(dst.sim[2].A / dst.sim[2].R - src.sim[2].A / src.sim[2].R) < 1e-12 &&
              dst.sim[2].H[2] == 8 && dst.sim[2].next == 12,
          "carried: 20 rounds scaled to 8 (R %g, next %d)", dst.sim[2].R, dst.sim[2].next);
    CHECK(dst.sim[3].R == 5 && dst.sim[3].A == src.sim[3].A && dst.sim[3].next == 12, "carried: 5 rounds as they are");
    CHECK(dst.sim[1].R == 1 && dst.sim[1].next == 7, "no rounds of g = 1 to carry: the prior stays");
    /* a round in a batch: the merged pass with the others' blocks (flat alone; in a batch of 4, 0.3 s more per drafted
     * position in all), rated as the pass's tokens over its seconds, and as the batch's if all did the same */
    {
        const int bs[2] = {1, 4};
        double tab[2][9], roomy[2][9];
        for (int x = 0; x <= 8; x++) {
            tab[0][x] = roomy[0][x] = 1 + 0.02 * x;
            tab[1][x] = 1.3 + 1.2 * x;
            roomy[1][x] = x <= 1 ? 1.3 : 1.3 + 1.2 * (x - 1); /* 4 sequences verify one draft each for free */
        }
        sd_sv_latency *lat = NULL, *lat_r = NULL;
        CHECK(sd_sv_latency_new(8, bs, 2, &tab[0][0], &lat, NULL) == SD_OK &&
                  sd_sv_latency_new(8, bs, 2, &roomy[0][0], &lat_r, NULL) == SD_OK,
              "synthetic latency tables");
        double T1[AC_GMAX + 1], A1[AC_GMAX + 1], T4[AC_GMAX + 1], A4[AC_GMAX + 1], T4o[AC_GMAX + 1], A4o[AC_GMAX + 1],
            R4[AC_GMAX + 1], RA4[AC_GMAX + 1];
        ac_batch_costs(lat, 1, 0, 8, T1, A1);
        ac_batch_costs(lat, 4, 0, 8, T4, A4);
        ac_batch_costs(lat, 4, 12, 8, T4o, A4o);
        ac_batch_costs(lat_r, 4, 0, 8, R4, RA4);
        CHECK(fabs(T1[3] - 1.06) < 1e-12 && fabs(T4[0] - 1.3) < 1e-12 && fabs(T4[3] - (1.3 + 0.9)) < 1e-12 &&
                  fabs(A4[2] - (1.3 + 2.4)) < 1e-12 && fabs(T4o[2] - (1.3 + 4.2)) < 1e-12 && fabs(RA4[1] - 1.3) < 1e-12,
              "merged pass costs (alone %g; 4 at 3 drafts %g; all 2 %g; others 12 + 2 %g)", T1[3], T4[3], A4[2], T4o[2]);
        static ac_family b[2];
        b[0] = (ac_family){.v = 1, .gmax = 0};
        b[1] = (ac_family){.c = 0.001, .v = 1, .gmax = 8};
        for (int g = 1; g <= 8; g++) ac_sim_init(&b[1].sim[g], g, 100, 0.8, 0);
        ac_pick alone = ac_choose(b, 2, &(ac_costs){T1, 8, 0, 0, 1, NULL}, -1, -1, 0.1),
                plain4 = ac_choose(b, 2, &(ac_costs){T4, 8, 0, 3, 4, A4}, -1, -1, 0.1),
                busy4 = ac_choose(b, 2, &(ac_costs){T4o, 8, 0, 3 * 3.36, 4, A4o}, -1, -1, 0.1),
                room4 = ac_choose(b, 2, &(ac_costs){R4, 8, 0, 3, 4, RA4}, -1, -1, 0.1);
        CHECK(alone.fam == 1 && alone.g >= 4, "alone: long drafts (family %d, g %d)", alone.fam, alone.g);
        CHECK(plain4.fam == 0, "a batch of plain steps: plain decoding (family %d, g %d)", plain4.fam, plain4.g);
        /* all drafting 4: each pass is dear already and one more draft looks cheap, but all plain steps are faster */
        CHECK(busy4.fam == 0, "a batch where all draft: back to plain decoding (family %d, g %d)", busy4.fam, busy4.g);
        CHECK(room4.fam == 1 && room4.g == 2, "a batch with room: drafts as far as all can (family %d, g %d)", room4.fam,
              room4.g);
        double bacc;
        const double br = ac_rate(&b[1], 2, &(ac_costs){T4, 8, 0, 3, 4, NULL}, &bacc, NULL);
        CHECK(fabs(br - (3 + 1.44 + 1) / (0.001 * 2 + 1.3 + 0.6)) < 1e-9 && fabs(bacc - 1.44) < 1e-9,
              "a batched round's rate: the pass's tokens over its seconds (%g)", br);
        const double ba = ac_rate(&b[1], 2, &(ac_costs){T4, 8, 0, 3, 4, A4}, NULL, NULL);
        CHECK(fabs(ba - 4 * 2.44 / (0.001 * 2 + 1.3 + 2.4)) < 1e-9, "... and the lower one if all did the same (%g)", ba);
        sd_sv_latency_free(lat);
        sd_sv_latency_free(lat_r);
    }
    printf("  chooser: replayed rounds, rates, gamma by T, cost flip, overhead, hysteresis of family and gamma, plain "
           "fallback, estimates carried, batched rounds\n");
}

/* ------------------------------------------------------------------ 2. greedy + caches */
/* one thread: 2 threads spin-wait for each other, minutes instead of seconds on a busy 2-core machine */
static sd_ctx *mkctx(sd_model *m, int n_ctx, int n_seq) { return tl_ctx(m, n_ctx, n_seq, 32, 1); }

typedef struct round_check {
    sd_ctx *target, *ref, *draft, *draft_ref;
    int kvd, kvd_draft, n_layer, n_layer_draft;
    bool ok;
    int rounds;
} round_check;

static bool on_round(const sd_spec_round *r, void *user) {
    round_check *rc = user;
    rc->rounds++;
    const int n = r->n_committed;
    if (sd_kv_len(rc->target, 0, -1) != n || !tl_same_kv_rows(rc->target, rc->ref, rc->n_layer, rc->kvd, n, false))
        rc->ok = false;
    if (rc->draft) {
        int nd = sd_kv_len(rc->draft, 0, -1);
        if (nd > n || !tl_same_kv_rows(rc->draft, rc->draft_ref, rc->n_layer_draft, rc->kvd_draft, nd, false))
            rc->ok = false;
    }
    return true;
}

typedef struct model_case {
    const char *target, *draft;
} model_case;

static const char *const TEXTS[3] = {"Once upon a time",
                                     "The little dog ran to the park. The little dog ran to the park and saw a big red ball. The",
                                     ""};

static void greedy_case(const model_case *mc, int n_predict) {
    sd_model *tm = tl_load_model(mc->target), *dm = mc->draft ? tl_load_model(mc->draft) : NULL;
    if (!tm || (mc->draft && !dm)) return;
    sd_model_info ti;
    sd_model_get_info(tm, &ti);
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *smp;
    sd_sampler_new(&spp, ti.n_vocab, &smp, NULL);
    int runs = 0, bad = 0, rounds = 0, cache_bad = 0, switches = 0, fams_used = 0, swift_rounds = 0, opt_steps = 0;
    sd_auto_state *carried = NULL;
    CHECK(sd_auto_state_new(&carried, NULL) == SD_OK, "an auto state");
    for (int t = 0; t < 3; t++) {
        int32_t prompt[128];
        int np = 0;
        sd_tokenize(tm, TEXTS[t], strlen(TEXTS[t]), true, false, prompt, 128, &np, NULL);
        if (np < 1) continue;
        const int n_ctx = np + n_predict; /* the last rounds are cut by the end of the context */
        sd_ctx *ct = mkctx(tm, n_ctx, 1), *cref = mkctx(tm, n_ctx, 1);
        sd_ctx *cd = dm ? mkctx(dm, n_ctx, 1) : NULL, *cdref = dm ? mkctx(dm, n_ctx, 1) : NULL;
        int32_t *plain = malloc((size_t)n_predict * sizeof *plain), *got = malloc((size_t)n_predict * sizeof *got);
        int32_t *seq = malloc((size_t)(np + n_predict) * sizeof *seq);
        int n_plain = 0;
        sd_error err = {0};
        CHECK(sd_generate(ct, smp, prompt, np, n_predict, true, plain, &n_plain, NULL, NULL, NULL, &err) == SD_OK,
              "plain: %s", err.msg);
        memcpy(seq, prompt, (size_t)np * sizeof *seq);
        memcpy(seq + np, plain, (size_t)n_plain * sizeof *seq);
        tl_plain_cache(cref, seq, np + n_plain - 1);
        if (cdref) tl_plain_cache(cdref, seq, np + n_plain - 1);
        for (int v = 0; v < 4; v++) { /* free choice; a new method every round; gamma up to 4 with exits 1..L-1;
                                        * free choice from the estimates of the case's earlier generations */
            sd_spec_params sp = sd_spec_default_params();
            sp.method = SD_SPEC_AUTO;
            sp.auto_state = v == 3 ? carried : NULL;
            sp.draft_ctx = cd;
            sp.auto_probe = v == 1 ? 1 : 0;
            sp.swift_window = 4; /* SWIFT's optimiser scores sets (on the cache's scratch extension) between rounds */
            if (v == 2) {
                sp.gamma_max = 4;
                for (int l = 1; l < ti.n_layer && l <= 8; l++) sp.auto_exits[sp.auto_n_exits++] = l;
                sp.auto_hysteresis = 0;
            }
            round_check rc = {ct, cref, cd, cdref, 0, 0, 0, 0, true, 0};
            rc.kvd = tl_kv_dim(tm, &rc.n_layer);
            if (dm) rc.kvd_draft = tl_kv_dim(dm, &rc.n_layer_draft);
            sp.round_cb = on_round;
            sp.round_user = &rc;
            int n_got = 0;
            sd_spec_stats st;
            sd_status s2 = sd_spec_generate(ct, smp, &sp, prompt, np, n_predict, true, got, &n_got, NULL, NULL, &st, &err);
            bool same = s2 == SD_OK && n_got == n_plain && memcmp(got, plain, (size_t)n_got * sizeof *got) == 0;
            runs++;
            bad += !same;
            rounds += rc.rounds;
            cache_bad += !rc.ok;
            CHECK(same, "%s%s%s variant %d prompt %d: output differs from plain greedy (%s)", mc->target,
                  dm ? " + " : "", dm ? mc->draft : "", v, t, s2 ? err.msg : "");
            CHECK(rc.ok, "%s variant %d prompt %d: a cache differs from the plain run's after a round", mc->target, v, t);
            int used = 0, sum = 0;
            for (int i = 0; i < st.n_auto_cands; i++) used += st.auto_cands[i].rounds > 0, sum += st.auto_cands[i].rounds;
            CHECK(s2 || sum == st.n_rounds, "%s: the candidates ran %d rounds, the session %d", mc->target, sum,
                  st.n_rounds);
            CHECK(st.n_auto_cands >= (dm ? 3 : 2), "%s: the pool has %d candidates", mc->target, st.n_auto_cands);
            if (v == 1) { /* probes: the families take turns */
                CHECK(used >= (st.n_rounds >= st.n_auto_cands ? st.n_auto_cands - 1 : 1),
                      "%s prompt %d: probes ran %d of %d candidates in %d rounds", mc->target, t, used,
                      st.n_auto_cands, st.n_rounds);
                switches += st.n_rounds;
            }
            if (used > fams_used) fams_used = used;
            for (int i = 0; i < st.n_auto_cands; i++)
                if (!strcmp(st.auto_cands[i].name, "swift")) swift_rounds += st.auto_cands[i].rounds;
            opt_steps += s2 ? 0 : st.opt_steps;
        }
        free(seq);
        free(plain);
        free(got);
        sd_ctx_free(ct);
        sd_ctx_free(cref);
        sd_ctx_free(cd);
        sd_ctx_free(cdref);
    }
    if (ti.n_layer >= 3)
        CHECK(swift_rounds > 0 && opt_steps > 0, "%s: swift ran %d rounds, %d optimisation steps", mc->target, swift_rounds,
              opt_steps);
    printf("  %-30s %-18s %2d runs, %d differ; caches checked after %4d rounds, %d bad; %3d rounds switching; up to "
           "%d candidates used; swift %d rounds, %d optimiser steps\n",
           mc->target + 7, dm ? mc->draft + 7 : "(no draft)", runs, bad, rounds, cache_bad, switches, fams_used,
           swift_rounds, opt_steps);
    sd_auto_state_free(carried);
    sd_sampler_free(smp);
    sd_model_free(tm);
    sd_model_free(dm);
}

/* ------------------------------------------------------------------ 3. a batch in the scheduler */
static void batch(void) {
    sd_model *tm = tl_load_model("models/stories-ee.gguf"), *dm = tl_load_model("models/stories260K.gguf");
    if (!tm || !dm) return;
    enum { P = 5, NP = 40 };
    sd_ctx *ct = mkctx(tm, 256, P), *cd = mkctx(dm, 256, P);
    sd_sched *sc = NULL;
    sd_error err = {0};
    CHECK(sd_sched_new(ct, NULL, &sc, &err) == SD_OK, "sched: %s", err.msg);
    sd_session *ss[P] = {0};
    /* every session reads a latency table whose batch rows make every draft dear (1 s a drafted position, 1 ms a
     * plain step) and whose single row is flat: sessions 0..3 decode plainly while batched (the merged passes refresh
     * the plain cells with real times, ~1 ms, far from 1 s); session 4's probes draft now and then */
    const int bs[3] = {1, 2, 8};
    double tab[3][9];
    for (int x = 0; x <= 8; x++) tab[0][x] = 1e-3, tab[1][x] = 2e-3 + 2 * x, tab[2][x] = 8e-3 + 8 * x;
    sd_sv_latency *lat = NULL;
    CHECK(sd_sv_latency_new(8, bs, 3, &tab[0][0], &lat, &err) == SD_OK, "latency table: %s", err.msg);
    int32_t want[P][NP], prompts[P][128];
    int n_want[P], n_prompt[P];
    for (int i = 0; i < P; i++) { /* the plain outputs first (sd_generate runs on sequence 0) */
        int32_t *prompt = prompts[i];
        int np = 0;
        const char *text = TEXTS[i % 2];
        sd_tokenize(tm, text, strlen(text), true, false, prompt, 128, &np, NULL);
        prompt[np - 1] = (prompt[np - 1] + i) % 500 + 3; /* different prompts */
        n_prompt[i] = np;
        sd_sampler_params spp = sd_sampler_default_params();
        spp.temp = 0;
        sd_sampler *smp;
        sd_sampler_new(&spp, 512, &smp, NULL);
        sd_generate(ct, smp, prompt, np, NP, true, want[i], &n_want[i], NULL, NULL, NULL, &err);
        sd_sampler_free(smp);
    }
    for (int i = 0; i < P; i++) {
        const int32_t *prompt = prompts[i];
        const int np = n_prompt[i];
        sd_session_params p = sd_session_default_params();
        p.seq = i;
        p.sampling.temp = 0;
        p.n_predict = NP;
        p.ignore_eos = true;
        p.spec.method = SD_SPEC_AUTO;
        p.spec.draft_ctx = i % 3 ? cd : NULL; /* with and without the draft model */
        p.spec.auto_probe = i == 4 ? 1 : 0;
        p.spec.sv_latency = lat;
        CHECK(sd_session_new(ct, &p, &ss[i], &err) == SD_OK, "session: %s", err.msg);
        CHECK(sd_session_set_prompt(ss[i], prompt, np, &err) == SD_OK, "prompt: %s", err.msg);
        CHECK(sd_sched_add(sc, ss[i], &err) == SD_OK, "add: %s", err.msg);
    }
    int steps = 0;
    while (sd_sched_n_live(sc) > 0 && steps < 5000) {
        CHECK(sd_sched_step(sc, &err) == SD_OK, "step: %s", err.msg);
        steps++;
    }
    int differ = 0;
    for (int i = 0; i < P; i++) {
        int n = 0;
        const int32_t *got = sd_session_tokens(ss[i], &n);
        bool same = sd_session_status(ss[i], &err) == SD_OK && n == n_want[i] &&
                    memcmp(got, want[i], (size_t)n * sizeof *got) == 0;
        differ += !same;
        CHECK(same, "batch session %d differs from plain greedy (%d vs %d tokens) %s", i, n, n_want[i], err.msg);
        if (i < 4) { /* the batch's costs: plain steps in most rounds (the last sessions may run alone at the end) */
            sd_spec_stats st;
            sd_session_stats(ss[i], &st);
            int rounds = 0, plain = 0;
            for (int c = 0; c < st.n_auto_cands; c++) {
                rounds += st.auto_cands[c].rounds;
                if (!strcmp(st.auto_cands[c].name, "none")) plain += st.auto_cands[c].rounds;
            }
            CHECK(rounds > 0 && 4 * plain >= 3 * rounds, "batch session %d with dear batch drafts: %d plain rounds of %d",
                  i, plain, rounds);
        }
        sd_session_free(ss[i]);
    }
    sd_sv_latency_free(lat);
    printf("  batch: %d auto sessions (3 with the draft model, pricing rounds by a batch table, one switching every "
           "round), %d steps: %d differ\n", P,
           steps, differ);
    sd_sched_free(sc);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
    sd_model_free(tm);
    sd_model_free(dm);
}

/* ------------------------------------------------------------------ 4. sampling */
static void first_token(const char *cands, int draws) {
    sd_model *tm = tl_load_model("models/stories-ee.gguf"), *dm = tl_load_model("models/stories260K.gguf");
    if (!tm || !dm) return;
    const int V = 512;
    sd_ctx *ct = mkctx(tm, 64, 1), *cd = mkctx(dm, 64, 1);
    int32_t prompt[1] = {sd_token_bos(tm)};
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 2.0f;
    spp.top_k = 0;
    spp.top_p = 1.0f;
    spp.min_p = 0.0f;
    float *logits = malloc(V * sizeof *logits), *pf = malloc(V * sizeof *pf);
    sd_forward(ct, &(sd_block){.n = 1, .token = prompt}, &(sd_forward_args){.logits = logits}, NULL);
    sd_sampler *s0;
    sd_sampler_new(&spp, V, &s0, NULL);
    sd_sampler_probs(s0, logits, prompt, 1, pf);
    int N = (int)(draws * tl_scale());
    if (N < 1000) N = 1000;
    int *counts = calloc(V, sizeof *counts);
    sd_spec_params sp = sd_spec_default_params();
    sp.method = SD_SPEC_AUTO;
    sp.draft_ctx = cd;
    sd_error err = {0};
    CHECK(sd_spec_set(&sp, "candidates", cands, &err) == SD_OK, "candidates %s: %s", cands, err.msg);
    const int drafted_first = tl_first_tokens(ct, &sp, spp, prompt, 1, V, N, 5000, counts);
    double pd[512];
    for (int i = 0; i < V; i++) pd[i] = pf[i];
    int dof;
    double c = tl_chi2(counts, pd, V, N, &dof);
    if (!strchr(cands, '+')) /* one drafting family: the rejection rule ran in every first round */
        CHECK(drafted_first == N, "candidates %s: every first round must draft (%d of %d did)", cands, drafted_first, N);
    CHECK(tl_chi2_ok(c, dof), "candidates %s: first sampled token vs target: chi2 %.1f (%d dof)", cands, c, dof);
    printf("  sampling, candidates %-12s %d draws: chi2 = %.1f (%d dof)\n", cands, N, c, dof);
    free(counts);
    free(logits);
    free(pf);
    sd_sampler_free(s0);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
    sd_model_free(tm);
    sd_model_free(dm);
}

/* ------------------------------------------------------------------ 5. the registry */
static void registry(void) {
    sd_spec_params sp = sd_spec_default_params();
    sd_error err = {0};
    CHECK(sd_spec_parse(&sp, "auto:candidates=ngram+early-exit:exits=1+3:hysteresis=0.1:probe=8", &err) == SD_OK,
          "parse: %s", err.msg);
    CHECK(sp.method == SD_SPEC_AUTO && sp.auto_candidates == ((1u << SD_SPEC_NGRAM) | (1u << SD_SPEC_EARLY_EXIT)) &&
              sp.auto_n_exits == 2 && sp.auto_exits[1] == 3 && fabsf(sp.auto_hysteresis - 0.1f) < 1e-6f &&
              sp.auto_probe == 8,
          "parsed values");
    CHECK(sd_spec_set(&sp, "--spec-candidates", "ngram,draft", &err) == SD_OK &&
              sp.auto_candidates == ((1u << SD_SPEC_NGRAM) | (1u << SD_SPEC_DRAFT)),
          "the CLI's comma list: %s", err.msg);
    CHECK(sd_spec_set(&sp, "candidates", "all", &err) == SD_OK && sp.auto_candidates == 0, "all: %s", err.msg);
    CHECK(sd_spec_set(&sp, "candidates", "swift+draft", &err) == SD_OK &&
              sp.auto_candidates == ((1u << SD_SPEC_SWIFT) | (1u << SD_SPEC_DRAFT)),
          "swift's bit is its method's: %s", err.msg);
    CHECK(sd_spec_set(&sp, "candidates", "ngram+bogus", &err) == SD_ERR_ARG && strstr(err.msg, "bogus") &&
              strstr(err.msg, "none|draft|ngram|early-exit"),
          "unknown candidate: %s", err.msg);
    CHECK(sd_spec_parse(&sp, "ngram:candidates=ngram", &err) == SD_ERR_ARG && strstr(err.msg, "does not apply"),
          "candidates of another method: %s", err.msg);
    sd_model *tm = tl_load_model("models/stories260K.gguf");
    if (!tm) return;
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_AUTO;
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_OK, "auto without a draft model: %s", err.msg);
    sd_spec_set(&sp, "candidates", "draft+ngram", NULL);
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "draft model"),
          "a draft candidate without a draft model: %s", err.msg);
    sd_spec_set(&sp, "candidates", "ngram+del", NULL);
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "not candidates"),
          "del is not a candidate: %s", err.msg);
    sp.auto_candidates = 0;
    sd_spec_set(&sp, "exits", "2+5", NULL);
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "exit depth 5"), "exit depth: %s",
          err.msg);
    sd_model_free(tm);
    printf("  registry: candidates, exits, errors\n");
}

int main(void) {
    chooser();
    registry();
    const model_case cases[] = {
        {"models/stories260K.gguf", NULL},
        {"models/stories260K.gguf", "models/stories260K.gguf"},
        {"models/stories-ee.gguf", NULL},
        {"models/stories-ee.gguf", "models/stories260K.gguf"},
        {"models/stories-plain.gguf", "models/stories260K.gguf"},
        {"models/tiny-llama-spm-f32.gguf", "models/tiny-llama-spm-q4_0.gguf"},
        {"models/tiny-llama-spm-f16.gguf", NULL},
        {"models/tiny-llama-spm-q8_0.gguf", NULL},
        {"models/tiny-llama-gpt2-f32.gguf", NULL},
        {"models/tiny-qwen2-gpt2-f32.gguf", NULL},
    };
    const int n_predict = tl_scale() < 1 ? 32 : 40; /* (24: too few rounds for the probes to reach every family of the pool) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) greedy_case(&cases[i], n_predict);
    batch();
    first_token("draft", 4000);
    first_token("early-exit", 4000);
    first_token("swift", 2000);
    first_token("ngram+draft+early-exit+swift", 2000);
    return tl_finish("test_auto");
}
