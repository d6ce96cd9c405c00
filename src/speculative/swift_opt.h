/* swift_opt: SWIFT's skip-set optimiser (methods.md 4), the library's sd_swift_state. A candidate skips exactly
 * |S| = floor(2 (L - 2) r) of the 2 (L - 2) sub-layers of layers 1..L-2 (the first and last layers always run).
 * Steps: the first proposal is the starting set (the sub-layers of every other layer, 1, 3, 5, ..., then 2, 4, ...
 * until |S| are chosen); then random search — half the time a uniformly random set, half the time the best set
 * with one or two skipped sub-layers swapped for running ones — and every beta-th step the candidate with the
 * highest UCB (kappa 2.5) of a Gaussian process (RBF on the mask = exponential Hamming kernel, noise 1e-2) fitted to
 * the scored candidates, among the best set's one- and two-swap neighbours and random sets not scored yet. The
 * caller scores each proposal (matchness) and reports it; the best is kept; optimisation stops after max steps,
 * patience steps without improvement, or a best score >= stop_score. */
#ifndef SD_SPEC_SWIFT_OPT_H
#define SD_SPEC_SWIFT_OPT_H
#include <stdbool.h>
#include <stdint.h>

#include "specdec.h"

/* Takes the limits (steps, patience, beta, stop score) and the set size from sp; a state whose best set has
 * another size starts over. */
void swift_opt_configure(sd_swift_state *st, const sd_spec_params *sp);
bool swift_opt_done(const sd_swift_state *st);
/* |S| = floor(2 (L - 2) r): the skipped sub-layers of an n_layer model at skip ratio r. */
int swift_opt_size_for(int n_layer, float ratio);
/* The next candidate: mask[2 L] (1 = skipped). */
void swift_opt_propose(sd_swift_state *st, uint8_t *mask);
/* The score of a proposed candidate; returns true when it is the new best. */
bool swift_opt_observe(sd_swift_state *st, const uint8_t *mask, float score);
int swift_opt_n_layer(const sd_swift_state *st);
int swift_opt_steps(const sd_swift_state *st);
/* GP proposals only (beta = 1) and a fixed set size, for tests on planted masks */
void swift_opt_set_size(sd_swift_state *st, int size);
#endif
