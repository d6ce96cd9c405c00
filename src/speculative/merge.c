#include "speculative/merge.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

struct merge_ws {
    sd_ctx *ctx;
    int B, V, E, L;
    int32_t *token, *seq, *parent, *pos; /* [B] merged block */
    uint8_t *want;                       /* [B] */
    float *embd;                         /* [B][E] */
    float *logits;                       /* [B][V] */
    float *hl;                           /* [L][B][E], allocated when a request first wants hidden states */
    int *idx;                            /* [cap_req] the requests of one call */
    uint8_t *done;                       /* [cap_req] */
    int cap_req;
    uint64_t calls;
};

merge_ws *merge_ws_new(sd_ctx *ctx) {
    merge_ws *ws = calloc(1, sizeof *ws);
    if (!ws) return NULL;
    sd_model_info info;
    sd_model_get_info(sd_ctx_model(ctx), &info);
    ws->ctx = ctx;
    ws->B = sd_ctx_n_batch(ctx);
    ws->V = info.n_vocab;
    ws->E = info.n_embd;
    ws->L = info.n_layer;
    const size_t B = (size_t)ws->B;
    ws->token = malloc(B * sizeof *ws->token);
    ws->seq = malloc(B * sizeof *ws->seq);
    ws->parent = malloc(B * sizeof *ws->parent);
    ws->pos = malloc(B * sizeof *ws->pos);
    ws->want = malloc(B);
    ws->embd = malloc(B * ws->E * sizeof *ws->embd);
    ws->logits = malloc(B * ws->V * sizeof *ws->logits);
    if (!ws->token || !ws->seq || !ws->parent || !ws->pos || !ws->want || !ws->embd || !ws->logits) {
        merge_ws_free(ws);
        return NULL;
    }
    return ws;
}

void merge_ws_free(merge_ws *ws) {
    if (!ws) return;
    free(ws->token);
    free(ws->seq);
    free(ws->parent);
    free(ws->pos);
    free(ws->want);
    free(ws->embd);
    free(ws->logits);
    free(ws->hl);
    free(ws->idx);
    free(ws->done);
    free(ws);
}

uint64_t merge_calls(const merge_ws *ws) { return ws->calls; }

sd_status fwd_req_run(sd_ctx *ctx, fwd_req *r) {
    sd_block b = {.n = r->n, .token = r->token, .embd = r->embd, .parent = r->parent, .pos = r->pos, .seq_all = r->seq};
    sd_forward_args a = {.layer_begin = r->layer_begin, .want_logits = r->want, /* no logits computed without r->logits */
                         .logits = r->logits, .hidden_layers = r->hidden_layers, .layer_end = r->layer_end,
                         .exit_heads = r->exit_heads};
    return r->status = sd_forward(ctx, &b, &a, &r->err);
}

/* One request in its own call (no copies). */
static void run_alone(merge_ws *ws, fwd_req *r) {
    ws->calls++;
    fwd_req_run(ws->ctx, r);
}

