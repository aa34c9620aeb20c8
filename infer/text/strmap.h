/* The tokenizers' hash maps: byte strings to ids (StrMap) and id pairs to a
 * BPE merge (PairMap).  Open addressing with linear probing, kept at most
 * half full; a zeroed map is empty and grows on the first put.  Internal to
 * infer/text. */
#ifndef C2T_TEXT_STRMAP_H
#define C2T_TEXT_STRMAP_H
#include <stddef.h>
#include <stdint.h>

/* Keys are not copied: each must stay alive and unchanged while the map
 * holds it (the tokenizer's maps point into its token strings). */
typedef struct {
    uint32_t cap, count;      /* cap: power of two */
    int32_t *val;             /* -1 = empty slot */
    uint32_t *hash;
    const char **key;
    uint32_t *klen;
} StrMap;
void strmap_init(StrMap *m, size_t expected);
void strmap_free(StrMap *m);
/* Inserts or overwrites (v >= 0). */
void strmap_put(StrMap *m, const char *k, size_t n, int32_t v);
int32_t strmap_get(const StrMap *m, const char *k, size_t n);  /* -1 when absent */

/* (id a, id b) -> the merge's rank and the id of the merged token. */
typedef struct {
    uint32_t cap, count;
    uint64_t *key;            /* a << 32 | b; UINT64_MAX = empty */
    int32_t *rank, *id;
} PairMap;
void pairmap_init(PairMap *m, size_t expected);
void pairmap_free(PairMap *m);
/* A pair put twice keeps the later merge, as the tokenizers library does. */
void pairmap_put(PairMap *m, int32_t a, int32_t b, int32_t rank, int32_t id);

static inline uint32_t pairmap_slot(const PairMap *m, uint64_t k) {
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    return (uint32_t)h & (m->cap - 1);
}

/* Returns 1 and fills rank/id when the pair is a merge.  Inline: BPE asks
 * once per adjacent pair of every word. */
static inline int pairmap_get(const PairMap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    if (!m->cap) return 0;
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = pairmap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->key[i] == k) { *rank = m->rank[i]; *id = m->id[i]; return 1; }
        if (m->key[i] == UINT64_MAX) return 0;
    }
}
#endif
