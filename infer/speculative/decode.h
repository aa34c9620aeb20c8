/* infer/speculative/: the speculative loop.  This file's decode.c is the
 * draft→verify→commit cycle read top to bottom, verification's rule
 * included; beside it the cycle's
 * buffers and tree ops, the host tree and the policies' shared choices
 * (cycle.c), draft sources (draft.c,
 * draft_eagle.c, draft_lm.c), policies (policy.c and policies/) and the
 * classifier.  What runs the cycle (sessions, batches) and what measures
 * it (observers) live in infer/session/. */
/* The speculative decoding loop: draft a tree with a policy's program in
 * backend memory, verify it with one target forward, walk it there, keep
 * the accepted path in both KV caches, repeat.
 *
 * Accounting (README "Metrics"): the first new token comes from the prompt's
 * prefill; every later token comes from a draft–verify cycle, which yields
 * its accepted nodes plus the target's bonus token.  τ = cycle tokens ÷
 * cycles; γ = tree nodes sent to the target, root excluded. */
#ifndef C2T_DECODE_H
#define C2T_DECODE_H
#include "infer/speculative/draft.h"
#include "infer/model/llama.h"
#include "infer/speculative/policy.h"
#include "kernels/base/rng.h"
#include "infer/speculative/tree.h"
#include "infer/speculative/observer.h"


/* How the target verifies a tree: all of it in one forward (tree); the
 * root and then each child holding its greedy choice, a token at a time
 * (walk: Decoder.walk); or the root alone, so that a cycle commits one token
 * whatever the tree holds (root: Decoder.walk_root_only). */
typedef enum { VERIFY_TREE, VERIFY_WALK, VERIFY_ROOT } VerifyMode;
/* "tree", "walk" or "root" */
const char *verify_mode_name(VerifyMode m);

/* The target's sampled choice at one position: an id drawn from
 * logits[V] (backend memory) by sample_dev's rule on the CPU (the reference:
 * the row is read to the host scratch row[V]) with the number
 * rng_uniform_at(key, node). */
int sample_row(const Backend *be, const float *logits, int V, const SampleParams *sp, uint64_t key, int node,
               float *row);


typedef struct {
    int64_t new_tokens;     /* all emitted tokens, the prefill's included */
    int64_t cycle_tokens;   /* tokens emitted by draft–verify cycles */
    int64_t cycles;
    int64_t drafted_cycles;   /* cycles that drafted (the others verified their root alone) */
    int64_t gamma;
    int64_t one_thread_cycles;   /* cycles the backend's tuner ran on one thread of several
                                    (its probes, or its choice on a busy machine); batch 1 */
    int64_t prompt_kept;    /* prompt tokens whose cache entries the turn kept from the
                               turn before (Decoder.cache), not forwarded again */
    StageTimes t;
} DecodeStats;

/* sum += x, for totals over turns and benchmarks */
void decode_stats_add(DecodeStats *sum, const DecodeStats *x);
/* τ: cycle tokens per cycle (0 without cycles) */
double decode_stats_tau(const DecodeStats *st);

/* A verification's result on the host: the accepted path (tree nodes,
 * path[0] the root) and its tokens, len of them, for trees of up to
 * cap_nodes nodes; the target's bonus token after it; and a logits row
 * (the prefill's sampling). */
typedef struct {
    int *path, *tokens;
    int len, bonus;
    float *row;
    int cap_nodes;
} VerifyBuffers;

/* The tokens committed since the draft last caught up, tokens[0..n), and
 * their target features, hidden's first n rows (backend memory,
 * feat_width floats a row, Draft.feat_width); a cycle's accepted path joins
 * them after its verification, and the draft catches up on them all when
 * it next drafts. */
typedef struct {
    int *tokens, n, cap;
    float *hidden;
    int hidden_cap, feat_width;
    /* 1: tokens are the last cycle's, which drafted: catching up on them is
     * that drafting's cost.  0: some were deferred (the prompt's, those of
     * cycles that drafted nothing): catching up on them is a one-time cost
     * of drafting again, kept out of the cost model's draft time and the
     * switch's cycle time (CycleReport.deferred_s) lest it decide by it. */
    int owed;
} Pending;

