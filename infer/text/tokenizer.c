/* Tokenizers: the public API.  Loading picks the format and hands a fresh
 * Tokenizer to tokenizer_load.c; encoding runs the tokenizer.json pipeline
 * below (tokenizer.model texts go to sentencepiece.c) and adds the
 * post-processor's special tokens; decoding is in tokenizer_decode.c.
 * tokenizer_internal.h lists the files behind it.
 *
 * The tokenizer.json pipeline follows tokenizers 0.20 step by step:
 *   1. added tokens that are not `normalized` are cut out of the raw text
 *      (leftmost-longest, lstrip/rstrip/single_word: added.c);
 *   2. each remaining piece is normalized (Prepend, Replace, Strip, NFC:
 *      normalize.c), and `normalized` added tokens are cut out of the result;
 *   3. pre-tokenizers split / rewrite the pieces (Split regex, ByteLevel,
 *      Metaspace, Digits: pretokenize.c);
 *   4. each piece goes through BPE (merges by rank; ignore_merges; byte
 *      fallback; unk fusing: bpe.c), through the word cache;
 *   5. the post-processor (TemplateProcessing) adds bos/eos.
 * Regexes are compiled with PCRE2 (UTF + UCP); the patterns are written for
 * Oniguruma, so \s / \S are rewritten to Oniguruma's Unicode White_Space set
 * (pattern.c). */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/bytelevel.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* loading                                                             */

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* A tokenizer.json (json) or tokenizer.model into a fresh Tokenizer. */
static Tokenizer *load(const char *path, int json) {
    bytelevel_init();   /* the tables every tokenizer may read */
    Tokenizer *t = xcalloc(1, sizeof *t);
    t->path = xstrdup(path);
    t->bos_id = t->eos_id = -1;
    t->unk_id = INT32_MIN;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    strmap_init(&t->added_by_str, 16);
    if ((json ? tk_load_json(t, path) : tk_load_model(t, path)) == 0) return t;
    tokenizer_free(t);
    return NULL;
}

Tokenizer *tokenizer_load(const char *path) {
    if (!path || !*path) { err_set("no tokenizer path given"); return NULL; }
    if (is_dir(path)) {
        char *j = path_join(path, "tokenizer.json");
        if (file_exists(j)) { Tokenizer *t = load(j, 1); free(j); return t; }
        free(j);
        char *m = path_join(path, "tokenizer.model");
        if (file_exists(m)) { Tokenizer *t = load(m, 0); free(m); return t; }
        free(m);
        err_set("%s: no tokenizer.json or tokenizer.model in this directory", path);
        return NULL;
    }
    if (!file_exists(path)) { err_set("%s: no such file or directory", path); return NULL; }
    if (has_suffix(path, ".model")) return load(path, 0);
    if (has_suffix(path, ".json")) return load(path, 1);
    /* sniff: JSON starts with '{' */
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    int c;
    do c = fgetc(f); while (c == ' ' || c == '\n' || c == '\r' || c == '\t');
    fclose(f);
    return load(path, c == '{');
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_ids; i++) free(t->tok[i]);
    for (int i = 0; i < t->n_retired; i++) free(t->retired[i]);
    free(t->retired);
    free(t->tok); free(t->tok_len); free(t->attr);
    strmap_free(&t->vocab); strmap_free(&t->added_by_str);
    pairmap_free(&t->merges);
    free(t->cont_prefix); free(t->eow_suffix);
    free(t->score);
    strmap_free(&t->spm_pieces); strmap_free(&t->spm_reserved);
    free(t->spm_unk_surface); free(t->user_idx);
    for (int i = 0; i < t->n_added; i++) { free(t->added[i].content); free(t->added[i].ncontent); }
    free(t->added);
    added_matcher_free(&t->match_raw); added_matcher_free(&t->match_norm);
    for (int i = 0; i < t->n_norm; i++) { free(t->norm[i].a); free(t->norm[i].b); if (t->norm[i].re) pcre2_code_free(t->norm[i].re); }
    free(t->norm);
    for (int i = 0; i < t->n_pre; i++) { free(t->pre[i].lit); if (t->pre[i].re) pcre2_code_free(t->pre[i].re); }
    free(t->pre);
    for (int i = 0; i < t->n_dec; i++) { free(t->dec[i].pat); free(t->dec[i].content); if (t->dec[i].re) pcre2_code_free(t->dec[i].re); }
    free(t->dec);
    free(t->post_pre); free(t->post_post);
    free(t->chat_template);
    free(t->name_bos); free(t->name_eos); free(t->name_unk); free(t->name_pad);
    word_cache_free(t->cache);
    free(t->path);
    free(t);
}

/* ------------------------------------------------------------------ */
/* encoding                                                            */

/* out's ids from index `from` on; NULL when there are none (an empty vector
 * has no buffer, and NULL + 0 is undefined: found by tests/fuzz) */
static const int32_t *ids_from(const IdVec *out, size_t from) { return out->n > from ? out->v + from : NULL; }

/* BPE of one word, through the word cache when the caller holds it. */
static inline int encode_word(const Tokenizer *t, const char *w, size_t n, int cached, IdVec *out, BpeScratch *bs) {
    if (cached && word_cache_get(t->cache, w, n, out)) return 0;
    size_t before = out->n;
    int rc = bpe_word(t, w, n, out, bs);
    if (rc == 0 && cached) word_cache_put(t->cache, w, n, ids_from(out, before), out->n - before);
    return rc;
}

