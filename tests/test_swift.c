/* SWIFT (methods.md 4):
 *  1. greedy: chains and token trees (fixed and automatic node budgets), several prompts, story models and
 *     random-weight models, the optimiser
 *     running (small window, GP every 2nd step), the context ending mid-round: output == plain greedy, and after
 *     every round the target's cache equals a plain run's bit for bit (the scratch extension and the optimisation
 *     pass leave nothing behind);
 *  2. the GP/UCB finds the optimum of a toy 1-D and 2-D function, and the optimiser finds a planted 12-bit mask;
 *  3. the optimiser state saves / loads bit for bit; bad files are refused with a message;
 *  4. sampling with trees: the first emitted token follows the target's distribution (chi-square);
 *  5. view_len: a block re-running cached positions with a limited view gives the plain run's logits. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "speculative/gp.h"
#include "speculative/swift_opt.h"
#include "speculative/tree_budget.h"
#include "specdec.h"
#include "testlib.h"

static sd_ctx *mkctx(sd_model *m, int n_ctx, int n_threads) { return tl_ctx(m, n_ctx, 1, 32, n_threads); }

/* ---- per-round cache check */
typedef struct round_check {
    sd_ctx *target, *ref;
    int kvd, n_layer;
    bool ok;
    int rounds;
} round_check;

static bool on_round(const sd_spec_round *r, void *user) {
    round_check *rc = user;
    rc->rounds++;
    if (!tl_same_kv_rows(rc->target, rc->ref, rc->n_layer, rc->kvd, r->n_committed, true)) rc->ok = false;
    return true;
}

typedef struct swift_case {
    const char *name, *model;
    int window;
} swift_case;

