/* Sessions, token trees and continuous batching:
 *  1. a session's output inside a batch (up to 16 sessions, mixed methods — plain, draft model, draft-model tree,
 *     n-gram, early exit, DEL, SpecBound — different prompt lengths, joining at different steps, one cancelled
 *     midway) equals its output alone: greedy, and sampling with a per-session seed;
 *  2. token trees: greedy tree verification gives plain greedy output; after every round (including rounds whose
 *     accepted path is not a prefix of the block) the target's cache equals a plain run's, bit for bit;
 *  3. the scheduler merges the sessions' verification passes into few forward calls; a session whose cache cannot
 *     hold its block fails alone;
 *  4. the KV pool: 1,000 short sessions through a small pool all give their alone output and leave it empty; a
 *     session that cannot get a page fails alone;
 *  5. API misuse: bad sequence ids, a sequence used twice, empty prompts. */
#include <stdlib.h>
#include <string.h>

#include "specdec.h"
#include "speculative/merge.h"
#include "testlib.h"

enum { N_CTX = 256, MAX_P = 16, N_METHODS = 7 };

static sd_ctx *mkctx_pool(sd_model *m, int n_seq, int n_kv_cells) {
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_kv_cells = n_kv_cells;
    cp.n_ctx = N_CTX;
    cp.n_seq = n_seq;
    cp.n_batch = 64;
    cp.n_threads = 2;
    return tl_ctx_with(m, &cp);
}

static sd_ctx *mkctx(sd_model *m, int n_seq) { return mkctx_pool(m, n_seq, 0); }

static const char *METHOD_NAMES[N_METHODS] = {"plain", "draft", "draft tree", "ngram", "early exit", "DEL", "SpecBound"};

static sd_spec_params method_params(int mi, sd_ctx *draft) {
    sd_spec_params sp = sd_spec_default_params();
    switch (mi) {
    case 0: break;
    case 1: sp.method = SD_SPEC_DRAFT, sp.draft_ctx = draft, sp.gamma = 4; break;
    case 2: sp.method = SD_SPEC_DRAFT, sp.draft_ctx = draft, sp.gamma = 4, sp.tree_nodes = 12; break;
    case 3: sp.method = SD_SPEC_NGRAM, sp.gamma = 3; break;
    case 4: sp.method = SD_SPEC_EARLY_EXIT, sp.exit_layer = 3, sp.gamma = 3; break;
    case 5: sp.method = SD_SPEC_DEL, sp.del_dmax = 6; break;
    case 6: sp.method = SD_SPEC_SPECBOUND, sp.sb_tau = 0.5f, sp.sb_width = 4; break;
    }
    return sp;
}

static const char *TEXTS[] = {"Once upon a time", "The little dog", "Lily and Tom went to the park. They saw a big tree.",
                              "One day", "The cat sat on the mat. The cat sat on the mat. The",
                              "Tim had a red ball. He liked to play with it every day. One day the ball"};
enum { N_TEXTS = sizeof TEXTS / sizeof TEXTS[0] };

typedef struct job {
    int method, text, n_predict, seq;
    uint64_t seed;
    int32_t prompt[128];
    int n_prompt;
    int32_t want[N_CTX];
    int n_want;
} job;

static sd_session_params job_params(const job *j, sd_ctx *draft, float temp) {
    sd_session_params p = sd_session_default_params();
    p.seq = j->seq;
    p.sampling.temp = temp;
    p.sampling.seed = j->seed;
    p.spec = method_params(j->method, draft);
    p.n_predict = j->n_predict;
    p.ignore_eos = true;
    return p;
}

