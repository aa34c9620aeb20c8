/* Tokenizers: loading tokenizer.json, or a SentencePiece tokenizer.model
 * (read by sentencepiece_model.c), with the tokenizer_config.json beside
 * it, into the Tokenizer that tokenizer.c made. */
#include "infer/text/tokenizer_internal.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* JSON loading                                                        */

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static int jbool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return def;
}
/* A token given as "text" or {"content": "text", ...}. */
static const char *jtoken(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return NULL;
}

/* pattern: {"String": s} or {"Regex": r}; fills literal or regex. */
static int load_pattern(const cJSON *pat, const char *what, char **lit, size_t *litlen, pcre2_code **re) {
    const char *s = jstr(pat, "String");
    const char *r = jstr(pat, "Regex");
    *lit = NULL; *litlen = 0; *re = NULL;
    if (s) { *lit = xstrdup(s); *litlen = strlen(s); return 0; }
    if (r) { *re = pattern_compile(r, what); return *re ? 0 : -1; }
    err_set("%s: pattern is neither String nor Regex", what);
    return -1;
}

static int load_normalizer(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: normalizer without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *e;
        cJSON_ArrayForEach(e, list) if (load_normalizer(t, e, file)) return -1;
        return 0;
    }
    NormOp op = {0};
    if (!strcmp(type, "Prepend")) {
        const char *p = jstr(n, "prepend");
        if (!p) { err_set("%s: Prepend normalizer without prepend", file); return -1; }
        op.type = NORM_PREPEND; op.a = xstrdup(p); op.alen = strlen(p);
    } else if (!strcmp(type, "Replace")) {
        const char *c = jstr(n, "content");
        if (!c) { err_set("%s: Replace normalizer without content", file); return -1; }
        op.type = NORM_REPLACE;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Replace normalizer", &op.a, &op.alen, &op.re)) {
            if (!strstr(err_get(), file)) { char e[900]; snprintf(e, sizeof e, "%s", err_get()); err_set("%s: %s", file, e); }
            return -1;
        }
        op.b = xstrdup(c); op.blen = strlen(c);
    } else if (!strcmp(type, "Strip")) {
        op.type = NORM_STRIP; op.left = jbool(n, "strip_left", 1); op.right = jbool(n, "strip_right", 1);
    } else if (!strcmp(type, "NFC")) {
        op.type = NORM_NFC;
    } else {
        err_set("%s: normalizer type '%s' is not supported (supported: Sequence, Prepend, Replace, Strip, NFC)", file, type);
        return -1;
    }
    t->norm = xrealloc(t->norm, sizeof(NormOp) * (size_t)(t->n_norm + 1));
    t->norm[t->n_norm++] = op;
    return 0;
}

static int parse_scheme(const cJSON *n) {
    const char *s = jstr(n, "prepend_scheme");
    if (s) {
        if (!strcmp(s, "first")) return PREPEND_FIRST;
        if (!strcmp(s, "never")) return PREPEND_NEVER;
        return PREPEND_ALWAYS;
    }
    return jbool(n, "add_prefix_space", 1) ? PREPEND_ALWAYS : PREPEND_NEVER;
}

