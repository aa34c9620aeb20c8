/* Tokenizers: decoding ids to text, whole and streaming (byte-level and
 * SentencePiece pieces, byte fallback, cleanup). */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/bytelevel.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* decoding                                                            */

typedef struct { char *p; size_t n; } TS;
typedef struct { TS *v; size_t n, cap; } TSVec;
static void ts_push(TSVec *v, char *p, size_t n) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 64; v->v = xrealloc(v->v, v->cap * sizeof(TS)); }
    v->v[v->n++] = (TS){p, n};
}
static char *ts_dup(Arena *ar, const void *p, size_t n) {
    char *d = arena_alloc(ar, n + 1);
    memcpy(d, p, n); d[n] = 0;
    return d;
}

static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Maps each char of s via the byte-level table; -1 if a char has no byte. */
static long bytelevel_unmap(const char *s, size_t n, unsigned char *out) {
    size_t i = 0, k = 0;
    while (i < n) {
        int l = utf8_valid_char((const unsigned char *)s + i, n - i);
        if (!l) return -1;
        uint32_t cp = utf8_decode((const unsigned char *)s + i, l);
        if (cp >= 324 || bytelevel_dec[cp] < 0) return -1;
        out[k++] = (unsigned char)bytelevel_dec[cp];
        i += (size_t)l;
    }
    return (long)k;
}

static void dec_apply(const Tokenizer *t, const DecOp *op, TSVec *v, Arena *ar) {
    TSVec o = {0};
    switch (op->type) {
    case DEC_REPLACE: {
        SpanVec sp = {0};
        for (size_t i = 0; i < v->n; i++) {
            pattern_find_spans(op->re, op->pat, op->plen, v->v[i].p, v->v[i].n, &sp);
            Buf b = {0};
            for (size_t k = 0; k < sp.n; k++) {
                if (sp.v[k].m) buf_put(&b, op->content, op->clen);
                else buf_put(&b, v->v[i].p + sp.v[k].s, sp.v[k].e - sp.v[k].s);
            }
            ts_push(&o, ts_dup(ar, b.v ? b.v : "", b.n), b.n);
            free(b.v);
        }
        free(sp.v);
        break;
    }
    case DEC_BYTEFALLBACK: {
        Buf bytes = {0}; size_t nb = 0;
        for (size_t i = 0; i <= v->n; i++) {
            int bv = i < v->n ? byte_token_value(v->v[i].p, v->v[i].n) : -1;
            if (bv >= 0) { unsigned char c = (unsigned char)bv; buf_put(&bytes, &c, 1); nb++; continue; }
            if (nb) {
                if (utf8_check((const unsigned char *)bytes.v, bytes.n) < 0) ts_push(&o, ts_dup(ar, bytes.v, bytes.n), bytes.n);
                else for (size_t k = 0; k < nb; k++) ts_push(&o, ts_dup(ar, "\xEF\xBF\xBD", 3), 3);
                bytes.n = 0; nb = 0;
            }
            if (i < v->n) ts_push(&o, v->v[i].p, v->v[i].n);
        }
        free(bytes.v);
        break;
    }
    case DEC_FUSE: {
        Buf b = {0};
        for (size_t i = 0; i < v->n; i++) buf_put(&b, v->v[i].p, v->v[i].n);
        ts_push(&o, ts_dup(ar, b.v ? b.v : "", b.n), b.n);
        free(b.v);
        break;
    }
    case DEC_STRIP: {
        for (size_t i = 0; i < v->n; i++) {
            const unsigned char *s = (const unsigned char *)v->v[i].p; size_t n = v->v[i].n;
            size_t a = 0, e = n;
            for (int k = 0; k < op->start && a < n; k++) {
                int l = utf8_valid_char(s + a, n - a);
                if (!l || utf8_decode(s + a, l) != op->strip_ch) break;
                a += (size_t)l;
            }
            for (int k = 0; k < op->stop && e > a; k++) {
                size_t j = e - 1;
                while (j > a && (s[j] & 0xC0) == 0x80) j--;
                int l = utf8_valid_char(s + j, e - j);
                if (!l || utf8_decode(s + j, l) != op->strip_ch) break;
                e = j;
            }
            ts_push(&o, v->v[i].p + a, e - a);
        }
        break;
    }
    case DEC_BYTELEVEL: {
        Buf raw = {0};
        unsigned char *tmp = NULL; size_t tcap = 0;
        for (size_t i = 0; i < v->n; i++) {
            if (v->v[i].n > tcap) { tcap = v->v[i].n; tmp = xrealloc(tmp, tcap); }
            long k = bytelevel_unmap(v->v[i].p, v->v[i].n, tmp);
            if (k >= 0) buf_put(&raw, tmp, (size_t)k);
            else buf_put(&raw, v->v[i].p, v->v[i].n);
        }
        free(tmp);
        Buf s = {0};
        utf8_lossy(&s, (const unsigned char *)(raw.v ? raw.v : ""), raw.n, 0);
        ts_push(&o, ts_dup(ar, s.v ? s.v : "", s.n), s.n);
        free(raw.v); free(s.v);
        break;
    }
    case DEC_METASPACE: {
        for (size_t i = 0; i < v->n; i++) {
            Buf b = {0};
            const char *s = v->v[i].p; size_t n = v->v[i].n;
            for (size_t k = 0; k < n;) {
                if (k + (size_t)op->repl_len <= n && memcmp(s + k, op->repl, (size_t)op->repl_len) == 0) {
                    if (!(i == 0 && op->scheme != PREPEND_NEVER)) buf_putc(&b, ' ');
                    k += (size_t)op->repl_len;
                } else buf_putc(&b, s[k++]);
            }
            ts_push(&o, ts_dup(ar, b.v ? b.v : "", b.n), b.n);
            free(b.v);
        }
        break;
    }
    }
    (void)t;
    free(v->v);
    *v = o;
}

