/* Speculative decoding core:
 *  1. greedy: for every drafter x controller, gamma in {1,3,8,16} and prompts of several lengths, the output
 *     equals plain greedy decoding — including rounds where nothing is accepted and runs that hit the end of the
 *     context mid-round;
 *  2. after every round both KV caches equal those of a plain run over the same tokens (bit for bit);
 *  3. sampling: the acceptance rule reproduces the target distribution (chi-square), a broken residual rule is
 *     detected, and the engine's first sampled token follows the target's distribution (20k draws);
 *  4. bad input: incompatible draft vocabulary, gamma 0 / 10^6, bad n-gram sizes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "speculative/accept.h"
#include "specdec.h"
#include "testlib.h"

static sd_model *load(const char *rel, const char *convert) {
    sd_model_params p = sd_model_default_params();
    p.convert_type = convert;
    sd_model *m = NULL;
    sd_error err;
    if (sd_model_load(tl_shared(rel), &p, &m, &err) != SD_OK) CHECK(0, "load %s: %s", rel, err.msg);
    return m;
}

static sd_ctx *mkctx(sd_model *m, int n_ctx) { return tl_ctx(m, n_ctx, 1, 32, 2); }

/* ---- per-round cache check */
typedef struct round_check {
    sd_ctx *target, *ref;       /* ref: a plain run over prompt + expected output */
    sd_ctx *draft, *draft_ref;  /* optional */
    int kvd, kvd_draft, n_layer, n_layer_draft;
    bool ok;
    int rounds, zero_acc_rounds;
} round_check;

static bool on_round(const sd_spec_round *r, void *user) {
    round_check *rc = user;
    rc->rounds++;
    if (r->n_drafted > 0 && r->n_accepted == 0) rc->zero_acc_rounds++;
    if (!rc->ref) return true;
    int n = r->n_committed;
    if (sd_kv_len(rc->target, 0, -1) != n || !tl_same_kv_rows(rc->target, rc->ref, rc->n_layer, rc->kvd, n, false)) rc->ok = false;
    if (rc->draft) {
        int nd = sd_kv_len(rc->draft, 0, -1);
        if (nd > n || !tl_same_kv_rows(rc->draft, rc->draft_ref, rc->n_layer_draft, rc->kvd_draft, nd, false)) rc->ok = false;
    }
    return true;
}

typedef struct pair_case {
    const char *name, *target, *target_conv, *draft, *draft_conv;
    sd_spec_method method;
    int exit_layer;
    void (*tweak)(sd_spec_params *sp); /* method parameters beyond gamma / ctrl */
} pair_case;

static void sb_default(sd_spec_params *sp) { sp->sb_tau = 0.5f; }
static void sb_w1(sd_spec_params *sp) { sp->sb_tau = 0.3f, sp->sb_width = 1; }
static void sb_d1(sd_spec_params *sp) { sp->sb_tau = 0.3f, sp->sb_depth = 1, sp->sb_alpha = 0; }
static void sb_deep(sd_spec_params *sp) { sp->sb_tau = 0.6f, sp->sb_depth = 7, sp->sb_alpha = 2, sp->sb_width = 16; }
static void del_bounded(sd_spec_params *sp) {
    sp->del_layers[0] = 1, sp->del_layers[1] = 3;
    sp->del_n_layers = 2, sp->del_every = 3, sp->del_dmax = 6;
}

