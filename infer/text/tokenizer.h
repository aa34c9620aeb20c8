/* infer/text/: text in and out (tokenizers, chat templates, question
 * files), over kernels/base only. */
/* Tokenizers, token for token what Hugging Face produces.
 *
 * Formats:
 *   tokenizer.json  (Hugging Face `tokenizers`), model type BPE, in both
 *                   styles of the LLaMA family: SentencePiece-style
 *                   (Prepend/Replace normalizers or Metaspace, byte fallback,
 *                   Replace/ByteFallback/Fuse/Strip decoder) and byte-level
 *                   (Split with the LLaMA-3 or Qwen2 regex + ByteLevel, GPT-2
 *                   byte map; Qwen2's NFC normalizer).
 *   tokenizer.model (SentencePiece ModelProto, model_type BPE), read directly;
 *                   merges by piece score as the sentencepiece library does.
 * Anything else (Unigram, WordPiece, WordLevel, unsupported normalizers or
 * pre-tokenizers) is refused at load time with a one-line error.
 *
 * A tokenizer_config.json next to the file is read when present: bos/eos
 * token names, add_bos_token/add_eos_token (which decide bos/eos for LLaMA
 * tokenizer classes, as transformers' LlamaTokenizer(Fast) does), legacy,
 * chat_template and added_tokens_decoder (for tokenizer.model checkpoints);
 * and a generation_config.json's eos_token_id (the ids generation stops at).
 *
 * Errors: functions return NULL / -1 and set a one-line error (err_get()).
 * Thread safety: a loaded Tokenizer may be used from several threads at once
 * (the word cache is taken with a try-lock; contention just skips it). */
#ifndef C2T_TOKENIZER_H
#define C2T_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;

typedef enum {
    TOK_KIND_HF_BPE = 1,   /* tokenizer.json, model BPE */
    TOK_KIND_SPM_BPE = 2,  /* tokenizer.model, SentencePiece BPE */
} TokenizerKind;

/* PATH: a checkpoint directory (tokenizer.json preferred, tokenizer.model as
 * fallback), a tokenizer.json or a tokenizer.model file. */
Tokenizer *tokenizer_load(const char *path);
void tokenizer_free(Tokenizer *tok);

/* Encoding flags. */
enum {
    TOK_ADD_SPECIAL = 1,      /* bos/eos as the post-processor / config says
                                 (HF add_special_tokens=True) */
    TOK_SPLIT_SPECIAL = 2,    /* special tokens written in the text are plain
                                 text (HF split_special_tokens=True); added
                                 tokens that are not special still match */
};

/* Encodes UTF-8 text (len bytes; invalid UTF-8 is an error).  On success
 * *ids is a fresh malloc'ed array (free() it) of *n ids.  Returns 0 / -1. */
int tokenizer_encode_ex(const Tokenizer *tok, const char *text, size_t len, int flags,
                        int32_t **ids, size_t *n);
/* NUL-terminated text; add_special as HF's add_special_tokens. */
int tokenizer_encode(const Tokenizer *tok, const char *text, int add_special,
                     int32_t **ids, size_t *n);

/* Decodes ids to a fresh NUL-terminated UTF-8 string (free() it), as the
 * `tokenizers` library's decode(ids, skip_special_tokens) does (tokenizer.json)
 * or as sentencepiece's DecodeIds does (tokenizer.model; with skip_special=0
 * control pieces are shown as their text).  An id outside the vocabulary is
 * an error (NULL). */
char *tokenizer_decode(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special);
/* The same, with the byte length in *len (text may hold NUL bytes, e.g. from
 * a <0x00> byte token; len may be NULL). */
char *tokenizer_decode_len(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, size_t *len);

