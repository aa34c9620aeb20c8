/* NFC (nfc.h) by utf8proc: canonical decomposition, ordering and
 * composition (UTF8PROC_STABLE | UTF8PROC_COMPOSE).  ASCII, which NFC never
 * changes, skips the library. */
#include "infer/text/nfc.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

const char *nfc_normalize(const char *s, size_t n, size_t *out_n, Arena *ar) {
    *out_n = n;
    size_t i = 0;
    while (i < n && !((unsigned char)s[i] & 0x80)) i++;
    if (i == n) return s;
    utf8proc_uint8_t *d = NULL;
    utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &d,
                                        UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (len < 0) return s;   /* not valid UTF-8: the tokenizer's byte handling takes it as it is */
    char *out = arena_alloc(ar, (size_t)len + 1);
    memcpy(out, d, (size_t)len);
    free(d);
    *out_n = (size_t)len;
    return out;
}