/* The session alone (its own contexts with one sequence). */
static void run_alone(job *j, sd_model *tm, sd_model *dm, float temp) {
    sd_ctx *ct = mkctx(tm, 1), *cd = mkctx(dm, 1);
    job solo = *j;
    solo.seq = 0;
    sd_session_params p = job_params(&solo, cd, temp);
    sd_session *s = NULL;
    sd_error err;
    sd_status st = sd_session_new(ct, &p, &s, &err);
    if (!st) st = sd_session_set_prompt(s, j->prompt, j->n_prompt, &err);
    while (!st && !sd_session_done(s)) st = sd_session_step(s, &err);
    CHECK(st == SD_OK, "alone (%s): %s", METHOD_NAMES[j->method], err.msg);
    j->n_want = sd_session_read(s, j->want, N_CTX);
    sd_session_free(s);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
}

/* P sessions through one scheduler; session i joins at step i % 5 (after the previous ones); one is cancelled. */
static void batch_equals_alone(sd_model *tm, sd_model *dm, int P, float temp) {
    job jobs[MAX_P];
    for (int i = 0; i < P; i++) {
        job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        j->method = i % N_METHODS;
        j->text = (i * 5 + 1) % N_TEXTS;
        j->n_predict = 24 + 7 * (i % 4);
        j->seq = P - 1 - i; /* sequence ids unrelated to the order */
        j->seed = 1000 + 77 * (uint64_t)i;
        sd_tokenize(tm, TEXTS[j->text], strlen(TEXTS[j->text]), true, false, j->prompt, 128, &j->n_prompt, NULL);
        run_alone(j, tm, dm, temp);
    }
    sd_ctx *ct = mkctx(tm, P), *cd = mkctx(dm, P);
    sd_sched *sc = NULL;
    sd_error err;
    CHECK(sd_sched_new(ct, NULL, &sc, &err) == SD_OK, "sched: %s", err.msg);
    sd_session *ss[MAX_P] = {0};
    const int cancel = P > 4 ? 4 : -1;
    int joined = 0, steps = 0, max_live = 0;
    while ((joined < P || sd_sched_n_live(sc) > 0) && steps < 10000) {
        while (joined < P && joined / 3 <= steps / 2) { /* three join every other step */
            job *j = &jobs[joined];
            sd_session_params p = job_params(j, cd, temp);
            CHECK(sd_session_new(ct, &p, &ss[joined], &err) == SD_OK, "session: %s", err.msg);
            CHECK(sd_session_set_prompt(ss[joined], j->prompt, j->n_prompt, &err) == SD_OK, "prompt: %s", err.msg);
            CHECK(sd_sched_add(sc, ss[joined], &err) == SD_OK, "add: %s", err.msg);
            joined++;
        }
        if (sd_sched_n_live(sc) > max_live) max_live = sd_sched_n_live(sc);
        CHECK(sd_sched_step(sc, &err) == SD_OK, "step: %s", err.msg);
        steps++;
        if (cancel >= 0 && steps == 12 && ss[cancel] && !sd_session_done(ss[cancel])) {
            sd_session_cancel(ss[cancel]);
            CHECK(sd_kv_len(ct, jobs[cancel].seq, -1) == 0, "a cancelled session's cache is not cleared");
        }
    }
    int differ = 0;
    for (int i = 0; i < P; i++) {
        int n = 0;
        const int32_t *got = sd_session_tokens(ss[i], &n);
        CHECK(sd_session_status(ss[i], &err) == SD_OK, "session %d failed: %s", i, err.msg);
        bool same = i == cancel ? n <= jobs[i].n_want && memcmp(got, jobs[i].want, (size_t)n * sizeof *got) == 0
                                : n == jobs[i].n_want && memcmp(got, jobs[i].want, (size_t)n * sizeof *got) == 0;
        differ += !same;
        CHECK(same, "P=%d %s: session %d (%s, prompt %d) differs from its run alone (%d vs %d tokens)", P,
              temp > 0 ? "sampling" : "greedy", i, METHOD_NAMES[jobs[i].method], jobs[i].text, n, jobs[i].n_want);
        sd_session_free(ss[i]);
        CHECK(sd_kv_len(ct, jobs[i].seq, -1) == 0, "a freed session's cache is not cleared");
    }
    printf("  P=%2d %-8s %2d sessions (7 methods), %3d steps, up to %2d live: %d differ from alone\n", P,
           temp > 0 ? "sampling" : "greedy", P, steps, max_live, differ);
    sd_sched_free(sc);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
}

