/* Internals shared by tokenizer.c (pipeline, API), tokenizer_load.c
 * (tokenizer.json), tokenizer_decode.c and sentencepiece.c (tokenizer.model
 * reader and score-based BPE).  Not a public header. */
#ifndef C2T_TOKENIZER_INTERNAL_H
#define C2T_TOKENIZER_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include "infer/text/tokenizer.h"

/* the largest token id a file may name (vocabularies are far smaller) */
#define TK_MAX_ID 50000000

/* ---- hashing ---- */
static inline uint64_t tk_hash(const void *data, size_t n) {
    const unsigned char *s = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        __builtin_memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8; n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)s[i] << (8 * i);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return h;
}

/* String -> int32 map, open addressing, linear probing.  Keys are not owned
 * (they point into the tokenizer's token strings). */
typedef struct {
    uint32_t cap, count;      /* cap: power of two */
    int32_t *val;             /* -1 = empty slot */
    uint32_t *hash;
    const char **key;
    uint32_t *klen;
} StrMap;
void strmap_init(StrMap *m, size_t expected);
void strmap_free(StrMap *m);
/* Inserts or overwrites. */
void strmap_put(StrMap *m, const char *k, size_t n, int32_t v);
int32_t strmap_get(const StrMap *m, const char *k, size_t n);  /* -1 */