static void greedy_equivalence(const swift_case *sc, int n_predict) {
    sd_model *tm = tl_load_model(sc->model);
    if (!tm) return;
    sd_model_info ti;
    sd_model_get_info(tm, &ti);
    const char *texts[] = {"", "Once upon a time", "The little dog ran to the park. The little dog ran to the park and saw a big red ball. The"};
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *smp;
    sd_sampler_new(&spp, ti.n_vocab, &smp, NULL);
    const int trees[] = {0, 6, 24, SD_TREE_AUTO};
    /* the automatic budget's latency table: positions free up to 6 drafted tokens, then costly */
    const int b1 = 1;
    double tt[SD_TREE_AUTO_MAX + 1];
    for (int n = 0; n <= SD_TREE_AUTO_MAX; n++) tt[n] = n <= 6 ? 1.0 : 1.0 + 0.3 * (n - 6);
    sd_sv_latency *lat = NULL;
    sd_sv_latency_new(SD_TREE_AUTO_MAX, &b1, 1, tt, &lat, NULL);
    int runs = 0, bad = 0, cache_bad = 0, rounds = 0, opt_steps = 0, drafted = 0, accepted = 0;
    for (int pi = 0; pi < 3; pi++) {
        int32_t prompt[128];
        int np = 0;
        sd_tokenize(tm, texts[pi], strlen(texts[pi]), true, false, prompt, 128, &np, NULL);
        int n_ctx = np + n_predict; /* the context ends mid-round */
        sd_ctx *ct = mkctx(tm, n_ctx, 2), *cref = mkctx(tm, n_ctx, 2);
        int32_t *plain = malloc((size_t)n_predict * sizeof *plain), *got = malloc((size_t)n_predict * sizeof *got);
        int n_plain = 0;
        sd_error err;
        CHECK(sd_generate(ct, smp, prompt, np, n_predict, true, plain, &n_plain, NULL, NULL, NULL, &err) == SD_OK,
              "%s: plain: %s", sc->name, err.msg);
        int32_t *seq = malloc((size_t)(np + n_plain) * sizeof *seq);
        memcpy(seq, prompt, (size_t)np * sizeof *seq);
        memcpy(seq + np, plain, (size_t)n_plain * sizeof *seq);
        sd_kv_truncate(cref, 0, 0, NULL);
        for (int i = 0; i < np + n_plain - 1; i += 32) {
            int c = np + n_plain - 1 - i < 32 ? np + n_plain - 1 - i : 32;
            sd_forward(cref, &(sd_block){.n = c, .token = seq + i}, &(sd_forward_args){0}, NULL);
        }
        sd_swift_state *shared = NULL;
        for (int ti_ = 0; ti_ < 4; ti_++)
            for (int variant = 0; variant < (ti_ < 3 ? 3 : 2); variant++) { /* 0: defaults, 1: r .3 p_stop .5, 2: a
                                                                               shared state */
                sd_spec_params sp = sd_spec_default_params();
                sp.method = SD_SPEC_SWIFT;
                sp.tree_nodes = trees[ti_];
                sp.sv_latency = lat;
                sp.swift_window = sc->window;
                sp.swift_bayes_interval = 2;
                sp.swift_stop_score = 1.0f;
                if (variant == 1) sp.swift_skip_ratio = 0.3f, sp.swift_p_stop = 0.5f, sp.swift_max_draft = 4;
                if (variant == 2) {
                    if (!shared) sd_swift_state_new(ti.n_layer, &sp, 5, &shared, NULL);
                    sp.swift_state = shared; /* kept across the runs of this prompt */
                }
                round_check rc = {ct, cref, 0, ti.n_layer, true, 0};
                rc.kvd = ti.n_head_kv * (ti.n_embd / ti.n_head);
                sp.round_cb = on_round;
                sp.round_user = &rc;
                int n_got = 0;
                sd_spec_stats st;
                sd_status s = sd_spec_generate(ct, smp, &sp, prompt, np, n_predict, true, got, &n_got, NULL, NULL, &st, &err);
                bool same = s == SD_OK && n_got == n_plain && memcmp(got, plain, (size_t)n_got * sizeof *got) == 0;
                runs++;
                bad += !same;
                cache_bad += !rc.ok;
                rounds += rc.rounds;
                opt_steps += st.opt_steps;
                drafted += st.n_drafted;
                accepted += st.n_accepted;
                CHECK(same, "%s: tree %d variant %d prompt %d: output differs from plain greedy (%s)", sc->name,
                      trees[ti_], variant, np, s ? err.msg : "");
                CHECK(rc.ok, "%s: tree %d variant %d prompt %d: the cache differs from the plain run's after a round",
                      sc->name, trees[ti_], variant, np);
            }
        sd_swift_state_free(shared);
        free(seq);
        free(plain);
        free(got);
        sd_ctx_free(ct);
        sd_ctx_free(cref);
    }
    sd_sv_latency_free(lat);
    CHECK(opt_steps > 0, "%s: the optimiser never ran", sc->name);
    printf("  %-30s %3d runs, %d differ; caches checked after %d rounds, %d bad; %d optimisation steps; "
           "acceptance %.0f%%\n", sc->name, runs, bad, rounds, cache_bad, opt_steps,
           drafted ? 100.0 * accepted / drafted : 0.0);
    sd_sampler_free(smp);
    sd_model_free(tm);
}

/* ---- view_len: cached positions re-run with a limited view give a plain run's logits, and leave the cache alone */
static void view_len_pass(void) {
    sd_model *m = tl_load_model("models/stories-plain.gguf");
    if (!m) return;
    sd_model_info mi;
    sd_model_get_info(m, &mi);
    const int N = 20, P = 12, C = N - P, V = mi.n_vocab;
    sd_ctx *c = mkctx(m, 64, 2);
    int32_t tok[N], par[N], pos[N];
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(1 + (i * 37) % (V - 1));
    uint8_t want[32];
    memset(want, 1, sizeof want);
    float *ref = malloc((size_t)N * V * sizeof(float)), *got = malloc((size_t)C * V * sizeof(float));
    sd_forward(c, &(sd_block){.n = N, .token = tok}, &(sd_forward_args){.want_logits = want, .logits = ref}, NULL);
    for (int i = 0; i < C; i++) par[i] = i - 1, pos[i] = P + i;
    sd_status st = sd_forward(c, &(sd_block){.n = C, .token = tok + P, .parent = par, .pos = pos},
                              &(sd_forward_args){.want_logits = want, .logits = got, .view_len = P}, NULL);
    CHECK(st == SD_OK && memcmp(got, ref + (size_t)P * V, (size_t)C * V * sizeof(float)) == 0,
          "view_len: re-run positions differ from the plain run's logits");
    CHECK(sd_kv_len(c, 0, -1) == N + C, "view_len: the block's K/V go after the cached cells (%d)", sd_kv_len(c, 0, -1));
    sd_kv_truncate(c, 0, N, NULL);
    CHECK(sd_forward(c, &(sd_block){.n = 2, .token = tok}, &(sd_forward_args){.view_len = 3}, NULL) == SD_ERR_ARG,
          "view_len on a chain block must be refused");
    /* without the limited view the re-run sees the cells after it: different logits (the test can fail) */
    sd_forward(c, &(sd_block){.n = C, .token = tok + P, .parent = par, .pos = pos},
               &(sd_forward_args){.want_logits = want, .logits = got}, NULL);
    CHECK(memcmp(got, ref + (size_t)P * V, (size_t)C * V * sizeof(float)) != 0, "view_len: the control should differ");
    printf("  view_len: %d cached positions re-run at their own positions give the plain logits bit for bit\n", C);
    free(ref);
    free(got);
    sd_ctx_free(c);
    sd_model_free(m);
}

