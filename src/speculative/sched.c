/* sched: continuous batching. The scheduler holds the live sessions (added and removed between steps). A step:
 *  1. sessions that are decoding start a round, in turn from a rotating start, while their largest possible block
 *     fits the token budget (a round is never cut short for the batch's sake, so a session's rounds — and its
 *     sampled tokens — are the same as when it runs alone; one that does not fit waits; SV sessions are the
 *     exception by design: their verified lengths are chosen over the batch in 3b);
 *  2. sessions still prefilling get prompt chunks from what the rounds left (at least a quarter of the budget is
 *     kept for them when any wait);
 *  3. drafting: the separate draft models' forwards of all sessions run merged per draft context, step after step,
 *     until every round is drafted (drafters on the target itself draft inside their session);
 *     (and, for SV sessions, their companions' forwards, merged per companion context);
 *  3b. SV: the verification lengths of the SV sessions, chosen over the whole batch (sv_select_batch);
 *  4. the verification blocks and prompt chunks run merged on the target, and each session commits its result.
 * A session whose forward fails fails alone. Finished sessions leave. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "speculative/merge.h"
#include "speculative/session.h"
#include "util/err.h"

enum { MAX_DRAFT_CTX = 8 };

struct sd_sched {
    sd_ctx *target;
    sd_sched_params p;
    int budget, cap;
    sd_session **live; /* [cap] */
    int n_live, start;
    fwd_req *reqs;     /* [cap] each admitted session's next forward */
    fwd_req *tmp;      /* [cap] the requests of one merged run */
    sd_session **who;  /* [cap] the admitted sessions */
    fwd_kind *kind;    /* [cap] what each one's next forward is */
    int *idx;          /* [cap] */
    merge_ws *ws;      /* the target's */
    sd_ctx *dctx[MAX_DRAFT_CTX]; /* draft model contexts seen, and their workspaces */
    merge_ws *dws[MAX_DRAFT_CTX];
    int n_dws;
    /* SV: the batch selection's workspace */
    float *sv_beta; /* [cap][sv_ld] */
    int *sv_k, *sv_n, *sv_i; /* [cap] */
    int sv_ld;
    int pass_seqs, pass_drafts; /* the verification blocks of the pass running now (or last): sessions, drafts */
    double pass_tokens;         /* tokens a session emitted per pass, in the pass before (0: none yet) */
};

sd_sched_params sd_sched_default_params(void) {
    sd_sched_params p = {.token_budget = 0, .max_sessions = 0};
    return p;
}

void sd_sched_free(sd_sched *sc) {
    if (!sc) return;
    for (int i = 0; i < sc->n_live; i++) session_set_sched(sc->live[i], NULL);
    merge_ws_free(sc->ws);
    for (int i = 0; i < sc->n_dws; i++) merge_ws_free(sc->dws[i]);
    free(sc->live);
    free(sc->reqs);
    free(sc->tmp);
    free(sc->who);
    free(sc->kind);
    free(sc->idx);
    free(sc->sv_beta);
    free(sc->sv_k);
    free(sc->sv_n);
    free(sc->sv_i);
    free(sc);
}

