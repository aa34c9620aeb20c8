/* String and pair hash maps (strmap.h). */
#include "infer/text/strmap.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* 8 bytes at a time with a multiply-xorshift finish: token strings are
 * short, and BPE looks up every character and merge.  Inline: a call per
 * lookup costs about a tenth of the encode time. */
static inline uint64_t hash_bytes(const void *data, size_t n) {
    const unsigned char *s = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8; n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)s[i] << (8 * i);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return h;
}

void strmap_init(StrMap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(expected * 2 + 1);
    m->val = xmalloc(sizeof(int32_t) * m->cap);
    m->hash = xmalloc(sizeof(uint32_t) * m->cap);
    m->key = xmalloc(sizeof(char *) * m->cap);
    m->klen = xmalloc(sizeof(uint32_t) * m->cap);
    for (uint32_t i = 0; i < m->cap; i++) m->val[i] = -1;
}

void strmap_free(StrMap *m) {
    free(m->val); free(m->hash); free(m->key); free(m->klen);
    memset(m, 0, sizeof *m);
}

static void strmap_grow(StrMap *m) {
    StrMap n;
    strmap_init(&n, m->cap);  /* doubles: cap >= 2*expected */
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->val[i] >= 0) strmap_put(&n, m->key[i], m->klen[i], m->val[i]);
    strmap_free(m);
    *m = n;
}

void strmap_put(StrMap *m, const char *k, size_t n, int32_t v) {
    if (!m->cap) strmap_init(m, 16);
    if ((m->count + 1) * 2 > m->cap) strmap_grow(m);
    uint32_t h = (uint32_t)hash_bytes(k, n);
    uint32_t i = h & (m->cap - 1);
    for (;;) {
        if (m->val[i] < 0) {
            m->val[i] = v; m->hash[i] = h; m->key[i] = k; m->klen[i] = (uint32_t)n;
            m->count++;
            return;
        }
        if (m->hash[i] == h && m->klen[i] == n && memcmp(m->key[i], k, n) == 0) {
            m->val[i] = v; m->key[i] = k;
            return;
        }
        i = (i + 1) & (m->cap - 1);
    }
}

int32_t strmap_get(const StrMap *m, const char *k, size_t n) {
    if (!m->cap) return -1;
    uint32_t h = (uint32_t)hash_bytes(k, n);
    uint32_t i = h & (m->cap - 1);
    for (;;) {
        int32_t v = m->val[i];
        if (v < 0) return -1;
        if (m->hash[i] == h && m->klen[i] == n && memcmp(m->key[i], k, n) == 0) return v;
        i = (i + 1) & (m->cap - 1);
    }
}

void pairmap_init(PairMap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    m->cap = pow2_at_least(expected * 2 + 1);
    m->key = xmalloc(sizeof(uint64_t) * m->cap);
    m->rank = xmalloc(sizeof(int32_t) * m->cap);
    m->id = xmalloc(sizeof(int32_t) * m->cap);
    for (uint32_t i = 0; i < m->cap; i++) m->key[i] = UINT64_MAX;
}

void pairmap_free(PairMap *m) {
    free(m->key); free(m->rank); free(m->id);
    memset(m, 0, sizeof *m);
}

void pairmap_put(PairMap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    if (!m->cap) pairmap_init(m, 16);
    if ((m->count + 1) * 2 > m->cap) {
        PairMap n;
        pairmap_init(&n, m->cap);
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->key[i] != UINT64_MAX)
                pairmap_put(&n, (int32_t)(m->key[i] >> 32), (int32_t)(uint32_t)m->key[i], m->rank[i], m->id[i]);
        pairmap_free(m);
        *m = n;
    }
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = pairmap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->key[i] == UINT64_MAX) { m->key[i] = k; m->rank[i] = rank; m->id[i] = id; m->count++; return; }
        if (m->key[i] == k) { m->rank[i] = rank; m->id[i] = id; return; }
    }
}