static void greedy_equivalence(const pair_case *pc, int n_predict, bool check_caches) {
    sd_model *tm = load(pc->target, pc->target_conv), *dm = pc->draft ? load(pc->draft, pc->draft_conv) : NULL;
    if (!tm || (pc->draft && !dm)) return;
    sd_model_info ti;
    sd_model_get_info(tm, &ti);
    const char *texts[] = {"", "Once upon a time", "The little dog ran to the park. The little dog ran to the park and saw a big red ball. The"};
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *smp;
    sd_sampler_new(&spp, ti.n_vocab, &smp, NULL);
    int gammas[] = {1, 3, 8, 16};
    sd_ctrl_kind ctrls[] = {SD_CTRL_FIXED, SD_CTRL_CONF, SD_CTRL_FS, SD_CTRL_DV};
    int runs = 0, bad = 0, zero_rounds = 0, cache_checks = 0, cache_bad = 0;
    for (int ti_ = 0; ti_ < 3; ti_++) {
        int32_t prompt[128];
        int np = 0;
        sd_tokenize(tm, texts[ti_], strlen(texts[ti_]), true, false, prompt, 128, &np, NULL);
        /* context exactly prompt + n_predict: the last rounds are cut by the end of the context */
        int n_ctx = np + n_predict;
        sd_ctx *ct = mkctx(tm, n_ctx), *cref = mkctx(tm, n_ctx);
        sd_ctx *cd = dm ? mkctx(dm, n_ctx) : NULL, *cdref = dm ? mkctx(dm, n_ctx) : NULL;
        int32_t *plain = malloc((size_t)n_predict * sizeof *plain), *got = malloc((size_t)n_predict * sizeof *got);
        int n_plain = 0;
        sd_error err;
        CHECK(sd_generate(ct, smp, prompt, np, n_predict, true, plain, &n_plain, NULL, NULL, NULL, &err) == SD_OK,
              "%s: plain: %s", pc->name, err.msg);
        int32_t *seq = malloc((size_t)(np + n_plain) * sizeof *seq);
        memcpy(seq, prompt, (size_t)np * sizeof *seq);
        memcpy(seq + np, plain, (size_t)n_plain * sizeof *seq);
        if (check_caches) {
            tl_plain_cache(cref, seq, np + n_plain - 1);
            if (cdref) tl_plain_cache(cdref, seq, np + n_plain - 1);
        }
        for (int gi = 0; gi < 4; gi++)
            for (int ci = 0; ci < 4; ci++) {
                sd_spec_params sp = sd_spec_default_params();
                sp.method = pc->method;
                sp.draft_ctx = cd;
                sp.exit_layer = pc->exit_layer;
                sp.gamma = gammas[gi];
                sp.gamma_max = gammas[gi] > 4 ? gammas[gi] : 4;
                sp.ctrl = ctrls[ci];
                if (pc->tweak) pc->tweak(&sp);
                if (pc->method == SD_SPEC_SPECBOUND && sp.sb_width == 8) sp.sb_width = gammas[gi];
                if (pc->method == SD_SPEC_DEL && !sp.del_n_layers) sp.del_dmax = gammas[gi];
                round_check rc = {0};
                rc.ok = true;
                rc.target = ct;
                bool cc = check_caches && (gi == 1 || gi == 3);
                if (cc) {
                    rc.ref = cref;
                    rc.kvd = tl_kv_dim(tm, &rc.n_layer);
                    if (cd) {
                        rc.draft = cd;
                        rc.draft_ref = cdref;
                        rc.kvd_draft = tl_kv_dim(dm, &rc.n_layer_draft);
                    }
                }
                sp.round_cb = on_round;
                sp.round_user = &rc;
                int n_got = 0;
                sd_status st = sd_spec_generate(ct, smp, &sp, prompt, np, n_predict, true, got, &n_got, NULL, NULL, NULL, &err);
                bool same = st == SD_OK && n_got == n_plain && memcmp(got, plain, (size_t)n_got * sizeof *got) == 0;
                runs++;
                bad += !same;
                zero_rounds += rc.zero_acc_rounds;
                CHECK(same, "%s: gamma %d ctrl %d prompt %d: output differs from plain greedy (%s)", pc->name, gammas[gi],
                      ci, np, st ? err.msg : "");
                if (cc) {
                    cache_checks += rc.rounds;
                    cache_bad += !rc.ok;
                    CHECK(rc.ok, "%s: gamma %d ctrl %d prompt %d: a cache differs from the plain run's after a round",
                          pc->name, gammas[gi], ci, np);
                }
            }
        free(seq);
        free(plain);
        free(got);
        sd_ctx_free(ct);
        sd_ctx_free(cref);
        sd_ctx_free(cd);
        sd_ctx_free(cdref);
    }
    printf("  %-38s %3d runs, %d differ; %4d rounds with nothing accepted; caches checked after %d rounds, %d bad\n",
           pc->name, runs, bad, zero_rounds, cache_checks, cache_bad);
    sd_sampler_free(smp);
    sd_model_free(tm);
    sd_model_free(dm);
}

