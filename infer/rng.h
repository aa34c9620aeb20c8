/* Seedable RNG (xoshiro256** seeded by splitmix64): the same seed gives the
 * same sampled tokens on every machine. */
#ifndef C2T_RNG_H
#define C2T_RNG_H
#include <stdint.h>

typedef struct { uint64_t s[4]; } Rng;

static inline uint64_t rng_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline void rng_seed(Rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&seed);
}
static inline uint64_t rng_next(Rng *r) {
    uint64_t *s = r->s, x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}
/* Uniform in [0, 1). */
static inline double rng_uniform(Rng *r) { return (rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
#endif
