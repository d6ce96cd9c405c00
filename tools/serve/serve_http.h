/* serve_http: the HTTP front (libmicrohttpd, one thread per connection). Connection threads read and check the
 * request (auth, size, JSON, context), queue a job for the scheduler thread and write its output — a whole JSON
 * response or Server-Sent Events — while watching whether the client is still there.
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health (no auth; 503 while
 * loading or draining), GET /metrics (Prometheus text). */
#ifndef SD_SERVE_HTTP_H
#define SD_SERVE_HTTP_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "serve_job.h"
#include "serve_metrics.h"
#include "serve_req.h"

enum { SV_LOADING = 0, SV_READY = 1, SV_DRAINING = 2 };

typedef struct sv_server {
    /* configuration (before sv_http_start) */
    const char *host;
    int port;                /* 0: any free port (the bound one is written back) */
    const char *api_key;     /* NULL: no auth */
    size_t max_body;         /* bytes */
    double timeout_s;        /* per request, from arrival; 0: none */
    int max_connections;
    int idle_timeout_s;      /* a connection idle this long is closed (slow clients); the wait for an answer does not count */
    char model_id[256];
    /* set when the model is loaded (before state becomes SV_READY) */
    sv_defaults def;
    sv_queue *queue;
    sv_metrics *metrics;
    atomic_int state;
    atomic_int in_flight;    /* generation requests whose response is not finished */
    atomic_ullong next_id;
    atomic_ullong seed;      /* per-request seeds when none is given */
    struct MHD_Daemon *daemon;
} sv_server;

/* Binds and starts serving (state SV_LOADING until the caller sets SV_READY). */
bool sv_http_start(sv_server *s, char *err, int cap);
/* Closes every connection and joins the threads. */
void sv_http_stop(sv_server *s);
#endif
