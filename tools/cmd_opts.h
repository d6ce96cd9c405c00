/* cmd_opts: the option loop of the commands whose options are a fixed table (train exit-heads, train accept-head,
 * gen-model; the generating commands share run_opts instead): each option names where its value goes and its range,
 * and one loop reads argv against the table with cli_args' parsers and messages. */
#ifndef SD_TOOLS_CMD_OPTS_H
#define SD_TOOLS_CMD_OPTS_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum cmd_opt_kind {
    CMD_OPT_FLAG,     /* no value: *(bool *)dst = true */
    CMD_OPT_STR,      /* *(const char **)dst = the value (argv's string) */
    CMD_OPT_INT,      /* cli_int in [lo, hi] into *(int *)dst */
    CMD_OPT_FLOAT,    /* cli_float in [lo, hi] into *(float *)dst */
    CMD_OPT_U64,      /* cli_u64 into *(uint64_t *)dst (seeds) */
    CMD_OPT_INT_LIST, /* cli_int_list in [lo, hi], at most max values, into (int *)dst and the count into *count */
} cmd_opt_kind;

typedef struct cmd_opt {
    const char *name, *alias; /* e.g. "--out" and "-o"; alias may be NULL */
    cmd_opt_kind kind;
    void *dst;
    double lo, hi;            /* CMD_OPT_INT, CMD_OPT_FLOAT, CMD_OPT_INT_LIST */
    int max, *count;          /* CMD_OPT_INT_LIST */
} cmd_opt;

/* Table entries (the destination's type is checked: a float option cannot point at an int). */
#define CMD_OPT_DST(T, p) ((void *)(1 ? (p) : (T *)0))
#define CMD_FLAG(name, dst) {name, NULL, CMD_OPT_FLAG, CMD_OPT_DST(bool, dst), 0, 0, 0, NULL}
#define CMD_STR(name, alias, dst) {name, alias, CMD_OPT_STR, CMD_OPT_DST(const char *, dst), 0, 0, 0, NULL}
#define CMD_INT(name, dst, lo, hi) {name, NULL, CMD_OPT_INT, CMD_OPT_DST(int, dst), lo, hi, 0, NULL}
#define CMD_FLOAT(name, dst, lo, hi) {name, NULL, CMD_OPT_FLOAT, CMD_OPT_DST(float, dst), lo, hi, 0, NULL}
#define CMD_U64(name, dst) {name, NULL, CMD_OPT_U64, CMD_OPT_DST(uint64_t, dst), 0, 0, 0, NULL}
#define CMD_INT_LIST(name, dst, lo, hi, max, count) \
    {name, NULL, CMD_OPT_INT_LIST, CMD_OPT_DST(int, dst), lo, hi, max, count}
#define CMD_OPTS_END {NULL, NULL, CMD_OPT_FLAG, NULL, 0, 0, 0, NULL}

/* Reads argv[first .. argc) against opts (ended by an entry whose name is NULL); a later option overrides an earlier
 * one. Returns -1 when every argument was taken; otherwise the command's exit status: 0 after printing usage to
 * stdout for -h / --help, 2 after a message on stderr (a value missing, out of range or malformed; an unknown option:
 * "unknown option 'X' (see specdec <cmd> --help)"). */
int cmd_opts_parse(int argc, char **argv, int first, const cmd_opt *opts, const char *cmd, void (*usage)(FILE *));

/* A trainer's progress callback: the line to stderr. */
void cmd_progress_line(void *user, const char *line);
#endif