static const char *GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: pre_tokenizer without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "pretokenizers"), *e;
        cJSON_ArrayForEach(e, list) if (load_pre(t, e, file)) return -1;
        return 0;
    }
    PreOp op = {0};
    if (!strcmp(type, "Split")) {
        op.type = PRE_SPLIT;
        const char *b = jstr(n, "behavior");
        if (!b) b = "Removed";
        if (!strcmp(b, "Removed")) op.behavior = SPLIT_REMOVED;
        else if (!strcmp(b, "Isolated")) op.behavior = SPLIT_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) op.behavior = SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) op.behavior = SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) op.behavior = SPLIT_CONTIGUOUS;
        else { err_set("%s: Split behavior '%s' is not known", file, b); return -1; }
        op.invert = jbool(n, "invert", 0);
        /* the pattern last: nothing after it fails, so nothing it holds leaks */
        char *lit; size_t ll;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Split pre-tokenizer", &lit, &ll, &op.re)) return -1;
        op.lit = lit; op.litlen = ll;
    } else if (!strcmp(type, "Digits")) {
        op.type = PRE_SPLIT;
        op.re = pattern_compile(jbool(n, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", "Digits");
        if (!op.re) return -1;
        op.behavior = SPLIT_ISOLATED;
    } else if (!strcmp(type, "ByteLevel")) {
        op.type = PRE_BYTELEVEL;
        op.add_prefix_space = jbool(n, "add_prefix_space", 1);
        op.use_regex = jbool(n, "use_regex", 1);
        if (op.use_regex && !(op.re = pattern_compile(GPT2_PATTERN, "ByteLevel"))) return -1;
    } else if (!strcmp(type, "Metaspace")) {
        op.type = PRE_METASPACE;
        const char *r = jstr(n, "replacement");
        if (!r) r = "\xE2\x96\x81";
        if (strlen(r) >= sizeof op.repl || !*r) { err_set("%s: Metaspace replacement too long", file); return -1; }
        strcpy(op.repl, r); op.repl_len = (int)strlen(r);
        op.scheme = parse_scheme(n);
        op.split = jbool(n, "split", 1);
    } else {
        err_set("%s: pre_tokenizer type '%s' is not supported (supported: Sequence, Split, ByteLevel, Metaspace, Digits)", file, type);
        return -1;
    }
    t->pre = xrealloc(t->pre, sizeof(PreOp) * (size_t)(t->n_pre + 1));
    t->pre[t->n_pre++] = op;
    return 0;
}

static int load_decoder(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    t->has_decoder = 1;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: decoder without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "decoders"), *e;
        cJSON_ArrayForEach(e, list) if (load_decoder(t, e, file)) return -1;
        return 0;
    }
    DecOp op = {0};
    if (!strcmp(type, "Replace")) {
        op.type = DEC_REPLACE;
        if (load_pattern(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "Replace decoder", &op.pat, &op.plen, &op.re)) return -1;
        const char *c = jstr(n, "content");
        op.content = xstrdup(c ? c : ""); op.clen = strlen(op.content);
    } else if (!strcmp(type, "ByteFallback")) op.type = DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) op.type = DEC_FUSE;
    else if (!strcmp(type, "Strip")) {
        op.type = DEC_STRIP;
        const char *c = jstr(n, "content");
        int k = c ? utf8_valid_char((const unsigned char *)c, strlen(c)) : 0;
        op.strip_ch = k ? utf8_decode((const unsigned char *)c, k) : ' ';
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(n, "start"), *sp = cJSON_GetObjectItemCaseSensitive(n, "stop");
        int64_t v0 = 0, v1 = 0;
        if ((st && json_int(st, file, "decoder Strip start", 0, INT32_MAX, &v0)) ||
            (sp && json_int(sp, file, "decoder Strip stop", 0, INT32_MAX, &v1)))
            return -1;
        op.start = (int)v0;
        op.stop = (int)v1;
    } else if (!strcmp(type, "ByteLevel")) op.type = DEC_BYTELEVEL;
    else if (!strcmp(type, "Metaspace")) {
        op.type = DEC_METASPACE;
        const char *r = jstr(n, "replacement");
        if (!r) r = "\xE2\x96\x81";
        if (strlen(r) >= sizeof op.repl || !*r) { err_set("%s: Metaspace replacement too long", file); return -1; }
        strcpy(op.repl, r); op.repl_len = (int)strlen(r);
        op.scheme = parse_scheme(n);
    } else {
        err_set("%s: decoder type '%s' is not supported (supported: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel, Metaspace)", file, type);
        return -1;
    }
    t->dec = xrealloc(t->dec, sizeof(DecOp) * (size_t)(t->n_dec + 1));
    t->dec[t->n_dec++] = op;
    return 0;
}