/* ---- merge: three sessions' requests (a prompt chunk, a chain block, a tree block) in one forward call give the
 * bits of three calls alone */
static void merge_unit(sd_model *tm) {
    sd_model_info info;
    sd_model_get_info(tm, &info);
    const int V = info.n_vocab;
    sd_ctx *a = mkctx(tm, 3), *b = mkctx(tm, 3);
    int32_t pre[4] = {1, 50, 60, 70}, t0[5] = {1, 11, 12, 13, 14}, t1[3] = {80, 81, 82}, t2[4] = {90, 91, 92, 93};
    int32_t par2[4] = {-1, 0, 0, 1}, pos2[4] = {4, 5, 5, 6};
    uint8_t w0[5] = {0, 0, 0, 0, 1}, w1[3] = {1, 1, 1}, w2[4] = {1, 1, 1, 1};
    for (int s = 1; s < 3; s++) { /* sequences 1 and 2 have a cached prefix */
        sd_forward(a, &(sd_block){.n = 4, .token = pre, .seq_all = s}, &(sd_forward_args){0}, NULL);
        sd_forward(b, &(sd_block){.n = 4, .token = pre, .seq_all = s}, &(sd_forward_args){0}, NULL);
    }
    float *la = malloc((size_t)16 * V * sizeof *la), *lb = la + (size_t)8 * V;
    fwd_req ra[3] = {{.seq = 0, .n = 5, .token = t0, .want = w0, .logits = la},
                     {.seq = 1, .n = 3, .token = t1, .want = w1, .logits = la + (size_t)1 * V},
                     {.seq = 2, .n = 4, .token = t2, .parent = par2, .pos = pos2, .want = w2, .logits = la + (size_t)4 * V}};
    fwd_req rb[3];
    memcpy(rb, ra, sizeof ra);
    rb[0].logits = lb, rb[1].logits = lb + (size_t)1 * V, rb[2].logits = lb + (size_t)4 * V;
    merge_ws *ws = merge_ws_new(a);
    CHECK(ws && merge_run(ws, ra, 3, NULL) == SD_OK, "merge_run");
    CHECK(ws && merge_calls(ws) == 1, "three requests took %llu forward calls, not one",
          ws ? (unsigned long long)merge_calls(ws) : 0ull);
    for (int i = 0; i < 3; i++) CHECK(ra[i].status == SD_OK && fwd_req_run(b, &rb[i]) == SD_OK, "request %d", i);
    CHECK(memcmp(la, lb, (size_t)8 * V * sizeof *la) == 0, "merged logits differ from the requests' alone");
    for (int s = 0; s < 3; s++) CHECK(sd_kv_len(a, s, -1) == sd_kv_len(b, s, -1), "sequence %d's cache length", s);
    merge_ws_free(ws);
    free(la);
    sd_ctx_free(a);
    sd_ctx_free(b);
}

/* ---- trees: greedy output and the caches after every round */
typedef struct tree_check {
    sd_ctx *target, *ref;
    int n_layer, kvd, rounds;
    bool ok;
} tree_check;

static bool on_round(const sd_spec_round *r, void *user) {
    tree_check *tc = user;
    tc->rounds++;
    float *a = malloc((size_t)tc->kvd * 4 * sizeof *a), *b = a + 2 * tc->kvd;
    if (sd_kv_len(tc->target, 0, -1) != r->n_committed) tc->ok = false;
    for (int l = 0; l < tc->n_layer && tc->ok; l++)
        for (int pos = 0; pos < r->n_committed && tc->ok; pos++) {
            sd_kv_read(tc->target, 0, l, pos, a, a + tc->kvd, NULL);
            sd_kv_read(tc->ref, 0, l, pos, b, b + tc->kvd, NULL);
            tc->ok = memcmp(a, b, (size_t)tc->kvd * 2 * sizeof *a) == 0;
        }
    free(a);
    return true;
}

