/* registry: every speculative method, controller and method parameter declared once — key, CLI flag, type, range,
 * default, help, the methods it applies to and the field of sd_spec_params it sets. The public side is in specdec.h
 * (sd_spec_set / sd_spec_parse / sd_spec_check / sd_spec_param_at ...); this header holds what the library's other
 * parts share with it. */
#ifndef SD_SPEC_REGISTRY_H
#define SD_SPEC_REGISTRY_H
#include "specdec.h"

/* Bit masks of methods (1u << sd_spec_method). */
#define SD_MASK(m) (1u << (unsigned)(m))
#define SD_MASK_CHAIN (SD_MASK(SD_SPEC_DRAFT) | SD_MASK(SD_SPEC_NGRAM) | SD_MASK(SD_SPEC_EARLY_EXIT))
#define SD_MASK_SELF (SD_MASK(SD_SPEC_EARLY_EXIT) | SD_MASK(SD_SPEC_DEL) | SD_MASK(SD_SPEC_SPECBOUND))
#define SD_MASK_ANY (SD_MASK(SD_SPEC_NONE) | SD_MASK(SD_SPEC_DRAFT) | SD_MASK_SELF | SD_MASK(SD_SPEC_NGRAM) | SD_MASK(SD_SPEC_SWIFT) | \
                     SD_MASK(SD_SPEC_AUTO))
/* SV: the methods that draft chains (any drafter but plain decoding and SpecBound's width-bounded drafts; SWIFT's
 * token trees are refused apart; auto chooses its own lengths) */
#define SD_MASK_SV (SD_MASK_ANY & ~(SD_MASK(SD_SPEC_NONE) | SD_MASK(SD_SPEC_SPECBOUND) | SD_MASK(SD_SPEC_AUTO)))

/* Every value of *sp within its registry range and the cross-parameter rules (no model needed). */
sd_status registry_check_values(const sd_spec_params *sp, sd_error *err);
/* The rules that depend on the target model (layer counts, exit heads) and the draft model. */
/* auto: the candidate methods it chooses from for this target and draft model (bit per sd_spec_method): those
 * sp->auto_candidates names, or (0) every one available. */
unsigned registry_auto_pool(const sd_model *target, const sd_model *draft, const sd_spec_params *sp);
sd_status registry_check_models(const sd_model *target, const sd_model *draft, const sd_spec_params *sp,
                                sd_error *err);
#endif
