#define _POSIX_C_SOURCE 200809L
#include "speculative/swift_opt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speculative/gp.h"
#include "util/err.h"

enum { OBS_CAP = 256, N_CAND_RANDOM = 256, HIST_CAP = 64 };
static const double GP_KAPPA = 2.5, GP_NOISE = 1e-2, GP_ELL = 1.0;

struct sd_swift_state {
    int L, d;          /* layers; d = 2 (L - 2) candidate sub-layers (bit i = sub-layer 2 + i of the full mask) */
    int size;          /* |S| */
    int max_steps, patience, beta;
    float stop_score;
    uint64_t rng;
    uint8_t *best;     /* [d] */
    float best_score;  /* -1: nothing scored */
    int steps, since_best;
    float *obs_x;      /* [OBS_CAP][d] scored candidates (a ring) */
    float *obs_y;      /* [OBS_CAP] */
    int n_obs, obs_next;
    float *cand;       /* [n_cand][d] GP candidates scratch */
    int n_cand_cap;
    /* matchness over time: the steps at which the best set improved and its new score (the latest HIST_CAP) */
    int hist_step[HIST_CAP];
    float hist_score[HIST_CAP];
    int n_hist;
};

static uint64_t rnd(sd_swift_state *st) { /* splitmix64 */
    uint64_t z = (st->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int rnd_below(sd_swift_state *st, int n) { return (int)(rnd(st) % (uint64_t)n); }

int swift_opt_size_for(int L, float r) {
    int s = (int)floorf(2.0f * (float)(L - 2) * r);
    return s < 0 ? 0 : s > 2 * (L - 2) ? 2 * (L - 2) : s;
}

static void start_set(const sd_swift_state *st, uint8_t *b) {
    memset(b, 0, (size_t)st->d);
    int k = 0;
    for (int pass = 0; pass < 2; pass++) /* layers 1, 3, 5, ... then 2, 4, ... (both sub-layers) */
        for (int l = 1 + pass; l <= st->L - 2; l += 2)
            for (int h = 0; h < 2 && k < st->size; h++, k++) b[2 * (l - 1) + h] = 1;
}

static void clear_obs(sd_swift_state *st) {
    st->n_obs = st->obs_next = 0;
    st->best_score = -1;
    st->steps = st->since_best = 0;
    st->n_hist = 0;
    start_set(st, st->best);
}

sd_status sd_swift_state_new(int n_layer, const sd_spec_params *sp, uint64_t seed, sd_swift_state **out,
                             sd_error *err) {
    *out = NULL;
    if (n_layer < 3) return err_set(err, SD_ERR_ARG, "SWIFT needs a model with at least 3 layers (this one has %d)", n_layer);
    sd_swift_state *st = calloc(1, sizeof *st);
    if (!st) return err_set(err, SD_ERR_NOMEM, "out of memory for the SWIFT state");
    st->L = n_layer;
    st->d = 2 * (n_layer - 2);
    st->n_cand_cap = N_CAND_RANDOM + st->d * st->d * 2;
    st->best = calloc((size_t)st->d, 1);
    st->obs_x = malloc((size_t)OBS_CAP * st->d * sizeof(float));
    st->obs_y = malloc((size_t)OBS_CAP * sizeof(float));
    st->cand = malloc((size_t)st->n_cand_cap * st->d * sizeof(float));
    if (!st->best || !st->obs_x || !st->obs_y || !st->cand) {
        sd_swift_state_free(st);
        return err_set(err, SD_ERR_NOMEM, "out of memory for the SWIFT state");
    }
    st->rng = seed ^ 0x5851f42d4c957f2dull;
    sd_spec_params def = sd_spec_default_params();
    if (!sp) sp = &def;
    st->size = swift_opt_size_for(n_layer, sp->swift_skip_ratio);
    swift_opt_configure(st, sp);
    clear_obs(st);
    *out = st;
    return SD_OK;
}

void sd_swift_state_free(sd_swift_state *st) {
    if (!st) return;
    free(st->best);
    free(st->obs_x);
    free(st->obs_y);
    free(st->cand);
    free(st);
}

void swift_opt_set_size(sd_swift_state *st, int size) {
    if (size == st->size) return;
    st->size = size;
    clear_obs(st);
}

void swift_opt_configure(sd_swift_state *st, const sd_spec_params *sp) {
    st->max_steps = sp->swift_opt_steps;
    st->patience = sp->swift_patience;
    st->beta = sp->swift_bayes_interval > 0 ? sp->swift_bayes_interval : 1;
    st->stop_score = sp->swift_stop_score;
    swift_opt_set_size(st, swift_opt_size_for(st->L, sp->swift_skip_ratio));
}

bool swift_opt_done(const sd_swift_state *st) {
    return st->steps >= st->max_steps || (st->best_score >= 0 && st->since_best >= st->patience) ||
           st->best_score >= st->stop_score || st->size == 0;
}

int swift_opt_n_layer(const sd_swift_state *st) { return st->L; }
int swift_opt_steps(const sd_swift_state *st) { return st->steps; }

static void to_full(const sd_swift_state *st, const uint8_t *b, uint8_t *mask) {
    memset(mask, 0, (size_t)2 * st->L);
    memcpy(mask + 2, b, (size_t)st->d);
}

static void random_set(sd_swift_state *st, uint8_t *b) {
    memset(b, 0, (size_t)st->d);
    for (int k = 0; k < st->size;) { /* a uniformly random size-subset by rejection */
        int i = rnd_below(st, st->d);
        if (!b[i]) b[i] = 1, k++;
    }
}

/* The best set with `swaps` skipped sub-layers swapped for running ones (random). */
static void mutate(sd_swift_state *st, uint8_t *b, int swaps) {
    memcpy(b, st->best, (size_t)st->d);
    if (st->size == 0 || st->size == st->d) return;
    for (int s = 0; s < swaps; s++) {
        int on, off;
        do on = rnd_below(st, st->d); while (!b[on]);
        do off = rnd_below(st, st->d); while (b[off]);
        b[on] = 0, b[off] = 1;
    }
}

static bool scored(const sd_swift_state *st, const uint8_t *b) {
    for (int i = 0; i < st->n_obs; i++) {
        const float *x = st->obs_x + (size_t)i * st->d;
        int j = 0;
        while (j < st->d && (x[j] != 0) == (b[j] != 0)) j++;
        if (j == st->d) return true;
    }
    return false;
}

static void add_cand(sd_swift_state *st, int *m, const uint8_t *b) {
    if (*m >= st->n_cand_cap || scored(st, b)) return;
    for (int i = 0; i < *m; i++) { /* no duplicates */
        const float *x = st->cand + (size_t)i * st->d;
        int j = 0;
        while (j < st->d && (x[j] != 0) == (b[j] != 0)) j++;
        if (j == st->d) return;
    }
    for (int j = 0; j < st->d; j++) st->cand[(size_t)*m * st->d + j] = b[j];
    (*m)++;
}

/* The GP's UCB choice among the best set's one-swap neighbours, random two-swap ones and random sets; false when
 * there is nothing to choose from (or the fit failed). */
static bool gp_propose(sd_swift_state *st, uint8_t *b) {
    if (st->n_obs < 1) return false;
    int m = 0;
    uint8_t *t = malloc((size_t)st->d);
    if (!t) return false;
    for (int on = 0; on < st->d; on++) /* every one-swap neighbour */
        for (int off = 0; off < st->d; off++) {
            if (!st->best[on] || st->best[off]) continue;
            memcpy(t, st->best, (size_t)st->d);
            t[on] = 0, t[off] = 1;
            add_cand(st, &m, t);
        }
    for (int i = 0; i < N_CAND_RANDOM / 2; i++) {
        mutate(st, t, 2);
        add_cand(st, &m, t);
        random_set(st, t);
        add_cand(st, &m, t);
    }
    bool ok = false;
    gp_model g;
    if (m > 0 && gp_fit(&g, st->obs_x, st->obs_y, st->n_obs, st->d, GP_ELL, GP_NOISE)) {
        int j = gp_ucb_pick(&g, st->cand, m, GP_KAPPA);
        gp_free(&g);
        if (j >= 0) {
            for (int i = 0; i < st->d; i++) b[i] = st->cand[(size_t)j * st->d + i] != 0;
            ok = true;
        }
    }
    free(t);
    return ok;
}

void swift_opt_propose(sd_swift_state *st, uint8_t *mask) {
    uint8_t *b = mask + 2; /* the candidate bits, in place in the full mask */
    memset(mask, 0, (size_t)2 * st->L);
    if (st->best_score < 0) { /* the starting set first */
        memcpy(b, st->best, (size_t)st->d);
        return;
    }
    if ((st->steps + 1) % st->beta == 0 && gp_propose(st, b)) return;
    for (int tries = 0; tries < 16; tries++) { /* random search, avoiding sets already scored */
        if (rnd(st) & 1) random_set(st, b);
        else mutate(st, b, 1 + (int)(rnd(st) & 1));
        if (!scored(st, b)) return;
    }
}

bool swift_opt_observe(sd_swift_state *st, const uint8_t *mask, float score) {
    const uint8_t *b = mask + 2;
    float *x = st->obs_x + (size_t)st->obs_next * st->d;
    for (int j = 0; j < st->d; j++) x[j] = b[j] ? 1.0f : 0.0f;
    st->obs_y[st->obs_next] = score;
    st->obs_next = (st->obs_next + 1) % OBS_CAP;
    if (st->n_obs < OBS_CAP) st->n_obs++;
    st->steps++;
    if (score > st->best_score) {
        st->best_score = score;
        memcpy(st->best, b, (size_t)st->d);
        st->since_best = 0;
        if (st->n_hist == HIST_CAP) { /* keep the latest */
            memmove(st->hist_step, st->hist_step + 1, (HIST_CAP - 1) * sizeof *st->hist_step);
            memmove(st->hist_score, st->hist_score + 1, (HIST_CAP - 1) * sizeof *st->hist_score);
            st->n_hist--;
        }
        st->hist_step[st->n_hist] = st->steps;
        st->hist_score[st->n_hist++] = score;
        return true;
    }
    st->since_best++;
    return false;
}

int sd_swift_state_best(const sd_swift_state *st, uint8_t *mask, float *matchness, int *steps) {
    if (!st) return 0;
    if (mask) to_full(st, st->best, mask);
    if (matchness) *matchness = st->best_score;
    if (steps) *steps = st->steps;
    int n = 0;
    for (int i = 0; i < st->d; i++) n += st->best[i] != 0;
    return n;
}

int sd_swift_state_history(const sd_swift_state *st, int *steps, float *scores, int cap) {
    if (!st) return 0;
    for (int i = 0; i < st->n_hist && i < cap; i++) {
        if (steps) steps[i] = st->hist_step[i];
        if (scores) scores[i] = st->hist_score[i];
    }
    return st->n_hist;
}

void sd_swift_state_describe(const sd_swift_state *st, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; st && i < st->d && n + 1 < cap; i++)
        if (st->best[i]) n += (size_t)snprintf(buf + n, cap - n, "%s%c%d", n ? " " : "", i % 2 ? 'm' : 'a', 1 + i / 2);
    if (n >= cap && cap) buf[cap - 1] = 0;
    if (cap && !buf[0]) snprintf(buf, cap, "(none)");
}

/* ------------------------------------------------------------------ file */
static const char *MAGIC = "specdec-swift-state 1";

sd_status sd_swift_state_save(const sd_swift_state *st, const char *path, sd_error *err) {
    if (!st || !path) return err_set(err, SD_ERR_ARG, "sd_swift_state_save: NULL argument");
    FILE *f = fopen(path, "w");
    if (!f) return err_set(err, SD_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "%s\nn_layer %d\nsize %d\nsteps %d\nsince_best %d\nrng %llu\nbest_score %.9g\nbest ", MAGIC, st->L,
            st->size, st->steps, st->since_best, (unsigned long long)st->rng, (double)st->best_score);
    for (int i = 0; i < st->d; i++) fputc(st->best[i] ? '1' : '0', f);
    fprintf(f, "\nobs %d\n", st->n_obs);
    for (int k = 0; k < st->n_obs; k++) { /* oldest first */
        int i = (st->obs_next - st->n_obs + k + OBS_CAP) % OBS_CAP;
        for (int j = 0; j < st->d; j++) fputc(st->obs_x[(size_t)i * st->d + j] != 0 ? '1' : '0', f);
        fprintf(f, " %.9g\n", (double)st->obs_y[i]);
    }
    fprintf(f, "history %d\n", st->n_hist);
    for (int i = 0; i < st->n_hist; i++) fprintf(f, "%d %.9g\n", st->hist_step[i], (double)st->hist_score[i]);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad) return err_set(err, SD_ERR_IO, "cannot write %s", path);
    return SD_OK;
}

