#include "ctrl/specdecpp.h"

#include <stdlib.h>

#include "model/accept_head.h"

typedef struct sdpp_ctrl {
    ctrl base;
    const sd_accept_head *head;
    float h;
    int gamma_max;
    double prod;    /* prod of a_j over the round's drafts so far */
    float *scratch; /* [(2 blocks + 1) dim] */
} sdpp_ctrl;

static int sdpp_max(ctrl *c) { return ((sdpp_ctrl *)c)->gamma_max; }

static bool sdpp_keep(ctrl *c, int i, const ctrl_feat *f) {
    sdpp_ctrl *s = (sdpp_ctrl *)c;
    if (i == 0) {
        s->prod = 1.0;
        return true;
    }
    if (!f->hidden || f->dim != s->head->dim) return true;
    s->prod *= accept_head_prob(s->head, f->hidden, s->scratch);
    return 1.0 - s->prod <= s->h;
}

static bool sdpp_keep_top1(ctrl *c, int i, float top1) { /* without features: the bound only */
    (void)c, (void)i, (void)top1;
    return true;
}

static void sdpp_verified(ctrl *c, int nd, int na) { (void)c, (void)nd, (void)na; }

static void sdpp_free(ctrl *c) {
    sdpp_ctrl *s = (sdpp_ctrl *)c;
    free(s->scratch);
    free(s);
}

ctrl *ctrl_specdecpp_new(const sd_accept_head *head, float threshold, int gamma_max) {
    sdpp_ctrl *s = calloc(1, sizeof *s);
    if (!s || !head || !(s->scratch = malloc((size_t)(2 * head->blocks + 1) * head->dim * sizeof(float)))) {
        free(s);
        return NULL;
    }
    s->base = (ctrl){"specdecpp", sdpp_max, sdpp_keep_top1, sdpp_verified, sdpp_free, false, sdpp_keep, true};
    s->head = head;
    s->h = threshold;
    s->gamma_max = gamma_max;
    s->prod = 1.0;
    return &s->base;
}
