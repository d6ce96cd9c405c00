/* gguf: a validating GGUF (v2, v3) reader over a read-only mapping.
 *
 * Format (little-endian):
 *   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to `general.alignment` (default 32) | tensor data (each tensor at data_start + offset)
 *   string = u64 length + bytes (no NUL); array = u32 elem_type + u64 count + elements.
 * Every count, length, offset and size is checked against the file before it is used: a malformed file gives
 * SD_ERR_FORMAT with a message naming the field, never an out-of-bounds read.
 */
#ifndef SD_IO_GGUF_H
#define SD_IO_GGUF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/mapfile.h"
#include "kernels/wtype.h" /* the tensor types (enum ggml_type, layouts) */
#include "specdec.h"

enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6,
    GGUF_BOOL = 7, GGUF_STR = 8, GGUF_ARR = 9, GGUF_U64 = 10, GGUF_I64 = 11, GGUF_F64 = 12,
};

typedef struct gguf_str {
    const char *p; /* not NUL-terminated; points into the mapping */
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    char *key; /* NUL-terminated copy */
    uint32_t type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        gguf_str s;
    } v;
    /* arrays */
    uint32_t arr_type;
    uint64_t arr_n;
    const unsigned char *arr_data; /* first element (numeric arrays: packed little-endian values) */
    gguf_str *arr_strs;            /* [arr_n] for string arrays, else NULL */
} gguf_kv;

typedef struct gguf_tensor {
    char *name; /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[4]; /* ne[0] fastest; unused dims are 1 */
    uint32_t type;
    uint64_t offset;
    size_t nbytes;
    const void *data; /* into the mapping */
} gguf_tensor;

typedef struct gguf_file {
    mapfile map; /* owned when opened by gguf_open */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;          /* [n_kv] */
    gguf_tensor *tensors; /* [n_tensors] */
    size_t alignment;
    size_t data_offset;
} gguf_file;

/* True when the first bytes look like GGUF. */
bool gguf_is_gguf(const unsigned char *data, size_t size);
/* Maps path and parses it. On failure nothing is left allocated. */
sd_status gguf_open(gguf_file *f, const char *path, sd_error *err);
/* Parses a buffer the caller keeps alive (used by gguf_open and the fuzzer). */
sd_status gguf_parse(gguf_file *f, const unsigned char *data, size_t size, sd_error *err);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
/* Typed getters: return false when the key is absent; set *bad (if given) when it has the wrong type. */
bool gguf_get_int(const gguf_file *f, const char *key, int64_t *out, bool *bad);
bool gguf_get_float(const gguf_file *f, const char *key, double *out, bool *bad);
bool gguf_get_bool(const gguf_file *f, const char *key, bool *out, bool *bad);
bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, bool *bad);
bool gguf_str_eq(gguf_str s, const char *lit);
/* Bytes of one scalar of a metadata value type (0 for strings, arrays and unknown types). */
size_t gguf_vtype_size(uint32_t type);
/* Element i of a numeric array as double/int (caller checked i < arr_n). */
double gguf_arr_float(const gguf_kv *kv, uint64_t i);
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);

#endif
