/* BPE by merge rank, as the tokenizers library's Word::merge_all: a word
 * starts as its characters (with continuing_subword_prefix /
 * end_of_word_suffix added, unknown ones as byte tokens or unk), then the
 * adjacent pair with the lowest merge rank, leftmost first, is merged until
 * no pair is a merge. */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* A symbol of the word: token c covering len bytes, in a linked list
 * (len 0: merged into its left neighbour). */
struct BpeSym { int32_t c, prev, next; uint32_t len; };
/* A candidate merge of the symbol at pos with its right neighbour. */
struct BpeMerge { int32_t rank, pos, new_id; };
typedef struct BpeSym Sym;
typedef struct BpeMerge Merge;

void bpe_scratch_free(BpeScratch *s) {
    free(s->sym); free(s->heap); free(s->tmp.v);
    memset(s, 0, sizeof *s);
}

static inline int merge_less(const Merge *a, const Merge *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* 4-ary min-heap (shallower than a binary one: fewer cache misses on the
 * long words of SentencePiece-style tokenizers, which have no pre-tokenizer). */
static void heap_push(BpeScratch *s, Merge m) {
    if (s->heap_n == s->heap_cap) {
        s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 256;
        s->heap = xrealloc(s->heap, s->heap_cap * sizeof(Merge));
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (!merge_less(&m, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = m;
}

static Merge heap_pop(BpeScratch *s) {
    Merge top = s->heap[0];
    Merge last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++) if (merge_less(&s->heap[k], &s->heap[best])) best = k;
        if (!merge_less(&s->heap[best], &last)) break;
        s->heap[i] = s->heap[best];
        i = best;
    }
    if (n) s->heap[i] = last;
    return top;
}

int bpe_word(const Tokenizer *t, const char *w, size_t n, IdVec *out, BpeScratch *s) {
    if (!n) return 0;
    if (t->ignore_merges) {
        int32_t id = strmap_get(&t->vocab, w, n);
        if (id >= 0) { idvec_push(out, id); return 0; }
    }
    size_t ns = 0;
    if (s->sym_cap < n + 1) { s->sym_cap = n + 1; s->sym = xrealloc(s->sym, s->sym_cap * sizeof(Sym)); }
    int32_t unk_pending = -1; uint32_t unk_len = 0;
#define ADD_SYM(cid, blen) do { s->sym[ns] = (Sym){(cid), (int32_t)ns - 1, (int32_t)ns + 1, (uint32_t)(blen)}; ns++; } while (0)
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    size_t slen = t->eow_suffix ? strlen(t->eow_suffix) : 0;
    for (size_t i = 0; i < n;) {
        int k = utf8_valid_char((const unsigned char *)w + i, n - i);
        if (!k) k = 1;
        const char *cs = w + i; size_t cl = (size_t)k;
        int first = i == 0, last = i + (size_t)k >= n;
        if ((!first && plen) || (last && slen)) {
            s->tmp.n = 0;
            if (!first && plen) buf_put(&s->tmp, t->cont_prefix, plen);
            buf_put(&s->tmp, w + i, (size_t)k);
            if (last && slen) buf_put(&s->tmp, t->eow_suffix, slen);
            cs = s->tmp.v; cl = s->tmp.n;
        }
        int32_t id = strmap_get(&t->vocab, cs, cl);
        if (id >= 0) {
            if (unk_pending >= 0) { ADD_SYM(unk_pending, unk_len); unk_pending = -1; }
            ADD_SYM(id, k);
        } else {
            int done = 0;
            if (t->byte_fallback) {
                int ok = 1;
                for (size_t b = 0; b < cl; b++) if (t->byte_id[(unsigned char)cs[b]] < 0) { ok = 0; break; }
                if (ok) {
                    if (ns + cl + 1 > s->sym_cap) { s->sym_cap = (ns + cl + 1) * 2; s->sym = xrealloc(s->sym, s->sym_cap * sizeof(Sym)); }
                    for (size_t b = 0; b < cl; b++) ADD_SYM(t->byte_id[(unsigned char)cs[b]], 1);
                    done = 1;
                }
            }
            if (!done && t->unk_id != INT32_MIN) {
                if (t->unk_id < 0) { err_set("the unk token is not in the vocabulary"); return -1; }
                if (unk_pending >= 0 && t->fuse_unk) unk_len += (uint32_t)k;
                else {
                    if (unk_pending >= 0) ADD_SYM(unk_pending, unk_len);
                    unk_pending = t->unk_id; unk_len = (uint32_t)k;
                }
            }
        }
        i += (size_t)k;
        if (ns + 8 > s->sym_cap) { s->sym_cap = s->sym_cap * 2 + 8; s->sym = xrealloc(s->sym, s->sym_cap * sizeof(Sym)); }
    }
    if (unk_pending >= 0) ADD_SYM(unk_pending, unk_len);
#undef ADD_SYM
    if (!ns) return 0;
    s->sym[ns - 1].next = -1;
    /* merge_all */
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        int32_t r, id;
        if (pairmap_get(&t->merges, s->sym[i].c, s->sym[i + 1].c, &r, &id)) heap_push(s, (Merge){r, (int32_t)i, id});
    }
    while (s->heap_n) {
        Merge top = heap_pop(s);
        Sym *cur = &s->sym[top.pos];
        if (cur->len == 0 || cur->next == -1) continue;
        int32_t nxt = cur->next;
        Sym right = s->sym[nxt];
        int32_t r, id;
        if (!pairmap_get(&t->merges, cur->c, right.c, &r, &id) || id != top.new_id) continue;
        cur->c = top.new_id;
        cur->len += right.len;
        cur->next = right.next;
        s->sym[nxt].len = 0;
        if (right.next > -1 && (size_t)right.next < ns) s->sym[right.next].prev = top.pos;
        if (cur->prev >= 0) {
            Sym *pv = &s->sym[cur->prev];
            if (pairmap_get(&t->merges, pv->c, cur->c, &r, &id)) heap_push(s, (Merge){r, cur->prev, id});
        }
        if (cur->next >= 0 && (size_t)cur->next < ns) {
            if (pairmap_get(&t->merges, cur->c, s->sym[cur->next].c, &r, &id)) heap_push(s, (Merge){r, top.pos, id});
        }
    }
    for (size_t i = 0; i < ns; i++) if (s->sym[i].len) idvec_push(out, s->sym[i].c);
    return 0;
}