/* ---- GP / UCB on toy functions */
static double f1(const float *x) { return -(x[0] - 0.37) * (x[0] - 0.37); }
static double f2(const float *x) {
    return exp(-((x[0] - 0.7) * (x[0] - 0.7) + (x[1] - 0.2) * (x[1] - 0.2)) / 0.05) +
           0.5 * exp(-((x[0] - 0.2) * (x[0] - 0.2) + (x[1] - 0.8) * (x[1] - 0.8)) / 0.05);
}

static void gp_toy(int d, double (*f)(const float *), const float *opt, double tol) {
    const int G = d == 1 ? 101 : 21, M = d == 1 ? G : G * G, ITERS = 25;
    float *grid = malloc((size_t)M * d * sizeof(float)), X[64][2], y[64];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < d; j++) grid[(size_t)i * d + j] = (float)((j == 0 ? i % G : i / G) / (double)(G - 1));
    int n = 0;
    X[n][0] = 0.0f, X[n][1] = 0.0f;
    y[n] = (float)f(X[n]), n++;
    X[n][0] = 1.0f, X[n][1] = 1.0f;
    y[n] = (float)f(X[n]), n++;
    float Xc[64 * 2];
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < d; j++) Xc[i * d + j] = X[i][j];
        gp_model g;
        if (!gp_fit(&g, Xc, y, n, d, 0.15, 1e-4)) {
            CHECK(0, "gp %d-D: fit failed", d);
            break;
        }
        int j = gp_ucb_pick(&g, grid, M, 2.5);
        gp_free(&g);
        for (int k = 0; k < d; k++) X[n][k] = grid[(size_t)j * d + k];
        y[n] = (float)f(X[n]);
        n++;
    }
    int b = 0;
    for (int i = 1; i < n; i++)
        if (y[i] > y[b]) b = i;
    double dist = 0;
    for (int k = 0; k < d; k++) dist += (X[b][k] - opt[k]) * (X[b][k] - opt[k]);
    dist = sqrt(dist);
    CHECK(dist <= tol, "gp %d-D: best found at distance %.3f from the optimum (> %.3f)", d, dist, tol);
    printf("  GP/UCB %d-D toy: %d evaluations, best %.4f at distance %.3f from the optimum\n", d, n, y[b], dist);
    /* the posterior interpolates an observed point (noise small) */
    gp_model g;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) Xc[i * d + k] = X[i][k];
    if (gp_fit(&g, Xc, y, n, d, 0.15, 1e-6)) {
        double mu, var;
        gp_predict(&g, Xc, &mu, &var);
        CHECK(fabs(mu - y[0]) < 1e-2 && var < 1e-3, "gp %d-D: posterior at an observation %.4f (var %.2g) vs %.4f", d,
              mu, var, y[0]);
        gp_free(&g);
    }
    free(grid);
}

