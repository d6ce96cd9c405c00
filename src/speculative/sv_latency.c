/* sv_latency: SV's latency table T(n, b) — seconds of one target verification pass where b sequences each verify n
 * drafted tokens (n + 1 positions). Measured on a scratch context (or given, or read from a file keyed by the model
 * and the thread count); live passes move the nearest cell (decayed); lookups interpolate in n and b. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "specdec.h"
#include "util/err.h"

enum { MAX_B = 16, MAX_N = 256 };

struct sd_sv_latency {
    int n_max, n_b;
    int b[MAX_B];
    double *t; /* [n_b][n_max + 1] */
};

sd_status sd_sv_latency_new(int n_max, const int *batch, int n_batch, const double *t, sd_sv_latency **out,
                            sd_error *err) {
    if (!batch || !t || !out) return err_set(err, SD_ERR_ARG, "sd_sv_latency_new: NULL argument");
    *out = NULL;
    if (n_max < 0 || n_max > MAX_N) return err_set(err, SD_ERR_ARG, "SV latency: n_max %d outside 0..%d", n_max, MAX_N);
    if (n_batch < 1 || n_batch > MAX_B)
        return err_set(err, SD_ERR_ARG, "SV latency: %d batch sizes (expected 1..%d)", n_batch, MAX_B);
    for (int i = 0; i < n_batch; i++)
        if (batch[i] < 1 || (i && batch[i] <= batch[i - 1]))
            return err_set(err, SD_ERR_ARG, "SV latency: batch sizes must be >= 1 and ascend");
    for (int i = 0; i < n_batch * (n_max + 1); i++)
        if (!(t[i] > 0) || !isfinite(t[i]))
            return err_set(err, SD_ERR_ARG, "SV latency: time %d is %g (expected a positive number of seconds)", i, t[i]);
    sd_sv_latency *l = calloc(1, sizeof *l);
    if (!l || !(l->t = malloc((size_t)n_batch * (n_max + 1) * sizeof *l->t))) {
        free(l);
        return err_set(err, SD_ERR_NOMEM, "out of memory for an SV latency table");
    }
    l->n_max = n_max;
    l->n_b = n_batch;
    memcpy(l->b, batch, (size_t)n_batch * sizeof *batch);
    memcpy(l->t, t, (size_t)n_batch * (n_max + 1) * sizeof *t);
    *out = l;
    return SD_OK;
}

void sd_sv_latency_free(sd_sv_latency *l) {
    if (!l) return;
    free(l->t);
    free(l);
}

int sd_sv_latency_n_max(const sd_sv_latency *l) { return l ? l->n_max : 0; }
int sd_sv_latency_max_batch(const sd_sv_latency *l) { return l && l->n_b > 0 ? l->b[l->n_b - 1] : 0; }

/* T of row r at mean drafts x (interpolated; past n_max: the last step's slope). */
static double row_time(const sd_sv_latency *l, int r, double x) {
    const double *t = l->t + (size_t)r * (l->n_max + 1);
    if (l->n_max == 0) return t[0] * (1 + x);
    if (x <= 0) return t[0];
    int i = (int)x;
    if (i >= l->n_max) i = l->n_max - 1;
    return t[i] + (x - i) * (t[i + 1] - t[i]);
}

double sd_sv_latency_time(const sd_sv_latency *l, int n_total, int b) {
    if (!l) return b + n_total; /* no table: positions as the cost */
    if (b < 1) b = 1;
    const double x = (double)n_total / b; /* mean drafted tokens per sequence */
    int r = 0;
    while (r + 1 < l->n_b && l->b[r + 1] <= b) r++;
    if (l->b[r] == b || r + 1 == l->n_b || b < l->b[0]) /* a row, or scaled linearly in b past the table's ends */
        return row_time(l, r, x) * b / l->b[r];
    const double f = (double)(b - l->b[r]) / (l->b[r + 1] - l->b[r]);
    return (1 - f) * row_time(l, r, x) + f * row_time(l, r + 1, x);
}

