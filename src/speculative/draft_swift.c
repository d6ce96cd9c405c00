/* draft_swift: SWIFT self-speculation (methods.md 4). The draft is the target itself with the optimiser's best set
 * of attention / MLP sub-layers skipped (sd_forward_args.skip). Drafting runs on a scratch extension of the
 * sequence's own cache: the pending token and the drafts go after the committed cells in the layers that run
 * (skipped attention writes no K/V), and the cache is truncated back to the committed prefix before the
 * verification pass — no copy of the cache. Verification runs the full model over the round's block.
 *  - chains (tree_nodes 0): up to max_draft tokens, asking the controller before each (the method's controller is
 *    conf-stop at p_stop — SWIFT's own rule — or SpecDec++'s acceptance head, which then replaces it and reads the
 *    skipped model's last state); sampling drafts from the processed distribution q (the standard rule accepts
 *    them); the draft logits are kept for SV;
 *  - trees (tree_nodes != 0): the same greedy chain (rank-chosen, one-hot; the controller stops it), then each chain
 *    position's top-c alternatives as sibling leaves, c by that position's confidence bucket (tree_topk /
 *    tree_conf); the position where drafting stopped on low confidence gives its alternatives too. Chain nodes come
 *    first (the node budget keeps the chain), then the leaves from the shallowest position down. The budget:
 *    min(tree_nodes, room), or with tree_nodes = SD_TREE_AUTO the one tree_budget chooses from the latency table and
 *    each list index's observed acceptance (a smaller budget keeps a prefix of the same list). Verification: one
 *    tree pass; acceptance: greedy longest match or multi-candidate rejection sampling (accept_tree).
 *  - optimisation (after each round while the optimiser runs, once C generated tokens exist): the proposed set's
 *    matchness = the fraction of the last C positions where the skipped model's argmax is the generated token,
 *    from ONE block pass over those positions at their own positions, attending only to the cached prefix before
 *    them (sd_forward_args.view_len), its K/V on the scratch extension (truncated after). Counted in t_aux and
 *    reported as the optimisation time. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model.h"
#include "speculative/accept.h"
#include "speculative/spec.h"
#include "speculative/swift_opt.h"
#include "speculative/tree_budget.h"
#include "util/err.h"

enum { MAX_TOPK = 64 };

typedef struct swift_drafter {
    drafter base;
    sd_ctx *ctx;
    int seq, L, V, D, n_batch;
    sd_sampler *smp;
    bool greedy;
    sd_swift_state *st;
    bool own_st;
    uint8_t *skip;    /* [2L] drafting mask (the best set) */
    uint8_t *cand;    /* [2L] the candidate being scored */
    float *logits;    /* [V] */
    float *state;     /* [D] the skipped model's last state of the latest step (controllers reading it) */
    float *probs;     /* [V] processed distribution (sampling, trees) */
    /* trees: per chain position i (0 = the root's children) its ranked alternatives */
    int tree_nodes, n_conf, topk[8];
    float conf[7];
    int32_t *alt;     /* [max_draft + 1][MAX_TOPK] ranked tokens (alt[i][0] = the chain's token) */
    int *n_alt;       /* [max_draft + 1] */
    int max_draft;
    /* the automatic node budget (tree_nodes = SD_TREE_AUTO) */
    bool auto_budget;
    tree_budget tb;
    const sd_sv_latency *lat;
    const draft_tree *round_t; /* the latest round's tree and node count, for its acceptance */
    int round_k;
    uint8_t *on_path;          /* [SD_TREE_AUTO_MAX] */
    /* optimisation */
    int window, n_prompt;
    int32_t *opar, *opos; /* [window] */
    uint8_t *owant;       /* [window] */
    float *ologits;       /* [window][V] */
    double t_opt;
    int steps0;
} swift_drafter;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int children_for(const swift_drafter *sw, float top1) {
    int i = 0;
    while (i < sw->n_conf && top1 >= sw->conf[i]) i++;
    int c = sw->topk[i];
    return c > MAX_TOPK ? MAX_TOPK : c;
}