/* ---- sampling */

static double broken_residual(const float *p, const float *q, int32_t x, int V, float *r) {
    (void)q, (void)x; /* wrong: resample from p itself */
    double s = 0;
    for (int i = 0; i < V; i++) s += (r[i] = p[i]);
    return s;
}

static void acceptance_distribution(void) {
    enum { V = 8 };
    const float p[V] = {0.30f, 0.05f, 0.20f, 0.10f, 0.15f, 0.02f, 0.08f, 0.10f};
    const float q[V] = {0.10f, 0.30f, 0.05f, 0.20f, 0.05f, 0.20f, 0.05f, 0.05f};
    sd_sampler_params sp = sd_sampler_default_params();
    sp.temp = 1;
    sp.seed = 7;
    sd_sampler *s;
    sd_sampler_new(&sp, V, &s, NULL);
    float scratch[V];
    double pd[V];
    for (int i = 0; i < V; i++) pd[i] = p[i];
    const int N = 200000;
    for (int variant = 0; variant < 3; variant++) { /* 0: rule with q, 1: one-hot draft, 2: broken residual */
        int counts[V] = {0};
        for (int t = 0; t < N; t++) {
            int32_t x = variant == 1 ? (int32_t)(t % V) : sd_sampler_draw(s, q), out;
            const float *qq = variant == 1 ? NULL : q;
            double u = sd_sampler_uniform(s);
            if (accept_sample(p, qq, x, V, u, s, scratch, &out, variant == 2 ? broken_residual : NULL)) out = x;
            counts[out]++;
        }
        int dof;
        double c = tl_chi2(counts, pd, V, N, &dof);
        if (variant < 2)
            CHECK(tl_chi2_ok(c, dof), "acceptance rule (%s draft): chi2 %.1f (%d dof)", variant ? "one-hot" : "q", c, dof);
        else
            CHECK(!tl_chi2_ok(c, dof), "a broken residual rule went undetected: chi2 %.1f (%d dof)", c, dof);
        printf("  acceptance rule, %-18s chi2 = %8.1f (%d dof) -> %s\n",
               variant == 0 ? "draft q:" : variant == 1 ? "one-hot draft:" : "BROKEN residual:", c, dof,
               tl_chi2_ok(c, dof) ? "matches p" : "rejected");
    }
    sd_sampler_free(s);
}

/* Multi-candidate rejection sampling over a tree (accept_tree): the first emitted token follows p whatever the
 * children — three drafted from their own q's, or three rank-chosen one-hot candidates — and a broken residual is
 * caught by the same test. */