/* Incremental decoding for streamed output: push ids one at a time and get the
 * text they complete.  Text never ends inside a UTF-8 character: bytes of an
 * unfinished character are held back until the ids that complete it arrive.
 * The concatenation of all pieces (plus tokenizer_stream_flush) equals
 * tokenizer_decode of all ids whenever the decoded bytes are valid UTF-8.
 * (For invalid byte sequences the stream emits complete characters as soon
 * as they arrive and U+FFFD per invalid sequence, while the library's
 * ByteFallback decoder turns a whole run of byte tokens into U+FFFDs when any
 * part of it is invalid.) */
typedef struct TokenizerStream TokenizerStream;
TokenizerStream *tokenizer_stream_new(const Tokenizer *tok, int skip_special);
/* Returns the newly completed text (owned by the stream, valid until the next
 * call; may be ""), or NULL for an id outside the vocabulary. */
const char *tokenizer_stream_push(TokenizerStream *s, int32_t id);
/* Held-back bytes of an unfinished character, as U+FFFD; resets the hold. */
const char *tokenizer_stream_flush(TokenizerStream *s);
/* Byte length of the text the last push/flush returned (it may hold NUL). */
size_t tokenizer_stream_len(const TokenizerStream *s);
void tokenizer_stream_free(TokenizerStream *s);

/* Vocabulary. */
TokenizerKind tokenizer_kind(const Tokenizer *tok);
const char *tokenizer_path(const Tokenizer *tok);       /* the file loaded */
int tokenizer_vocab_size(const Tokenizer *tok);          /* highest id + 1 */
int32_t tokenizer_bos_id(const Tokenizer *tok);          /* -1 when none */
int32_t tokenizer_eos_id(const Tokenizer *tok);          /* -1 when none */
int32_t tokenizer_token_to_id(const Tokenizer *tok, const char *token); /* -1 */
/* The token's string as stored (▁ / byte-level chars, not decoded); NULL for
 * an id with no token. */
const char *tokenizer_id_to_token(const Tokenizer *tok, int32_t id);
int tokenizer_is_special(const Tokenizer *tok, int32_t id);
/* Whether TOK_ADD_SPECIAL adds a bos (resp. eos). */
int tokenizer_adds_bos(const Tokenizer *tok);
int tokenizer_adds_eos(const Tokenizer *tok);
/* tokenizer_config.json's clean_up_tokenization_spaces (default off, as in
 * transformers 4.46): what transformers' decode() does on top of the
 * tokenizers library; chat_answer_text applies it. */
int tokenizer_clean_up_spaces(const Tokenizer *tok);
/* tokenizer_config.json's chat_template (the default one), or NULL. */
const char *tokenizer_chat_template(const Tokenizer *tok);
/* generation_config.json's eos_token_id (one id or a list) beside the
 * tokenizer: the ids transformers' generate() stops at.  Sets *ids and
 * returns how many (0 when the file is absent or names none). */
int tokenizer_generation_eos(const Tokenizer *tok, const int32_t **ids);
/* The names of bos/eos/unk/pad in tokenizer_config.json (what transformers'
 * special_tokens_map holds); NULL when absent.  which: "bos","eos","unk","pad". */
const char *tokenizer_special_name(const Tokenizer *tok, const char *which);

/* A SentencePiece BPE model to write as tokenizer.model (what spec-convert
 * makes of a GGUF "llama" vocabulary): each piece's text, score and type
 * (SentencePiece's numbers, which GGUF's token types share: 1 normal, 2
 * unknown, 3 control, 4 user-defined, 5 unused, 6 byte), the ids of unk,
 * bos and eos, byte fallback, and whether a dummy space starts the text;
 * whitespace escaped to U+2581, nothing else normalised (the "identity"
 * rules LLaMA-2's model has). */
typedef struct { const char *text; size_t len; float score; int type; } SpmPiece;
typedef struct {
    int unk_id, bos_id, eos_id;
    int byte_fallback, add_dummy_prefix;
} SpmSpec;
/* Writes the model (a protobuf ModelProto, the fields tokenizer_load reads)
 * to path atomically; 0, or -1 with err_set. */
int tokenizer_write_spm(const char *path, const SpmPiece *pieces, size_t n, const SpmSpec *spec);

#endif
