/* SentencePiece encoding and decoding, following sentencepiece's own code
 * path (the model is read by sentencepiece_model.c).
 *
 * Encoding: Normalizer::Normalize (identity normalization: whitespace
 * handling and the dummy prefix), then bpe::Model::SampleEncode without
 * dropout (characters, user-defined pieces frozen, repeatedly merge the
 * adjacent pair whose concatenation is a piece with the highest score,
 * leftmost first; UNUSED pieces re-split), then unknown pieces become byte
 * pieces (byte_fallback) or fused <unk>.
 *
 * Special-token text (<s>, </s>, <unk>, and added tokens of
 * tokenizer_config.json) is matched first, as transformers' LlamaTokenizer
 * does; each text chunk between them is then encoded on its own (legacy
 * behaviour: every chunk gets the dummy prefix; legacy=false: only the start
 * of the text does).  With TOK_SPLIT_SPECIAL no added token is matched,
 * special or not, as those tokenizers do with split_special_tokens=True:
 * the text goes to sentencepiece whole (its user-defined pieces, Gemma's
 * <start_of_turn> among them, still kept whole there). */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* ---- normalization (identity rules) ---- */

/* Longest USER_DEFINED piece at s, 0 if none. */
static size_t user_prefix(const Tokenizer *t, const char *s, size_t n) {
    size_t best = 0;
    for (int i = 0; i < t->n_user; i++) {
        size_t l = t->tok_len[t->user_idx[i]];
        if (l > best && l <= n && !memcmp(s, t->tok[t->user_idx[i]], l)) best = l;
    }
    return best;
}

/* Normalizer::Normalize.  dummy: add the dummy prefix; keep_lead: do not
 * drop leading whitespace (legacy=false chunks). */
static void spm_normalize(const Tokenizer *t, const char *s, size_t n, int dummy, int keep_lead, Buf *out) {
    out->n = 0;
    buf_put(out, "", 0);
    if (!n) return;
    static const char SP[] = "\xE2\x96\x81";
    size_t i = 0;
    int remove_ws = t->spm_remove_extra_ws;
    if (remove_ws && !keep_lead) while (i < n && s[i] == ' ') i++;
    if (i == n) return;
    if (dummy) {
        if (t->spm_escape_ws) buf_put(out, SP, 3); else buf_putc(out, ' ');
    }
    int prev_space = remove_ws && !keep_lead;
    while (i < n) {
        size_t ul = t->n_user ? user_prefix(t, s + i, n - i) : 0;
        const char *p = s + i; size_t pl;
        if (ul) pl = ul;
        else {
            int k = utf8_valid_char((const unsigned char *)s + i, n - i);
            pl = k ? (size_t)k : 1;
        }
        size_t consumed = pl;
        if (!ul && !utf8_valid_char((const unsigned char *)s + i, n - i)) { p = "\xEF\xBF\xBD"; pl = 3; }
        const char *q = p; size_t ql = pl;
        while (prev_space && ql && *q == ' ') { q++; ql--; }
        if (ql) {
            for (size_t k = 0; k < ql; k++) {
                if (t->spm_escape_ws && q[k] == ' ') buf_put(out, SP, 3);
                else buf_putc(out, q[k]);
            }
            prev_space = q[ql - 1] == ' ';
        }
        i += consumed;
        if (!remove_ws) prev_space = 0;
    }
    if (remove_ws) {
        const char *sp = t->spm_escape_ws ? SP : " ";
        size_t sl = t->spm_escape_ws ? 3 : 1;
        while (out->n >= sl && !memcmp(out->v + out->n - sl, sp, sl)) out->n -= sl;
        out->v[out->n] = 0;
    }
}

/* ---- score BPE (bpe::Model::SampleEncode, no dropout) ---- */

typedef struct { int prev, next; int freeze; const char *p; size_t n; } SSym;
typedef struct { int left, right; float score; size_t size; } SPair;
typedef struct { const char *a; size_t an; const char *b; size_t bn; } RevMerge;

