/* Tokenizers: the tokenizer.json (Hugging Face `tokenizers`) BPE pipeline,
 * shared plumbing (hash maps, UTF-8, added tokens), decoding and the public
 * API.  The SentencePiece tokenizer.model path lives in sentencepiece.c.
 *
 * The encode pipeline follows tokenizers 0.20 step by step:
 *   1. added tokens that are not `normalized` are cut out of the raw text
 *      (leftmost-longest, lstrip/rstrip/single_word);
 *   2. each remaining piece is normalized (Prepend, Replace, Strip), and
 *      `normalized` added tokens are cut out of the result;
 *   3. pre-tokenizers split / rewrite the pieces (Split regex, ByteLevel,
 *      Metaspace, Digits);
 *   4. each piece goes through BPE (merges by rank; ignore_merges; byte
 *      fallback; unk fusing);
 *   5. the post-processor (TemplateProcessing) adds bos/eos.
 * Regexes are compiled with PCRE2 (UTF + UCP); the patterns are written for
 * Oniguruma, so \s / \S are rewritten to Oniguruma's Unicode White_Space set. */
#include "infer/text/tokenizer_internal.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* small containers                                                    */

static uint32_t pow2_at_least(size_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
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
    uint32_t h = (uint32_t)tk_hash(k, n);
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
    uint32_t h = (uint32_t)tk_hash(k, n);
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
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    uint32_t i = (uint32_t)h & (m->cap - 1);
    for (;;) {
        if (m->key[i] == UINT64_MAX) { m->key[i] = k; m->rank[i] = rank; m->id[i] = id; m->count++; return; }
        if (m->key[i] == k) { m->rank[i] = rank; m->id[i] = id; return; }  /* later merge wins, as in HF */
        i = (i + 1) & (m->cap - 1);
    }
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

void buf_put_cp(Buf *b, uint32_t cp) {
    char u[4]; int n;
    if (cp < 0x80) { u[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    buf_put(b, u, (size_t)n);
}

void piecevec_push(PieceVec *v, const char *p, size_t len, int32_t id, int orig0) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 32; v->v = xrealloc(v->v, v->cap * sizeof(Piece)); }
    v->v[v->n++] = (Piece){p, (uint32_t)len, id, (uint8_t)orig0};
}

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

/* ------------------------------------------------------------------ */
/* UTF-8                                                               */

int utf8_valid_char(const unsigned char *s, size_t n) {
    if (!n) return 0;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len; unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Number of bytes at s that form a valid (possibly incomplete) prefix of a
 * character: the "maximal subpart" of Unicode's replacement practice. */
static int utf8_maximal_prefix(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len; unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    int k = 1;
    if ((size_t)k < n && s[1] >= lo && s[1] <= hi) {
        k = 2;
        while (k < len && (size_t)k < n && (s[k] & 0xC0) == 0x80) k++;
    }
    (void)len;
    return k;
}

int utf8_incomplete_prefix(const unsigned char *s, size_t n) {
    if (!n) return 0;
    int k = utf8_maximal_prefix(s, n);
    if (k <= 0) return 0;
    if ((size_t)k == n && utf8_valid_char(s, n) == 0) return k;  /* could still complete */
    return 0;
}

uint32_t utf8_decode(const unsigned char *s, int len) {
    switch (len) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default: return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                    ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
}

void utf8_lossy(Buf *out, const unsigned char *s, size_t n, int per_byte) {
    size_t i = 0, run = 0;
    while (i < n) {
        int k = utf8_valid_char(s + i, n - i);
        if (k) { i += (size_t)k; continue; }
        if (i > run) buf_put(out, s + run, i - run);
        int skip = per_byte ? 1 : utf8_maximal_prefix(s + i, n - i);
        if (skip <= 0) skip = 1;
        buf_put(out, "\xEF\xBF\xBD", 3);
        i += (size_t)skip;
        run = i;
    }
    if (n > run) buf_put(out, s + run, n - run);
}

long utf8_check(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        int k = utf8_valid_char(s + i, n - i);
        if (!k) return (long)i;
        i += (size_t)k;
    }
    return -1;
}

int unicode_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* ------------------------------------------------------------------ */
/* regexes                                                             */

/* Oniguruma's \s (Unicode White_Space), for use inside a character class. */
#define ONIG_SPACE_CLASS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

static pcre2_code *regex_compile(const char *pattern, const char *what) {
    Buf b = {0};
    int in_class = 0;
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\' && p[1]) {
            if (p[1] == 's') {
                if (in_class) buf_put(&b, ONIG_SPACE_CLASS, strlen(ONIG_SPACE_CLASS));
                else buf_put(&b, "[" ONIG_SPACE_CLASS "]", strlen(ONIG_SPACE_CLASS) + 2);
                p++;
                continue;
            }
            if (p[1] == 'S' && !in_class) {
                buf_put(&b, "[^" ONIG_SPACE_CLASS "]", strlen(ONIG_SPACE_CLASS) + 3);
                p++;
                continue;
            }
            buf_put(&b, p, 2);
            p++;
            continue;
        }
        if (*p == '[' && !in_class) {
            in_class = 1;
            buf_putc(&b, *p);
            /* a ']' right after '[' or '[^' is literal */
            if (p[1] == '^') { buf_putc(&b, '^'); p++; }
            if (p[1] == ']') { buf_putc(&b, ']'); p++; }
            continue;
        }
        if (*p == '[' && in_class && p[1] == ':') {  /* POSIX class [:alpha:] */
            const char *e = strstr(p + 2, ":]");
            if (e) { buf_put(&b, p, (size_t)(e + 2 - p)); p = e + 1; continue; }
        }
        if (*p == ']' && in_class) in_class = 0;
        buf_putc(&b, *p);
    }
    int errcode; PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)b.v, b.n, PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
    free(b.v);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        err_set("%s regex does not compile (%s at offset %zu): %s", what, (char *)msg, (size_t)erroff, pattern);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  /* falls back to the interpreter if JIT is unavailable */
    return re;
}

typedef struct { size_t s, e; int m; } Span;
typedef struct { Span *v; size_t n, cap; } SpanVec;
static void span_push(SpanVec *v, size_t s, size_t e, int m) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 32; v->v = xrealloc(v->v, v->cap * sizeof(Span)); }
    v->v[v->n++] = (Span){s, e, m};
}

/* Spans covering s[0..n) alternating non-matches / matches, as the
 * tokenizers Pattern::find_matches does (empty matches are skipped). */
static void find_spans(const pcre2_code *re, const char *lit, size_t litlen,
                       const char *s, size_t n, SpanVec *out) {
    out->n = 0;
    if (!n) { span_push(out, 0, 0, 0); return; }
    size_t prev = 0;
    if (re) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        size_t pos = 0;
        while (pos <= n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) {  /* empty match: step one character */
                if (ms >= n) break;
                int k = utf8_valid_char((const unsigned char *)s + ms, n - ms);
                pos = ms + (k ? (size_t)k : 1);
                continue;
            }
            if (prev != ms) span_push(out, prev, ms, 0);
            span_push(out, ms, me, 1);
            prev = me;
            pos = me;
        }
        pcre2_match_data_free(md);
    } else if (litlen) {
        size_t pos = 0;
        while (pos + litlen <= n) {
            const char *f = memmem(s + pos, n - pos, lit, litlen);
            if (!f) break;
            size_t ms = (size_t)(f - s);
            if (prev != ms) span_push(out, prev, ms, 0);
            span_push(out, ms, ms + litlen, 1);
            prev = pos = ms + litlen;
        }
    }
    if (prev != n) span_push(out, prev, n, 0);
}

