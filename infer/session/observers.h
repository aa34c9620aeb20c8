/* What measures a session's cycles (infer/session/): the observers a
 * session attaches to its decoders through the cycle's observer interface
 * (infer/speculative/observer.h) -- a caller's cycle hook, the cost model
 * with its draft switch and calibration, the draft-vocabulary chooser and
 * the backend's thread tuner -- and the calibration cache.  The decoder
 * calls them through that interface and names none of them. */
#ifndef C2T_OBSERVERS_H
#define C2T_OBSERVERS_H
#include "infer/speculative/decode.h"
#include "infer/session/vocab_auto.h"

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
 * (Policy.wants_cost), attached by session_decoder: calibrated on a turn's
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
/* Attaches one (a decoder whose policy wants costs must have one: decoder_run
 * refuses it without). */
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
 * tuning, attached by session_decoder; idle where a gate's owner tunes its
 * batches.  It counts the turn's cycles run on one thread of several into
 * DecodeStats.one_thread_cycles. */
void decoder_watch_threads(Decoder *dec);

/* The calibration cache (cost_cache.c; spec-eval --cost-cache): a JSON file
 * of curves, each under a key naming everything the curve depends on
 * (decoder_cost_key).  cost_cache_get: 1 with key's curve in m (a fresh
 * model: the points only), 0 when the file does not exist or lacks the key,
 * -1 + err_set when the file is not a cost cache or a curve is malformed.
 * cost_cache_put adds or replaces key's curve (m's points), creating the
 * file and its directory; -1 + err_set.  A file that is not a cost cache is
 * never overwritten. */
#define COST_CACHE_CURVES 32   /* the newest kept; older ones are dropped as new ones are written */
int cost_cache_get(const char *path, const char *key, CostModel *m);
int cost_cache_put(const char *path, const char *key, const CostModel *m);
/* At a run's end, with COST_REFRESH_CYCLES cycles observed or more: m's
 * corrected curve replaces its key's in the cache (an earlier run's curve,
 * or this run's calibration), so one noisy calibration does not persist.
 * 1 when written, 0 when not due (fewer cycles, no cache key), -1 + err_set. */
#define COST_REFRESH_CYCLES 64
int cost_cache_refresh(const char *path, const CostModel *m);
/* $XDG_CACHE_HOME/c2t/cost.json, else $HOME/.cache/c2t/cost.json, into buf;
 * NULL when neither variable is set. */
const char *cost_cache_default_path(char *buf, size_t size);
#endif