static void tree_acceptance_distribution(void) {
    enum { V = 8, K = 3 };
    const float p[V] = {0.30f, 0.05f, 0.20f, 0.10f, 0.15f, 0.02f, 0.08f, 0.10f};
    const float q0[K][V] = {{0.10f, 0.30f, 0.05f, 0.20f, 0.05f, 0.20f, 0.05f, 0.05f},
                            {0.40f, 0.10f, 0.10f, 0.10f, 0.10f, 0.10f, 0.05f, 0.05f},
                            {0.05f, 0.05f, 0.05f, 0.05f, 0.50f, 0.10f, 0.10f, 0.10f}};
    sd_sampler_params sp = sd_sampler_default_params();
    sp.temp = 1;
    sp.top_k = 0, sp.top_p = 1, sp.min_p = 0; /* p itself, unprocessed */
    sp.seed = 11;
    sd_sampler *s, *drafts;
    sd_sampler_new(&sp, V, &s, NULL);
    sp.seed = 12;
    sd_sampler_new(&sp, V, &drafts, NULL);
    float logits[(K + 1) * V], q[K * V], pw[V], scratch[V];
    for (int i = 0; i < V; i++) logits[i] = logf(p[i]);
    for (int i = V; i < (K + 1) * V; i++) logits[i] = 0; /* the children's own rows: uniform */
    memcpy(q, q0, sizeof q);
    int32_t tok[K], par[K] = {-1, -1, -1}, hist[K + 1], path[K], next;
    double pd[V];
    for (int i = 0; i < V; i++) pd[i] = p[i];
    const int N = 200000;
    for (int variant = 0; variant < 3; variant++) { /* 0: q children, 1: one-hot children, 2: broken residual */
        int counts[V] = {0};
        draft_tree t = {.token = tok, .parent = par, .q = q, .onehot = variant == 1};
        for (int n = 0; n < N; n++) {
            for (int j = 0; j < K; j++)
                tok[j] = variant == 1 ? (int32_t)((n + 3 * j) % V) : sd_sampler_draw(drafts, q + j * V);
            int acc = accept_tree(&t, K, logits, V, s, hist, 0, pw, scratch, path, &next,
                                  variant == 2 ? broken_residual : NULL);
            counts[acc ? tok[path[0]] : next]++;
        }
        int dof;
        double c = tl_chi2(counts, pd, V, N, &dof);
        if (variant < 2)
            CHECK(tl_chi2_ok(c, dof), "tree acceptance (%s children): chi2 %.1f (%d dof)", variant ? "one-hot" : "q", c, dof);
        else
            CHECK(!tl_chi2_ok(c, dof), "tree acceptance: a broken residual rule went undetected: chi2 %.1f (%d dof)", c, dof);
        printf("  tree acceptance, 3 %-16s chi2 = %8.1f (%d dof) -> %s\n",
               variant == 0 ? "q children:" : variant == 1 ? "one-hot children:" : "BROKEN residual:", c, dof,
               tl_chi2_ok(c, dof) ? "matches p" : "rejected");
    }
    sd_sampler_free(s);
    sd_sampler_free(drafts);
}

/* First token of sd_spec_generate under sampling (target stories-ee, draft stories260K: p != q) vs the target;
 * with a token tree, the first token is tried against several rank-chosen candidates. */
static void engine_first_token(int tree_nodes) {
    sd_model *tm = load("models/stories-ee.gguf", NULL), *dm = load("models/stories260K.gguf", NULL);
    if (!tm || !dm) return;
    const int V = 512;
    sd_ctx *ct = mkctx(tm, 64), *cd = mkctx(dm, 64);
    int32_t prompt[16] = {sd_token_bos(tm)};
    int np = 1; /* BOS alone: a spread-out first-token distribution */
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 2.0f; /* hot: more tokens with enough mass for the chi-square bins */
    spp.top_k = 0;
    spp.top_p = 1.0f;
    spp.min_p = 0.0f;
    /* the target's distribution of the first token */
    float *logits = malloc(V * sizeof *logits), *pf = malloc(V * sizeof *pf);
    sd_forward(ct, &(sd_block){.n = np, .token = prompt}, &(sd_forward_args){.logits = logits}, NULL);
    sd_sampler *s0;
    sd_sampler_new(&spp, V, &s0, NULL);
    sd_sampler_probs(s0, logits, prompt, np, pf);
    /* and the draft's, to show p != q */
    sd_forward(cd, &(sd_block){.n = np, .token = prompt}, &(sd_forward_args){.logits = logits}, NULL);
    float *qf = malloc(V * sizeof *qf);
    sd_sampler_probs(s0, logits, prompt, np, qf);
    double tv = 0;
    for (int i = 0; i < V; i++) tv += fabs(pf[i] - qf[i]) / 2;
    int N = (int)(20000 * tl_scale());
    if (N < 1000) N = 1000;
    int *counts = calloc(V, sizeof *counts);
    sd_spec_params sp = sd_spec_default_params();
    sp.method = SD_SPEC_DRAFT;
    sp.draft_ctx = cd;
    sp.gamma = 2;
    sp.tree_nodes = tree_nodes; /* a tree: up to 5 candidates for the first token (one-hot, by the draft's rank) */
    const int accepted_first = tl_first_tokens(ct, &sp, spp, prompt, np, V, N, 1000, counts);
    double pd[512];
    for (int i = 0; i < V; i++) pd[i] = pf[i];
    int dof;
    double c = tl_chi2(counts, pd, V, N, &dof);
    CHECK(tv > 0.05, "target and draft distributions should differ (TV %.3f)", tv);
    CHECK(accepted_first == N, "every first round must draft (%d of %d did)", accepted_first, N);
    CHECK(tl_chi2_ok(c, dof), "engine%s: first sampled token vs target distribution: chi2 %.1f (%d dof)",
          tree_nodes ? " (tree)" : "", c, dof);
    printf("  engine first token%s (%d draws, TV(p,q) = %.2f, rounds that drafted %.0f%%): chi2 = %.1f (%d dof)\n",
           tree_nodes ? ", token tree" : "", N, tv, 100.0 * accepted_first / N, c, dof);
    free(counts);
    free(logits);
    free(pf);
    free(qf);
    sd_sampler_free(s0);
    sd_ctx_free(ct);
    sd_ctx_free(cd);
    sd_model_free(tm);
    sd_model_free(dm);
}

