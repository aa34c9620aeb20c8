/* Patterns (pattern.h). */
#include "infer/text/pattern.h"
#include "infer/text/buf.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* Oniguruma's \s (Unicode White_Space), for use inside a character class. */
#define ONIG_SPACE_CLASS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

pcre2_code *pattern_compile(const char *pattern, const char *what) {
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

void spanvec_push(SpanVec *v, size_t s, size_t e, int m) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 32; v->v = xrealloc(v->v, v->cap * sizeof(Span)); }
    v->v[v->n++] = (Span){s, e, m};
}

void pattern_find_spans(const pcre2_code *re, const char *lit, size_t litlen, const char *s, size_t n, SpanVec *out) {
    out->n = 0;
    if (!n) { spanvec_push(out, 0, 0, 0); return; }
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
            if (prev != ms) spanvec_push(out, prev, ms, 0);
            spanvec_push(out, ms, me, 1);
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
            if (prev != ms) spanvec_push(out, prev, ms, 0);
            spanvec_push(out, ms, ms + litlen, 1);
            prev = pos = ms + litlen;
        }
    }
    if (prev != n) spanvec_push(out, prev, n, 0);
}
