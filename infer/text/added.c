/* Added tokens in text: the tokens of tokenizer.json's added_tokens (and
 * SentencePiece's specials) are found in the text before the model sees
 * it, leftmost-longest, with the lstrip / rstrip / single_word rules of the
 * tokenizers library's AddedVocabulary. */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
                size_t ns = utf8_space_suffix_start(s, ms);
                st = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) en += utf8_space_prefix_end(s + me, n - me);
            if (start_offset < st) piecevec_push(out, s + start_offset, st - start_offset, -1, orig0 && start_offset == 0);
            piecevec_push(out, s + st, en - st, a->id, 0);
            start_offset = en;
            pos = en > pos ? en : pos;
        }
    }
    if (start_offset < n) piecevec_push(out, s + start_offset, n - start_offset, -1, orig0 && start_offset == 0);
}
