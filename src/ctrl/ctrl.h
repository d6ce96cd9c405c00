/* ctrl: draft-length controllers (a small vtable; the engine loop never switches on a method).
 *   max_len     the most tokens this round may draft (the engine also caps it by room left)
 *   keep_going  asked before drafting token i (0-based) with the draft's top-1 probability for it; false
 *               ends the round's drafting without that token (token 0 is always drafted)
 *   on_verified what the round's verification found
 *   uses_conf   whether keep_going reads top1 (when not, a greedy drafter may skip computing it) */
#ifndef SD_CTRL_CTRL_H
#define SD_CTRL_CTRL_H
#include <stdbool.h>

#include "specdec.h"

typedef struct ctrl ctrl;
struct ctrl {
    const char *name;
    int (*max_len)(ctrl *c);
    bool (*keep_going)(ctrl *c, int i, float top1);
    void (*on_verified)(ctrl *c, int n_drafted, int n_accepted);
    void (*free)(ctrl *c);
    bool uses_conf;
};

/* The controller sp->ctrl names, configured from sp. NULL when out of memory. */
ctrl *ctrl_new(const sd_spec_params *sp);
#endif
