/* sched: continuous batching. The scheduler holds the live sessions (added and removed between steps). A step:
 *  1. sessions that are decoding propose their round (drafting runs here), in turn from a rotating start, while
 *     their largest possible block fits the token budget (a round is never cut short for the batch's sake, so a
 *     session's rounds — and its sampled tokens — are the same as when it runs alone; one that does not fit waits);
 *  2. sessions still prefilling get prompt chunks from what the rounds left (at least a quarter of the budget is
 *     kept for them when any wait);
 *  3. every request runs through merge_run (shared forward calls), and each session commits its own result.
 * A session whose forward fails fails alone. Finished sessions leave. */
#include <stdlib.h>
#include <string.h>

#include "speculative/merge.h"
#include "speculative/session.h"
#include "util/err.h"

struct sd_sched {
    sd_ctx *target;
    sd_sched_params p;
    int budget, cap;
    sd_session **live; /* [cap] */
    int n_live, start;
    fwd_req *reqs;     /* [cap] */
    sd_session **who;  /* [cap] the session of each request */
    merge_ws *ws;
};

sd_sched_params sd_sched_default_params(void) {
    sd_sched_params p = {.token_budget = 0, .max_sessions = 0};
    return p;
}

void sd_sched_free(sd_sched *sc) {
    if (!sc) return;
    merge_ws_free(sc->ws);
    free(sc->live);
    free(sc->reqs);
    free(sc->who);
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
    sc->who = calloc((size_t)sc->cap, sizeof *sc->who);
    sc->ws = merge_ws_new(target);
    if (!sc->live || !sc->reqs || !sc->who || !sc->ws) {
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
    for (int i = 0; i < sc->n_live; i++) {
        if (sc->live[i] == s) return SD_OK;
        if (session_seq(sc->live[i]) == session_seq(s))
            return err_set(err, SD_ERR_ARG, "sequence %d is already used by a live session", session_seq(s));
    }
    if (sc->n_live >= sc->cap) return err_set(err, SD_ERR_ARG, "the scheduler is full (%d sessions)", sc->cap);
    sc->live[sc->n_live++] = s;
    return SD_OK;
}

void sd_sched_remove(sd_sched *sc, sd_session *s) {
    if (!sc) return;
    for (int i = 0; i < sc->n_live; i++)
        if (sc->live[i] == s) {
            memmove(sc->live + i, sc->live + i + 1, (size_t)(sc->n_live - i - 1) * sizeof *sc->live);
            sc->n_live--;
            return;
        }
}

int sd_sched_n_live(const sd_sched *sc) { return sc ? sc->n_live : 0; }

sd_status sd_sched_step(sd_sched *sc, sd_error *err) {
    if (!sc) return err_set(err, SD_ERR_ARG, "sd_sched_step: NULL scheduler");
    const int n = sc->n_live;
    int n_req = 0, left = sc->budget, n_prefill = 0;
    for (int i = 0; i < n; i++) n_prefill += session_prefilling(sc->live[i]);
    int keep = n_prefill ? sc->budget / 4 : 0; /* room kept for prompt chunks */
    /* 1. rounds */
    for (int j = 0; j < n; j++) {
        sd_session *s = sc->live[(sc->start + j) % n];
        if (sd_session_done(s) || session_prefilling(s)) continue;
        int need = session_need(s);
        if (need > left - keep && n_req > 0) continue; /* waits for the next step */
        if (!session_propose(s, need, &sc->reqs[n_req])) continue;
        sc->who[n_req] = s;
        left -= sc->reqs[n_req].n;
        n_req++;
    }
    /* 2. prompt chunks */
    for (int j = 0; j < n && left > 0; j++) {
        sd_session *s = sc->live[(sc->start + j) % n];
        if (sd_session_done(s) || !session_prefilling(s)) continue;
        if (!session_propose(s, left, &sc->reqs[n_req])) continue;
        sc->who[n_req] = s;
        left -= sc->reqs[n_req].n;
        n_req++;
    }
    if (n) sc->start = (sc->start + 1) % n;
    /* 3. forwards, then each session's commit */
    sd_status st = merge_run(sc->ws, sc->reqs, n_req, err);
    if (st) {
        for (int i = 0; i < n_req; i++) sc->reqs[i].status = st, sc->reqs[i].err = err ? *err : (sd_error){st, ""};
    }
    for (int i = 0; i < n_req; i++) session_commit(sc->who[i], &sc->reqs[i]);
    /* finished sessions leave */
    int w = 0;
    for (int i = 0; i < n; i++)
        if (!sd_session_done(sc->live[i])) sc->live[w++] = sc->live[i];
    sc->n_live = w;
    if (sc->start >= w) sc->start = 0;
    return st;
}