/* The c best tokens of score[V] into out (best first, lowest id on ties; positive scores only when sampling). */
static int top_c(const swift_drafter *sw, const float *score, int c, int32_t *out) {
    int k = 0;
    for (; k < c; k++) {
        int32_t x = -1;
        for (int v = 0; v < sw->V; v++) {
            if (x >= 0 && !(score[v] > score[x])) continue;
            bool taken = false;
            for (int i = 0; i < k && !taken; i++) taken = out[i] == v;
            if (!taken) x = v;
        }
        if (x < 0 || (!sw->greedy && score[x] <= 0.0f)) break;
        out[k] = x;
    }
    return k;
}

/* Runs token x at the next position of the scratch extension with the drafting mask: logits into sw->logits (and the
 * last state into sw->state when want_state). */
static sd_status skip_step(swift_drafter *sw, int32_t x, bool want_state, sd_error *err) {
    sd_forward_args a = {.skip = sw->skip, .logits = sw->logits, .hidden = want_state ? sw->state : NULL};
    return sd_forward(sw->ctx, &(sd_block){.n = 1, .token = &x, .seq_all = sw->seq}, &a, err);
}

static sd_status sw_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    swift_drafter *sw = (swift_drafter *)d;
    (void)hist, (void)err;
    sw->n_prompt = n;
    return SD_OK;
}

static int draft_chain(swift_drafter *sw, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    t->onehot = false;
    int32_t x = hist[n - 1];
    int k = 0;
    while (k < max) {
        if (skip_step(sw, x, c->uses_hidden, err)) return -1;
        const float *state = c->uses_hidden ? sw->state : NULL;
        if ((x = draft_chain_step(t, c, sw->smp, sw->greedy, sw->logits, sw->V, state, sw->D, hist, n, k)) < 0) break;
        k++;
    }
    return k;
}

static int draft_tree_(swift_drafter *sw, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    t->onehot = true;
    const int nodes = sw->auto_budget ? tree_budget_next(&sw->tb, sw->lat) : sw->tree_nodes;
    const int budget = t->max_nodes < nodes ? t->max_nodes : nodes;
    int depth_max = max < budget ? max : budget;
    int32_t x = hist[n - 1];
    int m = 0, n_pos = 0; /* chain nodes; positions with alternatives */
    while (m < depth_max) {
        if (skip_step(sw, x, false, err)) return -1;
        const float *score = sw->logits;
        int32_t best = accept_argmax(sw->logits, sw->V);
        float top1;
        if (sw->greedy) {
            top1 = accept_top1_prob(sw->logits, sw->V, best, 1.0f);
        } else { /* rank by the processed distribution (penalty history: the chain) */
            sd_sampler_probs(sw->smp, sw->logits, hist, n + m, sw->probs);
            score = sw->probs;
            best = accept_argmax(score, sw->V);
            top1 = score[best];
        }
        int32_t *alt = sw->alt + (size_t)n_pos * MAX_TOPK;
        sw->n_alt[n_pos] = top_c(sw, score, children_for(sw, top1), alt);
        if (sw->n_alt[n_pos] == 0) break;
        n_pos++;
        ctrl_feat f = {top1, NULL, sw->D, x};
        if (!ctrl_keep(c, m, &f)) break; /* this position offers its alternatives as leaves only */
        t->token[m] = alt[0];
        t->parent[m] = m - 1;
        hist[n + m] = alt[0];
        m++;
        x = alt[0];
    }
    /* the leaves: alternatives of each position, shallowest first, within the budget */
    int k = m;
    for (int i = 0; i < n_pos && k < budget; i++)
        for (int j = i < m ? 1 : 0; j < sw->n_alt[i] && k < budget; j++) {
            t->token[k] = sw->alt[(size_t)i * MAX_TOPK + j];
            t->parent[k] = i - 1;
            k++;
        }
    return k;
}

static int sw_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    swift_drafter *sw = (swift_drafter *)d;
    if (max > sw->max_draft) max = sw->max_draft;
    int k = max < 1 ? 0 : sw->tree_nodes != 0 ? draft_tree_(sw, hist, n, max, c, t, err) : draft_chain(sw, hist, n, max, c, t, err);
    /* the scratch extension goes: the verification block starts at the pending token's cell */
    sd_kv_truncate(sw->ctx, sw->seq, n - 1, NULL);
    sw->round_t = t;
    sw->round_k = k;
    return k;
}