static void trees_greedy(sd_model *tm, sd_model *dm) {
    sd_model_info info;
    sd_model_get_info(tm, &info);
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *smp;
    sd_sampler_new(&spp, info.n_vocab, &smp, NULL);
    const int topks[3][4] = {{10, 5, 3, 1}, {2, 2, 2, 2}, {4, 1, 1, 1}};
    int runs = 0, bad = 0, branch_rounds = 0, rounds = 0;
    for (int ti = 0; ti < N_TEXTS; ti++) {
        int32_t prompt[128], plain[80];
        int np = 0, n_plain = 0;
        sd_tokenize(tm, TEXTS[ti], strlen(TEXTS[ti]), true, false, prompt, 128, &np, NULL);
        const int n_predict = 60;
        sd_ctx *ct = mkctx(tm, 1), *cref = mkctx(tm, 1), *cd = mkctx(dm, 1);
        sd_generate(ct, smp, prompt, np, n_predict, true, plain, &n_plain, NULL, NULL, NULL, NULL);
        int32_t seq[256];
        memcpy(seq, prompt, (size_t)np * sizeof *seq);
        memcpy(seq + np, plain, (size_t)n_plain * sizeof *seq);
        for (int i = 0; i < np + n_plain - 1; i += 32) {
            int n = np + n_plain - 1 - i < 32 ? np + n_plain - 1 - i : 32;
            CHECK(sd_forward(cref, &(sd_block){.n = n, .token = seq + i}, &(sd_forward_args){0}, NULL) == SD_OK, "ref");
        }
        for (int v = 0; v < 3; v++)
            for (int nodes = 4; nodes <= 16; nodes += 12) {
                sd_spec_params sp = sd_spec_default_params();
                sp.method = SD_SPEC_DRAFT;
                sp.draft_ctx = cd;
                sp.gamma = 5;
                sp.tree_nodes = nodes;
                memcpy(sp.tree_topk, topks[v], sizeof topks[v]);
                tree_check tc = {ct, cref, info.n_layer, info.n_head_kv * (info.n_embd / info.n_head), 0, true};
                sp.round_cb = on_round;
                sp.round_user = &tc;
                int32_t got[80];
                int n_got = 0;
                sd_spec_stats st;
                sd_error err;
                sd_status s = sd_spec_generate(ct, smp, &sp, prompt, np, n_predict, true, got, &n_got, NULL, NULL, &st, &err);
                bool same = s == SD_OK && n_got == n_plain && memcmp(got, plain, (size_t)n_got * sizeof *got) == 0;
                CHECK(same, "tree (%d nodes, top-k set %d, prompt %d): output differs from plain greedy %s", nodes, v, ti,
                      s ? err.msg : "");
                CHECK(tc.ok, "tree (%d nodes, top-k set %d, prompt %d): the cache differs from a plain run's", nodes, v, ti);
                runs++;
                bad += !same || !tc.ok;
                branch_rounds += st.n_branch_rounds;
                rounds += st.n_rounds;
            }
        sd_ctx_free(ct);
        sd_ctx_free(cref);
        sd_ctx_free(cd);
    }
    CHECK(branch_rounds > 0, "no round accepted a path that is not a prefix of its block: the test is too weak");
    printf("  trees, greedy: %d runs, %d bad; %d rounds, %d accepted a non-prefix path (K/V rows moved)\n", runs, bad,
           rounds, branch_rounds);
    sd_sampler_free(smp);
}

/* ---- the KV pool */
static int pool_used(sd_ctx *c) {
    int used = -1;
    sd_kv_pool_usage(c, &used, NULL);
    return used;
}