static int post_add(int32_t **v, int *n, const cJSON *ids, const char *file) {
    const cJSON *e;
    cJSON_ArrayForEach(e, ids) {
        int64_t id;
        if (json_int(e, file, "TemplateProcessing special token id", 0, TK_MAX_ID, &id)) return -1;
        *v = xrealloc(*v, sizeof(int32_t) * (size_t)(*n + 1));
        (*v)[(*n)++] = (int32_t)id;
    }
    return 0;
}

static int load_post(Tokenizer *t, const cJSON *n, const char *file) {
    if (!n || cJSON_IsNull(n)) return 0;
    const char *type = jstr(n, "type");
    if (!type) { err_set("%s: post_processor without a type", file); return -1; }
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "processors"), *e;
        cJSON_ArrayForEach(e, list) if (load_post(t, e, file)) return -1;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) return 0;  /* offsets only */
    if (!strcmp(type, "TemplateProcessing")) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(n, "single");
        const cJSON *specials = cJSON_GetObjectItemCaseSensitive(n, "special_tokens");
        const cJSON *e;
        int seen_a = 0;
        free(t->post_pre); free(t->post_post);
        t->post_pre = t->post_post = NULL; t->n_post_pre = t->n_post_post = 0;
        cJSON_ArrayForEach(e, single) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (st) {
                const char *name = jstr(st, "id");
                const cJSON *spec = name ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
                if (!spec) { err_set("%s: TemplateProcessing special token '%s' not defined", file, name ? name : "?"); return -1; }
                const cJSON *ids = cJSON_GetObjectItemCaseSensitive(spec, "ids");
                if (seen_a ? post_add(&t->post_post, &t->n_post_post, ids, file)
                           : post_add(&t->post_pre, &t->n_post_pre, ids, file))
                    return -1;
            } else if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
                seen_a = 1;
            }
        }
        return 0;
    }
    err_set("%s: post_processor type '%s' is not supported (supported: TemplateProcessing, ByteLevel, Sequence)", file, type);
    return -1;
}

static int load_added(Tokenizer *t, const cJSON *list, const char *file) {
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *idj = cJSON_GetObjectItemCaseSensitive(e, "id");
        const char *c = jstr(e, "content");
        int64_t id;
        if (!cJSON_IsNumber(idj) || !c) continue;
        if (json_int(idj, file, "added_tokens[].id", 0, TK_MAX_ID, &id)) return -1;
        t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
        AddedTok *a = &t->added[t->n_added++];
        memset(a, 0, sizeof *a);
        a->id = (int32_t)id;
        a->content = xstrdup(c); a->len = strlen(c);
        a->special = (uint8_t)jbool(e, "special", 0);
        a->lstrip = (uint8_t)jbool(e, "lstrip", 0);
        a->rstrip = (uint8_t)jbool(e, "rstrip", 0);
        a->single_word = (uint8_t)jbool(e, "single_word", 0);
        a->normalized = (uint8_t)jbool(e, "normalized", !a->special);
    }
    return 0;
}

static void finish_added(Tokenizer *t) {
    Arena ar = {0};
    for (int i = 0; i < t->n_added; i++) {
        AddedTok *a = &t->added[i];
        uint8_t attr = TA_ADDED | (a->special ? TA_SPECIAL : 0);
        int32_t prev = strmap_get(&t->vocab, a->content, a->len);
        if (prev != a->id || !t->tok || a->id >= t->n_ids || !t->tok[a->id]) tk_set_token(t, a->id, a->content, a->len, attr);
        else t->attr[a->id] |= attr;
        strmap_put(&t->added_by_str, t->tok[a->id], t->tok_len[a->id], a->id);
        if (a->normalized) {
            size_t nn;
            const char *ns = tk_normalize(t, a->content, a->len, &nn, &ar);
            a->ncontent = xmalloc(nn + 1);
            memcpy(a->ncontent, ns, nn); a->ncontent[nn] = 0; a->nlen = nn;
        }
    }
    arena_free(&ar);
    added_matcher_build(t, &t->match_raw, 0);
    added_matcher_build(t, &t->match_norm, 1);
}

