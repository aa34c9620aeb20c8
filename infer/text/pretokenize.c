/* tokenizer.json's pre-tokenizers, which cut normalized text into the
 * words BPE sees: Split (and Digits, loaded as a Split) with the five
 * delimiter behaviours, Metaspace, ByteLevel.  And the cut this project
 * adds for SentencePiece-style vocabularies without a pre-tokenizer:
 * before each "▁" that follows another character, where no merge can
 * cross (ws_split_safe says when that holds). */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/bytelevel.h"
#include <string.h>

/* Applies a SplitDelimiterBehavior: in's spans (text and matches) become
 * out's pieces (in out, m is 0). */
static void apply_behavior(const SpanVec *in, int behavior, SpanVec *out) {
    out->n = 0;
    int prev_match = 0;
    switch (behavior) {
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < in->n; i++) spanvec_push(out, in->v[i].s, in->v[i].e, 0);
        break;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < in->n; i++) if (!in->v[i].m) spanvec_push(out, in->v[i].s, in->v[i].e, 0);
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < in->n; i++) {
            int m = in->v[i].m;
            if (m == prev_match && out->n) out->v[out->n - 1].e = in->v[i].e;
            else spanvec_push(out, in->v[i].s, in->v[i].e, 0);
            prev_match = m;
        }
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < in->n; i++) {
            int m = in->v[i].m;
            if (m && !prev_match && out->n) out->v[out->n - 1].e = in->v[i].e;
            else spanvec_push(out, in->v[i].s, in->v[i].e, 0);
            prev_match = m;
        }
        break;
    case SPLIT_MERGED_NEXT:
        for (size_t k = in->n; k-- > 0;) {
            int m = in->v[k].m;
            if (m && !prev_match && out->n) out->v[out->n - 1].s = in->v[k].s;
            else spanvec_push(out, in->v[k].s, in->v[k].e, 0);
            prev_match = m;
        }
        for (size_t i = 0, j = out->n ? out->n - 1 : 0; i < j; i++, j--) {
            Span tmp = out->v[i]; out->v[i] = out->v[j]; out->v[j] = tmp;
        }
        break;
    }
}

/* The non-empty spans of sp as pieces of s (orig0 kept for the one at 0). */
static inline void push_spans(const SpanVec *sp, const char *s, int orig0, PieceVec *out) {
    for (size_t i = 0; i < sp->n; i++)
        if (sp->v[i].e > sp->v[i].s)
            piecevec_push(out, s + sp->v[i].s, sp->v[i].e - sp->v[i].s, -1, orig0 && sp->v[i].s == 0);
}

static void split(const PreOp *op, const Piece *p, PieceVec *out, PreScratch *sc) {
    pattern_find_spans(op->re, op->lit, op->litlen, p->p, p->len, &sc->a);
    if (op->invert) for (size_t i = 0; i < sc->a.n; i++) sc->a.v[i].m = !sc->a.v[i].m;
    apply_behavior(&sc->a, op->behavior, &sc->b);
    push_spans(&sc->b, p->p, p->orig0, out);
}

/* ' ' becomes the replacement, which is prepended as the scheme says;
 * with split, each piece then starts at a replacement. */
static void metaspace(const PreOp *op, const Piece *p, PieceVec *out, Arena *ar, PreScratch *sc) {
    const char *s = p->p; size_t n = p->len;
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    char *d = arena_alloc(ar, n + spaces * (size_t)op->repl_len + (size_t)op->repl_len);
    size_t q = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(d + q, op->repl, (size_t)op->repl_len); q += (size_t)op->repl_len; }
        else d[q++] = s[i];
    }
    int starts = q >= (size_t)op->repl_len && memcmp(d, op->repl, (size_t)op->repl_len) == 0;
    int prepend = (op->scheme == PREPEND_ALWAYS && !starts) ||
                  (op->scheme == PREPEND_FIRST && !starts && p->orig0);
    if (prepend) {
        memmove(d + op->repl_len, d, q);
        memcpy(d, op->repl, (size_t)op->repl_len);
        q += (size_t)op->repl_len;
    }
    if (!op->split) { if (q) piecevec_push(out, d, q, -1, p->orig0); return; }
    pattern_find_spans(NULL, op->repl, (size_t)op->repl_len, d, q, &sc->a);
    apply_behavior(&sc->a, SPLIT_MERGED_NEXT, &sc->b);
    push_spans(&sc->b, d, p->orig0, out);
}

/* An optional leading space, the GPT-2 split regex, then every byte of
 * each piece as its byte-level character. */
static void bytelevel(const PreOp *op, const Piece *p, PieceVec *out, Arena *ar, PreScratch *sc) {
    const char *src = p->p; size_t sn = p->len;
    if (op->add_prefix_space && !(sn && src[0] == ' ')) {
        char *d = arena_alloc(ar, sn + 1);
        d[0] = ' ';
        memcpy(d + 1, p->p, sn);
        src = d; sn++;
    }
    size_t first = out->n;
    if (op->use_regex) {
        pattern_find_spans(op->re, NULL, 0, src, sn, &sc->a);
        push_spans(&sc->a, src, p->orig0, out);
    } else if (sn) {
        piecevec_push(out, src, sn, -1, p->orig0);
    }
    for (size_t i = first; i < out->n; i++) {
        Piece *q = &out->v[i];
        char *d = arena_alloc(ar, (size_t)q->len * 2);
        size_t k = 0;
        for (uint32_t j = 0; j < q->len; j++) {
            unsigned char b = (unsigned char)q->p[j];
            memcpy(d + k, bytelevel_enc[b], bytelevel_enc_len[b]);
            k += bytelevel_enc_len[b];
        }
        q->p = d; q->len = (uint32_t)k;
    }
}

void pretokenize(const PreOp *op, const Piece *p, PieceVec *out, Arena *ar, PreScratch *s) {
    switch (op->type) {
    case PRE_SPLIT: split(op, p, out, s); break;
    case PRE_METASPACE: metaspace(op, p, out, ar, s); break;
    case PRE_BYTELEVEL: bytelevel(op, p, out, ar, s); break;
    }
}

#define META "\xE2\x96\x81"

int ws_split_safe(const Tokenizer *t, const StrMap *lookup) {
    if (strmap_get(lookup, META, 3) < 0) return 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        const char *s = t->tok[id];
        if (!s) continue;
        size_t n = t->tok_len[id];
        if (strmap_get(lookup, s, n) != id) continue;   /* only tokens merges can produce */
        size_t lead = 0;
        while (lead + 3 <= n && !memcmp(s + lead, META, 3)) lead += 3;
        if (lead < n && memmem(s + lead, n - lead, META, 3)) return 0;
    }
    return 1;
}

size_t ws_segment_end(const char *s, size_t n, size_t from) {
    size_t i = from + 1;
    while (i + 3 <= n) {
        const char *p = memmem(s + i, n - i, META, 3);
        if (!p) return n;
        size_t k = (size_t)(p - s);
        if (k > from && !(k >= 3 && !memcmp(s + k - 3, META, 3))) return k;
        i = k + 3;
    }
    return n;
}
