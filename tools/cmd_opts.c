#include "cmd_opts.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cli_args.h"

static const cmd_opt *find(const cmd_opt *opts, const char *a) {
    for (; opts->name; opts++)
        if (!strcmp(a, opts->name) || (opts->alias && !strcmp(a, opts->alias))) return opts;
    return NULL;
}

/* The value v of option o (as typed: a) into its destination; false after a message. */
static bool take(const cmd_opt *o, const char *a, const char *v) {
    switch (o->kind) {
    case CMD_OPT_FLAG: *(bool *)o->dst = true; return true;
    case CMD_OPT_STR: *(const char **)o->dst = v; return true;
    case CMD_OPT_INT: return cli_int(a, v, (long)o->lo, (long)o->hi, o->dst);
    case CMD_OPT_FLOAT: return cli_float(a, v, o->lo, o->hi, o->dst);
    case CMD_OPT_U64: {
        unsigned long long s;
        if (!cli_u64(a, v, &s)) return false;
        *(uint64_t *)o->dst = s;
        return true;
    }
    case CMD_OPT_INT_LIST: return cli_int_list(a, v, (long)o->lo, (long)o->hi, o->max, o->dst, o->count);
    }
    return false;
}

int cmd_opts_parse(int argc, char **argv, int first, const cmd_opt *opts, const char *cmd, void (*usage)(FILE *)) {
    for (int i = first; i < argc; i++) {
        const cmd_opt *o = find(opts, argv[i]);
        const char *const this_flag[] = {argv[i], NULL}; /* a flag takes no value */
        const char *a, *v;
        int tk = cli_take(argc, argv, &i, &a, &v, cmd, o && o->kind == CMD_OPT_FLAG ? this_flag : NULL, usage);
        if (tk >= 0) return tk;
        if (!o) {
            fprintf(stderr, "error: unknown option '%s' (see specdec %s --help)\n", a, cmd);
            return 2;
        }
        if (!take(o, a, v)) return 2;
    }
    return -1;
}

void cmd_progress_line(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}
