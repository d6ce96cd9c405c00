#include "ctrl/auto_choose.h"

#include <math.h>
#include <string.h>

#include "specdec.h"

void ac_sim_init(ac_sim *s, int g, double w, double a, int start) {
    memset(s, 0, sizeof *s);
    s->next = start;
    if (g < 0) g = 0;
    if (g > AC_GMAX) g = AC_GMAX;
    double p = 1, acc = 0;
    for (int j = 1; j <= g; j++) p *= a, acc += p;
    s->R = w;
    s->A = w * acc;
    s->D = w * g;
    s->Rd = g > 0 ? w : 0;
    s->H[g] = w;
}

void ac_sim_round(ac_sim *s, int L, int d, double decay, double w) {
    if (d < 0) d = 0;
    if (d > AC_GMAX) d = AC_GMAX;
    const double f = w == 1 ? decay : pow(decay, w);
    s->R = f * s->R + w;
    s->A = f * s->A + w * L;
    s->D = f * s->D + w * d;
    s->Rd = f * s->Rd + (d > 0 ? w : 0);
    for (int j = 0; j <= AC_GMAX; j++) s->H[j] = f * s->H[j] + (j == d ? w : 0);
}

void ac_replay(ac_family *f, ac_outcome out, void *user, double decay, int p_full, double w_before) {
    for (int g = 1; g <= f->gmax && g <= AC_GMAX; g++) {
        ac_sim *s = &f->sim[g];
        for (;;) {
            int L = 0, d = 0, r = out(user, s->next, g, &L, &d);
            if (r == 0) break;
            if (r < 0) {
                s->next++;
                continue;
            }
            ac_sim_round(s, L, d, decay, s->next < p_full ? w_before : 1.0);
            s->next += L + 1;
        }
    }
}

void ac_carry(ac_family *dst, const ac_family *src, int start, double max_rounds) {
    for (int g = 1; g <= dst->gmax && g <= src->gmax && g <= AC_GMAX; g++) {
        ac_sim s = src->sim[g];
        if (!(s.R > 0)) continue;
        const double k = s.R > max_rounds ? max_rounds / s.R : 1.0;
        s.R *= k, s.A *= k, s.D *= k, s.Rd *= k;
        for (int d = 0; d <= AC_GMAX; d++) s.H[d] *= k;
        s.next = start;
        dst->sim[g] = s;
    }
}

double ac_verify_time(const double *t, int n_t, double n) {
    if (n_t <= 0) return t[0] * (1 + n);
    if (n <= 0) return t[0];
    int i = (int)n;
    if (i >= n_t) i = n_t - 1;
    return t[i] + (n - i) * (t[i + 1] - t[i]);
}

/* The expected seconds of a round of family f with gamma g whose verification passes cost v t[0..n_t] and whose
 * drafting runs m times (-1: no replayed rounds), its expected accepted drafts in *a. */
static double round_cost(const ac_family *f, int g, const double *t, int n_t, double o, double m, double v, double *a) {
    *a = 0;
    if (g <= 0 || f->gmax <= 0) return t[0] + o;
    const ac_sim *s = &f->sim[g > AC_GMAX ? AC_GMAX : g];
    if (!(s->R > 0)) return -1;
    if (f->avail_known) { /* this round's proposal */
        const int d = f->avail < g ? f->avail : g;
        *a = d > 0 && s->Rd > 0 ? s->A / s->Rd : 0;
        if (*a > d) *a = d;
        return m * f->c * (d + f->x) + v * ac_verify_time(t, n_t, d) + o;
    }
    double tv = 0;
    for (int d = 0; d <= g && d <= AC_GMAX; d++)
        if (s->H[d] > 0) tv += s->H[d] * ac_verify_time(t, n_t, d);
    *a = s->A / s->R;
    return (m * f->c * (s->D + f->x * s->Rd) + v * tv) / s->R + o;
}