static int load_bpe_model(Tokenizer *t, const cJSON *m, const char *file) {
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsObject(vocab)) { err_set("%s: BPE model without a vocab object", file); return -1; }
    int nv = cJSON_GetArraySize(vocab);
    strmap_init(&t->vocab, (size_t)nv);
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        char what[96];
        snprintf(what, sizeof what, "vocab entry '%.60s'", e->string);
        int64_t id64;
        if (json_int(e, file, what, 0, TK_MAX_ID, &id64)) return -1;
        int32_t id = (int32_t)id64;
        if (tk_set_token(t, id, e->string, strlen(e->string), 0) < 0) return -1;
    }
    for (int32_t id = 0; id < t->n_ids; id++) if (t->tok[id]) strmap_put(&t->vocab, t->tok[id], t->tok_len[id], id);
    const cJSON *dj = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (cJSON_IsNumber(dj) && dj->valuedouble > 0) { err_set("%s: BPE dropout %g is not supported (it makes encoding random)", file, dj->valuedouble); return -1; }
    t->byte_fallback = jbool(m, "byte_fallback", 0);
    t->fuse_unk = jbool(m, "fuse_unk", 0);
    t->ignore_merges = jbool(m, "ignore_merges", 0);
    const char *unk = jstr(m, "unk_token");
    t->unk_id = unk ? strmap_get(&t->vocab, unk, strlen(unk)) : INT32_MIN;
    const char *cp = jstr(m, "continuing_subword_prefix"), *sf = jstr(m, "end_of_word_suffix");
    if (cp && *cp) t->cont_prefix = xstrdup(cp);
    if (sf && *sf) t->eow_suffix = xstrdup(sf);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = strmap_get(&t->vocab, name, 6);
        if (t->byte_id[b] >= 0) t->attr[t->byte_id[b]] |= TA_BYTE;
    }
    int nm = cJSON_GetArraySize(merges);
    pairmap_init(&t->merges, (size_t)nm);
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;
    Buf tmp = {0};
    int rank = 0;
    cJSON_ArrayForEach(e, merges) {
        const char *a, *b; size_t al, bl;
        char *sp = NULL;
        if (cJSON_IsString(e)) {
            a = e->valuestring;
            sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) { free(tmp.v); err_set("%s: merge %d is not two tokens: '%s'", file, rank + 1, a); return -1; }
            al = (size_t)(sp - a); b = sp + 1; bl = strlen(b);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring; al = strlen(a);
            b = cJSON_GetArrayItem(e, 1)->valuestring; bl = strlen(b);
        } else { free(tmp.v); err_set("%s: merge %d is malformed", file, rank + 1); return -1; }
        int32_t ia = strmap_get(&t->vocab, a, al), ib = strmap_get(&t->vocab, b, bl);
        if (ia < 0 || ib < 0) { free(tmp.v); err_set("%s: merge %d uses a token missing from the vocab", file, rank + 1); return -1; }
        tmp.n = 0;
        buf_put(&tmp, a, al);
        if (bl < plen) { free(tmp.v); err_set("%s: merge %d: token shorter than continuing_subword_prefix", file, rank + 1); return -1; }
        buf_put(&tmp, b + plen, bl - plen);
        int32_t nid = strmap_get(&t->vocab, tmp.v, tmp.n);
        if (nid < 0) { err_set("%s: merge %d: merged token '%s' is not in the vocab", file, rank + 1, tmp.v); free(tmp.v); return -1; }
        pairmap_put(&t->merges, ia, ib, rank, nid);
        rank++;
    }
    free(tmp.v);
    return 0;
}

static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return xstrdup(".");
    if (s == path) return xstrdup("/");
    char *d = xmalloc((size_t)(s - path) + 1);
    memcpy(d, path, (size_t)(s - path));
    d[s - path] = 0;
    return d;
}

