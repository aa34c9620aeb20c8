/* The command-line layer every command shares (the spec_<name>.c mains):
 * one number parser, and the options of a decoding session that spec-eval
 * and spec-collect both take (models, text, questions, lengths, device,
 * the policy's settings).  Bad values are one line naming the option, then
 * exit 1. */
#ifndef C2T_CLI_H
#define C2T_CLI_H
#include "infer/session/session.h"
#include <getopt.h>
#include <signal.h>
#include <stdint.h>

/* An integer in [lo, hi]. */
long cli_int(const char *prog, const char *opt, const char *v, long lo, long hi);
/* A finite number in [lo, hi] (pass -HUGE_VAL / HUGE_VAL for no bound). */
double cli_num(const char *prog, const char *opt, const char *v, double lo, double hi);
/* A non-negative 64-bit integer (seeds). */
uint64_t cli_u64(const char *prog, const char *opt, const char *v);

/* getopt_long codes of the session options; a command numbers its own from
 * CLI_OWN. */
enum {
    CLI_TARGET = 256, CLI_DRAFT, CLI_DRAFT_KIND, CLI_TOKENIZER, CLI_TEMPLATE, CLI_SYSTEM, CLI_DEVICE,
    CLI_QUESTIONS, CLI_MAX_QUESTIONS, CLI_MAX_TURNS, CLI_MAX_NEW, CLI_MAX_CTX, CLI_TOPM, CLI_DRAFT_VOCAB, CLI_QUIET,
    CLI_PARAM, CLI_CPU_F32_CACHE, CLI_CUDA_GRAPHS, CLI_CUDA_TILED_MAX, CLI_CUDA_FAST_GEMM, CLI_KV_DTYPE, CLI_CPU_FAST_GEMM, CLI_VERIFY, CLI_DRAFT_TEMP, CLI_POLICY_FLAG,
    CLI_OWN = CLI_POLICY_FLAG + 16
};
/* The backends' settings (BackendOptions), for every command that loads a
 * model; the help text is CLI_BACKEND_HELP. */
#define CLI_BACKEND_OPTIONS                                                                                   \
    {"cpu-f32-cache-mb", 1, 0, CLI_CPU_F32_CACHE}, {"cuda-graphs", 1, 0, CLI_CUDA_GRAPHS},                        \
        {"cuda-tiled-max", 1, 0, CLI_CUDA_TILED_MAX}, {"cuda-fast-gemm", 1, 0, CLI_CUDA_FAST_GEMM},     \
        {"kv-dtype", 1, 0, CLI_KV_DTYPE}, {"cpu-fast-gemm", 1, 0, CLI_CPU_FAST_GEMM}
#define CLI_BACKEND_HELP                                                                                      \
    "  --cpu-f32-cache-mb N   CPU: F32 copies of 16-bit matrices for many-token products, up to\n"          \
    "                         N MiB (default 4096; 0: none; the same results, slower)\n"                   \
    "  --cuda-graphs M        CUDA: off | on (replay each forward as a graph) | verbose (and say\n"        \
    "                         why one was not used) (default off)\n"                                      \
    "  --cuda-tiled-max N     CUDA: 5..64-token products under N multiply-adds use the tiled\n"           \
    "                         kernel, larger ones cuBLAS (default 16777216; 0: all cuBLAS)\n"              \
    "  --cuda-fast-gemm M     CUDA: off | on: activations rounded to 16 bits in cuBLAS products\n"        \
    "                         (faster; changes the arithmetic; recorded) (default off)\n"        \
    "  --kv-dtype T           CPU: the KV cache's type, f32 | bf16 (K and V rounded as written:\n"      \
    "                         half the bytes attention reads; changes the arithmetic; recorded)\n"     \
    "                         (default f32)\n"                                                       \
    "  --cpu-fast-gemm M      CPU: off | on | amx: BF16 weights times activations rounded to BF16\n"  \
    "                         (on: AVX512-BF16; amx: AMX tiles, another summation order; faster;\n"   \
    "                         changes the arithmetic; recorded) (default off)\n"
/* Applies one backend option; 1 when code was one, 0 otherwise. */
int cli_backend_option(const char *prog, int code, const char *arg, BackendOptions *o);
/* --classifier's code (a file the command reads) */
#define CLI_CLASSIFIER (CLI_POLICY_FLAG + 4)
/* A policy's settings by name (--topk 4 is --param topk=4): the policy
 * checks them against its own table, so a flag it has no use for is an
 * error naming the flag.  The help text is CLI_POLICY_HELP. */