/* Applies a SplitDelimiterBehavior to spans (in place into out). */
static void apply_behavior(const SpanVec *in, int behavior, SpanVec *out) {
    out->n = 0;
    int prev_match = 0;
    switch (behavior) {
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < in->n; i++) span_push(out, in->v[i].s, in->v[i].e, 0);
        break;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < in->n; i++) if (!in->v[i].m) span_push(out, in->v[i].s, in->v[i].e, 0);
        break;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < in->n; i++) {
            int m = in->v[i].m;
            if (m == prev_match && out->n) out->v[out->n - 1].e = in->v[i].e;
            else span_push(out, in->v[i].s, in->v[i].e, 0);
            prev_match = m;
        }
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < in->n; i++) {
            int m = in->v[i].m;
            if (m && !prev_match && out->n) out->v[out->n - 1].e = in->v[i].e;
            else span_push(out, in->v[i].s, in->v[i].e, 0);
            prev_match = m;
        }
        break;
    case SPLIT_MERGED_NEXT:
        for (size_t k = in->n; k-- > 0;) {
            int m = in->v[k].m;
            if (m && !prev_match && out->n) out->v[out->n - 1].s = in->v[k].s;
            else span_push(out, in->v[k].s, in->v[k].e, 0);
            prev_match = m;
        }
        for (size_t i = 0, j = out->n ? out->n - 1 : 0; i < j; i++, j--) {
            Span tmp = out->v[i]; out->v[i] = out->v[j]; out->v[j] = tmp;
        }
        break;
    }
}

/* ------------------------------------------------------------------ */
/* byte-level (GPT-2) byte <-> char map                                */

static char bl_enc[256][3];     /* byte -> UTF-8 of its char */
static uint8_t bl_enc_len[256];
static int16_t bl_dec[324];     /* code point -> byte, -1 */
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_init(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) bl_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        bl_dec[cp] = (int16_t)b;
        if (cp < 0x80) { bl_enc[b][0] = (char)cp; bl_enc_len[b] = 1; }
        else { bl_enc[b][0] = (char)(0xC0 | (cp >> 6)); bl_enc[b][1] = (char)(0x80 | (cp & 0x3F)); bl_enc_len[b] = 2; }
    }
}

/* ------------------------------------------------------------------ */
/* tokens and added tokens                                             */

int32_t tk_set_token(Tokenizer *t, int32_t id, const char *s, size_t n, uint8_t attr) {
    if (id < 0 || id > 50000000) { err_set("token id %d out of range", id); return -1; }
    if (id >= t->n_ids) {
        int cap = t->n_ids;
        int nn = id + 1;
        if (nn > cap) {
            t->tok = xrealloc(t->tok, sizeof(char *) * (size_t)nn);
            t->tok_len = xrealloc(t->tok_len, sizeof(uint32_t) * (size_t)nn);
            t->attr = xrealloc(t->attr, (size_t)nn);
            for (int i = cap; i < nn; i++) { t->tok[i] = NULL; t->tok_len[i] = 0; t->attr[i] = 0; }
        }
        t->n_ids = nn;
    }
    free(t->tok[id]);
    char *c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = 0;
    t->tok[id] = c;
    t->tok_len[id] = (uint32_t)n;
    t->attr[id] = attr;
    return id;
}

typedef struct { const Tokenizer *t; int norm; } AddedCmpCtx;
static int cmp_added(const void *a, const void *b, void *arg) {
    const AddedCmpCtx *c = arg;
    const AddedTok *x = &c->t->added[*(const int *)a], *y = &c->t->added[*(const int *)b];
    const char *xs = c->norm ? x->ncontent : x->content, *ys = c->norm ? y->ncontent : y->content;
    size_t xl = c->norm ? x->nlen : x->len, yl = c->norm ? y->nlen : y->len;
    unsigned char xb = (unsigned char)xs[0], yb = (unsigned char)ys[0];
    if (xb != yb) return xb < yb ? -1 : 1;
    if (xl != yl) return xl > yl ? -1 : 1;
    /* equal first byte and length: keep insertion order (the first pattern wins) */
    return *(const int *)a - *(const int *)b;
}

void added_matcher_build(const Tokenizer *t, AddedMatcher *m, int use_normalized) {
    memset(m, 0, sizeof *m);
    m->use_normalized = use_normalized;
    m->idx = xmalloc(sizeof(int) * (size_t)(t->n_added + 1));
    for (int i = 0; i < t->n_added; i++) {
        const AddedTok *a = &t->added[i];
        if ((a->normalized != 0) != (use_normalized != 0)) continue;
        if ((use_normalized ? a->nlen : a->len) == 0) continue;
        m->idx[m->n++] = i;
    }
    AddedCmpCtx ctx = {t, use_normalized};
    qsort_r(m->idx, (size_t)m->n, sizeof(int), cmp_added, &ctx);
    int k = 0;
    for (int b = 0; b < 256; b++) {
        m->start[b] = k;
        while (k < m->n) {
            const AddedTok *a = &t->added[m->idx[k]];
            unsigned char fb = (unsigned char)(use_normalized ? a->ncontent[0] : a->content[0]);
            if (fb != b) break;
            k++;
        }
    }
    m->start[256] = k;
}

void added_matcher_free(AddedMatcher *m) { free(m->idx); memset(m, 0, sizeof *m); }

/* Unicode \w as Rust's regex crate defines it (single_word added tokens):
 * Alphabetic, marks, decimal digits, connector punctuation, Join_Control. */
static pcre2_code *word_re;
static pthread_once_t word_once = PTHREAD_ONCE_INIT;
static void word_init(void) {
    int e; PCRE2_SIZE o;
    word_re = pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &e, &o, NULL);
}
static int is_word_char_at(const char *s, size_t n) {
    pthread_once(&word_once, word_init);
    if (!word_re || !n) return 0;
    pcre2_match_data *md = pcre2_match_data_create(2, NULL);
    int rc = pcre2_match(word_re, (PCRE2_SPTR)s, n, 0, PCRE2_NO_UTF_CHECK, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}
static int ends_with_word(const char *s, size_t n) {
    if (!n) return 0;
    size_t i = n - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return is_word_char_at(s + i, n - i);
}

static size_t space_leftmost_at_end(const char *s, size_t n) {
    size_t i = n;
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        int k = utf8_valid_char((const unsigned char *)s + j, i - j);
        if (!k || !unicode_is_whitespace(utf8_decode((const unsigned char *)s + j, k))) break;
        i = j;
    }
    return i;
}

