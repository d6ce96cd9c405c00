/* accept: the lossless acceptance rules of draft-then-verify (methods.md 0.1).
 * Sampling: accept draft token x with probability min(1, p(x)/q(x)); on rejection draw from
 * norm(max(0, p - q)). p and q are distributions after the same logit processing; q == NULL means a one-hot
 * draft (n-gram lookup, tree branches chosen by rank). */
#ifndef SD_SPEC_ACCEPT_H
#define SD_SPEC_ACCEPT_H
#include <stdbool.h>
#include <stdint.h>

#include "specdec.h"
#include "speculative/spec.h"

/* residual[V] = max(0, p - q) (unnormalised); q NULL = one-hot on x. Returns its sum. */
typedef double (*accept_residual_fn)(const float *p, const float *q, int32_t x, int V, float *residual);
double accept_residual(const float *p, const float *q, int32_t x, int V, float *residual);

/* One sampling-mode check. u: uniform [0,1) for the accept test; draws the replacement with smp's RNG.
 * Returns true when x is accepted; otherwise *repl gets the replacement token. scratch: [V]. residual_fn lets a
 * test substitute a wrong rule (NULL = accept_residual). */
bool accept_sample(const float *p, const float *q, int32_t x, int V, double u, sd_sampler *smp, float *scratch,
                   int32_t *repl, accept_residual_fn residual_fn);

/* Acceptance over a round's draft tree (a chain is a tree of width 1). logits: [k + 1][V], row 0 the root (the
 * pending token), row j + 1 node j.
 *  - greedy sampler: follow, from the root, the child whose token is the target's argmax at its parent;
 *  - sampling (multi-candidate rejection sampling, lossless): at each node r = p, the target's processed
 *    distribution there; its children are tried in node order, child x (draft distribution q, or one-hot) is accepted
 *    when u < r(x) / q(x) (u uniform), and otherwise r becomes norm(max(0, r - q)) for the next child. When no child
 *    is accepted the token is drawn from r. With one child per node this is accept_sample, draw for draw.
 * hist[0 .. n_hist) is the history (the penalty's); the accepted tokens are written at hist[n_hist + depth] (room
 * for k). path: [k] out, the accepted nodes root-first; *next: the target's token after them. p, scratch: [V].
 * Returns the number of accepted nodes. residual_fn: NULL = accept_residual (tests substitute a wrong rule). */
int accept_tree(const draft_tree *t, int k, const float *logits, int V, sd_sampler *smp, int32_t *hist, int n_hist,
                float *p, float *scratch, int32_t *path, int32_t *next, accept_residual_fn residual_fn);

/* argmax with the lowest id on ties (the greedy sampler's rule). */
int32_t accept_argmax(const float *logits, int V);
/* max softmax(logits / T) given its argmax. */
float accept_top1_prob(const float *logits, int V, int32_t best, float T);

/* One step of a chain drafter (draft model, early exit, SWIFT): logits[V] of the position that has read
 * hist[n + i - 1] give draft token i's distribution — greedy: its argmax; sampling: q = the processed distribution
 * (history hist[0 .. n + i)), written to t->q row i. The controller is asked first (ctrl_keep with the top-1
 * probability, computed when c->uses_conf or when sampling, and hidden[D], the drafter's state at that position, may
 * be NULL); when it keeps going the token is drawn (sampling: with smp's RNG) into t->token[i] and hist[n + i], and
 * the logits are kept for SV (draft_tree_keep_logits). Returns the token, or -1 when the controller ends the round. */
int32_t draft_chain_step(draft_tree *t, ctrl *c, sd_sampler *smp, bool greedy, const float *logits, int V,
                         const float *hidden, int D, int32_t *hist, int n, int i);
/* A drafter's own sampler: the target sampler's parameters with a seed of its own (the target's seed times the golden
 * ratio plus salt), so the drafter's draws never take from the target's stream; *seed (may be NULL) gets that seed. */
sd_status draft_sampler_new(const sd_sampler *target, int n_vocab, uint32_t salt, sd_sampler **out, uint64_t *seed,
                            sd_error *err);
#endif
