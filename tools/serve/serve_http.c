#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "serve_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve_resp.h"

/* One request's state across the access handler's calls. */
typedef struct conn_req {
    char *body;
    size_t len, cap;
    bool too_big;
    bool answered; /* a response is queued already (413 before the body) */
} conn_req;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static enum MHD_Result send_text(sv_server *s, struct MHD_Connection *c, int status, const char *ctype, char *text,
                                 const char *retry_after) {
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    struct MHD_Response *r = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE)
                                  : MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    if (!text) status = 500, ctype = "application/json";
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    sv_metrics_status(s->metrics, status);
    return ok;
}

static enum MHD_Result send_json(sv_server *s, struct MHD_Connection *c, int status, char *json) {
    return send_text(s, c, status, "application/json", json, NULL);
}

static enum MHD_Result send_error(sv_server *s, struct MHD_Connection *c, const sv_error *e) {
    return send_text(s, c, e->http, "application/json", sv_json_error(e), e->http == 503 ? "1" : NULL);
}

static enum MHD_Result fail(sv_server *s, struct MHD_Connection *c, int http, const char *type, const char *code,
                            const char *msg) {
    sv_error e = {0};
    sv_fail(&e, http, type, code, NULL, "%s", msg);
    return send_error(s, c, &e);
}

/* Whether the client has closed its side (or the connection broke). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    char ch;
    ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Waits (under j->mu, held by the caller) until the job is done or, when `seen` is not SIZE_MAX, has output past
 * `seen`; false when the client went away meanwhile (the job is then cancelled). */
static bool wait_output(sv_server *s, sv_job *j, size_t seen, int fd) {
    while (!j->done && (seen == SIZE_MAX || j->out_len <= seen)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&j->cv, &j->mu, &until);
        if (!j->done && client_gone(fd)) {
            j->cancelled = true;
            pthread_mutex_unlock(&j->mu);
            sv_queue_kick(s->queue);
            pthread_mutex_lock(&j->mu);
            return false;
        }
    }
    return true;
}

static void job_usage(const sv_job *j, sv_usage *u) {
    u->prompt_tokens = j->n_prompt;
    u->completion_tokens = j->n_gen;
    u->draft_tokens = j->n_drafted;
    u->accepted_tokens = j->n_accepted;
    u->method = sd_spec_method_name(j->req.spec.method);
}

/* ------------------------------------------------------------------ streaming */
typedef struct stream {
    sv_server *s;
    sv_job *j;
    int fd;
    char id[48];
    long created;
    size_t seen;  /* job output bytes already framed */
    char *pend;   /* framed bytes not yet handed to MHD */
    size_t pend_len, pend_off;
    bool started, finished;
} stream;

static bool pend_add(stream *st, char *ev) {
    if (!ev) return false;
    size_t n = strlen(ev), left = st->pend_len - st->pend_off;
    char *p = malloc(left + n + 1);
    if (!p) {
        free(ev);
        return false;
    }
    if (left) memcpy(p, st->pend + st->pend_off, left);
    memcpy(p + left, ev, n + 1);
    free(ev);
    free(st->pend);
    st->pend = p, st->pend_len = left + n, st->pend_off = 0;
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    sv_job *j = st->j;
    const sv_kind kind = j->req.kind;
    const char *model = st->s->model_id;
    if (!st->started) {
        st->started = true;
        if (kind == SV_CHAT && !pend_add(st, sv_sse_chunk(kind, st->id, st->created, model, true, "", NULL, NULL)))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    while (st->pend_len == st->pend_off) {
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&j->mu);
        if (!wait_output(st->s, j, st->seen, st->fd)) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        char *ev = NULL, *ev2 = NULL;
        bool ok = true;
        if (j->out_len > st->seen) {
            char *t = malloc(j->out_len - st->seen + 1);
            if (t) {
                memcpy(t, j->out + st->seen, j->out_len - st->seen);
                t[j->out_len - st->seen] = 0;
                st->seen = j->out_len;
                ok = pend_add(st, sv_sse_chunk(kind, st->id, st->created, model, false, t, NULL, NULL));
                free(t);
            } else ok = false;
        } else if (j->done) {
            if (j->failed) {
                ev = sv_sse_error(&j->err);
            } else {
                sv_usage u;
                job_usage(j, &u);
                ev = sv_sse_chunk(kind, st->id, st->created, model, false, kind == SV_CHAT ? NULL : "", j->finish, NULL);
                if (j->req.include_usage) ev2 = sv_sse_chunk(kind, st->id, st->created, model, false, NULL, NULL, &u);
            }
            ok = pend_add(st, ev);
            if (ev2) ok = ok ? pend_add(st, ev2) : (free(ev2), false);
            if (ok) {
                char *done = malloc(16);
                if (done) strcpy(done, "data: [DONE]\n\n");
                ok = pend_add(st, done);
            }
            st->finished = true;
        }
        pthread_mutex_unlock(&j->mu);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->pend_len - st->pend_off;
    if (n > max) n = max;
    memcpy(buf, st->pend + st->pend_off, n);
    st->pend_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&st->j->mu);
    bool done = st->j->done;
    if (!done) st->j->cancelled = true; /* the client went away before the end */
    pthread_mutex_unlock(&st->j->mu);
    if (!done) sv_queue_kick(st->s->queue);
    sv_job_release(st->j);
    atomic_fetch_sub(&st->s->in_flight, 1);
    free(st->pend);
    free(st);
}

