/* serve_job: one generation request between an HTTP thread and the scheduler thread, and the queue of requests
 * waiting for a sequence.
 *
 * A job is shared by two owners (refs = 2): the HTTP side (parses, queues, then reads the output) and the
 * scheduler (runs the session, appends output). Each drops its reference with sv_job_release; the last one frees.
 * The output channel is the job's mutex + condition variable: the scheduler appends released text and finally
 * marks the job done (finish reason, usage, or an error); the HTTP side waits for either. The HTTP side sets
 * `cancelled` when its client is gone; the scheduler then cancels the session (freeing its cache) at its next
 * step. */
#ifndef SD_SERVE_JOB_H
#define SD_SERVE_JOB_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_req.h"

typedef struct sv_job {
    /* set by the HTTP side before queueing, read-only afterwards */
    sv_request req;
    int32_t *prompt; /* [n_prompt] tokens */
    int n_prompt;
    int n_predict;   /* resolved max_tokens */
    double t_queued, deadline; /* monotonic seconds; deadline 0: none */
    uint64_t id;
    /* channel (under mu) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;        /* released text [out_len] */
    size_t out_len, out_cap;
    bool started;     /* a session runs it */
    bool done;
    bool failed;      /* done with err set */
    sv_error err;
    const char *finish; /* "stop" or "length" (static) */
    int n_gen, n_drafted, n_accepted, n_rounds;
    bool cancelled;   /* the client is gone (set by the HTTP side) */
    int refs;
    struct sv_job *next; /* queue link (queue lock) */
} sv_job;

/* A job holding req (moved in: the caller's copy is cleared) and the prompt tokens (moved in). refs = 2. */
sv_job *sv_job_new(sv_request *req, int32_t *prompt, int n_prompt, int n_predict, double deadline, uint64_t id);
void sv_job_release(sv_job *j);
/* Scheduler side: appends text (under the lock) and wakes the reader. Returns false when out of memory. */
bool sv_job_emit(sv_job *j, const char *text, size_t n);
/* Scheduler side: marks the job done (finish reason) or failed (err), with its counts; wakes the reader. */
void sv_job_finish(sv_job *j, const char *finish, int n_gen, int n_drafted, int n_accepted, int n_rounds);
void sv_job_fail(sv_job *j, const sv_error *err);
/* HTTP side: the client is gone. */
void sv_job_cancel(sv_job *j);
bool sv_job_is_cancelled(sv_job *j);

typedef struct sv_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled on push, cancel and stop */
    sv_job *head, *tail;
    int n, limit;        /* jobs waiting; most that may wait beyond free_slots */
    int free_slots;      /* sequences free at the scheduler's last look (set by it) */
    bool stop;           /* the scheduler finishes what it holds and the queue, then exits */
} sv_queue;

void sv_queue_init(sv_queue *q, int limit);
void sv_queue_destroy(sv_queue *q);
/* Appends; false when `limit` jobs would wait beyond the free sequences (or the queue is stopping). */
bool sv_queue_push(sv_queue *q, sv_job *j);
/* Takes the oldest job (the caller holds q->mu); NULL when empty. */
sv_job *sv_queue_pop_locked(sv_queue *q);
int sv_queue_len(sv_queue *q);
/* Wakes the scheduler (after a cancel). */
void sv_queue_kick(sv_queue *q);
#endif
