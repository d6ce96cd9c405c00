#define _POSIX_C_SOURCE 200809L
#include "io/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/fp16.h"

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} wbuf;

static void wb_put(wbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        unsigned char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void wb_u32(wbuf *b, uint32_t v) { wb_put(b, &v, 4); }
static void wb_u64(wbuf *b, uint64_t v) { wb_put(b, &v, 8); }
static void wb_str(wbuf *b, const char *s, uint64_t len) {
    wb_u64(b, len);
    wb_put(b, s, (size_t)len);
}

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[4];
    uint64_t offset, nbytes;
} wtensor;

struct gguf_writer {
    wbuf kv;
    uint64_t n_kv;
    wtensor *t;
    int n_t;
};

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kv.p);
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

static void key(gguf_writer *w, const char *k, uint32_t type) {
    wb_str(&w->kv, k, strlen(k));
    wb_u32(&w->kv, type);
    w->n_kv++;
}
void gguf_writer_u32(gguf_writer *w, const char *k, uint32_t v) { key(w, k, GGUF_U32); wb_u32(&w->kv, v); }
void gguf_writer_f32(gguf_writer *w, const char *k, float v) { key(w, k, GGUF_F32); wb_put(&w->kv, &v, 4); }
void gguf_writer_bool(gguf_writer *w, const char *k, int v) {
    unsigned char b = v != 0;
    key(w, k, GGUF_BOOL);
    wb_put(&w->kv, &b, 1);
}
void gguf_writer_str(gguf_writer *w, const char *k, const char *v) { key(w, k, GGUF_STR); wb_str(&w->kv, v, strlen(v)); }

void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    if (kv->type == GGUF_ARR && kv->arr_type == GGUF_ARR) return; /* nested arrays: not copied */
    key(w, kv->key, kv->type);
    if (kv->type == GGUF_STR) {
        wb_str(&w->kv, kv->v.s.p, kv->v.s.len);
    } else if (kv->type == GGUF_ARR) {
        wb_u32(&w->kv, kv->arr_type);
        wb_u64(&w->kv, kv->arr_n);
        if (kv->arr_type == GGUF_STR)
            for (uint64_t i = 0; i < kv->arr_n; i++) wb_str(&w->kv, kv->arr_strs[i].p, kv->arr_strs[i].len);
        else
            wb_put(&w->kv, kv->arr_data, (size_t)kv->arr_n * gguf_vtype_size(kv->arr_type));
    } else {
        /* re-encode the decoded scalar in its own width */
        unsigned char b[8];
        size_t n = gguf_vtype_size(kv->type);
        if (kv->type == GGUF_F32) {
            float f = (float)kv->v.f;
            memcpy(b, &f, 4);
        } else if (kv->type == GGUF_F64) {
            memcpy(b, &kv->v.f, 8);
        } else {
            memcpy(b, &kv->v.u, n); /* little-endian: the low bytes */
        }
        wb_put(&w->kv, b, n);
    }
}

void gguf_writer_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    wtensor *nt = realloc(w->t, (size_t)(w->n_t + 1) * sizeof *nt);
    if (!nt) {
        w->kv.oom = 1;
        return;
    }
    w->t = nt;
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    t->name = malloc(strlen(name) + 1);
    if (t->name) strcpy(t->name, name);
    else w->kv.oom = 1;
    t->type = type;
    t->n_dims = n_dims;
    uint64_t nel = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    for (int d = 1; d < 4; d++) nel *= (uint64_t)t->ne[d];
    t->nbytes = nel * ggml_row_bytes(type, t->ne[0]);
}

void gguf_quantize_row(uint32_t type, const float *x, int64_t n, void *out) {
    const wtype_info *t = wtype_get(type);
    if (t) t->from_float(x, out, n);
}

