/* Benchmark question files: question.jsonl as EAGLE and Spec-Bench ship them.
 * One JSON object per line:
 *   {"question_id": 81 | "id-string", "category": "writing",
 *    "turns": ["first user turn", "second user turn", ...],
 *    "reference": any JSON}                         (reference optional)
 * Blank lines are skipped.  A malformed line is an error naming file:line;
 * a file without questions is an error. */
#ifndef C2T_QUESTIONS_H
#define C2T_QUESTIONS_H
#include <stddef.h>

typedef struct {
    char *id;            /* question_id as text (an integer in decimal) */
    int id_is_int;
    long long id_int;    /* when id_is_int */
    char *category;      /* "" when absent */
    char **turns;        /* n_turns >= 1 user turns */
    int n_turns;
    char *reference;     /* the "reference" value as compact JSON text, kept as it
                            is (benchmarks use strings, lists and lists of lists;
                            decoding never reads it), or NULL when absent */
    int line;            /* 1-based line in the file */
} Question;

typedef struct {
    char *path;
    Question *q;
    int n;
} QuestionSet;

QuestionSet *questions_load(const char *path);
void questions_free(QuestionSet *qs);
/* Keeps the first n questions (--max-questions); n <= 0 keeps all. */
void questions_keep_first(QuestionSet *qs, int n);
/* Keeps each question's first n turns (--max-turns); n <= 0 keeps all. */
void questions_keep_turns(QuestionSet *qs, int n);

/* Parses one line (len bytes, need not be NUL-terminated).  file/line only
 * name the place in errors ("file:line: problem").  Returns 0 / -1. */
int question_parse(const char *text, size_t len, const char *file, int line, Question *q);
void question_clear(Question *q);

/* Total number of turns over all questions. */
int questions_total_turns(const QuestionSet *qs);

#endif