/* ---- the optimiser on a planted 12-bit mask (L = 8: 12 candidate sub-layers, 6 skipped) */
static int planted_steps(int beta, uint64_t seed) {
    const uint8_t planted[12] = {0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1};
    sd_spec_params sp = sd_spec_default_params();
    sp.swift_skip_ratio = 0.5f;
    sp.swift_bayes_interval = beta;
    sp.swift_opt_steps = 400;
    sp.swift_patience = 400;
    sp.swift_stop_score = 1.0f;
    sd_swift_state *st = NULL;
    if (sd_swift_state_new(8, &sp, seed, &st, NULL) != SD_OK) return -1;
    uint8_t mask[16];
    int found = -1;
    while (!swift_opt_done(st)) {
        swift_opt_propose(st, mask);
        int same = 0, pop = 0;
        for (int i = 0; i < 12; i++) same += mask[2 + i] == planted[i], pop += mask[2 + i];
        CHECK(pop == 6 && mask[0] == 0 && mask[1] == 0 && mask[14] == 0 && mask[15] == 0,
              "a candidate must skip 6 interior sub-layers (%d)", pop);
        swift_opt_observe(st, mask, (float)same / 12.0f);
        if (same == 12) {
            found = swift_opt_steps(st);
            break;
        }
    }
    sd_swift_state_free(st);
    return found;
}

static void planted_mask(void) {
    int worst_gp = 0, worst_rs = 0, miss_gp = 0;
    for (uint64_t s = 1; s <= 5; s++) {
        int g = planted_steps(1, s), r = planted_steps(1 << 20, s);
        if (g < 0) miss_gp++;
        else if (g > worst_gp) worst_gp = g;
        if (r < 0 || r > worst_rs) worst_rs = r < 0 ? 401 : r;
    }
    CHECK(miss_gp == 0 && worst_gp <= 60, "GP proposals: planted 12-bit mask found within %d steps (%d seeds missed)",
          worst_gp, miss_gp);
    printf("  planted 12-bit mask: found in <= %d steps with GP proposals every step (random search alone: <= %d)\n",
           worst_gp, worst_rs);
}

/* ---- the automatic tree budget (tree_nodes = SD_TREE_AUTO) on synthetic latency tables */
static void tree_budget_choice(void) {
    enum { CAP = 32 };
    const int b1 = 1;
    double flat[CAP + 1], steep[CAP + 1], knee[CAP + 1];
    double p[CAP];
    for (int n = 0; n <= CAP; n++) {
        flat[n] = 0.1;                                /* a pass costs the same at any size: big trees are free */
        steep[n] = 0.1 * (1 + n);                     /* every position costs a decode step: a chain */
        knee[n] = n <= 8 ? 0.1 : 0.1 * (1 + (n - 8)); /* free up to 8 drafted tokens, then linear */
    }
    for (int j = 0; j < CAP; j++) p[j] = j < 3 ? 0.9 - 0.1 * j : 0.05; /* a 3-node chain that is mostly accepted */
    sd_sv_latency *lf = NULL, *ls = NULL, *lk = NULL;
    sd_sv_latency_new(CAP, &b1, 1, flat, &lf, NULL);
    sd_sv_latency_new(CAP, &b1, 1, steep, &ls, NULL);
    sd_sv_latency_new(CAP, &b1, 1, knee, &lk, NULL);
    int nf = tree_budget_best(p, CAP, lf, NULL), ns = tree_budget_best(p, CAP, ls, NULL),
        nk = tree_budget_best(p, CAP, lk, NULL);
    CHECK(nf == CAP, "flat T: budget %d (want the whole tree, %d)", nf, CAP);
    CHECK(ns >= 1 && ns <= 3, "steep T: budget %d (want the chain, <= 3)", ns);
    CHECK(nk == 8, "T flat to 8 then linear: budget %d (want 8)", nk);
    /* brute force: the chosen N maximises (sum p + 1) / T */
    double g, best = 0;
    int n = tree_budget_best(p, CAP, lk, &g);
    for (int m = 1; m <= CAP; m++) {
        double e = 1;
        for (int j = 0; j < m; j++) e += p[j];
        if (e / sd_sv_latency_time(lk, m, 1) > best) best = e / sd_sv_latency_time(lk, m, 1);
    }
    CHECK(fabs(g - best) < 1e-12 * best && n == nk, "goodput %g vs brute force %g", g, best);
    /* the state: the cap while warming up, then the choice from observed acceptance, which follows acceptance as it
     * changes (a deep tree once the deep nodes start being accepted) */
    tree_budget tb;
    CHECK(tree_budget_init(&tb, CAP), "tree_budget_init");
    uint8_t on[CAP];
    int first = tree_budget_next(&tb, lk);
    for (int r = 0; r < TREE_BUDGET_WARMUP; r++) {
        for (int j = 0; j < CAP; j++) on[j] = j < 2; /* the first two nodes always accepted, nothing else */
        tree_budget_observe(&tb, CAP, on);
    }
    int after = tree_budget_next(&tb, lf);
    CHECK(first == CAP && after == 2, "warm-up offers the cap (%d), then only the 2 accepted nodes pay (%d)", first,
          after);
    for (int r = 0; r < 59; r++) { /* now 12 nodes are accepted every round (of those offered; the exploration round
                                      at 32 offers the cap and finds them) */
        int k = tree_budget_next(&tb, lf);
        for (int j = 0; j < CAP; j++) on[j] = j < 12;
        tree_budget_observe(&tb, k, on);
    }
    int later = tree_budget_next(&tb, lf);
    CHECK(later == 12, "after acceptance grew to 12 nodes the budget follows it (%d)", later);
    tree_budget_free(&tb);
    sd_sv_latency_free(lf), sd_sv_latency_free(ls), sd_sv_latency_free(lk);
    printf("  tree budget: flat T -> %d nodes, steep T -> %d, knee at 8 -> %d; follows acceptance (2 -> %d)\n", nf, ns,
           nk, later);
}

