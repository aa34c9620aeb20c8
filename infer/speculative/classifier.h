/* The C2T confidence classifier (paper §4.1): n_feat features of a draft
 * node (the paper's P, H, d by default) -> per-feature transform ->
 * Linear(n_feat, h) -> ReLU -> Linear(h, 1) -> sigmoid = confidence that
 * verification accepts the node.
 *
 * Weights come from the JSON file spec-train writes (schema: docs/train.md,
 * "Weights file"); the loader validates everything (version, feature names,
 * transforms, shapes, finite numbers) and fails with one line naming the
 * file.  Layout is PyTorch's: fc1.weight [h][n_feat], fc1.bias [h],
 * fc2.weight [1][h], fc2.bias [1]; (n_feat + 2) h + 1 parameters. */
#ifndef C2T_CLASSIFIER_H
#define C2T_CLASSIFIER_H
#include "kernels/base/node_net.h"
#include <stddef.h>

/* The node features a classifier can read, as the decoding loop computes
 * them for a candidate and as a trace row (trace_format.md) holds or
 * implies them; the two must agree, or a classifier trained on traces
 * ranks other nodes than the ones it sees while decoding:
 *   P         joint probability: product of p along the path from the root
 *   H         entropy (nats) of the draft distribution the node was drawn from
 *   depth     1 for the root's children
 *   p         the node's own draft probability (/nodes/p)
 *   rank      place among its siblings in the draft's top-k, 0 = most
 *             probable (/nodes/rank)
 *   parent_H  H of the parent node, i.e. of the distribution the parent was
 *             drawn from; a depth-1 node (parent = the root, which has no
 *             row and no H) uses its own H */
typedef enum {
    CLS_F_P = NODE_F_P, CLS_F_H = NODE_F_H, CLS_F_DEPTH = NODE_F_DEPTH, CLS_F_LOCAL_P = NODE_F_LOCAL_P,
    CLS_F_RANK = NODE_F_RANK, CLS_F_PARENT_H = NODE_F_PARENT_H, CLS_N_KNOWN = NODE_N_FEAT
} ClsFeatureId;
#define CLS_MAX_FEAT CLS_N_KNOWN
/* The paper's three, P, H, depth in this order: what a classifier reads by
 * default. */
#define CLS_DEFAULT_NFEAT 3
extern const ClsFeatureId cls_default_features[CLS_DEFAULT_NFEAT];
#define CLS_MAX_HIDDEN 4096
#define CLS_FORMAT "c2t-classifier"
#define CLS_VERSION 1

/* Input transform of one feature: t = raw x, or ln(x + eps) for "log";
 * then the model input is (t - mean) / std (mean 0, std 1 = none). */
typedef enum { CLS_RAW = 0, CLS_LOG = 1 } ClsTransform;

typedef struct {
    ClsFeatureId id;   /* which known feature */
    ClsTransform kind;
    float eps;         /* log only: ln(x + eps), eps > 0 */
    float mean, std;   /* standardisation after the transform; std > 0 */
} ClsFeature;

/* The raw known features of one node, indexed by ClsFeatureId: what every
 * caller hands the forward; the classifier picks the ones it reads. */
typedef struct { float v[CLS_N_KNOWN]; } ClsNode;

/* A node's features from its parts; parent_H is the parent's H, or the
 * node's own H when the parent is the root (see above). */
static inline ClsNode cls_node(float P, float H, int depth, float p, int rank, float parent_H) {
    return (ClsNode){{P, H, (float)depth, p, (float)rank, parent_H}};
}

/* What a classifier was trained for: the target and draft of the traces it
 * was trained on, as spec-collect recorded them (trace_format.md); every
 * field empty when the traces did not say (a file written before it was
 * recorded, or synthetic traces).  A classifier ranks one draft's nodes for
 * one target: used with others it silently prunes the wrong trees. */
typedef struct {
    char target[512];
    char target_config_hash[17];   /* config.json's identity */
    char draft[512];
    char draft_weights_hash[17];   /* st_weights_hash_hex of the draft */
} ClsTrainedFor;

typedef struct {
    int hidden;
    ClsTrainedFor trained_for;
    int n_feat;                  /* 1..CLS_MAX_FEAT inputs, distinct features */
    ClsFeature feat[CLS_MAX_FEAT];   /* in input order */
    float *fc1_w;      /* [hidden][n_feat] */
    float *fc1_b;      /* [hidden] */
    float *fc2_w;      /* [hidden] */
    float fc2_b;
    float threshold;   /* beta the file was evaluated at (0.5 if absent) */
} Classifier;

/* "P", "H", "depth", "p", "rank", "parent_H", by ClsFeatureId */
extern const char *const cls_feature_names[CLS_N_KNOWN];
/* The id of a feature name; -1 if unknown. */
int cls_feature_parse(const char *name);
/* Parses a comma-separated list of distinct known names ("P,H,depth,p")
 * into ids (CLS_MAX_FEAT at most); the count, or -1 + err_set naming the
 * problem (the caller adds where the list came from). */
int cls_features_parse(const char *list, ClsFeatureId ids[CLS_MAX_FEAT]);
/* "P,H,depth": the classifier's features in input order (buf of 64). */
const char *cls_features_str(const Classifier *c, char *buf, size_t size);
/* (n_feat + 2) hidden + 1 */
int classifier_nparams(const Classifier *c);
const char *cls_transform_name(ClsTransform t);          /* "raw", "log" */
/* Parses "raw" / "log"; -1 if unknown. */
int cls_transform_parse(const char *s);

/* Loads and validates a weights JSON file; NULL + err_set("FILE: ...") on
 * any problem. */
Classifier *classifier_load(const char *path);
/* Whether the classifier at path was trained for this target and draft
 * (their config hash and weights hash): 0 when it was, or when its file
 * does not say (then *unknown = 1); -1 with err_set naming both pairs when
 * it was trained for others. */
int classifier_check_trained_for(const char *path, const char *target_dir, const char *target_config_hash,
                                 const char *draft_dir, int *unknown);
/* A classifier of the given hidden size reading features ids[0..n_feat)
 * (distinct), with zero weights and raw inputs (callers fill in the
 * weights); NULL + err_set if hidden or the features are out of range. */
Classifier *classifier_new(int hidden, int n_feat, const ClsFeatureId *ids);
void classifier_free(Classifier *c);
/* Checks hidden size, transforms and that every number is finite; 0 or -1
 * + err_set("<where>: ...").  classifier_load calls it. */
int classifier_check(const Classifier *c, const char *where);

/* The model input of one node (the classifier's features in its order,
 * transforms applied): x[0..n_feat). */
void classifier_input(const Classifier *c, const ClsNode *node, float *x);
/* The classifier's arithmetic as node_net.h defines it, over c's weights
 * (host memory): what the functions below compute with. */
NodeNet classifier_net(const Classifier *c);
/* Pre-sigmoid outputs for n candidates: nodes[i] -> logit[i]. */
void classifier_logits(const Classifier *c, const ClsNode *nodes, int n, float *logit);
/* Confidences (sigmoid of the logits) for n candidates at once; this is
 * what the decoding loop's c2t policy compares with beta. */
void classifier_forward(const Classifier *c, const ClsNode *nodes, int n, float *conf);
/* The logistic function classifier_forward applies (node_net_sigmoid). */
float classifier_sigmoid(float z);
#endif