void sd_sv_latency_observe(sd_sv_latency *l, int n_total, int b, double seconds, double decay) {
    if (!l || b < 1 || !(seconds > 0)) return;
    int r = 0; /* the nearest batch size */
    for (int i = 1; i < l->n_b; i++)
        if (abs(l->b[i] - b) < abs(l->b[r] - b)) r = i;
    if (l->b[r] != b) return; /* only a measured batch size is refreshed */
    int n = (int)lround((double)n_total / b);
    if (n > l->n_max) return;
    double *c = l->t + (size_t)r * (l->n_max + 1) + n;
    *c = decay * *c + (1 - decay) * seconds;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sd_status sd_sv_latency_measure(const sd_model *target, int n_threads, int n_max, const int *batch, int n_batch,
                                int reps, sd_sv_latency **out, sd_error *err) {
    if (!target || !batch || !out) return err_set(err, SD_ERR_ARG, "sd_sv_latency_measure: NULL argument");
    if (n_batch < 1 || n_batch > MAX_B || n_max < 0 || n_max > MAX_N || reps < 1)
        return err_set(err, SD_ERR_ARG, "SV latency: bad measurement plan (%d batch sizes, n_max %d, %d reps)", n_batch,
                       n_max, reps);
    enum { PREFIX = 16 };
    const int bmax = batch[n_batch - 1];
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = PREFIX + n_max + 2;
    cp.n_seq = bmax;
    cp.n_batch = bmax * (n_max + 1) > PREFIX * bmax ? bmax * (n_max + 1) : PREFIX * bmax;
    cp.n_threads = n_threads;
    if (cp.n_batch > SD_MAX_BATCH) return err_set(err, SD_ERR_ARG, "SV latency: blocks of %d positions are too large", cp.n_batch);
    sd_ctx *ctx = NULL;
    sd_status st = sd_ctx_new(target, &cp, &ctx, err);
    if (st) return st;
    int32_t *tok = malloc((size_t)cp.n_batch * sizeof *tok), *seq = malloc((size_t)cp.n_batch * sizeof *seq);
    double *t = malloc((size_t)n_batch * (n_max + 1) * sizeof *t);
    sd_model_info info;
    sd_model_get_info(target, &info);
    float *lg = malloc((size_t)bmax * (n_max + 1) * info.n_vocab * sizeof *lg); /* [N][V] */
    if (!tok || !seq || !t || !lg) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory measuring SV latencies");
        goto done;
    }
    const int32_t bos = sd_token_bos(target) >= 0 ? sd_token_bos(target) : 1;
    for (int i = 0; i < cp.n_batch; i++) tok[i] = bos;
    /* prefixes of every sequence, once */
    for (int i = 0; i < PREFIX * bmax; i++) seq[i] = i / PREFIX;
    if ((st = sd_forward(ctx, &(sd_block){.n = PREFIX * bmax, .token = tok, .seq = seq}, &(sd_forward_args){0}, err)))
        goto done;
    for (int r = 0; r < n_batch; r++) {
        const int b = batch[r];
        for (int n = 0; n <= n_max; n++) {
            double best = 1e30;
            for (int rep = 0; rep < reps; rep++) {
                int N = 0;
                for (int sq = 0; sq < b; sq++)
                    for (int i = 0; i <= n; i++) seq[N++] = sq;
                double t0 = now_s();
                /* logits of every position, as a verification pass */
                sd_forward_args a = {0};
                uint8_t want[SD_MAX_BATCH];
                memset(want, 1, (size_t)N);
                a.want_logits = want;
                a.logits = lg;
                st = sd_forward(ctx, &(sd_block){.n = N, .token = tok, .seq = seq}, &a, err);
                double dt = now_s() - t0;
                for (int sq = 0; sq < b; sq++) sd_kv_truncate(ctx, sq, PREFIX, NULL);
                if (st) goto done;
                if (dt < best) best = dt;
            }
            t[(size_t)r * (n_max + 1) + n] = best > 0 ? best : 1e-9;
        }
    }
    st = sd_sv_latency_new(n_max, batch, n_batch, t, out, err);
done:
    free(tok), free(seq), free(t), free(lg);
    sd_ctx_free(ctx);
    return st;
}

