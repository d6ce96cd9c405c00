#include "ctrl/auto_choose.h"

#include <math.h>
#include <string.h>

void ac_stats_init(ac_stats *s, double w, double a) {
    memset(s, 0, sizeof *s);
    s->W = w;
    double p = 1;
    for (int j = 1; j <= AC_GMAX; j++) {
        p *= a;
        s->S[j] = w * p;
        s->K[j] = w;
    }
}

void ac_stats_observe(ac_stats *s, int L, int kp, double decay, double w) {
    const int run = L < kp ? L : kp;
    const double f = w == 1 ? decay : pow(decay, w);
    s->W = f * s->W + w;
    for (int j = 1; j <= AC_GMAX; j++) {
        s->S[j] = f * s->S[j] + w * (run >= j);
        s->K[j] = f * s->K[j] + w * (kp >= j);
    }
    s->n_obs++;
}

static double sum_to(const double *x, double W, int g) {
    if (!(W > 0)) return 0;
    double a = 0;
    for (int j = 1; j <= g && j <= AC_GMAX; j++) a += x[j];
    return a / W;
}

double ac_stats_acc(const ac_stats *s, int g) { return sum_to(s->S, s->W, g); }
double ac_stats_drafted(const ac_stats *s, int g) { return sum_to(s->K, s->W, g); }

double ac_verify_time(const double *t, int n_t, double n) {
    if (n_t <= 0) return t[0] * (1 + n);
    if (n <= 0) return t[0];
    int i = (int)n;
    if (i >= n_t) i = n_t - 1;
    return t[i] + (n - i) * (t[i + 1] - t[i]);
}

double ac_rate(const ac_family *f, int g, const double *t, int n_t, double *acc) {
    const double a = g > 0 ? ac_stats_acc(&f->st, g) : 0, d = g > 0 ? ac_stats_drafted(&f->st, g) : 0;
    const double cost = (g > 0 ? f->c * (d + f->x) : 0) + (g > 0 ? f->v : 1) * ac_verify_time(t, n_t, d);
    if (acc) *acc = a;
    return cost > 0 ? (a + 1) / cost : 0;
}

double ac_best_g(const ac_family *f, const double *t, int n_t, int *g) {
    int bg = 0;
    double best = -1;
    for (int k = f->gmax > 0 ? 1 : 0; k <= f->gmax; k++) {
        double r = ac_rate(f, k, t, n_t, NULL);
        if (r > best) best = r, bg = k;
    }
    *g = bg;
    return best;
}

ac_pick ac_choose(const ac_family *fam, int n, const double *t, int n_t, int cur, double hyst) {
    ac_pick best = {-1, 0, -1, AC_BEST}, own = {-1, 0, -1, AC_BEST};
    for (int i = 0; i < n; i++) {
        if (fam[i].off) continue;
        int g;
        double r = ac_best_g(&fam[i], t, n_t, &g);
        if (r > best.rate) best = (ac_pick){i, g, r, AC_BEST};
        if (i == cur) own = (ac_pick){i, g, r, AC_BEST};
    }
    if (own.fam >= 0 && best.fam != own.fam && !(best.rate > own.rate * (1 + hyst))) {
        own.why = AC_HELD;
        return own;
    }
    return best;
}
