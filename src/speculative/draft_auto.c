/* draft_auto: --spec auto. A pool of candidate drafters built with the ordinary constructors — n-gram lookup, the
 * draft model, early exit (one drafter whose depth is set per round) — plus plain decoding; at every round
 * boundary the candidate (family, gamma) with the most expected tokens per second drafts the next round
 * (auto_choose.c has the decision). Greedy output stays plain greedy and sampling the target distribution: each
 * round is an ordinary round of the chosen drafter, and the choice depends on the history only.
 *
 * Acceptance: every (family, gamma) replays its own rounds over the text (auto_choose.h), from each family's
 * prediction at every position of the history, which the rounds compute anyway:
 *  - n-gram: its lookup at each position (cheap): the proposal, compared with the tokens emitted after it. Two
 *    families run the same lookup: one wherever it proposes, one only where the text's last NG_REP tokens occurred
 *    before (the text repeating itself: a greedy answer in a loop). Their rounds are counted apart, so the second's
 *    acceptance is that of a repeat, not diluted by the lookup's guesses on free text, and it can take over in the
 *    round a loop is seen;
 *  - draft model: its greedy prediction at every position (argmax of its logits where it read hist[q]); for a
 *    greedy chain the accepted length from p is exactly the run of predictions that match the text from p. Its
 *    cache is kept in step with the history every round (a block forward over the tokens it has not seen, logits of
 *    every position), which is also what lets it take over at any round exactly;
 *  - early exit at depth E: DEL's shadow tokens, argmax LMHead(h^E) of the committed positions of each round's
 *    verification block, from the pass's hidden states (the plan asks for them; with early exit running at depth
 *    E0, the depths >= E0 are there; shallower ones miss that round: their replays skip those positions).
 * The prompt's last positions give the lookup and the draft model their first rounds, at a low weight.
 * Costs: T(n) = scale * shape(n): the shape from the latency table (sd_spec_params.sv_latency, made non-decreasing;
 * without one a linear guess), the scale (the machine's load) from every measured full pass, the shape's cell of
 * that pass more slowly; the draft model's step and early exit's layers from their sizes at first, then from the
 * measured rounds (decayed, when the session runs alone); the estimators' time per round (catch-up forwards,
 * shadow tokens, lookups: t_aux) as an overhead every candidate pays. */
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

/* INIT_STARTS: prompt positions replayed at the beginning, each round there of weight PROMPT_W; PRIOR_W: the prior's
 * weight in rounds */
/* NG_REP: the repeated context (tokens) of the lookup family that proposes only in repeats */
enum { MAX_FAM = SD_AUTO_MAX_CANDS, RING = 512, INIT_STARTS = 32, NG_REP = 8 };
static const double PROMPT_W = 0.03, PRIOR_W = 1.0;

typedef enum { FAM_NONE, FAM_NGRAM, FAM_DRAFT, FAM_EXIT, FAM_SWIFT } fam_kind;

typedef struct fam {
    fam_kind kind;
    int E;           /* early exit: its depth; n-gram: the repeated context it needs (0: none) */
    int32_t *pred;   /* [RING] model families: greedy prediction of the drafter at position q (index q % RING) */
    int32_t *tag;    /* [RING] the position pred holds (-1: none) */
    int frontier;    /* positions < frontier have all the predictions they will get */
    int last_run;    /* the round it last ran (probes) */
    sd_auto_cand_stats st;
} fam;

