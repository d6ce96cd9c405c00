/* test_sv: Speculative Verification — the selection rule against a brute-force search (one sequence and batch
 * allocations), equal-count bins and the profile's beta / information gain, profiles for another target and bad
 * tables refused, the latency table (interpolation, file round trip, wrong key, not a table), and greedy
 * equivalence with SV on the draft model, early exit, n-gram and SWIFT drafters, alone and in a scheduler. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "testlib.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------------ selection vs brute force */
static double gp_of(const sd_sv_latency *l, const float *beta, int ld, const int *k, const int *n, int m, int fs,
                    int fd, double ft) {
    double tok = ft;
    int tot = fd;
    for (int i = 0; i < m; i++) {
        double p = 1;
        tok += 1;
        for (int j = 0; j < n[i]; j++) tok += p *= beta[i * ld + j];
        tot += n[i];
        (void)k;
    }
    return tok / sd_sv_latency_time(l, tot, m + fs);
}

static void selection_bruteforce(void) {
    int bad = 0, cases = 0;
    for (int trial = 0; trial < 400; trial++) {
        enum { NM = 6 };
        const int n_max = 6, bs[3] = {1, 2, 4};
        double t[3 * (NM + 1)];
        for (int r = 0; r < 3; r++) { /* increasing in n; some flat starts, some steep, some steps (non-concave) */
            double c = 1e-3 * (1 + urand()) * bs[r];
            const int step = 1 + (int)(urand() * 4);
            for (int n = 0; n <= n_max; n++) {
                if (trial % 2) c += 1e-4 * urand() * urand() * 10 * (n > 2 ? 3 : 0.2);
                else if (n == step) c *= 1.2 + urand();
                t[r * (n_max + 1) + n] = c;
            }
        }
        sd_sv_latency *l = NULL;
        if (sd_sv_latency_new(n_max, bs, 3, t, &l, NULL)) {
            CHECK(0, "latency table");
            return;
        }
        const int m = 1 + (int)(urand() * 3), ld = 5, fs = trial % 3 == 0 ? 1 : 0, fd = fs ? 2 : 0;
        float beta[3 * 5];
        int k[3], n[3], bn[3] = {0}, cur[3];
        for (int i = 0; i < m; i++) {
            k[i] = (int)(urand() * 5);
            for (int j = 0; j < ld; j++) beta[i * ld + j] = (float)(trial % 5 == 0 ? 0.5 : urand());
        }
        double got = sd_sv_select(l, beta, ld, k, m, fs, fd, fs, n);
        /* every allocation n_i in [min(1, k_i), k_i] */
        double best = -1;
        for (int i = 0; i < m; i++) cur[i] = k[i] > 0;
        for (;;) {
            double g = gp_of(l, beta, ld, k, cur, m, fs, fd, fs);
            if (g > best) best = g, memcpy(bn, cur, sizeof bn);
            int i = 0;
            while (i < m && cur[i] == k[i]) cur[i] = k[i] > 0, i++;
            if (i == m) break;
            cur[i]++;
        }
        double mine = gp_of(l, beta, ld, k, n, m, fs, fd, fs);
        bool ok = fabs(mine - best) <= 1e-9 * best && fabs(got - best) <= 1e-9 * best;
        for (int i = 0; i < m; i++) ok &= n[i] >= (k[i] > 0) && n[i] <= k[i];
        if (!ok && bad++ < 3)
            fprintf(stderr, "trial %d: m %d k %d,%d,%d: chose %d,%d,%d (%g), brute force %d,%d,%d (%g)\n", trial, m,
                    k[0], m > 1 ? k[1] : 0, m > 2 ? k[2] : 0, n[0], m > 1 ? n[1] : 0, m > 2 ? n[2] : 0, mine, bn[0],
                    m > 1 ? bn[1] : 0, m > 2 ? bn[2] : 0, best);
        cases++;
        sd_sv_latency_free(l);
    }
    CHECK(bad == 0, "selection differs from the brute-force optimum in %d of %d cases", bad, cases);
    /* the rule itself: a flat latency verifies everything, a steep one only the first token */
    sd_sv_latency *l = NULL;
    const int b1 = 1;
    double flat[5] = {1, 1, 1, 1, 1}, steep[5] = {1, 10, 20, 30, 40};
    float beta[4] = {0.9f, 0.9f, 0.9f, 0.9f};
    int k = 4, n = 0;
    sd_sv_latency_new(4, &b1, 1, flat, &l, NULL);
    sd_sv_select(l, beta, 4, &k, 1, 0, 0, 0, &n);
    CHECK(n == 4, "flat latency: verified %d of 4", n);
    sd_sv_latency_free(l);
    sd_sv_latency_new(4, &b1, 1, steep, &l, NULL);
    sd_sv_select(l, beta, 4, &k, 1, 0, 0, 0, &n);
    CHECK(n == 1, "steep latency: verified %d (want 1)", n);
    sd_sv_latency_free(l);
}

