/* spec: the drafter interface of the propose -> verify -> accept loop (a small vtable per drafter).
 *
 * A session keeps `hist` = prompt + emitted tokens; the target's cache holds hist[0 .. n-1) and hist[n-1] (the
 * newest token) is pending: every round verifies the block [hist[n-1], draft nodes...]. A drafter never runs the
 * verification pass itself: it describes it (a verify plan), and the session or the scheduler runs it, merged with
 * other sessions' plans.
 *   begin        optional: after the prompt is in the target's cache (reset and prefill the drafter's own state)
 *   draft        propose up to max draft nodes continuing hist[0..n): a draft tree (draft_tree below; a chain is
 *                a tree of width 1). hist has room for max more tokens: a chain drafter may write its drafts there
 *                (the penalty's history). Asks the controller before each token. Returns the node count or -1.
 *   plan         optional: how the target verifies the block (layer range and cached states), after any forwards
 *                the plan needs first (early exit: the last draft's shallow layers). NULL: the block's tokens
 *                through every layer.
 *   verified     optional: the target's logits of the block ([k+1][V], root first) and the plan's hidden states.
 *   on_verified  optional: hist[0..n) is the new history (n_accepted drafts kept + the target's token)
 *   timed        optional: the round's measured drafting and verification times (rounds run alone only)
 *   draft_start / draft_next   optional, for drafters with a context of their own (the draft model): the same
 *                drafting as draft, one forward at a time, so that a scheduler can merge many sessions' draft
 *                forwards into shared calls on that context. draft_start begins a round, draft_next takes the
 *                result of the forward that ran (r->status set); each returns 1 (*r: the next forward, on
 *                draft_ctx), 0 (done: the tree is in t, *k its node count) or -1 (failed, err set).
 */
#ifndef SD_SPEC_SPEC_H
#define SD_SPEC_SPEC_H
#include <stdbool.h>
#include <stdint.h>

#include "ctrl/ctrl.h"
#include "specdec.h"
#include "speculative/merge.h"

/* A round's draft: nodes 0..k-1 in an order where parents come first. */
typedef struct draft_tree {
    int32_t *token;  /* [gmax] */
    int32_t *parent; /* [gmax] parent node, -1 = the pending token (the root); set to a chain (i - 1) before draft */
    float *q;        /* [gmax][V] draft distribution of each node's token (sampling only; NULL when greedy) */
    bool onehot;     /* the drafter has no distribution (q unused): rank-chosen or looked-up tokens */
    int max_nodes;   /* set before draft: the most nodes the round's block and caches have room for (trees) */
    /* SV: when dlogits is set (by the session), drafters with logits copy each chain node's raw draft logits there
     * ([gmax][dlogits_V]; entries past the drafter's vocabulary -inf) and set has_dlogits (the session clears it) */
    float *dlogits;
    int dlogits_V;
    bool has_dlogits;
} draft_tree;

/* SV: copies a drafter's logits of V entries into row i of t->dlogits (when set). */
void draft_tree_keep_logits(draft_tree *t, int i, const float *logits, int V);

/* The verification pass of one round: block entry 0 is the root, entry j + 1 is node j. */
typedef struct verify_plan {
    int layer_begin;      /* 0: from the block's token ids; > 0: from embd, the states after layer_begin - 1 */
    const float *embd;    /* [k + 1][n_embd] when layer_begin > 0 */
    float *hidden_layers; /* optional out: [n_layer - layer_begin][k + 1][n_embd], the state after every layer run */
} verify_plan;