static size_t space_rightmost_at_start(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_valid_char((const unsigned char *)s + i, n - i);
        if (!k || !unicode_is_whitespace(utf8_decode((const unsigned char *)s + i, k))) break;
        i += (size_t)k;
    }
    return i;
}

void added_split(const Tokenizer *t, const AddedMatcher *m, const char *s, size_t n,
                 int split_special, int orig0, PieceVec *out) {
    size_t start_offset = 0, pos = 0;
    if (m->n) {
        while (pos < n) {
            /* leftmost-longest: first position with any match, longest there */
            size_t ms = 0, me = 0; int which = -1;
            for (size_t i = pos; i < n && which < 0; i++) {
                unsigned char b = (unsigned char)s[i];
                for (int k = m->start[b]; k < m->start[b + 1]; k++) {
                    const AddedTok *a = &t->added[m->idx[k]];
                    const char *c = m->use_normalized ? a->ncontent : a->content;
                    size_t cl = m->use_normalized ? a->nlen : a->len;
                    if (cl <= n - i && memcmp(s + i, c, cl) == 0) { ms = i; me = i + cl; which = m->idx[k]; break; }
                }
            }
            if (which < 0) break;
            pos = me;
            const AddedTok *a = &t->added[which];
            if (split_special && a->special) continue;
            if (a->single_word) {
                int start_space = ms == 0 || !ends_with_word(s, ms);
                int stop_space = me == n || !is_word_char_at(s + me, n - me);
                if (!start_space || !stop_space) continue;
            }
            size_t st = ms, en = me;
            if (a->lstrip) {
                size_t ns = space_leftmost_at_end(s, ms);
                st = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) en += space_rightmost_at_start(s + me, n - me);
            if (start_offset < st) piecevec_push(out, s + start_offset, st - start_offset, -1, orig0 && start_offset == 0);
            piecevec_push(out, s + st, en - st, a->id, 0);
            start_offset = en;
            pos = en > pos ? en : pos;
        }
    }
    if (start_offset < n) piecevec_push(out, s + start_offset, n - start_offset, -1, orig0 && start_offset == 0);
}

/* ------------------------------------------------------------------ */
/* word cache                                                          */

#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_WORD 256

static WordCache *cache_new(void) {
    WordCache *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    strmap_init(&c->map, 1024);
    return c;
}

static void cache_clear(WordCache *c) {
    strmap_free(&c->map);
    strmap_init(&c->map, 1024);
    c->keys.n = 0; c->ids.n = 0; c->n_ent = 0;
}

static void cache_free(WordCache *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->lock);
    strmap_free(&c->map);
    free(c->keys.v); free(c->ids.v);
    free(c->ent_off); free(c->ent_n); free(c->key_off); free(c->key_len);
    free(c);
}

/* Keys point into c->keys.v which may move on growth: the map is rebuilt
 * then.  To keep it simple, key storage is reserved up front. */
#define CACHE_KEY_BYTES (CACHE_MAX_ENTRIES * 24)

static int cache_get(WordCache *c, const char *w, size_t n, IdVec *out) {
    int32_t e = strmap_get(&c->map, w, n);
    if (e < 0) return 0;
    idvec_append(out, c->ids.v + c->ent_off[e], c->ent_n[e]);
    return 1;
}

