#include "io/gguf.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

typedef struct cursor {
    const unsigned char *p;
    size_t size, off;
    sd_error *err;
} cursor;

static bool cur_need(cursor *c, size_t n, const char *what) {
    if (n > c->size - c->off) {
        err_set(c->err, SD_ERR_FORMAT, "truncated file: %s at byte %zu needs %zu bytes, %zu left", what, c->off, n,
                c->size - c->off);
        return false;
    }
    return true;
}

#define CUR_READ(T, name)                                                                                        \
    static bool cur_##name(cursor *c, T *out, const char *what) {                                               \
        if (!cur_need(c, sizeof(T), what)) return false;                                                        \
        memcpy(out, c->p + c->off, sizeof(T));                                                                  \
        c->off += sizeof(T);                                                                                    \
        return true;                                                                                            \
    }
CUR_READ(uint32_t, u32)
CUR_READ(uint64_t, u64)

static bool cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    if (!cur_u64(c, &len, what)) return false;
    if (len > c->size - c->off) {
        err_set(c->err, SD_ERR_FORMAT, "%s: string length %" PRIu64 " at byte %zu runs past the end of the file",
                what, len, c->off);
        return false;
    }
    s->p = (const char *)c->p + c->off;
    s->len = len;
    c->off += (size_t)len;
    return true;
}

size_t gguf_vtype_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

static char *dup_str(gguf_str s) {
    char *r = malloc((size_t)s.len + 1);
    if (!r) return NULL;
    memcpy(r, s.p, (size_t)s.len);
    r[s.len] = 0;
    return r;
}

/* Reads one scalar of numeric type t at c into kv->v. */
static void decode_scalar(uint32_t t, const unsigned char *p, gguf_kv *kv) {
    switch (t) {
    case GGUF_U8: kv->v.u = p[0]; break;
    case GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case GGUF_BOOL: kv->v.u = p[0] != 0; break;
    case GGUF_U16: { uint16_t x; memcpy(&x, p, 2); kv->v.u = x; break; }
    case GGUF_I16: { int16_t x; memcpy(&x, p, 2); kv->v.i = x; break; }
    case GGUF_U32: { uint32_t x; memcpy(&x, p, 4); kv->v.u = x; break; }
    case GGUF_I32: { int32_t x; memcpy(&x, p, 4); kv->v.i = x; break; }
    case GGUF_F32: { float x; memcpy(&x, p, 4); kv->v.f = x; break; }
    case GGUF_U64: { uint64_t x; memcpy(&x, p, 8); kv->v.u = x; break; }
    case GGUF_I64: { int64_t x; memcpy(&x, p, 8); kv->v.i = x; break; }
    case GGUF_F64: { double x; memcpy(&x, p, 8); kv->v.f = x; break; }
    default: break;
    }
}

/* Skips a nested array's elements (depth-limited). */
static bool skip_array(cursor *c, int depth, const char *key) {
    uint32_t t;
    uint64_t n;
    if (!cur_u32(c, &t, key) || !cur_u64(c, &n, key)) return false;
    if (depth > 4) {
        err_set(c->err, SD_ERR_FORMAT, "key '%s': arrays nested too deeply", key);
        return false;
    }
    if (t == GGUF_STR) {
        for (uint64_t i = 0; i < n; i++) {
            gguf_str s;
            if (!cur_str(c, &s, key)) return false;
        }
        return true;
    }
    if (t == GGUF_ARR) {
        for (uint64_t i = 0; i < n; i++)
            if (!skip_array(c, depth + 1, key)) return false;
        return true;
    }
    size_t es = gguf_vtype_size(t);
    if (!es) {
        err_set(c->err, SD_ERR_FORMAT, "key '%s': unknown array element type %u", key, t);
        return false;
    }
    if (n > (c->size - c->off) / es) {
        err_set(c->err, SD_ERR_FORMAT, "key '%s': array of %" PRIu64 " elements runs past the end of the file", key, n);
        return false;
    }
    c->off += (size_t)n * es;
    return true;
}

