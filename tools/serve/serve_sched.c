#define _POSIX_C_SOURCE 200809L
#include "serve_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sv_slot {
    sv_worker *w;
    sv_job *job;
    sd_session *s;
    int method;
    sd_detok dt;
    char *text;      /* generated text so far [len] (NUL-terminated) */
    size_t len, cap;
    size_t released; /* bytes of text handed to the job */
    int n_gen_at_stop;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool on_round(const sd_spec_round *r, void *user) {
    sv_slot *sl = user;
    if (r->n_drafted > 0) sv_metrics_round(sl->w->metrics, sl->method, r->n_drafted, r->n_accepted);
    return true;
}

static bool text_append(sv_slot *sl, const char *p, size_t n) {
    if (sl->len + n + 1 > sl->cap) {
        size_t c = sl->cap ? sl->cap * 2 : 1024;
        while (c < sl->len + n + 1) c *= 2;
        char *t = realloc(sl->text, c);
        if (!t) return false;
        sl->text = t, sl->cap = c;
    }
    memcpy(sl->text + sl->len, p, n);
    sl->len += n;
    sl->text[sl->len] = 0;
    return true;
}

/* The first occurrence of a stop string at or after `from`; -1 when none. */
static long find_stop(const sv_slot *sl, size_t from) {
    long best = -1;
    const sv_request *r = &sl->job->req;
    for (int i = 0; i < r->n_stop; i++) {
        size_t k = strlen(r->stop[i]);
        for (size_t p = from; p + k <= sl->len; p++)
            if (!memcmp(sl->text + p, r->stop[i], k)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* Bytes at the end of the text that are a proper prefix of some stop string (held back while streaming). */
static size_t stop_prefix_tail(const sv_slot *sl) {
    size_t hold = 0;
    const sv_request *r = &sl->job->req;
    for (int i = 0; i < r->n_stop; i++) {
        size_t k = strlen(r->stop[i]);
        for (size_t t = k - 1; t > hold; t--)
            if (t <= sl->len - sl->released && !memcmp(sl->text + sl->len - t, r->stop[i], t)) {
                hold = t;
                break;
            }
    }
    return hold;
}

static void release_to(sv_slot *sl, size_t upto) {
    if (upto > sl->released) sv_job_emit(sl->job, sl->text + sl->released, upto - sl->released);
    if (upto > sl->released) sl->released = upto;
}

static void slot_clear(sv_slot *sl) {
    sd_session_free(sl->s); /* clears the sequence's cache and leaves the scheduler */
    sv_job_release(sl->job);
    free(sl->text);
    sv_worker *w = sl->w;
    memset(sl, 0, sizeof *sl);
    sl->w = w;
}

static void fail_job(sv_job *j, int http, const char *code, const char *msg) {
    sv_error e = {0};
    sv_fail(&e, http, http >= 500 ? "server_error" : "invalid_request_error", code, NULL, "%s", msg);
    sv_job_fail(j, &e);
}

/* Starts a job in a free slot; on failure the job is answered and released. */
static void slot_start(sv_worker *w, sv_slot *sl, int seq, sv_job *j) {
    sl->job = j;
    sl->method = (int)j->req.spec.method;
    if (sv_job_is_cancelled(j)) {
        sv_metrics_event(w->metrics, 1, 0);
        slot_clear(sl);
        return;
    }
    if (j->deadline > 0 && now_s() > j->deadline) {
        fail_job(j, 504, "timeout", "the request timed out while queued");
        sv_metrics_event(w->metrics, 0, 1);
        slot_clear(sl);
        return;
    }
    sd_session_params p = sd_session_default_params();
    p.seq = seq;
    p.sampling = j->req.sampling;
    p.spec = j->req.spec;
    p.spec.round_cb = on_round;
    p.spec.round_user = sl;
    p.n_predict = j->n_predict;
    p.ignore_eos = j->req.ignore_eos;
    sd_error err = {0};
    sd_status st = sd_session_new(w->ctx, &p, &sl->s, &err);
    if (!st) st = sd_session_set_prompt(sl->s, j->prompt, j->n_prompt, &err);
    if (!st) st = sd_sched_add(w->sc, sl->s, &err);
    if (st) {
        fail_job(j, st == SD_ERR_ARG ? 400 : 500, NULL, err.msg);
        slot_clear(sl);
        return;
    }
    pthread_mutex_lock(&j->mu);
    j->started = true;
    pthread_mutex_unlock(&j->mu);
}

/* After a step: new tokens to text, stop strings, the end of the session. */
static void slot_advance(sv_worker *w, sv_slot *sl) {
    sv_job *j = sl->job;
    if (sv_job_is_cancelled(j)) {
        sd_session_cancel(sl->s);
        sv_metrics_event(w->metrics, 1, 0);
        slot_clear(sl);
        return;
    }
    if (j->deadline > 0 && now_s() > j->deadline) {
        sd_session_cancel(sl->s);
        fail_job(j, 504, "timeout", "the request timed out");
        sv_metrics_event(w->metrics, 0, 1);
        slot_clear(sl);
        return;
    }
    int32_t toks[256];
    char piece[320];
    bool oom = false;
    for (int n; (n = sd_session_read(sl->s, toks, 256)) > 0;)
        for (int i = 0; i < n; i++) {
            int k = sd_detok_push(w->model, &sl->dt, toks[i], piece);
            oom |= !text_append(sl, piece, (size_t)k);
        }
    bool done = sd_session_done(sl->s);
    if (done) {
        int k = sd_detok_flush(&sl->dt, piece);
        oom |= !text_append(sl, piece, (size_t)k);
    }
    if (oom) {
        sd_session_cancel(sl->s);
        fail_job(j, 500, NULL, "out of memory");
        slot_clear(sl);
        return;
    }
    long stop_at = j->req.n_stop ? find_stop(sl, sl->released) : -1;
    if (stop_at >= 0) {
        release_to(sl, (size_t)stop_at);
        sd_session_cancel(sl->s);
        done = true;
    } else {
        release_to(sl, done ? sl->len : sl->len - stop_prefix_tail(sl));
    }
    if (!done) return;
    sd_error err = {0};
    sd_spec_stats st;
    sd_session_stats(sl->s, &st);
    int n = 0;
    const int32_t *t = sd_session_tokens(sl->s, &n);
    if (stop_at < 0 && sd_session_status(sl->s, &err) != SD_OK) {
        fail_job(j, 500, NULL, err.msg);
    } else {
        const char *finish = stop_at >= 0 || (n > 0 && !j->req.ignore_eos && sd_token_is_eog(w->model, t[n - 1])) ? "stop" : "length";
        sv_metrics_request(w->metrics, sl->method, j->n_prompt, n, st.n_drafted, st.n_accepted, st.n_rounds);
        if (st.n_auto_cands > 0) sv_metrics_auto(w->metrics, &st);
        sv_job_finish(j, finish, n, st.n_drafted, st.n_accepted, st.n_rounds);
    }
    slot_clear(sl);
}

static void *worker_main(void *arg) {
    sv_worker *w = arg;
    sv_queue *q = w->queue;
    sv_job **taken = calloc((size_t)w->parallel, sizeof *taken);
    for (;;) {
        int live = 0;
        for (int i = 0; i < w->parallel; i++) live += w->slots[i].job != NULL;
        int n_taken = 0, qlen;
        pthread_mutex_lock(&q->mu);
        q->free_slots = w->parallel - live;
        if (live == 0 && q->n == 0 && !q->stop) { /* going idle: give the free cache pages back to the OS */
            pthread_mutex_unlock(&q->mu);
            sd_ctx_trim(w->ctx);
            sd_ctx_trim(w->draft_ctx);
            pthread_mutex_lock(&q->mu);
        }
        while (!(live < w->parallel && q->n > 0) && live == 0 && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (live == 0 && q->n == 0 && q->stop) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        while (taken && live + n_taken < w->parallel && q->n > 0) taken[n_taken++] = sv_queue_pop_locked(q);
        qlen = q->n;
        q->free_slots = w->parallel - live - n_taken;
        pthread_mutex_unlock(&q->mu);
        for (int k = 0, i = 0; k < n_taken; k++) {
            while (w->slots[i].job) i++;
            slot_start(w, &w->slots[i], i, taken[k]);
        }
        live = 0;
        for (int i = 0; i < w->parallel; i++) live += w->slots[i].job != NULL;
        if (live > 0) {
            sd_error err = {0};
            if (sd_sched_step(w->sc, &err) != SD_OK) {
                for (int i = 0; i < w->parallel; i++)
                    if (w->slots[i].job) {
                        fail_job(w->slots[i].job, 500, NULL, err.msg);
                        slot_clear(&w->slots[i]);
                    }
            }
            for (int i = 0; i < w->parallel; i++)
                if (w->slots[i].job) slot_advance(w, &w->slots[i]);
        }
        live = 0;
        for (int i = 0; i < w->parallel; i++) live += w->slots[i].job != NULL;
        int used = 0, cap = 0;
        sd_kv_pool_usage(w->ctx, &used, &cap);
        sv_metrics_gauges(w->metrics, qlen, live, used, cap, sd_kv_page_cells(w->ctx));
    }
    free(taken);
    return NULL;
}

bool sv_worker_start(sv_worker *w, sd_ctx *ctx, sd_ctx *draft_ctx, int parallel, int token_budget, sv_queue *q, sv_metrics *mt,
                     sd_error *err) {
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    w->draft_ctx = draft_ctx;
    w->model = sd_ctx_model(ctx);
    w->parallel = parallel;
    w->queue = q;
    w->metrics = mt;
    sd_sched_params scp = sd_sched_default_params();
    scp.token_budget = token_budget;
    scp.max_sessions = parallel;
    if (sd_sched_new(ctx, &scp, &w->sc, err) != SD_OK) return false;
    w->slots = calloc((size_t)parallel, sizeof *w->slots);
    if (!w->slots) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        sd_sched_free(w->sc);
        return false;
    }
    for (int i = 0; i < parallel; i++) w->slots[i].w = w;
    pthread_mutex_lock(&q->mu);
    q->free_slots = parallel;
    pthread_mutex_unlock(&q->mu);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot start the scheduler thread");
        free(w->slots);
        sd_sched_free(w->sc);
        return false;
    }
    w->running = true;
    return true;
}

void sv_worker_stop(sv_worker *w) {
    if (!w->running) return;
    pthread_mutex_lock(&w->queue->mu);
    w->queue->stop = true;
    pthread_cond_broadcast(&w->queue->cv);
    pthread_mutex_unlock(&w->queue->mu);
    pthread_join(w->thread, NULL);
    w->running = false;
    sd_sched_free(w->sc);
    free(w->slots);
    w->sc = NULL;
    w->slots = NULL;
}