typedef struct auto_drafter {
    drafter base;
    sd_ctx *target;
    int seq, L, V, D, G;
    const sd_exit_heads *heads;
    sd_sv_latency *lat;
    drafter *ngram, *model, *exit, *swift;
    double sw_acc, sw_miss;     /* SWIFT's own rounds: decayed accepted drafts and rounds that ended on a miss */
    ctrl *keep;                 /* the sub-drafters' controller: every token the round's gamma allows */
    fam fams[MAX_FAM];
    ac_family af[MAX_FAM];
    int n_fam, cur, cur_g, round, probe;
    int hold, hold_g;           /* what the hysteresis holds: the last (family, gamma) the estimates chose (-1: none;
                                 * a probe round runs another without changing it) */
    ac_reason why;
    double est_acc, est_s;      /* the choice's expected accepted drafts and seconds */
    double decay, hyst;
    double T[AC_GMAX + 1];      /* seconds of a verification pass over n drafts: scale * shape */
    double shape[AC_GMAX + 1], scale;
    int nb, others_d;           /* sequences whose verification passes merge with this one's, and the others' drafts
                                 * in the merged pass (drafter.batched) */
    double others_tok;          /* the tokens the others emit per pass (drafter.batched) */
    double Tb[AC_GMAX + 1], Tb_all[AC_GMAX + 1]; /* nb > 1: the merged pass when this round, or every sequence, drafts n
                                                  * (ac_batch_costs) */
    bool t_measured;            /* T holds a measured scale (a table, or a live pass) */
    double overhead;            /* seconds per round of the estimators */
    int p_full;                 /* rounds of the replays started before it are the prompt's */
    /* the n-gram lookup at every position q: its proposal (index q % RING) */
    int32_t *ng_tok;            /* [RING][G] */
    int *ng_k, *ng_tag;         /* [RING] its length, the position it is for (-1: none) */
    bool *ng_rep;               /* [RING] hist[q - NG_REP + 1 .. q] occurred earlier in the text */
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
    sd_auto_state *state;       /* carried across generations (borrowed; NULL: none) */
    bool begun;                 /* its generation started (a session makes a drafter per prompt): its estimates go
                                 * to state when it is freed */
} auto_drafter;

/* What a generation leaves for the next (sd_auto_state): per family (kind and depth), its replays and its costs. */
struct sd_auto_state {
    int n;
    struct {
        fam_kind kind;
        int E;
        ac_family af;      /* the replays' sums, c, x, v (next positions and off not used) */
        bool costs;        /* c and v were measured against a measured T */
    } fam[MAX_FAM];
};

sd_status sd_auto_state_new(sd_auto_state **out, sd_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return err_set(err, SD_ERR_NOMEM, "out of memory creating an auto state");
    return SD_OK;
}

void sd_auto_state_free(sd_auto_state *st) { free(st); }

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

