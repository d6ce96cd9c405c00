/* sv_opts: what Speculative Verification needs in the CLI and the server — the profile file (JSON, read and written
 * here with cJSON so that the library stays free of it), the companion (a model file in a context of its own, or a
 * context on the target model for --companion-exit alone) and the latency table (measured at start-up, or read from
 * / written to a cache file keyed by the model and the thread count). */
#ifndef SD_TOOLS_SV_OPTS_H
#define SD_TOOLS_SV_OPTS_H
#include <stdbool.h>
#include <stddef.h>

#include "specdec.h"

typedef struct sv_env {
    sd_model *cmodel;       /* --companion FILE (NULL: none, or the target itself) */
    sd_ctx *cctx;           /* the companion's context */
    sd_sv_profile *profile; /* --sv-profile */
    sd_sv_latency *lat;
    int lat_n;              /* the latency table reaches n = 0..lat_n at least, besides the longest round of the
                               method it is opened for (commands with several methods: sv_latency_reach) */
} sv_env;

/* Reads a profile written by sv_profile_write_json; refuses one for another target (the library's check) and files
 * that are not profiles (corrupt JSON, missing or wrong fields), with a message in err naming the file. */
bool sv_profile_read_json(const char *path, const sd_model *target, sd_sv_profile **out, char *err, size_t cap);
/* Writes p (and how it was made) as JSON. */
bool sv_profile_write_json(const char *path, const sd_sv_profile *p, const sd_sv_profile_info *info,
                           const char *target_path, const char *draft, const char *companion);
/* Opens what SV needs for sp (companion_exit and verify from it) on target / tctx: profile_path (may be NULL unless
 * verify=sv), companion_path (NULL: with companion_exit > 0, the target's first E layers), latency_path (NULL:
 * measured now; else loaded when it is a table for this model and thread count, measured and written otherwise);
 * the latency table also for SWIFT's automatic tree budget (tree_nodes < 0).
 * What e holds already is kept (e starts zeroed). Sets sp's companion_ctx, sv_profile and sv_latency. Prints what
 * it did and any error (then returns false). */
bool sv_env_open(sv_env *e, sd_spec_params *sp, const char *profile_path, const char *companion_path,
                 const char *latency_path, sd_model *target, sd_ctx *tctx);
/* For commands with several methods (bench spec, bench batch): when one needs a companion (verify=sv or
 * companion_exit > 0) or the latency table (also SWIFT's tree_nodes=-1) and e is not open yet, opens it for that
 * method (as sv_env_open); then gives every method e's companion, profile and latency table. */
bool sv_env_for_methods(sv_env *e, sd_spec_params *ms, int n_m, const char *profile_path, const char *companion_path,
                        const char *latency_path, sd_model *target, sd_ctx *tctx);
/* Commands with several methods: the longest round (at most 32 drafts) of those of ms[0..n_m) that read the latency
 * table (verify=sv, SWIFT's tree_nodes=-1), 0 when none does; what sv_env.lat_n must be for the table to serve them
 * all (sv_env_for_methods sets it; run_opts.sv_lat_n passes it to run_env_open, which may open the table first). */
int sv_latency_reach(const sd_spec_params *ms, int n_m);
void sv_env_free(sv_env *e);
#endif
