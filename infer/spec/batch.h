/* Batched decoding: N sequences decoded together, as a server decodes many
 * prompts at once.  Each slot is a Decoder with its own target cache, draft
 * and policy; every cycle the slots draft their trees one after another and
 * one target forward (llama_forward_batch) verifies all of them, each slot
 * then verifying and committing its own.  A question is decoded by one
 * slot, its turns in order; a slot whose question is done takes the next
 * (continuous batching), or, with static batches, waits until every slot
 * of the batch is done.  At temperature 0 each sequence's tokens are those
 * of decoding it alone (the forward is row for row the single one). */
#ifndef C2T_BATCH_H
#define C2T_BATCH_H
#include "infer/spec/session.h"

typedef struct {
    int slots;        /* sequences decoded together */
    int static_batches;   /* 1: a new group of questions starts only when the last group is done */
} BatchOptions;

/* Decodes every turn of questions qs[0..n) with policy settings prm; fn
 * gets each finished turn with ctxs[i] of its question (turns of different
 * questions arrive interleaved, each question's in order).  wall: seconds
 * of the whole run, the slots' decoders and caches made before it starts.
 * -1 with err_set. */
int batch_run(Session *s, const PolicyParams *prm, const BatchOptions *o, const Question *const *qs, int n,
              TurnFn fn, void *const *ctxs, double *wall);
#endif
