/* The draft vocabulary from measured costs (--draft-vocab auto).
 *
 * A reduced draft vocabulary (draft_set_vocab: the n most frequent target
 * tokens of the draft's training data) makes each drafted row cheaper, its
 * LM-head product and softmax over n columns instead of V, and loses the
 * nodes whose token falls outside it.  Which n pays depends on the device,
 * the arithmetic and how far the draft's guesses are accepted, so it is
 * measured:
 *   1. candidates: every power of two from max(64, V/64) below `seen` (the
 *      ids counted at least once), and `seen` itself (all of the counts'
 *      mass, V when every id was seen); coverage c(n) is the counts' share
 *      held by the n most frequent ids;
 *   2. calibration, at the first cycle: a draft step of VOCAB_AUTO_ROWS rows
 *      timed at each candidate (best of three);
 *   3. exploration: the first VOCAB_AUTO_EXPLORE cycles draft from `seen`
 *      and record how many nodes each accepts (L), the verification and
 *      drafting seconds and the rows the draft scored;
 *   4. the choice: for each candidate, predicted tokens a cycle
 *          1 + sum_d P(L >= d) * (c(n) / c(seen))^d
 *      (each accepted token must be in the vocabulary; its chance taken as
 *      the counts' share, independently along the path) over predicted
 *      seconds a cycle
 *          verify + draft - rows * (step(seen) - step(n)) / VOCAB_AUTO_ROWS;
 *      the largest ratio is kept for the rest of the decoder's run.
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
    double coverage[VOCAB_AUTO_MAX];   /* the counts' share each holds */
    double step_s[VOCAB_AUTO_MAX];     /* a calibration step's seconds at each; 0 until calibrated */
    double rate[VOCAB_AUTO_MAX];       /* predicted tokens per second at each, once chosen */
    double calibration_s;
    int calibrated, chosen;            /* chosen: the index kept, -1 while exploring */
    int skip;                          /* the next observed cycle carries the calibration's time */
    /* exploration */
    long long cycles, rows_mark, rows;
    double verify_s, draft_s;
    long long reach[VOCAB_AUTO_DEPTH + 1];   /* reach[d]: cycles that accepted at least d nodes */
} VocabAuto;

/* Candidates and coverage from d's token counts; sets d to the explored
 * vocabulary.  -1 + err_set (no counts, a draft that cannot reduce its
 * vocabulary). */
int vocab_auto_init(VocabAuto *va, Draft *d);
/* Between two cycles, before the draft's catch-up (which scores the next
 * root in the vocabulary then set): calibrates on the first call, switches
 * to the chosen vocabulary once exploration is over.  token: any id the
 * draft can embed (the timed rows' tokens).  -1 + err_set. */
int vocab_auto_step(VocabAuto *va, Draft *d, int token);
/* One cycle done: `accepted` nodes, its verification and drafting seconds,
 * the draft's cumulative rows_scored after it. */
void vocab_auto_observe(VocabAuto *va, int accepted, double verify_s, double draft_s, long long rows_scored);
/* The choice from what exploration recorded (fills rate[]): the index of
 * the candidate of highest predicted tokens per second. */
int vocab_auto_choose(VocabAuto *va);
#endif
