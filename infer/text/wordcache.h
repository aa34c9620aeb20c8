/* A cache of word -> ids for BPE: pre-tokenized words repeat (" the",
 * "▁of"), and merging a word costs far more than looking it up.  Words of
 * up to 256 bytes and up to 65536 entries are kept; when full it starts
 * over empty.  Threads share it through a try-lock: one that finds it busy
 * encodes without it (same ids, only slower).  Internal to infer/text. */
#ifndef C2T_TEXT_WORDCACHE_H
#define C2T_TEXT_WORDCACHE_H
#include "infer/text/buf.h"
#include <stddef.h>
#include <stdint.h>

typedef struct WordCache WordCache;
WordCache *word_cache_new(void);
void word_cache_free(WordCache *c);   /* NULL is fine */
/* 1 when the caller now holds the cache; 0 when another thread does (or c
 * is NULL).  get and put only under the lock. */
int word_cache_lock(WordCache *c);
void word_cache_unlock(WordCache *c);
/* Appends the ids cached for w[0..n) to out: 1, or 0 when w is not cached. */
int word_cache_get(WordCache *c, const char *w, size_t n, IdVec *out);
/* Caches ids[0..k) for w[0..n) (ids may be NULL when k is 0). */
void word_cache_put(WordCache *c, const char *w, size_t n, const int32_t *ids, size_t k);
#endif
