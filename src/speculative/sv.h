/* sv: Speculative Verification's numbers (methods.md 6) — the indicators S and A of a drafted token, the profile
 * table beta(S, A) (built from recorded tokens with equal-count bins, or given), and the goodput-maximising choice of
 * how many drafted tokens to verify, for one sequence or a batch (sd_sv_select). The public side is the SV section of
 * specdec.h; the latency table is sv_latency.c, the companion's forwards sv_companion.c. */
#ifndef SD_SPEC_SV_H
#define SD_SPEC_SV_H
#include <stdint.h>

#include "specdec.h"

/* S = sum_v min(pd[v], pc[v]) and A = min(1, pc[x] / pd[x]) over V entries; pd NULL = one-hot on x. */
void spv_indicators(const float *pd, const float *pc, int V, int32_t x, float *s, float *a);
/* softmax(logits) at temperature 1 into p[V]. */
void spv_softmax(const float *logits, int V, float *p);
#endif