static bool read_kv(cursor *c, gguf_kv *kv) {
    gguf_str key;
    if (!cur_str(c, &key, "metadata key")) return false;
    if (key.len == 0 || key.len > 65535) {
        err_set(c->err, SD_ERR_FORMAT, "metadata key at byte %zu has invalid length %" PRIu64, c->off, key.len);
        return false;
    }
    kv->key = dup_str(key);
    if (!kv->key) {
        err_set(c->err, SD_ERR_NOMEM, "out of memory reading metadata");
        return false;
    }
    if (memchr(kv->key, 0, (size_t)key.len)) {
        err_set(c->err, SD_ERR_FORMAT, "metadata key contains a NUL byte");
        return false;
    }
    if (!cur_u32(c, &kv->type, kv->key)) return false;
    if (kv->type == GGUF_STR) {
        if (!cur_str(c, &kv->v.s, kv->key)) return false;
        /* a name with a NUL inside would print (and compare in C) as its prefix: "llama\0x" is not "llama" */
        if (memchr(kv->v.s.p, 0, (size_t)kv->v.s.len)) {
            err_set(c->err, SD_ERR_FORMAT, "metadata '%s': string value contains a NUL byte", kv->key);
            return false;
        }
        return true;
    }
    if (kv->type == GGUF_ARR) {
        size_t start = c->off;
        if (!cur_u32(c, &kv->arr_type, kv->key) || !cur_u64(c, &kv->arr_n, kv->key)) return false;
        kv->arr_data = c->p + c->off;
        if (kv->arr_type == GGUF_STR) {
            if (kv->arr_n > (c->size - c->off) / 8) {
                err_set(c->err, SD_ERR_FORMAT, "key '%s': %" PRIu64 " strings cannot fit in the file", kv->key,
                        kv->arr_n);
                return false;
            }
            kv->arr_strs = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof *kv->arr_strs);
            if (!kv->arr_strs) {
                err_set(c->err, SD_ERR_NOMEM, "out of memory reading '%s'", kv->key);
                return false;
            }
            for (uint64_t i = 0; i < kv->arr_n; i++)
                if (!cur_str(c, &kv->arr_strs[i], kv->key)) return false;
            return true;
        }
        c->off = start;
        return skip_array(c, 0, kv->key);
    }
    size_t sz = gguf_vtype_size(kv->type);
    if (!sz) {
        err_set(c->err, SD_ERR_FORMAT, "key '%s': unknown value type %u", kv->key, kv->type);
        return false;
    }
    if (!cur_need(c, sz, kv->key)) return false;
    decode_scalar(kv->type, c->p + c->off, kv);
    c->off += sz;
    return true;
}

static bool read_tensor(cursor *c, gguf_tensor *t, uint64_t idx) {
    gguf_str name;
    if (!cur_str(c, &name, "tensor name")) return false;
    if (name.len == 0 || name.len > 255) {
        err_set(c->err, SD_ERR_FORMAT, "tensor %" PRIu64 ": invalid name length %" PRIu64, idx, name.len);
        return false;
    }
    t->name = dup_str(name);
    if (!t->name) {
        err_set(c->err, SD_ERR_NOMEM, "out of memory reading tensor table");
        return false;
    }
    if (memchr(name.p, 0, (size_t)name.len)) { /* it would match the name before the NUL */
        err_set(c->err, SD_ERR_FORMAT, "tensor %" PRIu64 ": name '%s' contains a NUL byte", idx, t->name);
        return false;
    }
    if (!cur_u32(c, &t->n_dims, t->name)) return false;
    if (t->n_dims < 1 || t->n_dims > 4) {
        err_set(c->err, SD_ERR_FORMAT, "tensor '%s': %u dimensions (1..4 allowed)", t->name, t->n_dims);
        return false;
    }
    uint64_t nelem = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (!cur_u64(c, &ne, t->name)) return false;
        if (ne == 0 || ne > ((uint64_t)1 << 40) || nelem > (((uint64_t)1 << 50) / ne)) {
            err_set(c->err, SD_ERR_FORMAT, "tensor '%s': invalid dimension %u = %" PRIu64, t->name, d, ne);
            return false;
        }
        t->ne[d] = (int64_t)ne;
        nelem *= ne;
    }
    if (!cur_u32(c, &t->type, t->name) || !cur_u64(c, &t->offset, t->name)) return false;
    int be, bb;
    if (!ggml_type_layout(t->type, &be, &bb)) {
        err_set(c->err, SD_ERR_UNSUPPORTED, "tensor '%s': weight type %u (%s) is not supported (%s are)",
                t->name, t->type, ggml_type_name(t->type), wtype_names());
        return false;
    }
    if (t->ne[0] % be != 0) {
        err_set(c->err, SD_ERR_FORMAT, "tensor '%s': row of %" PRId64 " elements is not a multiple of the %s block (%d)",
                t->name, t->ne[0], ggml_type_name(t->type), be);
        return false;
    }
    t->nbytes = (size_t)(nelem / (uint64_t)be) * (size_t)bb;
    return true;
}