/* Steps 1-4 of the pipeline: the ids of text, appended to out. */
static int hf_encode(const Tokenizer *t, const char *text, size_t len, int flags, IdVec *out) {
    Arena ar = {0};
    PieceVec a = {0}, b = {0}, segs = {0};
    PreScratch ps = {0};
    BpeScratch bs = {0};
    int split_special = (flags & TOK_SPLIT_SPECIAL) != 0, rc = 0;
    added_split(t, &t->match_raw, text, len, split_special, 1, &segs);
    for (size_t i = 0; i < segs.n; i++) {
        Piece *p = &segs.v[i];
        if (p->id >= 0) { piecevec_push(&a, p->p, p->len, p->id, 0); continue; }
        size_t nn;
        const char *ns = tk_normalize(t, p->p, p->len, &nn, &ar);
        if (!nn) continue;
        added_split(t, &t->match_norm, ns, nn, split_special, p->orig0, &a);
    }
    for (int k = 0; k < t->n_pre; k++) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (a.v[i].id >= 0) { piecevec_push(&b, a.v[i].p, a.v[i].len, a.v[i].id, 0); continue; }
            pretokenize(&t->pre[k], &a.v[i], &b, &ar, &ps);
        }
        PieceVec tmp = a; a = b; b = tmp;
    }
    int cached = word_cache_lock(t->cache);
    for (size_t i = 0; i < a.n && rc == 0; i++) {
        Piece *p = &a.v[i];
        if (p->id >= 0) { idvec_push(out, p->id); continue; }
        if (!t->ws_split) { rc = encode_word(t, p->p, p->len, cached, out, &bs); continue; }
        /* the same ids as one word of the whole piece */
        for (size_t st = 0, en; st < p->len && rc == 0; st = en) {
            en = ws_segment_end(p->p, p->len, st);
            rc = encode_word(t, p->p + st, en - st, cached, out, &bs);
        }
    }
    if (cached) word_cache_unlock(t->cache);
    bpe_scratch_free(&bs);
    free(a.v); free(b.v); free(segs.v); free(ps.a.v); free(ps.b.v);
    arena_free(&ar);
    return rc;
}

int tokenizer_encode_ex(const Tokenizer *t, const char *text, size_t len, int flags,
                        int32_t **ids, size_t *n) {
    *ids = NULL; *n = 0;
    long bad = utf8_check((const unsigned char *)text, len);
    if (bad >= 0) { err_set("text is not valid UTF-8 (byte %ld)", bad); return -1; }
    IdVec out = {0};
    if (flags & TOK_ADD_SPECIAL) idvec_append(&out, t->post_pre, (size_t)t->n_post_pre);
    int rc = t->kind == TOK_KIND_SPM_BPE ? spm_encode(t, text, len, flags, &out)
                                         : hf_encode(t, text, len, flags, &out);
    if (rc) { free(out.v); return -1; }
    if (flags & TOK_ADD_SPECIAL) idvec_append(&out, t->post_post, (size_t)t->n_post_post);
    if (!out.v) out.v = xmalloc(sizeof(int32_t));
    *ids = out.v; *n = out.n;
    return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int add_special, int32_t **ids, size_t *n) {
    return tokenizer_encode_ex(t, text, strlen(text), add_special ? TOK_ADD_SPECIAL : 0, ids, n);
}

/* ------------------------------------------------------------------ */
/* vocabulary                                                          */

TokenizerKind tokenizer_kind(const Tokenizer *t) { return (TokenizerKind)t->kind; }
const char *tokenizer_path(const Tokenizer *t) { return t->path; }
int tokenizer_vocab_size(const Tokenizer *t) { return t->n_ids; }
int32_t tokenizer_bos_id(const Tokenizer *t) { return t->bos_id; }
int32_t tokenizer_eos_id(const Tokenizer *t) { return t->eos_id; }
int32_t tokenizer_token_to_id(const Tokenizer *t, const char *s) {
    if (t->kind == TOK_KIND_SPM_BPE) {
        int32_t id = strmap_get(&t->added_by_str, s, strlen(s));
        if (id >= 0) return id;
        id = strmap_get(&t->spm_reserved, s, strlen(s));
        return id >= 0 ? id : strmap_get(&t->spm_pieces, s, strlen(s));
    }
    return tk_token_id_any(t, s, strlen(s));
}
const char *tokenizer_id_to_token(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? t->tok[id] : NULL;
}
int tokenizer_is_special(const Tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->attr[id] & TA_SPECIAL) != 0;
}
int tokenizer_adds_bos(const Tokenizer *t) {
    for (int i = 0; i < t->n_post_pre; i++) if (t->post_pre[i] == t->bos_id) return 1;
    return 0;
}
int tokenizer_adds_eos(const Tokenizer *t) {
    for (int i = 0; i < t->n_post_post; i++) if (t->post_post[i] == t->eos_id) return 1;
    return 0;
}
const char *tokenizer_chat_template(const Tokenizer *t) { return t->chat_template; }
int tokenizer_generation_eos(const Tokenizer *t, const int32_t **ids) { *ids = t->gen_eos; return t->n_gen_eos; }
int tokenizer_clean_up_spaces(const Tokenizer *t) { return t->clean_up_spaces; }
const char *tokenizer_special_name(const Tokenizer *t, const char *which) {
    if (!strcmp(which, "bos")) return t->name_bos ? t->name_bos : tokenizer_id_to_token(t, t->bos_id);
    if (!strcmp(which, "eos")) return t->name_eos ? t->name_eos : tokenizer_id_to_token(t, t->eos_id);
    if (!strcmp(which, "unk")) return t->name_unk;
    if (!strcmp(which, "pad")) return t->name_pad;
    return NULL;
}
