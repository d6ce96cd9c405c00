/* sv: the SV profile (beta over equal-count bins of S and A), the indicators and the verification-length rule. */
#include "speculative/sv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/exit_heads.h"
#include "model/model.h"
#include "util/err.h"

struct sd_sv_profile {
    sd_sv_target_id target;
    int n_s, n_a;
    float s_edges[SD_SV_MAX_BINS], a_edges[SD_SV_MAX_BINS];
    float *beta; /* [n_s][n_a] */
    int *count;  /* [n_s][n_a] */
};

void spv_softmax(const float *logits, int V, float *p) {
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += p[v] = expf(logits[v] - mx);
    const float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int v = 0; v < V; v++) p[v] *= inv;
}

void spv_indicators(const float *pd, const float *pc, int V, int32_t x, float *s, float *a) {
    double ov = 0;
    if (pd) {
        for (int v = 0; v < V; v++) ov += pd[v] < pc[v] ? pd[v] : pc[v];
    } else {
        ov = pc[x]; /* one-hot: min(1[v == x], pc[v]) */
    }
    const double d = pd ? pd[x] : 1.0;
    *s = (float)(ov > 1 ? 1 : ov);
    *a = d > 0 ? (float)(pc[x] >= d ? 1.0 : pc[x] / d) : 1.0f;
}

/* ------------------------------------------------------------------ target identity */
void sd_sv_target_id_of(const sd_model *m, sd_sv_target_id *id) {
    memset(id, 0, sizeof *id);
    if (!m) return;
    id->check = exit_heads_model_check(m);
    id->n_layer = m->hp.n_layer;
    id->n_embd = m->hp.n_embd;
    id->n_vocab = m->hp.n_vocab;
}

static sd_status check_target(const sd_sv_target_id *pid, const sd_model *target, sd_error *err) {
    sd_sv_target_id id;
    sd_sv_target_id_of(target, &id);
    if (memcmp(&id, pid, sizeof id))
        return err_set(err, SD_ERR_ARG,
                       "the SV profile was made for another target (profile: %d layers, dim %d, vocab %d, check "
                       "%08x; this target %s: %d layers, dim %d, vocab %d, check %08x): profile this target with "
                       "`specdec profile sv`",
                       pid->n_layer, pid->n_embd, pid->n_vocab, pid->check, target->path ? target->path : "",
                       id.n_layer, id.n_embd, id.n_vocab, id.check);
    return SD_OK;
}

sd_status sd_sv_profile_check(const sd_sv_profile *p, const sd_model *target, sd_error *err) {
    if (!p || !target) return err_set(err, SD_ERR_ARG, "sd_sv_profile_check: NULL argument");
    return check_target(&p->target, target, err);
}

/* ------------------------------------------------------------------ the table */
static sd_status check_edges(const char *what, const float *e, int n, sd_error *err) {
    if (n < 1 || n > SD_SV_MAX_BINS) return err_set(err, SD_ERR_ARG, "SV profile: %d %s bins (expected 1..%d)", n, what, SD_SV_MAX_BINS);
    if (n > 1 && !e) return err_set(err, SD_ERR_ARG, "SV profile: no %s bin edges", what);
    for (int i = 0; i + 1 < n; i++) {
        if (!isfinite(e[i])) return err_set(err, SD_ERR_ARG, "SV profile: %s edge %d is not a number", what, i);
        if (i > 0 && !(e[i] > e[i - 1]))
            return err_set(err, SD_ERR_ARG, "SV profile: %s bin edges must ascend (%g then %g)", what, e[i - 1], e[i]);
    }
    return SD_OK;
}

sd_status sd_sv_profile_new(const sd_model *target, const sd_sv_profile_desc *d, sd_sv_profile **out, sd_error *err) {
    if (!d || !out) return err_set(err, SD_ERR_ARG, "sd_sv_profile_new: NULL argument");
    *out = NULL;
    sd_status st;
    if ((st = check_edges("S", d->s_edges, d->n_s, err)) || (st = check_edges("A", d->a_edges, d->n_a, err))) return st;
    if (!d->beta) return err_set(err, SD_ERR_ARG, "SV profile: no beta table");
    const int nc = d->n_s * d->n_a;
    for (int i = 0; i < nc; i++) {
        if (!(d->beta[i] >= 0 && d->beta[i] <= 1))
            return err_set(err, SD_ERR_ARG, "SV profile: beta[%d][%d] = %g is not a probability", i / d->n_a,
                           i % d->n_a, d->beta[i]);
        if (d->count && d->count[i] < 0)
            return err_set(err, SD_ERR_ARG, "SV profile: count[%d][%d] = %d is negative", i / d->n_a, i % d->n_a,
                           d->count[i]);
    }
    if (target && (st = check_target(&d->target, target, err))) return st;
    sd_sv_profile *p = calloc(1, sizeof *p);
    if (!p || !(p->beta = malloc((size_t)nc * sizeof *p->beta)) || !(p->count = calloc((size_t)nc, sizeof *p->count))) {
        sd_sv_profile_free(p);
        return err_set(err, SD_ERR_NOMEM, "out of memory for an SV profile");
    }
    p->target = d->target;
    p->n_s = d->n_s;
    p->n_a = d->n_a;
    if (d->n_s > 1) memcpy(p->s_edges, d->s_edges, (size_t)(d->n_s - 1) * sizeof(float));
    if (d->n_a > 1) memcpy(p->a_edges, d->a_edges, (size_t)(d->n_a - 1) * sizeof(float));
    memcpy(p->beta, d->beta, (size_t)nc * sizeof *p->beta);
    if (d->count) memcpy(p->count, d->count, (size_t)nc * sizeof *p->count);
    *out = p;
    return SD_OK;
}

