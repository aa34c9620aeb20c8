/* What spec-eval and spec-collect share: loading the target, tokenizer,
 * chat template and draft from command-line settings, and decoding every
 * turn of a benchmark question the way the EAGLE evaluation does (the
 * model's answer to turn k goes into the prompt of turn k+1). */
#ifndef C2T_SESSION_H
#define C2T_SESSION_H
#include "infer/text/chat.h"
#include "infer/speculative/decode.h"
#include "infer/text/questions.h"
#include "infer/text/tokenizer.h"
#include "infer/session/observers.h"

#define C2T_VERSION "0.1.0"
#define DRAFT_VOCAB_AUTO (-1)          /* --draft-vocab auto (vocab_auto.h) */
#define DRAFT_VOCAB_AUTO_IF_ABLE (-2)  /* spec-eval's default (docs/policies.md "Defaults") */

typedef struct {
    const char *target_dir, *draft_dir, *draft_kind, *tokenizer_path, *template_name, *system;
    const char *device;    /* cpu | cuda | auto (NULL = auto); the draft runs where the target does */
    int draft_vocab;       /* --draft-vocab: 0 = the full vocabulary, DRAFT_VOCAB_AUTO: from costs,
                            * DRAFT_VOCAB_AUTO_IF_ABLE: auto on the CPU for a draft with token counts, else
                            * full (session_open resolves it to one of the two) */
    int draft_vocab_given; /* --draft-vocab was on the command line */
    int arith_given;       /* --cpu-fast-gemm or --kv-dtype was on the command line */
    /* the arithmetic default of a plain run (docs/policies.md "Defaults"):
     * for a BF16 target on the CPU, BF16 products: cpu_fast_gemm amx where
     * arith_tiles and the CPU has AMX-BF16, else on (llama.cpp's) where the
     * build has AVX512-BF16; for a BF16 or block-type target on the CPU the
     * KV cache in BF16 (kv_dtype bf16) on every build; session_open
     * decides, backend records it */
    int arith_auto;
    int arith_tiles;       /* the run's products take many tokens at once: it speculates (trees and
                            * chains to verify) or decodes several sequences at once (--batch > 1) */
    float draft_temperature;   /* --draft-temperature (Draft.temperature); 1 = as trained */
    int max_new;
    int max_ctx;           /* 0: sized from the prompts and max_new */
    VerifyMode verify;     /* --verify (decode.h): the whole tree, its accepted path, or the root */
    SampleParams sp;
    PolicyParams prm;
    BackendOptions backend;   /* given to backend_configure before the models load */
    const char *cost_cache;   /* calibration cache of auto tree sizes (cost.h); NULL: none */
} SessionConfig;

/* A SessionConfig with every default (what a command starts from). */
void session_config_default(SessionConfig *cfg);

typedef struct {
    SessionConfig cfg;
    LlamaModel *target;
    Tokenizer *tok;
    ChatTemplate tmpl;
    Draft *draft;
    int slots;
    VocabAuto vocab_auto;   /* with --draft-vocab auto: the draft's vocabulary choice, lent to its decoders */
    CostModel batch_curve;  /* batched auto sizes: the round's cost curve, measured by the first batched run */
} Session;

/* Loads everything; prints a notice on stderr when the chat template is
 * guessed.  -1 with a one-line error naming what failed. */
int session_open(Session *s, const SessionConfig *cfg, const char *prog);
void session_close(Session *s);
/* cfg's target, loaded in the arithmetic its options ask for, a plain
 * run's (cfg->arith_auto) choosing it from the weights' type; cfg->backend
 * becomes the options the backend runs with.  What session_open loads, and
 * what a command that decodes with the target alone loads, so that both
 * compute alike.  NULL with err_set. */
LlamaModel *session_load_target(SessionConfig *cfg);
/* The arithmetic the target's products run in and why, in words for one
 * stderr line ("bf16 products (AVX512-BF16 ...)", "f32: BF16 weights
 * widened, this build has no AVX512-BF16 ..."), the build's ISA named. */
void session_arith_text(const Session *s, char *buf, size_t size);
/* A decoder for a policy over this session's target and draft. */
Decoder *session_decoder(Session *s, Policy *p);
/* The same over another draft (one per sequence of a batch), and that
 * draft: a clone of the session's, over its weights. */
Decoder *session_decoder_with(Session *s, Policy *p, Draft *draft);
Draft *session_draft_new(Session *s);
/* The token ids of turn `turn` (0-based) of q, the model's answers to the
 * earlier turns in answers[]; -1 with err_set when it cannot be encoded or
 * would not fit the context with max_new tokens. */
int session_prompt(const Session *s, const Question *q, const char *const *answers, int turn, int32_t **ids,
                   size_t *n_ids);
/* The text of an answer as the next turn's prompt holds it (never NULL). */
char *session_answer(const Session *s, const int *out, int n);

/* Called once per decoded turn. */
typedef int (*TurnFn)(void *ctx, const Question *q, int turn, const int32_t *prompt, size_t n_prompt,
                      const int *out, int n_out, const DecodeStats *st);
/* Decodes all turns of q with dec; -1 on error. */
int session_question(Session *s, Decoder *dec, const Question *q, TurnFn fn, void *ctx);

/* "mt_bench" for .../mt_bench/question.jsonl, else the file's stem. */
void benchmark_name(const char *path, char *out, size_t len);
#endif
