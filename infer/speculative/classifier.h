/* The C2T confidence classifier (paper §4.1): features (P, H, d) of a draft
 * node -> per-feature transform -> Linear(3, h) -> ReLU -> Linear(h, 1) ->
 * sigmoid = confidence that verification accepts the node.
 *
 * Weights come from the JSON file spec-train writes (schema: docs/train.md,
 * "Weights file"); the loader validates everything (version, feature order,
 * transforms, shapes, finite numbers) and fails with one line naming the
 * file.  Layout is PyTorch's: fc1.weight [h][3], fc1.bias [h],
 * fc2.weight [1][h], fc2.bias [1]. */
#ifndef C2T_CLASSIFIER_H
#define C2T_CLASSIFIER_H

#define CLS_NFEAT 3          /* P (joint probability), H (entropy, nats), d (depth) */
#define CLS_MAX_HIDDEN 4096
#define CLS_FORMAT "c2t-classifier"
#define CLS_VERSION 1

/* Input transform of one feature: t = raw x, or ln(x + eps) for "log";
 * then the model input is (t - mean) / std (mean 0, std 1 = none). */
typedef enum { CLS_RAW = 0, CLS_LOG = 1 } ClsTransform;

typedef struct {
    ClsTransform kind;
    float eps;         /* log only: ln(x + eps), eps > 0 */
    float mean, std;   /* standardisation after the transform; std > 0 */
} ClsFeature;

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
    ClsFeature feat[CLS_NFEAT];
    float *fc1_w;      /* [hidden][3] */
    float *fc1_b;      /* [hidden] */
    float *fc2_w;      /* [hidden] */
    float fc2_b;
    float threshold;   /* beta the file was evaluated at (0.5 if absent) */
} Classifier;

extern const char *const cls_feature_names[CLS_NFEAT];   /* "P", "H", "depth" */
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
/* A classifier of the given hidden size with zero weights and raw inputs
 * (callers fill in the weights); NULL if hidden is out of range. */
Classifier *classifier_new(int hidden);
void classifier_free(Classifier *c);
/* Checks hidden size, transforms and that every number is finite; 0 or -1
 * + err_set("<where>: ...").  classifier_load calls it. */
int classifier_check(const Classifier *c, const char *where);

/* The model input of one node (transforms applied). */
void classifier_input(const Classifier *c, float P, float H, float d, float x[CLS_NFEAT]);
/* Pre-sigmoid outputs for n candidates: P[i], H[i], d[i] -> logit[i]. */
void classifier_logits(const Classifier *c, const float *P, const float *H, const float *d, int n,
                       float *logit);
/* Confidences (sigmoid of the logits) for n candidates at once; this is
 * what the decoding loop's c2t policy compares with beta. */
void classifier_forward(const Classifier *c, const float *P, const float *H, const float *d, int n,
                        float *conf);
/* Numerically stable logistic function used by classifier_forward. */
float classifier_sigmoid(float z);
#endif