static bool read_bits(FILE *f, uint8_t *b, int d) {
    char buf[1100];
    if (d >= (int)sizeof buf - 1 || fscanf(f, " %1099s", buf) != 1 || (int)strlen(buf) != d) return false;
    for (int i = 0; i < d; i++) {
        if (buf[i] != '0' && buf[i] != '1') return false;
        b[i] = buf[i] == '1';
    }
    return true;
}

sd_status sd_swift_state_load(const char *path, int n_layer, sd_swift_state **out, sd_error *err) {
    if (!path || !out) return err_set(err, SD_ERR_ARG, "sd_swift_state_load: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return err_set(err, SD_ERR_IO, "cannot open the skip-set file %s: %s", path, strerror(errno));
    char line[64] = {0};
    int L = 0, size = 0, steps = 0, since = 0, n_obs = 0;
    unsigned long long rng = 0;
    double best_score = 0;
    sd_swift_state *st = NULL;
    sd_status rc = SD_OK;
    if (!fgets(line, sizeof line, f) || strncmp(line, MAGIC, strlen(MAGIC)) != 0) {
        rc = err_set(err, SD_ERR_FORMAT, "%s is not a SWIFT skip-set file (no '%s' header)", path, MAGIC);
        goto done;
    }
    if (fscanf(f, " n_layer %d size %d steps %d since_best %d rng %llu best_score %lf best", &L, &size, &steps, &since,
               &rng, &best_score) != 6 ||
        L < 3 || L > 4096 || size < 0 || size > 2 * (L - 2) || steps < 0 || since < 0 || !isfinite(best_score)) {
        rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (bad header fields)", path);
        goto done;
    }
    if (L != n_layer) {
        rc = err_set(err, SD_ERR_ARG, "%s: the skip set is for a %d-layer model, this one has %d layers", path, L,
                     n_layer);
        goto done;
    }
    if ((rc = sd_swift_state_new(L, NULL, 0, &st, err))) goto done;
    st->size = size;
    if (!read_bits(f, st->best, st->d) || fscanf(f, " obs %d", &n_obs) != 1 || n_obs < 0 || n_obs > OBS_CAP) {
        rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (best set or observation count)", path);
        goto done;
    }
    int pop = 0;
    for (int i = 0; i < st->d; i++) pop += st->best[i];
    if (pop != size) {
        rc = err_set(err, SD_ERR_FORMAT, "%s: the best set skips %d sub-layers but the file says %d", path, pop, size);
        goto done;
    }
    for (int k = 0; k < n_obs; k++) {
        uint8_t b[1100];
        double y;
        if (!read_bits(f, b, st->d) || fscanf(f, " %lf", &y) != 1 || !isfinite(y)) {
            rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (observation %d)", path, k + 1);
            goto done;
        }
        for (int j = 0; j < st->d; j++) st->obs_x[(size_t)k * st->d + j] = b[j];
        st->obs_y[k] = (float)y;
    }
    /* the history: optional (files written before it end here); "history N", then N improvements "step score",
     * both rising, steps in 1..steps; nothing after it */
    int n_hist = 0;
    char word[16];
    if (fscanf(f, " %15s", word) == 1) {
        if (strcmp(word, "history") != 0 || fscanf(f, " %d", &n_hist) != 1 || n_hist < 0 || n_hist > HIST_CAP) {
            rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (history count)", path);
            goto done;
        }
        for (int k = 0; k < n_hist; k++) {
            double y;
            if (fscanf(f, " %d %lf", &st->hist_step[k], &y) != 2 || !isfinite(y) || st->hist_step[k] < 1 ||
                st->hist_step[k] > steps || (k > 0 && (st->hist_step[k] <= st->hist_step[k - 1] ||
                                                       (float)y <= st->hist_score[k - 1]))) {
                rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (history entry %d)", path, k + 1);
                goto done;
            }
            st->hist_score[k] = (float)y;
        }
        if (fscanf(f, " %15s", word) == 1) {
            rc = err_set(err, SD_ERR_FORMAT, "%s: damaged SWIFT skip-set file (text after the history)", path);
            goto done;
        }
    }
    st->n_hist = n_hist;
    st->n_obs = n_obs;
    st->obs_next = n_obs % OBS_CAP;
    st->steps = steps;
    st->since_best = since;
    st->rng = rng;
    st->best_score = (float)best_score;
done:
    fclose(f);
    if (rc) {
        sd_swift_state_free(st);
        return rc;
    }
    *out = st;
    return SD_OK;
}