static void free_tables(gguf_file *f);

static int cmp_strp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Name of a repeated string among n records (the char* at byte `field` of each), NULL if none,
 * (const char*)-1 when out of memory. O(n log n). */
static const char *find_duplicate(const void *recs, size_t n, size_t stride, size_t field) {
    if (n < 2) return NULL;
    char **names = malloc(n * sizeof *names);
    if (!names) return (const char *)-1;
    for (size_t i = 0; i < n; i++) memcpy(&names[i], (const char *)recs + i * stride + field, sizeof(char *));
    qsort(names, n, sizeof *names, cmp_strp);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(names[i - 1], names[i]) == 0) dup = names[i];
    free(names);
    return dup;
}

bool gguf_is_gguf(const unsigned char *data, size_t size) { return size >= 4 && memcmp(data, "GGUF", 4) == 0; }

sd_status gguf_parse(gguf_file *f, const unsigned char *data, size_t size, sd_error *err) {
    mapfile keep = f->map;
    memset(f, 0, sizeof *f);
    f->map = keep;
    cursor c = {data, size, 0, err};
    sd_status st = SD_ERR_FORMAT;
    if (!gguf_is_gguf(data, size)) {
        err_set(err, SD_ERR_FORMAT, "not a GGUF file (bad magic)");
        goto fail;
    }
    c.off = 4;
    if (!cur_u32(&c, &f->version, "version")) goto fail;
    if (f->version == 1) {
        err_set(err, SD_ERR_UNSUPPORTED, "GGUF version 1 is not supported (2 and 3 are)");
        goto fail;
    }
    if (f->version != 2 && f->version != 3) {
        if ((f->version & 0xffff) == 0)
            err_set(err, SD_ERR_UNSUPPORTED, "big-endian GGUF (version field %u) is not supported", f->version);
        else
            err_set(err, SD_ERR_FORMAT, "unknown GGUF version %u", f->version);
        goto fail;
    }
    if (!cur_u64(&c, &f->n_tensors, "tensor count") || !cur_u64(&c, &f->n_kv, "metadata count")) goto fail;
    /* Each metadata entry needs >= 13 bytes, each tensor entry >= 28: counts beyond that are corrupt. */
    if (f->n_kv > (size - c.off) / 13 || f->n_tensors > (size - c.off) / 28) {
        err_set(err, SD_ERR_FORMAT, "header counts (%" PRIu64 " tensors, %" PRIu64 " metadata) cannot fit in a %zu-byte file",
                f->n_tensors, f->n_kv, size);
        goto fail;
    }
    f->kv = calloc((size_t)(f->n_kv ? f->n_kv : 1), sizeof *f->kv);
    f->tensors = calloc((size_t)(f->n_tensors ? f->n_tensors : 1), sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        st = err_set(err, SD_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        if (!read_kv(&c, &f->kv[i])) goto fail_st;
    }
    {
        const char *dup = find_duplicate(f->kv, (size_t)f->n_kv, sizeof *f->kv, offsetof(gguf_kv, key));
        if (dup == (const char *)-1) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if (dup) {
            err_set(err, SD_ERR_FORMAT, "duplicate metadata key '%s'", dup);
            goto fail;
        }
    }
    f->alignment = 32;
    const gguf_kv *al = gguf_find(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32 || al->v.u == 0 || (al->v.u & (al->v.u - 1)) || al->v.u > 65536) {
            if (al->type != GGUF_U32)
                err_set(err, SD_ERR_FORMAT, "general.alignment must be a u32, got value type %u", al->type);
            else
                err_set(err, SD_ERR_FORMAT, "general.alignment %" PRIu64 " is not a power of two in [1, 65536]", al->v.u);
            goto fail;
        }
        f->alignment = (size_t)al->v.u;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        if (!read_tensor(&c, &f->tensors[i], i)) goto fail_st;
    }
    {
        const char *dup =
            find_duplicate(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, offsetof(gguf_tensor, name));
        if (dup == (const char *)-1) {
            st = err_set(err, SD_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if (dup) {
            err_set(err, SD_ERR_FORMAT, "duplicate tensor '%s'", dup);
            goto fail;
        }
    }
    size_t data_off = (c.off + f->alignment - 1) / f->alignment * f->alignment;
    if (f->n_tensors > 0 && data_off > size) {
        err_set(err, SD_ERR_FORMAT, "truncated file: tensor data would start at byte %zu of %zu", data_off, size);
        goto fail;
    }
    f->data_offset = data_off;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0) {
            err_set(err, SD_ERR_FORMAT, "tensor '%s': offset %" PRIu64 " is not aligned to %zu", t->name, t->offset,
                    f->alignment);
            goto fail;
        }
        if (t->offset > size - data_off || t->nbytes > size - data_off - t->offset) {
            err_set(err, SD_ERR_FORMAT,
                    "tensor '%s': data [%" PRIu64 ", +%zu) runs past the end of the file (%zu bytes of data): truncated or corrupt",
                    t->name, t->offset, t->nbytes, size - data_off);
            goto fail;
        }
        t->data = data + data_off + t->offset;
        /* the kernels read elements (and block scales) in place: whatever general.alignment says, each tensor's data
         * must sit on its element's natural boundary (mapped files start on a page) */
        size_t ta = ggml_type_align(t->type);
        if ((uintptr_t)t->data % ta != 0) {
            err_set(err, SD_ERR_FORMAT,
                    "tensor '%s': data at byte %zu is not aligned to %zu bytes as %s needs (general.alignment %zu is "
                    "too small for this layout)",
                    t->name, data_off + (size_t)t->offset, ta, ggml_type_name(t->type), f->alignment);
            goto fail;
        }
    }
    return SD_OK;
fail_st:
    if (err) st = err->status;
fail:
    free_tables(f);
    f->map = keep;
    return st;
}

