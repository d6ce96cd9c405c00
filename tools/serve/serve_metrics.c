#include "serve_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

void sv_metrics_init(sv_metrics *mt) {
    memset(mt, 0, sizeof *mt);
    pthread_mutex_init(&mt->mu, NULL);
}

void sv_metrics_destroy(sv_metrics *mt) { pthread_mutex_destroy(&mt->mu); }

/* The methods the library names (sd_spec_method_name answers "?" past the last one). */
static int n_named_methods(void) {
    int n = 0;
    while (n < SV_N_METHODS && strcmp(sd_spec_method_name((sd_spec_method)n), "?")) n++;
    return n;
}

static sv_method_counts *counts(sv_metrics *mt, int method) {
    return &mt->m[method >= 0 && method < SV_N_METHODS ? method : 0];
}

void sv_metrics_round(sv_metrics *mt, int method, int d, int a) {
    pthread_mutex_lock(&mt->mu);
    sv_method_counts *c = counts(mt, method);
    for (int i = 0; i < d && i < SV_MAX_POS; i++) c->pos_drafted[i]++;
    for (int i = 0; i < a && i < SV_MAX_POS; i++) c->pos_accepted[i]++;
    pthread_mutex_unlock(&mt->mu);
}

void sv_metrics_request(sv_metrics *mt, int method, int n_prompt, int n_gen, int n_drafted, int n_accepted,
                        int n_rounds) {
    pthread_mutex_lock(&mt->mu);
    sv_method_counts *c = counts(mt, method);
    c->requests++;
    c->prompt_tokens += (uint64_t)n_prompt;
    c->generated_tokens += (uint64_t)n_gen;
    c->draft_tokens += (uint64_t)n_drafted;
    c->accepted_tokens += (uint64_t)n_accepted;
    c->passes += (uint64_t)n_rounds;
    pthread_mutex_unlock(&mt->mu);
}

void sv_metrics_auto(sv_metrics *mt, const sd_spec_stats *st) {
    pthread_mutex_lock(&mt->mu);
    for (int i = 0; i < st->n_auto_cands; i++) {
        const sd_auto_cand_stats *c = &st->auto_cands[i];
        if (c->rounds == 0) continue;
        int k = 0;
        while (k < mt->n_autos && strcmp(mt->autos[k].name, c->name)) k++;
        if (k == mt->n_autos) {
            if (k == SV_AUTO_CANDS) continue; /* more names than room: not counted */
            snprintf(mt->autos[k].name, sizeof mt->autos[k].name, "%s", c->name);
            mt->n_autos++;
        }
        sv_auto_counts *a = &mt->autos[k];
        a->best += (uint64_t)c->best, a->held += (uint64_t)c->held, a->probe += (uint64_t)c->probe;
        a->drafted += (uint64_t)c->drafted, a->accepted += (uint64_t)c->accepted;
        a->expected += c->est_accepted;
    }
    pthread_mutex_unlock(&mt->mu);
}

void sv_metrics_status(sv_metrics *mt, int status) {
    pthread_mutex_lock(&mt->mu);
    int cls = status / 100;
    if (cls >= 1 && cls <= 5) mt->http_status[cls]++;
    if (status == 400) mt->errors_400++;
    else if (status == 401) mt->errors_401++;
    else if (status == 404) mt->errors_404++;
    else if (status == 413) mt->errors_413++;
    else if (status == 503) mt->errors_503++;
    else if (status >= 400) mt->errors_other++;
    pthread_mutex_unlock(&mt->mu);
}

void sv_metrics_event(sv_metrics *mt, int cancelled, int timed_out) {
    pthread_mutex_lock(&mt->mu);
    mt->cancelled += (uint64_t)cancelled;
    mt->timed_out += (uint64_t)timed_out;
    pthread_mutex_unlock(&mt->mu);
}

void sv_metrics_gauges(sv_metrics *mt, int queue_len, int live, int kv_used, int kv_cap, int page_cells) {
    pthread_mutex_lock(&mt->mu);
    mt->queue_len = queue_len, mt->live = live;
    mt->kv_cells_used = kv_used, mt->kv_cells_capacity = kv_cap, mt->kv_page_cells = page_cells;
    pthread_mutex_unlock(&mt->mu);
}

typedef struct tbuf {
    char *s;
    size_t n, cap;
    int oom;
} tbuf;

