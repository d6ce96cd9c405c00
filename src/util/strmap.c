#include "util/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    char *key; /* NULL = empty */
    size_t len;
    uint64_t hash;
    int value;
} slot;

struct str_map {
    slot *slots; /* [cap] */
    size_t cap, n;
};

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

str_map *strmap_new(size_t expected) {
    str_map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = 16;
    while (m->cap < expected * 2) m->cap *= 2;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

void strmap_free(str_map *m) {
    if (!m) return;
    for (size_t i = 0; i < m->cap; i++) free(m->slots[i].key);
    free(m->slots);
    free(m);
}

static bool grow(str_map *m) {
    size_t ncap = m->cap * 2;
    slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = m->slots[i].hash & (ncap - 1);
        while (ns[j].key) j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return true;
}

bool strmap_put(str_map *m, const char *key, size_t len, int value) {
    if ((m->n + 1) * 2 > m->cap && !grow(m)) return false;
    uint64_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        if (m->slots[j].hash == h && m->slots[j].len == len && memcmp(m->slots[j].key, key, len) == 0) return true;
        j = (j + 1) & (m->cap - 1);
    }
    char *k = malloc(len + 1);
    if (!k) return false;
    memcpy(k, key, len);
    k[len] = 0;
    m->slots[j] = (slot){k, len, h, value};
    m->n++;
    return true;
}

int strmap_get(const str_map *m, const char *key, size_t len) {
    uint64_t h = hash_bytes(key, len);
    size_t j = h & (m->cap - 1);
    while (m->slots[j].key) {
        if (m->slots[j].hash == h && m->slots[j].len == len && memcmp(m->slots[j].key, key, len) == 0)
            return m->slots[j].value;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}