/* ---- save / load */
static void save_load(void) {
    char dir[] = "/tmp/specdec-swift-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char p1[128], p2[128], p3[128];
    snprintf(p1, sizeof p1, "%s/a.txt", dir);
    snprintf(p2, sizeof p2, "%s/b.txt", dir);
    snprintf(p3, sizeof p3, "%s/bad.txt", dir);
    sd_spec_params sp = sd_spec_default_params();
    sd_swift_state *st = NULL, *st2 = NULL;
    sd_swift_state_new(8, &sp, 3, &st, NULL);
    uint8_t mask[16];
    for (int i = 0; i < 40; i++) { /* a few steps, GP ones included */
        swift_opt_propose(st, mask);
        swift_opt_observe(st, mask, (float)((i * 7) % 13) / 13.0f);
    }
    sd_error err = {0};
    CHECK(sd_swift_state_save(st, p1, &err) == SD_OK, "save: %s", err.msg);
    CHECK(sd_swift_state_load(p1, 8, &st2, &err) == SD_OK, "load: %s", err.msg);
    if (st2) {
        CHECK(sd_swift_state_save(st2, p2, &err) == SD_OK, "save again: %s", err.msg);
        size_t n1, n2;
        unsigned char *a = tl_read_file(p1, &n1), *b = tl_read_file(p2, &n2);
        CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0, "save -> load -> save changed the file");
        free(a);
        free(b);
        uint8_t m1[16], m2[16], c1[16], c2[16];
        float s1, s2;
        int k1, k2;
        sd_swift_state_best(st, m1, &s1, &k1);
        sd_swift_state_best(st2, m2, &s2, &k2);
        CHECK(!memcmp(m1, m2, 16) && s1 == s2 && k1 == k2, "loaded best set / score / steps differ");
        /* matchness over time: each improvement's step and score, rising, the last one the best; loaded as saved */
        int hs1[64], hs2[64];
        float hv1[64], hv2[64];
        int nh1 = sd_swift_state_history(st, hs1, hv1, 64), nh2 = sd_swift_state_history(st2, hs2, hv2, 64);
        bool rising = nh1 > 1 && hs1[0] == 1 && hv1[nh1 - 1] == s1;
        for (int i = 1; i < nh1; i++) rising &= hs1[i] > hs1[i - 1] && hv1[i] > hv1[i - 1];
        CHECK(rising, "matchness history: %d entries, not rising to the best", nh1);
        CHECK(nh1 == nh2 && !memcmp(hs1, hs2, (size_t)nh1 * sizeof *hs1) && !memcmp(hv1, hv2, (size_t)nh1 * sizeof *hv1),
              "the loaded matchness history differs");
        /* the loaded state continues exactly as the saved one would */
        swift_opt_propose(st, c1);
        swift_opt_propose(st2, c2);
        CHECK(!memcmp(c1, c2, 16), "the loaded state proposes another candidate than the saved one");
        sd_swift_state_free(st2);
        st2 = NULL;
    }
    CHECK(sd_swift_state_load(p1, 6, &st2, &err) == SD_ERR_ARG && strstr(err.msg, "8-layer"),
          "a state for another layer count must be refused: '%s'", err.msg);
    const char *bad[] = {"", "hello\n", "specdec-swift-state 1\nn_layer 8\nsize 5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 1\nsince_best 0\nrng 1\nbest_score 0.5\nbest 1100\nobs 0\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 1\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 2\n110011001000 0.5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 1\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 2\n1 0.5\n",
                         /* the optional history section: a damaged head, another word in its place, steps that do
                          * not rise within 1..steps, scores that do not rise, something after it */
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory x\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistroy 1\n1 0.5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 2\n3 0.25\n2 0.5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 2\n1 0.25\n9 0.5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 1\n0 0.5\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 2\n1 0.5\n2 0.25\n",
                         "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 1\n1 0.5\n2 0.75\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_write_file(p3, bad[i], strlen(bad[i]));
        err = (sd_error){0};
        sd_status s = sd_swift_state_load(p3, 8, &st2, &err);
        CHECK(s == SD_ERR_FORMAT && strstr(err.msg, "bad.txt") && !st2, "bad file %zu: status %d '%s'", i, s, err.msg);
    }
    /* files written before the history section (none) and with it load */
    const char *good[] = {"specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\n",
                          "specdec-swift-state 1\nn_layer 8\nsize 5\nsteps 5\nsince_best 0\nrng 1\nbest_score 0.5\nbest 110011001000\nobs 0\nhistory 2\n1 0.25\n5 0.5\n"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tl_write_file(p3, good[i], strlen(good[i]));
        err = (sd_error){0};
        sd_status s = sd_swift_state_load(p3, 8, &st2, &err);
        int hs[4];
        CHECK(s == SD_OK && st2 && sd_swift_state_history(st2, hs, NULL, 4) == (int)(2 * i) && (i == 0 || hs[1] == 5),
              "good file %zu: status %d '%s'", i, s, err.msg);
        sd_swift_state_free(st2);
        st2 = NULL;
    }
    CHECK(sd_swift_state_load("/nonexistent/x", 8, &st2, &err) == SD_ERR_IO && strstr(err.msg, "/nonexistent/x"),
          "a missing file: '%s'", err.msg);
    sd_swift_state_free(st);
    unlink(p1);
    unlink(p2);
    unlink(p3);
    rmdir(dir);
    printf("  optimiser state: save -> load -> save is byte-identical; bad files refused\n");
}

