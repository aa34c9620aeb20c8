/* Evaluating a policy on benchmark question files (spec-eval): every turn
 * decoded with the policy and, unless turned off, with ar on the same
 * prompt, in alternating order (speedup.h) — the speedup's baseline and the
 * lossless check; totals per benchmark and over all; the JSON report, the
 * table and the CSV row. */
#ifndef C2T_EVAL_H
#define C2T_EVAL_H
#include "infer/session/batch.h"
#include "infer/session/session.h"
#include "infer/speedup.h"
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>

#define EVAL_MAX_BENCH 64
/* A run whose measured costs kept its trees under EVAL_TINY_TREE nodes on
 * average, or drafting off in EVAL_MOSTLY_OFF of its cycles, says why on
 * stderr (the arithmetic and what verification costs against one token). */
#define EVAL_TINY_TREE 4.0
#define EVAL_MOSTLY_OFF 0.25

typedef struct {
    int baseline;         /* decode every turn with ar too */
    int check_lossless;   /* and compare their tokens (greedy only) */
    BatchOptions batch;   /* slots 1: one turn at a time, ar beside it; more: the policy over
                             every question batched, and ar batched the same way */
    int repeats;          /* A/B pairs per question (batched: per run); 0 counts as 1 */
    /* Optional: non-zero stops the run (a signal handler sets it): one
     * sequence at a time, at the end of the cycle in progress (the turn it
     * cuts short is not counted) or between turns; batched, at the next
     * round of the slots.  eval_run then returns the turns finished so far,
     * EvalResult.partial set. */
    const volatile sig_atomic_t *stop;
} EvalOptions;

/* A policy's figures over some turns and, with the baseline, ar's.  Speeds
 * are decode speeds: prefill is left out and reported apart.  In a batched
 * run the turns overlap: only the whole run has a time, its wall time
 * (prefills included), and the benchmarks' decode_s is 0, their speed
 * unknown. */
typedef struct {
    DecodeStats run;
    double decode_s;      /* the policy's decode seconds */
    int64_t ar_tokens, ar_one_thread_cycles;
    double ar_decode_s, ar_prefill_s;
    Speedup speedup;      /* A/B over the pairs of these turns (n 0: none) */
} EvalTotals;

typedef struct {
    int n_bench;
    char names[EVAL_MAX_BENCH][64];
    EvalTotals per[EVAL_MAX_BENCH], all;
    int64_t turns;           /* turns decoded and counted */
    int64_t turns_total;     /* turns of every question */
    int partial;             /* stopped (EvalOptions.stop) before every turn was done */
    int lossless_failures;   /* turns whose tokens differ from ar's */
    cJSON *report;           /* settings, models, every question's turns, totals */
} EvalResult;

/* Decodes every turn of sets[i] (read from files[i], one benchmark each)
 * with policy, showing progress.  -1 with err_set on a decoding or backend
 * failure; turns that differ from ar are counted, not errors.  Stopped by
 * o->stop, 0 with the finished turns' figures (r->partial; the report's
 * "partial", "turns_done" and "turns_total" say so, questions without a
 * finished turn left out, the benchmarks not begun too). */
int eval_run(Session *s, Policy *policy, QuestionSet *const *sets, const char *const *files, int n,
             const EvalOptions *o, EvalResult *r);
void eval_result_free(EvalResult *r);

/* decode tokens per second; the A/B speedup's median (0 without one) */
double eval_speed(const EvalTotals *t);
double eval_speedup(const EvalTotals *t);

/* The per-benchmark table (gamma in thousands, tau, tok/s, speedup). */
void eval_print_table(const EvalResult *r, const Policy *policy, const SessionConfig *cfg, FILE *f);

/* The --csv row's header; a file that exists must start with it. */
#define EVAL_CSV_HEADER "policy,param,value,tau,gamma,v,speedup,speedup_lo,speedup_hi"
/* -1 with err_set when path exists with another header. */
int eval_csv_check(const char *path);
/* Appends the row of the total (header first when the file is new); label
 * "KEY=VALUE" or NULL fills the param,value columns; a partial run's value
 * ends in ";partial=DONE/TOTAL" (turns), so that it is never taken for a
 * whole run's.  -1 with err_set. */
int eval_csv_append(const char *path, const char *label, const Policy *policy, const EvalResult *r);
/* Writes r->report.  -1 with err_set. */
int eval_json_write(const char *path, const EvalResult *r);
#endif