sd_status sd_sched_new(sd_ctx *target, const sd_sched_params *params, sd_sched **out, sd_error *err) {
    if (!target || !out) return err_set(err, SD_ERR_ARG, "sd_sched_new: NULL argument");
    *out = NULL;
    sd_sched_params p = params ? *params : sd_sched_default_params();
    if (p.token_budget < 0 || p.max_sessions < 0)
        return err_set(err, SD_ERR_ARG, "scheduler: token budget %d and session limit %d must be >= 0", p.token_budget,
                       p.max_sessions);
    sd_sched *sc = calloc(1, sizeof *sc);
    if (!sc) return err_set(err, SD_ERR_NOMEM, "out of memory creating a scheduler");
    sc->target = target;
    sc->p = p;
    sc->budget = p.token_budget ? p.token_budget : sd_ctx_n_batch(target);
    sc->cap = p.max_sessions ? p.max_sessions : sd_ctx_n_seq(target);
    sc->live = calloc((size_t)sc->cap, sizeof *sc->live);
    sc->reqs = calloc((size_t)sc->cap, sizeof *sc->reqs);
    sc->tmp = calloc((size_t)sc->cap, sizeof *sc->tmp);
    sc->who = calloc((size_t)sc->cap, sizeof *sc->who);
    sc->kind = calloc((size_t)sc->cap, sizeof *sc->kind);
    sc->idx = calloc((size_t)sc->cap, sizeof *sc->idx);
    sc->ws = merge_ws_new(target);
    if (!sc->live || !sc->reqs || !sc->tmp || !sc->who || !sc->kind || !sc->idx || !sc->ws) {
        sd_sched_free(sc);
        return err_set(err, SD_ERR_NOMEM, "out of memory creating a scheduler");
    }
    *out = sc;
    return SD_OK;
}

sd_status sd_sched_add(sd_sched *sc, sd_session *s, sd_error *err) {
    if (!sc || !s) return err_set(err, SD_ERR_ARG, "sd_sched_add: NULL argument");
    if (session_ctx(s) != sc->target) return err_set(err, SD_ERR_ARG, "the session belongs to another context");
    if (sd_session_done(s)) return err_set(err, SD_ERR_ARG, "the session has no prompt or is finished");
    if (session_sched(s) && session_sched(s) != sc) return err_set(err, SD_ERR_ARG, "the session is in another scheduler");
    for (int i = 0; i < sc->n_live; i++) {
        if (sc->live[i] == s) return SD_OK;
        if (session_seq(sc->live[i]) == session_seq(s))
            return err_set(err, SD_ERR_ARG, "sequence %d is already used by a live session", session_seq(s));
    }
    if (sc->n_live >= sc->cap) return err_set(err, SD_ERR_ARG, "the scheduler is full (%d sessions)", sc->cap);
    sc->live[sc->n_live++] = s;
    session_set_sched(s, sc);
    return SD_OK;
}

void sd_sched_remove(sd_sched *sc, sd_session *s) {
    if (!sc) return;
    for (int i = 0; i < sc->n_live; i++)
        if (sc->live[i] == s) {
            session_set_sched(s, NULL);
            memmove(sc->live + i, sc->live + i + 1, (size_t)(sc->n_live - i - 1) * sizeof *sc->live);
            sc->n_live--;
            return;
        }
}

int sd_sched_n_live(const sd_sched *sc) { return sc ? sc->n_live : 0; }

void sched_pass_blocks(const sd_sched *sc, int *seqs, int *drafts, double *tokens_per_seq) {
    *seqs = sc && sc->pass_seqs > 0 ? sc->pass_seqs : 1;
    *drafts = sc ? sc->pass_drafts : 0;
    *tokens_per_seq = sc && sc->pass_tokens > 0 ? sc->pass_tokens : 1;
}

/* The merge workspace of a draft model's context (made on first use). */
static merge_ws *draft_ws(sd_sched *sc, sd_ctx *ctx) {
    for (int i = 0; i < sc->n_dws; i++)
        if (sc->dctx[i] == ctx) return sc->dws[i];
    if (sc->n_dws == MAX_DRAFT_CTX) return NULL;
    merge_ws *ws = merge_ws_new(ctx);
    if (!ws) return NULL;
    sc->dctx[sc->n_dws] = ctx;
    sc->dws[sc->n_dws++] = ws;
    return ws;
}