/* the sub-drafter that runs a family's rounds (NULL: the lookup and plain steps, run here) */
static drafter *fam_drafter(const auto_drafter *a, fam_kind k) {
    return k == FAM_DRAFT ? a->model : k == FAM_EXIT ? a->exit : k == FAM_SWIFT ? a->swift : NULL;
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

/* A replay's view of one family over hist[0 .. n). */
typedef struct replay_view {
    const auto_drafter *a;
    const fam *f;
    const int32_t *hist;
    int n;
} replay_view;

/* ac_outcome of a model family: the run of its predictions from p that match the text. */
static int model_outcome(void *user, int p, int g, int *L, int *d) {
    const replay_view *rv = user;
    const fam *f = rv->f;
    *d = g;
    for (int j = 0; j < g; j++) {
        const int q = p + j;
        if (q + 1 >= rv->n || q >= f->frontier) return 0;
        if (f->tag[q % RING] != q) return -1;
        if (f->pred[q % RING] != rv->hist[q + 1]) return *L = j, 1;
    }
    if (p + g + 1 > rv->n - 1) return 0; /* the target's token after the run, where the next round starts */
    return *L = g, 1;
}

/* The length of lookup family fm's proposal at position q (looked up): the repeat family proposes only in repeats. */
static int ng_len(const auto_drafter *a, const fam *fm, int q) {
    return fm->E > 0 && !a->ng_rep[q % RING] ? 0 : a->ng_k[q % RING];
}

/* ac_outcome of the n-gram lookup: its proposal at p, cut at g, against the text. */
static int ngram_outcome(void *user, int p, int g, int *L, int *d) {
    const replay_view *rv = user;
    const auto_drafter *a = rv->a;
    if (p > rv->n - 1) return 0;
    if (a->ng_tag[p % RING] != p) return -1;
    const int k = ng_len(a, rv->f, p); /* 0: a plain step */
    const int32_t *tok = a->ng_tok + (size_t)(p % RING) * a->G;
    *d = k < g ? k : g;
    for (int j = 0; j < *d; j++) {
        if (p + 1 + j > rv->n - 1) return 0;
        if (rv->hist[p + 1 + j] != tok[j]) return *L = j, 1;
    }
    if (p + *d + 1 > rv->n - 1) return 0;
    return *L = *d, 1;
}

/* hist[n - m .. n) occurs earlier in hist[0 .. n - 1) */
static bool repeats(const int32_t *hist, int n, int m) {
    if (n - m < 1) return false;
    const int32_t *pat = hist + n - m;
    for (int j = n - m - 1; j >= 0; j--)
        if (hist[j + m - 1] == pat[m - 1] && memcmp(hist + j, pat, (size_t)m * sizeof *pat) == 0) return true;
    return false;
}

/* The n-gram lookup at every position in [from, to] (hist[0 .. to] known) not looked up yet. */
static void lookups(auto_drafter *a, int32_t *hist, int from, int to) {
    if (!a->ngram) return;
    double t0 = now_s();
    for (int p = from < 0 ? 0 : from; p <= to; p++) {
        if (a->ng_tag[p % RING] == p) continue;
        for (int i = 0; i < a->G; i++) a->scratch.parent[i] = i - 1;
        int k = a->ngram->draft(a->ngram, hist, p + 1, a->G, a->keep, &a->scratch, NULL);
        a->ng_k[p % RING] = k > 0 ? k : 0;
        a->ng_tag[p % RING] = p;
        memcpy(a->ng_tok + (size_t)(p % RING) * a->G, a->scratch.token, (size_t)a->ng_k[p % RING] * sizeof(int32_t));
        a->ng_rep[p % RING] = repeats(hist, p + 1, NG_REP);
    }
    a->base.t_aux += now_s() - t0;
}

/* Every family's replays over hist[0 .. n). */
static void replay(auto_drafter *a, const int32_t *hist, int n) {
    for (int f = 0; f < a->n_fam; f++) {
        const fam *fm = &a->fams[f];
        if (fm->kind == FAM_NONE || a->af[f].off) continue;
        replay_view rv = {a, fm, hist, n};
        ac_replay(&a->af[f], fm->kind == FAM_NGRAM ? ngram_outcome : model_outcome, &rv, a->decay, a->p_full, PROMPT_W);
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

/* SWIFT's acceptance per drafted token: the optimiser's best matchness (the fraction of recent positions where the
 * skipped model's argmax is the text's token: a per-token acceptance) as a prior worth a few drafts, with the
 * drafts of its own rounds; a chain of g then accepts sum_{j<=g} a^j. (Its predictions at every position would cost
 * a skipped-model pass each: unlike the other families it is not replayed.) */
static void swift_estimate(auto_drafter *a) {
    const int f = fam_of(a, FAM_SWIFT);
    if (f < 0) return;
    int steps = 0;
    const float m = drafter_swift_matchness(a->swift, &steps);
    const double w = steps > 0 ? 4.0 : 2.0, prior = steps > 0 ? m : 0.5;
    const double acc = (prior * w + a->sw_acc) / (w + a->sw_acc + a->sw_miss);
    for (int g = 1; g <= a->af[f].gmax; g++) ac_sim_init(&a->af[f].sim[g], g, PRIOR_W, acc, 0);
}

/* ------------------------------------------------------------------ the choice */
/* The costs the choice reads. Alone: T. In a batch of nb sequences (a scheduler merges their passes): the merged
 * pass with the others' blocks as they were in the last one, and the one where all draft alike, from the latency
 * table's batch rows (the scheduler's merged passes refresh them; ac_costs says how both count). Without a table the
 * batch is not known to cost anything else: T. */
static ac_costs round_costs(auto_drafter *a) {
    if (a->nb <= 1 || !a->lat) return (ac_costs){a->T, a->G, a->overhead, 0, 1, NULL};
    ac_batch_costs(a->lat, a->nb, a->others_d, a->G, a->Tb, a->Tb_all);
    return (ac_costs){a->Tb, a->G, a->overhead, a->others_tok, a->nb, a->Tb_all};
}

static void ad_batched(drafter *d, int n_seqs, int others_drafted, double others_tokens) {
    auto_drafter *a = (auto_drafter *)d;
    a->nb = n_seqs < 1 ? 1 : n_seqs;
    a->others_d = others_drafted < 0 ? 0 : others_drafted;
    a->others_tok = others_tokens < a->nb - 1 ? a->nb - 1 : others_tokens;
}

/* The choice for the round starting at hist[n - 1] (its lookup is made). */
static void choose(auto_drafter *a, int n) {
    const ac_costs k = round_costs(a);
    for (int ng = 0; ng < a->n_fam; ng++) {
        if (a->fams[ng].kind != FAM_NGRAM) continue;
        a->af[ng].avail_known = a->ng_tag[(n - 1) % RING] == n - 1;
        a->af[ng].avail = a->af[ng].avail_known ? ng_len(a, &a->fams[ng], n - 1) : 0;
    }
    ac_pick pk;
    if (a->probe > 0 && a->round > 0 && a->round % a->probe == 0) { /* the family run least recently */
        int f = -1;
        for (int i = 0; i < a->n_fam; i++)
            if (a->fams[i].kind != FAM_NONE && !a->af[i].off && (f < 0 || a->fams[i].last_run < a->fams[f].last_run)) f = i;
        pk.fam = f;
        if (f >= 0) ac_best_g(&a->af[f], &k, &pk.g);
        pk.why = AC_PROBE;
    } else {
        pk = ac_choose(a->af, a->n_fam, &k, a->hold, a->hold_g, a->hyst);
    }
    if (pk.fam < 0) /* every candidate is off (a failed catch-up): plain steps on whichever family is current */
        pk = (ac_pick){fam_of(a, FAM_NONE) >= 0 ? fam_of(a, FAM_NONE) : a->cur >= 0 ? a->cur : 0, 0, 0, AC_BEST};
    a->cur = pk.fam;
    a->cur_g = pk.g;
    if (pk.why != AC_PROBE) a->hold = pk.fam, a->hold_g = pk.g;
    a->why = pk.why;
    ac_rate(&a->af[pk.fam], pk.g, &k, &a->est_acc, &a->est_s);
}

/* ------------------------------------------------------------------ across generations */
/* The state's entry of a family (kind and depth), -1 none. */
static int state_entry(const sd_auto_state *st, const fam *fm) {
    for (int i = 0; i < st->n; i++)
        if (st->fam[i].kind == fm->kind && st->fam[i].E == fm->E) return i;
    return -1;
}

/* The generation's estimates into the state: each replayed family's sums and costs (SWIFT's estimate is its
 * optimiser state's, kept by sd_spec_params.swift_state). */
static void carry_out(const auto_drafter *a) {
    sd_auto_state *st = a->state;
    for (int f = 0; f < a->n_fam; f++) {
        const fam *fm = &a->fams[f];
        if (fm->kind == FAM_NONE || fm->kind == FAM_SWIFT) continue;
        int i = state_entry(st, fm);
        if (i < 0) {
            if (st->n == MAX_FAM) continue;
            i = st->n++;
        }
        st->fam[i].kind = fm->kind;
        st->fam[i].E = fm->E;
        st->fam[i].af = a->af[f];
        st->fam[i].costs = a->t_measured;
    }
}

/* Family f starts from the state's estimates instead of the prior: a model's (the draft model's, early exit's) sums
 * per gamma, scaled to at most SD_AUTO_CARRY_ROUNDS rounds (its first round at start) — how well a drafter model
 * predicts the target carries from text to text, how often a text repeats itself does not, so the lookup starts from
 * its prior and the prompt; the drafting costs too when both were measured against a measured T (without a latency
 * table the first live pass rescales the guessed costs). */
static void carry_in(auto_drafter *a, int f, int start) {
    const int i = a->state ? state_entry(a->state, &a->fams[f]) : -1;
    if (i < 0) return;
    const ac_family *src = &a->state->fam[i].af;
    if (a->fams[f].kind != FAM_NGRAM) ac_carry(&a->af[f], src, start, SD_AUTO_CARRY_ROUNDS);
    if (a->state->fam[i].costs && a->t_measured) a->af[f].c = src->c, a->af[f].v = src->v;
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
    if (a->swift) {
        sd_status st = a->swift->begin(a->swift, hist, n, err);
        if (st) return st;
    }
    /* the replays: the lookup's and the draft model's from the prompt's last positions, early exit's from the
     * answer (the prompt has no shadow tokens) */
    const int p0 = n - 1 - INIT_STARTS > 0 ? n - 1 - INIT_STARTS : 0;
    a->p_full = n - 1;
    for (int f = 0; f < a->n_fam; f++) {
        fam *fm = &a->fams[f];
        if (fm->kind == FAM_EXIT) fm->frontier = n - 1;
        if (fm->kind == FAM_SWIFT) continue; /* swift_estimate */
        const int start = fm->kind == FAM_EXIT ? n - 1 : p0;
        for (int g = 1; g <= a->af[f].gmax; g++)
            ac_sim_init(&a->af[f].sim[g], g, PRIOR_W, fm->kind == FAM_NGRAM ? 0.3 : 0.5, start);
        carry_in(a, f, start);
    }
    lookups(a, (int32_t *)hist, p0, n - 1);
    replay(a, hist, n);
    swift_estimate(a);
    a->hold = -1; /* nothing runs yet: no hysteresis for the first choice */
    choose(a, n);
    a->begun = true; /* (a generation that failed to start leaves nothing in the state) */
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
    case FAM_EXIT:
    case FAM_SWIFT: {
        drafter *sub = fam_drafter(a, f->kind);
        if (f->kind == FAM_EXIT) drafter_exit_set_depth(a->exit, f->E);
        int kk = sub->draft(sub, hist, n, max, a->keep, t, err);
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

static void set_T(auto_drafter *a) {
    for (int i = 0; i <= a->G; i++) a->T[i] = a->scale * a->shape[i];
}

/* The measured round refreshes the costs: T's scale (every full pass) and its cell (more slowly), the running
 * family's cost per drafted token and early exit's share of a pass. */
static void learn_costs(auto_drafter *a) {
    if (!a->timed) return;
    const int k = a->k, f = a->cur;
    const double w = 0.8, w_shape = 0.9;
    ac_family *af = &a->af[f];
    const fam_kind kind = a->fams[f].kind;
    if (a->hl_begin == 0 && a->verify_s > 0) {
        const double r = a->verify_s / a->shape[k];
        if (!a->t_measured) { /* the first measured pass gives the guessed shape its scale, and the guessed costs */
            for (int i = 0; i < a->n_fam; i++) a->af[i].c *= r;
            a->scale = r;
            a->t_measured = true;
        }
        a->scale = w * a->scale + (1 - w) * r;
        a->shape[k] = w_shape * a->shape[k] + (1 - w_shape) * a->verify_s / a->scale;
        ac_monotone(a->shape, a->G);
        set_T(a);
        if (a->lat) sd_sv_latency_observe(a->lat, k, 1, a->verify_s, 0.9);
    }
    if (!a->t_measured || kind == FAM_NONE) return;
    if (kind == FAM_EXIT) { /* k shallow passes draft; the last draft's (x) is in the verification time */
        if (k > 0) af->c = w * af->c + (1 - w) * a->draft_s / k;
        if (a->hl_begin > 0 && a->verify_s > 0) {
            double v = (a->verify_s - af->c * af->x) / ac_verify_time(a->T, a->G, k);
            v = v < 0.05 ? 0.05 : v > 1 ? 1 : v;
            af->v = w * af->v + (1 - w) * v;
        }
    } else if (k + af->x > 0 && a->draft_s > 0) {
        af->c = w * af->c + (1 - w) * a->draft_s / (k + af->x);
    }
}

static void ad_on_verified(drafter *d, const int32_t *hist, int n, int acc) {
    auto_drafter *a = (auto_drafter *)d;
    fam *cf = &a->fams[a->cur];
    drafter *sub = fam_drafter(a, cf->kind);
    const double t_sub = now_s(), sub_aux0 = sub ? sub->t_aux : 0;
    if (sub && sub->on_verified) sub->on_verified(sub, hist, n, acc); /* SWIFT: an optimisation step */
    if (sub) a->base.t_aux += sub->t_aux - sub_aux0;
    const double sub_s = now_s() - t_sub;
    if (cf->kind == FAM_SWIFT) {
        a->sw_acc = a->decay * a->sw_acc + acc;
        a->sw_miss = a->decay * a->sw_miss + (acc < a->k);
    }
    /* the running family's round, and what the choice expected of it */
    cf->st.rounds++;
    cf->st.best += a->why == AC_BEST;
    cf->st.held += a->why == AC_HELD;
    cf->st.probe += a->why == AC_PROBE;
    cf->st.gamma_sum += a->cur_g;
    cf->st.drafted += a->k;
    cf->st.accepted += acc;
    cf->st.est_accepted += a->est_acc;
    cf->last_run = a->round;
    learn_costs(a);
    const double aux0 = a->base.t_aux, t0 = now_s();
    /* the estimators: shadow tokens of the committed block positions, the draft model's catch-up, the lookups */
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
    a->base.t_aux += now_s() - t0;
    lookups(a, (int32_t *)hist, a->n0 - 1, n - 1);
    const double t1 = now_s();
    replay(a, hist, n);
    swift_estimate(a);
    a->base.t_aux += now_s() - t1;
    const double aux = a->base.t_aux - aux0;
    if (a->timed) { /* the round as measured, against the choice's expectation */
        cf->st.est_s += a->est_s;
        cf->st.meas_s += a->draft_s + a->verify_s + aux + sub_s;
        cf->st.timed_rounds++;
        a->overhead = 0.8 * a->overhead + 0.2 * aux;
        a->timed = false;
    }
    a->round++;
    choose(a, n);
}

static void ad_free(drafter *d) {
    auto_drafter *a = (auto_drafter *)d;
    if (a->begun && a->state) carry_out(a);
    if (a->ngram) a->ngram->free(a->ngram);
    if (a->model) a->model->free(a->model);
    if (a->exit) a->exit->free(a->exit);
    if (a->swift) a->swift->free(a->swift);
    if (a->keep) a->keep->free(a->keep);
    for (int f = 0; f < a->n_fam; f++) {
        free(a->fams[f].pred);
        free(a->fams[f].tag);
    }
    free(a->ng_tok);
    free(a->ng_k);
    free(a->ng_tag);
    free(a->ng_rep);
    free(a->hl);
    free(a->sh_in);
    free(a->sh_logits);
    free(a->scratch_tok);
    free(a->scratch_par);
    free(a);
}

void drafter_auto_stats(const drafter *d, sd_spec_stats *s) {
    const auto_drafter *a = (const auto_drafter *)d;
    if (a->swift) drafter_swift_stats(a->swift, s); /* its optimiser's time, steps and matchness */
    s->n_auto_cands = a->n_fam;
    for (int f = 0; f < a->n_fam; f++) {
        s->auto_cands[f] = a->fams[f].st;
        const ac_sim *g1 = &a->af[f].sim[1]; /* its replayed rounds of one draft */
        s->auto_cands[f].accept_est = a->fams[f].kind == FAM_NONE || !(g1->R > 0) ? 0.0f : (float)(g1->A / g1->R);
    }
}

/* ------------------------------------------------------------------ the controller view */
static int ac_max(ctrl *c) { return ((auto_ctrl *)c)->a->cur_g; }
static bool ac_keep(ctrl *c, int i, float top1) { (void)c, (void)i, (void)top1; return true; }
static void ac_ver(ctrl *c, int nd, int na) { (void)c, (void)nd, (void)na; }
static void ac_free(ctrl *c) { free(c); }

/* ------------------------------------------------------------------ the pool */
static fam *add_fam(auto_drafter *a, fam_kind kind, int E, const char *name, double c, double x, double v, int gmax) {
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
    a->state = sp->auto_state;
    a->cur = -1;
    a->hold = -1;
    a->nb = 1;
    /* T(n): the table's, else a guess (each drafted position 10% of a pass) that the first live pass scales */
    a->t_measured = a->lat != NULL;
    for (int i = 0; i <= a->G; i++) a->shape[i] = a->lat ? sd_sv_latency_time(a->lat, i, 1) : 1.0 + 0.1 * i;
    ac_monotone(a->shape, a->G);
    a->scale = 1;
    set_T(a);
    const double T0 = a->T[0];
    sd_spec_params cp = *sp;
    cp.ctrl = SD_CTRL_FIXED;
    cp.gamma = a->G;
    cp.tree_nodes = 0; /* chains */
    a->keep = ctrl_new(&cp);
    a->scratch_tok = malloc((size_t)a->G * sizeof(int32_t));
    a->scratch_par = malloc((size_t)a->G * sizeof(int32_t));
    a->ng_tok = malloc((size_t)RING * a->G * sizeof(int32_t));
    a->ng_k = malloc(RING * sizeof(int));
    a->ng_tag = malloc(RING * sizeof(int));
    a->ng_rep = malloc(RING * sizeof(bool));
    a->hl = malloc((size_t)a->L * (gmax + 1) * a->D * sizeof(float));
    a->sh_in = malloc((size_t)(gmax + 1) * a->D * sizeof(float));
    a->sh_logits = malloc((size_t)(gmax + 1) * a->V * sizeof(float));
    if (!a->keep || !a->scratch_tok || !a->scratch_par || !a->ng_tok || !a->ng_k || !a->ng_tag || !a->ng_rep || !a->hl || !a->sh_in ||
        !a->sh_logits)
        goto nomem;
    for (int q = 0; q < RING; q++) a->ng_tag[q] = -1;
    a->scratch = (draft_tree){.token = a->scratch_tok, .parent = a->scratch_par, .max_nodes = a->G};
    const unsigned pool = registry_auto_pool(m, NULL, sp);
    if (pool & SD_MASK(SD_SPEC_NONE) && !add_fam(a, FAM_NONE, 0, "none", 0, 0, 1, 0)) goto nomem;
    if (pool & SD_MASK(SD_SPEC_NGRAM)) {
        if (!(a->ngram = drafter_ngram_new(sp->ngram_max, sp->ngram_min)) ||
            !add_fam(a, FAM_NGRAM, 0, "ngram", 1e-3 * T0, 1, 1, a->G) ||
            !add_fam(a, FAM_NGRAM, NG_REP, "ngram:repeat", 1e-3 * T0, 1, 1, a->G))
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
        if (!add_fam(a, FAM_DRAFT, 0, "draft", ratio * T0, 0, 1, a->G)) goto nomem;
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
            if (!add_fam(a, FAM_EXIT, depths[i], name, share * T0, 1, 1 - share, a->G)) goto nomem;
            a->af[a->n_fam - 1].alone = true; /* drafts on the target, per session */
        }
        const int E0 = a->n_fam > 0 ? a->fams[a->n_fam - 1].E : 1; /* set per round */
        if (!(a->exit = drafter_exit_new(target, seq, E0 > 0 ? E0 : 1, sp->exit_heads, smp, gmax, NULL, 0, err))) goto fail;
    }
    if ((pool & SD_MASK(SD_SPEC_SWIFT)) && a->L >= 3) {
        /* chains of the round's gamma; the skip ratio, window, optimiser and state: sp's */
        if (!(a->swift = drafter_swift_new(target, seq, smp, &cp, err))) goto fail;
        const double share = 1.0 - (double)drafter_swift_skipped(a->swift) / (2.0 * a->L);
        if (!add_fam(a, FAM_SWIFT, 0, "swift", share * T0, 0, 1, a->G)) goto nomem;
        a->af[a->n_fam - 1].alone = true;
    }
    if (a->n_fam == 0 && !add_fam(a, FAM_NONE, 0, "none", 0, 0, 1, 0)) goto nomem;
    auto_ctrl *c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    c->base = (ctrl){"auto", ac_max, ac_keep, ac_ver, ac_free, false, NULL, false};
    c->a = a;
    *view = &c->base;
    a->base = (drafter){"auto", 0, ad_begin, ad_draft, ad_plan, ad_verified, ad_on_verified, ad_free, a->base.draft_ctx,
                        a->model ? ad_start : NULL, a->model ? ad_next : NULL, ad_timed, ad_batched};
    a->cur = fam_of(a, FAM_NONE) >= 0 ? fam_of(a, FAM_NONE) : 0;
    return &a->base;
nomem:
    err_set(err, SD_ERR_NOMEM, "out of memory creating the auto drafter");
fail:
    ad_free(&a->base);
    return NULL;
}