/* tokenizer_config.json next to the tokenizer file. */
static cJSON *load_config(const char *tokfile) {
    char *dir = dir_of(tokfile);
    char *p = path_join(dir, "tokenizer_config.json");
    free(dir);
    cJSON *c = NULL;
    if (file_exists(p)) {
        c = read_json_file(p);
        if (!c) { free(p); return (cJSON *)-1; }
    }
    free(p);
    return c;
}

/* generation_config.json next to the tokenizer file: its eos_token_id, one
 * id or a list (Qwen2.5-Instruct: <|im_end|> and <|endoftext|>), which is
 * what transformers' generate() stops at.  Optional, and never an error: a
 * file that is not there, not JSON or holds no ids in range adds nothing. */
static void load_generation_eos(Tokenizer *t, const char *tokfile) {
    char *dir = dir_of(tokfile);
    char *p = path_join(dir, "generation_config.json");
    free(dir);
    cJSON *g = file_exists(p) ? read_json_file(p) : NULL;
    free(p);
    if (!g) return;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(g, "eos_token_id"), *x;
    if (cJSON_IsNumber(e)) {
        if (e->valuedouble >= 0 && e->valuedouble < t->n_ids) t->gen_eos[t->n_gen_eos++] = (int32_t)e->valuedouble;
    } else if (cJSON_IsArray(e)) {
        cJSON_ArrayForEach(x, e)
            if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < t->n_ids && t->n_gen_eos < 8)
                t->gen_eos[t->n_gen_eos++] = (int32_t)x->valuedouble;
    }
    cJSON_Delete(g);
}

/* The special token names of tokenizer_config.json; those it leaves out
 * are the tokenizer class's defaults where it has its own (Gemma's <bos>,
 * <eos>, <unk>, <pad>: its vocabulary's </s> is an HTML tag, no eos). */
static void apply_config_names(Tokenizer *t, const cJSON *cfg) {
    const char *v, *cls = jstr(cfg, "tokenizer_class");
    const int gemma = cls && (!strcmp(cls, "GemmaTokenizer") || !strcmp(cls, "GemmaTokenizerFast"));
    if ((v = jtoken(cfg, "bos_token")) || (gemma && (v = "<bos>"))) t->name_bos = xstrdup(v);
    if ((v = jtoken(cfg, "eos_token")) || (gemma && (v = "<eos>"))) t->name_eos = xstrdup(v);
    if ((v = jtoken(cfg, "unk_token")) || (gemma && (v = "<unk>"))) t->name_unk = xstrdup(v);
    if ((v = jtoken(cfg, "pad_token")) || (gemma && (v = "<pad>"))) t->name_pad = xstrdup(v);
    t->clean_up_spaces = jbool(cfg, "clean_up_tokenization_spaces", 0);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(ct)) t->chat_template = xstrdup(ct->valuestring);
    else if (cJSON_IsArray(ct)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, ct) {
            const char *name = jstr(e, "name"), *tpl = jstr(e, "template");
            if (tpl && (!t->chat_template || (name && !strcmp(name, "default")))) {
                free(t->chat_template);
                t->chat_template = xstrdup(tpl);
            }
        }
    }
}

static int is_llama_class(const cJSON *cfg) {
    const char *c = jstr(cfg, "tokenizer_class");
    return c && (!strcmp(c, "LlamaTokenizer") || !strcmp(c, "LlamaTokenizerFast") ||
                 !strcmp(c, "CodeLlamaTokenizer") || !strcmp(c, "CodeLlamaTokenizerFast") ||
                 !strcmp(c, "GemmaTokenizer") || !strcmp(c, "GemmaTokenizerFast"));
}

/* LLaMA and Gemma tokenizer classes build their post-processor from
 * add_bos_token / add_eos_token (transformers' LlamaTokenizerFast and
 * GemmaTokenizerFast update_post_processor). */
