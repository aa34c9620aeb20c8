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
    CLI_PARAM, CLI_CPU_F32_CACHE, CLI_CUDA_GRAPHS, CLI_CUDA_TILED_MAX, CLI_CUDA_FAST_GEMM, CLI_KV_DTYPE, CLI_CPU_FAST_GEMM, CLI_VERIFY, CLI_DRAFT_TEMP,
    CLI_POLICY, CLI_TEMPERATURE, CLI_TOP_K, CLI_TOP_P, CLI_SEED, CLI_COST_CACHE, CLI_POLICY_FLAG,
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

/* The options of a command that decodes with a policy of the user's
 * choice (spec-eval, spec-generate; spec-collect's policy is fixed): the
 * policy, sampling and the cost cache of auto sizes, applied by
 * cli_session_option.  Help: CLI_POLICY_HELP (its %s is policy_names())
 * and CLI_SAMPLING_HELP. */
#define CLI_DECODE_OPTIONS                                                                                   \
    {"policy", 1, 0, CLI_POLICY}, {"temperature", 1, 0, CLI_TEMPERATURE}, {"top-k", 1, 0, CLI_TOP_K},         \
        {"top-p", 1, 0, CLI_TOP_P}, {"seed", 1, 0, CLI_SEED}, {"cost-cache", 1, 0, CLI_COST_CACHE}
#define CLI_POLICY_HELP                                                                                      \
    "policy (a setting the policy does not have is an error)\n"                                             \
    "  --policy NAME          %s (default eagle2)\n"                                                         \
    "  --topk K               eagle2, c2t: children per expanded node (default 10)\n"                        \
    "  --depth D              eagle2: expansion steps after the root's, tree depth D+1 (default 6);\n"      \
    "                         c2t: d_max, the maximum node depth (default 8 = EAGLE-2's depth + 2)\n"      \
    "  --total N|all|auto     eagle2: nodes kept by rerank, root excluded; c2t: a cap, the nodes of\n"     \
    "                         highest path confidence; auto: each cycle the prefix that maximises\n"       \
    "                         expected tokens per second under measured costs, or no draft at all\n"       \
    "                         where plain cycles are faster (docs/policies.md); batched, those of\n"       \
    "                         the round's trees together (default: auto for a plain run, below;\n"        \
    "                         else eagle2 60, c2t all)\n"                                                   \
    "  --draft-len K|auto     chain: draft tokens per cycle (default: auto for a plain run; else 5)\n"     \
    "  --cost-cache FILE|none where auto sizes keep their cost curves (calibrated; a run of 64+\n"        \
    "                         cycles writes back the curve it corrected), keyed by build,\n"              \
    "                         model, device, threads and arithmetic (default\n"                           \
    "                         $XDG_CACHE_HOME/c2t/cost.json or ~/.cache/c2t/cost.json; none: calibrate\n"  \
    "                         every run)\n"                                                                \
    "  --classifier FILE      c2t, chain --early-stop c2t (required there): weights spec-train\n"         \
    "                         wrote from this target's traces\n"                                           \
    "  --beta B               c2t, chain --early-stop c2t: confidence threshold (default 0.5)\n"          \
    "  --early-stop S         chain: none | c2t | dymax | dyjoint (default none)\n"                        \
    "  --threshold X          chain --early-stop dymax|dyjoint: threshold (default 0.5)\n"                 \
    "  --static-tree PATHS    static: \"0;1;0,0;...\" sibling-rank paths, or eagle1 (default)\n"         \
    "  --param KEY=VALUE      any setting a policy owns (repeatable), e.g. sage_dmax=8,\n"                 \
    "                         wetap_budget=64, topk=4; see docs for each policy's keys\n"                  \
    "  a plain run            on the CPU with --temperature 0 and --verify tree:\n"                        \
    "                         a size not given (--total, --draft-len without --early-stop,\n"              \
    "                         sage_nmax) is auto (batched: the round's trees sized together),\n"          \
    "                         --draft-vocab auto with --batch 1 where the draft has token counts,\n"      \
    "                         and a BF16 target gets llama.cpp's arithmetic\n"                            \
    "                         (--cpu-fast-gemm on --kv-dtype bf16) where this build has AVX512-BF16,\n"   \
    "                         amx instead where the CPU has AMX-BF16 and the run speculates or is\n"      \
    "                         batched, --kv-dtype bf16 alone elsewhere; a target of GGUF block types\n"   \
    "                         gets --kv-dtype bf16 (an option given on the command line wins; the\n"    \
    "                         report's settings say which)\n"
#define CLI_SAMPLING_HELP                                                                                    \
    "  --temperature T        0 = greedy (default 0)\n"                                                    \
    "  --top-k K, --top-p P   sampling processors (default off)\n"                                         \
    "  --seed S               sampling seed (default 0)\n"

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
    "                         lossless, verification is unchanged; auto (one sequence):\n"    \
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

/* Applies one session option or CLI_DECODE_OPTIONS' (getopt code and its
 * argument); returns 1 when code was one of them, 0 otherwise. */
int cli_session_option(const char *prog, int code, const char *arg, SessionConfig *cfg, CliQuestions *q);

/* A plain run (docs/policies.md "Defaults"): greedy, each tree in one
 * forward; its sizes, draft vocabulary and arithmetic are chosen from
 * measured costs unless the command line gives them. */
int cli_plain_run(const SessionConfig *cfg);
/* Before session_open: a plain run's arithmetic (cfg->arith_auto, and
 * cfg->arith_tiles where it speculates or decodes several sequences,
 * slots of them), where the command line did not give it. */
void cli_plain_arith(SessionConfig *cfg, int slots);
/* After session_open, on the CPU backend: a plain run's policy size the
 * command did not give is auto (eagle2's and c2t's total, chain's
 * draft_len without early_stop, sage's sage_nmax); the fixed defaults stay
 * on a GPU, where their programs read nothing while drafting.  Returns the
 * policy to use (policy, or a new one in its place). */
Policy *cli_default_sizes(const char *prog, Policy *policy, SessionConfig *cfg, const Session *s);
/* The policy's classifier, if it has one, must have been trained for the
 * session's target and draft: one line and exit 1, or with force a notice. */
void cli_check_classifier(const char *prog, const Policy *policy, const Session *s, int force);
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