static void bad_input(void) {
    sd_model *tm = load("models/stories260K.gguf", NULL), *gm = load("models/tiny-llama-gpt2-f32.gguf", NULL);
    sd_model *sm = load("models/tiny-llama-spm-f32.gguf", NULL);
    if (!tm || !gm || !sm) return;
    sd_error err;
    CHECK(sd_vocab_compatible(tm, gm, &err) == SD_ERR_ARG && strstr(err.msg, "tokenizer"), "gpt2 draft for an spm target: %s",
          err.msg);
    CHECK(sd_vocab_compatible(tm, sm, &err) == SD_ERR_ARG && strstr(err.msg, "vocabular"), "32000-token draft for a 512 target: %s",
          err.msg);
    sd_ctx *ct = mkctx(tm, 64), *cg = mkctx(gm, 64);
    sd_sampler_params spp = sd_sampler_default_params();
    spp.temp = 0;
    sd_sampler *s;
    sd_sampler_new(&spp, 512, &s, NULL);
    int32_t prompt[2] = {1, 403};
    sd_spec_params sp = sd_spec_default_params();
    sp.method = SD_SPEC_DRAFT;
    sp.draft_ctx = cg;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG,
          "incompatible draft accepted");
    sp.draft_ctx = NULL;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG,
          "draft method without a draft");
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_NGRAM;
    sp.gamma = 0;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "gamma"),
          "gamma 0: %s", err.msg);
    sp.gamma = 1000000;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "gamma"),
          "gamma 10^6: %s", err.msg);
    sp.gamma = 40; /* > n_batch - 1 */
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "n_batch"),
          "gamma beyond n_batch: %s", err.msg);
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_NGRAM;
    sp.ngram_min = 3;
    sp.ngram_max = 2;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "ngram 3..2");
    sp = sd_spec_default_params();
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 100, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "context"),
          "beyond the context: %s", err.msg);
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_EARLY_EXIT;
    sp.exit_layer = 5; /* = L */
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
              strstr(err.msg, "exit layer"),
          "exit layer L: %s", err.msg);
    sp.method = SD_SPEC_SPECBOUND;
    sp.exit_layer = 0;
    float taus[3] = {0.0f, -0.5f, 1.5f};
    for (int i = 0; i < 3; i++) {
        sp.sb_tau = taus[i];
        CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG &&
                  strstr(err.msg, "tau"),
              "SpecBound tau %g: %s", taus[i], err.msg);
    }
    sp.sb_tau = 0.8f;
    sp.sb_depth = 5;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "SpecBound D = L");
    sp.sb_depth = 0;
    sp.sb_width = 0;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "SpecBound W = 0");
    sp = sd_spec_default_params();
    sp.method = SD_SPEC_DEL;
    sp.del_layers[0] = 7;
    sp.del_n_layers = 1;
    CHECK(sd_spec_generate(ct, s, &sp, prompt, 2, 4, true, NULL, NULL, NULL, NULL, NULL, &err) == SD_ERR_ARG, "DEL depth 7");
    sd_model_params mp = sd_model_default_params();
    mp.convert_type = "q4_2";
    sd_model *x = NULL;
    CHECK(sd_model_load(tl_shared("models/stories260K.gguf"), &mp, &x, &err) == SD_ERR_ARG && !x, "bad --draft-type: %s",
          err.msg);
    sd_sampler_free(s);
    sd_ctx_free(ct);
    sd_ctx_free(cg);
    sd_model_free(tm);
    sd_model_free(gm);
    sd_model_free(sm);
}

