/* train/: spec-train as a library (this file), over collect/ traces and
 * infer/speculative/classifier. */
/* spec-train's pipeline as a library call: data (train/dataset.h), FFN +
 * Adam (train/ffn.h), per-epoch evaluation and model selection
 * (train/metrics.h), export (train/export.h). */
#ifndef C2T_TRAIN_TRAINER_H
#define C2T_TRAIN_TRAINER_H
#include "infer/speculative/classifier.h"
#include <stddef.h>
#include <stdint.h>

#define TRAIN_MAX_SWEEP 64
/* Below this many accepted nodes in the held-out trees spec-train warns: a
 * recall near 0.5 measured on 100 of them has a 95% interval of about
 * +-0.1, as wide as the differences between epochs it selects on. */
#define TRAIN_FEW_EVAL_POSITIVES 100

/* Which epoch spec-train exports (held-out trees):
 *   SELECT_BETA     the C2T paper's rule (App. C): the highest recall at
 *                   beta, and among epochs within similar_recall of it the
 *                   smallest theta;
 *   SELECT_RANKING  the most accepted nodes kept by C2T's tree selection cut
 *                   to EAGLE-2's share of nodes: how well the epoch ranks,
 *                   so an over-inclusive epoch does not win by keeping more;
 *   SELECT_LAST     the last epoch. */
typedef enum { SELECT_BETA, SELECT_RANKING, SELECT_LAST } SelectRule;
/* "beta", "ranking", "last"; -1 for another name. */
int select_rule_parse(const char *name);
const char *select_rule_name(SelectRule r);

typedef struct {
    const char **traces;
    int n_traces;
    const char *out;            /* weights JSON (required) */
    const char *safetensors;    /* optional */
    const char *report;         /* optional report JSON */
    const char *dump_dir;       /* optional --dump-init DIR */
    int dump_epochs;            /* epochs whose batches are dumped (1) */

    int hidden, epochs, batch;
    double lr, beta1, beta2, adam_eps;
    double neg_ratio;           /* negatives per positive, per epoch */
    uint64_t seed;
    double eval_frac;           /* 0.05 */
    double beta;                /* 0.5 */
    int e2_topn;                /* 60 */
    double similar_recall;      /* 0.005 = 0.5 recall points */
    SelectRule select;          /* which epoch is exported */
    double sweep[TRAIN_MAX_SWEEP];
    int n_sweep;

    int n_feat;                 /* the classifier's inputs, in order (default P, H, depth) */
    ClsFeatureId features[CLS_MAX_FEAT];
    ClsTransform transform[CLS_N_KNOWN];   /* by feature id; only the chosen features' are used */
    unsigned transform_named;   /* bit per feature id set by --transform: each must be chosen */
    float log_eps;
    int standardize;

    int strict;                 /* non-finite features are an error */
    int threads;                /* 0 = OpenMP default */
    size_t sample_mem;          /* bytes for drawn negatives per streaming pass */
    int progress;            /* one progress line over the epochs (stderr) */
    int verbose;             /* also a line per epoch and a batch progress line per epoch */
} TrainOpts;

/* The defaults: log P standardised, 200 epochs, 2.5 negatives per
 * positive (the recipe that worked on training traces). */
void train_defaults(TrainOpts *o);
/* The C2T paper's App. C instead: raw inputs, 10 epochs, one negative per
 * positive. */
void train_paper_recipe(TrainOpts *o);
/* Runs everything; 0, or -1 + err_set (one line). */
int train_run(const TrainOpts *o);
#endif