/* Runs the requests reqs[idx[0..m)] (all on ctx, through ws) and hands each its result. */
static sd_status run_some(sd_sched *sc, merge_ws *ws, sd_ctx *ctx, const int *idx, int m, sd_error *err) {
    for (int j = 0; j < m; j++) sc->tmp[j] = sc->reqs[idx[j]];
    sd_status st = SD_OK;
    if (ws) {
        st = merge_run(ws, sc->tmp, m, err);
    } else { /* no workspace (out of memory): one by one */
        for (int j = 0; j < m; j++) fwd_req_run(ctx, &sc->tmp[j]);
    }
    for (int j = 0; j < m; j++) {
        if (st) sc->tmp[j].status = st, sc->tmp[j].err = err ? *err : (sd_error){st, ""};
        session_forward_done(sc->who[idx[j]], &sc->tmp[j]);
    }
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SV's batch level: the sessions waiting for a verification length (FWD_SELECT) get theirs from one selection over
 * the batch (every one verifies >= 1 drafted token; tokens are added greedily by expected accepted tokens while the
 * batch's goodput improves); the other verification blocks count as fixed. Returns the latency table used (NULL:
 * no SV session). */
static sd_sv_latency *sv_select_batch(sd_sched *sc, int n_adm) {
    int m = 0, fixed_seqs = 0, fixed_drafts = 0, ld = 1;
    sd_sv_latency *lat = NULL;
    for (int i = 0; i < n_adm; i++) {
        if (sc->kind[i] == FWD_SELECT) {
            const float *b;
            int k = session_sv_betas(sc->who[i], &b);
            if (k > ld) ld = k;
            if (!lat) lat = session_sv_latency(sc->who[i]);
            m++;
        } else if (sc->kind[i] == FWD_TARGET && !session_prefilling(sc->who[i])) {
            fixed_seqs++;
            fixed_drafts += sc->reqs[i].n - 1;
        }
    }
    if (!m) return NULL;
    if (ld > sc->sv_ld || !sc->sv_k) {
        free(sc->sv_beta), free(sc->sv_k), free(sc->sv_n), free(sc->sv_i);
        sc->sv_beta = malloc((size_t)sc->cap * ld * sizeof *sc->sv_beta);
        sc->sv_k = malloc((size_t)sc->cap * sizeof *sc->sv_k);
        sc->sv_n = malloc((size_t)sc->cap * sizeof *sc->sv_n);
        sc->sv_i = malloc((size_t)sc->cap * sizeof *sc->sv_i);
        sc->sv_ld = ld;
    }
    const bool ok = sc->sv_beta && sc->sv_k && sc->sv_n && sc->sv_i;
    m = 0;
    for (int i = 0; i < n_adm; i++) {
        if (sc->kind[i] != FWD_SELECT) continue;
        const float *b;
        int k = session_sv_betas(sc->who[i], &b);
        if (!ok) { /* out of memory: verify every drafted token */
            session_sv_verify(sc->who[i], k);
            sc->kind[i] = session_next(sc->who[i], session_need(sc->who[i]), &sc->reqs[i]);
            continue;
        }
        memcpy(sc->sv_beta + (size_t)m * sc->sv_ld, b, (size_t)k * sizeof *b);
        sc->sv_k[m] = k;
        sc->sv_i[m++] = i;
    }
    if (!ok) return lat;
    /* the other blocks count 1 expected token each (their acceptance is not known here) */
    sd_sv_select(lat, sc->sv_beta, sc->sv_ld, sc->sv_k, m, fixed_seqs, fixed_drafts, fixed_seqs, sc->sv_n);
    for (int j = 0; j < m; j++) {
        const int i = sc->sv_i[j];
        session_sv_verify(sc->who[i], sc->sv_n[j]);
        sc->kind[i] = session_next(sc->who[i], session_need(sc->who[i]), &sc->reqs[i]);
    }
    return lat;
}

sd_status sd_sched_step(sd_sched *sc, sd_error *err) {
    if (!sc) return err_set(err, SD_ERR_ARG, "sd_sched_step: NULL scheduler");
    const int n = sc->n_live;
    int n_adm = 0, left = sc->budget, n_prefill = 0;
    for (int i = 0; i < n; i++) n_prefill += session_prefilling(sc->live[i]);
    int keep = n_prefill ? sc->budget / 4 : 0; /* room kept for prompt chunks */
    /* 1. rounds: a session is admitted when its largest possible block fits what is left */
    for (int j = 0; j < n; j++) {
        sd_session *s = sc->live[(sc->start + j) % n];
        if (sd_session_done(s) || session_prefilling(s)) continue;
        int need = session_need(s);
        if (need > left - keep && n_adm > 0) continue; /* waits for the next step */
        sc->who[n_adm] = s;
        sc->kind[n_adm] = session_next(s, need, &sc->reqs[n_adm]);
        left -= need;
        n_adm++;
    }
    /* 2. prompt chunks in what is left */
    for (int j = 0; j < n && left > 0; j++) {
        sd_session *s = sc->live[(sc->start + j) % n];
        if (sd_session_done(s) || !session_prefilling(s)) continue;
        sc->who[n_adm] = s;
        sc->kind[n_adm] = session_next(s, left, &sc->reqs[n_adm]);
        if (sc->kind[n_adm] == FWD_TARGET) left -= sc->reqs[n_adm].n;
        n_adm++;
    }
    if (n) sc->start = (sc->start + 1) % n;
    /* 3. drafting forwards (separate draft models), merged per draft context, until every round is drafted */
    sd_status st = SD_OK;
    for (;;) {
        int m = 0;
        sd_ctx *ctx = NULL;
        for (int i = 0; i < n_adm; i++)
            if (sc->kind[i] == FWD_DRAFT && (!ctx || session_fwd_ctx(sc->who[i]) == ctx)) {
                ctx = session_fwd_ctx(sc->who[i]);
                sc->idx[m++] = i;
            }
        if (!m) break;
        sd_status s2 = run_some(sc, draft_ws(sc, ctx), ctx, sc->idx, m, err);
        if (s2) st = s2;
        for (int j = 0; j < m; j++) {
            int i = sc->idx[j];
            sc->kind[i] = session_next(sc->who[i], session_need(sc->who[i]), &sc->reqs[i]);
        }
    }
    /* 3b. SV: verification lengths over the batch */
    sd_sv_latency *lat = sv_select_batch(sc, n_adm);
    /* 4. the target's forwards (verification blocks and prompt chunks), merged */
    int m = 0, n_verify = 0, n_drafts = 0;
    bool full = true; /* every block runs every layer (early exit's verification runs only its upper layers) */
    for (int i = 0; i < n_adm; i++)
        if (sc->kind[i] == FWD_TARGET) {
            sc->idx[m++] = i;
            full &= sc->reqs[i].layer_begin == 0 && sc->reqs[i].layer_end == 0;
            if (!session_prefilling(sc->who[i])) n_verify++, n_drafts += sc->reqs[i].n - 1;
            if (!lat && !session_prefilling(sc->who[i])) lat = session_batch_latency(sc->who[i]); /* refreshed below */
        }
    sc->pass_seqs = n_verify, sc->pass_drafts = n_drafts; /* what the sessions committing in it are told */
    int gen0 = 0, gen1 = 0, nt = 0;
    for (int j = 0; j < m; j++)
        if (!session_prefilling(sc->who[sc->idx[j]])) sd_session_tokens(sc->who[sc->idx[j]], &nt), gen0 += nt;
    double t0 = now_s();
    sd_status s3 = run_some(sc, sc->ws, sc->target, sc->idx, m, err);
    for (int j = 0; j < m; j++) /* (a session that prefilled in this pass emitted its first token: counted too) */
        sd_session_tokens(sc->who[sc->idx[j]], &nt), gen1 += nt;
    if (n_verify > 0 && !s3) sc->pass_tokens = (double)(gen1 - gen0) / n_verify;
    if (lat && !s3 && m == n_verify && full) sd_sv_latency_observe(lat, n_drafts, n_verify, now_s() - t0, 0.9);
    if (s3) st = s3;
    /* finished sessions leave */
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (!sd_session_done(sc->live[i])) sc->live[w++] = sc->live[i];
        else session_set_sched(sc->live[i], NULL);
    }
    sc->n_live = w;
    if (sc->start >= w) sc->start = 0;
    return st;
}
