/* spec: the draft -> verify -> accept loop's drafter interface (a small vtable per drafter).
 *
 * The loop keeps `hist` = prompt + emitted tokens; the target's cache holds hist[0 .. n-1) and hist[n-1] (the
 * newest token) is pending: every round verifies the block [hist[n-1], drafts...].
 *   begin        after the prompt is known (reset and prefill the drafter's own state)
 *   draft        propose up to max tokens continuing hist[0..n) (hist has room for max more: a drafter may
 *                write its drafts there, e.g. as the penalty's history); asks the controller before each token;
 *                writes tokens[i] and, when sampling and q != NULL, q[i*V..] (the draft distribution);
 *                *q_onehot = true when the drafter has no distribution (q unused). Returns the count or -1 (err set).
 *   verify       optional: the target's logits for the block [hist[n-1], tokens[0..k)) into logits[(k+1)*V]
 *                (NULL: one forward over the block through all layers). Early exit verifies from cached states.
 *   on_verified  hist[0..n) is the new history (n_accepted drafts kept + the target's token)
 */
#ifndef SD_SPEC_SPEC_H
#define SD_SPEC_SPEC_H
#include <stdbool.h>
#include <stdint.h>

#include "ctrl/ctrl.h"
#include "specdec.h"

typedef struct drafter drafter;
struct drafter {
    const char *name;
    double t_aux; /* seconds of method bookkeeping outside draft/verify (DEL: shadow tokens), for the stats */
    sd_status (*begin)(drafter *d, const int32_t *hist, int n, sd_error *err);
    int (*draft)(drafter *d, int32_t *hist, int n, int max, ctrl *c, int32_t *tokens, float *q, bool *q_onehot,
                 sd_error *err);
    sd_status (*verify)(drafter *d, const int32_t *hist, int n, const int32_t *tokens, int k, float *logits,
                        sd_error *err);
    void (*on_verified)(drafter *d, const int32_t *hist, int n, int n_accepted);
    void (*free)(drafter *d);
};

/* A separate draft model in its own context; smp: the target's sampler (its parameters are used for q). */
drafter *drafter_model_new(sd_ctx *draft_ctx, const sd_sampler *smp, sd_error *err);
/* Prompt lookup over the history. */
drafter *drafter_ngram_new(int n_max, int n_min);
/* Early exit on the target's own context: layers [0, E) draft, [E, L) verify from the exit cache. */
/* SpecBound on the target's own context. */
drafter *drafter_bound_new(sd_ctx *target, const sd_spec_params *sp, const sd_exit_heads *heads, int gmax, sd_error *err);
struct del_state;
/* del (may be NULL) makes it DEL: the exit depth is del->E each round and the shadow-token statistics are fed. */
drafter *drafter_exit_new(sd_ctx *target, int exit_layer, const sd_exit_heads *heads, const sd_sampler *smp, int gmax,
                          struct del_state *del, int del_init_tokens, sd_error *err);
#endif