/* The file: "specdec-sv-latency 2", "model CHECK LAYERS EMBD VOCAB type WEIGHT_TYPE threads N", "n_max N",
 * "batch B...", then one line "t B T0 T1 ... Tn_max" per batch size. (Version 1 had no weight type: such a file is
 * refused as being for another model, so that a caller measures again.) */
sd_status sd_sv_latency_save(const sd_sv_latency *l, const sd_model *target, int n_threads, const char *path,
                             sd_error *err) {
    if (!l || !target || !path) return err_set(err, SD_ERR_ARG, "sd_sv_latency_save: NULL argument");
    sd_sv_target_id id;
    sd_sv_target_id_of(target, &id);
    sd_model_info info;
    sd_model_get_info(target, &info);
    FILE *f = fopen(path, "w");
    if (!f) return err_set(err, SD_ERR_IO, "%s: cannot write the SV latency table", path);
    fprintf(f, "specdec-sv-latency 2\nmodel %08x %d %d %d type %s threads %d\nn_max %d\nbatch", id.check, id.n_layer,
            id.n_embd, id.n_vocab, info.weight_type, n_threads, l->n_max);
    for (int r = 0; r < l->n_b; r++) fprintf(f, " %d", l->b[r]);
    fprintf(f, "\n");
    for (int r = 0; r < l->n_b; r++) {
        fprintf(f, "t %d", l->b[r]);
        for (int n = 0; n <= l->n_max; n++) fprintf(f, " %.9g", l->t[(size_t)r * (l->n_max + 1) + n]);
        fprintf(f, "\n");
    }
    if (fclose(f)) return err_set(err, SD_ERR_IO, "%s: write failed", path);
    return SD_OK;
}

sd_status sd_sv_latency_load(const sd_model *target, int n_threads, const char *path, sd_sv_latency **out,
                             sd_error *err) {
    if (!target || !path || !out) return err_set(err, SD_ERR_ARG, "sd_sv_latency_load: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return err_set(err, SD_ERR_IO, "%s: cannot open the SV latency table", path);
    sd_sv_target_id id, fid;
    sd_sv_target_id_of(target, &id);
    sd_model_info info;
    sd_model_get_info(target, &info);
    int ver = 0, thr = 0, n_max = -1, nb = 0, b[MAX_B];
    char type[32] = "";
    double *t = NULL;
    sd_status st = SD_ERR_FORMAT;
    if (fscanf(f, "specdec-sv-latency %d model %x %d %d %d", &ver, &fid.check, &fid.n_layer, &fid.n_embd,
               &fid.n_vocab) != 5 || (ver != 1 && ver != 2))
        goto bad;
    if ((ver == 2 && fscanf(f, " type %31s", type) != 1) || fscanf(f, " threads %d n_max %d batch", &thr, &n_max) != 2 ||
        n_max < 0 || n_max > MAX_N)
        goto bad;
    while (nb < MAX_B && fscanf(f, " %d", &b[nb]) == 1) nb++;
    if (nb < 1 || !(t = malloc((size_t)nb * (n_max + 1) * sizeof *t))) goto bad;
    for (int r = 0; r < nb; r++) {
        int br;
        if (fscanf(f, " t %d", &br) != 1 || br != b[r]) goto bad;
        for (int n = 0; n <= n_max; n++)
            if (fscanf(f, " %lf", &t[(size_t)r * (n_max + 1) + n]) != 1) goto bad;
    }
    fclose(f);
    if (memcmp(&id, &fid, sizeof id) || strcmp(type, info.weight_type) || thr != n_threads) {
        free(t);
        return err_set(err, SD_ERR_ARG, "%s: the SV latency table is for another model, weight type or thread count "
                       "(%s weights, %d threads)", path, type[0] ? type : "unknown", thr);
    }
    st = sd_sv_latency_new(n_max, b, nb, t, out, err);
    free(t);
    if (st) err_prefix(err, "%s: ", path);
    return st;
bad:
    fclose(f);
    free(t);
    return err_set(err, st, "%s: not an SV latency table (written by specdec)", path);
}
