#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sd_status_str(sd_status st) {
    switch (st) {
    case SD_OK: return "ok";
    case SD_ERR_IO: return "i/o error";
    case SD_ERR_FORMAT: return "invalid file format";
    case SD_ERR_UNSUPPORTED: return "unsupported";
    case SD_ERR_ARG: return "invalid argument";
    case SD_ERR_NOMEM: return "out of memory";
    case SD_ERR_CTX_FULL: return "context full";
    }
    return "unknown status";
}

sd_status err_set(sd_error *err, sd_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

void err_prefix(sd_error *err, const char *fmt, ...) {
    if (!err) return;
    char pre[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = 0;
    size_t np = strlen(pre), no = strlen(old);
    if (np > sizeof err->msg - 1) np = sizeof err->msg - 1;
    if (no > sizeof err->msg - 1 - np) no = sizeof err->msg - 1 - np;
    memcpy(err->msg, pre, np);
    memcpy(err->msg + np, old, no);
    err->msg[np + no] = 0;
}

void err_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "specdec: internal invariant failed: %s (%s:%d)\n", cond, file, line);
    abort();
}
