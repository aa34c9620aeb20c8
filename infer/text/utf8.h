/* UTF-8 as the tokenizers need it: one character's validity and code
 * point, the "maximal subpart" rule for replacing invalid bytes by U+FFFD,
 * and Unicode White_Space at either end of a string.  Internal to
 * infer/text. */
#ifndef C2T_TEXT_UTF8_H
#define C2T_TEXT_UTF8_H
#include "infer/text/buf.h"
#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the valid character at s (n bytes available), or 0 when
 * the bytes there are not one complete valid character (overlongs,
 * surrogates and code points past U+10FFFF are invalid).  ASCII is
 * answered inline, the rest by utf8_valid_multibyte: BPE and the regex
 * loops ask for every character. */
int utf8_valid_multibyte(const unsigned char *s, size_t n);
static inline int utf8_valid_char(const unsigned char *s, size_t n) {
    return n && s[0] < 0x80 ? 1 : utf8_valid_multibyte(s, n);
}
/* Bytes at s that begin a character and could still be completed: the
 * maximal subpart of an ill-formed sequence (Unicode's replacement
 * practice), 1 for ASCII, 0 when s[0] can start no character. */
int utf8_maximal_prefix(const unsigned char *s, size_t n);
/* s[0..n) is an unfinished character that more bytes could complete: its
 * length (1-3); 0 otherwise. */
int utf8_incomplete_prefix(const unsigned char *s, size_t n);
/* The code point of the len-byte valid character at s. */
uint32_t utf8_decode(const unsigned char *s, int len);
/* Byte offset of the first invalid byte, or -1 when s is valid UTF-8. */
long utf8_check(const unsigned char *s, size_t n);
/* Appends s to out with each invalid sequence replaced by U+FFFD: one per
 * maximal subpart (Rust's from_utf8_lossy), or one per byte. */
void utf8_lossy(Buf *out, const unsigned char *s, size_t n, int per_byte);

int unicode_is_whitespace(uint32_t cp);   /* Unicode White_Space */
/* Where the leading White_Space of s ends / the trailing one starts
 * (byte offsets; n resp. 0 when s is all White_Space). */
size_t utf8_space_prefix_end(const char *s, size_t n);
size_t utf8_space_suffix_start(const char *s, size_t n);
#endif