/* ---- sampling with trees: the first emitted token follows the target's distribution */

static void first_token_distribution(int tree_nodes) {
    sd_model *tm = tl_load_model("models/stories-plain.gguf");
    if (!tm) return;
    const int V = 512;
    sd_ctx *ct = mkctx(tm, 64, 1); /* 1 thread: many tiny runs */
    int32_t prompt[1] = {sd_token_bos(tm)};
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 2.0f;
    spp.top_k = 0, spp.top_p = 1.0f, spp.min_p = 0.0f;
    float *logits = malloc(V * sizeof *logits), *pf = malloc(V * sizeof *pf);
    sd_forward(ct, &(sd_block){.n = 1, .token = prompt}, &(sd_forward_args){.logits = logits}, NULL);
    sd_sampler *s0;
    sd_sampler_new(&spp, V, &s0, NULL);
    sd_sampler_probs(s0, logits, prompt, 1, pf);
    int N = (int)(5000 * tl_scale());
    if (N < 1000) N = 1000;
    int *counts = calloc(V, sizeof *counts);
    sd_spec_params sp = sd_spec_default_params();
    sp.method = SD_SPEC_SWIFT;
    sp.tree_nodes = tree_nodes;
    sp.swift_opt_steps = 0;
    sp.swift_skip_ratio = 0.6f; /* a poor draft: p != q */
    const int drafted = tl_first_tokens(ct, &sp, spp, prompt, 1, V, N, 5000, counts);
    double pd[512];
    for (int i = 0; i < V; i++) pd[i] = pf[i];
    int dof;
    double c = tl_chi2(counts, pd, V, N, &dof);
    CHECK(drafted == N, "every first round must draft (%d of %d did)", drafted, N);
    CHECK(tl_chi2_ok(c, dof), "swift%s: first sampled token vs target: chi2 %.1f (%d dof)",
          tree_nodes ? " tree" : " chain", c, dof);
    printf("  sampling, first token, %-6s (%d draws): chi2 = %.1f (%d dof)\n", tree_nodes ? "tree" : "chain", N, c, dof);
    free(counts);
    free(logits);
    free(pf);
    sd_sampler_free(s0);
    sd_ctx_free(ct);
    sd_model_free(tm);
}

