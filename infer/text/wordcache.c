/* The BPE word cache (wordcache.h). */
#include "infer/text/wordcache.h"
#include "infer/text/strmap.h"
#include "kernels/base/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_WORD 256
/* The map's keys point into the key storage, so it must never move: it is
 * reserved whole on the first put (65536 words of 24 bytes on average);
 * when the entries or the key bytes run out, the cache starts over. */
#define CACHE_KEY_BYTES (CACHE_MAX_ENTRIES * 24)

struct WordCache {
    pthread_mutex_t lock;
    StrMap map;               /* word -> entry */
    Buf keys;                 /* the words' bytes, back to back */
    IdVec ids;                /* the entries' ids, back to back */
    uint32_t *ent_off, *ent_n;  /* entry -> its ids in `ids` */
    size_t n_ent, cap_ent;
};

WordCache *word_cache_new(void) {
    WordCache *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    strmap_init(&c->map, 1024);
    return c;
}

static void clear(WordCache *c) {
    strmap_free(&c->map);
    strmap_init(&c->map, 1024);
    c->keys.n = 0; c->ids.n = 0; c->n_ent = 0;
}

void word_cache_free(WordCache *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    strmap_free(&c->map);
    free(c->keys.v); free(c->ids.v);
    free(c->ent_off); free(c->ent_n);
    free(c);
}

int word_cache_lock(WordCache *c) { return c && pthread_mutex_trylock(&c->lock) == 0; }
void word_cache_unlock(WordCache *c) { pthread_mutex_unlock(&c->lock); }

int word_cache_get(WordCache *c, const char *w, size_t n, IdVec *out) {
    int32_t e = strmap_get(&c->map, w, n);
    if (e < 0) return 0;
    /* a word that encoded to no ids (a hostile vocabulary can do that) may
     * be cached while c->ids is still unallocated: no pointer arithmetic then */
    if (c->ent_n[e]) idvec_append(out, c->ids.v + c->ent_off[e], c->ent_n[e]);
    return 1;
}

void word_cache_put(WordCache *c, const char *w, size_t n, const int32_t *ids, size_t k) {
    if (n > CACHE_MAX_WORD) return;
    if (!c->keys.v) { c->keys.v = xmalloc(CACHE_KEY_BYTES + 1); c->keys.cap = CACHE_KEY_BYTES + 1; }
    if (c->n_ent >= CACHE_MAX_ENTRIES || c->keys.n + n > CACHE_KEY_BYTES) clear(c);
    if (c->n_ent == c->cap_ent) {
        c->cap_ent = c->cap_ent ? c->cap_ent * 2 : 1024;
        c->ent_off = xrealloc(c->ent_off, c->cap_ent * sizeof(uint32_t));
        c->ent_n = xrealloc(c->ent_n, c->cap_ent * sizeof(uint32_t));
    }
    char *key = c->keys.v + c->keys.n;
    memcpy(key, w, n);
    c->keys.n += n;
    c->ent_off[c->n_ent] = (uint32_t)c->ids.n;
    c->ent_n[c->n_ent] = (uint32_t)k;
    idvec_append(&c->ids, ids, k);
    strmap_put(&c->map, key, n, (int32_t)c->n_ent);
    c->n_ent++;
}