static void cache_put(WordCache *c, const char *w, size_t n, const int32_t *ids, size_t k) {
    if (n > CACHE_MAX_WORD) return;
    if (!c->keys.v) { c->keys.v = xmalloc(CACHE_KEY_BYTES + 1); c->keys.cap = CACHE_KEY_BYTES + 1; }
    if (c->n_ent >= CACHE_MAX_ENTRIES || c->keys.n + n > CACHE_KEY_BYTES) cache_clear(c);
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

WordCache *word_cache_new(void) { return cache_new(); }
int word_cache_lock(WordCache *c) { return c && pthread_mutex_trylock(&c->lock) == 0; }
void word_cache_unlock(WordCache *c) { pthread_mutex_unlock(&c->lock); }
int word_cache_get(WordCache *c, const char *w, size_t n, IdVec *out) { return cache_get(c, w, n, out); }
void word_cache_put(WordCache *c, const char *w, size_t n, const int32_t *ids, size_t k) { cache_put(c, w, n, ids, k); }

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

/* ------------------------------------------------------------------ */
/* BPE (tokenizers' Word::merge_all)                                   */

typedef struct { int32_t c, prev, next; uint32_t len; } Sym;
typedef struct { int32_t rank, pos, new_id; } Merge;

typedef struct {
    Sym *sym; size_t sym_cap;
    Merge *heap; size_t heap_n, heap_cap;
    Buf tmp;
} BpeScratch;

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

static int bpe_word(const Tokenizer *t, const char *w, size_t n, IdVec *out, BpeScratch *s) {
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

/* ------------------------------------------------------------------ */
/* pipeline steps                                                      */

/* Normalizes s[0..n) with the normalizer ops; result in the arena. */
static const char *normalize(const Tokenizer *t, const char *s, size_t n, size_t *out_n, Arena *ar) {
    const char *cur = s; size_t cn = n;
    for (int k = 0; k < t->n_norm; k++) {
        const NormOp *op = &t->norm[k];
        if (op->type == NORM_PREPEND) {
            if (!cn) continue;
            char *d = arena_alloc(ar, cn + op->alen);
            memcpy(d, op->a, op->alen);
            memcpy(d + op->alen, cur, cn);
            cur = d; cn += op->alen;
        } else if (op->type == NORM_REPLACE) {
            SpanVec sp = {0};
            find_spans(op->re, op->a, op->alen, cur, cn, &sp);
            size_t total = 0;
            for (size_t i = 0; i < sp.n; i++) total += sp.v[i].m ? op->blen : sp.v[i].e - sp.v[i].s;
            char *d = arena_alloc(ar, total + 1), *q = d;
            for (size_t i = 0; i < sp.n; i++) {
                if (sp.v[i].m) { memcpy(q, op->b, op->blen); q += op->blen; }
                else { memcpy(q, cur + sp.v[i].s, sp.v[i].e - sp.v[i].s); q += sp.v[i].e - sp.v[i].s; }
            }
            free(sp.v);
            cur = d; cn = total;
        } else if (op->type == NORM_STRIP) {
            size_t a = 0, b = cn;
            if (op->left) a = space_rightmost_at_start(cur, cn);
            if (op->right && b > a) b = a + space_leftmost_at_end(cur + a, b - a);
            cur += a; cn = b - a;
        }
    }
    *out_n = cn;
    return cur;
}

static void pre_split(const Tokenizer *t, const PreOp *op, const Piece *p, PieceVec *out, Arena *ar,
                      SpanVec *sp, SpanVec *sp2) {
    (void)t;
    const char *s = p->p; size_t n = p->len;
    if (op->type == PRE_SPLIT) {
        find_spans(op->re, op->lit, op->litlen, s, n, sp);
        if (op->invert) for (size_t i = 0; i < sp->n; i++) sp->v[i].m = !sp->v[i].m;
        apply_behavior(sp, op->behavior, sp2);
        for (size_t i = 0; i < sp2->n; i++)
            if (sp2->v[i].e > sp2->v[i].s)
                piecevec_push(out, s + sp2->v[i].s, sp2->v[i].e - sp2->v[i].s, -1, p->orig0 && sp2->v[i].s == 0);
        return;
    }
    if (op->type == PRE_METASPACE) {
        /* replace ' ' by the replacement, prepend per scheme, maybe split */
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
        find_spans(NULL, op->repl, (size_t)op->repl_len, d, q, sp);
        apply_behavior(sp, SPLIT_MERGED_NEXT, sp2);
        for (size_t i = 0; i < sp2->n; i++)
            if (sp2->v[i].e > sp2->v[i].s)
                piecevec_push(out, d + sp2->v[i].s, sp2->v[i].e - sp2->v[i].s, -1, p->orig0 && sp2->v[i].s == 0);
        return;
    }
    if (op->type == PRE_BYTELEVEL) {
        const char *src = s; size_t sn = n;
        if (op->add_prefix_space && !(n && s[0] == ' ')) {
            char *d = arena_alloc(ar, n + 1);
            d[0] = ' ';
            memcpy(d + 1, s, n);
            src = d; sn = n + 1;
        }
        size_t first = out->n;
        if (op->use_regex) {
            find_spans(op->re, NULL, 0, src, sn, sp);
            for (size_t i = 0; i < sp->n; i++)
                if (sp->v[i].e > sp->v[i].s)
                    piecevec_push(out, src + sp->v[i].s, sp->v[i].e - sp->v[i].s, -1, p->orig0 && sp->v[i].s == 0);
        } else if (sn) {
            piecevec_push(out, src, sn, -1, p->orig0);
        }
        /* map every byte of the new pieces to its char */
        for (size_t i = first; i < out->n; i++) {
            Piece *q = &out->v[i];
            char *d = arena_alloc(ar, (size_t)q->len * 2);
            size_t k = 0;
            for (uint32_t j = 0; j < q->len; j++) {
                unsigned char b = (unsigned char)q->p[j];
                memcpy(d + k, bl_enc[b], bl_enc_len[b]);
                k += bl_enc_len[b];
            }
            q->p = d; q->len = (uint32_t)k;
        }
    }
}

static int hf_encode(const Tokenizer *t, const char *text, size_t len, int flags, IdVec *out) {
    Arena ar = {0};
    PieceVec a = {0}, b = {0}, segs = {0};
    SpanVec sp = {0}, sp2 = {0};
    BpeScratch bs = {0};
    int split_special = (flags & TOK_SPLIT_SPECIAL) != 0, rc = 0;
    added_split(t, &t->match_raw, text, len, split_special, 1, &segs);
    for (size_t i = 0; i < segs.n; i++) {
        Piece *p = &segs.v[i];
        if (p->id >= 0) { piecevec_push(&a, p->p, p->len, p->id, 0); continue; }
        size_t nn;
        const char *ns = normalize(t, p->p, p->len, &nn, &ar);
        if (!nn) continue;
        added_split(t, &t->match_norm, ns, nn, split_special, p->orig0, &a);
    }
    for (int k = 0; k < t->n_pre; k++) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (a.v[i].id >= 0) { piecevec_push(&b, a.v[i].p, a.v[i].len, a.v[i].id, 0); continue; }
            pre_split(t, &t->pre[k], &a.v[i], &b, &ar, &sp, &sp2);
        }
        PieceVec tmp = a; a = b; b = tmp;
    }
    WordCache *c = t->cache;
    int locked = c && pthread_mutex_trylock(&c->lock) == 0;
    for (size_t i = 0; i < a.n && rc == 0; i++) {
        Piece *p = &a.v[i];
        if (p->id >= 0) { idvec_push(out, p->id); continue; }
        if (t->ws_split) {  /* same ids as one bpe_word over the whole piece */
            for (size_t st = 0, en; st < p->len && rc == 0; st = en) {
                en = ws_segment_end(p->p, p->len, st);
                if (locked && cache_get(c, p->p + st, en - st, out)) continue;
                size_t before = out->n;
                rc = bpe_word(t, p->p + st, en - st, out, &bs);
                if (rc == 0 && locked) cache_put(c, p->p + st, en - st, out->v + before, out->n - before);
            }
            continue;
        }
        if (locked && cache_get(c, p->p, p->len, out)) continue;
        size_t before = out->n;
        rc = bpe_word(t, p->p, p->len, out, &bs);
        if (rc == 0 && locked) cache_put(c, p->p, p->len, out->v + before, out->n - before);
    }
    if (locked) pthread_mutex_unlock(&c->lock);
    free(bs.sym); free(bs.heap); free(bs.tmp.v);
    free(a.v); free(b.v); free(segs.v); free(sp.v); free(sp2.v);
    arena_free(&ar);
    return rc;
}

/* ------------------------------------------------------------------ */
/* JSON loading                                                        */

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static int jbool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return def;
}
/* A token given as "text" or {"content": "text", ...}. */
static const char *jtoken(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return NULL;
}

/* pattern: {"String": s} or {"Regex": r}; fills literal or regex. */
static int load_pattern(const cJSON *pat, const char *what, char **lit, size_t *litlen, pcre2_code **re) {
    const char *s = jstr(pat, "String");
    const char *r = jstr(pat, "Regex");
    *lit = NULL; *litlen = 0; *re = NULL;
    if (s) { *lit = xstrdup(s); *litlen = strlen(s); return 0; }
    if (r) { *re = regex_compile(r, what); return *re ? 0 : -1; }
    err_set("%s: pattern is neither String nor Regex", what);
    return -1;
}

static int load_normalizer(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: normalizer without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *e;
        cJSON_ArrayForEach(e, list) if (load_normalizer(t, e, file)) return -1;
        return 0;
    }
    NormOp op = {0};
    if (!strcmp(type, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p) { err_set("%s: Prepend normalizer without prepend", file); return -1; }
        op.type = NORM_PREPEND; op.a = xstrdup(p); op.alen = strlen(p);
    } else if (!strcmp(type, "Replace")) {
        const char *c = jstr(n, "content");
        if (!c) { err_set("%s: Replace normalizer without content", file); return -1; }
        op.type = NORM_REPLACE;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Replace normalizer", &op.a, &op.alen, &op.re)) {
            if (!strstr(err_get(), file)) { char e[900]; snprintf(e, sizeof e, "%s", err_get()); err_set("%s: %s", file, e); }
            return -1;
        }
        op.b = xstrdup(c); op.blen = strlen(c);
    } else if (!strcmp(type, "Strip")) {
        op.type = NORM_STRIP; op.left = jbool(n, "strip_left", 1); op.right = jbool(n, "strip_right", 1);
    } else {
        err_set("%s: normalizer type '%s' is not supported (supported: Sequence, Prepend, Replace, Strip)", file, type);
        return -1;
    }
    t->norm = xrealloc(t->norm, sizeof(NormOp) * (size_t)(t->n_norm + 1));
    t->norm[t->n_norm++] = op;
    return 0;
}

