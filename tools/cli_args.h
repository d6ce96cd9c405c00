/* cli_args: strict number parsing for command-line flags (errors name the flag). */
#ifndef SD_TOOLS_CLI_ARGS_H
#define SD_TOOLS_CLI_ARGS_H
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "specdec.h"

/* Whether s starts a plain decimal number: a digit, or '-' and a digit (strtol alone also takes spaces and '+'). */
static inline bool cli_starts_number(const char *s) {
    return s && ((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9'));
}

static inline bool cli_int(const char *flag, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = cli_starts_number(s) ? strtol(s, &end, 10) : 0;
    if (!cli_starts_number(s) || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "error: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s ? s : "(nothing)");
        return false;
    }
    *out = (int)v;
    return true;
}

/* A comma-separated list of integers in [lo, hi] (at most `max` of them) into out[], the count into *n. Every
 * element is a whole number (no empty elements, no trailing comma, no overflow); a longer list is an error, not cut.
 * The one parser for every list flag (--ks, --depths, --parallel). */
static inline bool cli_int_list(const char *flag, const char *s, long lo, long hi, int max, int *out, int *n) {
    *n = 0;
    const char *q = s ? s : "";
    for (;;) {
        char *end;
        errno = 0;
        long v = cli_starts_number(q) ? strtol(q, &end, 10) : 0;
        if (!cli_starts_number(q) || errno || v < lo || v > hi || (*end && *end != ',') || (*end == ',' && !end[1])) {
            fprintf(stderr, "error: %s expects a comma-separated list of integers in [%ld, %ld], got '%s'\n", flag, lo,
                    hi, s ? s : "(nothing)");
            return false;
        }
        if (*n == max) {
            fprintf(stderr, "error: %s takes at most %d values, got more in '%s'\n", flag, max, s);
            return false;
        }
        out[(*n)++] = (int)v;
        if (!*end) return true;
        q = end + 1;
    }
}

static inline bool cli_u64(const char *flag, const char *s, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = cli_starts_number(s) && *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!cli_starts_number(s) || *s == '-' || *end || errno) {
        fprintf(stderr, "error: %s expects a non-negative integer, got '%s'\n", flag, s ? s : "(nothing)");
        return false;
    }
    *out = v;
    return true;
}

static inline bool cli_float(const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "error: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s ? s : "(nothing)");
        return false;
    }
    *out = (float)v;
    return true;
}
/* Speculative method parameters (spec_cli.c, from the library's registry). */
/* Prints one line per registry parameter: generate's flags ("--gamma-max N") when as_keys is false, --methods keys
 * ("gamma_max=N") when true; each with its help, range, default and the methods it applies to. */
void cli_spec_help(FILE *f, bool as_keys);
/* Prints "error: <prefix><msg>" for a failed sd_spec_* call; when the message starts with a registry key ("exit=5:
 * ...") and flags is true, adds the generate flag that sets it ("(--exit-layer)"). */
void cli_spec_error(const char *prefix, const char *msg, bool flags);
/* SpecDec++ with several acceptance heads (--accept-head given more than once): sets sp->accept_head to the first of
 * heads[0..n) the registry's check takes for sp's drafter (sd_spec_check against target and draft), or heads[0] when
 * none does (the check then names the mismatch); leaves it alone unless sp->ctrl is specdecpp. */
void cli_pick_accept_head(sd_spec_params *sp, const sd_model *target, const sd_model *draft,
                          sd_accept_head *const *heads, int n);

/* The head of a subcommand's option loop: reads argv[*i] into *flag and, for options with a value, argv[*i + 1]
 * into *val (advancing *i). Returns -1 to go on; otherwise the command's exit status: 0 after printing usage for
 * -h/--help, 2 (after a message) when a value is missing. `no_value` lists flags that take none ("--ignore-eos"),
 * may be NULL. */
static inline int cli_take(int argc, char **argv, int *i, const char **flag, const char **val, const char *cmd,
                           const char *const *no_value, void (*usage)(FILE *)) {
    *flag = argv[*i];
    *val = NULL;
    if (!strcmp(*flag, "-h") || !strcmp(*flag, "--help")) {
        usage(stdout);
        return 0;
    }
    for (int k = 0; no_value && no_value[k]; k++)
        if (!strcmp(*flag, no_value[k])) return -1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "error: %s needs a value (see specdec %s --help)\n", *flag, cmd);
        return 2;
    }
    *val = argv[++*i];
    return -1;
}
#endif
