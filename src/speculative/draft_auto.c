/* draft_auto: --spec auto. A pool of candidate drafters built with the ordinary constructors — n-gram lookup, the
 * draft model, early exit (one drafter whose depth is set per round) — plus plain decoding; at every round
 * boundary the candidate (family, gamma) with the most expected tokens per second drafts the next round
 * (auto_choose.c has the decision). Greedy output stays plain greedy and sampling the target distribution: each
 * round is an ordinary round of the chosen drafter, and the choice depends on the history only.
 *
 * Acceptance of every family, running or not, from what the rounds compute anyway; observed at every position p of
 * the history (not only where the running method's rounds started, which would favour the others: its rounds start
 * after its own misses) as the number of drafts a chain from p would have had accepted:
 *  - n-gram: its lookup at each position (cheap), compared with the tokens emitted after it;
 *  - draft model: its greedy prediction at every position (argmax of its logits where it read hist[q]) equals
 *    hist[q + 1] — for a greedy chain the accepted length from p is exactly the run of such matches from p. Its
 *    cache is kept in step with the history every round (a block forward over the tokens it has not seen, logits of
 *    every position), which is also what lets it take over at any round exactly;
 *  - early exit at depth E: DEL's shadow tokens, argmax LMHead(h^E) of the committed positions of each round's
 *    verification block, from the pass's hidden states (the plan asks for them; with early exit running at depth
 *    E0, the depths >= E0 are there; shallower ones miss that round: their observations are dropped).
 * Costs: T(n) from the latency table (sd_spec_params.sv_latency; without one a linear guess rescaled by the first
 * measured pass), the draft model's step and early exit's layers from their sizes at first, then from the measured
 * rounds (decayed, when the session runs alone). The estimators' time (catch-up forwards, shadow tokens, lookups)
 * is t_aux. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctrl/auto_choose.h"
#include "model/model.h"
#include "speculative/accept.h"
#include "speculative/registry.h"
#include "speculative/spec.h"
#include "util/err.h"

/* INIT_STARTS: prompt positions observed as round starts at the beginning, worth INIT_WEIGHT rounds in all */
enum { MAX_FAM = SD_AUTO_MAX_CANDS, RING = 512, N_STARTS = 128, INIT_STARTS = 32, INIT_WEIGHT = 2 };

typedef enum { FAM_NONE, FAM_NGRAM, FAM_DRAFT, FAM_EXIT } fam_kind;

typedef struct fam {
    fam_kind kind;
    int E;           /* early exit: its depth */
    int32_t *pred;   /* [RING] model families: greedy prediction of the drafter at position q (index q % RING) */
    int32_t *tag;    /* [RING] the position pred holds (-1: none) */
    int frontier;    /* positions < frontier have all the predictions they will get */
    int last_run;    /* the round it last ran (probes) */
    sd_auto_cand_stats st;
} fam;

/* A start p (a position of the history: a chain drafted from hist[0 .. p]) whose observations are not all in yet. */
typedef struct start {
    int p;
    double w;                /* the weight of its observations (a prompt position: INIT_WEIGHT / INIT_STARTS) */
    unsigned open;           /* bit per family still to observe */
    int32_t ng[AC_GMAX];     /* the n-gram lookup's continuation of hist[0 .. p] */
    int ng_k;
} start;

typedef struct auto_drafter {
    drafter base;
    sd_ctx *target;
    int seq, L, V, D, G;
    const sd_exit_heads *heads;
    sd_sv_latency *lat;
    drafter *ngram, *model, *exit;
    ctrl *keep;                 /* the sub-drafters' controller: every token the round's gamma allows */
    fam fams[MAX_FAM];
    ac_family af[MAX_FAM];
    int n_fam, cur, cur_g, round, probe;
    ac_reason why;
    double decay, hyst;
    double T[AC_GMAX + 1];      /* seconds of a verification pass over n drafts */
    bool t_measured;            /* T holds a measured scale (a table, or a live pass) */
    start starts[N_STARTS];
    int s_head, s_n;
    /* the round */
    int n0, k, hl_begin;
    const float *embd;          /* the plan's states at depth hl_begin ([k + 1][D]) when hl_begin > 0 */
    float *hl;                  /* [L][gmax + 1][D] the verification pass's states after every layer it ran */
    bool want_shadows;
    float *sh_in, *sh_logits;   /* [gmax + 1][D], [gmax + 1][V] */
    draft_tree scratch;         /* the n-gram lookup's proposal */
    int32_t *scratch_tok, *scratch_par; /* [G] */
    double draft_s, verify_s;   /* the round's measured times (timed) */
    bool timed;
} auto_drafter;

