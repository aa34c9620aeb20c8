/* The command-line layer every command shares (the spec_<name>.c mains):
 * one number parser, and the options of a decoding session that spec-eval
 * and spec-collect both take (models, text, questions, lengths, device,
 * tree size).  Bad values are one line naming the option, then exit 1. */
#ifndef C2T_CLI_H
#define C2T_CLI_H
#include "infer/spec/session.h"
#include <getopt.h>
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
    CLI_QUESTIONS, CLI_MAX_QUESTIONS, CLI_MAX_TURNS, CLI_MAX_NEW, CLI_MAX_CTX, CLI_TOPK, CLI_DEPTH, CLI_TOPM, CLI_DRAFT_VOCAB, CLI_QUIET, CLI_OWN
};
#define CLI_SESSION_OPTIONS                                                                                  \
    {"target", 1, 0, CLI_TARGET}, {"draft", 1, 0, CLI_DRAFT}, {"draft-kind", 1, 0, CLI_DRAFT_KIND},           \
        {"tokenizer", 1, 0, CLI_TOKENIZER}, {"template", 1, 0, CLI_TEMPLATE}, {"system", 1, 0, CLI_SYSTEM},   \
        {"device", 1, 0, CLI_DEVICE}, {"questions", 1, 0, CLI_QUESTIONS},                                     \
        {"max-questions", 1, 0, CLI_MAX_QUESTIONS}, {"max-turns", 1, 0, CLI_MAX_TURNS},                     \
        {"max-new-tokens", 1, 0, CLI_MAX_NEW},                                                              \
        {"max-ctx", 1, 0, CLI_MAX_CTX}, {"topk", 1, 0, CLI_TOPK}, {"depth", 1, 0, CLI_DEPTH},                 \
        {"entropy-topm", 1, 0, CLI_TOPM}, {"draft-vocab", 1, 0, CLI_DRAFT_VOCAB}, {"quiet", 0, 0, CLI_QUIET}

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
/* The one line for an option getopt did not know, or one missing its value. */
void cli_unknown_option(const char *prog, char **argv);
/* An output file the command writes at its end (opt names it, "--json"):
 * checked before any work, so a long run is not lost to a path it cannot
 * write.  One line and exit 1 when path is a directory, an existing file not
 * writable, or its folder missing or not writable.  The file is not touched. */
void cli_check_writable(const char *prog, const char *opt, const char *path);
#endif
