/* libFuzzer target for the JSONL prompt-set reader (tools/jsonl.c): arbitrary bytes as a file's text; every line must
 * parse to a question or give an error naming its line, never read outside the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1); /* the reader's input is a NUL-terminated text (the file reader refuses NULs) */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    jl_question *qs = NULL;
    char err[512];
    int n = jl_parse(text, "fuzz.jsonl", &qs, err, sizeof err);
    if (n < 0 && strncmp(err, "fuzz.jsonl", 10) != 0) abort(); /* an error always names the input */
    for (int i = 0; i < n; i++) {
        if (qs[i].n_turns < 1 || strlen(qs[i].id) >= 64 || strlen(qs[i].category) >= 64) abort();
        for (int t = 0; t < qs[i].n_turns; t++) (void)strlen(qs[i].turns[t]);
    }
    jl_free(qs, n > 0 ? n : 0);
    free(text);
    return 0;
}