typedef struct auto_ctrl {
    ctrl base;
    auto_drafter *a;
} auto_ctrl;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fam_of(const auto_drafter *a, fam_kind k) {
    for (int i = 0; i < a->n_fam; i++)
        if (a->fams[i].kind == k) return i;
    return -1;
}

/* ------------------------------------------------------------------ predictions and observations */
static void pred_set(fam *f, int pos, int32_t x) {
    f->pred[pos % RING] = x;
    f->tag[pos % RING] = pos;
}

/* The draft model's prediction at pos (draft_pred_cb). */
static void on_draft_pred(void *user, int pos, const float *logits, int V) {
    auto_drafter *a = user;
    int i = fam_of(a, FAM_DRAFT);
    if (i >= 0 && pos >= 0) pred_set(&a->fams[i], pos, accept_argmax(logits, V));
}

/* Family f's observation at start s over hist[0 .. n): 1 (L and kp set), 0 (not known yet), -1 (never: a gap). */
static int observe_run(const auto_drafter *a, const fam *f, const start *s, const int32_t *hist, int n, int *L, int *kp) {
    if (f->kind == FAM_NGRAM) {
        *kp = s->ng_k;
        for (int j = 0; j < s->ng_k; j++) {
            if (s->p + 1 + j >= n) return 0;
            if (hist[s->p + 1 + j] != s->ng[j]) return *L = j, 1;
        }
        return *L = s->ng_k, 1;
    }
    *kp = AC_GMAX;
    for (int j = 0; j < a->G; j++) {
        const int q = s->p + j;
        if (q + 1 >= n || q >= f->frontier) return 0;
        if (f->tag[q % RING] != q) return -1;
        if (f->pred[q % RING] != hist[q + 1]) return *L = j, 1;
    }
    return *L = a->G, 1;
}

/* Every open observation that the history now decides goes into its family's statistics. */
static void resolve(auto_drafter *a, const int32_t *hist, int n) {
    for (int i = 0; i < a->s_n; i++) {
        start *s = &a->starts[(a->s_head + i) % N_STARTS];
        for (int f = 0; f < a->n_fam && s->open; f++) {
            if (!(s->open >> f & 1)) continue;
            int L = 0, kp = 0, r = observe_run(a, &a->fams[f], s, hist, n, &L, &kp);
            if (r == 0) continue;
            s->open &= ~(1u << f);
            if (r > 0) ac_stats_observe(&a->af[f].st, L, kp, a->decay, s->w);
        }
    }
    while (a->s_n > 0 && !a->starts[a->s_head].open) a->s_head = (a->s_head + 1) % N_STARTS, a->s_n--;
}

/* A start at p (hist[0 .. p] known): the n-gram lookup's proposal now, the other families' later. */
static void push_start(auto_drafter *a, int32_t *hist, int p, double w) {
    if (a->s_n == N_STARTS) a->s_head = (a->s_head + 1) % N_STARTS, a->s_n--; /* the oldest is given up */
    start *s = &a->starts[(a->s_head + a->s_n++) % N_STARTS];
    s->p = p;
    s->w = w;
    s->open = 0;
    s->ng_k = 0;
    for (int f = 0; f < a->n_fam; f++)
        if (a->fams[f].kind != FAM_NONE) s->open |= 1u << f;
    if (a->ngram) {
        double t0 = now_s();
        for (int i = 0; i < a->G; i++) a->scratch.parent[i] = i - 1;
        int k = a->ngram->draft(a->ngram, hist, p + 1, a->G, a->keep, &a->scratch, NULL);
        s->ng_k = k > 0 ? k : 0;
        memcpy(s->ng, a->scratch.token, (size_t)s->ng_k * sizeof *s->ng);
        a->base.t_aux += now_s() - t0;
    }
}

