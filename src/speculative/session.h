/* session (internal side): a session advances in two halves so that a scheduler can merge many sessions' forward
 * passes: session_propose does the session's own work up to its next target forward (the next prefill chunk, or
 * drafting and the verify plan) and describes that forward; session_commit takes its result (acceptance, emission,
 * cache rollback, controller and drafter updates). sd_session_step is propose -> run alone -> commit. */
#ifndef SD_SPEC_SESSION_H
#define SD_SPEC_SESSION_H
#include "speculative/merge.h"
#include "specdec.h"

/* A session on a borrowed sampler (sd_spec_generate's: the caller's RNG stream goes on from where it is). */
sd_status session_new_borrowed(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp, int seq, int n_predict,
                               bool ignore_eos, sd_session **out, sd_error *err);
/* Called with every emitted token; returning false stops the session after it (sd_spec_generate's callback). */
void session_set_token_cb(sd_session *s, sd_token_cb cb, void *user);
/* The largest block the session's next forward can hold (what a scheduler must have room for); 0 when done. */
int session_need(const sd_session *s);
/* Whether the session is still prefilling (its next forward is a prompt chunk). */
bool session_prefilling(const sd_session *s);
/* Prepares the next forward into *r: a prefill chunk of at most `budget` positions, or the round's verification
 * block (drafting runs here). Returns false when there is nothing to run (done, or failed now). */
bool session_propose(sd_session *s, int budget, fwd_req *r);
/* After r (from session_propose) ran: r->status says how. */
void session_commit(sd_session *s, const fwd_req *r);
sd_ctx *session_ctx(const sd_session *s);
int session_seq(const sd_session *s);
#endif