static int check_ids(const Tokenizer *t, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->tok[ids[i]]) {
            err_set("token id %d at position %zu is not in the vocabulary (size %d)", ids[i], i, t->n_ids);
            return -1;
        }
    return 0;
}

char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special) {
    return tokenizer_decode_len(t, ids, n, skip_special, NULL);
}

char *tokenizer_decode_len(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, size_t *len) {
    if (len) *len = 0;
    if (check_ids(t, ids, n)) return NULL;
    Buf out = {0};
    if (t->kind == TOK_KIND_SPM_BPE) {
        spm_decode(t, ids, n, skip_special, &out);
    } else {
        Arena ar = {0};
        TSVec v = {0};
        for (size_t i = 0; i < n; i++) {
            if (skip_special && (t->attr[ids[i]] & TA_SPECIAL)) continue;
            ts_push(&v, t->tok[ids[i]], t->tok_len[ids[i]]);
        }
        if (!t->has_decoder) {
            for (size_t i = 0; i < v.n; i++) { if (i) buf_putc(&out, ' '); buf_put(&out, v.v[i].p, v.v[i].n); }
        } else {
            for (int k = 0; k < t->n_dec; k++) dec_apply(t, &t->dec[k], &v, &ar);
            for (size_t i = 0; i < v.n; i++) buf_put(&out, v.v[i].p, v.v[i].n);
        }
        free(v.v);
        arena_free(&ar);
    }
    if (!out.v) { out.v = xmalloc(1); out.v[0] = 0; }
    if (len) *len = out.n;
    return out.v;
}

/* ---- streaming ---- */

struct TokenizerStream {
    const Tokenizer *t;
    int skip_special;
    int per_byte;          /* invalid UTF-8 -> one U+FFFD per byte */
    int byte_runs;         /* a non-byte token ends a run of byte tokens (ByteFallback, sentencepiece) */
    int index;             /* tokens passed to the decoder so far */
    int strip_left;        /* fused Strip: chars still strippable at the start */
    uint32_t strip_ch;
    int emitted_any;       /* any non-stripped output yet */
    int spm_bos_ws, spm_bos_ws_seen, spm_text_nonempty;
    Buf pend;              /* raw bytes not yet emitted */
    Buf out;
};

