/* gp: a small Gaussian-process regressor for SWIFT's Bayesian-optimisation proposals (methods.md 4) — RBF kernel
 * k(x, x') = exp(-|x - x'|^2 / (2 ell^2)) (on binary skip masks |x - x'|^2 is the Hamming distance), zero-mean prior
 * on the standardised scores, Gaussian noise (in standardised units); fit by a Cholesky factorisation in plain C; UCB acquisition
 * mean + kappa * sd over a list of candidates. */
#ifndef SD_SPEC_GP_H
#define SD_SPEC_GP_H
#include <stdbool.h>

typedef struct gp_model {
    int n, d;
    double ell, noise, y_mean, y_std; /* the scores are standardised before the fit */
    const float *X; /* [n][d] the observations (borrowed) */
    double *Lc;     /* [n][n] lower Cholesky factor of K + noise I */
    double *alpha;  /* [n] (K + noise I)^-1 (y - y_mean) */
    double *kx;     /* [n] scratch */
} gp_model;

/* Fits the GP to X[n][d] -> y[n]; X must outlive the model. false when out of memory or K is not positive definite. */
bool gp_fit(gp_model *g, const float *X, const float *y, int n, int d, double ell, double noise);
/* Posterior mean and variance at x[d]. */
void gp_predict(gp_model *g, const float *x, double *mean, double *var);
/* The candidate (of cand[m][d]) with the highest mean + kappa * sd; -1 when m < 1. */
int gp_ucb_pick(gp_model *g, const float *cand, int m, double kappa);
void gp_free(gp_model *g);
#endif