/* Early exit's shadow tokens: each exit family's prediction at the round's committed block positions 0..acc from
 * the verification pass's states (depths below the plan's first layer are not there). */
static void exit_shadows(auto_drafter *a, int n_pos) {
    const int D = a->D, V = a->V;
    for (int f = 0; f < a->n_fam; f++) {
        fam *fm = &a->fams[f];
        if (fm->kind != FAM_EXIT) continue;
        const int l = fm->E;
        const float *src = NULL;
        if (l == a->hl_begin && a->embd) src = a->embd;
        else if (l > a->hl_begin) src = a->hl + (size_t)(l - 1 - a->hl_begin) * (a->k + 1) * D;
        if (!src) continue;
        memcpy(a->sh_in, src, (size_t)n_pos * D * sizeof(float));
        if (sd_lm_head(a->target, a->sh_in, n_pos, l, a->heads, a->sh_logits, NULL) != SD_OK) continue;
        for (int i = 0; i < n_pos; i++) pred_set(fm, a->n0 - 1 + i, accept_argmax(a->sh_logits + (size_t)i * V, V));
    }
}

/* ------------------------------------------------------------------ the choice */
static void choose(auto_drafter *a) {
    ac_pick pk;
    if (a->probe > 0 && a->round > 0 && a->round % a->probe == 0) { /* the family run least recently */
        int f = -1;
        for (int i = 0; i < a->n_fam; i++)
            if (a->fams[i].kind != FAM_NONE && !a->af[i].off && (f < 0 || a->fams[i].last_run < a->fams[f].last_run)) f = i;
        pk.fam = f;
        if (f >= 0) ac_best_g(&a->af[f], a->T, a->G, &pk.g);
        pk.why = AC_PROBE;
    } else {
        pk = ac_choose(a->af, a->n_fam, a->T, a->G, a->cur, a->hyst);
    }
    if (pk.fam < 0) /* every candidate is off (a failed catch-up): plain steps on whichever family is current */
        pk = (ac_pick){fam_of(a, FAM_NONE) >= 0 ? fam_of(a, FAM_NONE) : a->cur >= 0 ? a->cur : 0, 0, 0, AC_BEST};
    a->cur = pk.fam;
    a->cur_g = pk.g;
    a->why = pk.why;
}

/* ------------------------------------------------------------------ the drafter */
static sd_status ad_begin(drafter *d, const int32_t *hist, int n, sd_error *err) {
    auto_drafter *a = (auto_drafter *)d;
    if (a->model) {
        double t0 = now_s();
        sd_status st = a->model->begin(a->model, hist, n, err); /* the prompt, with its predictions */
        a->base.t_aux += now_s() - t0;
        if (st) return st;
        a->fams[fam_of(a, FAM_DRAFT)].frontier = drafter_model_len(a->model);
    }
    for (int f = 0; f < a->n_fam; f++)
        if (a->fams[f].kind == FAM_EXIT) a->fams[f].frontier = n - 1; /* the prompt has no shadow tokens */
    /* the prompt's last positions as round starts: first statistics for the lookup and the draft model */
    for (int p = n - 1 - INIT_STARTS > 0 ? n - 1 - INIT_STARTS : 1; p < n - 1; p++)
        push_start(a, (int32_t *)hist, p, (double)INIT_WEIGHT / INIT_STARTS); /* the prompt is not the answer */
    resolve(a, hist, n);
    choose(a);
    return SD_OK;
}