/* Requests reqs[idx[0..m)] (same layer_begin, n_batch entries at most together) in one call. */
static void run_merged(merge_ws *ws, fwd_req *reqs, const int *idx, int m) {
    const int lb = reqs[idx[0]].layer_begin, E = ws->E, V = ws->V;
    bool any_parent = false, any_pos = false, any_hl = false;
    int N = 0;
    for (int j = 0; j < m; j++) {
        const fwd_req *r = &reqs[idx[j]];
        any_parent |= r->parent != NULL;
        any_pos |= r->pos != NULL;
        any_hl |= r->hidden_layers != NULL;
        N += r->n;
    }
    if (any_hl && !ws->hl) ws->hl = malloc((size_t)ws->L * ws->B * E * sizeof *ws->hl);
    if (any_hl && !ws->hl) {
        for (int j = 0; j < m; j++) run_alone(ws, &reqs[idx[j]]);
        return;
    }
    for (int j = 0, off = 0; j < m; off += reqs[idx[j]].n, j++) {
        const fwd_req *r = &reqs[idx[j]];
        const int base = any_pos && !r->pos ? sd_kv_len(ws->ctx, r->seq, lb) : 0;
        if (lb == 0) memcpy(ws->token + off, r->token, (size_t)r->n * sizeof *ws->token);
        else memcpy(ws->embd + (size_t)off * E, r->embd, (size_t)r->n * E * sizeof *ws->embd);
        for (int i = 0; i < r->n; i++) {
            ws->seq[off + i] = r->seq;
            int pa = r->parent ? r->parent[i] : i - 1;
            ws->parent[off + i] = pa < 0 ? -1 : off + pa;
            ws->pos[off + i] = r->pos ? r->pos[i] : base + i;
            ws->want[off + i] = r->logits != NULL && r->want[i];
        }
    }
    sd_block b = {.n = N, .token = lb == 0 ? ws->token : NULL, .embd = lb > 0 ? ws->embd : NULL, .seq = ws->seq,
                  .parent = any_parent ? ws->parent : NULL, .pos = any_pos ? ws->pos : NULL};
    sd_forward_args a = {.layer_begin = lb, .want_logits = ws->want, .logits = ws->logits,
                         .hidden_layers = any_hl ? ws->hl : NULL, .layer_end = reqs[idx[0]].layer_end,
                         .exit_heads = reqs[idx[0]].exit_heads};
    ws->calls++;
    sd_error e;
    if (sd_forward(ws->ctx, &b, &a, &e) != SD_OK) { /* nothing changed: find whose it is */
        for (int j = 0; j < m; j++) run_alone(ws, &reqs[idx[j]]);
        return;
    }
    const float *lg = ws->logits;
    for (int j = 0, off = 0; j < m; off += reqs[idx[j]].n, j++) {
        fwd_req *r = &reqs[idx[j]];
        r->status = SD_OK;
        if (r->logits) {
            int w = 0;
            for (int i = 0; i < r->n; i++) w += r->want[i] != 0;
            memcpy(r->logits, lg, (size_t)w * V * sizeof *lg);
            lg += (size_t)w * V;
        }
        if (r->hidden_layers)
            for (int l = 0; l < ws->L - lb; l++)
                memcpy(r->hidden_layers + (size_t)l * r->n * E, ws->hl + ((size_t)l * N + off) * E,
                       (size_t)r->n * E * sizeof *ws->hl);
    }
}

sd_status merge_run(merge_ws *ws, fwd_req *reqs, int n_req, sd_error *err) {
    if (n_req > ws->cap_req) { /* grows with the number of sessions, then stays */
        int *idx = realloc(ws->idx, (size_t)n_req * sizeof *idx);
        if (idx) ws->idx = idx;
        uint8_t *done = realloc(ws->done, (size_t)n_req);
        if (done) ws->done = done;
        if (!idx || !done) return err_set(err, SD_ERR_NOMEM, "out of memory merging forward requests");
        ws->cap_req = n_req;
    }
    int *idx = ws->idx;
    uint8_t *done = ws->done;
    if (n_req > 0) memset(done, 0, (size_t)n_req);
    /* requests in order; each call takes the first pending one and every later one with its layer range that fits */
    for (int first = 0; first < n_req; first++) {
        if (done[first]) continue;
        int m = 0, N = 0;
        for (int j = first; j < n_req; j++) {
            if (done[j] || reqs[j].layer_begin != reqs[first].layer_begin || N + reqs[j].n > ws->B) continue;
            if (reqs[j].layer_end != reqs[first].layer_end || reqs[j].exit_heads != reqs[first].exit_heads) continue;
            idx[m++] = j;
            N += reqs[j].n;
            done[j] = 1;
        }
        if (m == 1) run_alone(ws, &reqs[idx[0]]);
        else run_merged(ws, reqs, idx, m);
    }
    return SD_OK;
}
