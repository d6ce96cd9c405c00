/* sv_companion: SV's companion — a model with the target's vocabulary in a context of its own (or a context on the
 * target model run through its first E layers and the shared head), kept in step with a session's history like the
 * draft model: each round it runs once over what it has not seen of the history plus the round's drafts but the
 * last, giving its distribution for every drafted token; after the round its cache is cut back to the new history. */
#ifndef SD_SPEC_SV_COMPANION_H
#define SD_SPEC_SV_COMPANION_H
#include "speculative/merge.h"
#include "specdec.h"

typedef struct sv_companion sv_companion;
/* layer_end: 0 = every layer of the companion's model; heads: exit heads for depth layer_end (or NULL). gmax: the
 * most drafts of a round. */
sv_companion *svc_new(sd_ctx *ctx, int seq, int layer_end, const sd_exit_heads *heads, int gmax, sd_error *err);
void svc_free(sv_companion *c);
sd_ctx *svc_ctx(const sv_companion *c);
/* The prompt but its newest token into the companion's cache (alone, in chunks). */
sd_status svc_begin(sv_companion *c, const int32_t *hist, int n, sd_error *err);
/* The round's forward in *r: hist[len .. n) then drafts[0 .. k-1), logits of the last k entries (k >= 1). The
 * pointers stay valid until svc_done. */
void svc_request(sv_companion *c, const int32_t *hist, int n, const int32_t *drafts, int k, fwd_req *r);
/* After r ran (status SD_OK): the companion's logits of the k drafted tokens ([k][V], row i predicts drafts[i]). */
const float *svc_done(sv_companion *c, const fwd_req *r);
/* The session's history is hist[0 .. n) now: keep the common prefix (at most n - 1 positions). */
void svc_on_verified(sv_companion *c, int n);
/* Clears the companion's sequence. */
void svc_clear(sv_companion *c);
#endif