/* The round's drafting starts: the chosen family drafts (the draft model one forward at a time). */
static int ad_start(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, fwd_req *r, int *k,
                    sd_error *err) {
    auto_drafter *a = (auto_drafter *)d;
    (void)c;
    a->n0 = n;
    a->k = 0;
    const fam *f = &a->fams[a->cur];
    if (max > a->cur_g) max = a->cur_g;
    *k = 0;
    t->onehot = true;
    if (max < 1) return 0;
    switch (f->kind) {
    case FAM_NONE: return 0;
    case FAM_NGRAM: {
        int kk = a->ngram->draft(a->ngram, hist, n, max, a->keep, t, err);
        *k = kk > 0 ? kk : 0;
        return 0;
    }
    case FAM_DRAFT: return a->model->draft_start(a->model, hist, n, max, a->keep, t, r, k, err);
    case FAM_EXIT: {
        drafter_exit_set_depth(a->exit, f->E);
        int kk = a->exit->draft(a->exit, hist, n, max, a->keep, t, err);
        if (kk < 0) return -1;
        *k = kk;
        return 0;
    }
    }
    return 0;
}

static int ad_next(drafter *d, fwd_req *r, int *k, sd_error *err) {
    auto_drafter *a = (auto_drafter *)d;
    return a->model->draft_next(a->model, r, k, err);
}

/* The round alone (every forward run as it comes). */
static int ad_draft(drafter *d, int32_t *hist, int n, int max, ctrl *c, draft_tree *t, sd_error *err) {
    auto_drafter *a = (auto_drafter *)d;
    fwd_req r;
    int k = 0, st = ad_start(d, hist, n, max, c, t, &r, &k, err);
    while (st == 1) {
        fwd_req_run(a->model->draft_ctx, &r);
        st = ad_next(d, &r, &k, err);
    }
    return st < 0 ? -1 : k;
}

static sd_status ad_plan(drafter *d, const int32_t *hist, int n, const draft_tree *t, int k, verify_plan *vp,
                         sd_error *err) {
    auto_drafter *a = (auto_drafter *)d;
    *vp = (verify_plan){0};
    a->k = k;
    if (a->fams[a->cur].kind == FAM_EXIT && k > 0) {
        sd_status st = a->exit->plan(a->exit, hist, n, t, k, vp, err);
        if (st) return st;
    }
    a->hl_begin = vp->layer_begin;
    a->embd = vp->layer_begin > 0 ? vp->embd : NULL;
    /* the states for the exit families' shadow tokens (when some depth is at or after the plan's first layer) */
    a->want_shadows = false;
    for (int f = 0; f < a->n_fam; f++)
        a->want_shadows |= a->fams[f].kind == FAM_EXIT && a->fams[f].E >= a->hl_begin && !a->af[f].off;
    if (a->want_shadows && !vp->hidden_layers) vp->hidden_layers = a->hl;
    return SD_OK;
}

static void ad_verified(drafter *d, const float *logits, int k) {
    auto_drafter *a = (auto_drafter *)d;
    if (a->fams[a->cur].kind == FAM_EXIT && a->exit->verified) a->exit->verified(a->exit, logits, k);
}

static void ad_timed(drafter *d, double draft_s, double verify_s) {
    auto_drafter *a = (auto_drafter *)d;
    a->draft_s = draft_s;
    a->verify_s = verify_s;
    a->timed = true;
}

/* The measured round refreshes the costs: T(k) (full passes only), the running family's cost per drafted token
 * and early exit's share of a pass. */