static void pool_sessions(sd_model *tm, sd_model *dm) {
    enum { N_CFG = 8, P = 4 };
    const int N_SESSIONS = tl_scale() < 1 ? 100 : 1000;
    /* configurations: (method, prompt) pairs; each session repeats one, and must give its alone output */
    job cfg[N_CFG];
    const int methods[N_CFG] = {0, 1, 3, 4, 2, 0, 1, 3};
    for (int i = 0; i < N_CFG; i++) {
        job *j = &cfg[i];
        memset(j, 0, sizeof *j);
        j->method = methods[i];
        j->text = i % N_TEXTS;
        j->n_predict = 6;
        j->seed = 5 + i;
        sd_tokenize(tm, TEXTS[j->text], strlen(TEXTS[j->text]), true, false, j->prompt, 128, &j->n_prompt, NULL);
        if (j->n_prompt > 3 + i % 4) j->n_prompt = 3 + i % 4;
        run_alone(j, tm, dm, 0.0f);
    }
    /* a pool of one page per sequence (each session needs less than a page) */
    sd_ctx *ct = mkctx_pool(tm, P, P * 64), *cd = mkctx_pool(dm, P, P * 64);
    sd_sched *sc = NULL;
    sd_sched_new(ct, NULL, &sc, NULL);
    sd_session *slot[P] = {0};
    int slot_cfg[P] = {0}, started = 0, done = 0, bad = 0, max_used = 0;
    sd_error err;
    while (done < N_SESSIONS) {
        for (int s = 0; s < P && started < N_SESSIONS; s++) {
            if (slot[s]) continue;
            job j = cfg[started % N_CFG];
            j.seq = s;
            sd_session_params p = job_params(&j, cd, 0.0f);
            if (sd_session_new(ct, &p, &slot[s], &err) || sd_session_set_prompt(slot[s], j.prompt, j.n_prompt, &err) ||
                sd_sched_add(sc, slot[s], &err)) {
                CHECK(0, "pool session %d: %s", started, err.msg);
                return;
            }
            slot_cfg[s] = started++ % N_CFG;
        }
        if (sd_sched_step(sc, &err) != SD_OK) {
            CHECK(0, "pool step: %s", err.msg);
            return;
        }
        if (pool_used(ct) > max_used) max_used = pool_used(ct);
        for (int s = 0; s < P; s++) {
            if (!slot[s] || !sd_session_done(slot[s])) continue;
            int n = 0;
            const int32_t *t = sd_session_tokens(slot[s], &n);
            const job *ref = &cfg[slot_cfg[s]];
            bad += sd_session_status(slot[s], NULL) != SD_OK || n != ref->n_want ||
                   memcmp(t, ref->want, (size_t)n * sizeof *t) != 0;
            sd_session_free(slot[s]);
            slot[s] = NULL;
            done++;
        }
    }
    CHECK(bad == 0, "%d of %d sessions through a small pool differ from their alone output (or failed)", bad, N_SESSIONS);
    CHECK(pool_used(ct) == 0 && pool_used(cd) == 0, "the pools are not empty after every session ended (%d, %d cells)",
          pool_used(ct), pool_used(cd));
    printf("  pool: %d short sessions (4 methods) through a %d-cell pool, P=%d: %d bad; at most %d cells held; empty at the end\n",
           N_SESSIONS, P * 64, P, bad, max_used);
    sd_sched_free(sc);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
}

/* Three pages for two sequences: the long session runs out and fails with "pool exhausted"; the short one finishes
 * with its alone output. */
