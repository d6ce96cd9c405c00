/* spec_cli: help text and error messages for speculative method parameters, generated from the registry. */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "specdec.h"

static const char *placeholder(const sd_spec_param_info *in, bool as_keys) {
    switch (in->type) {
    case SD_PARAM_INT: return "N";
    case SD_PARAM_FLOAT: return "X";
    case SD_PARAM_ENUM: return "NAME";
    case SD_PARAM_INT_LIST: return as_keys ? "N+N+..." : "N,N,...";
    case SD_PARAM_FLOAT_LIST: return as_keys ? "X+X+..." : "X,X,...";
    case SD_PARAM_NAME_LIST: return as_keys ? "NAME+NAME+..." : "NAME,NAME,...";
    }
    return "?";
}

static void methods_text(unsigned mask, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int m = SD_SPEC_DRAFT; m < 32 && n < cap && strcmp(sd_spec_method_name((sd_spec_method)m), "?"); m++)
        if (mask & (1u << m)) n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? " " : "", sd_spec_method_name(m));
}

void cli_spec_help(FILE *f, bool as_keys) {
    for (int i = 0; i < sd_spec_n_params(); i++) {
        const sd_spec_param_info *in = sd_spec_param_at(i);
        if (as_keys && !strcmp(in->key, "method")) continue; /* the NAME before the first ':' */
        char name[96], range[96] = "", meth[96];
        snprintf(name, sizeof name, as_keys ? "%s=%s" : "%s %s", as_keys ? in->key : in->cli_flag,
                 placeholder(in, as_keys));
        if (in->type != SD_PARAM_ENUM && in->type != SD_PARAM_NAME_LIST)
            snprintf(range, sizeof range, "%s%.10g, %.10g], ", in->min_open ? "(" : "[", in->min, in->max);
        else
            snprintf(range, sizeof range, "%s, ", in->choices);
        methods_text(in->methods, meth, sizeof meth);
        fprintf(f, "      %-26s %s\n      %-26s   (%sdefault %s; %s)\n", name, in->help, "", range, in->def,
                strcmp(in->key, "method") ? meth : "plain decoding is none");
    }
}

void cli_spec_error(const char *prefix, const char *msg, bool flags) {
    const char *flag = NULL;
    size_t k = strcspn(msg, "=: ");
    if (flags && (msg[k] == '=' || msg[k] == ':') && k < 64) {
        char key[64];
        memcpy(key, msg, k);
        key[k] = 0;
        const sd_spec_param_info *in = sd_spec_param_find(key);
        flag = in ? in->cli_flag : NULL;
    }
    fprintf(stderr, "error: %s%s%s%s%s\n", prefix, msg, flag ? " (" : "", flag ? flag : "", flag ? ")" : "");
}

void cli_pick_accept_head(sd_spec_params *sp, const sd_model *target, const sd_model *draft,
                          sd_accept_head *const *heads, int n) {
    if (sp->ctrl != SD_CTRL_SPECDECPP || n < 1) return;
    for (int i = 0; i < n; i++) {
        sp->accept_head = heads[i];
        if (sd_spec_check(target, draft, sp, NULL) == SD_OK) return;
    }
    sp->accept_head = heads[0];
}
