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
 *   3. exploration: cycles drafted from V record, for each candidate n,
 *      how many of their accepted tokens lie outside its n ids, and
 *      whether the bonus token does; the verification and drafting seconds
 *      and the draft's steps and rows;
 *   4. the choice, after VOCAB_AUTO_EXPLORE such cycles: for each
 *      candidate, predicted tokens a cycle over predicted seconds a cycle.
 *      Tokens: an accepted token outside n ids ends a cycle drafted from n
 *      there (the target's own token is the bonus), and the next cycle
 *      drafts on from it; the path's later tokens are not lost, a cycle is
 *      added.  So the explored cycles' A accepted and C bonus tokens take
 *      C + O_n cycles at n (O_n: accepted tokens outside it):
 *          tokens a cycle (A + C) / (C + O_n).
 *      (Counting a cycle at n as the explored path up to its first token
 *      outside undervalued n where that token came early, the rest of the
 *      path being drafted in the next cycle, not lost, and overvalued it
 *      where it came late: the next cycle still meets the explored
 *      path's miss.)  Seconds:
 *          verify + draft - steps * b1 * (V - n)
 *                         - (rows - steps) * b_row * (V - n),
 *      b1 and b_row the seconds a column adds to a step of one row and to
 *      each further row: least-squares lines through every candidate's
 *      timed steps (a step's head product and softmax grow with its
 *      columns, its layers do not; one candidate's timing moved by as much
 *      as the head's whole difference between neighbours, 1-3 ms of a
 *      10 ms step);
 *   5. after a choice of n < V, the chosen ids are watched: a cycle whose
 *      bonus token lies outside them ended there or would have anyway;
 *      exploration measured that share, q = (O_n + B_n) / (C + O_n) (B_n:
 *      bonus tokens outside).  Where the cycles since the choice (counted
 *      in windows of VOCAB_AUTO_EXPLORE) hold more such bonuses than
 *      exploration's share allows (past k q + 4 sqrt(k q (1 - q)) + 2 of
 *      k cycles, q with one pseudo-count each way), the text has left the
 *      ids chosen on (a code benchmark after prose, say): the draft goes
 *      back to V and explores again.  After a choice of V every cycle is
 *      an explored one, so each further VOCAB_AUTO_EXPLORE cycles choose
 *      again, at no cost.
 * Greedy decoding stays lossless whatever is chosen (verification is the
 * target's). */
#ifndef C2T_VOCAB_AUTO_H
#define C2T_VOCAB_AUTO_H
#include "infer/speculative/draft.h"

#define VOCAB_AUTO_MAX 16       /* candidates */
#define VOCAB_AUTO_ROWS 8       /* rows of a calibration step */
#define VOCAB_AUTO_EXPLORE 64   /* cycles observed before choosing; the watch's window */

typedef struct {
    int n_cand;
    int cand[VOCAB_AUTO_MAX];          /* vocabulary sizes, ascending; the last one is explored */
    double coverage[VOCAB_AUTO_MAX];   /* the counts' share each holds (reported) */
    int *rank;                         /* [V]: each id's place in the counts' order (vocab_auto_free) */
    int V;
    double step_s[VOCAB_AUTO_MAX];     /* a calibration step's seconds at each (VOCAB_AUTO_ROWS rows); 0 until calibrated */
    double step1_s[VOCAB_AUTO_MAX];    /* the same, one row */
    double step1_fit_s[VOCAB_AUTO_MAX], step_fit_s[VOCAB_AUTO_MAX];   /* the lines through them there */
    double rate[VOCAB_AUTO_MAX];       /* predicted tokens per second at each, at the last choice */
    double calibration_s;
    int calibrated, chosen;            /* chosen: the index drafted from, -1 while exploring */
    long long choices, reexplored;     /* choices made; returns to exploring from a chosen n < V */
    long long drafted[VOCAB_AUTO_MAX]; /* cycles drafted from each */
    /* the explored cycles since the last choice (drafted from V) */
    long long cycles, accepted, rows_mark, rows, steps_mark, steps;
    double verify_s, draft_s;
    long long outside[VOCAB_AUTO_MAX];        /* accepted tokens outside candidate i's ids */
    long long bonus_outside[VOCAB_AUTO_MAX];  /* cycles whose bonus token lies outside them */
    double cut_share;                  /* the chosen one's q at its choice */
    long long watch_cycles, watch_cuts;   /* since the choice, this window: cycles, those with a bonus outside */
} VocabAuto;

/* Candidates, coverage and ranks from d's token counts; sets d to the
 * explored vocabulary.  -1 + err_set (no counts, a draft that cannot reduce
 * its vocabulary). */
int vocab_auto_init(VocabAuto *va, Draft *d);
void vocab_auto_free(VocabAuto *va);
/* Between two cycles, before the draft's catch-up (which scores the next
 * root in the vocabulary then set): calibrates on the first call, sets the
 * vocabulary chosen once an exploration is over, and V again when the
 * watch sends it back to exploring.  token: any id the draft can embed (the
 * timed rows' tokens).  -1 + err_set. */
int vocab_auto_step(VocabAuto *va, Draft *d, int token);
/* One cycle done: `accepted` nodes with these target token ids, in path
 * order, and the bonus token after them; its verification and drafting
 * seconds, the draft's cumulative rows_scored and steps_scored after it. */
void vocab_auto_observe(VocabAuto *va, const int *tokens, int accepted, int bonus, double verify_s, double draft_s,
                        long long rows_scored, long long steps_scored);
/* The lines through the calibration's step times (fills step1_fit_s and
 * step_fit_s); called by the calibration. */
void vocab_auto_fit(VocabAuto *va);
/* The choice from what exploration recorded (fills rate[]): the index of
 * the candidate of highest predicted tokens per second. */
int vocab_auto_choose(VocabAuto *va);
#endif
