/* Unicode NFC (canonical decomposition, canonical ordering, canonical
 * composition) as the tokenizers library's NFC normalizer computes it: its
 * Unicode tables are older than today's, and nfc_data.h holds exactly what
 * it knows (tools/golden/tokenizer_oracle.py nfc made it and checked it).
 * Internal to infer/text. */
#ifndef C2T_TEXT_NFC_H
#define C2T_TEXT_NFC_H
#include "infer/text/buf.h"
#include <stddef.h>

/* s[0..n) (valid UTF-8) in NFC: s itself when it is already NFC (most
 * text: one quick scan), else a new string in the arena.  *out_n is the
 * result's length. */
const char *nfc_normalize(const char *s, size_t n, size_t *out_n, Arena *ar);
#endif
