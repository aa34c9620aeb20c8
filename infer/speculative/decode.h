/* infer/speculative/: the speculative loop.  This file's decode.c is the
 * draft→verify cycle read top to bottom; beside it verify.c, the tree
 * (tree.c), draft sources (draft.c, draft_eagle.c, draft_lm.c), policies
 * (policy.c and policies/), the classifier and sessions (session.c). */
/* The speculative decoding loop: draft a tree with a policy, verify it with
 * one target forward, keep the accepted path in both KV caches, repeat.
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
#include "infer/speculative/verify.h"
#include "infer/speculative/vocab_auto.h"

/* Trees of up to lazy_logits_nodes(be) nodes get logits for every node
 * from the verify forward; bigger ones only for the path verification
 * walks (one one-token LM-head product per accepted node).  With the pair
 * dot an n-token LM-head product reads the head once but costs n times the
 * arithmetic (kernels/cpu/matmul.c): around LAZY_LOGITS_NODES nodes that
 * equals reading it once per accepted node.  Where a product of
 * backend_product_tokens(be) tokens costs about one token's (AMX tiles:
 * 16), two such groups of nodes cost less than the walk's two or three
 * one-token products: eagle2's plain command under --cpu-fast-gemm amx
 * decoded 1.10x faster with 32 than with 8 (16 and 64 alike; SmolLM2,
 * held-out prompts).  On a GPU (64 tokens) eagle2's trees are scored
 * whole, so the device cycle's walk needs no read on the way. */
#define LAZY_LOGITS_NODES 8
int lazy_logits_nodes(const Backend *be);

/* How the target verifies a tree: all of it in one forward (tree); the
 * root and then each child holding its greedy choice, a token at a time
 * (walk: Decoder.walk); or the root alone, so that a cycle commits one token
 * whatever the tree holds (root: Decoder.walk_root_only). */
typedef enum { VERIFY_TREE, VERIFY_WALK, VERIFY_ROOT } VerifyMode;
/* "tree", "walk" or "root" */
const char *verify_mode_name(VerifyMode m);

typedef struct {
    int64_t new_tokens;     /* all emitted tokens, the prefill's included */
    int64_t cycle_tokens;   /* tokens emitted by draft–verify cycles */
    int64_t cycles;
    int64_t gamma;
    int64_t one_thread_cycles;   /* cycles the backend's tuner ran on one thread of several
                                    (its probes, or its choice on a busy machine); batch 1 */
    StageTimes t;
} DecodeStats;

/* sum += x, for totals over turns and benchmarks */
void decode_stats_add(DecodeStats *sum, const DecodeStats *x);
/* τ: cycle tokens per cycle (0 without cycles) */
double decode_stats_tau(const DecodeStats *st);

/* Called after each verification with the verified tree and the accepted
 * nodes (path[0] is the root, path[1..n_path) accepted).  On the device
 * cycle the tree is in backend memory: t is NULL, unless the decoder's
 * hook_reads_tree asks for a host copy (one read of it per cycle).  A
 * non-zero return gives up the turn there: decoder_run returns -1 (the error
 * text untouched; its out and stats are then incomplete), and the next
 * decoder_run begins afresh (spec-eval stops an interrupted run so). */
typedef int (*CycleHook)(void *ctx, const Tree *t, const int *path, int n_path, int cycle);


typedef struct {
    LlamaState *target;
    Draft *draft;         /* NULL for ar */
    Policy *policy;
    SampleParams sp;
    Rng rng;              /* sampling: the prefill's key, then one key a cycle (verify_tree, sample_dev) */
    CycleHook hook;
    void *hook_ctx;
    int hook_reads_tree;  /* the device cycle hands the hook a host copy of its tree */
    Tree hook_tree;       /* that copy */
    int stop_ids[8];      /* further ids that end an answer (chat templates), beside the config's eos */
    int n_stop;
    Tree tree;
    int *pos, *path;
    int *path_rows;       /* backend memory, cap_nodes: the path for copy_rows */
    uint8_t *mask;
    size_t mask_cap;
    /* device rows of the committed tokens the draft has not caught up on
     * (the pending ones, then the accepted path): its features of the target */
    float *path_hidden;
    int hidden_cap;       /* rows path_hidden holds */
    /* Auto sizes: whether this cycle drafts at all (cost.h): the switch is
     * dec->cost's, or a batch's (all its sequences draft or none).  The
     * tokens committed since the draft last caught up: pending[0..n_pending),
     * their features path_hidden's first rows. */
    DraftSwitch *sw;
    int cycle_off;        /* this cycle drafted nothing */
    int *pending, n_pending, pending_cap;
    double cycle_mark;    /* when the last cycle ended (a single sequence's switch times cycles) */
    int feat_width;       /* floats per row of path_hidden (Draft.feat_width) */
    float *row;           /* host logits row */
    int cap_nodes;
    BackendTuner tuner;   /* a cycle is the backend's unit of tuning */
    Gate *gate;           /* where the target's forwards go (batched decoding); NULL: at once */
    DevCycle *dc;         /* the device cycle (cycle.h), or NULL: the host's */
    CostModel cost;       /* lent to a policy that sizes its trees from costs (policy.wants_cost) */
    VocabAuto *vocab;     /* the draft's vocabulary chosen from costs (--draft-vocab auto), or NULL */
    const char *cost_cache;   /* its calibration cache file (cost.h), or NULL: calibrate every run */
    double draft_mark;    /* the stats' drafting seconds at the last cycle's end */
    /* the turn in progress (decoder_begin .. decoder_end) */
    int *out;             /* its tokens so far */
    int n_out, max_new, done, root, lazy;
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
    DecodeStats *st;
    double t_start, t_verify;
} Decoder;