#define CLI_POLICY_OPTIONS                                                                                    \
    {"topk", 1, 0, CLI_POLICY_FLAG}, {"depth", 1, 0, CLI_POLICY_FLAG + 1}, {"total", 1, 0, CLI_POLICY_FLAG + 2}, \
        {"draft-len", 1, 0, CLI_POLICY_FLAG + 3}, {"classifier", 1, 0, CLI_CLASSIFIER},                           \
        {"beta", 1, 0, CLI_POLICY_FLAG + 5}, {"early-stop", 1, 0, CLI_POLICY_FLAG + 6},                           \
        {"threshold", 1, 0, CLI_POLICY_FLAG + 7}, {"static-tree", 1, 0, CLI_POLICY_FLAG + 8},                     \
        {"param", 1, 0, CLI_PARAM}
#define CLI_SESSION_OPTIONS                                                                                  \
    {"target", 1, 0, CLI_TARGET}, {"draft", 1, 0, CLI_DRAFT}, {"draft-kind", 1, 0, CLI_DRAFT_KIND},           \
        {"tokenizer", 1, 0, CLI_TOKENIZER}, {"template", 1, 0, CLI_TEMPLATE}, {"system", 1, 0, CLI_SYSTEM},   \
        {"device", 1, 0, CLI_DEVICE}, {"questions", 1, 0, CLI_QUESTIONS},                                     \
        {"max-questions", 1, 0, CLI_MAX_QUESTIONS}, {"max-turns", 1, 0, CLI_MAX_TURNS},                     \
        {"max-new-tokens", 1, 0, CLI_MAX_NEW},                                                              \
        {"max-ctx", 1, 0, CLI_MAX_CTX}, {"entropy-topm", 1, 0, CLI_TOPM},                                  \
        {"draft-vocab", 1, 0, CLI_DRAFT_VOCAB}, {"verify", 1, 0, CLI_VERIFY}, {"quiet", 0, 0, CLI_QUIET},          \
        {"draft-temperature", 1, 0, CLI_DRAFT_TEMP},                                                         \
        CLI_POLICY_OPTIONS, CLI_BACKEND_OPTIONS

/* The help of the session options, one copy for every command that takes
 * them; its two %s are draft_kind_help() and CHAT_TEMPLATE_NAMES. */
#define CLI_MODELS_HELP                                                                                    \
    "  --target DIR           target checkpoint (config.json + safetensors)\n"                            \
    "  --draft DIR            draft: an EAGLE-1/2 head, an EAGLE-3 head or a small LM\n"                \
    "                         (config.json + model.safetensors or pytorch_model.bin)\n"                  \
    "  --draft-kind K         %s\n"                                                                     \
    "  --draft-vocab N|full|auto\n"                                                                    \
    "                         the draft scores only the N most frequent target tokens of its\n"         \
    "                         training data (a reduced vocabulary as EAGLE-3's; needs the draft's\n"     \
    "                         token_counts.safetensors; an EAGLE-3 head brings its own);\n"              \
    "                         lossless, verification is unchanged; auto (spec-eval, one sequence):\n"    \
    "                         the size of most expected tokens per second from step times and the\n"    \
    "                         first cycles' acceptance (docs/policies.md) (default full; spec-eval:\n"    \
    "                         auto for a plain run, see its --help)\n"                                   \
    "  --draft-temperature T  the draft's logits divided by T before p, P and H (calibration\n"        \
    "                         experiments; lossless; recorded) (default 1)\n"                          \
    "  --tokenizer PATH       tokenizer.json / tokenizer.model / dir (default: --target)\n"              \
    "  --template NAME        chat template: %s\n"                                                      \
    "                         (default: guessed, with a notice; plain text when the checkpoint\n"        \
    "                         has none we recognise)\n"                                                   \
    "  --system TEXT          system prompt (default: the template's; \"\" for none)\n"                  \
    "  --device D             cpu | cuda | auto (default auto: cuda when a GPU is visible)\n"
