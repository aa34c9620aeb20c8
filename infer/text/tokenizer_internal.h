/* The Tokenizer object and the steps that share it: not a public header.
 *
 * Files, each calling only files listed after it:
 *   tokenizer.c            the API: load (picks the format), encode (the
 *                          tokenizer.json pipeline), free, vocabulary queries
 *   tokenizer_decode.c     ids to text, whole and streaming
 *   tokenizer_load.c       tokenizer.json and tokenizer_config.json
 *   sentencepiece_model.c  tokenizer.model (protobuf) into the Tokenizer
 *   sentencepiece.c        SentencePiece encode and decode
 *   added.c                added tokens matched in text
 *   normalize.c            tokenizer.json normalizers
 *   pretokenize.c          tokenizer.json pre-tokenizers; the "▁" word cut
 *   bpe.c                  BPE merges by rank
 *   vocab.c                the token table
 * over the Tokenizer-free helpers: wordcache.c, pattern.c, bytelevel.c,
 * nfc.c, utf8.c, strmap.c, buf.c (tests/test_layers.sh checks that no two files
 * call each other). */
#ifndef C2T_TOKENIZER_INTERNAL_H
#define C2T_TOKENIZER_INTERNAL_H
#include "infer/text/buf.h"
#include "infer/text/pattern.h"
#include "infer/text/strmap.h"
#include "infer/text/tokenizer.h"
#include "infer/text/wordcache.h"
#include <stddef.h>
#include <stdint.h>

/* the largest token id a file may name (vocabularies are far smaller) */
#define TK_MAX_ID 50000000

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

/* ---- pipeline steps (tokenizer.json) ---- */
enum { NORM_PREPEND = 1, NORM_REPLACE, NORM_STRIP, NORM_NFC };
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
    int32_t gen_eos[8]; int n_gen_eos;   /* generation_config.json's eos_token_id(s) */
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

/* ---- tokenizer_load.c ---- */
/* Fill t (fresh from tokenizer.c, path set) from a tokenizer.json or a
 * SentencePiece tokenizer.model, and the tokenizer_config.json beside it.
 * 0, or -1 with an error naming path; t is then partly filled, and the
 * caller frees it. */
int tk_load_json(Tokenizer *t, const char *path);
int tk_load_model(Tokenizer *t, const char *path);

/* ---- sentencepiece_model.c ---- */
/* Reads a ModelProto (len bytes at data) into t: pieces, scores, types,
 * and the trainer and normalizer settings encoding needs.  Refuses what it
 * cannot encode exactly (model types other than BPE, precompiled
 * normalizers, treat_whitespace_as_suffix).  0, or -1 with err_set. */
int spm_read_model(Tokenizer *t, const unsigned char *data, size_t len, const char *path);

/* ---- sentencepiece.c ---- */
/* Appends the ids of text (valid UTF-8) to out. */
int spm_encode(const Tokenizer *t, const char *text, size_t len, int flags, IdVec *out);
/* Appends the text of ids (all in the vocabulary) to out. */
void spm_decode(const Tokenizer *t, const int32_t *ids, size_t n, int skip_special, Buf *out);
/* One non-byte piece, with sentencepiece's leading-space state. */
void spm_decode_piece(const Tokenizer *t, int32_t id, int skip_special, int *is_bos_ws, int *bos_ws_seen, Buf *out);

/* ---- added.c ---- */
/* Indexes t's added tokens that are (use_normalized) or are not normalized. */
void added_matcher_build(const Tokenizer *t, AddedMatcher *m, int use_normalized);
void added_matcher_free(AddedMatcher *m);
/* Splits s[0..n) at the added tokens the matcher knows (leftmost-longest,
 * lstrip/rstrip/single_word as the tokenizers library does) into pieces:
 * added tokens (id >= 0) and text (id -1; empty text is dropped).  The first
 * text piece starting at offset 0 inherits orig0.  split_special: special
 * tokens are not matched (they stay text). */
void added_split(const Tokenizer *t, const AddedMatcher *m, const char *s, size_t n,
                 int split_special, int orig0, PieceVec *out);

/* ---- normalize.c ---- */
/* s[0..n) through t's normalizers; the result (*out_n bytes) is s itself
 * or lives in the arena. */
const char *tk_normalize(const Tokenizer *t, const char *s, size_t n, size_t *out_n, Arena *ar);

/* ---- pretokenize.c ---- */
/* Scratch span lists a caller keeps across pieces (free their v). */
typedef struct { SpanVec a, b; } PreScratch;
/* Appends the pieces op makes of p (text, id -1) to out; new strings live
 * in the arena. */
void pretokenize(const PreOp *op, const Piece *p, PieceVec *out, Arena *ar, PreScratch *s);
/* Whether "▁" is in lookup and no token of lookup holds "▁" after a
 * character other than "▁" (i.e. outside its leading run of "▁"). */
int ws_split_safe(const Tokenizer *t, const StrMap *lookup);
/* End of the segment starting at `from`: the next "▁" that follows a
 * character other than "▁", or n. */
size_t ws_segment_end(const char *s, size_t n, size_t from);

/* ---- bpe.c ---- */
/* Scratch a caller keeps across words (zeroed to start; bpe_scratch_free). */
typedef struct BpeSym BpeSym;
typedef struct BpeMerge BpeMerge;
typedef struct {
    BpeSym *sym; size_t sym_cap;
    BpeMerge *heap; size_t heap_n, heap_cap;
    Buf tmp;
} BpeScratch;
void bpe_scratch_free(BpeScratch *s);
/* Appends the ids of one word (its characters, then merges by rank, as
 * the tokenizers library's Word::merge_all) to out.  0, or -1 with
 * err_set when a character needs an unk token the vocabulary lacks. */
int bpe_word(const Tokenizer *t, const char *w, size_t n, IdVec *out, BpeScratch *s);

/* ---- vocab.c ---- */
/* Sets token id's string (copied) and attributes, growing the table; a
 * string it replaces is kept until tokenizer_free (maps may point at it).
 * Returns id, or -1 with err_set when id is out of range. */
int32_t tk_set_token(Tokenizer *t, int32_t id, const char *s, size_t n, uint8_t attr);
/* The id of an added token or, failing that, of a vocabulary token; -1. */
int32_t tk_token_id_any(const Tokenizer *t, const char *s, size_t n);
#endif
