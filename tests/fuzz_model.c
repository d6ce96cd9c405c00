/* libFuzzer target for a whole model load and one forward pass: the bytes are loaded as a model file (through a
 * memfd, so the real path: mmap, GGUF or llama2.c parse, hyperparameter and tensor checks, tokenizer), then a small
 * context runs a 2-token block and one more token; the kernels read the weights in place, so a tensor the load
 * let through misaligned or out of bounds shows up here (the reader-only fuzz_gguf could not see that). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "specdec.h"

static int write_all(int fd, const uint8_t *p, size_t n) {
    if (ftruncate(fd, 0) != 0) return -1;
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(fd, p + off, n - off, (off_t)off);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_model.gguf", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (write_all(fd, data, size) != 0) abort();
    sd_model *m = NULL;
    sd_error err;
    if (sd_model_load(path, NULL, &m, &err) != SD_OK) return 0;
    sd_model_info info;
    sd_model_get_info(m, &info);
    sd_ctx_params cp = sd_ctx_default_params();
    cp.n_ctx = 8;
    cp.n_batch = 4;
    cp.n_threads = 1;
    sd_ctx *c = NULL;
    float *logits = malloc((size_t)info.n_vocab * sizeof *logits);
    if (logits && sd_ctx_new(m, &cp, &c, &err) == SD_OK) {
        int32_t toks[64];
        int n = 0;
        if (sd_tokenize(m, "Hello world", 11, true, true, toks, 64, &n, &err) != SD_OK || n < 2) {
            toks[0] = 0;
            toks[1] = info.n_vocab - 1;
            n = 2;
        }
        if (sd_forward(c, &(sd_block){.n = 2, .token = toks}, &(sd_forward_args){.logits = logits}, &err) == SD_OK) {
            int best = 0;
            for (int v = 1; v < info.n_vocab; v++)
                if (logits[v] > logits[best]) best = v;
            int32_t t = best;
            sd_forward(c, &(sd_block){.n = 1, .token = &t}, &(sd_forward_args){.logits = logits}, &err);
        }
        char piece[512];
        sd_token_to_piece(m, toks[0], piece, sizeof piece);
    }
    sd_ctx_free(c);
    free(logits);
    sd_model_free(m);
    return 0;
}