static void tprintf(tbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t c = b->cap ? b->cap * 2 : 4096;
        while (c < b->n + (size_t)k + 1) c *= 2;
        char *s = realloc(b->s, c);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = c;
    }
}

/* One counter family: HELP, TYPE, then one sample per method (every method, so a scraper sees zeros). */
static void family(tbuf *b, const sv_metrics *mt, const char *name, const char *help, size_t off) {
    tprintf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int m = 0; m < n_named_methods(); m++)
        tprintf(b, "%s{method=\"%s\"} %llu\n", name, sd_spec_method_name((sd_spec_method)m),
                (unsigned long long)*(const uint64_t *)((const char *)&mt->m[m] + off));
}

/* One counter family of auto's candidates: the field at off, a uint64_t count (or a double: real). */
static void auto_family(tbuf *b, const sv_metrics *mt, const char *name, const char *help, size_t off, bool real) {
    tprintf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int k = 0; k < mt->n_autos; k++) {
        const char *at = (const char *)&mt->autos[k] + off;
        if (real) tprintf(b, "%s{candidate=\"%s\"} %.3f\n", name, mt->autos[k].name, *(const double *)at);
        else tprintf(b, "%s{candidate=\"%s\"} %llu\n", name, mt->autos[k].name, (unsigned long long)*(const uint64_t *)at);
    }
}