int main(void) {
    const pair_case cases[] = {
        {"stories260K + itself (draft)", "models/stories260K.gguf", NULL, "models/stories260K.gguf", NULL, SD_SPEC_DRAFT, 0, NULL},
        {"stories260K + its q8_0 copy (draft)", "models/stories260K.gguf", NULL, "models/stories260K.gguf", "q8_0", SD_SPEC_DRAFT, 0, NULL},
        {"stories260K + ngram", "models/stories260K.gguf", NULL, NULL, NULL, SD_SPEC_NGRAM, 0, NULL},
        {"w768 q4_k_m + its q2_k copy (draft)", "models/kquant/stories-ee-w768-q4_k_m.gguf", NULL,
         "models/kquant/stories-ee-w768-q4_k_m.gguf", "q2_k", SD_SPEC_DRAFT, 0, NULL},
        {"w768 q5_k_m early exit E=2", "models/kquant/stories-ee-w768-q5_k_m.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 2, NULL},
        {"stories-plain + stories260K (draft)", "models/stories-plain.gguf", NULL, "models/stories260K.gguf", NULL, SD_SPEC_DRAFT, 0, NULL},
        {"tiny-spm f32 + tiny-spm q4_0 file", "models/tiny-llama-spm-f32.gguf", NULL, "models/tiny-llama-spm-q4_0.gguf", NULL, SD_SPEC_DRAFT, 0, NULL},
        {"tiny-spm f16 + its q4_0 copy", "models/tiny-llama-spm-f16.gguf", NULL, "models/tiny-llama-spm-f16.gguf", "q4_0", SD_SPEC_DRAFT, 0, NULL},
        {"tiny-gpt2 f32 + ngram", "models/tiny-llama-gpt2-f32.gguf", NULL, NULL, NULL, SD_SPEC_NGRAM, 0, NULL},
        {"tiny-qwen2 f32 + ngram", "models/tiny-qwen2-gpt2-f32.gguf", NULL, NULL, NULL, SD_SPEC_NGRAM, 0, NULL},
        {"stories260K early exit E=1", "models/stories260K.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 1, NULL},
        {"stories260K early exit E=L-1=4", "models/stories260K.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 4, NULL},
        {"stories-ee early exit E=2", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 2, NULL},
        {"tiny-spm q8_0 early exit E=1", "models/tiny-llama-spm-q8_0.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 1, NULL},
        {"tiny-qwen2 early exit E=L-1=3", "models/tiny-qwen2-gpt2-f32.gguf", NULL, NULL, NULL, SD_SPEC_EARLY_EXIT, 3, NULL},
        {"stories-ee DEL", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_DEL, 0, NULL},
        {"stories260K DEL bounded (depths 1,3; every 3rd)", "models/stories260K.gguf", NULL, NULL, NULL, SD_SPEC_DEL, 0, del_bounded},
        {"tiny-spm f32 DEL", "models/tiny-llama-spm-f32.gguf", NULL, NULL, NULL, SD_SPEC_DEL, 0, NULL},
        {"stories-ee SpecBound tau .5", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_default},
        {"stories-ee SpecBound W=1", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_w1},
        {"stories-ee SpecBound D=1", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_d1},
        {"stories-ee SpecBound D=L-1, alpha 2", "models/stories-ee.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_deep},
        {"stories260K SpecBound tau .5", "models/stories260K.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_default},
        {"tiny-qwen2 SpecBound tau .5", "models/tiny-qwen2-gpt2-f32.gguf", NULL, NULL, NULL, SD_SPEC_SPECBOUND, 0, sb_default},
    };
    int n_predict = tl_scale() < 1 ? 24 : 48;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) greedy_equivalence(&cases[i], n_predict, true);
    acceptance_distribution();
    tree_acceptance_distribution();
    engine_first_token(0);
    engine_first_token(6);
    bad_input();
    return tl_finish("test_spec");
}
