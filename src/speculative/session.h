/* session (internal side): a session describes each forward it needs instead of running it, so that a scheduler
 * can merge many sessions' forwards: session_next says what the next one is (a prefill chunk, a drafting forward on
 * the draft model's context, the verification block) and session_forward_done takes its result (the next drafting
 * step, or acceptance, emission, cache rollback, controller and drafter updates). sd_session_step runs them alone. */
#ifndef SD_SPEC_SESSION_H
#define SD_SPEC_SESSION_H
#include "speculative/merge.h"
#include "specdec.h"

/* A session on a borrowed sampler (sd_spec_generate's: the caller's RNG stream goes on from where it is). */
sd_status session_new_borrowed(sd_ctx *target, sd_sampler *smp, const sd_spec_params *sp, int seq, int n_predict,
                               bool ignore_eos, sd_session **out, sd_error *err);
/* Called with every emitted token; returning false stops the session after it (sd_spec_generate's callback). */
void session_set_token_cb(sd_session *s, sd_token_cb cb, void *user);
/* The largest block the session's next round can hold (what a scheduler must have room for); 0 when done. */
int session_need(const sd_session *s);
/* Whether the session is still prefilling (its next forward is a prompt chunk). */
bool session_prefilling(const sd_session *s);
/* FWD_SELECT (SV): the round is drafted and its companion has run; it waits for its verification length
 * (session_sv_verify), chosen for it alone or over a scheduler's batch. */
typedef enum { FWD_NONE, FWD_DRAFT, FWD_TARGET, FWD_SELECT } fwd_kind;
/* The session's next forward, described in *r: a prefill chunk of at most budget positions or the round's
 * verification block, on the target (FWD_TARGET); or one of the round's drafting forwards on the draft model's
 * context (FWD_DRAFT: after it ran, session_forward_done, then session_next again, until FWD_TARGET). Drafters
 * without a context of their own draft inside the call. FWD_NONE: nothing to run (done, or failed now). */
fwd_kind session_next(sd_session *s, int budget, fwd_req *r);
/* After r (from session_next) ran, r->status set: the next drafting step, or acceptance and commit. */
void session_forward_done(sd_session *s, fwd_req *r);
/* The context of the session's drafter (the draft model's; NULL: none). */
sd_ctx *session_draft_ctx(const sd_session *s);
/* The context the session's next FWD_DRAFT forward runs on: the draft model's or (SV) the companion's. */
sd_ctx *session_fwd_ctx(const sd_session *s);
/* SV, while the session waits (FWD_SELECT): its drafted count and beta per drafted token ([k]; borrowed). */
int session_sv_betas(const sd_session *s, const float **beta);
sd_sv_latency *session_sv_latency(const sd_session *s);
/* The latency table the session's choices read (SV; SWIFT's automatic tree budget), which live verification passes
 * refresh; NULL when it reads none. */
sd_sv_latency *session_live_latency(const sd_session *s);
/* The latency table a scheduler's merged verification passes refresh for the session: the live one, or auto's (alone,
 * auto refreshes its table itself from its full passes). */
sd_sv_latency *session_batch_latency(const sd_session *s);
/* SV: verify the first n (>= 1) drafted tokens of the waiting round (the rest are dropped unverified). */
void session_sv_verify(sd_session *s, int n);
/* The scheduler the session is in (set by sd_sched_add / cleared when it leaves), so that freeing it removes it. */
void session_set_sched(sd_session *s, sd_sched *sc);
sd_sched *session_sched(const sd_session *s);
/* The verification pass the scheduler runs now (or ran last): the sessions whose blocks it merges, their drafted
 * tokens in all (1 and 0 outside one), and the tokens a session emitted per pass in the one before (1 at first). */
void sched_pass_blocks(const sd_sched *sc, int *seqs, int *drafts, double *tokens_per_seq);
sd_ctx *session_ctx(const sd_session *s);
int session_seq(const sd_session *s);
#endif