/* ------------------------------------------------------------------ bins and the profile */
static void bins_and_profile(const sd_model *tm, const sd_model *other) {
    enum { N = 1000 };
    static float s[N], a[N];
    static uint8_t acc[N];
    for (int i = 0; i < N; i++) {
        s[i] = (float)urand();
        a[i] = (float)urand();
        acc[i] = s[i] > 0.5f;
    }
    sd_sv_profile *p = NULL;
    sd_sv_profile_info info;
    sd_error err = {0};
    sd_status st = sd_sv_profile_build(tm, s, a, acc, N, 20, 10, &p, &info, &err);
    CHECK(st == SD_OK, "build: %s", err.msg);
    if (st) return;
    sd_sv_profile_desc d;
    sd_sv_profile_get(p, &d);
    CHECK(d.n_s == 20 && d.n_a == 10, "bins %d x %d", d.n_s, d.n_a);
    int worst = 0;
    for (int i = 0; i < d.n_s; i++) {
        int c = 0;
        for (int j = 0; j < d.n_a; j++) c += d.count[i * d.n_a + j];
        if (abs(c - N / 20) > worst) worst = abs(c - N / 20);
    }
    for (int j = 0; j < d.n_a; j++) {
        int c = 0;
        for (int i = 0; i < d.n_s; i++) c += d.count[i * d.n_a + j];
        if (abs(c - N / 10) > worst) worst = abs(c - N / 10);
    }
    CHECK(worst <= 1, "equal-count bins: a bin is off by %d", worst);
    CHECK(sd_sv_profile_beta(p, 0.9f, 0.3f) == 1.0f && sd_sv_profile_beta(p, 0.1f, 0.3f) == 0.0f, "beta follows S");
    CHECK(info.info_gain > 0.9 && info.n_records == N, "information gain %g (acceptance is a function of S)", info.info_gain);
    CHECK(sd_sv_profile_check(p, tm, NULL) == SD_OK, "own target");
    err.msg[0] = 0;
    st = sd_sv_profile_check(p, other, &err);
    CHECK(st == SD_ERR_ARG && strstr(err.msg, "another target"), "another target refused: %s", err.msg);
    /* the same numbers through sd_sv_profile_new: for the other target refused, for this one taken */
    CHECK(sd_sv_profile_new(other, &d, &(sd_sv_profile *){NULL}, &err) == SD_ERR_ARG, "new: another target");
    sd_sv_profile *q = NULL;
    CHECK(sd_sv_profile_new(tm, &d, &q, &err) == SD_OK, "new: %s", err.msg);
    sd_sv_profile_free(q);
    /* bad tables */
    float bad_beta[200];
    memcpy(bad_beta, d.beta, sizeof bad_beta);
    bad_beta[7] = 1.5f;
    sd_sv_profile_desc b = d;
    b.beta = bad_beta;
    CHECK(sd_sv_profile_new(tm, &b, &q, &err) == SD_ERR_ARG && strstr(err.msg, "probability"), "beta 1.5: %s", err.msg);
    float edges[19];
    memcpy(edges, d.s_edges, sizeof edges);
    edges[3] = edges[2];
    b = d;
    b.s_edges = edges;
    CHECK(sd_sv_profile_new(tm, &b, &q, &err) == SD_ERR_ARG && strstr(err.msg, "ascend"), "edges: %s", err.msg);
    sd_sv_profile_free(p);
    /* ties stay in one bin */
    for (int i = 0; i < N; i++) s[i] = i < N / 2 ? 1.0f : (float)urand() * 0.5f;
    st = sd_sv_profile_build(tm, s, a, acc, N, 20, 10, &p, &info, &err);
    sd_sv_profile_get(p, &d);
    int tot = 0;
    for (int i = 0; st == SD_OK && i < d.n_s * d.n_a; i++) tot += d.count[i];
    CHECK(st == SD_OK && d.n_s < 20 && d.n_s > 1 && tot == N, "ties: %d S bins, %d tokens", d.n_s, tot);
    sd_sv_profile_free(p);
    CHECK(sd_sv_profile_build(tm, s, a, acc, 0, 20, 10, &p, NULL, &err) == SD_ERR_ARG, "no records refused");
}

