/* The patterns of tokenizer.json: regexes (written for Oniguruma, compiled
 * with PCRE2) or literal strings, and the tokenizers library's
 * find_matches over them.  Internal to infer/text. */
#ifndef C2T_TEXT_PATTERN_H
#define C2T_TEXT_PATTERN_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>

/* Compiles pattern (UTF, UCP; JIT when available) with \s and \S rewritten
 * to what they mean in Oniguruma, which the patterns are written for: the
 * Unicode White_Space set.  NULL with err_set naming `what` when it does
 * not compile. */
pcre2_code *pattern_compile(const char *pattern, const char *what);

/* A stretch [s, e) of text; m: a match of the pattern (else the text
 * between matches). */
typedef struct { size_t s, e; int m; } Span;
typedef struct { Span *v; size_t n, cap; } SpanVec;
void spanvec_push(SpanVec *v, size_t s, size_t e, int m);

/* Replaces out's spans by spans covering s[0..n) that alternate text and
 * matches of re (or of the literal lit[0..litlen) when re is NULL), as
 * Pattern::find_matches does: empty matches are skipped, and empty text
 * gives one empty non-match.  s must be valid UTF-8. */
void pattern_find_spans(const pcre2_code *re, const char *lit, size_t litlen, const char *s, size_t n, SpanVec *out);
#endif