/* ---- bad input */
static void bad_input(void) {
    sd_model *m = tl_load_model("models/stories-plain.gguf");
    if (!m) return;
    sd_spec_params sp = sd_spec_default_params();
    sd_error err = {0};
    CHECK(sd_spec_parse(&sp, "swift:skip_ratio=0.3:window=16:opt_steps=50:patience=20:bayes_interval=5:p_stop=0.6:"
                             "tree_nodes=12:tree_topk=4+2+1:tree_conf=0.5+0.9", &err) == SD_OK &&
              sp.method == SD_SPEC_SWIFT && sp.swift_window == 16 && sp.swift_p_stop == 0.6f && sp.tree_nodes == 12,
          "swift keys: %s", err.msg);
    sp = sd_spec_default_params();
    CHECK(sd_spec_parse(&sp, "swift:skip_ratio=0", &err) == SD_ERR_ARG, "skip_ratio 0 must be refused");
    CHECK(sd_spec_parse(&sp, "swift:window=0", &err) == SD_ERR_ARG, "window 0 must be refused");
    CHECK(sd_spec_parse(&sp, "ngram:p_stop=0.5", &err) == SD_ERR_ARG, "p_stop does not apply to ngram");
    sd_ctx *c = mkctx(m, 64, 2);
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_SWIFT;
    sp.swift_window = 40; /* n_batch 32 */
    CHECK(sd_spec_check_ctx(c, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "window"), "window > n_batch: '%s'", err.msg);
    sp.swift_window = 32;
    sd_swift_state *st = NULL;
    sd_swift_state_new(6, &sp, 1, &st, NULL);
    sp.swift_state = st;
    CHECK(sd_spec_check_ctx(c, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "6-layer"), "a state of another model: '%s'",
          err.msg);
    sd_swift_state_free(st);
    CHECK(sd_swift_state_new(2, &sp, 1, &st, &err) == SD_ERR_ARG, "a 2-layer state must be refused");
    sd_ctx_free(c);
    sd_model_free(m);
}

int main(void) {
    view_len_pass();
    const float o1[1] = {0.37f}, o2[2] = {0.7f, 0.2f};
    gp_toy(1, f1, o1, 0.02);
    gp_toy(2, f2, o2, 0.08);
    planted_mask();
    tree_budget_choice();
    save_load();
    bad_input();
    const swift_case cases[] = {
        {"stories-ee", "models/stories-ee.gguf", 8},
        {"stories-plain", "models/stories-plain.gguf", 8},
        {"tiny-spm f32 (random weights)", "models/tiny-llama-spm-f32.gguf", 6},
        {"tiny-qwen2 f32 (random weights)", "models/tiny-qwen2-gpt2-f32.gguf", 6},
    };
    int n_predict = tl_scale() < 1 ? 24 : 48;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) greedy_equivalence(&cases[i], n_predict);
    first_token_distribution(0);
    first_token_distribution(12);
    return tl_finish("test_swift");
}