static void pool_exhaustion(sd_model *tm, sd_model *dm) {
    job shortj = {0}, longj = {0};
    shortj.text = 0, shortj.n_predict = 30, shortj.seed = 1;
    longj.text = 2, longj.n_predict = 200, longj.seq = 1, longj.seed = 2;
    sd_tokenize(tm, TEXTS[0], strlen(TEXTS[0]), true, false, shortj.prompt, 128, &shortj.n_prompt, NULL);
    sd_tokenize(tm, TEXTS[2], strlen(TEXTS[2]), true, false, longj.prompt, 128, &longj.n_prompt, NULL);
    run_alone(&shortj, tm, dm, 0.0f);
    sd_ctx *ct = mkctx_pool(tm, 2, 3 * 64);
    sd_sched *sc = NULL;
    sd_sched_new(ct, NULL, &sc, NULL);
    sd_session *a = NULL, *b = NULL;
    sd_error err;
    sd_session_params pa = job_params(&shortj, NULL, 0.0f), pb = job_params(&longj, NULL, 0.0f);
    sd_session_new(ct, &pa, &a, NULL);
    sd_session_new(ct, &pb, &b, NULL);
    sd_session_set_prompt(a, shortj.prompt, shortj.n_prompt, NULL);
    sd_session_set_prompt(b, longj.prompt, longj.n_prompt, NULL);
    sd_sched_add(sc, a, NULL);
    sd_sched_add(sc, b, NULL);
    for (int i = 0; i < 1000 && sd_sched_n_live(sc) > 0; i++) CHECK(sd_sched_step(sc, &err) == SD_OK, "step: %s", err.msg);
    sd_status sb = sd_session_status(b, &err);
    CHECK(sb == SD_ERR_NOMEM && strstr(err.msg, "pool"), "the long session did not fail with 'pool exhausted' (%d: %s)", sb,
          err.msg);
    int n = 0;
    const int32_t *t = sd_session_tokens(a, &n);
    CHECK(sd_session_status(a, NULL) == SD_OK && n == shortj.n_want && memcmp(t, shortj.want, (size_t)n * sizeof *t) == 0,
          "the short session was hurt by the other's failure");
    sd_session_free(a);
    sd_session_free(b);
    CHECK(pool_used(ct) == 0, "pool not empty after both sessions ended");
    sd_sched_free(sc);
    sd_ctx_free(ct);
}

