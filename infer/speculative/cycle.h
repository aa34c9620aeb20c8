/* The speculative cycle's state in backend memory: a policy's tree built by
 * the tree ops (kernels.h; Policy.build, the policy's program), verified by
 * one target forward and walked there, so that a GPU keeps the cycle's
 * state on the device.  decode.c runs it every cycle; the trees it builds
 * are those tests/golden/cycle_goldens.txt records.
 *
 * What the host reads: a threshold's pass count per layer (a per-layer
 * program), or every layer's at once after drafting (a fixed-shape one,
 * Policy.build_end), or the pool's keys once (a size from costs), or
 * each expansion's top-k (a policy that chooses from them: SAGE, WETAP,
 * and the sizes from costs where reads are free, which prune as they
 * grow; cycle_expand_read); and,
 * once a cycle, the walk (accepted path, its tokens, the bonus), a read per
 * path node where the tree is too large for every row's logits;
 * cycle_host_reads counts them.  Every forward, the draft's and the verification's, reads
 * its inputs where tree_inputs made them (DraftStep.on_device,
 * llama_forward_dev).  Where nothing is read while the program drafts
 * (Policy.build_unit) and the sequence decodes alone (draft_unit_ok),
 * the decoder issues the whole cycle, draft phase, verification and (every
 * row scored) the walk, as one recorded unit (decode.c, cycle_ops), or as
 * two around a program's one read after drafting. */
#ifndef C2T_CYCLE_H
#define C2T_CYCLE_H
#include "kernels/kernels.h"
#include "infer/speculative/classifier.h"
#include "infer/speculative/gate.h"
#include "infer/speculative/policy.h"

struct DevCycle {
    const Backend *be;      /* where its buffers live and its ops run */
    /* NULL: one sequence, its tree ops and reads run at once; a batched
     * sequence's gate (infer/session/batch.c), where each waits and runs with the other
     * sequences' as one launch or transfer (cycle_tree_op, cycle_to_host) */
    Gate *gate;
    int cap;                /* nodes of a tree */
    DevTree pool;           /* the tree as grown */
    DevTree tree;           /* a reranked copy (tree_compact's destination) */
    const DevTree *verified;/* pool or tree: what the target verifies */
    int n;                  /* nodes in pool */
    int n_verified;         /* nodes in *verified */
    /* The verification forward's rows (cycle_pad): n_verified, or where
     * the backend records forwards its bucket (verify_rows_bound: one
     * recording serves every size of a bucket), the tree then copied into
     * padded with dead nodes after it; rows_tree is verified or padded. */
    DevTree padded;
    const DevTree *rows_tree;
    int n_rows;
    int pad_max;            /* no padding past it (backend_pad_rows, cap) */
    int n_rows_max;         /* the most rows of any cycle so far */
    /* backend memory */
    int *iota;              /* 0, 1, ..., cap-1: fixed node lists */
    int *start;             /* {the target's committed length, the root's token, the draws' key's
                             * low and high words (sampling)}, uploaded before each cycle */
    int *rows, *keep, *ids, *want, *walk;
    int *picks;             /* 2·cap: (row, rank) pairs a host choice grows (cycle_grow_cands) */
    float *probs, *ent;     /* with ids: the last expansion's rows, dist_cap entries */
    int cands_ent;          /* whether cycle_expand_read read entropies: cycle_grow_cands keeps them as H, else 0 */
    size_t dist_cap;
    TreeInputs inputs;      /* the verify forward's, made in backend memory */
    int *h_walk;            /* the walk, read to the host */
    long walk_reads, count_reads;   /* host reads of walks and of thresholds' pass counts */
    long key_reads;         /* host reads of the pool's P and depths (a size chosen from costs) */
    long expand_reads;      /* host reads of expansions: distributions a policy chooses from
                               (cycle_expand_read), a draft without a model's inputs (DraftOps.expand) */
    double t_begin;         /* when this cycle's tree began (cycle_begin) */
    /* The verified tree's P and depths on the host, where the program read
     * them to size it (n 0 otherwise): what the cost model learns from. */
    Tree keys;
    long tree_reads;        /* verified trees read to the host (cycle_read_tree) */
    long cycles;            /* cycles begun (decoder_cycle_dev) */
    int op_by_op;           /* the next cycle's draft phase runs op by op, not as a unit: the draft's
                             * buffers were released (a vocabulary switch) and grow again */
    long units;             /* of them, cycles issued as one unit (backend_recorded) */
    long verify_units;      /* cycles whose verification ran in a unit (with the draft phase, or after a read) */
    long walked_units;      /* of them, those that walked the tree too (no read on the way) */
};

/* Per-node scores of a cycle's pool in its backend memory, for the
 * programs that prune nodes by a threshold (C2T, a chain's early stop):
 * a node classifier's uploaded weights (where there is one), confidences,
 * path confidences (the root's above every confidence) and the count of
 * nodes a threshold passes. */
typedef struct {
    const Backend *be;      /* NULL until reserved */
    int cap;
    NodeNet net;            /* weights in be's memory (hidden 0: none) */
    float *weights, *conf, *path_conf;
    int *count;             /* cap entries: a count per layer */
} DevScores;
/* Buffers for c's trees and cls's weights (cls may be NULL); again only
 * when c's backend or capacity changed. */
void dev_scores_reserve(DevScores *s, const DevCycle *c, const Classifier *cls);
void dev_scores_release(DevScores *s);
/* tree_pass over pool nodes [from, from+n) by score (s->conf, or a tree's
 * own p or P) against beta, path confidences into s->path_conf; the
 * count passed, read to the host (one read, counted). */
