/* merge: many sessions' forward requests (prefill chunks, verification blocks) run in as few sd_forward calls as
 * possible. Requests that start at the same layer share a call (sequence ids keep them apart) up to n_batch entries;
 * each request's logits and hidden states are scattered back to its own buffers. Batch invariance makes every
 * request's results the same bits as when it runs alone. */
#ifndef SD_SPEC_MERGE_H
#define SD_SPEC_MERGE_H
#include <stdbool.h>
#include <stdint.h>

#include "specdec.h"

typedef struct fwd_req {
    int seq;
    int layer_begin;       /* 0: from token ids; > 0: from embd (runs [layer_begin, n_layer)) */
    int n;                 /* entries, 1..n_batch */
    const int32_t *token;  /* [n] when layer_begin == 0 */
    const float *embd;     /* [n][n_embd] when layer_begin > 0 */
    const int32_t *parent; /* [n] tree parents within the request (-1 = root); NULL = a chain */
    const int32_t *pos;    /* [n] positions; NULL = consecutive after the sequence's length */
    const uint8_t *want;   /* [n] nonzero = that entry's logits are wanted (with logits) */
    float *logits;         /* [n_wanted][n_vocab] out, in entry order; NULL = none */
    float *hidden_layers;  /* [n_layer - layer_begin][n][n_embd] out; NULL = not wanted */
    sd_status status;      /* out */
    sd_error err;          /* out, when status != SD_OK */
    /* SV's companion exit: run layers [layer_begin, layer_end) only (0: n_layer), the logits through exit_heads */
    int layer_end;
    const sd_exit_heads *exit_heads;
} fwd_req;

typedef struct merge_ws merge_ws;
merge_ws *merge_ws_new(sd_ctx *ctx);
void merge_ws_free(merge_ws *ws);
/* Runs every request. A merged call that fails is retried request by request, so a failure stays with the request
 * that caused it (its status and err are set; the others run). Returns SD_OK unless out of memory. */
sd_status merge_run(merge_ws *ws, fwd_req *reqs, int n_req, sd_error *err);
/* One request in its own forward call on ctx; sets and returns r->status. */
sd_status fwd_req_run(sd_ctx *ctx, fwd_req *r);
/* Forward calls made so far (for tests and stats). */
uint64_t merge_calls(const merge_ws *ws);
#endif