/* The automatic budget: which nodes of the round's list lay on the accepted path (the n_acc accepted drafts end
 * hist before the new pending token; siblings hold distinct tokens, so the path is found by its tokens). */
static void observe_tree(swift_drafter *sw, const int32_t *hist, int n, int n_acc) {
    const draft_tree *t = sw->round_t;
    const int k = sw->round_k < sw->tb.cap ? sw->round_k : sw->tb.cap;
    if (!t || k < 1) return;
    memset(sw->on_path, 0, (size_t)k);
    for (int i = 0, par = -1; i < n_acc && n - 1 - n_acc + i >= 0; i++) {
        const int32_t want = hist[n - 1 - n_acc + i];
        int j = 0;
        while (j < sw->round_k && !(t->parent[j] == par && t->token[j] == want)) j++;
        if (j == sw->round_k) break;
        if (j < k) sw->on_path[j] = 1;
        par = j;
    }
    tree_budget_observe(&sw->tb, k, sw->on_path);
}

/* One optimisation step: score the optimiser's next candidate on the last C generated positions. */
static void opt_step(swift_drafter *sw, const int32_t *hist, int n) {
    const int C = sw->window, P = n - 1 - C; /* entries hist[P .. n-1) predict hist[P+1 .. n) */
    if (swift_opt_done(sw->st) || n - sw->n_prompt < C || P < 1 || n - 1 + C > sd_ctx_n_ctx(sw->ctx) ||
        C > sw->n_batch)
        return;
    double t0 = now_s();
    swift_opt_propose(sw->st, sw->cand);
    for (int i = 0; i < C; i++) {
        sw->opar[i] = i - 1;
        sw->opos[i] = P + i;
    }
    sd_forward_args a = {.skip = sw->cand, .want_logits = sw->owant, .logits = sw->ologits, .view_len = P};
    sd_status st = sd_forward(sw->ctx, &(sd_block){.n = C, .token = hist + P, .parent = sw->opar, .pos = sw->opos,
                                                   .seq_all = sw->seq}, &a, NULL);
    sd_kv_truncate(sw->ctx, sw->seq, n - 1, NULL);
    if (st == SD_OK) {
        int hit = 0;
        for (int i = 0; i < C; i++) hit += accept_argmax(sw->ologits + (size_t)i * sw->V, sw->V) == hist[P + 1 + i];
        if (swift_opt_observe(sw->st, sw->cand, (float)hit / (float)C)) sd_swift_state_best(sw->st, sw->skip, NULL, NULL);
    }
    double dt = now_s() - t0;
    sw->t_opt += dt;
    sw->base.t_aux += dt;
}

static void sw_on_verified(drafter *d, const int32_t *hist, int n, int n_acc) {
    swift_drafter *sw = (swift_drafter *)d;
    if (sw->auto_budget) observe_tree(sw, hist, n, n_acc);
    sw->round_t = NULL;
    opt_step(sw, hist, n);
}

static void sw_free(drafter *d) {
    swift_drafter *sw = (swift_drafter *)d;
    if (sw->own_st) sd_swift_state_free(sw->st);
    sd_sampler_free(sw->smp);
    free(sw->skip);
    free(sw->cand);
    free(sw->logits);
    free(sw->state);
    free(sw->probs);
    free(sw->on_path);
    tree_budget_free(&sw->tb);
    free(sw->alt);
    free(sw->n_alt);
    free(sw->opar);
    free(sw->opos);
    free(sw->owant);
    free(sw->ologits);
    free(sw);
}

void drafter_swift_stats(const drafter *d, sd_spec_stats *s) {
    const swift_drafter *sw = (const swift_drafter *)d;
    s->t_opt_s = sw->t_opt;
    s->opt_steps = swift_opt_steps(sw->st) - sw->steps0;
    sd_swift_state_best(sw->st, NULL, &s->matchness, NULL);
}