static void llama_post_from_config(Tokenizer *t, const cJSON *cfg) {
    int add_bos = jbool(cfg, "add_bos_token", 1), add_eos = jbool(cfg, "add_eos_token", 0);
    free(t->post_pre); free(t->post_post);
    t->post_pre = t->post_post = NULL; t->n_post_pre = t->n_post_post = 0;
    if (add_bos && t->bos_id >= 0) { t->post_pre = xmalloc(sizeof(int32_t)); t->post_pre[0] = t->bos_id; t->n_post_pre = 1; }
    if (add_eos && t->eos_id >= 0) { t->post_post = xmalloc(sizeof(int32_t)); t->post_post[0] = t->eos_id; t->n_post_post = 1; }
}

static void resolve_bos_eos(Tokenizer *t) {
    if (t->name_bos) { int32_t id = tk_token_id_any(t, t->name_bos, strlen(t->name_bos)); if (id >= 0) t->bos_id = id; }
    if (t->name_eos) { int32_t id = tk_token_id_any(t, t->name_eos, strlen(t->name_eos)); if (id >= 0) t->eos_id = id; }
    if (t->bos_id < 0 && t->n_post_pre) t->bos_id = t->post_pre[0];
    static const char *bos_names[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>"};
    static const char *eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"};
    for (size_t i = 0; t->bos_id < 0 && i < sizeof bos_names / sizeof *bos_names; i++)
        t->bos_id = tk_token_id_any(t, bos_names[i], strlen(bos_names[i]));
    for (size_t i = 0; t->eos_id < 0 && i < sizeof eos_names / sizeof *eos_names; i++)
        t->eos_id = tk_token_id_any(t, eos_names[i], strlen(eos_names[i]));
}

/* On failure the error gets path in front unless it names it already. */
static void err_name(const char *path) {
    if (!strstr(err_get(), path)) { char e[900]; snprintf(e, sizeof e, "%s", err_get()); err_set("%s: %s", path, e); }
}

int tk_load_json(Tokenizer *t, const char *path) {
    cJSON *j = read_json_file(path);
    if (!j) return -1;
    t->kind = TOK_KIND_HF_BPE;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const char *mtype = jstr(model, "type");
    cJSON *cfg = NULL;
    if (!cJSON_IsObject(model)) { err_set("%s: no \"model\" object (is this a tokenizer.json?)", path); goto fail; }
    if (!mtype) {  /* very old files: infer */
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, "vocab");
        if (cJSON_GetObjectItemCaseSensitive(model, "merges")) mtype = "BPE";
        else if (cJSON_IsArray(v)) mtype = "Unigram";
        else if (cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix")) mtype = "WordPiece";
        else mtype = "WordLevel";
    }
    if (strcmp(mtype, "BPE") != 0) {
        err_set("%s: tokenizer model type '%s' is not supported (only BPE: the LLaMA families' tokenizers)", path, mtype);
        goto fail;
    }
    if (load_normalizer(t, cJSON_GetObjectItemCaseSensitive(j, "normalizer"), path)) goto fail;
    if (load_pre(t, cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), path)) goto fail;
    if (load_decoder(t, cJSON_GetObjectItemCaseSensitive(j, "decoder"), path)) goto fail;
    if (load_bpe_model(t, model, path)) goto fail;
    if (load_added(t, cJSON_GetObjectItemCaseSensitive(j, "added_tokens"), path)) goto fail;
    finish_added(t);
    if (load_post(t, cJSON_GetObjectItemCaseSensitive(j, "post_processor"), path)) goto fail;
    cfg = load_config(path);
    if (cfg == (cJSON *)-1) { cfg = NULL; goto fail; }
    if (cfg) apply_config_names(t, cfg);
    resolve_bos_eos(t);
    if (cfg && is_llama_class(cfg)) llama_post_from_config(t, cfg);
    load_generation_eos(t, path);
    cJSON_Delete(cfg);
    cJSON_Delete(j);
    t->cache = word_cache_new();
    /* no pre-tokenizer: the whole normalized text is one BPE word */
    t->ws_split = t->n_pre == 0 && !t->ignore_merges && !t->cont_prefix && !t->eow_suffix &&
                  ws_split_safe(t, &t->vocab);
    return 0;
fail:
    err_name(path);
    cJSON_Delete(cfg);
    cJSON_Delete(j);
    return -1;
}

