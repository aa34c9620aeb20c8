/* Writing what spec-train produces: the weights JSON (read back by
 * classifier_load), the PyTorch-named safetensors file, JSON helpers for the
 * report, and the --dump-init files for the PyTorch oracle.
 * Schemas: docs/train.md. */
#ifndef C2T_TRAIN_EXPORT_H
#define C2T_TRAIN_EXPORT_H
#include "infer/speculative/classifier.h"
#include "train/metrics.h"

struct cJSON;

/* Sets c's weights from the flat state_dict-order vector (train/ffn.h). */
void classifier_set_params(Classifier *c, const float *theta);
void classifier_get_params(const Classifier *c, float *theta);

/* The model part of the weights file: format, version, features with their
 * transforms, hidden, activation, output, threshold, weights. */
struct cJSON *classifier_to_json(const Classifier *c);
/* Safetensors file with fc1.weight [h,n_feat], fc1.bias [h], fc2.weight [1,h],
 * fc2.bias [1] (F32) and string metadata: format, version, features,
 * transforms (JSON of the feature list), feature_order ("P,H,depth"),
 * hidden, threshold. */
int classifier_write_safetensors(const char *path, const Classifier *c);

struct cJSON *rates_json(const Rates *r);
/* Metrics, beta sweep and entropy-bucket table of one evaluation. */
struct cJSON *eval_json(const EvalResult *r, const EvalOpts *o, int with_tables);
#endif
