#define _POSIX_C_SOURCE 200809L
#include "out_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool out_check(const char *path, const char *what) {
    if (!path) return true;
    struct stat sb, lsb;
    bool existed = lstat(path, &lsb) == 0; /* a dangling link exists too: never removed below */
    if (existed && stat(path, &sb) != 0) sb = lsb;
    if (existed && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: cannot write %s (%s): it is a folder\n", path, what);
        return false;
    }
    if (existed && !S_ISREG(sb.st_mode)) return true; /* a device or a pipe: opening it may have effects */
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "error: cannot write %s (%s): %s\n", path, what, strerror(errno));
        return false;
    }
    fclose(f);
    if (!existed) unlink(path); /* created by this check: not left behind if the run fails */
    return true;
}

FILE *out_open(const char *path, const char *what) {
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "error: cannot write %s (%s): %s\n", path, what, strerror(errno));
    return f;
}

bool out_close(FILE *f, const char *path) {
    if (!f) return true;
    errno = 0;
    bool ok = fflush(f) == 0 && !ferror(f);
    int e = errno;
    if (fclose(f) != 0 && ok) ok = false, e = errno;
    if (!ok) fprintf(stderr, "error: writing %s failed: %s\n", path, e ? strerror(e) : "write error");
    return ok;
}

bool out_stdout_ok(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return true;
    int e = errno;
    fprintf(stderr, "error: writing to standard output failed: %s\n", e ? strerror(e) : "write error");
    return false;
}

void out_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void out_xml_text(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (*p >= 0x20 || *p == '\t' || *p == '\n') fputc(*p, f); /* XML 1.0 has no other control characters */
        }
    }
}
