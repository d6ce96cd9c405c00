/* libFuzzer target for the GGUF reader: parse arbitrary bytes; when they parse, also build the tokenizer from
 * the metadata and look up every tensor (the paths a model load takes over untrusted metadata). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "tok/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private, 8-aligned copy: the reader must never read past `size` */
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    gguf_file f;
    memset(&f, 0, sizeof f);
    sd_error err;
    if (gguf_parse(&f, buf, size, &err) == SD_OK) {
        tokenizer *t = NULL;
        if (tok_from_gguf(&f, &t, &err) == SD_OK) {
            int32_t ids[64];
            tok_encode(t, "Hello world", 11, true, true, ids, 64);
            tok_free(t);
        }
        for (uint64_t i = 0; i < f.n_tensors; i++) {
            volatile unsigned char c = ((const unsigned char *)f.tensors[i].data)[f.tensors[i].nbytes - 1];
            (void)c;
        }
        gguf_close(&f);
    }
    free(buf);
    return 0;
}