static inline int spair_before(const SPair *x, const SPair *y) {  /* x pops before y */
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

typedef struct { SPair *v; size_t n, cap; } SHeap;
/* 4-ary max-heap by (score, -left). */
static void sheap_push(SHeap *h, SPair p) {
    if (h->n == h->cap) { h->cap = h->cap ? h->cap * 2 : 256; h->v = xrealloc(h->v, h->cap * sizeof(SPair)); }
    size_t i = h->n++;
    while (i > 0) {
        size_t q = (i - 1) / 4;
        if (!spair_before(&p, &h->v[q])) break;
        h->v[i] = h->v[q];
        i = q;
    }
    h->v[i] = p;
}
static SPair sheap_pop(SHeap *h) {
    SPair top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++) if (spair_before(&h->v[k], &h->v[best])) best = k;
        if (!spair_before(&h->v[best], &last)) break;
        h->v[i] = h->v[best];
        i = best;
    }
    if (n) h->v[i] = last;
    return top;
}

typedef struct {
    SSym *sym; size_t cap;
    SHeap heap;
    StrMap rev; RevMerge *revv; size_t nrev, caprev;
} SpmScratch;

static void maybe_pair(const Tokenizer *t, SpmScratch *w, int left, int right) {
    if (left < 0 || right < 0 || w->sym[left].freeze || w->sym[right].freeze) return;
    const char *p = w->sym[left].p;
    size_t n = w->sym[left].n + w->sym[right].n;
    int32_t id = strmap_get(&t->spm_pieces, p, n);
    if (id < 0) return;
    sheap_push(&w->heap, (SPair){left, right, t->score[id], n});
    if (t->attr[id] & TA_UNUSED) {
        if (w->nrev == w->caprev) { w->caprev = w->caprev ? w->caprev * 2 : 64; w->revv = xrealloc(w->revv, w->caprev * sizeof(RevMerge)); }
        w->revv[w->nrev] = (RevMerge){w->sym[left].p, w->sym[left].n, w->sym[right].p, w->sym[right].n};
        if (!w->rev.cap) strmap_init(&w->rev, 64);
        strmap_put(&w->rev, p, n, (int32_t)w->nrev);
        w->nrev++;
    }
}

static int32_t piece_to_id(const Tokenizer *t, const char *p, size_t n) {
    int32_t id = strmap_get(&t->spm_reserved, p, n);
    if (id >= 0) return id;
    id = strmap_get(&t->spm_pieces, p, n);
    return id >= 0 ? id : t->unk_id;
}

typedef struct { const char *p; size_t n; int32_t id; } OutPiece;
typedef struct { OutPiece *v; size_t n, cap; } OutVec;
static void out_push(OutVec *o, const char *p, size_t n, int32_t id) {
    if (o->n == o->cap) { o->cap = o->cap ? o->cap * 2 : 64; o->v = xrealloc(o->v, o->cap * sizeof(OutPiece)); }
    o->v[o->n++] = (OutPiece){p, n, id};
}

static void resegment(const Tokenizer *t, SpmScratch *w, const char *p, size_t n, OutVec *o, int depth) {
    int32_t id = piece_to_id(t, p, n);
    if (depth > 64 || !(t->attr[id] & TA_UNUSED)) { out_push(o, p, n, id); return; }
    int32_t r = w->rev.cap ? strmap_get(&w->rev, p, n) : -1;
    if (r < 0) { out_push(o, p, n, id); return; }
    RevMerge m = w->revv[r];
    resegment(t, w, m.a, m.an, o, depth + 1);
    resegment(t, w, m.b, m.bn, o, depth + 1);
}

