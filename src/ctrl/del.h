/* del: DEL's statistics (methods.md 2). Per eligible depth l (1..L-1) decayed sums (factor omega per round) of
 *   c_l   matches of the depth-l shadow token with the target token over the round's positions 0..u
 *   tcs_l confidences of matching shadows, fcs_l of mismatching ones,   and P = positions observed (u + 1).
 * alpha_l = S(c_l) / S(P) (positions 0..u are u + 1 observations, so alpha stays a rate <= 1).
 * TPL(l, d) = (1 - alpha_l^(d+1)) / ((1 - alpha_l)(d l + L)); the next round uses (E, gamma) = argmax over candidate
 * l and d in [0, d_max]; the dynamic threshold tau_l = (S(tcs_l)/S(c_l) + S(fcs_l)/S(P - c_l)) / 2. */
#ifndef SD_CTRL_DEL_H
#define SD_CTRL_DEL_H
#include <stdbool.h>
#include <stdint.h>

#include "ctrl/ctrl.h"
#include "specdec.h"

typedef struct del_state {
    int L, dmax, every, rounds;
    float omega;
    bool *cand;              /* [L] candidate depths */
    double *Sc, *Stcs, *Sfcs; /* [L] by depth */
    double SP;
    int E, gamma;
    float tau_E;
    double exit_sum, gamma_sum; /* over choices, for the stats */
    int n_choices;
} del_state;

del_state *del_new(int n_layer, const sd_spec_params *sp);
void del_free(del_state *d);
/* Whether this round's shadow tokens are computed (the bounded mode skips rounds). */
bool del_wants_shadows(const del_state *d);
/* One round's observation: for every candidate depth l, match[l*npos + i] and conf[l*npos + i], i < npos. */
void del_observe(del_state *d, int npos, const uint8_t *match, const float *conf);
/* Picks (E, gamma, tau_E) for the next round. */
void del_choose(del_state *d);
/* A controller view: max_len = gamma, keep_going while the draft confidence >= tau_E. Borrowing d. */
ctrl *del_ctrl_new(del_state *d);
#endif
