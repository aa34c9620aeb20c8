/* Tokenizers: the tokenizer.json (Hugging Face `tokenizers`) BPE pipeline,
 * shared plumbing (hash maps, UTF-8, regexes, added tokens) and the public
 * API.  Loading is in tokenizer_load.c, decoding in tokenizer_decode.c, the
 * SentencePiece tokenizer.model path in sentencepiece.c.
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
int tk_utf8_maximal_prefix(const unsigned char *s, size_t n) {
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
    int k = tk_utf8_maximal_prefix(s, n);
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
        int skip = per_byte ? 1 : tk_utf8_maximal_prefix(s + i, n - i);
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

pcre2_code *tk_regex_compile(const char *pattern, const char *what) {
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

static void span_push(SpanVec *v, size_t s, size_t e, int m) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 32; v->v = xrealloc(v->v, v->cap * sizeof(Span)); }
    v->v[v->n++] = (Span){s, e, m};
}

/* Spans covering s[0..n) alternating non-matches / matches, as the
 * tokenizers Pattern::find_matches does (empty matches are skipped). */
void tk_find_spans(const pcre2_code *re, const char *lit, size_t litlen,
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
int16_t tk_bl_dec[324];     /* code point -> byte, -1 */
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_init(void);
void tk_byte_level_init(void) { pthread_once(&bl_once, bl_init); }

static void bl_init(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) tk_bl_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        tk_bl_dec[cp] = (int16_t)b;
        if (cp < 0x80) { bl_enc[b][0] = (char)cp; bl_enc_len[b] = 1; }
        else { bl_enc[b][0] = (char)(0xC0 | (cp >> 6)); bl_enc[b][1] = (char)(0x80 | (cp & 0x3F)); bl_enc_len[b] = 2; }
    }
}

/* ------------------------------------------------------------------ */
/* tokens and added tokens                                             */

int32_t tk_set_token(Tokenizer *t, int32_t id, const char *s, size_t n, uint8_t attr) {
    if (id < 0 || id > TK_MAX_ID) { err_set("token id %d out of range", id); return -1; }
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
    if (t->tok[id]) {
        t->retired = xrealloc(t->retired, sizeof(char *) * (size_t)(t->n_retired + 1));
        t->retired[t->n_retired++] = t->tok[id];
    }
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
    /* a word that encoded to no ids (a hostile vocabulary can do that) may
     * be cached while c->ids is still unallocated: no pointer arithmetic then */
    if (c->ent_n[e]) idvec_append(out, c->ids.v + c->ent_off[e], c->ent_n[e]);
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
const char *tk_normalize(const Tokenizer *t, const char *s, size_t n, size_t *out_n, Arena *ar) {
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
            tk_find_spans(op->re, op->a, op->alen, cur, cn, &sp);
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
        tk_find_spans(op->re, op->lit, op->litlen, s, n, sp);
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
        tk_find_spans(NULL, op->repl, (size_t)op->repl_len, d, q, sp);
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
            tk_find_spans(op->re, NULL, 0, src, sn, sp);
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


/* out's ids from index `from` on; NULL when there are none (an empty vector
 * has no buffer, and NULL + 0 is undefined: found by tests/fuzz) */
static const int32_t *ids_from(const IdVec *out, size_t from) { return out->n > from ? out->v + from : NULL; }

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
        const char *ns = tk_normalize(t, p->p, p->len, &nn, &ar);
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
                if (rc == 0 && locked) cache_put(c, p->p + st, en - st, ids_from(out, before), out->n - before);
            }
            continue;
        }
        if (locked && cache_get(c, p->p, p->len, out)) continue;
        size_t before = out->n;
        rc = bpe_word(t, p->p, p->len, out, &bs);
        if (rc == 0 && locked) cache_put(c, p->p, p->len, ids_from(out, before), out->n - before);
    }
    if (locked) pthread_mutex_unlock(&c->lock);
    free(bs.sym); free(bs.heap); free(bs.tmp.v);
    free(a.v); free(b.v); free(segs.v); free(sp.v); free(sp2.v);
    arena_free(&ar);
    return rc;
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
        if (file_exists(j)) { Tokenizer *t = tk_load_json(j); free(j); return t; }
        free(j);
        char *m = path_join(path, "tokenizer.model");
        if (file_exists(m)) { Tokenizer *t = tk_load_model(m); free(m); return t; }
        free(m);
        err_set("%s: no tokenizer.json or tokenizer.model in this directory", path);
        return NULL;
    }
    if (!file_exists(path)) { err_set("%s: no such file or directory", path); return NULL; }
    if (has_suffix(path, ".model")) return tk_load_model(path);
    if (has_suffix(path, ".json")) return tk_load_json(path);
    /* sniff: JSON starts with '{' */
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    int c;
    do c = fgetc(f); while (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    fclose(f);
    return c == '{' ? tk_load_json(path) : tk_load_model(path);
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_ids; i++) free(t->tok[i]);
    for (int i = 0; i < t->n_retired; i++) free(t->retired[i]);
    free(t->retired);
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
    return tk_token_id_any(t, s, strlen(s));
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
