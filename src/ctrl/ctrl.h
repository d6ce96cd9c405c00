/* ctrl: draft-length controllers (a small vtable; the engine loop never switches on a method).
 *   max_len     the most tokens this round may draft (the engine also caps it by room left)
 *   keep_going  asked before drafting token i (0-based) with the draft's top-1 probability for it; false
 *               ends the round's drafting without that token (token 0 is always drafted)
 *   on_verified what the round's verification found
 *   uses_conf   whether keep_going reads top1 (when not, a greedy drafter may skip computing it)
 * Controllers that read more than the top-1 probability (SpecDec++'s acceptance head) set keep, which gets the
 * drafted position's features (ctrl_feat); drafters ask through ctrl_keep, which calls keep when set and
 * keep_going(top1) otherwise, so the top-1 controllers are unchanged.
 *   keep        optional: keep_going with the features
 *   uses_hidden whether keep reads the hidden state (a drafter fills ctrl_feat.hidden only then) */
#ifndef SD_CTRL_CTRL_H
#define SD_CTRL_CTRL_H
#include <stdbool.h>

#include "specdec.h"

/* What a drafter knows before drafting token i (0-based) of a round. */
typedef struct ctrl_feat {
    float top1;          /* the draft's top-1 probability for token i (1 when not computed: !uses_conf, greedy) */
    const float *hidden; /* [dim] the drafter's last hidden state at the position whose output gives token i's
                            distribution: the one that has just read token i - 1 (the pending token when i = 0).
                            The draft model: its last layer's state; early exit: the exit state (before any head
                            or final norm); layer skipping: the skipped model's last state. NULL when the drafter
                            has none (n-gram lookup) or did not keep it (i = 0 may be NULL) */
    int dim;             /* entries of hidden */
    int32_t prev;        /* token i - 1 (the pending token when i = 0) */
} ctrl_feat;

typedef struct ctrl ctrl;
struct ctrl {
    const char *name;
    int (*max_len)(ctrl *c);
    bool (*keep_going)(ctrl *c, int i, float top1);
    void (*on_verified)(ctrl *c, int n_drafted, int n_accepted);
    void (*free)(ctrl *c);
    bool uses_conf;
    /* SpecDec++ (controllers reading per-position features) */
    bool (*keep)(ctrl *c, int i, const ctrl_feat *f);
    bool uses_hidden;
};

/* The controller's answer for token i: keep with the features when it has one, else keep_going with top1. */
static inline bool ctrl_keep(ctrl *c, int i, const ctrl_feat *f) {
    return c->keep ? c->keep(c, i, f) : c->keep_going(c, i, f->top1);
}

/* The controller sp->ctrl names, configured from sp. NULL when out of memory. */
ctrl *ctrl_new(const sd_spec_params *sp);
#endif
