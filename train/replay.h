/* EAGLE-2 replayed from a trace of every position (spec-collect
 * --every-position): its τ and γ at any total and any depth up to the
 * trace's, per turn, without decoding again.
 *
 * Why it is exact: greedy decoding is lossless, so every EAGLE-2 run of the
 * same questions emits the same tokens; its draft tree at a cycle rooted at
 * position r depends only on the text before r (the draft reads the
 * target's features of accepted tokens, not the earlier trees), so it is the
 * trace's tree r cut to node depth <= depth+1 (the first `depth` expansion
 * steps of the pool) and reranked to its `total` nodes of highest P (ties:
 * shallower, then earlier: the policy's order), of them those with P >=
 * min_p; and greedy verification
 * accepts the part of the trace's labelled path that the rerank kept.  A
 * turn of L tokens then runs: r = 0; while r < L-1: a cycle at r emits
 * min(accepted+1, L-1-r) tokens, γ += the nodes kept, r += what it emitted.
 * The trees equal a decoding run's bit for bit where the draft's products
 * sum each row alone (--cpu-fast-gemm on); tests/test_collect.c compares
 * replays with spec-eval. */
#ifndef C2T_TRAIN_REPLAY_H
#define C2T_TRAIN_REPLAY_H
#include "collect/trace.h"
#include <stdint.h>

typedef struct {
    int question;            /* row in the trace's /questions */
    int turn;                /* 0-based */
    int64_t new_tokens;      /* L: the prefill's token and the cycles' */
    int64_t cycles, cycle_tokens, gamma;
} ReplayTurn;

typedef struct {
    int topk, depth, total;  /* total -1: the whole pool */
    float min_p;             /* eagle2's min_p (0: none) */
    TraceQuestion *questions;
    int64_t n_questions;
    ReplayTurn *turns;       /* in trace order; turns that ended at the prefill have no trees and no row */
    int64_t n_turns;
} Replay;

/* Replays eagle2 at depth, total (-1 = all) and min_p on the trace at path.  -1
 * with err_set naming the file and the problem: not a trace of every
 * position (its verify attribute is not "root"), depth beyond the trace's,
 * trees out of position order, a damaged file. */
int replay_eagle2(const char *path, int depth, int total, float min_p, Replay *out);
void replay_free(Replay *r);
#endif
