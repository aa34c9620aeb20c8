/* What watches the speculative cycle from outside its core: the cost model
 * and its draft switch, the draft-vocabulary chooser, the backend's thread
 * tuner and a caller's cycle hook (spec-collect's trace, the tests' tree
 * logs).  The decoder (decode.c) calls its observers at four points of a
 * turn and knows nothing of what they measure; each observer is one struct
 * whose first member is an Observer, listed on the decoder by
 * decoder_watch, in observers.c, which calls nothing of the decoder's: the
 * decoder calls down to its observers. */
#ifndef C2T_OBSERVER_H
#define C2T_OBSERVER_H
#include "infer/speculative/cost.h"
#include "infer/speculative/tree.h"
#include "infer/speculative/vocab_auto.h"

typedef struct Decoder Decoder;

/* One committed cycle, as the decoder reports it. */
typedef struct {
    const Tree *tree;     /* the verified tree on the host where a walk read it, else NULL (it is in
                             backend memory) */
    const Tree *keys;     /* its nodes' P and depths where the host has them (the tree, or what the
                             program read to size it), else NULL */
    const int *path;      /* accepted nodes, path[0] the root */
    const int *tokens;    /* their tokens */
    int n_path;
    int n_nodes;          /* nodes verified, the root included */
    int bonus;            /* the target's token after the path: the next root */
    int emitted;          /* tokens the cycle emitted (fewer than n_path where the turn ended) */
    int drafted;          /* 0: drafting was off, the root alone verified */
    int index;            /* the cycle's number in the turn, from 0 */
    double verify_s;      /* the target's forward and the acceptance */
    double draft_s;       /* drafting since the last cycle ended, the catch-up on its tokens included */
    double deferred_s;    /* the catch-up on tokens drafting did not cover (the prompt's, drafting-off
                             cycles'): in neither draft_s nor, for the switch, the cycle's time */
} CycleReport;

/* The interface: every callback optional; a non-zero return is -1 with
 * err_set, and the turn is given up there (decoder_run returns -1). */
typedef struct Observer Observer;
struct Observer {
    const char *name;
    /* after the prompt's prefill and the draft's catch-up on it */
    int (*turn_begin)(Observer *o, Decoder *dec);
    /* before a cycle drafts, and once after the prefill: may turn drafting
     * off for the cycle (Decoder.cycle_off) */
    void (*cycle_begin)(Observer *o, Decoder *dec);
    /* after a cycle committed its path, before the draft catches up on it
     * (not called where drafting is off or the turn ended) */
    int (*before_catch_up)(Observer *o, Decoder *dec, int bonus);
    /* the cycle, committed and caught up on */
    int (*cycle_end)(Observer *o, Decoder *dec, const CycleReport *r);
    void (*destroy)(Observer *o);
    Observer *next;
};

/* Appends o to dec's observers (called in that order); the decoder destroys
 * it with itself. */
void decoder_watch(Decoder *dec, Observer *o);
/* dec's observer of that name, or NULL. */
Observer *decoder_observer(const Decoder *dec, const char *name);

/* The observers (observers.c). */

/* A caller's view of every cycle: hook(ctx, tree, path, n_path, cycle)
 * after each, the tree NULL (it is in backend memory) unless reads_tree
 * asks for a host copy of it (one read a cycle).  A non-zero return gives up the turn
 * (the error text untouched; the turn's out and stats are then incomplete),
 * and the next decoder_run begins afresh.  Setting a hook again replaces
 * it; hook NULL removes it. */
typedef int (*CycleHook)(void *ctx, const Tree *t, const int *path, int n_path, int cycle);
void decoder_set_hook(Decoder *dec, CycleHook hook, void *ctx, int reads_tree);
/* The host copy of the last cycle's tree the hook was handed, where it asked for one. */
const Tree *decoder_hook_tree(const Decoder *dec);

/* The cost model of a policy that sizes its trees from measured costs
 * (Policy.wants_cost), attached by decoder_new: calibrated on a turn's
 * first cycle (decoder_calibrate), told each cycle's costs and acceptance,
 * and lent to the policy (Policy.cost).  Its switch turns drafting off
 * while it does not pay (cost.h); a batch shares one among its sequences
 * (sw), and times the rounds itself. */
