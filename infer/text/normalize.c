/* tokenizer.json's normalizers, in order: Prepend (to non-empty text),
 * Replace (a literal or a regex, every match), Strip (White_Space at
 * either end), NFC (nfc.c). */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/nfc.h"
#include "infer/text/utf8.h"
#include <stdlib.h>
#include <string.h>

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
            pattern_find_spans(op->re, op->a, op->alen, cur, cn, &sp);
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
            if (op->left) a = utf8_space_prefix_end(cur, cn);
            if (op->right && b > a) b = a + utf8_space_suffix_start(cur + a, b - a);
            cur += a; cn = b - a;
        } else if (op->type == NORM_NFC) {
            cur = nfc_normalize(cur, cn, &cn, ar);
        }
    }
    *out_n = cn;
    return cur;
}
