/* method: everything that depends on which speculative method sd_spec_params names — validation, how many drafts a
 * round may hold, the drafter's context room, and building the drafter + controller pair — so the engine loop works
 * through the vtables only. */
#ifndef SD_SPEC_METHOD_H
#define SD_SPEC_METHOD_H
#include "ctrl/ctrl.h"
#include "speculative/spec.h"
#include "specdec.h"

struct del_state;

typedef struct spec_method {
    drafter *d; /* NULL for SD_SPEC_NONE */
    ctrl *c;
    struct del_state *del; /* DEL's statistics (shared by its drafter and controller), else NULL */
    bool swift;            /* d is SWIFT's drafter */
    bool autod;            /* d is auto's drafter (c its controller view) */
} spec_method;

sd_status method_check(sd_ctx *target, const sd_spec_params *sp, sd_error *err);
/* The most drafts one round can hold (buffer sizes). */
int method_max_drafts(const sd_spec_params *sp);
/* The separate draft model's context when the method drafts with it (draft; auto with the draft model among its
 * candidates), else NULL. */
sd_ctx *method_draft_ctx(const sd_spec_params *sp);
/* Positions the drafter's own context holds (a separate draft model's), else target_n_ctx. */
int method_ctx_room(const sd_spec_params *sp, int target_n_ctx);
/* The method's drafter and controller for sequence seq (of the target, and of the draft model's context). On failure
 * *m is left empty (method_free is still safe). */
sd_status method_new(sd_ctx *target, int seq, sd_sampler *smp, const sd_spec_params *sp, int gmax, spec_method *m,
                     sd_error *err);
/* Method-specific statistics (DEL: mean exit depth and draft bound). */
void method_stats(const spec_method *m, sd_spec_stats *s);
void method_free(spec_method *m);
#endif
