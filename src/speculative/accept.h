/* accept: the lossless acceptance rules of draft-then-verify (methods.md 0.1).
 * Sampling: accept draft token x with probability min(1, p(x)/q(x)); on rejection draw from
 * norm(max(0, p - q)). p and q are distributions after the same logit processing; q == NULL means a one-hot
 * draft (n-gram lookup, tree branches chosen by rank). */
#ifndef SD_SPEC_ACCEPT_H
#define SD_SPEC_ACCEPT_H
#include <stdbool.h>
#include <stdint.h>

#include "specdec.h"

/* residual[V] = max(0, p - q) (unnormalised); q NULL = one-hot on x. Returns its sum. */
typedef double (*accept_residual_fn)(const float *p, const float *q, int32_t x, int V, float *residual);
double accept_residual(const float *p, const float *q, int32_t x, int V, float *residual);

/* One sampling-mode check. u: uniform [0,1) for the accept test; draws the replacement with smp's RNG.
 * Returns true when x is accepted; otherwise *repl gets the replacement token. scratch: [V]. residual_fn lets a
 * test substitute a wrong rule (NULL = accept_residual). */
bool accept_sample(const float *p, const float *q, int32_t x, int V, double u, sd_sampler *smp, float *scratch,
                   int32_t *repl, accept_residual_fn residual_fn);

/* argmax with the lowest id on ties (the greedy sampler's rule). */
int32_t accept_argmax(const float *logits, int V);
/* max softmax(logits / T) given its argmax. */
float accept_top1_prob(const float *logits, int V, int32_t best, float T);

/* A drafter's next token from its logits: greedy -> argmax (q unused); sampling -> q[V] = the processed
 * distribution (history hist[0..n_hist)); *top1 = its largest probability (greedy: only when want_top1, else 1).
 * The token itself is drawn only by draft_draw, after the controller agreed to draft it. Returns the greedy token,
 * or -1 when sampling. */
int32_t draft_peek(sd_sampler *smp, bool greedy, const float *logits, int V, const int32_t *hist, int n_hist,
                   float *q, bool want_top1, float *top1);
int32_t draft_draw(sd_sampler *smp, bool greedy, int32_t peeked, const float *q);
#endif
