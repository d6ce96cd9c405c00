/* err: filling the caller's sd_error. */
#ifndef SD_UTIL_ERR_H
#define SD_UTIL_ERR_H
#include "specdec.h"

#if defined(__GNUC__)
#define SD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SD_PRINTF(a, b)
#endif

/* Sets err (may be NULL) to st with a formatted message; returns st so callers can `return err_set(...)`. */
sd_status err_set(sd_error *err, sd_status st, const char *fmt, ...) SD_PRINTF(3, 4);
/* Prefixes an existing message with context ("file.gguf: "). */
void err_prefix(sd_error *err, const char *fmt, ...) SD_PRINTF(2, 3);

/* Invariant check that prints file:line and aborts (never used for recoverable errors). */
#define SD_ASSERT(c)                                                                                              \
    do {                                                                                                          \
        if (!(c)) err_assert_fail(#c, __FILE__, __LINE__);                                                        \
    } while (0)
void err_assert_fail(const char *cond, const char *file, int line);
#endif