int dev_scores_pass(DevScores *s, DevCycle *c, int from, int n, float *score, float beta);
/* The sum of the pass counts of `layers` layers, one per entry of s->count
 * (a fixed-shape program's tree_pass calls), read to the host at once (one
 * read, counted). */
int dev_scores_counts(DevScores *s, DevCycle *c, int layers);

/* The cycle's tree ops and reads of backend memory: every one goes through
 * these, so that a batched sequence waits at its gate here (gate_tree_op,
 * gate_to_host) and nowhere else.  cycle_op_* are Backend's tree entries
 * (kernels.h) with the cycle first; cycle_to_host_many reads count arrays,
 * gated one by one, else in one backend_to_host_many. */
void cycle_tree_op(DevCycle *c, const TreeOp *op);
void cycle_op_root(DevCycle *c, const DevTree *t, const int *root);
void cycle_op_grow(DevCycle *c, const DevTree *t, int n0, const int *rows, const int *ids, const float *probs,
                   const float *ent, int k, const int *picks, int count, const int *map);
void cycle_op_top(DevCycle *c, const DevTree *t, const float *score, int from, int n, int m, int *sel);
void cycle_op_classify(DevCycle *c, const DevTree *t, int from, int n, const NodeNet *net, float *conf);
void cycle_op_pass(DevCycle *c, const DevTree *t, int from, int n, float *conf, float beta, float *path_conf,
                   int *count);
void cycle_op_compact(DevCycle *c, const DevTree *dst, const DevTree *src, const int *keep, int m, int pad);
void cycle_op_accept(DevCycle *c, const DevTree *t, int n, const int *want, int from_start, int steps, int *walk);
void cycle_op_argmax(DevCycle *c, const float *logits, int n, int vocab, int *ids);
void cycle_op_sample(DevCycle *c, const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key,
                     int node0, int *ids);
void cycle_to_host(DevCycle *c, float *host, const float *dev, size_t words);
void cycle_ints_to_host(DevCycle *c, int *host, const int *dev, size_t n);
void cycle_to_host_many(DevCycle *c, float *const *host, const float *const *dev, const size_t *words, int count);

/* A cycle for trees of up to cap nodes, in be's memory. */
DevCycle *cycle_new(const Backend *be, int cap);
void cycle_free(DevCycle *c);
/* A new tree: the root alone (its token from start[1]). */
void cycle_begin(DevCycle *c);
/* The draft's distributions under pool nodes rows[0..m) (root: the root
 * row alone) into c->ids, c->probs and, with want_ent, c->ent; timed into
 * tm (the draft's forwards as draft, its distribution step as dist).  A
 * draft without a model (DraftOps.expand) expands on the host: the pool
 * and rows read, its results uploaded (one read, counted in expand_reads). */
int cycle_expand(DevCycle *c, Draft *d, int root, const int *rows, int m, int k, int topm, int want_ent,
                 StageTimes *tm);
/* The host's choices of a policy that reads the draft's distributions
 * (SAGE, WETAP: widths and thresholds from probabilities), made on a host
 * Tree that mirrors the pool node for node: cycle_expand_read expands pool
 * nodes nodes[0..m) (host indices, uploaded; {0}: the root) as
 * cycle_expand does, and reads their rows to the host (one read, counted):
 * ids (target ids), probs and, where ent is not NULL, entropies (H 0
 * without);
 * cycle_grow_cands appends the chosen children cand[0..count) of that
 * expansion (rows of nodes[], ranks < k) to the pool, in that order;
 * cycle_keep_nodes verifies pool nodes keep[0..m) (host; ascending, closed
 * under parents, keep[0] = 0), gathered by tree_compact. */
int cycle_expand_read(DevCycle *c, Draft *d, const int *nodes, int m, int k, int topm, int *ids, float *probs,
                      float *ent, StageTimes *tm);
void cycle_grow_cands(DevCycle *c, const Draft *d, const PolicyCand *cand, int count, int k);
void cycle_keep_nodes(DevCycle *c, const int *keep, int m);
/* A program that sized the verified tree on a host mirror t of it (node
 * for node): t's P and depths as c->keys, what the cost model learns. */
void cycle_keys_from(DevCycle *c, const Tree *t);
/* Appends count children of the last expansion to pool (tree_grow: picks
 * NULL takes every (row, rank) in order). */
void cycle_grow(DevCycle *c, const Draft *d, const int *rows, int k, const int *picks, int count, int want_ent);
/* Verifies the root and the `total` nodes of the pool of highest score
 * (NULL: P; tree_top's order), gathered by tree_compact; total -1, or the
 * pool's size or more, verifies the pool as it is. */
void cycle_keep_best(DevCycle *c, const float *score, int total);
/* Sets n_rows and rows_tree for the verification of the verified tree as
 * it stands: n_verified rows of it, or where the backend records its
 * bucket's rows of DevCycle.padded (a tree_compact; up to pad_max rows,
 * and none past it). */
void cycle_pad(DevCycle *c);
/* The pool's nodes' P and depths into out's (n = c->n; the other fields
 * unset): one read, counted (backend_tree_alloc keeps them in one block). */
void cycle_read_keys(DevCycle *c, Tree *out);
/* The verified tree of this cycle as a host Tree (out is reset; one read
 * of its arrays, counted). */
void cycle_read_tree(DevCycle *c, Tree *out);
/* Host reads so far: pass counts, keys, expansions, walks and trees read. */
long cycle_host_reads(const DevCycle *c);
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
 * whole, so the cycle's walk needs no read on the way. */
#define LAZY_LOGITS_NODES 8
int lazy_logits_nodes(const Backend *be);

#endif