float drafter_swift_matchness(const drafter *d, int *steps) {
    const swift_drafter *sw = (const swift_drafter *)d;
    float m = 0;
    sd_swift_state_best(sw->st, NULL, &m, NULL);
    *steps = swift_opt_steps(sw->st);
    return m;
}

int drafter_swift_skipped(const drafter *d) {
    const swift_drafter *sw = (const swift_drafter *)d;
    int n = 0;
    for (int i = 0; i < 2 * sw->L; i++) n += sw->skip[i] != 0;
    return n;
}

drafter *drafter_swift_new(sd_ctx *target, int seq, const sd_sampler *smp, const sd_spec_params *sp, sd_error *err) {
    swift_drafter *sw = calloc(1, sizeof *sw);
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(target), &info);
    const size_t L = (size_t)info.n_layer, V = (size_t)info.n_vocab, C = (size_t)sp->swift_window;
    const size_t P = (size_t)sp->swift_max_draft + 1;
    uint64_t seed = 0;
    if (!sw || draft_sampler_new(smp, info.n_vocab, 0x3c6ef372u, &sw->smp, &seed, err) != SD_OK) goto nomem;
    sw->skip = calloc(2 * L, 1);
    sw->cand = calloc(2 * L, 1);
    sw->logits = malloc(V * sizeof(float));
    sw->state = malloc((size_t)info.n_embd * sizeof(float));
    sw->probs = malloc(V * sizeof(float));
    sw->alt = malloc(P * MAX_TOPK * sizeof(int32_t));
    sw->n_alt = calloc(P, sizeof(int));
    sw->opar = malloc(C * sizeof(int32_t));
    sw->opos = malloc(C * sizeof(int32_t));
    sw->owant = malloc(C);
    sw->ologits = malloc(C * V * sizeof(float));
    if (!sw->skip || !sw->cand || !sw->logits || !sw->state || !sw->probs || !sw->alt || !sw->n_alt || !sw->opar ||
        !sw->opos || !sw->owant || !sw->ologits)
        goto nomem;
    if (sp->tree_nodes < 0) { /* the automatic node budget */
        sw->auto_budget = true;
        sw->lat = sp->sv_latency;
        if (!tree_budget_init(&sw->tb, SD_TREE_AUTO_MAX) || !(sw->on_path = malloc(SD_TREE_AUTO_MAX))) goto nomem;
    }
    memset(sw->owant, 1, C);
    if (sp->swift_state) {
        if (swift_opt_n_layer(sp->swift_state) != info.n_layer) {
            sw_free(&sw->base);
            err_set(err, SD_ERR_ARG, "the SWIFT state is for a %d-layer model, the target has %d layers",
                    swift_opt_n_layer(sp->swift_state), info.n_layer);
            return NULL;
        }
        sw->st = sp->swift_state;
    } else {
        if (sd_swift_state_new(info.n_layer, sp, seed, &sw->st, err) != SD_OK) {
            sw_free(&sw->base);
            return NULL;
        }
        sw->own_st = true;
    }
    swift_opt_configure(sw->st, sp);
    sd_swift_state_best(sw->st, sw->skip, NULL, NULL);
    sw->steps0 = swift_opt_steps(sw->st);
    sw->base = (drafter){"swift", 0, sw_begin, sw_draft, NULL, NULL, sw_on_verified, sw_free, NULL, NULL, NULL, NULL, NULL};
    sw->ctx = target;
    sw->seq = seq;
    sw->L = info.n_layer;
    sw->V = info.n_vocab;
    sw->D = info.n_embd;
    sw->n_batch = sd_ctx_n_batch(target);
    sw->greedy = sd_sampler_is_greedy(smp);
    sw->tree_nodes = sp->tree_nodes;
    sw->n_conf = sp->n_tree_conf;
    memcpy(sw->topk, sp->tree_topk, sizeof sw->topk);
    memcpy(sw->conf, sp->tree_conf, sizeof sw->conf);
    sw->max_draft = sp->swift_max_draft;
    sw->window = sp->swift_window;
    return &sw->base;
nomem:
    if (sw) sw_free(&sw->base);
    err_set(err, SD_ERR_NOMEM, "out of memory creating the SWIFT drafter");
    return NULL;
}