#define CLI_QUESTIONS_HELP                                                                                 \
    "  --questions FILE       question.jsonl (EAGLE/Spec-Bench format); repeatable, one benchmark each\n" \
    "  --max-questions N      first N questions of each file\n"                                          \
    "  --max-turns N          first N turns of each question (1: first turns only)\n"                    \
    "  --max-new-tokens N     per turn (default 256)\n"                                                  \
    "  --max-ctx N            KV cache slots for prompt + answer (default 4096)\n"                       \
    "  --entropy-topm M       entropy over the top M draft probabilities, 0 = exact (default 1000)\n"     \
    "  --verify tree|walk     tree: each tree in one target forward; walk: only the accepted path,\n"   \
    "                         a token at a time: the same tokens, tau and gamma for less work, no\n"   \
    "                         speed figures (acceptance studies; greedy only) (default tree)\n"
#define CLI_QUIET_HELP                                                                                     \
    "  --quiet                no progress line (on a terminal it is redrawn in place; into a\n"          \
    "                         file, a line every 10 s)\n"

#define CLI_MAX_FILES 64
typedef struct {
    const char *files[CLI_MAX_FILES];   /* --questions, in order */
    int n;
    int max_questions;                   /* --max-questions, 0 = all */
    int max_turns;                       /* --max-turns, 0 = all */
} CliQuestions;

/* The i-th --questions file with --max-questions and --max-turns applied;
 * a bad file is one line and exit 1. */
QuestionSet *cli_questions_load(const char *prog, const CliQuestions *q, int i);

/* Applies one session option (getopt code and its argument); returns 1 when
 * code was one of them, 0 otherwise. */
int cli_session_option(const char *prog, int code, const char *arg, SessionConfig *cfg, CliQuestions *q);
/* On SIGINT or SIGTERM: one line on stderr, "PROG: interrupted by SIGINT:
 * " and what is safe and how to go on — kept when file (may be NULL)
 * exists at that moment, none otherwise — then exit 128 + the signal
 * (130, 143).  The strings are copied. */
void cli_on_interrupt(const char *prog, const char *file, const char *kept, const char *none);
/* For a command that can stop cleanly and keep its work (spec-eval): the
 * first SIGINT or SIGTERM only sets *flag to the signal's number (an
 * async-signal-safe store; the command checks it where it can stop, writes
 * what it has and says so); a second one ends the process at once, as
 * cli_on_interrupt does, with "PROG: interrupted by SIGINT: " and none.
 * Restarts interrupted system calls (SA_RESTART).  flag must outlive the
 * handler; none is copied. */
void cli_on_interrupt_stop(const char *prog, volatile sig_atomic_t *flag, const char *none);
/* "SIGINT", "SIGTERM", else "a signal". */
const char *cli_signal_name(int sig);
/* The one line, worded alike by every command, for an option the command
 * does not know or one missing its value (arg: as given; after getopt,
 * argv[optind - 1]); exit 1. */
void cli_unknown_option(const char *prog, const char *arg);
/* An output file the command writes at its end (opt names it, "--json"):
 * checked before any work, so a long run is not lost to a path it cannot
 * write.  One line and exit 1 when path is a directory, an existing file not
 * writable, or its folder missing or not writable.  The file is not touched. */
void cli_check_writable(const char *prog, const char *opt, const char *path);
/* An output folder the command creates or writes files into (opt names it:
 * "--out", "OUTDIR"): one line and exit 1 when it exists and is not a
 * folder or not writable, or is missing and its parent is (the commands
 * create one level).  Nothing is created. */
void cli_check_folder(const char *prog, const char *opt, const char *dir);

/* A file a command reads (or writes), and the option that named it
 * ("--questions"; a positional argument by what it is, "trace"). */
typedef struct {
    const char *opt, *path;
} CliFile;
/* 1 when paths a and b name one file: the same device and inode when both
 * exist (so ./x, symlinks and hard links are caught), else, when neither
 * exists, the same folder (its real path) and name; 0 otherwise. */
int cli_same_file(const char *a, const char *b);
/* No command writes over one of its own inputs: one line naming both and
 * exit 1 when output out (of option opt; NULL: nothing to check) is one of
 * the files in[0..n) (cli_same_file; entries with a NULL path are skipped).
 * Called before anything is read or written, so the slip costs nothing. */
void cli_check_not_input(const char *prog, const char *opt, const char *out, const CliFile *in, int n);
/* Nor writes two of its outputs to one file (the later would replace the
 * earlier): one line naming both and exit 1 when two of out[0..n) are one
 * file (NULL paths skipped). */
void cli_check_distinct_outputs(const char *prog, const CliFile *out, int n);
#endif
