/* Batched decoding: N sequences decoded together, as a server decodes many
 * prompts at once.  Each slot decodes one question at a time with its own
 * decoder, policy, target cache and draft (a clone over the session's
 * weights), by the same code that decodes a sequence alone; every model
 * product of the slots runs batched: the prompts' prefills, the draft's
 * forwards (one per draft step of all the slots' trees, and the catch-ups),
 * the target's forward over all the trees, and the verification rows.  A
 * slot whose question is done takes the next (continuous batching), or,
 * with static batches, waits until every slot of its group is done.
 *
 * At temperature 0 each sequence's tokens are ar's at the same batch size
 * (lossless).  They are also those of decoding it alone while every
 * product of the run has at most FEW_TOKENS rows (kernels/cpu/cpu.h: each
 * row summed as a one-token product sums it); larger products go through
 * sgemm, which sums in another order, so a near tie can then resolve
 * differently. */
#ifndef C2T_BATCH_H
#define C2T_BATCH_H
#include "infer/session/session.h"
#include <signal.h>

/* The cycle's work at the slots' gates: the tree ops the slots
 * issued and the Backend.tree_batch calls that ran them (a launch per op
 * kind where the backend batches), the reads of backend memory and the
 * to_host_many calls that made them (one wait each). */
typedef struct {
    long tree_ops, tree_batches, reads, read_batches;
} BatchDevice;

typedef struct {
    int slots;        /* sequences decoded together */
    int static_batches;   /* 1: a new group of questions starts only when the last group is done */
    /* Optional: each verified tree (decode.h's hook), with the ctx of its
     * question; and each question's end, after its last turn (0, or -1
     * with err_set to stop the run). */
    CycleHook hook;
    int hook_reads_tree;  /* decoder_set_hook's reads_tree, for every slot's decoder */
    int (*question_done)(void *ctx);
    /* Optional: set to what the slots' device cycles issued and how it ran
     * batched (BatchDevice). */
    BatchDevice *device;
    /* Optional, for a policy with auto sizes: its slots' cost models as one
     * at the end (the round's curve and running figures, every choice). */
    CostModel *cost;
    /* Optional: non-zero stops the run at the next round: no question is
     * taken, the turns in progress end uncounted (fn never sees them) and
     * batch_run returns 1. */
    const volatile sig_atomic_t *stop;
} BatchOptions;

/* Decodes every turn of questions qs[0..n) with policy settings prm; fn
 * gets each finished turn with ctxs[i] of its question (turns of different
 * questions arrive interleaved, each question's in order).  wall: seconds
 * of the whole run, the slots' decoders and caches made before it starts,
 * and an auto size's calibration (a one-time cost, as a single sequence's
 * is made in spec-eval's warm-up) left out.
 * 0; 1 when o->stop stopped it; -1 with err_set. */
int batch_run(Session *s, const PolicyParams *prm, const BatchOptions *o, const Question *const *qs, int n,
              TurnFn fn, void *const *ctxs, double *wall);
#endif
