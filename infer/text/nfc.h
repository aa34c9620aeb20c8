/* Unicode NFC (canonical decomposition, canonical ordering, canonical
 * composition), as the tokenizers library's NFC normalizer: by utf8proc
 * (its Unicode version: tests/test_tokenizer.c compares both on texts NFC
 * changes).  Internal to infer/text. */
#ifndef C2T_TEXT_NFC_H
#define C2T_TEXT_NFC_H
#include "infer/text/buf.h"
#include <stddef.h>

/* s[0..n) in NFC: s itself when it is ASCII (or not valid UTF-8), else a
 * new string in the arena.  *out_n is the result's length. */
const char *nfc_normalize(const char *s, size_t n, size_t *out_n, Arena *ar);
#endif