int tk_load_model(Tokenizer *t, const char *path) {
    size_t n;
    char *data = read_text_file(path, &n);
    if (!data) return -1;
    t->kind = TOK_KIND_SPM_BPE;
    t->spm_legacy = 1;
    t->spm_add_prefix_space = 1;
    cJSON *cfg = NULL;
    if (spm_read_model(t, (const unsigned char *)data, n, path)) goto fail;
    free(data); data = NULL;
    cfg = load_config(path);
    if (cfg == (cJSON *)-1) { cfg = NULL; goto fail; }
    if (cfg) {
        apply_config_names(t, cfg);
        t->spm_legacy = jbool(cfg, "legacy", 1);
        t->spm_add_prefix_space = jbool(cfg, "add_prefix_space", 1);
        /* extra added tokens (ids past the model's pieces, e.g. <pad>) */
        const cJSON *atd = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), *e;
        cJSON_ArrayForEach(e, atd) {
            const char *c = jstr(e, "content");
            char *endp;
            long id = strtol(e->string, &endp, 10);
            if (!c || *endp || id < 0) continue;
            int known = 0;
            for (int i = 0; i < t->n_added; i++) if (t->added[i].id == id) known = 1;
            if (known) continue;
            t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
            AddedTok *a = &t->added[t->n_added++];
            memset(a, 0, sizeof *a);
            a->id = (int32_t)id; a->content = xstrdup(c); a->len = strlen(c);
            a->special = (uint8_t)jbool(e, "special", 0);
            a->lstrip = (uint8_t)jbool(e, "lstrip", 0); a->rstrip = (uint8_t)jbool(e, "rstrip", 0);
            a->single_word = (uint8_t)jbool(e, "single_word", 0);
            a->normalized = 0;
            if (id >= t->n_ids || !t->tok[id]) tk_set_token(t, (int32_t)id, c, strlen(c), TA_ADDED | (a->special ? TA_SPECIAL : 0));
        }
    }
    /* specials matched in text: unk, bos, eos (+ config's added tokens) */
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!t->tok[id] || !(t->attr[id] & (TA_CONTROL | TA_UNKNOWN))) continue;
        int named = id == t->bos_id || id == t->eos_id || (t->attr[id] & TA_UNKNOWN);
        if (t->name_bos && !strcmp(t->tok[id], t->name_bos)) named = 1;
        if (t->name_eos && !strcmp(t->tok[id], t->name_eos)) named = 1;
        if (t->name_unk && !strcmp(t->tok[id], t->name_unk)) named = 1;
        if (t->name_pad && !strcmp(t->tok[id], t->name_pad)) named = 1;
        if (!named) continue;
        int known = 0;
        for (int i = 0; i < t->n_added; i++) if (t->added[i].id == id) known = 1;
        if (known) continue;
        t->added = xrealloc(t->added, sizeof(AddedTok) * (size_t)(t->n_added + 1));
        AddedTok *a = &t->added[t->n_added++];
        memset(a, 0, sizeof *a);
        a->id = id; a->content = xstrdup(t->tok[id]); a->len = t->tok_len[id]; a->special = 1;
    }
    for (int i = 0; i < t->n_added; i++) {
        AddedTok *a = &t->added[i];
        strmap_put(&t->added_by_str, a->content, a->len, a->id);
        if (a->special && a->id < t->n_ids) t->attr[a->id] |= TA_SPECIAL;
    }
    added_matcher_build(t, &t->match_raw, 0);
    added_matcher_build(t, &t->match_norm, 1);
    resolve_bos_eos(t);
    llama_post_from_config(t, cfg);  /* add_bos_token (default on) / add_eos_token */
    load_generation_eos(t, path);
    cJSON_Delete(cfg);
    return 0;
fail:
    err_name(path);
    free(data);
    cJSON_Delete(cfg);
    return -1;
}