/* slots: target KV capacity (prompt + new tokens + the largest tree). */
Decoder *decoder_new(const LlamaModel *target, Draft *draft, Policy *policy, int slots, SampleParams sp);
void decoder_free(Decoder *dec);
/* Times the target's forward over n = 1, 2, 3, 4, 6, 8, 12, ... tokens (up
 * to the policy's largest tree, at most 128, while decoder_calib_next
 * allows) after the current context, as verification runs them, into
 * dec->cost; the KV cache is left as it was.
 * With dec->cost_cache the curve is read from that file when it holds this
 * decoder's key (decoder_cost_key), else measured and added to it (a file
 * that cannot be written is a warning on stderr; one that is not a cost
 * cache is an error).  decoder_run calls it on the first turn of a policy
 * that wants costs.  With a gate it passes a GATE_CALIBRATE call instead:
 * the batch calibrates its sequences together (batch.c). */
int decoder_calibrate(Decoder *dec);
/* Its token counts, ascending, into counts[DECODER_CALIB_MAX]: how many. */
#define DECODER_CALIB_MAX 16
int decoder_calib_counts(const Decoder *dec, int *counts);
/* Whether a calibration pass times its next count: its two forwards,
 * predicted as the last point's time scaled by the token counts (an
 * overestimate: a CPU's forward grows slower than its tokens), must end
 * within the pass's budget, DECODER_CALIB_BUDGET_S or the time of
 * DECODER_CALIB_BUDGET_ONES one-token forwards (first_s), whichever is
 * larger: the counts trees use (up to about 16 on a CPU) get timed on a
 * larger model too, where timing every count to 128 took 23 s on a 1.5B,
 * and the curve's last segment extends beyond. */
#define DECODER_CALIB_BUDGET_S 2.5
#define DECODER_CALIB_BUDGET_ONES 40
int decoder_calib_next(double elapsed_s, double first_s, double last_s, int last_n, int next_n);
/* A calibration point's forward: chain (empty at first, or a chain of the
 * root's token from an earlier call) grown to n nodes, and the call that
 * verifies it after the current context, as a tree of n nodes is verified
 * (dec's positions and mask).  The forward itself is the caller's. */
void decoder_chain_call(Decoder *dec, Tree *chain, int n, GateCall *call);
/* The calibration cache's key for this decoder's curve (cost.h): this
 * program's build, the target (config and weight bytes), the backend and
 * its device, the threads, the largest token count timed and every backend
 * setting (arithmetic). */
void decoder_cost_key(const Decoder *dec, char *key, size_t size);
/* Why this decoder cannot run the device cycle (policy, draft vocabulary
 * from costs, walking, feedback, draft), or NULL when it can. */
const char *decoder_device_cycle_blocker(const Decoder *dec);
/* Switches the decoder to the device cycle (Policy.build_dev, cycle.h):
 * the same tokens, trees, τ and γ as the host cycle.  -1 with err_set
 * naming the blocker.  Call before decoder_run, after setting gate. */
int decoder_use_device_cycle(Decoder *dec);
/* --cycle: CYCLE_DEFAULT runs the device cycle where the decoder can and
 * the host's elsewhere; CYCLE_HOST and CYCLE_DEVICE insist (DEVICE is an
 * error where it cannot run). */
enum { CYCLE_DEFAULT, CYCLE_HOST, CYCLE_DEVICE };
/* Applies a CYCLE_* choice; 0, or -1 with err_set. */
int decoder_choose_cycle(Decoder *dec, int choice);
/* Decodes up to max_new tokens after the prompt (stops after an eos);
 * returns how many were written to out, or -1 with err_set. */
int decoder_run(Decoder *dec, const int *prompt, int n_prompt, int max_new, int *out, DecodeStats *st);

#endif
