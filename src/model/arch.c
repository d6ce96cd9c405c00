#include "model/arch.h"

#include <string.h>

static const arch_desc ARCHES[] = {
    {"llama", ROPE_KIND_NORM, false, 10000.0},
    {"mistral", ROPE_KIND_NORM, false, 10000.0},
    {"qwen2", ROPE_KIND_NEOX, true, 10000.0},
};

const arch_desc *arch_find(const char *name, unsigned long len) {
    for (size_t i = 0; i < sizeof ARCHES / sizeof ARCHES[0]; i++)
        if (strlen(ARCHES[i].name) == len && memcmp(ARCHES[i].name, name, len) == 0) return &ARCHES[i];
    return NULL;
}

const char *arch_list(void) { return "llama, mistral, qwen2"; }