/* ---- failures stay with their session; misuse */
static void isolation_and_misuse(sd_model *tm, sd_model *dm) {
    sd_ctx *ct = mkctx(tm, 2), *cd = mkctx(dm, 1);
    sd_error err;
    sd_session_params p = sd_session_default_params();
    sd_session *a = NULL, *b = NULL, *c = NULL;
    p.seq = 2;
    CHECK(sd_session_new(ct, &p, &a, &err) == SD_ERR_ARG && !a, "sequence 2 of a 2-sequence context accepted");
    p.seq = 1;
    p.spec = method_params(1, cd);
    CHECK(sd_session_new(ct, &p, &a, &err) == SD_ERR_ARG && !a, "draft sequence 1 of a 1-sequence draft context accepted");
    p.spec = sd_spec_default_params();
    p.spec.tree_nodes = 8;
    CHECK(sd_session_new(ct, &p, &a, &err) == SD_ERR_ARG && !a, "a tree without a draft model accepted");
    p.spec = sd_spec_default_params();
    p.n_predict = 40;
    p.ignore_eos = true;
    p.seq = 0;
    CHECK(sd_session_new(ct, &p, &a, &err) == SD_OK, "session: %s", err.msg);
    CHECK(sd_session_set_prompt(a, NULL, 0, &err) == SD_ERR_ARG, "empty prompt accepted");
    int32_t prompt[8] = {1, 100, 200, 300, 400, 500, 50, 60};
    int32_t bad_tok[2] = {1, 100000};
    CHECK(sd_session_set_prompt(a, bad_tok, 2, &err) == SD_ERR_ARG, "token outside the vocabulary accepted");
    CHECK(sd_session_new(ct, &p, &b, &err) == SD_OK, "session: %s", err.msg);
    sd_session_set_prompt(a, prompt, 8, NULL);
    sd_session_set_prompt(b, prompt, 4, NULL);
    sd_sched *sc = NULL;
    sd_sched_new(ct, NULL, &sc, NULL);
    CHECK(sd_sched_add(sc, a, &err) == SD_OK, "add: %s", err.msg);
    CHECK(sd_sched_add(sc, b, &err) == SD_ERR_ARG, "two live sessions on one sequence accepted");
    sd_session_free(b);
    /* session c on sequence 1 with a prompt that leaves no room: its rounds fail (context full) — a alone goes on */
    p.seq = 1;
    p.n_predict = 4;
    CHECK(sd_session_new(ct, &p, &c, &err) == SD_OK, "session: %s", err.msg);
    sd_session_set_prompt(c, prompt, 8, NULL);
    CHECK(sd_sched_add(sc, c, &err) == SD_OK, "add: %s", err.msg);
    sd_sched_step(sc, NULL);
    /* take sequence 1's room away behind the session's back: fill the cache to the end */
    int32_t *fill = malloc(64 * sizeof *fill);
    for (int i = 0; i < 64; i++) fill[i] = 10 + i;
    int len = sd_kv_len(ct, 1, -1);
    while (len < N_CTX) {
        int n = N_CTX - len < 64 ? N_CTX - len : 64;
        sd_forward(ct, &(sd_block){.n = n, .token = fill, .seq_all = 1}, &(sd_forward_args){0}, NULL);
        len += n;
    }
    free(fill);
    for (int i = 0; i < 100 && sd_sched_n_live(sc) > 0; i++) sd_sched_step(sc, NULL);
    CHECK(sd_session_status(c, &err) == SD_ERR_CTX_FULL, "the session whose cache is full did not fail with 'full' (%d)",
          sd_session_status(c, NULL));
    int n_a = 0;
    sd_session_tokens(a, &n_a);
    CHECK(sd_session_status(a, &err) == SD_OK && n_a == 40, "the other session did not finish (%d tokens)", n_a);
    /* the failed session takes a new prompt and runs to the end */
    CHECK(sd_session_set_prompt(c, prompt, 8, &err) == SD_OK && sd_sched_add(sc, c, &err) == SD_OK, "reuse: %s", err.msg);
    for (int i = 0; i < 100 && sd_sched_n_live(sc) > 0; i++) sd_sched_step(sc, NULL);
    int n_c = 0;
    sd_session_tokens(c, &n_c);
    CHECK(sd_session_status(c, &err) == SD_OK && n_c == 4, "a session reused after a failure: %d tokens (%s)", n_c, err.msg);
    /* freeing a session that is still in the scheduler takes it out */
    CHECK(sd_session_set_prompt(a, prompt, 8, &err) == SD_OK && sd_sched_add(sc, a, &err) == SD_OK, "re-add: %s", err.msg);
    CHECK(sd_session_set_prompt(c, prompt, 4, &err) == SD_OK && sd_sched_add(sc, c, &err) == SD_OK, "re-add: %s", err.msg);
    sd_sched_step(sc, NULL);
    sd_session_free(c);
    c = NULL;
    CHECK(sd_sched_n_live(sc) == 1, "a freed session is still in the scheduler (%d live)", sd_sched_n_live(sc));
    for (int i = 0; i < 100 && sd_sched_n_live(sc) > 0; i++) sd_sched_step(sc, NULL);
    sd_session_tokens(a, &n_a);
    CHECK(sd_session_status(a, &err) == SD_OK && n_a == 40, "the session left in the scheduler: %d tokens", n_a);
    sd_session_free(a);
    sd_session_free(c);
    sd_sched_free(sc);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
}

int main(void) {
    sd_model *tm = tl_load_model("models/stories-ee.gguf"), *dm = tl_load_model("models/stories260K.gguf");
    if (!tm || !dm) return tl_finish("test_session");
    merge_unit(tm);
    trees_greedy(tm, dm);
    isolation_and_misuse(tm, dm);
    pool_exhaustion(tm, dm);
    pool_sessions(tm, dm);
    const int Ps[] = {16, 8, 3, 1}, n_ps = tl_scale() < 1 ? 1 : 4;
    for (int i = 0; i < n_ps; i++) batch_equals_alone(tm, dm, Ps[i], 0.0f);
    for (int i = 0; i < n_ps; i++) batch_equals_alone(tm, dm, Ps[i], 0.8f);
    sd_model_free(tm);
    sd_model_free(dm);
    return tl_finish("test_session");
}