typedef struct {
    Observer base;
    CostModel model;
    DraftSwitch *sw;      /* &model.sw, or a batch's; NULL without a draft */
    const char *cache;    /* the calibration cache file (cost.h), or NULL: calibrate every run */
    double cycle_mark;    /* when the last cycle ended (a single sequence's switch times cycles) */
    int *pos, cap;        /* a calibration chain's positions and mask (decoder_chain_call), cap tokens */
    uint8_t *mask;
} CostWatch;
/* Attaches one (decoder_new, where the policy wants costs). */
void decoder_watch_costs(Decoder *dec);
/* dec's, or NULL where its policy sizes nothing from costs. */
CostWatch *decoder_cost_watch(const Decoder *dec);

/* Times the target's forward over n = 1, 2, 3, 4, 6, 8, 12, ... tokens (up
 * to the policy's largest tree, at most 128, while decoder_calib_next
 * allows) after the current context, as verification runs them, into the
 * cost model; the KV cache is left as it was.  With a cache file the curve
 * is read from it when it holds this decoder's key (decoder_cost_key), else
 * measured and added to it (a file that cannot be written is a warning on
 * stderr; one that is not a cost cache is an error).  With a gate it passes
 * a GATE_CALIBRATE call instead: the batch calibrates its sequences
 * together (batch.c). */
int decoder_calibrate(Decoder *dec);
/* Its token counts, ascending, into counts[DECODER_CALIB_MAX]: how many. */
#define DECODER_CALIB_MAX 16
int decoder_calib_counts(const Decoder *dec, int *counts);
/* Whether a calibration times its next count, decided in its first round
 * (elapsed_s so far): every round's forward of it, predicted as the last
 * point's time scaled by the token counts (an overestimate: a CPU's
 * forward grows slower than its tokens), must end within the budget,
 * DECODER_CALIB_BUDGET_S or the time of DECODER_CALIB_BUDGET_ONES
 * one-token forwards (first_s), whichever is larger: the counts trees use
 * (up to about 16 on a CPU) get timed on a larger model too, where timing
 * every count to 128 took 23 s on a 1.5B, and the curve's last segment
 * extends beyond. */
#define DECODER_CALIB_BUDGET_S 2.5
#define DECODER_CALIB_BUDGET_ONES 40
int decoder_calib_next(double elapsed_s, double first_s, double last_s, int last_n, int next_n);
/* A calibration's forwards: DECODER_CALIB_ROUNDS rounds over the counts
 * (the first round decides how many, decoder_calib_next; the very first
 * forward warms, untimed), each count's forward timed next to a one-token
 * forward; the curve is the best one-token time and, at each count, its
 * median ratio over the rounds.  A shared machine's speed drifts over
 * seconds (by 40% on a 2-vCPU VM) and its phases left repeats back to back
 * each in one of them, so the curve's shape, which sets the tree sizes,
 * came out of the drift (8 tokens 1.3x to 3.4x one token in calibrations
 * of the same build); a ratio of neighbours holds.  forward(ctx, i) runs
 * count i's forward (counts[0] is 1) and waits for it; best[i] gets the
 * seconds.  Returns the counts timed, or -1 when a forward failed. */
#define DECODER_CALIB_ROUNDS 3
int decoder_calib_rounds(const int *counts, int n_counts, int (*forward)(void *ctx, int i), void *ctx, double *best);
/* A calibration point's forward: chain (empty at first, or a chain of the
 * root's token from an earlier call) made n nodes, and the call that
 * verifies it after the current context, as a tree of n nodes is verified
 * (positions and mask in the cost watch's buffers).  The forward itself is the caller's. */
void decoder_chain_call(Decoder *dec, Tree *chain, int n, GateCall *call);
/* The calibration cache's key for this decoder's curve (cost.h): this
 * program's build, the target (config and weight bytes), the backend and
 * its device, the threads, the largest token count timed and every backend
 * setting (arithmetic). */
void decoder_cost_key(const Decoder *dec, char *key, size_t size);

/* --draft-vocab auto: va switches the draft's vocabulary before each
 * catch-up and learns from each cycle (vocab_auto.h). */
void decoder_watch_vocab(Decoder *dec, VocabAuto *va);
/* dec's chooser, or NULL. */
const VocabAuto *decoder_vocab(const Decoder *dec);

/* The backend's thread tuner (kernels.h BackendTuner), a cycle its unit of
 * tuning, attached by decoder_new; idle where a gate's owner tunes its
 * batches.  It counts the turn's cycles run on one thread of several into
 * DecodeStats.one_thread_cycles. */
void decoder_watch_threads(Decoder *dec);
#endif