sd_status gguf_writer_write(gguf_writer *w, const char *path, gguf_row_fn fill, void *user,
                            void (*progress)(void *, uint64_t, uint64_t), sd_error *err) {
    const uint64_t align = 32;
    wbuf hdr = {0};
    wb_put(&hdr, "GGUF", 4);
    wb_u32(&hdr, 3);
    wb_u64(&hdr, (uint64_t)w->n_t);
    wb_u64(&hdr, w->n_kv);
    wb_put(&hdr, w->kv.p, w->kv.n);
    uint64_t off = 0, total = 0;
    for (int i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        wb_str(&hdr, t->name, strlen(t->name));
        wb_u32(&hdr, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) wb_u64(&hdr, (uint64_t)t->ne[d]);
        wb_u32(&hdr, t->type);
        t->offset = off;
        wb_u64(&hdr, off);
        off += (t->nbytes + align - 1) / align * align;
        total += t->nbytes;
    }
    while (hdr.n % align) wb_put(&hdr, "", 1);
    if (hdr.oom || w->kv.oom) {
        free(hdr.p);
        return err_set(err, SD_ERR_NOMEM, "out of memory building the GGUF header");
    }
    /* written to a new file beside the target and renamed over it when complete: a failed write leaves whatever was
     * at path untouched, and only a regular file (or nothing) is ever replaced */
    struct stat sb;
    mode_t mode = 0644;
    if (stat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) {
            free(hdr.p);
            return err_set(err, SD_ERR_IO, "%s exists and is not a regular file: not replaced", path);
        }
        mode = sb.st_mode & 07777;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    int fd = -1;
    if (tmp) {
        memcpy(tmp, path, plen);
        memcpy(tmp + plen, ".tmp.XXXXXX", 12);
        fd = mkstemp(tmp);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            remove(tmp); /* ours */
        }
        free(tmp);
        free(hdr.p);
        return err_set(err, SD_ERR_IO, "%s: cannot create: %s", path, tmp ? strerror(e) : "out of memory");
    }
    fchmod(fd, mode);
    sd_status st = SD_OK;
    if (fwrite(hdr.p, 1, hdr.n, f) != hdr.n) st = err_set(err, SD_ERR_IO, "%s: write failed", path);
    free(hdr.p);
    float *row = NULL;
    unsigned char *q = NULL;
    uint64_t done = 0;
    for (int i = 0; i < w->n_t && st == SD_OK; i++) {
        wtensor *t = &w->t[i];
        size_t rb = ggml_row_bytes(t->type, t->ne[0]);
        float *nr = realloc(row, (size_t)t->ne[0] * sizeof *row);
        unsigned char *nq = realloc(q, rb);
        if (nr) row = nr;
        if (nq) q = nq;
        if (!nr || !nq) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            break;
        }
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        for (int64_t r = 0; r < rows && st == SD_OK; r++) {
            fill(user, i, r, row);
            gguf_quantize_row(t->type, row, t->ne[0], q);
            if (fwrite(q, 1, rb, f) != rb) st = err_set(err, SD_ERR_IO, "%s: write failed (disk full?)", path);
            done += rb;
            if (progress && (r & 1023) == 0) progress(user, done, total);
        }
        static const char zeros[32];
        size_t pad = (size_t)((t->nbytes + align - 1) / align * align - t->nbytes);
        if (st == SD_OK && pad && fwrite(zeros, 1, pad, f) != pad) st = err_set(err, SD_ERR_IO, "%s: write failed", path);
    }
    if (progress && st == SD_OK) progress(user, total, total);
    free(row);
    free(q);
    if (fflush(f) != 0 && st == SD_OK) st = err_set(err, SD_ERR_IO, "%s: write failed (disk full?)", path);
    if (fclose(f) != 0 && st == SD_OK) st = err_set(err, SD_ERR_IO, "%s: close failed", path);
    if (st == SD_OK && rename(tmp, path) != 0)
        st = err_set(err, SD_ERR_IO, "%s: cannot move the written file into place: %s", path, strerror(errno));
    if (st != SD_OK) remove(tmp); /* the temporary file is ours; path itself is never removed */
    free(tmp);
    return st;
}