/* ------------------------------------------------------------------ the latency table */
static void latency_table(const sd_model *tm, const sd_model *other) {
    const int bs[2] = {1, 4};
    double t[2 * 3] = {1, 2, 4, 3, 6, 12};
    sd_sv_latency *l = NULL, *l2 = NULL;
    sd_error err = {0};
    CHECK(sd_sv_latency_new(2, bs, 2, t, &l, &err) == SD_OK, "new: %s", err.msg);
    CHECK(fabs(sd_sv_latency_time(l, 1, 1) - 2) < 1e-12, "T(1, 1)");
    CHECK(sd_sv_latency_n_max(l) == 2 && sd_sv_latency_max_batch(l) == 4, "n_max %d, largest batch %d",
          sd_sv_latency_n_max(l), sd_sv_latency_max_batch(l));
    CHECK(fabs(sd_sv_latency_time(l, 2, 4) - 4.5) < 1e-12, "T(mean 0.5, 4) interpolated in n");
    CHECK(fabs(sd_sv_latency_time(l, 0, 2) - (1 + (3 - 1) / 3.0)) < 1e-12, "T(0, 2) interpolated in b");
    CHECK(fabs(sd_sv_latency_time(l, 3, 1) - 6) < 1e-12, "T(3, 1) extrapolated");
    sd_sv_latency_observe(l, 1, 1, 4, 0.5);
    CHECK(fabs(sd_sv_latency_time(l, 1, 1) - 3) < 1e-12, "observe decays toward the live pass");
    const char *path = "/tmp/specdec_test_sv_latency.txt";
    CHECK(sd_sv_latency_save(l, tm, 2, path, &err) == SD_OK, "save: %s", err.msg);
    CHECK(sd_sv_latency_load(tm, 2, path, &l2, &err) == SD_OK && fabs(sd_sv_latency_time(l2, 1, 1) - 3) < 1e-6,
          "load: %s", err.msg);
    sd_sv_latency_free(l2);
    CHECK(sd_sv_latency_load(tm, 3, path, &l2, &err) == SD_ERR_ARG && strstr(err.msg, "another model, weight type or thread"),
          "another thread count: %s", err.msg);
    CHECK(sd_sv_latency_load(other, 2, path, &l2, &err) == SD_ERR_ARG, "another model: %s", err.msg);
    { /* the same model in another weight type (same hyper-parameters and norms) is another table */
        sd_model_params mp = sd_model_default_params();
        mp.convert_type = "q8_0";
        sd_model *q8 = NULL;
        if (sd_model_load(tl_shared("models/stories-ee.gguf"), &mp, &q8, &err) == SD_OK) {
            CHECK(sd_sv_latency_load(q8, 2, path, &l2, &err) == SD_ERR_ARG && strstr(err.msg, "weight type"),
                  "another weight type: %s", err.msg);
            sd_model_free(q8);
        } else {
            CHECK(0, "load a q8_0 copy: %s", err.msg);
        }
    }
    /* a version 1 file (no weight type) is refused as another model's, so that callers measure again */
    const char *v1 = "specdec-sv-latency 1\nmodel 00000000 8 192 512 threads 2\nn_max 2\nbatch 1\nt 1 1 2 3\n";
    tl_write_file(path, v1, strlen(v1));
    CHECK(sd_sv_latency_load(tm, 2, path, &l2, &err) == SD_ERR_ARG, "version 1: %s", err.msg);
    tl_write_file(path, "{\"not\": 1}\n", 11);
    CHECK(sd_sv_latency_load(tm, 2, path, &l2, &err) == SD_ERR_FORMAT && strstr(err.msg, "not an SV latency"),
          "garbage: %s", err.msg);
    remove(path);
    double neg[3] = {1, -1, 2};
    CHECK(sd_sv_latency_new(2, bs, 1, neg, &l2, &err) == SD_ERR_ARG, "negative time refused");
    sd_sv_latency_free(l);
}