/* Encodes one normalized string into ids. */
static void spm_bpe(const Tokenizer *t, const char *s, size_t n, IdVec *ids, SpmScratch *w) {
    if (!n) return;
    if (w->cap < n) { w->cap = n; w->sym = xrealloc(w->sym, n * sizeof(SSym)); }
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t ul = t->n_user ? user_prefix(t, s + i, n - i) : 0;
        size_t l;
        if (ul) l = ul;
        else {
            int k = utf8_valid_char((const unsigned char *)s + i, n - i);
            l = k ? (size_t)k : 1;
        }
        w->sym[ns] = (SSym){(int)ns - 1, i + l >= n ? -1 : (int)ns + 1, ul > 0, s + i, l};
        ns++;
        i += l;
    }
    w->heap.n = 0; w->nrev = 0;
    if (w->rev.cap) { strmap_free(&w->rev); }
    for (size_t i = 1; i < ns; i++) maybe_pair(t, w, (int)i - 1, (int)i);
    while (w->heap.n) {
        SPair top = sheap_pop(&w->heap);
        SSym *L = &w->sym[top.left], *R = &w->sym[top.right];
        if (!L->n || !R->n || L->n + R->n != top.size) continue;
        L->n += R->n;
        L->next = R->next;
        if (R->next >= 0) w->sym[R->next].prev = top.left;
        R->n = 0;
        maybe_pair(t, w, L->prev, top.left);
        maybe_pair(t, w, top.left, L->next);
    }
    OutVec o = {0};
    for (int i = 0; i != -1 && ns; i = w->sym[i].next) resegment(t, w, w->sym[i].p, w->sym[i].n, &o, 0);
    /* unknown pieces: bytes (byte_fallback) or one fused <unk> per run */
    int prev_unk = 0;
    for (size_t i = 0; i < o.n; i++) {
        int is_unk = o.v[i].id == t->unk_id;
        if (is_unk && t->byte_fallback) {
            for (size_t k = 0; k < o.v[i].n; k++) idvec_push(ids, t->byte_id[(unsigned char)o.v[i].p[k]]);
        } else if (!(is_unk && prev_unk)) {
            idvec_push(ids, o.v[i].id);
        }
        prev_unk = is_unk;
    }
    free(o.v);
}

static void spm_encode_chunk(const Tokenizer *t, const char *s, size_t n, int dummy, int keep_lead,
                             IdVec *out, Buf *nb, SpmScratch *w, int cache_locked) {
    spm_normalize(t, s, n, dummy, keep_lead, nb);
    if (!t->ws_split) { spm_bpe(t, nb->v, nb->n, out, w); return; }
    /* cut before each "▁" that follows another character: no piece spans
     * such a cut, so the segments encode independently (and repeat) */
    for (size_t st = 0, en; st < nb->n; st = en) {
        en = ws_segment_end(nb->v, nb->n, st);
        if (cache_locked && word_cache_get(t->cache, nb->v + st, en - st, out)) continue;
        size_t before = out->n;
        spm_bpe(t, nb->v + st, en - st, out, w);
        if (cache_locked) word_cache_put(t->cache, nb->v + st, en - st, out->v + before, out->n - before);
    }
}

/* The text cut at its added tokens, or whole (split_special). */
static void split_added(const Tokenizer *t, const char *text, size_t len, int split_special, PieceVec *segs) {
    if (split_special) piecevec_push(segs, text, len, -1, 1);
    else added_split(t, &t->match_raw, text, len, 0, 1, segs);
}