static int parse_scheme(const cJSON *n) {
    const char *s = jstr(n, "prepend_scheme");
    if (s) {
        if (!strcmp(s, "first")) return PREPEND_FIRST;
        if (!strcmp(s, "never")) return PREPEND_NEVER;
        return PREPEND_ALWAYS;
    }
    return jbool(n, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
}

static const char *GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: pre_tokenizer without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"), *e;
        cJSON_ArrayForEach(e, list) if (load_pre(t, e, file)) return -1;
        return 0;
    }
    PreOp op = {0};
    if (!strcmp(type, "Split")) {
        op.type = PRE_SPLIT;
        char *lit; size_t ll;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Split pre-tokenizer", &lit, &ll, &op.re)) return -1;
        op.lit = lit; op.litlen = ll;
        const char *b = jstr(n, "behavior");
        if (!b) b = "Removed";
        if (!strcmp(b, "Removed")) op.behavior = SPLIT_REMOVED;
        else if (!strcmp(b, "Isolated")) op.behavior = SPLIT_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) op.behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) op.behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) op.behavior = SPLIT_CONTIGUOUS;
        else { err_set("%s: Split behavior '%s' is not known", file, b); return -1; }
        op.invert = jbool(n, "invert", 0);
    } else if (!strcmp(type, "Digits")) {
        op.type = PRE_SPLIT;
        op.re = regex_compile(jbool(n, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", "Digits");
        if (!op.re) return -1;
        op.behavior = SPLIT_ISOLATED;
    } else if (!strcmp(type, "ByteLevel")) {
        op.type = PRE_BYTELEVEL;
        op.add_prefix_space = jbool(n, "add_prefix_space", 1);
        op.use_regex = jbool(n, "use_regex", 1);
        if (op.use_regex && !(op.re = regex_compile(GPT2_PATTERN, "ByteLevel"))) return -1;
    } else if (!strcmp(type, "Metaspace")) {
        op.type = PRE_METASPACE;
        const char *r = jstr(n, "replacement");
        if (!r) r = "\xE2\x96\x81";
        if (strlen(r) >= sizeof op.repl || !*r) { err_set("%s: Metaspace replacement too long", file); return -1; }
        strcpy(op.repl, r); op.repl_len = (int)strlen(r);
        op.scheme = parse_scheme(n);
        op.split = jbool(n, "split", 1);
    } else {
        err_set("%s: pre_tokenizer type '%s' is not supported (supported: Sequence, Split, ByteLevel, Metaspace, Digits)", file, type);
        return -1;
    }
    t->pre = xrealloc(t->pre, sizeof(PreOp) * (size_t)(t->n_pre + 1));
    t->pre[t->n_pre++] = op;
    return 0;
}

static int load_decoder(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    t->has_decoder = 1;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: decoder without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "decoders"), *e;
        cJSON_ArrayForEach(e, list) if (load_decoder(t, e, file)) return -1;
        return 0;
    }
    DecOp op = {0};
    if (!strcmp(type, "Replace")) {
        op.type = DEC_REPLACE;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Replace decoder", &op.pat, &op.plen, &op.re)) return -1;
        const char *c = jstr(n, "content");
        op.content = xstrdup(c ? c : ""); op.clen = strlen(op.content);
    } else if (!strcmp(type, "ByteFallback")) op.type = DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) op.type = DEC_FUSE;
    else if (!strcmp(type, "Strip")) {
        op.type = DEC_STRIP;
        const char *c = jstr(n, "content");
        int k = c ? utf8_valid_char((const unsigned char *)c, strlen(c)) : 0;
        op.strip_ch = k ? utf8_decode((const unsigned char *)c, k) : ' ';
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(n, "start"), *sp = cJSON_GetObjectItemCaseSensitive(n, "stop");
        op.start = cJSON_IsNumber(st) ? st->valueint : 0;
        op.stop = cJSON_IsNumber(sp) ? sp->valueint : 0;
    } else if (!strcmp(type, "ByteLevel")) op.type = DEC_BYTELEVEL;
    else if (!strcmp(type, "Metaspace")) {
        op.type = DEC_METASPACE;
        const char *r = jstr(n, "replacement");
        if (!r) r = "\xE2\x96\x81";
        if (strlen(r) >= sizeof op.repl || !*r) { err_set("%s: Metaspace replacement too long", file); return -1; }
        strcpy(op.repl, r); op.repl_len = (int)strlen(r);
        op.scheme = parse_scheme(n);
    } else {
        err_set("%s: decoder type '%s' is not supported (supported: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace)", file, type);
        return -1;
    }
    t->dec = xrealloc(t->dec, sizeof(DecOp) * (size_t)(t->n_dec + 1));
    t->dec[t->n_dec++] = op;
    return 0;
}

static int32_t token_id_any(const Tokenizer *t, const char *s, size_t n) {
    int32_t id = strmap_get(&t->added_by_str, s, n);
    return id >= 0 ? id : strmap_get(&t->vocab, s, n);
}

static void post_add(int32_t **v, int *n, const cJSON *ids) {
    const cJSON *e;
    cJSON_ArrayForEach(e, ids) if (cJSON_IsNumber(e)) {
        *v = xrealloc(*v, sizeof(int32_t) * (size_t)(*n + 1));
        (*v)[(*n)++] = (int32_t)e->valuedouble;
    }
}

static int load_post(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: post_processor without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "processors"), *e;
        cJSON_ArrayForEach(e, list) if (load_post(t, e, file)) return -1;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) return 0;  /* offsets only */
    if (!strcmp(type, "TemplateProcessing")) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single");
        const cJSON *specials = cJSON_GetObjectItemCaseSensitive(n, "special_tokens");
        const cJSON *e;
        int seen_a = 0;
        free(t->post_pre); free(t->post_post);
        t->post_pre = t->post_post = NULL; t->n_post_pre = t->n_post_post = 0;
        cJSON_ArrayForEach(e, single) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (st) {
                const char *name = jstr(st, "id");
                const cJSON *spec = name ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
                if (!spec) { err_set("%s: TemplateProcessing special token '%s' not defined", file, name ? name : "?"); return -1; }
                const cJSON *ids = cJSON_GetObjectItemCaseSensitive(spec, "ids");
                if (seen_a) post_add(&t->post_post, &t->n_post_post, ids);
                else post_add(&t->post_pre, &t->n_post_pre, ids);
            } else if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
                seen_a = 1;
            }
        }
        return 0;
    }
    err_set("%s: post_processor type '%s' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)", file, type);
    return -1;
}

static int load_added(Tokenizer *t, const cJSON *list) {
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *idj = cJSON_GetObjectItemCaseSensitive(e, "id");
        const char *c = jstr(e, "content");
        if (!cJSON_IsNumber(idj) || !c) continue;
        t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
        AddedTok *a = &t->added[t->n_added++];
        memset(a, 0, sizeof *a);
        a->id = (int32_t)idj->valuedouble;
        a->content = xstrdup(c); a->len = strlen(c);
        a->special = (uint8_t)jbool(e, "special", 0);
        a->lstrip = (uint8_t)jbool(e, "lstrip", 0);
        a->rstrip = (uint8_t)jbool(e, "rstrip", 0);
        a->single_word = (uint8_t)jbool(e, "single_word", 0);
        a->normalized = (uint8_t)jbool(e, "normalized", !a->special);
    }
    return 0;
}