static void learn_costs(auto_drafter *a) {
    if (!a->timed) return;
    a->timed = false;
    const int k = a->k, f = a->cur;
    const double w = 0.8;
    ac_family *af = &a->af[f];
    if (a->hl_begin == 0 && a->verify_s > 0) {
        if (!a->t_measured) { /* the first measured pass gives the guessed table its scale */
            const double s = a->verify_s / a->T[k];
            for (int i = 0; i <= a->G; i++) a->T[i] *= s;
            for (int i = 0; i < a->n_fam; i++) a->af[i].c *= s;
            a->t_measured = true;
        }
        a->T[k] = w * a->T[k] + (1 - w) * a->verify_s;
        for (int i = k + 1; i <= a->G; i++) /* T does not fall with more drafts */
            if (a->T[i] < a->T[i - 1]) a->T[i] = a->T[i - 1];
        for (int i = k - 1; i >= 0; i--)
            if (a->T[i] > a->T[i + 1]) a->T[i] = a->T[i + 1];
        if (a->lat) sd_sv_latency_observe(a->lat, k, 1, a->verify_s, 0.9);
    }
    if (!a->t_measured) return;
    if (a->fams[f].kind != FAM_NONE && a->draft_s > 0)
        af->c = w * af->c + (1 - w) * a->draft_s / (k + af->x > 0 ? k + af->x : 1);
    if (a->fams[f].kind == FAM_EXIT && a->hl_begin > 0 && a->verify_s > 0) {
        double v = a->verify_s / ac_verify_time(a->T, a->G, k);
        af->v = w * af->v + (1 - w) * (v < 1 ? v : 1);
    }
}

static void ad_on_verified(drafter *d, const int32_t *hist, int n, int acc) {
    auto_drafter *a = (auto_drafter *)d;
    fam *cf = &a->fams[a->cur];
    drafter *sub = cf->kind == FAM_DRAFT ? a->model : cf->kind == FAM_EXIT ? a->exit : NULL;
    if (sub && sub->on_verified) sub->on_verified(sub, hist, n, acc);
    /* the running family's round */
    cf->st.rounds++;
    cf->st.best += a->why == AC_BEST;
    cf->st.held += a->why == AC_HELD;
    cf->st.probe += a->why == AC_PROBE;
    cf->st.gamma_sum += a->cur_g;
    cf->st.drafted += a->k;
    cf->st.accepted += acc;
    cf->last_run = a->round;
    learn_costs(a);
    double t0 = now_s();
    /* the estimators: shadow tokens of the committed block positions, the draft model's catch-up */
    if (a->want_shadows) exit_shadows(a, acc + 1);
    for (int f = 0; f < a->n_fam; f++)
        if (a->fams[f].kind == FAM_EXIT) a->fams[f].frontier = n - 1;
    if (a->model) {
        fam *df = &a->fams[fam_of(a, FAM_DRAFT)];
        if (cf->kind != FAM_DRAFT && !a->af[fam_of(a, FAM_DRAFT)].off &&
            drafter_model_sync(a->model, hist, n, NULL) != SD_OK)
            a->af[fam_of(a, FAM_DRAFT)].off = true; /* its cache holds what it fed: consistent, but no estimates */
        df->frontier = drafter_model_len(a->model);
        for (int q = df->frontier; q < a->n0 + a->k + 1; q++) /* rejected drafts' predictions */
            if (df->tag[q % RING] == q) df->tag[q % RING] = -1;
    }
    /* every position the round emitted is a start: the estimates do not depend on where the running method's
     * rounds happen to start (after its own misses, or after a bonus token) */
    for (int q = a->n0 - 1; q < n - 1; q++) push_start(a, (int32_t *)hist, q, 1.0);
    resolve(a, hist, n);
    a->base.t_aux += now_s() - t0;
    a->round++;
    choose(a);
}

static void ad_free(drafter *d) {
    auto_drafter *a = (auto_drafter *)d;
    if (a->ngram) a->ngram->free(a->ngram);
    if (a->model) a->model->free(a->model);
    if (a->exit) a->exit->free(a->exit);
    if (a->keep) a->keep->free(a->keep);
    for (int f = 0; f < a->n_fam; f++) {
        free(a->fams[f].pred);
        free(a->fams[f].tag);
    }
    free(a->hl);
    free(a->sh_in);
    free(a->sh_logits);
    free(a->scratch_tok);
    free(a->scratch_par);
    free(a);
}