/* ------------------------------------------------------------------ greedy equivalence */
enum { N_CTX = 256, N_PRED = 32, P = 3 };
static const char *TEXTS[P] = {"Once upon a time", "Lily and Tom went to the park. They saw a big tree.",
                               "The cat sat on the mat. The cat sat on the"};

static sd_ctx *mkctx(const sd_model *m, int n_seq) { return tl_ctx(m, N_CTX, n_seq, 64, 2); }

typedef struct recs {
    int n, n_acc;
    float s[20000], a[20000];
    uint8_t acc[20000];
} recs;
static void record(float s, float a, bool accepted, void *user) {
    recs *r = user;
    if (r->n < 20000) r->s[r->n] = s, r->a[r->n] = a, r->acc[r->n] = accepted, r->n++;
}

/* Runs P sessions (alone, or through one scheduler) with params sp; returns the outputs and summed stats. */
static float g_temp = 0; /* the runs' temperature */
static bool run(sd_ctx *ct, const sd_spec_params *sp, bool batched, int32_t out[P][N_PRED], sd_spec_stats *sum) {
    sd_session *ss[P] = {0};
    sd_sched *sc = NULL;
    sd_error err = {0};
    sd_status st = batched ? sd_sched_new(ct, NULL, &sc, &err) : SD_OK;
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < P && !st; i++) {
        sd_session_params p = sd_session_default_params();
        p.seq = batched ? i : 0;
        p.sampling.temp = g_temp;
        p.sampling.seed = 1234 + (uint64_t)i;
        p.spec = *sp;
        p.n_predict = N_PRED;
        p.ignore_eos = true;
        int32_t tok[128];
        int n = 0;
        st = sd_tokenize(sd_ctx_model(ct), TEXTS[i], strlen(TEXTS[i]), true, false, tok, 128, &n, &err);
        if (!st) st = sd_session_new(ct, &p, &ss[i], &err);
        if (!st) st = sd_session_set_prompt(ss[i], tok, n, &err);
        if (!st && batched) st = sd_sched_add(sc, ss[i], &err);
        while (!st && !batched && !sd_session_done(ss[i])) st = sd_session_step(ss[i], &err);
        if (!st && !batched) {
            sd_session_read(ss[i], out[i], N_PRED);
            sd_spec_stats x;
            sd_session_stats(ss[i], &x);
            sum->n_drafted += x.n_drafted, sum->n_verified += x.n_verified, sum->n_accepted += x.n_accepted;
            sum->n_rounds += x.n_rounds, sum->n_gen += x.n_gen;
            sd_session_free(ss[i]);
            ss[i] = NULL;
        }
    }
    while (!st && batched && sd_sched_n_live(sc) > 0) st = sd_sched_step(sc, &err);
    for (int i = 0; i < P && batched && !st; i++) {
        st = sd_session_status(ss[i], &err);
        sd_session_read(ss[i], out[i], N_PRED);
        sd_spec_stats x;
        sd_session_stats(ss[i], &x);
        sum->n_drafted += x.n_drafted, sum->n_verified += x.n_verified, sum->n_accepted += x.n_accepted;
        sum->n_rounds += x.n_rounds, sum->n_gen += x.n_gen;
    }
    for (int i = 0; i < P; i++) sd_session_free(ss[i]);
    sd_sched_free(sc);
    CHECK(st == SD_OK, "run: %s", err.msg);
    return st == SD_OK;
}

