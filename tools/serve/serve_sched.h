/* serve_sched: the scheduler thread. It alone touches the target (and draft) context: it takes queued jobs into
 * free sequences (one sd_session each), advances all of them with sd_sched_step (continuous batching), turns new
 * tokens into text (stop strings cut it; text that may be the start of a stop string is held back), hands the text
 * to each job's channel, and ends sessions that finish, whose client is gone or whose deadline has passed —
 * cancelling a session frees its cache pages at once. */
#ifndef SD_SERVE_SCHED_H
#define SD_SERVE_SCHED_H
#include <pthread.h>
#include <stdbool.h>

#include "serve_job.h"
#include "serve_metrics.h"
#include "specdec.h"

typedef struct sv_slot sv_slot;

typedef struct sv_worker {
    sd_ctx *ctx;
    sd_ctx *draft_ctx; /* the draft model's context (NULL without one): trimmed with ctx when idle */
    const sd_model *model;
    int parallel;     /* sequences (the contexts' n_seq) */
    sv_queue *queue;
    sv_metrics *metrics;
    sd_sched *sc;
    sv_slot *slots;   /* [parallel] */
    pthread_t thread;
    bool running;
} sv_worker;

/* Creates the scheduler (token_budget 0: n_batch) and starts the thread. When it has nothing to do it returns the
 * contexts' free cache pages to the OS (sd_ctx_trim), so memory after a burst falls back to the idle level. On failure returns false with err. */
bool sv_worker_start(sv_worker *w, sd_ctx *ctx, sd_ctx *draft_ctx, int parallel, int token_budget, sv_queue *q, sv_metrics *mt,
                     sd_error *err);
/* Stops taking new jobs, finishes the queued and running ones, joins the thread and frees what it holds. */
void sv_worker_stop(sv_worker *w);
#endif
