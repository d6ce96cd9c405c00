/* rng: xoshiro256** seeded through splitmix64; one state per sampler (no globals). */
#ifndef SD_SAMPLE_RNG_H
#define SD_SAMPLE_RNG_H
#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng;

static inline uint64_t rng_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline void rng_seed(rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&seed);
}
static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, res = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return res;
}
/* uniform in [0, 1) with 53 random bits */
static inline double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
#endif
