#include "model/wmix.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kernels/wtype.h"

static const struct {
    const char *name;
    uint32_t base;
} MIXES[] = {{"q4_k_m", GGML_Q4_K}, {"q5_k_m", GGML_Q5_K}};

bool wmix_from_name(const char *name, wmix *m) {
    if (!name) return false;
    for (size_t i = 0; i < sizeof MIXES / sizeof MIXES[0]; i++)
        if (!strcasecmp(name, MIXES[i].name)) {
            *m = (wmix){MIXES[i].base, true};
            return true;
        }
    uint32_t t;
    if (!wtype_from_name(name, &t)) return false;
    *m = (wmix){t, false};
    return true;
}

const char *wmix_names(void) { return WTYPE_NAMES ", q4_K_M, q5_K_M"; }

/* llama.cpp's use_more_bits(i, n) */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

uint32_t wmix_type(const wmix *m, const char *tensor, int n_layer) {
    if (!m->more_bits) return m->base;
    if (!strcmp(tensor, "output.weight")) return GGML_Q6_K;
    int layer;
    char rest[64];
    if (sscanf(tensor, "blk.%d.%63s", &layer, rest) == 2 &&
        (!strcmp(rest, "attn_v.weight") || !strcmp(rest, "ffn_down.weight")) && more_bits(layer, n_layer))
        return GGML_Q6_K;
    return m->base;
}