void drafter_auto_stats(const drafter *d, sd_spec_stats *s) {
    const auto_drafter *a = (const auto_drafter *)d;
    s->n_auto_cands = a->n_fam;
    for (int f = 0; f < a->n_fam; f++) {
        s->auto_cands[f] = a->fams[f].st;
        const ac_stats *st = &a->af[f].st;
        s->auto_cands[f].accept_est = a->fams[f].kind == FAM_NONE ? 0.0f : (float)ac_stats_acc(st, 1);
    }
}

/* ------------------------------------------------------------------ the controller view */
static int ac_max(ctrl *c) { return ((auto_ctrl *)c)->a->cur_g; }
static bool ac_keep(ctrl *c, int i, float top1) { (void)c, (void)i, (void)top1; return true; }
static void ac_ver(ctrl *c, int nd, int na) { (void)c, (void)nd, (void)na; }
static void ac_free(ctrl *c) { free(c); }

/* ------------------------------------------------------------------ the pool */
static fam *add_fam(auto_drafter *a, fam_kind kind, int E, const char *name, double c, double x, double v, int gmax,
                    double prior_a) {
    if (a->n_fam == MAX_FAM) return NULL;
    const int i = a->n_fam++;
    fam *f = &a->fams[i];
    f->kind = kind;
    f->E = E;
    snprintf(f->st.name, sizeof f->st.name, "%s", name);
    if (kind == FAM_DRAFT || kind == FAM_EXIT) {
        f->pred = malloc(RING * sizeof *f->pred);
        f->tag = malloc(RING * sizeof *f->tag);
        if (!f->pred || !f->tag) return NULL;
        for (int q = 0; q < RING; q++) f->tag[q] = -1;
    }
    a->af[i] = (ac_family){.c = c, .x = x, .v = v, .gmax = gmax};
    ac_stats_init(&a->af[i].st, 1.0, prior_a);
    return f;
}

