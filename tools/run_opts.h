/* run_opts: the options every generating command shares (model, draft model, exit heads, sampling, speculative
 * method, engine) — parsed in one place — and opening what they name: models and contexts, validated before any
 * work starts. */
#ifndef SD_TOOLS_RUN_OPTS_H
#define SD_TOOLS_RUN_OPTS_H
#include <stdbool.h>
#include <stdio.h>

#include "specdec.h"
#include "sv_opts.h"

enum { RUN_MAX_HEADS = 8 };

typedef struct run_opts {
    const char *model_path, *tok_path, *draft_path, *draft_type, *heads_path;
    const char *accept_paths[RUN_MAX_HEADS]; /* SpecDec++: --accept-head (repeatable: one per drafter) */
    int n_accept;
    int sv_lat_n; /* commands with several methods: the latency table reaches n 0..sv_lat_n (sv_latency_reach) */
    int n_predict;
    bool ignore_eos, no_bos, seed_set, no_mmap, mlock;
    /* load --draft-model (and give it a context) whatever the default method is: the server's requests choose */
    bool draft_any_method;
    sd_sampler_params sp;
    sd_ctx_params cp;
    sd_spec_params spec;
    /* SWIFT */
    const char *skip_set_path; /* --skip-set FILE: the optimiser state, read when the file exists, written at the end */
    bool swift_any_method;     /* make a SWIFT state whatever the default method is (the server's requests choose) */
    bool auto_any_method;      /* make an auto state whatever the default method is (likewise) */
    /* SV: --companion, --sv-profile, --sv-latency */
    const char *companion_path, *sv_profile_path, *sv_latency_path;
} run_opts;

typedef struct run_env {
    sd_model *model, *dmodel;
    sd_ctx *ctx, *dctx;
    sd_exit_heads *heads;
    sd_model_info info;
    sd_swift_state *swift; /* SWIFT's optimiser state (--spec swift), or NULL */
    sd_auto_state *autos;  /* auto's estimates across generations (--spec auto), or NULL */
    sd_accept_head *accept[RUN_MAX_HEADS]; /* SpecDec++: the --accept-head files */
    int n_accept;
    sv_env sv; /* SV's companion, profile and latency table */
} run_env;

void run_opts_init(run_opts *o);
/* What run_opts_arg found at argv[*i]. */
typedef enum run_arg {
    RUN_ARG_OWN,    /* one of the command's own options: *val is its value */
    RUN_ARG_SHARED, /* a shared option, taken into *o */
    RUN_ARG_HELP,   /* -h / --help: usage(stdout) was printed; the command exits 0 */
    RUN_ARG_BAD,    /* an unknown option, a missing or bad value: the message was printed; the command exits 2 */
} run_arg;
/* One step of a command's option loop: argv[*i] is help, a shared option or one of own (NULL-terminated names, each
 * taking a value). *i is advanced past any value; cmd names the command in messages ("bench batch"). */
run_arg run_opts_arg(run_opts *o, int argc, char **argv, int *i, const char *const *own, const char *cmd,
                     void (*usage)(FILE *), const char **val);
/* The shared options' help text (model/draft/heads, sampling, speculative, engine). */
void run_opts_help(FILE *f);
/* Checks what needs no model, loads the models and heads, validates the method against them, then creates the
 * contexts with n_seq sequences. Prints what it loaded to stderr; on failure prints the error and returns false
 * (env is left for run_env_free). */
bool run_env_open(run_opts *o, int n_seq, run_env *env);
void run_env_free(run_env *env);
/* SpecDec++: sp->accept_head = the first loaded head that fits sp's drafter (cli_pick_accept_head). */
void run_env_pick_accept_head(const run_env *env, sd_spec_params *sp);
/* SWIFT: writes the optimiser state to --skip-set FILE (when given); false after printing why it could not. */
bool run_env_save_swift(const run_opts *o, const run_env *env);
/* Adds st's auto candidates (by name), estimator and decode times into sum (which starts zeroed). */
void run_auto_add(sd_spec_stats *sum, const sd_spec_stats *st);
/* auto: its candidates' rounds (and why they ran) and its estimators' time, to f (nothing for other methods). */
void run_print_auto(FILE *f, const sd_spec_stats *st);
/* SWIFT: "SWIFT: skip set a1 m3 ... (k of n sub-layers), matchness m; ..." to f (nothing without a state), then
 * the matchness over time and, with a SWIFT acceptance head, how far its training set is from the set used. */
void run_env_print_swift(FILE *f, const run_env *env, const sd_spec_stats *st);
/* SWIFT's matchness over time: "0.812@1 0.875@4 ..." (the best matchness after each improvement @ its step), or "-". */
void swift_print_history(FILE *f, const sd_swift_state *st);
#endif