/* The turn in progress (decoder_begin .. decoder_end). */
typedef struct {
    int *out;             /* its tokens so far */
    int n_out, max_new, done;
    int root;             /* the next cycle's root: the last token emitted */
    DecodeStats *st;
    double t_start;
    double deferred_s;    /* this cycle's catch-up on deferred tokens (Pending.owed 0), seconds */
} Turn;

struct Decoder {
    LlamaState *target;
    Draft *draft;         /* NULL for ar */
    Policy *policy;
    SampleParams sp;
    Rng rng;              /* sampling: the prefill's key, then one key a cycle (sample_dev) */
    Observer *observers;  /* what watches the cycle (observer.h), called in this order */
    int stop_ids[8];      /* further ids that end an answer (chat templates), beside the config's eos */
    int n_stop;
    Turn turn;
    Tree tree;            /* the verified tree read to the host, where the host walks it (walk) */
    VerifyBuffers v;
    Pending pending;
    int cycle_off;        /* this cycle drafts nothing: an observer turned drafting off (the cost model's switch) */
    int lazy;             /* this cycle's verification scores only the path's rows (lazy_logits_nodes) */
    Gate *gate;           /* where the target's forwards go (batched decoding); NULL: at once */
    DevCycle *dc;         /* the cycle's buffers in backend memory (cycle.h) */
    int unit;             /* this cycle's draft phase runs as one recorded unit (decoder_draft) */
    int unit_verified;    /* ... and its verification with it */
    double draft_mark;    /* the stats' drafting seconds when this cycle began */
    double t_verify;      /* when this cycle's verification began */
    /* Verification by walking (--verify walk, greedy only): the target
     * forwards the root, then each child holding its greedy choice, a token
     * at a time, instead of the whole tree in one forward.  What greedy
     * verification accepts is fixed by the target's choices along the path,
     * so the tokens, τ and γ are those of the tree forward (the draft's
     * features come from one-token forwards, equal to the tree forward's
     * where products sum each row alone: --cpu-fast-gemm on), for τ
     * one-token forwards a cycle instead of one of every node: for studies
     * of acceptance (spec-collect, sweeps of tree sizes), never for speed. */
    int walk;
    /* With walk: the root only, so every cycle commits the target's next
     * token and no node (VERIFY_ROOT): a tree at every position of the
     * greedy output, for spec-collect --every-position. */
    int walk_root_only;
    /* The ids whose entries the target's cache holds, in order: the last
     * turn's prompt and the tokens its cycles committed.  With keep_prefix
     * set (a conversation's turns, each prompt the one before with its
     * answer and a new turn), a turn keeps the target's and the draft's
     * entries of the longest prefix its prompt shares with them and
     * forwards only the rest: the same entries a forward of the whole
     * prompt writes, since each row's sums do not depend on the rows
     * beside it (tests/test_eval.c holds the answers equal). */
    struct { int *ids, n, cap, keep_prefix; } cache;
};

/* slots: target KV capacity (prompt + new tokens + the largest tree).  The
 * cycle's buffers (dc) are in the target's backend memory; a caller that
 * gates the forwards sets gate and may point dc->be at a copy of that
 * backend before the first decoder_run.  It has no observer: its caller
 * attaches what measures it (infer/session/observers.h; a policy that
 * sizes from costs needs decoder_watch_costs before the first run). */
Decoder *decoder_new(const LlamaModel *target, Draft *draft, Policy *policy, int slots, SampleParams sp);
void decoder_free(Decoder *dec);
/* Decodes up to max_new tokens after the prompt (stops after an eos);
 * returns how many were written to out, or -1 with err_set. */
int decoder_run(Decoder *dec, const int *prompt, int n_prompt, int max_new, int *out, DecodeStats *st);

#endif
