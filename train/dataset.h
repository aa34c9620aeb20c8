/* Training data for spec-train, streamed from one or more trace files
 * (collect/trace.h).
 *
 * dataset_open() reads the per-tree index of every file (trace_read_trees),
 * splits the trees into a training and a held-out part (exact count,
 * seedable, never splitting a tree), then makes one streaming pass over the
 * nodes (trace_read_nodes in blocks) that
 *   - computes the classifier's features of every node (ClsNode; parent_H
 *     from the parent's row in the same tree, dataset_tree_nodes);
 *   - validates: accepted must be 0/1, parent an index inside the tree with
 *     no cycle, the chosen features (and the model inputs after the
 *     transforms) finite;
 *     a tree with a non-finite feature is dropped whole and counted (or,
 *     with strict, is an error naming the file and row);
 *   - counts positives / negatives of the training part, keeps the training
 *     positives and accumulates the transformed-feature statistics;
 *   - caches the held-out trees (features, label, parent) for evaluation.
 * Negatives are never held in full: dataset_sample_negatives() draws exact
 * per-epoch samples in another streaming pass.
 * Memory: O(trees + training positives + held-out nodes + drawn negatives),
 * independent of the number of training negatives. */
#ifndef C2T_TRAIN_DATASET_H
#define C2T_TRAIN_DATASET_H
#include "collect/trace.h"
#include "infer/speculative/classifier.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *path;
    char hash[17];         /* FNV-1a 64 of the file (file_hash_hex) */
    int64_t n_trees, n_nodes, tree0;   /* finished rows; global index of its first tree */
    int64_t dropped_trees;
} DsFile;

/* The held-out trees, in memory. */
typedef struct {
    int64_t n_trees, n_nodes;
    int64_t *start;        /* [n_trees + 1]: nodes of tree t are [start[t], start[t+1]) */
    ClsNode *x;            /* raw features */
    float *P, *H;          /* the same P and H, as columns (EAGLE-2's ranking, entropy buckets) */
    uint8_t *y;
    int32_t *parent;       /* index within the tree, -1 = child of the root */
    int64_t n_pos;
} EvalSet;

typedef struct {
    double eval_frac;      /* share of trees held out (0.05) */
    uint64_t seed;
    int strict;            /* non-finite features: error instead of dropping the tree */
    const Classifier *cls; /* its features are read; its transforms (kind, eps) are applied to the inputs */
    int progress;          /* progress lines on stderr */
} DsOpts;

enum { DS_EVAL = 1, DS_DROPPED = 2 };

typedef struct {
    int nfiles;
    DsFile *files;
    int64_t n_trees;       /* all files */
    uint8_t *flag;         /* per global tree: DS_EVAL, DS_DROPPED */
    int64_t *first;        /* per global tree: first node row in its file */
    int32_t *count;        /* per global tree: number of nodes */
    int32_t *file_of;      /* per global tree: file index */

    int64_t train_trees, eval_trees, dropped_trees, nonfinite_nodes;
    int64_t train_nodes, train_pos, train_neg;
    ClsNode *pos;          /* training positives, raw, in file order */
    EvalSet eval;
    /* mean and std of the transformed (pre-standardisation) inputs over
     * all training nodes, in the classifier's feature order */
    double feat_mean[CLS_MAX_FEAT], feat_std[CLS_MAX_FEAT];
    double read_seconds;   /* time spent in trace_read_* */
    int64_t nodes_read;
    ClsTrainedFor trained_for;   /* the traces' target and draft (empty when a file does not say) */
} Dataset;

/* The known features of the n nodes of one tree from its trace rows (rows
 * in tree order, parent = index within the tree or -1 for the root's
 * children, already validated): the definitions of classifier.h, as the
 * decoding loop computes them. */
void dataset_tree_nodes(const TraceNode *nd, int n, ClsNode *out);
/* The trace columns (TRACE_F_* bits) that a classifier's features and the
 * labels need. */
unsigned dataset_fields(const Classifier *c);

Dataset *dataset_open(const char *const *paths, int n, const DsOpts *o);
void dataset_free(Dataset *ds);

/* Draws, for each epoch e in [0, n_epochs), k negatives of the training part
 * uniformly without replacement (all of them if k >= train_neg), from RNG
 * stream (seed, RNG_STREAM_NEG, first_epoch + e), in one streaming pass.
 * out[e] receives k features (caller frees), in file order.  Returns the
 * number drawn per epoch, or -1. */
int64_t dataset_sample_negatives(Dataset *ds, uint64_t seed, int first_epoch, int n_epochs, int64_t k,
                                 ClsNode **out, int progress);
#endif