double ac_rate(const ac_family *f, int g, const ac_costs *k, double *acc, double *secs) {
    double a = 0;
    /* in a batch, a family that drafts alone also verifies in a pass of its own (early exit's upper layers do not
     * merge with full passes): its share v of the merged pass is not what it saves, so it counts the whole */
    const double cost = round_cost(f, g, k->t, k->n_t, k->o, 1, k->t_all && f->alone ? 1 : f->v, &a);
    if (acc) *acc = cost > 0 ? a : 0;
    if (secs) *secs = cost > 0 ? cost : 0;
    if (!(cost > 0)) return 0;
    double rate = (k->others + a + 1) / cost;
    if (k->t_all) { /* the batch's rate if every sequence did as this round: a draft counts the lower, a plain
                     * step the higher (plain decoding is what every sequence can fall back to) */
        const double all = round_cost(f, g, k->t_all, k->n_t, k->o, f->alone ? k->seqs : 1, f->v, &a);
        const double r_all = all > 0 ? k->seqs * (a + 1) / all : 0;
        const bool plain = g <= 0 || f->gmax <= 0;
        if (plain ? r_all > rate : r_all < rate) rate = r_all;
    }
    return rate;
}

double ac_best_g(const ac_family *f, const ac_costs *kc, int *g) {
    int bg = 0;
    double best = -1;
    for (int k = f->gmax > 0 ? 1 : 0; k <= f->gmax; k++) {
        double r = ac_rate(f, k, kc, NULL, NULL);
        if (r > best) best = r, bg = k;
    }
    *g = bg;
    return best;
}

ac_pick ac_choose(const ac_family *fam, int n, const ac_costs *k, int cur, int cur_g, double hyst) {
    ac_pick best = {-1, 0, -1, AC_BEST}, own = {-1, 0, -1, AC_BEST};
    for (int i = 0; i < n; i++) {
        if (fam[i].off) continue;
        int g;
        double r = ac_best_g(&fam[i], k, &g);
        if (r > best.rate) best = (ac_pick){i, g, r, AC_BEST};
        if (i == cur) { /* the running (family, gamma) */
            const int cg = cur_g < 0 ? 0 : cur_g > fam[i].gmax ? fam[i].gmax : cur_g;
            own = (ac_pick){i, cg, ac_rate(&fam[i], cg, k, NULL, NULL), AC_BEST};
        }
    }
    if (own.fam >= 0 && (best.fam != own.fam || best.g != own.g) && !(best.rate > own.rate * (1 + hyst))) {
        own.why = AC_HELD;
        return own;
    }
    return best;
}

void ac_monotone(double *t, int n) {
    /* blocks of pooled cells: mean and size; a block merges with the one before while it is below it */
    double mean[AC_GMAX + 1];
    int size[AC_GMAX + 1], nb = 0;
    if (n > AC_GMAX) n = AC_GMAX;
    for (int i = 0; i <= n; i++) {
        mean[nb] = t[i], size[nb] = 1, nb++;
        while (nb > 1 && mean[nb - 1] < mean[nb - 2]) {
            const int s = size[nb - 2] + size[nb - 1];
            mean[nb - 2] = (mean[nb - 2] * size[nb - 2] + mean[nb - 1] * size[nb - 1]) / s;
            size[nb - 2] = s;
            nb--;
        }
    }
    for (int b = 0, i = 0; b < nb; b++)
        for (int j = 0; j < size[b]; j++) t[i++] = mean[b];
}

void ac_batch_costs(const struct sd_sv_latency *l, int nb, int others_d, int n, double *out, double *out_all) {
    if (n > AC_GMAX) n = AC_GMAX;
    if (nb < 1) nb = 1;
    if (others_d < 0) others_d = 0;
    for (int d = 0; d <= n; d++) {
        out[d] = sd_sv_latency_time(l, others_d + d, nb);
        out_all[d] = sd_sv_latency_time(l, nb * d, nb);
    }
    ac_monotone(out, n);
    ac_monotone(out_all, n);
}
