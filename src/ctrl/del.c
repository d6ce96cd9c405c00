#include "ctrl/del.h"

#include <math.h>
#include <stdlib.h>

del_state *del_new(int L, const sd_spec_params *sp) {
    del_state *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->L = L;
    d->dmax = sp->del_dmax > 0 ? sp->del_dmax : 18;
    d->every = sp->del_every > 0 ? sp->del_every : 1;
    d->omega = sp->del_omega > 0 ? sp->del_omega : 0.95f;
    d->cand = calloc((size_t)L, sizeof *d->cand);
    d->Sc = calloc((size_t)L, sizeof *d->Sc);
    d->Stcs = calloc((size_t)L, sizeof *d->Stcs);
    d->Sfcs = calloc((size_t)L, sizeof *d->Sfcs);
    if (!d->cand || !d->Sc || !d->Stcs || !d->Sfcs) {
        del_free(d);
        return NULL;
    }
    if (sp->del_n_layers > 0) {
        for (int i = 0; i < sp->del_n_layers; i++)
            if (sp->del_layers[i] >= 1 && sp->del_layers[i] < L) d->cand[sp->del_layers[i]] = true;
    } else {
        for (int l = 1; l < L; l++) d->cand[l] = true;
    }
    d->E = L / 2 > 0 ? L / 2 : 1;
    while (!d->cand[d->E]) d->E = d->E % (L - 1) + 1; /* some candidate */
    d->gamma = 1;
    d->tau_E = 0.0f;
    return d;
}

void del_free(del_state *d) {
    if (!d) return;
    free(d->cand);
    free(d->Sc);
    free(d->Stcs);
    free(d->Sfcs);
    free(d);
}

bool del_wants_shadows(const del_state *d) { return d->rounds % d->every == 0; }

void del_observe(del_state *d, int npos, const uint8_t *match, const float *conf) {
    const double w = d->omega;
    d->SP = w * d->SP + npos;
    for (int l = 1; l < d->L; l++) {
        if (!d->cand[l]) continue;
        double c = 0, t = 0, f = 0;
        for (int i = 0; i < npos; i++) {
            if (match[(size_t)l * npos + i]) c += 1, t += conf[(size_t)l * npos + i];
            else f += conf[(size_t)l * npos + i];
        }
        d->Sc[l] = w * d->Sc[l] + c;
        d->Stcs[l] = w * d->Stcs[l] + t;
        d->Sfcs[l] = w * d->Sfcs[l] + f;
    }
}

void del_choose(del_state *d) {
    double best = 1.0 / d->L; /* d = 0: one token per L layers (plain decoding) */
    int bE = d->E, bg = 0;
    for (int l = 1; l < d->L; l++) {
        if (!d->cand[l] || d->SP <= 0) continue;
        double a = d->Sc[l] / d->SP;
        if (a > 0.999) a = 0.999;
        for (int g = 1; g <= d->dmax; g++) {
            double tpl = (1.0 - pow(a, g + 1)) / ((1.0 - a) * ((double)g * l + d->L));
            if (tpl > best) best = tpl, bE = l, bg = g;
        }
    }
    d->E = bE;
    d->gamma = bg;
    double tm = d->Sc[bE] > 0 ? d->Stcs[bE] / d->Sc[bE] : 1.0;
    double fm = d->SP - d->Sc[bE] > 0 ? d->Sfcs[bE] / (d->SP - d->Sc[bE]) : 0.0;
    d->tau_E = (float)(0.5 * (tm + fm));
    d->exit_sum += bE;
    d->gamma_sum += bg;
    d->n_choices++;
}

typedef struct del_ctrl {
    ctrl base;
    del_state *d;
} del_ctrl;

static int dc_max(ctrl *c) { return ((del_ctrl *)c)->d->gamma; }
static bool dc_keep(ctrl *c, int i, float top1) { return i == 0 || top1 >= ((del_ctrl *)c)->d->tau_E; }
static void dc_ver(ctrl *c, int nd, int na) {
    (void)nd, (void)na;
    ((del_ctrl *)c)->d->rounds++;
}
static void dc_free(ctrl *c) { free(c); }

ctrl *del_ctrl_new(del_state *d) {
    del_ctrl *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base = (ctrl){"del", dc_max, dc_keep, dc_ver, dc_free, true, NULL, false};
    c->d = d;
    return &c->base;
}