typedef struct drafter drafter;
struct drafter {
    const char *name;
    double t_aux; /* seconds of method bookkeeping outside draft/verify (DEL: shadow tokens), for the stats */
    sd_status (*begin)(drafter *d, const int32_t *hist, int n, sd_error *err);
    int (*draft)(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err);
    sd_status (*plan)(drafter *d, const int32_t *hist, int n, const draft_tree *t, int k, verify_plan *vp,
                      sd_error *err);
    void (*verified)(drafter *d, const float *logits, int k);
    void (*on_verified)(drafter *d, const int32_t *hist, int n, int n_accepted);
    void (*free)(drafter *d);
    sd_ctx *draft_ctx;
    int (*draft_start)(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, fwd_req *r, int *k,
                       sd_error *err);
    int (*draft_next)(drafter *d, fwd_req *r, int *k, sd_error *err);
    /* optional, for drafters that adapt to costs (auto): the round's measured drafting and verification seconds,
     * before on_verified, when the session ran the round alone (not merged with others in a scheduler) */
    void (*timed)(drafter *d, double draft_s, double verify_s);
    /* optional (auto): how many sequences' verification passes merge with this one's (1: alone), how many drafts the
     * others' blocks hold in the merged pass and how many tokens they emit per pass (from the last pass's mean),
     * before begin and before every on_verified, so that a choice made there can price a round at the batch's cost */
    void (*batched)(drafter *d, int n_seqs, int others_drafted, double others_tokens);
};

/* A separate draft model in its own context, on sequence seq there; smp: the target's sampler (its parameters are
 * used for q). sp: tree parameters (tree_nodes 0 = chains). */
drafter *drafter_model_new(sd_ctx *draft_ctx, int seq, const sd_sampler *smp, const sd_spec_params *sp,
                           sd_error *err);
/* The draft model's greedy predictions (auto's acceptance estimate): the logits[V] of the draft at position pos (the
 * one that read hist[pos]) as the drafter computes them — every fed position and every chain step. */
typedef void (*draft_pred_cb)(void *user, int pos, const float *logits, int V);
void drafter_model_observe(drafter *d, draft_pred_cb cb, void *user);
/* Feeds the history it has not seen (all but the pending token hist[n-1]) into the draft cache. */
sd_status drafter_model_sync(drafter *d, const int32_t *hist, int n, sd_error *err);
/* Tokens of the history in the draft cache. */
int drafter_model_len(const drafter *d);
/* Prompt lookup over the history. */
drafter *drafter_ngram_new(int n_max, int n_min);
/* SpecBound on sequence seq of the target's own context. */
drafter *drafter_bound_new(sd_ctx *target, int seq, const sd_spec_params *sp, const sd_exit_heads *heads, int gmax,
                           sd_error *err);
struct del_state;
/* Early exit on sequence seq of the target's own context: layers [0, E) draft, [E, L) verify from the exit cache.
 * del (may be NULL) makes it DEL: the exit depth is del->E each round and the shadow-token statistics are fed. */
drafter *drafter_exit_new(sd_ctx *target, int seq, int exit_layer, const sd_exit_heads *heads, const sd_sampler *smp,
                          int gmax, struct del_state *del, int del_init_tokens, sd_error *err);
/* Early exit's depth for the next rounds (1..L-1). */
void drafter_exit_set_depth(drafter *d, int exit_layer);
/* auto (--spec auto): a pool of candidate drafters, the round's chosen one drafting (see draft_auto.c); ctrl: its
 * controller view (max_len = the chosen gamma), borrowing the drafter (free it after the drafter or before). */
drafter *drafter_auto_new(sd_ctx *target, int seq, const sd_sampler *smp, const sd_spec_params *sp, int gmax,
                          ctrl **view, sd_error *err);
void drafter_auto_stats(const drafter *d, sd_spec_stats *s);
/* SWIFT: layer-skip self-speculation on sequence seq of the target's own context (sp: its parameters, its tree shape
 * and optionally a shared optimiser state); smp: the target's sampler. */
drafter *drafter_swift_new(sd_ctx *target, int seq, const sd_sampler *smp, const sd_spec_params *sp, sd_error *err);
/* SWIFT's optimisation time and steps in this drafter's life, and the best set's matchness. */
void drafter_swift_stats(const drafter *d, sd_spec_stats *s);
/* The optimiser's best matchness so far and its steps in all (0: nothing scored yet), for auto's estimate. */
float drafter_swift_matchness(const drafter *d, int *steps);
/* Sub-layers the drafting mask skips now (of 2 L). */
int drafter_swift_skipped(const drafter *d);
#endif
