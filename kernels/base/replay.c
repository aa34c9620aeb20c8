#include "kernels/base/replay.h"

int attn_ctx_bound(int ctx, int slots) {
    if (ctx >= slots) return ctx;
    const long b = ((long)ctx + ATTN_CTX_BUCKET - 1) / ATTN_CTX_BUCKET * ATTN_CTX_BUCKET;
    return b < slots ? (int)b : slots;
}

int verify_rows_bound(int n, int cap) {
    if (n >= cap) return n;
    int b = 1;
    while (b < n) b = b < 8 ? 2 * b : (b & (b - 1)) ? b / 3 * 4 : b / 2 * 3;   /* 8, 12, 16, 24, 32, 48, ... */
    return b < cap ? b : cap;
}

uint64_t replay_sign(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int replay_find(ReplayCache *c, uint64_t key) {
    for (int i = 0; key && i < REPLAY_ENTRIES; i++)
        if (c->key[i] == key) {
            c->used[i] = ++c->clock;
            c->hits++;
            return i;
        }
    c->misses++;
    return -1;
}

int replay_victim(const ReplayCache *c) {
    int lru = 0;
    for (int i = 0; i < REPLAY_ENTRIES; i++) {
        if (!c->key[i]) return i;
        if (c->used[i] < c->used[lru]) lru = i;
    }
    return lru;
}

void replay_store(ReplayCache *c, int i, uint64_t key) {
    c->key[i] = key;
    c->used[i] = ++c->clock;
}

void replay_drop(ReplayCache *c, int i) {
    c->key[i] = 0;
    c->used[i] = 0;
}