drafter *drafter_auto_new(sd_ctx *target, int seq, const sd_sampler *smp, const sd_spec_params *sp, int gmax,
                          ctrl **view, sd_error *err) {
    *view = NULL;
    auto_drafter *a = calloc(1, sizeof *a);
    if (!a) {
        err_set(err, SD_ERR_NOMEM, "out of memory creating the auto drafter");
        return NULL;
    }
    const sd_model *m = sd_ctx_model(target);
    sd_model_info info;
    sd_model_get_info(m, &info);
    a->target = target;
    a->seq = seq;
    a->L = info.n_layer, a->V = info.n_vocab, a->D = info.n_embd;
    a->heads = sp->exit_heads;
    a->lat = sp->sv_latency;
    int G = sp->gamma_max < gmax ? sp->gamma_max : gmax;
    if (G > sd_ctx_n_batch(target) - 1) G = sd_ctx_n_batch(target) - 1;
    if (G > AC_GMAX) G = AC_GMAX;
    a->G = G < 1 ? 1 : G;
    a->decay = sp->auto_decay;
    a->hyst = sp->auto_hysteresis;
    a->probe = sp->auto_probe;
    a->cur = -1;
    /* T(n): the table's, else a guess (each drafted position 10% of a pass) that the first live pass scales */
    a->t_measured = a->lat != NULL;
    for (int i = 0; i <= a->G; i++) a->T[i] = a->lat ? sd_sv_latency_time(a->lat, i, 1) : 1.0 + 0.1 * i;
    const double T0 = a->T[0];
    sd_spec_params cp = *sp;
    cp.ctrl = SD_CTRL_FIXED;
    cp.gamma = a->G;
    cp.tree_nodes = 0; /* chains */
    a->keep = ctrl_new(&cp);
    a->scratch_tok = malloc((size_t)a->G * sizeof(int32_t));
    a->scratch_par = malloc((size_t)a->G * sizeof(int32_t));
    a->hl = malloc((size_t)a->L * (gmax + 1) * a->D * sizeof(float));
    a->sh_in = malloc((size_t)(gmax + 1) * a->D * sizeof(float));
    a->sh_logits = malloc((size_t)(gmax + 1) * a->V * sizeof(float));
    if (!a->keep || !a->scratch_tok || !a->scratch_par || !a->hl || !a->sh_in || !a->sh_logits) goto nomem;
    a->scratch = (draft_tree){.token = a->scratch_tok, .parent = a->scratch_par, .max_nodes = a->G};
    const unsigned pool = registry_auto_pool(m, NULL, sp);
    if (pool & SD_MASK(SD_SPEC_NONE) && !add_fam(a, FAM_NONE, 0, "none", 0, 0, 1, 0, 0)) goto nomem;
    if (pool & SD_MASK(SD_SPEC_NGRAM)) {
        if (!(a->ngram = drafter_ngram_new(sp->ngram_max, sp->ngram_min)) ||
            !add_fam(a, FAM_NGRAM, 0, "ngram", 1e-3 * T0, 1, 1, a->G, 0.3))
            goto nomem;
    }
    if (pool & SD_MASK(SD_SPEC_DRAFT)) {
        if (!sp->draft_ctx) {
            err_set(err, SD_ERR_ARG, "auto's candidate 'draft' needs a draft model");
            goto fail;
        }
        if (!(a->model = drafter_model_new(sp->draft_ctx, seq, smp, &cp, err))) goto fail;
        sd_model_info di;
        sd_model_get_info(sd_ctx_model(sp->draft_ctx), &di);
        double ratio = info.weight_bytes > 0 ? (double)di.weight_bytes / (double)info.weight_bytes : 0.1;
        if (ratio < 0.02) ratio = 0.02; /* a forward has costs beyond its weights */
        if (!add_fam(a, FAM_DRAFT, 0, "draft", ratio * T0, 0, 1, a->G, 0.5)) goto nomem;
        drafter_model_observe(a->model, on_draft_pred, a);
        a->base.draft_ctx = sp->draft_ctx;
    }
    if ((pool & SD_MASK(SD_SPEC_EARLY_EXIT)) && a->L >= 2) {
        int depths[8], nd = 0;
        if (sp->auto_n_exits > 0) {
            for (int i = 0; i < sp->auto_n_exits && i < 8; i++) depths[nd++] = sp->auto_exits[i];
        } else {
            const int cand[3] = {a->L / 4, 3 * a->L / 8, a->L / 2};
            for (int i = 0; i < 3; i++) depths[nd++] = cand[i] < 1 ? 1 : cand[i];
        }
        for (int i = 0; i < nd; i++) {
            bool dup = false;
            for (int j = 0; j < i; j++) dup |= depths[j] == depths[i];
            if (dup || depths[i] < 1 || depths[i] >= a->L) continue;
            char name[24];
            snprintf(name, sizeof name, "early-exit:%d", depths[i]);
            const double share = (double)depths[i] / a->L;
            if (!add_fam(a, FAM_EXIT, depths[i], name, share * T0, 1, 1 - share, a->G, 0.5)) goto nomem;
        }
        const int E0 = a->n_fam > 0 ? a->fams[a->n_fam - 1].E : 1; /* set per round */
        if (!(a->exit = drafter_exit_new(target, seq, E0 > 0 ? E0 : 1, sp->exit_heads, smp, gmax, NULL, 0, err))) goto fail;
    }
    if (a->n_fam == 0 && !add_fam(a, FAM_NONE, 0, "none", 0, 0, 1, 0, 0)) goto nomem;
    auto_ctrl *c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    c->base = (ctrl){"auto", ac_max, ac_keep, ac_ver, ac_free, false, NULL, false};
    c->a = a;
    *view = &c->base;
    a->base = (drafter){"auto", 0, ad_begin, ad_draft, ad_plan, ad_verified, ad_on_verified, ad_free, a->base.draft_ctx,
                        a->model ? ad_start : NULL, a->model ? ad_next : NULL, ad_timed};
    a->cur = fam_of(a, FAM_NONE) >= 0 ? fam_of(a, FAM_NONE) : 0;
    return &a->base;
nomem:
    err_set(err, SD_ERR_NOMEM, "out of memory creating the auto drafter");
fail:
    ad_free(&a->base);
    return NULL;
}
