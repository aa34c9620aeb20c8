/* UTF-8 helpers (utf8.h).  Hand-written rather than taken from PCRE2, the
 * UTF-8 library the project links: PCRE2 validates only whole subjects, and
 * the tokenizers step through text one character at a time. */
#include "infer/text/utf8.h"

/* Lead byte -> length and the range of the second byte (which excludes
 * overlongs, surrogates and code points past U+10FFFF); 0 for a byte that
 * cannot start a multi-byte character. */
static int lead(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80; *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) { if (c == 0xE0) *lo = 0xA0; if (c == 0xED) *hi = 0x9F; return 3; }
    if (c >= 0xF0 && c <= 0xF4) { if (c == 0xF0) *lo = 0x90; if (c == 0xF4) *hi = 0x8F; return 4; }
    return 0;
}

int utf8_valid_multibyte(const unsigned char *s, size_t n) {
    if (!n) return 0;
    if (s[0] < 0x80) return 1;
    unsigned lo, hi;
    int len = lead(s[0], &lo, &hi);
    if (!len || n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

int utf8_maximal_prefix(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    unsigned lo, hi;
    int len = lead(s[0], &lo, &hi);
    if (!len) return 0;
    int k = 1;
    if ((size_t)k < n && s[1] >= lo && s[1] <= hi) {
        k = 2;
        while (k < len && (size_t)k < n && (s[k] & 0xC0) == 0x80) k++;
    }
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

int unicode_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

size_t utf8_space_prefix_end(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_valid_char((const unsigned char *)s + i, n - i);
        if (!k || !unicode_is_whitespace(utf8_decode((const unsigned char *)s + i, k))) break;
        i += (size_t)k;
    }
    return i;
}

size_t utf8_space_suffix_start(const char *s, size_t n) {
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
