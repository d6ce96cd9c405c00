/* gguf_write: a streaming GGUF v3 writer. Metadata and the tensor table are written first (offsets computed
 * from the declared shapes), then each tensor's data in declaration order through a row callback, so a file
 * of any size is written with O(row) memory. */
#ifndef SD_IO_GGUF_WRITE_H
#define SD_IO_GGUF_WRITE_H
#include <stdint.h>
#include <stdio.h>

#include "io/gguf.h"
#include "specdec.h"

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

/* metadata (keys are copied) */
void gguf_writer_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_bool(gguf_writer *w, const char *key, int v);
void gguf_writer_str(gguf_writer *w, const char *key, const char *v);
/* Copies one parsed entry (scalar, string or array) from another file. */
void gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* Declares a tensor (dims ne[0] fastest). */
void gguf_writer_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);

/* Fills row r (ne[0] elements) of tensor t as float; the writer converts to the tensor's type. */
typedef void (*gguf_row_fn)(void *user, int tensor_index, int64_t row, float *out);

/* Writes the file; progress(user, bytes_done, bytes_total) is called now and then (may be NULL). */
sd_status gguf_writer_write(gguf_writer *w, const char *path, gguf_row_fn fill, void *user,
                            void (*progress)(void *user, uint64_t done, uint64_t total), sd_error *err);

/* Converts n floats to a row of type (n a multiple of the block size). */
void gguf_quantize_row(uint32_t type, const float *x, int64_t n, void *out);
#endif