char *sv_metrics_text(sv_metrics *mt) {
    pthread_mutex_lock(&mt->mu);
    sv_metrics s = *mt; /* a snapshot; the mutex is not used from the copy */
    pthread_mutex_unlock(&mt->mu);
    tbuf b = {0};
    family(&b, &s, "specdec_requests_total", "Generation requests finished.", offsetof(sv_method_counts, requests));
    family(&b, &s, "specdec_prompt_tokens_total", "Prompt tokens of finished requests.",
           offsetof(sv_method_counts, prompt_tokens));
    family(&b, &s, "specdec_generated_tokens_total", "Tokens generated.", offsetof(sv_method_counts, generated_tokens));
    family(&b, &s, "specdec_draft_tokens_total", "Draft tokens proposed.", offsetof(sv_method_counts, draft_tokens));
    family(&b, &s, "specdec_accepted_tokens_total", "Draft tokens accepted.",
           offsetof(sv_method_counts, accepted_tokens));
    family(&b, &s, "specdec_verification_passes_total", "Target verification passes (rounds).",
           offsetof(sv_method_counts, passes));
    tprintf(&b, "# HELP specdec_draft_position_drafted_total Rounds that drafted a token at this position.\n"
                "# TYPE specdec_draft_position_drafted_total counter\n");
    for (int m = 1; m < n_named_methods(); m++)
        for (int d = 0; d < SV_MAX_POS && s.m[m].pos_drafted[d]; d++)
            tprintf(&b, "specdec_draft_position_drafted_total{method=\"%s\",position=\"%d\"} %llu\n",
                    sd_spec_method_name((sd_spec_method)m), d + 1, (unsigned long long)s.m[m].pos_drafted[d]);
    tprintf(&b, "# HELP specdec_draft_position_accepted_total Rounds whose draft token at this position was accepted.\n"
                "# TYPE specdec_draft_position_accepted_total counter\n");
    for (int m = 1; m < n_named_methods(); m++)
        for (int d = 0; d < SV_MAX_POS && s.m[m].pos_drafted[d]; d++)
            tprintf(&b, "specdec_draft_position_accepted_total{method=\"%s\",position=\"%d\"} %llu\n",
                    sd_spec_method_name((sd_spec_method)m), d + 1, (unsigned long long)s.m[m].pos_accepted[d]);
    tprintf(&b, "# HELP specdec_draft_position_acceptance Acceptance rate of the draft token at this position.\n"
                "# TYPE specdec_draft_position_acceptance gauge\n");
    for (int m = 1; m < n_named_methods(); m++)
        for (int d = 0; d < SV_MAX_POS && s.m[m].pos_drafted[d]; d++)
            tprintf(&b, "specdec_draft_position_acceptance{method=\"%s\",position=\"%d\"} %.6f\n",
                    sd_spec_method_name((sd_spec_method)m), d + 1,
                    (double)s.m[m].pos_accepted[d] / (double)s.m[m].pos_drafted[d]);
    tprintf(&b, "# HELP specdec_auto_rounds_total Rounds of auto's candidates, by why they ran (best: the highest "
                "expected tokens/s; held: kept by the hysteresis; probe).\n# TYPE specdec_auto_rounds_total counter\n");
    for (int k = 0; k < s.n_autos; k++) {
        const sv_auto_counts *a = &s.autos[k];
        tprintf(&b, "specdec_auto_rounds_total{candidate=\"%s\",reason=\"best\"} %llu\n"
                    "specdec_auto_rounds_total{candidate=\"%s\",reason=\"held\"} %llu\n"
                    "specdec_auto_rounds_total{candidate=\"%s\",reason=\"probe\"} %llu\n",
                a->name, (unsigned long long)a->best, a->name, (unsigned long long)a->held, a->name,
                (unsigned long long)a->probe);
    }
    auto_family(&b, &s, "specdec_auto_accepted_tokens_total", "Draft tokens accepted in auto's rounds, by candidate.",
                offsetof(sv_auto_counts, accepted), false);
    auto_family(&b, &s, "specdec_auto_expected_accepted_tokens_total",
                "Draft tokens auto's choice expected its rounds to accept, by candidate (against the accepted: how well "
                "its estimates hold).",
                offsetof(sv_auto_counts, expected), true);
    auto_family(&b, &s, "specdec_auto_drafted_tokens_total", "Draft tokens proposed in auto's rounds, by candidate.",
                offsetof(sv_auto_counts, drafted), false);
    tprintf(&b, "# HELP specdec_http_responses_total HTTP responses by status class.\n"
                "# TYPE specdec_http_responses_total counter\n");
    for (int c = 2; c <= 5; c++)
        tprintf(&b, "specdec_http_responses_total{class=\"%dxx\"} %llu\n", c, (unsigned long long)s.http_status[c]);
    tprintf(&b, "# HELP specdec_http_errors_total HTTP error responses by status.\n"
                "# TYPE specdec_http_errors_total counter\n"
                "specdec_http_errors_total{code=\"400\"} %llu\nspecdec_http_errors_total{code=\"401\"} %llu\n"
                "specdec_http_errors_total{code=\"404\"} %llu\nspecdec_http_errors_total{code=\"413\"} %llu\n"
                "specdec_http_errors_total{code=\"503\"} %llu\nspecdec_http_errors_total{code=\"other\"} %llu\n",
            (unsigned long long)s.errors_400, (unsigned long long)s.errors_401, (unsigned long long)s.errors_404,
            (unsigned long long)s.errors_413, (unsigned long long)s.errors_503, (unsigned long long)s.errors_other);
    tprintf(&b, "# HELP specdec_requests_cancelled_total Requests whose client went away before the end.\n"
                "# TYPE specdec_requests_cancelled_total counter\nspecdec_requests_cancelled_total %llu\n"
                "# HELP specdec_requests_timed_out_total Requests stopped by the per-request timeout.\n"
                "# TYPE specdec_requests_timed_out_total counter\nspecdec_requests_timed_out_total %llu\n",
            (unsigned long long)s.cancelled, (unsigned long long)s.timed_out);
    int pages = s.kv_page_cells > 0 ? (s.kv_cells_used + s.kv_page_cells - 1) / s.kv_page_cells : 0;
    int pages_cap = s.kv_page_cells > 0 ? (s.kv_cells_capacity + s.kv_page_cells - 1) / s.kv_page_cells : 0;
    tprintf(&b,
            "# HELP specdec_queue_length Requests waiting for a sequence.\n# TYPE specdec_queue_length gauge\n"
            "specdec_queue_length %d\n"
            "# HELP specdec_live_sessions Sessions decoding now.\n# TYPE specdec_live_sessions gauge\n"
            "specdec_live_sessions %d\n"
            "# HELP specdec_kv_pages_used KV cache pages in use (target context).\n# TYPE specdec_kv_pages_used gauge\n"
            "specdec_kv_pages_used %d\n"
            "# HELP specdec_kv_pages_capacity KV cache pages of the pool.\n# TYPE specdec_kv_pages_capacity gauge\n"
            "specdec_kv_pages_capacity %d\n"
            "# HELP specdec_kv_cells_used KV cache cells held (whole pages).\n# TYPE specdec_kv_cells_used gauge\n"
            "specdec_kv_cells_used %d\n",
            s.queue_len, s.live, pages, pages_cap, s.kv_cells_used);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