int spm_encode(const Tokenizer *t, const char *text, size_t len, int flags, IdVec *out) {
    PieceVec segs = {0};
    Buf nb = {0}, pre = {0};
    SpmScratch w = {0};
    int split_special = (flags & TOK_SPLIT_SPECIAL) != 0;
    int locked = word_cache_lock(t->cache);
    if (t->spm_legacy) {
        split_added(t, text, len, split_special, &segs);
        for (size_t i = 0; i < segs.n; i++) {
            if (segs.v[i].id >= 0) idvec_push(out, segs.v[i].id);
            else spm_encode_chunk(t, segs.v[i].p, segs.v[i].len, t->spm_add_dummy_prefix, 0, out, &nb, &w, locked);
        }
    } else {
        /* transformers LlamaTokenizer(legacy=False): "▁" + text with ▁ as
         * spaces, chunks encoded without the dummy prefix, a lone leading ▁
         * dropped before a special token. */
        if (len) {
            if (t->spm_add_prefix_space) buf_put(&pre, "\xE2\x96\x81", 3);
            for (size_t i = 0; i < len;) {
                if (i + 3 <= len && !memcmp(text + i, "\xE2\x96\x81", 3)) { buf_putc(&pre, ' '); i += 3; }
                else buf_putc(&pre, text[i++]);
            }
        }
        split_added(t, pre.v ? pre.v : "", pre.n, split_special, &segs);
        for (size_t i = 0; i < segs.n; i++) {
            if (segs.v[i].id >= 0) { idvec_push(out, segs.v[i].id); continue; }
            if (i == 0 && segs.n > 1 && segs.v[1].id >= 0 && segs.v[i].len == 3 && t->spm_add_prefix_space &&
                !memcmp(segs.v[i].p, "\xE2\x96\x81", 3))
                continue;
            spm_encode_chunk(t, segs.v[i].p, segs.v[i].len, 0, 1, out, &nb, &w, locked);
        }
    }
    if (locked) word_cache_unlock(t->cache);
    free(segs.v); free(nb.v); free(pre.v);
    free(w.sym); free(w.heap.v); free(w.revv);
    if (w.rev.cap) strmap_free(&w.rev);
    return 0;
}

/* ---- decoding (SentencePieceProcessor::Decode) ---- */

void spm_decode_piece(const Tokenizer *t, int32_t id, int skip_special, int *is_bos_ws, int *bos_ws_seen, Buf *out) {
    const char *p = t->tok[id]; size_t n = t->tok_len[id];
    uint8_t a = t->attr[id];
    if (a & (TA_CONTROL | TA_ADDED)) {
        *bos_ws_seen = 0;
        if (!skip_special || !(a & TA_SPECIAL)) buf_put(out, p, n);
        return;
    }
    if (a & TA_UNKNOWN) {
        *bos_ws_seen = 0;
        if (skip_special) buf_put(out, t->spm_unk_surface, strlen(t->spm_unk_surface));
        else buf_put(out, p, n);
        return;
    }
    int has = 0;
    if (*is_bos_ws && (t->spm_add_dummy_prefix || t->spm_remove_extra_ws)) {
        if (n >= 3 && !memcmp(p, "\xE2\x96\x81", 3)) { p += 3; n -= 3; has = 1; }
        if (t->spm_remove_extra_ws) has = 0;
    }
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && !memcmp(p + i, "\xE2\x96\x81", 3)) { buf_putc(out, ' '); i += 3; }
        else buf_putc(out, p[i++]);
    }
    *bos_ws_seen = has;
}

void spm_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, Buf *out) {
    int is_bos_ws = 1, bos_ws_seen = 0;
    Buf bytes = {0};
    buf_put(out, "", 0);
    for (size_t i = 0; i <= n; i++) {
        int is_byte = i < n && (t->attr[ids[i]] & TA_BYTE);
        if (is_byte) {
            const char *p = t->tok[ids[i]];
            unsigned char c = (unsigned char)strtol(p + 3, NULL, 16);
            buf_put(&bytes, &c, 1);
            continue;
        }
        if (bytes.n) { utf8_lossy(out, (const unsigned char *)bytes.v, bytes.n, 1); bytes.n = 0; }
        if (i == n) break;
        if (bos_ws_seen || out->n) is_bos_ws = 0;
        spm_decode_piece(t, ids[i], skip_special, &is_bos_ws, &bos_ws_seen, out);
    }
    free(bytes.v);
}