sd_status gguf_open(gguf_file *f, const char *path, sd_error *err) {
    memset(f, 0, sizeof *f);
    sd_status st = mapfile_open(&f->map, path, NULL, err);
    if (st != SD_OK) return st;
    mapfile m = f->map;
    st = gguf_parse(f, m.data, m.size, err);
    if (st != SD_OK) {
        err_prefix(err, "%s: ", path);
        mapfile_close(&m);
        memset(f, 0, sizeof *f);
        return st;
    }
    return SD_OK;
}

static void free_tables(gguf_file *f) {
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].arr_strs);
        }
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    f->kv = NULL;
    f->tensors = NULL;
}

void gguf_close(gguf_file *f) {
    free_tables(f);
    mapfile m = f->map;
    memset(f, 0, sizeof *f);
    mapfile_close(&m);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key && strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

static bool is_int_type(uint32_t t) {
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 || t == GGUF_I32 ||
           t == GGUF_U64 || t == GGUF_I64;
}
static bool is_signed(uint32_t t) { return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64; }

bool gguf_get_int(const gguf_file *f, const char *key, int64_t *out, bool *bad) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    if (!is_int_type(kv->type) || (!is_signed(kv->type) && kv->v.u > (uint64_t)INT64_MAX)) {
        if (bad) *bad = true;
        return false;
    }
    *out = is_signed(kv->type) ? kv->v.i : (int64_t)kv->v.u;
    return true;
}

bool gguf_get_float(const gguf_file *f, const char *key, double *out, bool *bad) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64) {
        *out = kv->v.f;
        return true;
    }
    int64_t i;
    if (gguf_get_int(f, key, &i, bad)) {
        *out = (double)i;
        return true;
    }
    return false;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool *out, bool *bad) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    if (kv->type != GGUF_BOOL) {
        if (bad) *bad = true;
        return false;
    }
    *out = kv->v.u != 0;
    return true;
}

bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, bool *bad) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    if (kv->type != GGUF_STR) {
        if (bad) *bad = true;
        return false;
    }
    *out = kv->v.s;
    return true;
}

bool gguf_str_eq(gguf_str s, const char *lit) { return strlen(lit) == s.len && memcmp(s.p, lit, s.len) == 0; }

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    gguf_kv tmp;
    size_t es = gguf_vtype_size(kv->arr_type);
    decode_scalar(kv->arr_type, kv->arr_data + i * es, &tmp);
    if (kv->arr_type == GGUF_F32 || kv->arr_type == GGUF_F64) return tmp.v.f;
    return is_signed(kv->arr_type) ? (double)tmp.v.i : (double)tmp.v.u;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    gguf_kv tmp;
    size_t es = gguf_vtype_size(kv->arr_type);
    decode_scalar(kv->arr_type, kv->arr_data + i * es, &tmp);
    if (kv->arr_type == GGUF_F32 || kv->arr_type == GGUF_F64) return (int64_t)tmp.v.f;
    return is_signed(kv->arr_type) ? tmp.v.i : (int64_t)tmp.v.u;
}
