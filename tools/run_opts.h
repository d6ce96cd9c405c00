/* run_opts: the options every generating command shares (model, draft model, exit heads, sampling, speculative
 * method, engine) — parsed in one place — and opening what they name: models and contexts, validated before any
 * work starts. */
#ifndef SD_TOOLS_RUN_OPTS_H
#define SD_TOOLS_RUN_OPTS_H
#include <stdbool.h>
#include <stdio.h>

#include "specdec.h"
#include "sv_opts.h"

typedef struct run_opts {
    const char *model_path, *tok_path, *draft_path, *draft_type, *heads_path;
    int n_predict;
    bool ignore_eos, no_bos, seed_set, no_mmap, mlock;
    /* load --draft-model (and give it a context) whatever the default method is: the server's requests choose */
    bool draft_any_method;
    sd_sampler_params sp;
    sd_ctx_params cp;
    sd_spec_params spec;
    /* SV: --companion, --sv-profile, --sv-latency */
    const char *companion_path, *sv_profile_path, *sv_latency_path;
} run_opts;

typedef struct run_env {
    sd_model *model, *dmodel;
    sd_ctx *ctx, *dctx;
    sd_exit_heads *heads;
    sd_model_info info;
    sv_env sv; /* SV's companion, profile and latency table */
} run_env;

void run_opts_init(run_opts *o);
/* Takes argv[*i] (and its value) when it is a shared option: 1 taken (*i advanced past the value), 0 not a shared
 * option, -1 bad value (message printed). */
int run_opts_take(run_opts *o, int argc, char **argv, int *i);
/* A command's own option with a value: argv[*i] must be one of names (NULL-terminated). Returns the value (*i
 * advanced past it), or NULL after printing what is wrong (an unknown option, a missing value). */
const char *run_opts_own(int argc, char **argv, int *i, const char *const *names, const char *cmd);
/* The shared options' help text (model/draft/heads, sampling, speculative, engine). */
void run_opts_help(FILE *f);
/* Checks what needs no model, loads the models and heads, validates the method against them, then creates the
 * contexts with n_seq sequences. Prints what it loaded to stderr; on failure prints the error and returns false
 * (env is left for run_env_free). */
bool run_env_open(run_opts *o, int n_seq, run_env *env);
void run_env_free(run_env *env);
#endif
