/* Growable buffers and the bump arena (buf.h). */
#include "infer/text/buf.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

void buf_put(Buf *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (b->n + n + 1 > c) c *= 2;
        b->v = xrealloc(b->v, c);
        b->cap = c;
    }
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
    b->v[b->n] = 0;
}

void idvec_push(IdVec *v, int32_t x) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 64; v->v = xrealloc(v->v, v->cap * sizeof(int32_t)); }
    v->v[v->n++] = x;
}

void idvec_append(IdVec *v, const int32_t *x, size_t n) {
    if (!n) return;
    if (v->n + n > v->cap) {
        while (v->n + n > v->cap) v->cap = v->cap ? v->cap * 2 : 64;
        v->v = xrealloc(v->v, v->cap * sizeof(int32_t));
    }
    memcpy(v->v + v->n, x, n * sizeof(int32_t));
    v->n += n;
}

void piecevec_push(PieceVec *v, const char *p, size_t len, int32_t id, int orig0) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 32; v->v = xrealloc(v->v, v->cap * sizeof(Piece)); }
    v->v[v->n++] = (Piece){p, (uint32_t)len, id, (uint8_t)orig0};
}

/* Blocks of 64 KiB (or one the size of a larger request), newest first. */
struct ArenaBlock { ArenaBlock *next; size_t used, cap; char data[]; };

char *arena_alloc(Arena *a, size_t n) {
    n = (n + 7) & ~(size_t)7;
    if (!a->head || a->head->used + n > a->head->cap) {
        size_t cap = n > (1u << 16) ? n : (1u << 16);
        ArenaBlock *b = xmalloc(sizeof(ArenaBlock) + cap);
        b->next = a->head; b->used = 0; b->cap = cap;
        a->head = b;
    }
    char *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

void arena_free(Arena *a) {
    while (a->head) { ArenaBlock *n = a->head->next; free(a->head); a->head = n; }
}
