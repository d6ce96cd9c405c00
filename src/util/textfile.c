#define _POSIX_C_SOURCE 200809L
#include "util/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/err.h"

sd_status sd_read_text_file(const char *path, size_t max_bytes, char **out, size_t *len, sd_error *err) {
    if (!path || !out) return err_set(err, SD_ERR_ARG, "sd_read_text_file: NULL argument");
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, SD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return err_set(err, SD_ERR_IO, "%s is a folder, not a text file", path);
    }
    /* read in chunks: a pipe or a device has no size to trust, so the bound is checked as the bytes come */
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    sd_status st = b ? SD_OK : err_set(err, SD_ERR_NOMEM, "%s: out of memory", path);
    while (st == SD_OK) {
        if (n == cap) {
            if (cap >= max_bytes) {
                st = err_set(err, SD_ERR_IO, "%s is larger than %zu MiB: refusing to read it as text", path,
                             max_bytes >> 20);
                break;
            }
            size_t nc = cap * 2 > max_bytes ? max_bytes : cap * 2;
            char *nb = realloc(b, nc + 1);
            if (!nb) {
                st = err_set(err, SD_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            b = nb, cap = nc;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) st = err_set(err, SD_ERR_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (st == SD_OK) {
        const char *nul = memchr(b, 0, n);
        if (nul) st = err_set(err, SD_ERR_FORMAT, "%s contains a NUL byte at offset %zu: not a text file", path,
                              (size_t)(nul - b));
    }
    if (st != SD_OK) {
        free(b);
        return st;
    }
    b[n] = 0;
    *out = b;
    if (len) *len = n;
    return SD_OK;
}