static void finish_added(Tokenizer *t) {
    Arena ar = {0};
    for (int i = 0; i < t->n_added; i++) {
        AddedTok *a = &t->added[i];
        uint8_t attr = TA_ADDED | (a->special ? TA_SPECIAL : 0);
        int32_t prev = strmap_get(&t->vocab, a->content, a->len);
        if (prev != a->id || !t->tok || a->id >= t->n_ids || !t->tok[a->id]) tk_set_token(t, a->id, a->content, a->len, attr);
        else t->attr[a->id] |= attr;
        strmap_put(&t->added_by_str, t->tok[a->id], t->tok_len[a->id], a->id);
        if (a->normalized) {
            size_t nn;
            const char *ns = normalize(t, a->content, a->len, &nn, &ar);
            a->ncontent = xmalloc(nn + 1);
            memcpy(a->ncontent, ns, nn); a->ncontent[nn] = 0; a->nlen = nn;
        }
    }
    arena_free(&ar);
    added_matcher_build(t, &t->match_raw, 0);
    added_matcher_build(t, &t->match_norm, 1);
}

static int load_bpe_model(Tokenizer *t, const cJSON *m, const char *file) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsObject(vocab)) { err_set("%s: BPE model without a vocab object", file); return -1; }
    int nv = cJSON_GetArraySize(vocab);
    strmap_init(&t->vocab, (size_t)nv);
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e)) { err_set("%s: vocab entry '%s' is not a number", file, e->string); return -1; }
        int32_t id = (int32_t)e->valuedouble;
        if (tk_set_token(t, id, e->string, strlen(e->string), 0) < 0) return -1;
    }
    for (int32_t id = 0; id < t->n_ids; id++) if (t->tok[id]) strmap_put(&t->vocab, t->tok[id], t->tok_len[id], id);
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (cJSON_IsNumber(dj) && dj->valuedouble > 0) { err_set("%s: BPE dropout %g is not supported (it makes encoding random)", file, dj->valuedouble); return -1; }
    t->byte_fallback = jbool(m, "byte_fallback", 0);
    t->fuse_unk = jbool(m, "fuse_unk", 0);
    t->ignore_merges = jbool(m, "ignore_merges", 0);
    const char *unk = jstr(m, "unk_token");
    t->unk_id = unk ? strmap_get(&t->vocab, unk, strlen(unk)) : INT32_MIN;
    const char *cp = jstr(m, "continuing_subword_prefix"), *sf = jstr(m, "end_of_word_suffix");
    if (cp && *cp) t->cont_prefix = xstrdup(cp);
    if (sf && *sf) t->eow_suffix = xstrdup(sf);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = strmap_get(&t->vocab, name, 6);
        if (t->byte_id[b] >= 0) t->attr[t->byte_id[b]] |= TA_BYTE;
    }
    int nm = cJSON_GetArraySize(merges);
    pairmap_init(&t->merges, (size_t)nm);
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    Buf tmp = {0};
    int rank = 0;
    cJSON_ArrayForEach(e, merges) {
        const char *a, *b; size_t al, bl;
        char *sp = NULL;
        if (cJSON_IsString(e)) {
            a = e->valuestring;
            sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) { free(tmp.v); err_set("%s: merge %d is not two tokens: '%s'", file, rank + 1, a); return -1; }
            al = (size_t)(sp - a); b = sp + 1; bl = strlen(b);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring; al = strlen(a);
            b = cJSON_GetArrayItem(e, 1)->valuestring; bl = strlen(b);
        } else { free(tmp.v); err_set("%s: merge %d is malformed", file, rank + 1); return -1; }
        int32_t ia = strmap_get(&t->vocab, a, al), ib = strmap_get(&t->vocab, b, bl);
        if (ia < 0 || ib < 0) { free(tmp.v); err_set("%s: merge %d uses a token missing from the vocab", file, rank + 1); return -1; }
        tmp.n = 0;
        buf_put(&tmp, a, al);
        if (bl < plen) { free(tmp.v); err_set("%s: merge %d: token shorter than continuing_subword_prefix", file, rank + 1); return -1; }
        buf_put(&tmp, b + plen, bl - plen);
        int32_t nid = strmap_get(&t->vocab, tmp.v, tmp.n);
        if (nid < 0) { err_set("%s: merge %d: merged token '%s' is not in the vocab", file, rank + 1, tmp.v); free(tmp.v); return -1; }
        pairmap_put(&t->merges, ia, ib, rank, nid);
        rank++;
    }
    free(tmp.v);
    return 0;
}

static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return xstrdup(".");
    if (s == path) return xstrdup("/");
    char *d = xmalloc((size_t)(s - path) + 1);
    memcpy(d, path, (size_t)(s - path));
    d[s - path] = 0;
    return d;
}

/* tokenizer_config.json next to the tokenizer file. */
static cJSON *load_config(const char *tokfile) {
    char *dir = dir_of(tokfile);
    char *p = path_join(dir, "tokenizer_config.json");
    free(dir);
    cJSON *c = NULL;
    if (file_exists(p)) {
        c = read_json_file(p);
        if (!c) { free(p); return (cJSON *)-1; }
    }
    free(p);
    return c;
}

static void apply_config_names(Tokenizer *t, const cJSON *cfg) {
    const char *v;
    if ((v = jtoken(cfg, "bos_token"))) t->name_bos = xstrdup(v);
    if ((v = jtoken(cfg, "eos_token"))) t->name_eos = xstrdup(v);
    if ((v = jtoken(cfg, "unk_token"))) t->name_unk = xstrdup(v);
    if ((v = jtoken(cfg, "pad_token"))) t->name_pad = xstrdup(v);
    t->clean_up_spaces = jbool(cfg, "clean_up_tokenization_spaces", 0);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(ct)) t->chat_template = xstrdup(ct->valuestring);
    else if (cJSON_IsArray(ct)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, ct) {
            const char *name = jstr(e, "name"), *tpl = jstr(e, "template");
            if (tpl && (!t->chat_template || (name && !strcmp(name, "default")))) {
                free(t->chat_template);
                t->chat_template = xstrdup(tpl);
            }
        }
    }
}

static int is_llama_class(const cJSON *cfg) {
    const char *c = jstr(cfg, "tokenizer_class");
    return c && (!strcmp(c, "LlamaTokenizer") || !strcmp(c, "LlamaTokenizerFast") ||
                 !strcmp(c, "CodeLlamaTokenizer") || !strcmp(c, "CodeLlamaTokenizerFast"));
}

/* LLaMA tokenizer classes build their post-processor from add_bos_token /
 * add_eos_token (transformers' LlamaTokenizerFast.update_post_processor). */
