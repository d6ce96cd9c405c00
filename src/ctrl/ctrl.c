#include "ctrl/ctrl.h"

#include <stdlib.h>

#include "ctrl/specdecpp.h"

typedef struct ctrl_state {
    ctrl base;
    int gamma, gamma_max;
    float p_min, theta, target, eps;
} ctrl_state;

static int max_fixed(ctrl *c) { return ((ctrl_state *)c)->gamma; }
static int max_bound(ctrl *c) { return ((ctrl_state *)c)->gamma_max; }
static bool keep_always(ctrl *c, int i, float top1) { (void)c, (void)i, (void)top1; return true; }
static bool keep_conf(ctrl *c, int i, float top1) { return i == 0 || top1 >= ((ctrl_state *)c)->p_min; }
static bool keep_dv(ctrl *c, int i, float top1) { return i == 0 || top1 >= ((ctrl_state *)c)->theta; }
static void ver_none(ctrl *c, int nd, int na) { (void)c, (void)nd, (void)na; }

/* FS (Liu et al. 2025): one step longer after a fully accepted round, one shorter otherwise. */
static void ver_fs(ctrl *c, int nd, int na) {
    ctrl_state *s = (ctrl_state *)c;
    if (nd > 0 && na == nd) s->gamma = s->gamma < s->gamma_max ? s->gamma + 1 : s->gamma_max;
    else s->gamma = s->gamma > 1 ? s->gamma - 1 : 1;
}

/* DV (Zhang et al. 2024): move the confidence threshold toward the target acceptance rate. */
static void ver_dv(ctrl *c, int nd, int na) {
    ctrl_state *s = (ctrl_state *)c;
    if (nd == 0) return;
    float acc = (float)na / (float)nd;
    if (acc < s->target) s->theta += s->eps;
    else if (acc > s->target) s->theta -= s->eps;
    if (s->theta < 0) s->theta = 0;
    if (s->theta > 1) s->theta = 1;
}

static void free_state(ctrl *c) { free(c); }

ctrl *ctrl_new(const sd_spec_params *sp) {
    if (sp->ctrl == SD_CTRL_SPECDECPP && sp->accept_head) /* (without a head: a method that drafts nothing) */
        return ctrl_specdecpp_new(sp->accept_head, sp->stop_threshold, sp->gamma_max);
    ctrl_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->gamma = sp->gamma;
    s->gamma_max = sp->gamma_max;
    s->p_min = sp->p_min;
    s->theta = sp->dv_theta0;
    s->target = sp->dv_target;
    s->eps = sp->dv_eps;
    switch (sp->ctrl) {
    case SD_CTRL_CONF: s->base = (ctrl){"conf", max_bound, keep_conf, ver_none, free_state, true, NULL, false}; break;
    case SD_CTRL_FS: s->base = (ctrl){"fs", max_fixed, keep_always, ver_fs, free_state, false, NULL, false}; break;
    case SD_CTRL_DV: s->base = (ctrl){"dv", max_bound, keep_dv, ver_dv, free_state, true, NULL, false}; break;
    default: s->base = (ctrl){"fixed", max_fixed, keep_always, ver_none, free_state, false, NULL, false}; break;
    }
    return &s->base;
}