TokenizerStream *tokenizer_stream_new(const Tokenizer *t, int skip_special) {
    TokenizerStream *s = xcalloc(1, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
    s->per_byte = t->kind == TOK_KIND_SPM_BPE;
    int fused = 0;
    for (int k = 0; k < t->n_dec; k++) {
        const DecOp *op = &t->dec[k];
        if (op->type == DEC_BYTEFALLBACK) { s->per_byte = 1; s->byte_runs = 1; }
        if (op->type == DEC_BYTELEVEL) { s->per_byte = 0; fused = 1; }
        if (op->type == DEC_FUSE) fused = 1;
        if (op->type == DEC_STRIP && fused) { s->strip_left = op->start; s->strip_ch = op->strip_ch; }
    }
    if (t->kind == TOK_KIND_SPM_BPE) s->byte_runs = 1;
    s->spm_bos_ws = 1;
    return s;
}

void tokenizer_stream_free(TokenizerStream *s) {
    if (!s) return;
    free(s->pend.v); free(s->out.v); free(s);
}

/* Raw bytes of one token through the decoder chain (per-token view). */
static void stream_token_bytes(TokenizerStream *s, int32_t id, Buf *b) {
    const Tokenizer *t = s->t;
    const char *p = t->tok[id]; size_t n = t->tok_len[id];
    Arena ar = {0};
    TS cur = {(char *)p, n};
    int fused = 0;
    if (!t->has_decoder) {
        if (s->index > 0) buf_putc(b, ' ');
        buf_put(b, p, n);
        return;
    }
    int raw_done = 0;
    for (int k = 0; k < t->n_dec && !raw_done; k++) {
        const DecOp *op = &t->dec[k];
        switch (op->type) {
        case DEC_REPLACE: {
            SpanVec sp = {0};
            pattern_find_spans(op->re, op->pat, op->plen, cur.p, cur.n, &sp);
            Buf o = {0};
            for (size_t i = 0; i < sp.n; i++) {
                if (sp.v[i].m) buf_put(&o, op->content, op->clen);
                else buf_put(&o, cur.p + sp.v[i].s, sp.v[i].e - sp.v[i].s);
            }
            cur.p = ts_dup(&ar, o.v ? o.v : "", o.n); cur.n = o.n;
            free(o.v); free(sp.v);
            break;
        }
        case DEC_BYTEFALLBACK: {
            int bv = byte_token_value(cur.p, cur.n);
            if (bv >= 0) { unsigned char c = (unsigned char)bv; cur.p = ts_dup(&ar, &c, 1); cur.n = 1; }
            break;
        }
        case DEC_FUSE: fused = 1; break;
        case DEC_STRIP:
            if (!fused) {
                TSVec v = {0};
                ts_push(&v, cur.p, cur.n);
                dec_apply(t, op, &v, &ar);
                cur = v.v[0];
                free(v.v);
            }
            break;
        case DEC_BYTELEVEL: {
            unsigned char *tmp = (unsigned char *)arena_alloc(&ar, cur.n + 1);
            long k2 = bytelevel_unmap(cur.p, cur.n, tmp);
            if (k2 >= 0) { cur.p = (char *)tmp; cur.n = (size_t)k2; }
            fused = 1;
            break;
        }
        case DEC_METASPACE: {
            Buf o = {0};
            int first = fused ? 1 : s->index == 0;
            for (size_t i = 0; i < cur.n;) {
                if (i + (size_t)op->repl_len <= cur.n && memcmp(cur.p + i, op->repl, (size_t)op->repl_len) == 0) {
                    if (!(first && op->scheme != PREPEND_NEVER)) buf_putc(&o, ' ');
                    i += (size_t)op->repl_len;
                } else buf_putc(&o, cur.p[i++]);
            }
            cur.p = ts_dup(&ar, o.v ? o.v : "", o.n); cur.n = o.n;
            free(o.v);
            break;
        }
        }
    }
    buf_put(b, cur.p, cur.n);
    arena_free(&ar);
}

/* Emits complete characters from s->pend into s->out. */
static void stream_drain(TokenizerStream *s, int final) {
    const unsigned char *p = (const unsigned char *)s->pend.v;
    size_t n = s->pend.n, i = 0;
    while (i < n) {
        int k = utf8_valid_char(p + i, n - i);
        if (!k) {
            if (!final && utf8_incomplete_prefix(p + i, n - i)) break;
            int skip = s->per_byte ? 1 : utf8_maximal_prefix(p + i, n - i);
            if (skip <= 0) skip = 1;
            buf_put(&s->out, "\xEF\xBF\xBD", 3);
            s->strip_left = 0;
            i += (size_t)skip;
            continue;
        }
        if (s->strip_left > 0 && utf8_decode(p + i, k) == s->strip_ch) {
            s->strip_left--;
            i += (size_t)k;
            continue;
        }
        s->strip_left = 0;
        buf_put(&s->out, p + i, (size_t)k);
        i += (size_t)k;
    }
    if (i && n > i) memmove(s->pend.v, s->pend.v + i, n - i);
    s->pend.n = n - i;
}

const char *tokenizer_stream_push(TokenizerStream *s, int32_t id) {
    const Tokenizer *t = s->t;
    if (check_ids(t, &id, 1)) return NULL;
    s->out.n = 0;
    buf_put(&s->out, "", 0);
    if (t->kind == TOK_KIND_SPM_BPE) {
        Buf b = {0};
        int is_byte = (t->attr[id] & TA_BYTE) != 0;
        if (!is_byte) {
            stream_drain(s, 1);  /* the byte run ends here: unfinished bytes become U+FFFD */
            if (s->spm_bos_ws_seen || s->spm_text_nonempty) s->spm_bos_ws = 0;
            spm_decode_piece(t, id, s->skip_special, &s->spm_bos_ws, &s->spm_bos_ws_seen, &b);
        } else {
            int v = byte_token_value(t->tok[id], t->tok_len[id]);
            unsigned char c = (unsigned char)(v < 0 ? 0 : v);
            buf_put(&b, &c, 1);
        }
        if (b.n) s->spm_text_nonempty = 1;
        buf_put(&s->pend, b.v ? b.v : "", b.n);
        free(b.v);
        stream_drain(s, 0);
        return s->out.v;
    }
    if (s->skip_special && (t->attr[id] & TA_SPECIAL)) return s->out.v;
    if (s->byte_runs && byte_token_value(t->tok[id], t->tok_len[id]) < 0) stream_drain(s, 1);
    Buf b = {0};
    stream_token_bytes(s, id, &b);
    s->index++;
    buf_put(&s->pend, b.v ? b.v : "", b.n);
    free(b.v);
    stream_drain(s, 0);
    return s->out.v;
}

size_t tokenizer_stream_len(const TokenizerStream *s) { return s->out.n; }

const char *tokenizer_stream_flush(TokenizerStream *s) {
    s->out.n = 0;
    buf_put(&s->out, "", 0);
    stream_drain(s, 1);
    return s->out.v;
}