static void llama_post_from_config(Tokenizer *t, const cJSON *cfg) {
    int add_bos = jbool(cfg, "add_bos_token", 1), add_eos = jbool(cfg, "add_eos_token", 0);
    free(t->post_pre); free(t->post_post);
    t->post_pre = t->post_post = NULL; t->n_post_pre = t->n_post_post = 0;
    if (add_bos && t->bos_id >= 0) { t->post_pre = xmalloc(sizeof(int32_t)); t->post_pre[0] = t->bos_id; t->n_post_pre = 1; }
    if (add_eos && t->eos_id >= 0) { t->post_post = xmalloc(sizeof(int32_t)); t->post_post[0] = t->eos_id; t->n_post_post = 1; }
}

static void resolve_bos_eos(Tokenizer *t) {
    if (t->name_bos) { int32_t id = token_id_any(t, t->name_bos, strlen(t->name_bos)); if (id >= 0) t->bos_id = id; }
    if (t->name_eos) { int32_t id = token_id_any(t, t->name_eos, strlen(t->name_eos)); if (id >= 0) t->eos_id = id; }
    if (t->bos_id < 0 && t->n_post_pre) t->bos_id = t->post_pre[0];
    static const char *bos_names[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>"};
    static const char *eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"};
    for (size_t i = 0; t->bos_id < 0 && i < sizeof bos_names / sizeof *bos_names; i++)
        t->bos_id = token_id_any(t, bos_names[i], strlen(bos_names[i]));
    for (size_t i = 0; t->eos_id < 0 && i < sizeof eos_names / sizeof *eos_names; i++)
        t->eos_id = token_id_any(t, eos_names[i], strlen(eos_names[i]));
}

static Tokenizer *tok_new(const char *path) {
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->path = xstrdup(path);
    t->bos_id = t->eos_id = -1;
    t->unk_id = INT32_MIN;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    strmap_init(&t->added_by_str, 16);
    pthread_once(&bl_once, bl_init);
    return t;
}

static Tokenizer *load_json(const char *path) {
    cJSON *j = read_json_file(path);
    if (!j) return NULL;
    Tokenizer *t = tok_new(path);
    t->kind = TOK_KIND_HF_BPE;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const char *mtype = jstr(model, "type");
    cJSON *cfg = NULL;
    if (!cJSON_IsObject(model)) { err_set("%s: no \"model\" object (is this a tokenizer.json?)", path); goto fail; }
    if (!mtype) {  /* very old files: infer */
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, "vocab");
        if (cJSON_GetObjectItemCaseSensitive(model, "merges")) mtype = "BPE";
        else if (cJSON_IsArray(v)) mtype = "Unigram";
        else if (cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix")) mtype = "WordPiece";
        else mtype = "WordLevel";
    }
    if (strcmp(mtype, "BPE") != 0) {
        err_set("%s: tokenizer model type '%s' is not supported (only BPE: the LLaMA families' tokenizers)", path, mtype);
        goto fail;
    }
    if (load_normalizer(t, cJSON_GetObjectItemCaseSensitive(j, "normalizer"), path)) goto fail;
    if (load_pre(t, cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), path)) goto fail;
    if (load_decoder(t, cJSON_GetObjectItemCaseSensitive(j, "decoder"), path)) goto fail;
    if (load_bpe_model(t, model, path)) goto fail;
    load_added(t, cJSON_GetObjectItemCaseSensitive(j, "added_tokens"));
    finish_added(t);
    if (load_post(t, cJSON_GetObjectItemCaseSensitive(j, "post_processor"), path)) goto fail;
    cfg = load_config(path);
    if (cfg == (cJSON *)-1) { cfg = NULL; goto fail; }
    if (cfg) apply_config_names(t, cfg);
    resolve_bos_eos(t);
    if (cfg && is_llama_class(cfg)) llama_post_from_config(t, cfg);
    cJSON_Delete(cfg);
    cJSON_Delete(j);
    t->cache = cache_new();
    /* no pre-tokenizer: the whole normalized text is one BPE word */
    t->ws_split = t->n_pre == 0 && !t->ignore_merges && !t->cont_prefix && !t->eow_suffix &&
                  ws_split_safe(t, &t->vocab);
    return t;
fail:
    if (!strstr(err_get(), path)) { char e[900]; snprintf(e, sizeof e, "%s", err_get()); err_set("%s: %s", path, e); }
    cJSON_Delete(cfg);
    cJSON_Delete(j);
    tokenizer_free(t);
    return NULL;
}

static Tokenizer *load_model(const char *path) {
    size_t n;
    char *data = read_text_file(path, &n);
    if (!data) return NULL;
    Tokenizer *t = tok_new(path);
    t->kind = TOK_KIND_SPM_BPE;
    t->spm_legacy = 1;
    t->spm_add_prefix_space = 1;
    cJSON *cfg = NULL;
    if (spm_load_model(t, (const unsigned char *)data, n, path)) goto fail;
    free(data); data = NULL;
    cfg = load_config(path);
    if (cfg == (cJSON *)-1) { cfg = NULL; goto fail; }
    if (cfg) {
        apply_config_names(t, cfg);
        t->spm_legacy = jbool(cfg, "legacy", 1);
        t->spm_add_prefix_space = jbool(cfg, "add_prefix_space", 1);
        /* extra added tokens (ids past the model's pieces, e.g. <pad>) */
        const cJSON *atd = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), *e;
        cJSON_ArrayForEach(e, atd) {
            const char *c = jstr(e, "content");
            char *endp;
            long id = strtol(e->string, &endp, 10);
            if (!c || *endp || id < 0) continue;
            int known = 0;
            for (int i = 0; i < t->n_added; i++) if (t->added[i].id == id) known = 1;
            if (known) continue;
            t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
            AddedTok *a = &t->added[t->n_added++];
            memset(a, 0, sizeof *a);
            a->id = (int32_t)id; a->content = xstrdup(c); a->len = strlen(c);
            a->special = (uint8_t)jbool(e, "special", 0);
            a->lstrip = (uint8_t)jbool(e, "lstrip", 0); a->rstrip = (uint8_t)jbool(e, "rstrip", 0);
            a->single_word = (uint8_t)jbool(e, "single_word", 0);
            a->normalized = 0;
            if (id >= t->n_ids || !t->tok[id]) tk_set_token(t, (int32_t)id, c, strlen(c), TA_ADDED | (a->special ? TA_SPECIAL : 0));
        }
    }
    /* specials matched in text: unk, bos, eos (+ config's added tokens) */
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!t->tok[id] || !(t->attr[id] & (TA_CONTROL | TA_UNKNOWN))) continue;
        int named = id == t->bos_id || id == t->eos_id || (t->attr[id] & TA_UNKNOWN);
        if (t->name_bos && !strcmp(t->tok[id], t->name_bos)) named = 1;
        if (t->name_eos && !strcmp(t->tok[id], t->name_eos)) named = 1;
        if (t->name_unk && !strcmp(t->tok[id], t->name_unk)) named = 1;
        if (t->name_pad && !strcmp(t->tok[id], t->name_pad)) named = 1;
        if (!named) continue;
        int known = 0;
        for (int i = 0; i < t->n_added; i++) if (t->added[i].id == id) known = 1;
        if (known) continue;
        t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
        AddedTok *a = &t->added[t->n_added++];
        memset(a, 0, sizeof *a);
        a->id = id; a->content = xstrdup(t->tok[id]); a->len = t->tok_len[id]; a->special = 1;
    }
    for (int i = 0; i < t->n_added; i++) {
        AddedTok *a = &t->added[i];
        strmap_put(&t->added_by_str, a->content, a->len, a->id);
        if (a->special && a->id < t->n_ids) t->attr[a->id] |= TA_SPECIAL;
    }
    added_matcher_build(t, &t->match_raw, 0);
    added_matcher_build(t, &t->match_norm, 1);
    resolve_bos_eos(t);
    llama_post_from_config(t, cfg);  /* add_bos_token (default on) / add_eos_token */
    cJSON_Delete(cfg);
    return t;
