/* The token table of a Tokenizer: id -> string and attributes, and the
 * lookup of a token string over added tokens and the vocabulary. */
#include "infer/text/tokenizer_internal.h"
#include "kernels/base/util.h"
#include <string.h>

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

int32_t tk_token_id_any(const Tokenizer *t, const char *s, size_t n) {
    int32_t id = strmap_get(&t->added_by_str, s, n);
    return id >= 0 ? id : strmap_get(&t->vocab, s, n);
}