/* (int32, int32) -> (rank, new id) for BPE merges. */
typedef struct {
    uint32_t cap, count;
    uint64_t *key;            /* UINT64_MAX = empty */
    int32_t *rank, *id;
} PairMap;
void pairmap_init(PairMap *m, size_t expected);
void pairmap_free(PairMap *m);
void pairmap_put(PairMap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
/* Returns 1 and fills rank/id when present. */
static inline int pairmap_get(const PairMap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    if (!m->cap) return 0;
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    h ^= h >> 31;
    uint32_t i = (uint32_t)h & (m->cap - 1);
    for (;;) {
        if (m->key[i] == k) { *rank = m->rank[i]; *id = m->id[i]; return 1; }
        if (m->key[i] == UINT64_MAX) return 0;
        i = (i + 1) & (m->cap - 1);
    }
}

/* ---- growable vectors and a bump arena ---- */
typedef struct { int32_t *v; size_t n, cap; } IdVec;
void idvec_push(IdVec *v, int32_t x);
void idvec_append(IdVec *v, const int32_t *x, size_t n);

typedef struct { char *v; size_t n, cap; } Buf;
void buf_put(Buf *b, const void *p, size_t n);
static inline void buf_putc(Buf *b, char c) { buf_put(b, &c, 1); }
void buf_put_cp(Buf *b, uint32_t cp);   /* code point as UTF-8 */

typedef struct ArenaBlock ArenaBlock;
typedef struct { ArenaBlock *head; } Arena;
char *arena_alloc(Arena *a, size_t n);
void arena_free(Arena *a);

/* ---- UTF-8 ---- */
/* Length of the valid UTF-8 character at s (n bytes available), 0 if the
 * bytes there are not a valid complete character. */
int utf8_valid_char(const unsigned char *s, size_t n);
/* Length of the longest prefix at s that could still become a valid
 * character (1..3) when more bytes follow, 0 if s[0..n) is already invalid. */
int utf8_incomplete_prefix(const unsigned char *s, size_t n);
uint32_t utf8_decode(const unsigned char *s, int len);
/* Appends bytes to out, replacing invalid sequences by U+FFFD: one per
 * maximal invalid subpart (Rust from_utf8_lossy) or one per byte. */
void utf8_lossy(Buf *out, const unsigned char *s, size_t n, int per_byte);
/* Byte offset of the first invalid byte, or -1 when s is valid UTF-8. */
long utf8_check(const unsigned char *s, size_t n);
int unicode_is_whitespace(uint32_t cp);   /* Unicode White_Space */

/* ---- added tokens (matched in text before the model) ---- */
typedef struct {
    int32_t id;
    char *content; size_t len;        /* as written in the text */
    char *ncontent; size_t nlen;      /* normalized content (normalized tokens) */
    uint8_t special, lstrip, rstrip, single_word, normalized;
} AddedTok;

/* Leftmost-longest matcher over a set of added tokens. */
typedef struct {
    int n;
    int *idx;                 /* added-token indexes sorted by (first byte, length desc) */
    int start[257];           /* bucket [start[b], start[b+1]) for first byte b */
    int use_normalized;       /* match ncontent instead of content */
} AddedMatcher;

/* ---- pipeline components (tokenizer.json) ---- */
enum { NORM_PREPEND = 1, NORM_REPLACE, NORM_STRIP };
typedef struct {
    int type;
    char *a; size_t alen;     /* prepend text / literal pattern */
    char *b; size_t blen;     /* replacement content */
    pcre2_code *re;           /* regex pattern (Replace with Regex) */
    int left, right;          /* Strip */
} NormOp;

enum { PRE_SPLIT = 1, PRE_BYTELEVEL, PRE_METASPACE };
enum { SPLIT_REMOVED = 0, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { PREPEND_ALWAYS = 0, PREPEND_FIRST, PREPEND_NEVER };
typedef struct {
    int type;
    pcre2_code *re;           /* Split regex (NULL: literal lit) */
    char *lit; size_t litlen;
    int behavior, invert;
    int add_prefix_space, use_regex;  /* ByteLevel */
    char repl[8]; int repl_len; int scheme, split;  /* Metaspace */
} PreOp;

enum { DEC_REPLACE = 1, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_BYTELEVEL, DEC_METASPACE };
typedef struct {
    int type;
    char *pat; size_t plen; pcre2_code *re;   /* Replace */
    char *content; size_t clen;
    uint32_t strip_ch; int start, stop;       /* Strip */
    char repl[8]; int repl_len; int scheme;   /* Metaspace */
} DecOp;

/* Token attributes. */
enum {
    TA_SPECIAL = 1,   /* special added token / control piece */
    TA_ADDED = 2,     /* added token (matched before the model) */
    TA_BYTE = 4,      /* <0xNN> byte piece */
    TA_CONTROL = 8,   /* SentencePiece CONTROL */
    TA_UNKNOWN = 16,  /* SentencePiece UNKNOWN */
    TA_UNUSED = 32,   /* SentencePiece UNUSED */
    TA_USER = 64,     /* SentencePiece USER_DEFINED */
};

/* Cache of whole-word BPE results (byte-level pre-tokenized words repeat). */
typedef struct {
    pthread_mutex_t lock;
    StrMap map;               /* word -> index into ent */
    Buf keys;                 /* word bytes (key storage; offsets) */
    IdVec ids;                /* concatenated id lists */
    uint32_t *ent_off, *ent_n, *key_off, *key_len;
    size_t n_ent, cap_ent;
} WordCache;

struct Tokenizer {
    int kind;
    char *path;
    int n_ids;                /* highest id + 1 */
    char **tok;               /* id -> token string (NUL-terminated; NULL = hole) */
    uint32_t *tok_len;
    uint8_t *attr;
    /* strings a later token of the same id replaced: the maps keep pointing
     * at them (an added token may rename a vocabulary id, and the old string
     * still encodes to it), so they live until tokenizer_free */
    char **retired;
    int n_retired;
    StrMap vocab;             /* model vocabulary: token -> id */
    StrMap added_by_str;      /* added token content -> id */

    /* BPE (HF) */
    PairMap merges;
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;
    char *cont_prefix, *eow_suffix;
    int32_t byte_id[256];     /* <0xNN> ids, -1 if absent */

    /* SentencePiece */
    float *score;
    StrMap spm_pieces;        /* NORMAL / USER_DEFINED / UNUSED pieces */
    StrMap spm_reserved;      /* CONTROL / UNKNOWN / BYTE pieces */
    int spm_add_dummy_prefix, spm_remove_extra_ws, spm_escape_ws, spm_ws_suffix;
    int spm_legacy;           /* tokenizer_config legacy (default true) */
    int spm_add_prefix_space; /* tokenizer_config add_prefix_space (default true) */
    char *spm_unk_surface;
    int *user_idx; int n_user;  /* USER_DEFINED pieces (longest-prefix match) */

    /* added tokens */
    AddedTok *added; int n_added;
    AddedMatcher match_raw, match_norm;

    /* pipeline */
    NormOp *norm; int n_norm;
    PreOp *pre; int n_pre;
    DecOp *dec; int n_dec; int has_decoder;
    int32_t *post_pre, *post_post; int n_post_pre, n_post_post;

    int32_t bos_id, eos_id;
    char *chat_template;
    int clean_up_spaces;
    char *name_bos, *name_eos, *name_unk, *name_pad;

    WordCache *cache;
    /* SentencePiece-style texts (no pre-tokenizer) may be cut before every
     * "▁" that follows another character: no token contains such a pair, so
     * no merge can cross the cut and the result is the same (see
     * ws_split_safe); the pieces then hit the word cache. */
    int ws_split;
};

/* sentencepiece.c */
int spm_load_model(Tokenizer *t, const unsigned char *data, size_t len, const char *path);
int spm_encode(const Tokenizer *t, const char *text, size_t len, int flags, IdVec *out);
void spm_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, Buf *out);
/* One non-byte piece, with sentencepiece's leading-space state. */
void spm_decode_piece(const Tokenizer *t, int32_t id, int skip_special, int *is_bos_ws, int *bos_ws_seen, Buf *out);

/* tokenizer.c helpers used by sentencepiece.c */
typedef struct { const char *p; uint32_t len; int32_t id; uint8_t orig0; } Piece;
typedef struct { Piece *v; size_t n, cap; } PieceVec;
void piecevec_push(PieceVec *v, const char *p, size_t len, int32_t id, int orig0);
void added_matcher_build(const Tokenizer *t, AddedMatcher *m, int use_normalized);
void added_matcher_free(AddedMatcher *m);
/* Splits s[0..n) at the added tokens the matcher knows (leftmost-longest,
 * lstrip/rstrip/single_word as the tokenizers library does) into pieces:
 * added tokens (id >= 0) and text (id -1; empty text is dropped).  The first
 * text piece starting at offset 0 inherits orig0. */
void added_split(const Tokenizer *t, const AddedMatcher *m, const char *s, size_t n,
                 int split_special, int orig0, PieceVec *out);
int32_t tk_set_token(Tokenizer *t, int32_t id, const char *s, size_t n, uint8_t attr);
/* Whether "▁" is in lookup and no token of lookup holds "▁" after a
 * character other than "▁" (i.e. outside its leading run of "▁"). */
int ws_split_safe(const Tokenizer *t, const StrMap *lookup);
/* End of the segment starting at `from`: the next "▁" that follows a
 * character other than "▁", or n. */
size_t ws_segment_end(const char *s, size_t n, size_t from);
/* Word cache (try-lock; returns 0 when busy). */
WordCache *word_cache_new(void);
int word_cache_lock(WordCache *c);
void word_cache_unlock(WordCache *c);
int word_cache_get(WordCache *c, const char *w, size_t n, IdVec *out);
void word_cache_put(WordCache *c, const char *w, size_t n, const int32_t *ids, size_t k);

/* ---- shared by tokenizer.c, tokenizer_load.c and tokenizer_decode.c ---- */
/* Regex matches and the text between them, as tokenizers' find_matches. */
typedef struct { size_t s, e; int m; } Span;
typedef struct { Span *v; size_t n, cap; } SpanVec;
void tk_find_spans(const pcre2_code *re, const char *lit, size_t litlen, const char *s, size_t n, SpanVec *out);
pcre2_code *tk_regex_compile(const char *pattern, const char *what);
int tk_utf8_maximal_prefix(const unsigned char *s, size_t n);
/* the byte-level (GPT-2) map: code point -> byte or -1, after tk_byte_level_init */
extern int16_t tk_bl_dec[324];
void tk_byte_level_init(void);
/* tokenizer_load.c: a tokenizer.json or a SentencePiece tokenizer.model */
Tokenizer *tk_load_json(const char *path);
Tokenizer *tk_load_model(const char *path);
int32_t tk_token_id_any(const Tokenizer *t, const char *s, size_t n);
/* the normalizer steps of tokenizer.json (tokenizer.c) */
const char *tk_normalize(const Tokenizer *t, const char *s, size_t n, size_t *out_n, Arena *ar);
#endif