fail:
    if (!strstr(err_get(), path)) { char e[900]; snprintf(e, sizeof e, "%s", err_get()); err_set("%s: %s", path, e); }
    free(data);
    cJSON_Delete(cfg);
    tokenizer_free(t);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* public API                                                          */

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

Tokenizer *tokenizer_load(const char *path) {
    if (!path || !*path) { err_set("no tokenizer path given"); return NULL; }
    if (is_dir(path)) {
        char *j = path_join(path, "tokenizer.json");
        if (file_exists(j)) { Tokenizer *t = load_json(j); free(j); return t; }
        free(j);
        char *m = path_join(path, "tokenizer.model");
        if (file_exists(m)) { Tokenizer *t = load_model(m); free(m); return t; }
        free(m);
        err_set("%s: no tokenizer.json or tokenizer.model in this directory", path);
        return NULL;
    }
    if (!file_exists(path)) { err_set("%s: no such file or directory", path); return NULL; }
    if (has_suffix(path, ".model")) return load_model(path);
    if (has_suffix(path, ".json")) return load_json(path);
    /* sniff: JSON starts with '{' */
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    int c;
    do c = fgetc(f); while (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    fclose(f);
    return c == '{' ? load_json(path) : load_model(path);
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_ids; i++) free(t->tok[i]);
    free(t->tok); free(t->tok_len); free(t->attr);
    strmap_free(&t->vocab); strmap_free(&t->added_by_str);
    pairmap_free(&t->merges);
    free(t->cont_prefix); free(t->eow_suffix);
    free(t->score);
    strmap_free(&t->spm_pieces); strmap_free(&t->spm_reserved);
    free(t->spm_unk_surface); free(t->user_idx);
    for (int i = 0; i < t->n_added; i++) { free(t->added[i].content); free(t->added[i].ncontent); }
    free(t->added);
    added_matcher_free(&t->match_raw); added_matcher_free(&t->match_norm);
    for (int i = 0; i < t->n_norm; i++) { free(t->norm[i].a); free(t->norm[i].b); if (t->norm[i].re) pcre2_code_free(t->norm[i].re); }
    free(t->norm);
    for (int i = 0; i < t->n_pre; i++) { free(t->pre[i].lit); if (t->pre[i].re) pcre2_code_free(t->pre[i].re); }
    free(t->pre);
    for (int i = 0; i < t->n_dec; i++) { free(t->dec[i].pat); free(t->dec[i].content); if (t->dec[i].re) pcre2_code_free(t->dec[i].re); }
    free(t->dec);
    free(t->post_pre); free(t->post_post);
    free(t->chat_template);
    free(t->name_bos); free(t->name_eos); free(t->name_unk); free(t->name_pad);
    cache_free(t->cache);
    free(t->path);
    free(t);
}

int tokenizer_encode_ex(const Tokenizer *t, const char *text, size_t len, int flags,
                        int32_t **ids, size_t *n) {
    *ids = NULL; *n = 0;
    long bad = utf8_check((const unsigned char *)text, len);
    if (bad >= 0) { err_set("text is not valid UTF-8 (byte %ld)", bad); return -1; }
    IdVec out = {0};
    if (flags & TOK_ADD_SPECIAL) idvec_append(&out, t->post_pre, (size_t)t->n_post_pre);
    int rc = t->kind == TOK_KIND_SPM_BPE ? spm_encode(t, text, len, flags, &out)
                                         : hf_encode(t, text, len, flags, &out);
    if (rc) { free(out.v); return -1; }
    if (flags & TOK_ADD_SPECIAL) idvec_append(&out, t->post_post, (size_t)t->n_post_post);
    if (!out.v) out.v = xmalloc(sizeof(int32_t));
    *ids = out.v; *n = out.n;
    return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int add_special, int32_t **ids, size_t *n) {
    return tokenizer_encode_ex(t, text, strlen(text), add_special ? TOK_ADD_SPECIAL : 0, ids, n);
}

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
        if (cp >= 324 || bl_dec[cp] < 0) return -1;
        out[k++] = (unsigned char)bl_dec[cp];
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
            find_spans(op->re, op->pat, op->plen, v->v[i].p, v->v[i].n, &sp);
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
            find_spans(op->re, op->pat, op->plen, cur.p, cur.n, &sp);
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

/* ---- info ---- */

TokenizerKind tokenizer_kind(const Tokenizer *t) { return (TokenizerKind)t->kind; }
const char *tokenizer_path(const Tokenizer *t) { return t->path; }
int tokenizer_vocab_size(const Tokenizer *t) { return t->n_ids; }
int32_t tokenizer_bos_id(const Tokenizer *t) { return t->bos_id; }
int32_t tokenizer_eos_id(const Tokenizer *t) { return t->eos_id; }
int32_t tokenizer_token_to_id(const Tokenizer *t, const char *s) {
    if (t->kind == TOK_KIND_SPM_BPE) {
        int32_t id = strmap_get(&t->added_by_str, s, strlen(s));
        if (id >= 0) return id;
        id = strmap_get(&t->spm_reserved, s, strlen(s));
        return id >= 0 ? id : strmap_get(&t->spm_pieces, s, strlen(s));
    }
    return token_id_any(t, s, strlen(s));
}
const char *tokenizer_id_to_token(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? t->tok[id] : NULL;
}
int tokenizer_is_special(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->attr[id] & TA_SPECIAL) != 0;
}
int tokenizer_adds_bos(const Tokenizer *t) {
    for (int i = 0; i < t->n_post_pre; i++) if (t->post_pre[i] == t->bos_id) return 1;
    return 0;
}
int tokenizer_adds_eos(const Tokenizer *t) {
    for (int i = 0; i < t->n_post_post; i++) if (t->post_post[i] == t->eos_id) return 1;
    return 0;
}
const char *tokenizer_chat_template(const Tokenizer *t) { return t->chat_template; }
int tokenizer_clean_up_spaces(const Tokenizer *t) { return t->clean_up_spaces; }
const char *tokenizer_special_name(const Tokenizer *t, const char *which) {
    if (!strcmp(which, "bos")) return t->name_bos ? t->name_bos : tokenizer_id_to_token(t, t->bos_id);
    if (!strcmp(which, "eos")) return t->name_eos ? t->name_eos : tokenizer_id_to_token(t, t->eos_id);
    if (!strcmp(which, "unk")) return t->name_unk;
    if (!strcmp(which, "pad")) return t->name_pad;
    return NULL;
}
