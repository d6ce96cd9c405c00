/* serve_metrics: the server's counters and gauges, and their Prometheus text exposition. Counters are per method
 * (label method="none|draft|ngram|..."); acceptance per draft position counts, for each position d (1-based), the
 * rounds that drafted at least d tokens and those that accepted at least d. Thread-safe (one mutex). */
#ifndef SD_SERVE_METRICS_H
#define SD_SERVE_METRICS_H
#include <pthread.h>
#include <stdint.h>

#include "specdec.h"

#define SV_N_METHODS 16 /* room for every sd_spec_method; the exposition lists those with a name */
#define SV_MAX_POS 32

typedef struct sv_method_counts {
    uint64_t requests, prompt_tokens, generated_tokens, draft_tokens, accepted_tokens, passes;
    uint64_t pos_drafted[SV_MAX_POS], pos_accepted[SV_MAX_POS]; /* [d-1]: rounds with >= d drafted / accepted */
} sv_method_counts;

/* auto's candidates (by name: "draft", "early-exit:2", ...): the rounds each ran, why, and its acceptance against
 * what the choice expected */
#define SV_AUTO_CANDS 16
typedef struct sv_auto_counts {
    char name[24];
    uint64_t best, held, probe, drafted, accepted;
    double expected; /* accepted drafts the choice expected, summed over its rounds */
} sv_auto_counts;

typedef struct sv_metrics {
    pthread_mutex_t mu;
    sv_method_counts m[SV_N_METHODS];
    sv_auto_counts autos[SV_AUTO_CANDS];
    int n_autos;
    uint64_t http_status[6];  /* responses by class: [2]=2xx .. [5]=5xx */
    uint64_t errors_400, errors_401, errors_404, errors_413, errors_503, errors_other;
    uint64_t cancelled, timed_out;
    int queue_len, live;      /* gauges (set by the scheduler) */
    int kv_cells_used, kv_cells_capacity, kv_page_cells;
} sv_metrics;

void sv_metrics_init(sv_metrics *mt);
void sv_metrics_destroy(sv_metrics *mt);
/* One verification round of a session running `method`: d drafted, a accepted. */
void sv_metrics_round(sv_metrics *mt, int method, int d, int a);
/* A finished generation request. */
void sv_metrics_request(sv_metrics *mt, int method, int n_prompt, int n_gen, int n_drafted, int n_accepted,
                        int n_rounds);
/* A finished auto request: its candidates' rounds (st->auto_cands). */
void sv_metrics_auto(sv_metrics *mt, const sd_spec_stats *st);
/* An HTTP response status. */
void sv_metrics_status(sv_metrics *mt, int status);
void sv_metrics_event(sv_metrics *mt, int cancelled, int timed_out);
void sv_metrics_gauges(sv_metrics *mt, int queue_len, int live, int kv_used, int kv_cap, int page_cells);
/* The exposition text (malloc'd; NULL when out of memory). */
char *sv_metrics_text(sv_metrics *mt);
#endif