/* ------------------------------------------------------------------ generation */
static enum MHD_Result generate(sv_server *s, struct MHD_Connection *c, sv_kind kind, const conn_req *cr) {
    const double t0 = now_s();
    int state = atomic_load(&s->state);
    if (state != SV_READY)
        return fail(s, c, 503, "server_error", state == SV_LOADING ? "loading" : "shutting_down",
                    state == SV_LOADING ? "the model is loading" : "the server is shutting down");
    sv_error e = {0};
    sv_request req;
    uint64_t seed = atomic_fetch_add(&s->seed, 1);
    if (!sv_request_parse(cr->body ? cr->body : "", cr->len, kind, &s->def, seed, &req, &e)) return send_error(s, c, &e);
    const sd_model *m = s->def.model;
    const int n_ctx = sd_ctx_n_ctx(s->def.ctx);
    size_t plen = strlen(req.prompt);
    if (plen > (size_t)64 * n_ctx + 64) { /* far more bytes than the context can hold tokens (>= 1 byte / token) */
        sv_request_free(&req);
        sv_fail(&e, 400, "invalid_request_error", "context_length_exceeded", kind == SV_CHAT ? "messages" : "prompt",
                "the prompt has %zu bytes, far more than the context of %d tokens holds", plen, n_ctx);
        return send_error(s, c, &e);
    }
    int cap = (int)plen + 8, n_tok = 0;
    int32_t *toks = malloc((size_t)cap * sizeof *toks);
    sd_error te = {0};
    if (!toks || sd_tokenize(m, req.prompt, plen, !s->def.no_bos && sd_model_add_bos(m), true, toks, cap, &n_tok, &te) != SD_OK) {
        free(toks);
        sv_request_free(&req);
        return fail(s, c, 500, "server_error", NULL, toks ? te.msg : "out of memory");
    }
    const char *param = kind == SV_CHAT ? "messages" : "prompt";
    bool bad = false;
    if (n_tok == 0) bad = !sv_fail(&e, 400, "invalid_request_error", "invalid_value", param,
                                   "the prompt is empty and the model has no BOS token to start from");
    else if (n_tok >= n_ctx)
        bad = !sv_fail(&e, 400, "invalid_request_error", "context_length_exceeded", param,
                       "the prompt has %d tokens but the context holds %d", n_tok, n_ctx);
    else if (req.max_tokens > 0 && n_tok + req.max_tokens > n_ctx)
        bad = !sv_fail(&e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                       "the context holds %d tokens, but %d were requested (%d in the prompt, %d in the completion)",
                       n_ctx, n_tok + req.max_tokens, n_tok, req.max_tokens);
    if (bad) {
        free(toks);
        sv_request_free(&req);
        return send_error(s, c, &e);
    }
    int n_predict = req.max_tokens > 0 ? req.max_tokens : s->def.n_predict;
    if (n_predict < 0 || n_tok + n_predict > n_ctx) n_predict = n_ctx - n_tok;
    const bool streaming = req.stream;
    uint64_t id = atomic_fetch_add(&s->next_id, 1);
    sv_job *j = sv_job_new(&req, toks, n_tok, n_predict, s->timeout_s > 0 ? t0 + s->timeout_s : 0, id);
    if (!j) {
        free(toks);
        sv_request_free(&req);
        return fail(s, c, 500, "server_error", NULL, "out of memory");
    }
    atomic_fetch_add(&s->in_flight, 1);
    if (!sv_queue_push(s->queue, j)) {
        sv_job_release(j);
        sv_job_release(j);
        atomic_fetch_sub(&s->in_flight, 1);
        return fail(s, c, 503, "server_error", "queue_full",
                    "the server is busy: the request queue is full; retry later");
    }
    char idtext[48];
    snprintf(idtext, sizeof idtext, "%s-%llu", kind == SV_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)id);
    const long created = (long)time(NULL);
    const int fd = conn_fd(c);
    if (streaming) {
        stream *st = calloc(1, sizeof *st);
        struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free)
                                    : NULL;
        if (!r) {
            sv_job_cancel(j);
            sv_job_release(j);
            atomic_fetch_sub(&s->in_flight, 1);
            free(st);
            return MHD_NO;
        }
        st->s = s, st->j = j, st->fd = fd, st->created = created;
        snprintf(st->id, sizeof st->id, "%s", idtext);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        sv_metrics_status(s->metrics, 200);
        return ok;
    }
    pthread_mutex_lock(&j->mu);
    bool here = wait_output(s, j, SIZE_MAX, fd);
    char *body = NULL;
    int status = 200;
    if (here) {
        if (j->failed) {
            status = j->err.http;
            body = sv_json_error(&j->err);
        } else {
            sv_usage u;
            job_usage(j, &u);
            body = sv_json_response(kind, idtext, created, s->model_id, j->out ? j->out : "", j->finish, &u);
        }
    }
    pthread_mutex_unlock(&j->mu);
    sv_job_release(j);
    atomic_fetch_sub(&s->in_flight, 1);
    if (!here) return MHD_NO; /* the client is gone: close */
    return send_text(s, c, status, "application/json", body, status == 503 ? "1" : NULL);
}

