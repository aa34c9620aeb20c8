/* Evaluation of a classifier on held-out trees (paper App. C.2 and D).
 *
 * Every held-out tree is one batch (the paper evaluates with batch 1011 =
 * one tree).  Over all held-out nodes:
 *   cls   the classifier alone: positive iff confidence >= beta;
 *   tree  C2T's pre-pruning as App. D simulates it: classifier filter, then
 *         drop every node whose parent was filtered out (recursively);
 *   e2    EAGLE-2's selection: the top-N nodes of each tree by joint
 *         probability P (ties: earlier node first), N = 60 by default.
 * For each: recall, positive rate theta (share of nodes predicted
 * positive), precision, F1, accuracy (precision and F1 are 0 when nothing
 * is predicted positive).  AUC is over the classifier's confidences.
 * The entropy table buckets nodes by H: [0,1) ... [5,6), [6, inf). */
#ifndef C2T_TRAIN_METRICS_H
#define C2T_TRAIN_METRICS_H
#include "infer/speculative/classifier.h"
#include "train/dataset.h"
#include <stdint.h>

#define N_BUCKETS 7   /* plus the total in row N_BUCKETS */

typedef struct { int64_t tp, fp, fn, tn; } Confusion;
typedef struct { double recall, theta, precision, f1, accuracy; Confusion c; } Rates;

/* App. D's table: per entropy bucket (row N_BUCKETS: all nodes) the node
 * count and the confusion of C2T's tree selection and of EAGLE-2's top-N. */
typedef struct {
    Confusion tree[N_BUCKETS + 1], e2[N_BUCKETS + 1];
    int64_t n[N_BUCKETS + 1];
} BucketTable;

typedef struct {
    int n_sweep;
    double sweep[64];
    double beta;
    int e2_topn;
    const uint8_t *e2_sel;   /* optional: e2_select of every held-out tree, precomputed */
} EvalOpts;

typedef struct {
    double auc, loss;          /* loss: mean BCE over all held-out nodes */
    Rates cls, tree, e2;
    /* recall of C2T's tree selection with its threshold set to keep as
     * many nodes as EAGLE-2's top-N (tree.theta = e2.theta): how well the
     * classifier ranks, whatever beta it is used at */
    double tree_recall_at_e2_theta;
    Rates sweep_cls[64], sweep_tree[64];
    BucketTable buckets;
    int64_t n_trees, n_nodes, n_pos;
} EvalResult;

Rates rates_of(Confusion c);
/* Adds one node (prediction pred, label y) to c. */
void confusion_count(Confusion *c, int pred, int y);
int entropy_bucket(float H);
/* "[0,1)" ... "[6,inf)", "total" for b = N_BUCKETS (buf of 16). */
const char *entropy_bucket_name(int b, char *buf);
/* One node of entropy H, label y, kept by C2T (c2t) and by EAGLE-2 (e2):
 * counted in its bucket's row and in the total row. */
void bucket_count(BucketTable *t, float H, int y, int c2t, int e2);
/* Exact ROC AUC (ties count one half); 0.5 if one class is absent. */
double auc_exact(const float *score, const uint8_t *label, int64_t n);
/* sel[i] = conf[i] >= beta and its parent is selected (parent -1 = root). */
void c2t_tree_select(const float *conf, const int32_t *parent, int n, double beta, uint8_t *sel);
/* pm[i] = min of conf over node i and its ancestors: C2T keeps i at beta
 * iff pm[i] >= beta (the same set as c2t_tree_select, for every beta). */
void c2t_path_min(const float *conf, const int32_t *parent, int n, float *pm);
/* rank[i] = place of node i when the tree is sorted by P, largest first
 * (ties: lower index first): EAGLE-2's top-N keeps rank < N, so one sort
 * gives every N. */
void e2_rank(const float *P, int n, int *rank);
/* sel[i] = node i is among the topn largest P (ties: lower index first). */
void e2_select(const float *P, int n, int topn, uint8_t *sel);

/* The paper's model selection (App. C.2): the highest recall, and among the
 * candidates whose recall is within `similar` of it (0.005 = 0.5 recall
 * points) the smallest theta; ties: the higher recall, then the earlier. */
int select_epoch(const Rates *cls, int n, double similar);
/* Recall of the k highest scores: the share of positives (label 1) among
 * them; a group of equal scores straddling the cut counts in proportion
 * (the expectation over tie orders).  0 when there are no positives. */
double recall_of_top(const float *score, const uint8_t *label, int64_t n, int64_t k);
/* The epoch whose C2T tree selection, cut to EAGLE-2's share of nodes, keeps
 * the most accepted nodes (tree_recall_at_e2_theta); ties: the earlier. */
int select_epoch_ranking(const EvalResult *r, int n);
/* e2_select over every tree of the set (caller frees). */
uint8_t *e2_select_all(const EvalSet *es, int topn);
/* Evaluates the classifier on the held-out set (OpenMP over trees). */
void evaluate(const Classifier *c, const EvalSet *es, const EvalOpts *o, EvalResult *r);
#endif