static void greedy_equivalence(sd_model *tm, sd_model *dm, sd_model *cm) {
    sd_ctx *ct = mkctx(tm, P), *cd = mkctx(dm, P), *cc = mkctx(cm, P), *ce = mkctx(tm, P);
    sd_spec_params plain = sd_spec_default_params();
    int32_t want[P][N_PRED], got[P][N_PRED];
    sd_spec_stats st;
    run(ct, &plain, false, want, &st);
    /* a latency table where verifying costs grow fast: SV has to choose */
    const int bs[3] = {1, 2, 4};
    double t[3 * 9];
    for (int r = 0; r < 3; r++)
        for (int n = 0; n <= 8; n++) t[r * 9 + n] = bs[r] * (1.0 + 0.35 * n * n);
    sd_sv_latency *lat = NULL;
    sd_sv_latency_new(8, bs, 3, t, &lat, NULL);
    const char *names[5] = {"draft model + companion model", "early exit E=2 + companion exit E=3",
                            "ngram + companion model", "swift + companion exit E=3", "swift + companion model"};
    for (int c = 0; c < 5; c++) {
        sd_spec_params sp = sd_spec_default_params();
        sp.gamma = 6;
        if (c == 0) sp.method = SD_SPEC_DRAFT, sp.draft_ctx = cd, sp.companion_ctx = cc;
        if (c == 1) sp.method = SD_SPEC_EARLY_EXIT, sp.exit_layer = 2, sp.companion_ctx = ce, sp.companion_exit = 3;
        if (c == 2) sp.method = SD_SPEC_NGRAM, sp.companion_ctx = cc;
        if (c >= 3) sp.method = SD_SPEC_SWIFT, sp.swift_window = 8, sp.companion_ctx = c == 3 ? ce : cc;
        if (c == 3) sp.companion_exit = 3;
        /* profile: record without SV, build the table */
        recs *r = calloc(1, sizeof *r);
        sp.sv_record_cb = record, sp.sv_record_user = r;
        run(ct, &sp, false, got, &st);
        CHECK(!memcmp(got, want, sizeof want), "%s: recording changed the output", names[c]);
        CHECK(r->n > 10 && r->n <= st.n_drafted, "%s: %d records of %d drafted", names[c], r->n, st.n_drafted);
        sd_sv_profile *prof = NULL;
        sd_error err = {0};
        sd_sv_profile_info info;
        CHECK(sd_sv_profile_build(tm, r->s, r->a, r->acc, r->n, 10, 10, &prof, &info, &err) == SD_OK, "build: %s",
              err.msg);
        sp.sv_record_cb = NULL;
        sp.verify = SD_VERIFY_SV, sp.sv_profile = prof, sp.sv_latency = lat;
        CHECK(sd_spec_check_ctx(ct, &sp, &err) == SD_OK, "%s: check: %s", names[c], err.msg);
        for (int batched = 0; batched < 2; batched++) {
            memset(got, 0, sizeof got);
            run(ct, &sp, batched, got, &st);
            CHECK(!memcmp(got, want, sizeof want), "%s, %s: SV output differs from plain greedy", names[c],
                  batched ? "batched" : "alone");
            CHECK(st.n_verified <= st.n_drafted && (c == 2 || st.n_verified >= st.n_rounds - P), "%s: verified %d of %d",
                  names[c], st.n_verified, st.n_drafted);
            if (c != 2) CHECK(st.n_verified < st.n_drafted, "%s: SV dropped nothing (%d of %d)", names[c],
                              st.n_verified, st.n_drafted);
        }
        /* sampling: SV runs (q and the companion through the sampler's processing), every sequence completes */
        g_temp = 0.8f;
        for (int batched = 0; batched < 2; batched++) {
            bool ok = run(ct, &sp, batched, got, &st);
            CHECK(ok && st.n_gen == P * N_PRED && st.n_verified <= st.n_drafted && st.n_rounds > 0, "%s, sampling%s", names[c],
                  batched ? ", batched" : "");
        }
        g_temp = 0;
        sd_sv_profile_free(prof);
        free(r);
    }
    /* misuse: verify=sv without a profile / a companion; a companion exit beyond its model */
    sd_spec_params sp = sd_spec_default_params();
    sd_error err = {0};
    sp.method = SD_SPEC_DRAFT, sp.draft_ctx = cd, sp.verify = SD_VERIFY_SV, sp.companion_ctx = cc;
    CHECK(sd_spec_check_ctx(ct, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "profile"), "no profile: %s", err.msg);
    sp.companion_ctx = NULL;
    sp.verify = SD_VERIFY_ALL;
    CHECK(sd_spec_set(&sp, "verify", "sv", &err) == SD_OK && sp.verify == SD_VERIFY_SV, "verify=sv parses");
    CHECK(sd_spec_set(&sp, "verify", "some", &err) == SD_ERR_ARG && strstr(err.msg, "all|sv"), "bad verify: %s", err.msg);
    sp.companion_ctx = ce, sp.companion_exit = 99, sp.verify = SD_VERIFY_ALL;
    CHECK(sd_spec_check_ctx(ct, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "companion"), "exit 99: %s", err.msg);
    sp.companion_exit = 0, sp.tree_nodes = 8, sp.verify = SD_VERIFY_SV;
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "tree"), "trees: %s", err.msg);
    sp.method = SD_SPEC_SWIFT;
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "tree"), "swift trees: %s", err.msg);
    /* profiling (sv_record_cb) records chains' drafts too: a tree's nodes are not a chain's positions */
    sp.verify = SD_VERIFY_ALL, sp.sv_record_cb = record;
    for (int tn = 8; tn >= -1; tn -= 9) {
        sp.tree_nodes = tn;
        CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_ERR_ARG && strstr(err.msg, "token trees"),
              "recording swift trees (tree_nodes=%d): %s", tn, err.msg);
    }
    sp.tree_nodes = 0;
    CHECK(sd_spec_check(tm, NULL, &sp, &err) == SD_OK, "recording swift chains: %s", err.msg);
    sd_sv_latency_free(lat);
    sd_ctx_free(ct), sd_ctx_free(cd), sd_ctx_free(cc), sd_ctx_free(ce);
}

int main(void) {
    selection_bruteforce();
    sd_model *tm = tl_load_model("models/stories-ee.gguf"), *dm = tl_load_model("models/stories260K.gguf"),
             *cm = tl_load_model("models/stories-plain.gguf");
    if (tm && dm && cm) {
        bins_and_profile(tm, cm);
        latency_table(tm, cm);
        greedy_equivalence(tm, dm, cm);
    }
    sd_model_free(tm), sd_model_free(dm), sd_model_free(cm);
    return tl_finish("test_sv");
}