/* ------------------------------------------------------------------ routing */
static bool authorized(const sv_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->api_key);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    sv_server *s = cls;
    conn_req *cr = *con_cls;
    const bool post = !strcmp(method, "POST");
    if (!cr) {
        cr = calloc(1, sizeof *cr);
        if (!cr) return MHD_NO;
        *con_cls = cr;
        const char *cl = post ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length") : NULL;
        if (cl && strtoull(cl, NULL, 10) > s->max_body) { /* answer before reading the body */
            cr->too_big = cr->answered = true;
            char msg[128];
            snprintf(msg, sizeof msg, "the request body has %s bytes; the limit is %zu", cl, s->max_body);
            return fail(s, c, 413, "invalid_request_error", "request_too_large", msg);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cr->answered) return MHD_YES;
        if (cr->too_big || cr->len + n > s->max_body) {
            cr->too_big = true;
            return MHD_YES;
        }
        if (cr->len + n + 1 > cr->cap) {
            size_t cap = cr->cap ? cr->cap * 2 : 4096;
            while (cap < cr->len + n + 1) cap *= 2;
            char *b = realloc(cr->body, cap);
            if (!b) return MHD_NO;
            cr->body = b, cr->cap = cap;
        }
        memcpy(cr->body + cr->len, upload, n);
        cr->len += n;
        cr->body[cr->len] = 0;
        return MHD_YES;
    }
    /* the whole request is here */
    if (cr->answered) return MHD_YES;
    if (cr->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is over the limit of %zu bytes", s->max_body);
        return fail(s, c, 413, "invalid_request_error", "request_too_large", msg);
    }
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!strcmp(url, "/health")) {
        if (!get) return fail(s, c, 405, "invalid_request_error", "method_not_allowed", "use GET /health");
        int st = atomic_load(&s->state);
        const char *body = st == SV_READY ? "{\"status\":\"ok\"}" : st == SV_LOADING ? "{\"status\":\"loading\"}"
                                                                                       : "{\"status\":\"draining\"}";
        char *b = malloc(strlen(body) + 1);
        if (b) strcpy(b, body);
        return send_json(s, c, st == SV_READY ? 200 : 503, b);
    }
    if (!authorized(s, c))
        return fail(s, c, 401, "invalid_request_error", "invalid_api_key",
                    "missing or wrong API key (send the header 'Authorization: Bearer KEY')");
    if (!strcmp(url, "/metrics")) {
        if (!get) return fail(s, c, 405, "invalid_request_error", "method_not_allowed", "use GET /metrics");
        return send_text(s, c, 200, "text/plain; version=0.0.4", sv_metrics_text(s->metrics), NULL);
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) return fail(s, c, 405, "invalid_request_error", "method_not_allowed", "use GET /v1/models");
        return send_json(s, c, 200, sv_json_models(s->model_id, (long)time(NULL)));
    }
    const bool compl = !strcmp(url, "/v1/completions"), chat = !strcmp(url, "/v1/chat/completions");
    if (compl || chat) {
        if (!post) return fail(s, c, 405, "invalid_request_error", "method_not_allowed", "use POST");
        return generate(s, c, chat ? SV_CHAT : SV_COMPLETION, cr);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "no endpoint %.16s %.200s (endpoints: POST /v1/completions, POST /v1/chat/completions, GET "
                              "/v1/models, GET /health, GET /metrics)", method, url);
    return fail(s, c, 404, "invalid_request_error", "not_found", msg);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc) {
    (void)cls, (void)c, (void)tc;
    conn_req *cr = *con_cls;
    if (cr) free(cr->body);
    free(cr);
    *con_cls = NULL;
}

bool sv_http_start(sv_server *s, char *err, int cap) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    int rc = getaddrinfo(s->host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, (size_t)cap, "--host %s: %s", s->host, gai_strerror(rc));
        return false;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)s->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->idle_timeout_s,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        snprintf(err, (size_t)cap, "cannot listen on %s:%d (%s)", s->host, s->port,
                 errno ? strerror(errno) : "address in use?");
        return false;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (di) s->port = di->port;
    return true;
}

void sv_http_stop(sv_server *s) {
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}
