/* The draft vocabulary from measured costs (--draft-vocab auto).
 *
 * A reduced draft vocabulary (draft_set_vocab: the n most frequent target
 * tokens of the draft's training data) makes each drafted row cheaper, its
 * LM-head product and softmax over n columns instead of V, and loses the
 * nodes whose token falls outside it.  Which n pays depends on the device,
 * the arithmetic and how far the draft's guesses are accepted, so it is
 * measured:
 *   1. candidates: every power of two from max(64, V/64) below V, `seen`
 *      (the ids counted at least once: all of the counts' mass) in its
 *      place, and V; coverage c(n) is the counts' share held by the n most
 *      frequent ids.  The counts need not cover the text a run meets (a
 *      0.5B draft's counts of 42k answer tokens to general prompts saw 4.5k
 *      ids, and drafting from those cut a code benchmark's tau from 5.3 to
 *      1.9), so the whole vocabulary is explored and is a candidate;
 *   2. calibration, at the first cycle: draft steps of 1 and of
 *      VOCAB_AUTO_ROWS rows timed at each candidate (best of three each), so
 *      a step of r rows costs s1(n) + (r - 1) * slope(n); a one-time
 *      cost (8 candidates of a 0.5B draft: about 7 s), which the decoder
 *      counts as calibration, not drafting, as it does the cost curve's;
 *   3. exploration: the first VOCAB_AUTO_EXPLORE cycles draft from V and
 *      record, for each candidate, how many of their accepted paths
 *      keep their first d tokens inside its vocabulary (L_n >= d: a path
 *      drafted from n tokens ends at its first token outside them), the
 *      verification and drafting seconds and the draft's steps and rows;
 *   4. the choice: for each candidate, predicted tokens a cycle
 *          1 + sum_d P(L_n >= d)
 *      over predicted seconds a cycle
 *          verify + draft - steps * (s1(V) - s1(n))
 *                         - (rows - steps) * (slope(V) - slope(n));
 *      the largest ratio is kept for the rest of the decoder's run.
 *      Accepted tokens are the draft's likeliest guesses, which are frequent
 *      tokens more often than the counts' average: estimating L_n as L times
 *      the counts' share c(n) per token, independently along the path,
 *      overvalued the small vocabularies; and a step's LM head is read once
 *      whatever its rows, so pricing a step by its rows alone undervalued
 *      them (a cycle's steps have 1 to a few rows).
 * Greedy decoding stays lossless whatever is chosen (verification is the
 * target's). */
#ifndef C2T_VOCAB_AUTO_H
#define C2T_VOCAB_AUTO_H
#include "infer/speculative/draft.h"

#define VOCAB_AUTO_MAX 16       /* candidates */
#define VOCAB_AUTO_ROWS 8       /* rows of a calibration step */
#define VOCAB_AUTO_EXPLORE 64   /* cycles observed before choosing */
#define VOCAB_AUTO_DEPTH 64     /* accepted lengths tracked (longer ones count as this) */

typedef struct {
    int n_cand;
    int cand[VOCAB_AUTO_MAX];          /* vocabulary sizes, ascending; the last one is explored */
    double coverage[VOCAB_AUTO_MAX];   /* the counts' share each holds (reported) */
    int *rank;                         /* [V]: each id's place in the counts' order (vocab_auto_free) */
    int V;
    double step_s[VOCAB_AUTO_MAX];     /* a calibration step's seconds at each (VOCAB_AUTO_ROWS rows); 0 until calibrated */
    double step1_s[VOCAB_AUTO_MAX];    /* the same, one row */
    double rate[VOCAB_AUTO_MAX];       /* predicted tokens per second at each, once chosen */
    double calibration_s;
    int calibrated, chosen;            /* chosen: the index kept, -1 while exploring */
    /* exploration */
    long long cycles, rows_mark, rows, steps_mark, steps;
    double verify_s, draft_s;
    /* reach[i][d]: cycles whose first d accepted tokens lie in candidate i's vocabulary */
    long long reach[VOCAB_AUTO_MAX][VOCAB_AUTO_DEPTH + 1];
} VocabAuto;

/* Candidates, coverage and ranks from d's token counts; sets d to the
 * explored vocabulary.  -1 + err_set (no counts, a draft that cannot reduce
 * its vocabulary). */
int vocab_auto_init(VocabAuto *va, Draft *d);
void vocab_auto_free(VocabAuto *va);
/* Between two cycles, before the draft's catch-up (which scores the next
 * root in the vocabulary then set): calibrates on the first call, switches
 * to the chosen vocabulary once exploration is over.  token: any id the
 * draft can embed (the timed rows' tokens).  -1 + err_set. */
int vocab_auto_step(VocabAuto *va, Draft *d, int token);
/* One cycle done: `accepted` nodes with these target token ids, in path
 * order, its verification and drafting seconds, the draft's cumulative
 * rows_scored and steps_scored after it. */
void vocab_auto_observe(VocabAuto *va, const int *tokens, int accepted, double verify_s, double draft_s,
                        long long rows_scored, long long steps_scored);
/* The choice from what exploration recorded (fills rate[]): the index of
 * the candidate of highest predicted tokens per second. */
int vocab_auto_choose(VocabAuto *va);
#endif
