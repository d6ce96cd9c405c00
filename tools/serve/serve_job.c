#include "serve_job.h"

#include <stdlib.h>
#include <string.h>

sv_job *sv_job_new(sv_request *req, int32_t *prompt, int n_prompt, int n_predict, double deadline, uint64_t id) {
    sv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->prompt = prompt;
    j->n_prompt = n_prompt;
    j->n_predict = n_predict;
    j->deadline = deadline;
    j->id = id;
    j->refs = 2;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    return j;
}

void sv_job_release(sv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    sv_request_free(&j->req);
    free(j->prompt);
    free(j->out);
    free(j);
}

bool sv_job_emit(sv_job *j, const char *text, size_t n) {
    if (n == 0) return true;
    pthread_mutex_lock(&j->mu);
    bool ok = true;
    if (j->out_len + n + 1 > j->out_cap) {
        size_t c = j->out_cap ? j->out_cap * 2 : 1024;
        while (c < j->out_len + n + 1) c *= 2;
        char *o = realloc(j->out, c);
        if (o) j->out = o, j->out_cap = c;
        else ok = false;
    }
    if (ok) {
        memcpy(j->out + j->out_len, text, n);
        j->out_len += n;
        j->out[j->out_len] = 0;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return ok;
}

void sv_job_finish(sv_job *j, const char *finish, int n_gen, int n_drafted, int n_accepted, int n_rounds) {
    pthread_mutex_lock(&j->mu);
    j->finish = finish;
    j->n_gen = n_gen, j->n_drafted = n_drafted, j->n_accepted = n_accepted, j->n_rounds = n_rounds;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void sv_job_fail(sv_job *j, const sv_error *err) {
    pthread_mutex_lock(&j->mu);
    j->err = *err;
    j->failed = true;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void sv_job_cancel(sv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
}

bool sv_job_is_cancelled(sv_job *j) {
    pthread_mutex_lock(&j->mu);
    bool c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

void sv_queue_init(sv_queue *q, int limit) {
    memset(q, 0, sizeof *q);
    q->limit = limit;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

void sv_queue_destroy(sv_queue *q) {
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

bool sv_queue_push(sv_queue *q, sv_job *j) {
    pthread_mutex_lock(&q->mu);
    bool ok = q->n < q->limit + q->free_slots && !q->stop;
    if (ok) {
        j->next = NULL;
        if (q->tail) q->tail->next = j;
        else q->head = j;
        q->tail = j;
        q->n++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

sv_job *sv_queue_pop_locked(sv_queue *q) {
    sv_job *j = q->head;
    if (!j) return NULL;
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    q->n--;
    j->next = NULL;
    return j;
}

int sv_queue_len(sv_queue *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void sv_queue_kick(sv_queue *q) {
    pthread_mutex_lock(&q->mu);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
