/* specdecpp: SpecDec++'s stopping rule (methods.md 5). Before drafting token i >= 1 the drafter's hidden state of
 * the position that has read token i - 1 gives a_{i-1} = head(state) ~ P(token i - 1 is accepted); the round keeps
 * drafting while 1 - prod_{j<i} a_j <= h (P(some draft so far is rejected) within the threshold), up to gamma_max.
 * Token 0 is always drafted. Reads ctrl_feat.hidden only: any drafter that supplies its state works (draft model,
 * early exit, layer skipping). A drafter that supplies no state (NULL) gets the bound gamma_max. */
#ifndef SD_CTRL_SPECDECPP_H
#define SD_CTRL_SPECDECPP_H
#include "ctrl/ctrl.h"
#include "specdec.h"

/* Borrowing head. NULL when out of memory. */
ctrl *ctrl_specdecpp_new(const sd_accept_head *head, float threshold, int gamma_max);
#endif
