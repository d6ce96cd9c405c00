#include "speculative/gp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double kern(const float *a, const float *b, int d, double ell) {
    double s = 0;
    for (int i = 0; i < d; i++) {
        double t = (double)a[i] - (double)b[i];
        s += t * t;
    }
    return exp(-s / (2.0 * ell * ell));
}

/* Lc Lc^T = A (A: [n][n] symmetric, overwritten by Lc in the lower triangle); false when not positive definite. */
static bool cholesky(double *A, int n) {
    for (int j = 0; j < n; j++) {
        double s = A[(size_t)j * n + j];
        for (int k = 0; k < j; k++) s -= A[(size_t)j * n + k] * A[(size_t)j * n + k];
        if (!(s > 0)) return false;
        double ljj = sqrt(s);
        A[(size_t)j * n + j] = ljj;
        for (int i = j + 1; i < n; i++) {
            double t = A[(size_t)i * n + j];
            for (int k = 0; k < j; k++) t -= A[(size_t)i * n + k] * A[(size_t)j * n + k];
            A[(size_t)i * n + j] = t / ljj;
        }
        for (int i = 0; i < j; i++) A[(size_t)i * n + j] = 0;
    }
    return true;
}

/* Solves Lc z = b in place (forward substitution). */
static void solve_lower(const double *Lc, int n, double *b) {
    for (int i = 0; i < n; i++) {
        double t = b[i];
        for (int k = 0; k < i; k++) t -= Lc[(size_t)i * n + k] * b[k];
        b[i] = t / Lc[(size_t)i * n + i];
    }
}

/* Solves Lc^T z = b in place (back substitution). */
static void solve_upper_t(const double *Lc, int n, double *b) {
    for (int i = n - 1; i >= 0; i--) {
        double t = b[i];
        for (int k = i + 1; k < n; k++) t -= Lc[(size_t)k * n + i] * b[k];
        b[i] = t / Lc[(size_t)i * n + i];
    }
}

bool gp_fit(gp_model *g, const float *X, const float *y, int n, int d, double ell, double noise) {
    memset(g, 0, sizeof *g);
    if (n < 1 || d < 1) return false;
    g->n = n, g->d = d, g->ell = ell, g->noise = noise, g->X = X;
    g->Lc = malloc((size_t)n * n * sizeof(double));
    g->alpha = malloc((size_t)n * sizeof(double));
    g->kx = malloc((size_t)n * sizeof(double));
    if (!g->Lc || !g->alpha || !g->kx) {
        gp_free(g);
        return false;
    }
    double m = 0;
    for (int i = 0; i < n; i++) m += y[i];
    g->y_mean = m / n;
    double v = 0;
    for (int i = 0; i < n; i++) v += (y[i] - g->y_mean) * (y[i] - g->y_mean);
    g->y_std = n > 1 && v > 1e-18 ? sqrt(v / n) : 1.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double k = kern(X + (size_t)i * d, X + (size_t)j * d, d, ell) + (i == j ? noise : 0.0);
            g->Lc[(size_t)i * n + j] = g->Lc[(size_t)j * n + i] = k;
        }
    if (!cholesky(g->Lc, n)) {
        gp_free(g);
        return false;
    }
    for (int i = 0; i < n; i++) g->alpha[i] = (y[i] - g->y_mean) / g->y_std;
    solve_lower(g->Lc, n, g->alpha);
    solve_upper_t(g->Lc, n, g->alpha);
    return true;
}

void gp_predict(gp_model *g, const float *x, double *mean, double *var) {
    const int n = g->n;
    double mu = 0;
    for (int i = 0; i < n; i++) {
        g->kx[i] = kern(x, g->X + (size_t)i * g->d, g->d, g->ell);
        mu += g->kx[i] * g->alpha[i];
    }
    mu = g->y_mean + g->y_std * mu;
    solve_lower(g->Lc, n, g->kx); /* v = Lc^-1 k*: var = k(x, x) - v.v */
    double v = 1.0;
    for (int i = 0; i < n; i++) v -= g->kx[i] * g->kx[i];
    *mean = mu;
    *var = v > 0 ? v * g->y_std * g->y_std : 0;
}

int gp_ucb_pick(gp_model *g, const float *cand, int m, double kappa) {
    int best = -1;
    double best_u = -INFINITY;
    for (int j = 0; j < m; j++) {
        double mu, var;
        gp_predict(g, cand + (size_t)j * g->d, &mu, &var);
        double u = mu + kappa * sqrt(var);
        if (u > best_u) best_u = u, best = j;
    }
    return best;
}

void gp_free(gp_model *g) {
    free(g->Lc);
    free(g->alpha);
    free(g->kx);
    memset(g, 0, sizeof *g);
}
