/* Seeded random numbers: xoshiro256** seeded through splitmix64.  Only
 * integer arithmetic, so the same seed gives the same numbers on every
 * machine.  Decoding seeds one stream per decoder (rng_seed); the trainer
 * gives every random decision its own stream (rng_seed_stream(r, seed,
 * RNG_STREAM_x, index)), so e.g. the draws of epoch 3 do not depend on how
 * many numbers epoch 2 used. */
#ifndef C2T_RNG_H
#define C2T_RNG_H
#include <stdint.h>

/* rng_splitmix and rng_uniform_at are device functions too (CUDA kernels
 * draw the same numbers). */
#ifdef __CUDACC__
#define RNG_HD __host__ __device__
#else
#define RNG_HD
#endif

typedef struct { uint64_t s[4]; } Rng;

enum { RNG_STREAM_SPLIT = 1, RNG_STREAM_INIT, RNG_STREAM_NEG, RNG_STREAM_SHUFFLE, RNG_STREAM_MISC };

RNG_HD static inline uint64_t rng_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void rng_seed(Rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&seed);
}

static inline void rng_seed_stream(Rng *r, uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t x = seed;
    uint64_t a = rng_splitmix(&x);
    x = a ^ (stream * 0xD1B54A32D192ED03ULL);
    uint64_t b = rng_splitmix(&x);
    x = b ^ (index * 0x8CB92BA72F3D8DD7ULL + 0x632BE59BD9B4E019ULL);
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix(&x);
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(Rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rng_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(Rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* A counter-based draw: the index-th number after key of splitmix64's
 * stream (the stream seeded with key, advanced index times, then drawn),
 * uniform in [0, 1) with 53 random bits.  Draws at different indices of
 * one key, or under keys taken from rng_next, are independent for any
 * practical purpose, and each is computed alone: what lets the device
 * cycle's sampling draw a node's number on any row of any device in any
 * order (infer/speculative/decode.c, on verification). */
RNG_HD static inline double rng_uniform_at(uint64_t key, uint64_t index) {
    uint64_t x = key + index * 0x9E3779B97F4A7C15ULL;
    return (double)(rng_splitmix(&x) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). */
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    if (n <= 1) return 0;
    __uint128_t m = (__uint128_t)rng_next(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t thresh = -n % n;
        while (lo < thresh) { m = (__uint128_t)rng_next(r) * n; lo = (uint64_t)m; }
    }
    return (uint64_t)(m >> 64);
}
#endif