void sd_sv_profile_get(const sd_sv_profile *p, sd_sv_profile_desc *d) {
    *d = (sd_sv_profile_desc){p->target, p->n_s, p->n_a, p->s_edges, p->a_edges, p->beta, p->count};
}

void sd_sv_profile_free(sd_sv_profile *p) {
    if (!p) return;
    free(p->beta);
    free(p->count);
    free(p);
}

/* The bin of x: edges e[0..n-1) split the line into n bins. */
static int bin_of(const float *e, int n, float x) {
    int lo = 0, hi = n - 1; /* first i with x < e[i], else n - 1 */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (x < e[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

float sd_sv_profile_beta(const sd_sv_profile *p, float s, float a) {
    return p->beta[bin_of(p->s_edges, p->n_s, s) * p->n_a + bin_of(p->a_edges, p->n_a, a)];
}

/* ------------------------------------------------------------------ building */
static int cmp_float(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* Equal-count edges of v[0..n) into at most nb bins: the i-th edge is the value at rank i n / nb (an edge equal to
 * the previous one is skipped: ties stay in one bin). Returns the bin count. */
static int equal_count_edges(const float *v, int n, int nb, float *edges, float *sorted) {
    memcpy(sorted, v, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_float);
    int m = 0;
    for (int i = 1; i < nb; i++) {
        int r = (int)((long long)i * n / nb);
        if (r <= 0 || r >= n) continue;
        float e = sorted[r];
        if (e <= sorted[0] || (m > 0 && !(e > edges[m - 1]))) continue;
        edges[m++] = e;
    }
    return m + 1;
}

static double h2(double p) { return p <= 0 || p >= 1 ? 0 : -(p * log2(p) + (1 - p) * log2(1 - p)); }

sd_status sd_sv_profile_build(const sd_model *target, const float *s, const float *a, const uint8_t *accepted, int n,
                              int n_s, int n_a, sd_sv_profile **out, sd_sv_profile_info *info, sd_error *err) {
    if (!s || !a || !accepted || !out) return err_set(err, SD_ERR_ARG, "sd_sv_profile_build: NULL argument");
    *out = NULL;
    if (n < 1) return err_set(err, SD_ERR_ARG, "SV profile: no recorded tokens (did the drafts reach verification?)");
    if (n_s < 1 || n_s > SD_SV_MAX_BINS || n_a < 1 || n_a > SD_SV_MAX_BINS)
        return err_set(err, SD_ERR_ARG, "SV profile: %d x %d bins (expected 1..%d each)", n_s, n_a, SD_SV_MAX_BINS);
    float se[SD_SV_MAX_BINS], ae[SD_SV_MAX_BINS];
    float *sorted = malloc((size_t)n * sizeof *sorted);
    double *sum = calloc((size_t)SD_SV_MAX_BINS * SD_SV_MAX_BINS, sizeof *sum);
    int *cnt = calloc((size_t)SD_SV_MAX_BINS * SD_SV_MAX_BINS, sizeof *cnt);
    float *beta = malloc((size_t)SD_SV_MAX_BINS * SD_SV_MAX_BINS * sizeof *beta);
    if (!sorted || !sum || !cnt || !beta) {
        free(sorted), free(sum), free(cnt), free(beta);
        return err_set(err, SD_ERR_NOMEM, "out of memory building an SV profile");
    }
    const int ns = equal_count_edges(s, n, n_s, se, sorted), na = equal_count_edges(a, n, n_a, ae, sorted);
    free(sorted);
    int n_acc = 0;
    for (int i = 0; i < n; i++) {
        int c = bin_of(se, ns, s[i]) * na + bin_of(ae, na, a[i]);
        cnt[c]++;
        sum[c] += accepted[i] != 0;
        n_acc += accepted[i] != 0;
    }
    const double mean = (double)n_acc / n;
    double hg = 0;
    for (int c = 0; c < ns * na; c++)
        if (cnt[c]) hg += (double)cnt[c] / n * h2(sum[c] / cnt[c]);
    /* beta; an empty bin: the count-weighted mean of the non-empty bins at the smallest (Manhattan) distance */
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < na; j++) {
            if (cnt[i * na + j]) {
                beta[i * na + j] = (float)(sum[i * na + j] / cnt[i * na + j]);
                continue;
            }
            double bs = 0, bc = 0;
            for (int r = 1; r < ns + na && bc == 0; r++)
                for (int i2 = 0; i2 < ns; i2++)
                    for (int j2 = 0; j2 < na; j2++)
                        if (abs(i2 - i) + abs(j2 - j) == r && cnt[i2 * na + j2]) {
                            bs += sum[i2 * na + j2];
                            bc += cnt[i2 * na + j2];
                        }
            beta[i * na + j] = bc > 0 ? (float)(bs / bc) : (float)mean;
        }
    sd_sv_profile_desc d = {.n_s = ns, .n_a = na, .s_edges = se, .a_edges = ae, .beta = beta, .count = cnt};
    sd_sv_target_id_of(target, &d.target);
    sd_status st = sd_sv_profile_new(NULL, &d, out, err);
    if (info) {
        info->n_records = n;
        info->n_accepted = n_acc;
        info->h_accept = h2(mean);
        info->h_given = hg;
        info->info_gain = info->h_accept > 0 ? (info->h_accept - hg) / info->h_accept : 0;
    }
    free(sum), free(cnt), free(beta);
    return st;
}

/* ------------------------------------------------------------------ the verification length */
/* Goodput of verifying `total` drafted tokens over b sequences with expected tokens `tokens` per pass. */
static double goodput(const sd_sv_latency *l, double tokens, int total, int b) {
    double t = sd_sv_latency_time(l, total, b);
    return t > 0 ? tokens / t : tokens * 1e30;
}

double sd_sv_select(const sd_sv_latency *l, const float *beta, int ld, const int *k, int m, int fixed_seqs,
                    int fixed_drafts, double fixed_tokens, int *n) {
    /* start: one drafted token per sequence that has any (each sequence emits >= 1 token whatever) */
    double tokens = fixed_tokens, *prod = malloc((size_t)(m > 0 ? m : 1) * sizeof *prod);
    int total = fixed_drafts, b = fixed_seqs + m, steps = 0;
    int *order = malloc((size_t)(m > 0 ? m : 1) * sizeof *order * 257);
    if (!prod || !order) { /* out of memory: verify everything */
        for (int i = 0; i < m; i++) n[i] = k[i];
        free(prod), free(order);
        return 0;
    }
    for (int i = 0; i < m; i++) {
        n[i] = k[i] > 0 ? 1 : 0;
        prod[i] = k[i] > 0 ? beta[(size_t)i * ld] : 1;
        tokens += 1 + (k[i] > 0 ? prod[i] : 0);
        total += n[i];
    }
    /* greedy: the next drafted token adding most expected accepted tokens (the products only shrink along a
     * sequence, so for each total this is the best allocation); the total with the best goodput is kept */
    double best = goodput(l, tokens, total, b);
    int best_steps = 0;
    for (;;) {
        int bi = -1;
        double bg = -1;
        for (int i = 0; i < m; i++)
            if (n[i] < k[i]) {
                double g = prod[i] * beta[(size_t)i * ld + n[i]];
                if (g > bg) bg = g, bi = i;
            }
        if (bi < 0 || steps >= 256 * (m > 0 ? m : 1)) break;
        prod[bi] = bg;
        n[bi]++;
        total++;
        tokens += bg;
        order[steps++] = bi;
        double gp = goodput(l, tokens, total, b);
        if (gp > best * (1 + 1e-12)) best = gp, best_steps = steps;
    }
    for (int s = steps; s > best_steps; s--) n[order[s - 1]]--; /* back to the best total */
    free(prod), free(order);
    return best;
}

/* ------------------------------------------------------------------ drafters' logits (spec.h) */
#include "speculative/spec.h"

void draft_tree_keep_logits(draft_tree *t, int i, const float *logits, int V) {
    if (!t->dlogits) return;
    float *row = t->dlogits + (size_t)i * t->dlogits_V;
    const int c = V < t->dlogits_V ? V : t->dlogits_V;
    memcpy(row, logits, (size_t)c * sizeof *row);
    for (int v = c; v < t->dlogits_V; v++) row[v] = -INFINITY;
    t->has_dlogits = true;
}
