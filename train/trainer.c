#include "train/trainer.h"
#include "infer/model/safetensors.h"
#include "kernels/base/util.h"
#include "train/dataset.h"
#include "train/export.h"
#include "train/ffn.h"
#include "train/metrics.h"
#include "kernels/base/rng.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void train_paper_recipe(TrainOpts *o) {
    for (int j = 0; j < CLS_N_KNOWN; j++) o->transform[j] = CLS_RAW;
    o->standardize = 0;
    o->epochs = 10;
    o->neg_ratio = 1.0;
}

void train_defaults(TrainOpts *o) {
    memset(o, 0, sizeof *o);
    o->hidden = 48;
    /* Raw P spans 1e-12..1 and a few hundred to thousand trees are a
     * small set: log P, standardised, many epochs and 2.5 negatives per
     * positive gave classifiers that rank a layer's candidates better than
     * P alone and put beta 0.5 near EAGLE-2's default recall, on the demo's
     * and SmolLM2's training traces (docs/train.md) */
    o->n_feat = CLS_DEFAULT_NFEAT;
    memcpy(o->features, cls_default_features, sizeof cls_default_features);
    o->transform[CLS_F_P] = CLS_LOG;
    o->standardize = 1;
    o->epochs = 200;
    o->batch = 1024;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->adam_eps = 1e-8;
    o->neg_ratio = 2.5;
    o->seed = 0;
    o->eval_frac = 0.05;
    o->beta = 0.5;
    o->e2_topn = 60;
    o->similar_recall = 0.005;
    o->dump_epochs = 1;
    o->n_sweep = 19;
    for (int i = 0; i < 19; i++) o->sweep[i] = 0.05 * (i + 1);
    o->log_eps = 1e-6f;
    o->sample_mem = (size_t)512 << 20;
    o->progress = 1;
}

static const char *const select_rules[] = {"beta", "ranking", "last"};

int select_rule_parse(const char *name) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, select_rules[i])) return i;
    return -1;
}

const char *select_rule_name(SelectRule r) { return select_rules[r]; }

static int check_opts(const TrainOpts *o) {
    if (o->n_traces < 1) { err_set("no trace files (--traces)"); return -1; }
    if (!o->out) { err_set("no output file (--out)"); return -1; }
    if (o->hidden < 1 || o->hidden > FFN_MAX_HIDDEN) { err_set("--hidden must be in [1, %d]", FFN_MAX_HIDDEN); return -1; }
    if (o->epochs < 1) { err_set("--epochs must be at least 1"); return -1; }
    if (o->batch < 1 || o->batch > (1 << 24)) { err_set("--batch must be in [1, %d]", 1 << 24); return -1; }
    if (!(o->lr > 0) || !isfinite(o->lr)) { err_set("--lr must be a positive number"); return -1; }
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) || !(o->adam_eps > 0)) {
        err_set("Adam betas must be in [0, 1) and eps > 0");
        return -1;
    }
    if (!(o->neg_ratio > 0) || !isfinite(o->neg_ratio)) { err_set("--neg-ratio must be a positive number"); return -1; }
    if (!(o->eval_frac >= 0 && o->eval_frac < 1)) { err_set("--eval-frac must be in [0, 1)"); return -1; }
    if (!(o->beta >= 0 && o->beta <= 1)) { err_set("--beta must be in [0, 1]"); return -1; }
    if (o->e2_topn < 1) { err_set("--e2-topn must be at least 1"); return -1; }
    if (!(o->similar_recall >= 0 && o->similar_recall <= 1)) { err_set("--similar-recall must be in [0, 1]"); return -1; }
    if (o->n_sweep < 0 || o->n_sweep > TRAIN_MAX_SWEEP) { err_set("--sweep: at most %d thresholds", TRAIN_MAX_SWEEP); return -1; }
    for (int i = 0; i < o->n_sweep; i++)
        if (!(o->sweep[i] >= 0 && o->sweep[i] <= 1)) { err_set("--sweep: thresholds must be in [0, 1]"); return -1; }
    if (!(o->log_eps > 0) || !isfinite(o->log_eps)) { err_set("--log-eps must be a positive number"); return -1; }
    if (o->dump_epochs < 0) { err_set("--dump-epochs must be >= 0"); return -1; }
    if (o->n_feat < 1 || o->n_feat > CLS_MAX_FEAT) { err_set("--features: 1 to %d features", CLS_MAX_FEAT); return -1; }
    for (int id = 0; id < CLS_N_KNOWN; id++) {
        if (!(o->transform_named >> id & 1)) continue;
        int chosen = 0;
        for (int k = 0; k < o->n_feat; k++) chosen |= o->features[k] == (ClsFeatureId)id;
        if (!chosen) {
            err_set("--transform %s: not among the classifier's features (--features)", cls_feature_names[id]);
            return -1;
        }
    }
    return 0;
}

/* The directory an output goes to must exist and be writable: checked
 * before training, not after. */
static int check_writable(const char *path, const char *flag) {
    if (!path) return 0;
    char *d = xstrdup(path), *slash = strrchr(d, '/');
    if (slash) { if (slash == d) slash[1] = 0; else *slash = 0; }
    else { free(d); d = xstrdup("."); }
    int ok = access(d, W_OK) == 0;
    if (!ok) err_set("%s %s: cannot write to directory %s: %s", flag, path, d, strerror(errno));
    free(d);
    return ok ? 0 : -1;
}

static int mkdir_p(const char *dir) {
    char *p = xstrdup(dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) { err_set("%s: cannot create: %s", p, strerror(errno)); free(p); return -1; }
        *s = '/';
    }
    int rc = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) { err_set("%s: cannot create: %s", p, strerror(errno)); rc = -1; }
    free(p);
    return rc;
}

static char *dump_path(const char *dir, const char *fmt, int e) {
    char name[64];
    snprintf(name, sizeof name, fmt, e);
    return path_join(dir, name);
}

/* held-out set as model inputs + what the oracle needs for its metrics */
static int dump_eval(const char *dir, const Classifier *c, const EvalSet *es) {
    int64_t M = es->n_nodes, T = es->n_trees;
    const int nf = c->n_feat;
    float *x = xmalloc(sizeof(float) * nf * (M + 1));
    for (int64_t i = 0; i < M; i++) classifier_input(c, &es->x[i], x + nf * i);
    StWrite w[6] = {
        {"x", DT_F32, 2, {M, nf}, x}, {"P", DT_F32, 1, {M}, es->P}, {"H", DT_F32, 1, {M}, es->H},
        {"y", DT_U8, 1, {M}, es->y}, {"parent", DT_I32, 1, {M}, es->parent},
        {"tree_start", DT_I64, 1, {T + 1}, es->start}};
    char *p = path_join(dir, "eval.safetensors");
    int rc = st_write(p, w, 6);
    free(p); free(x);
    return rc;
}

static cJSON *settings_json(const TrainOpts *o, int64_t k, const Dataset *ds, int threads) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "tool", "spec-train");
    cJSON *fs = cJSON_AddArrayToObject(s, "features");
    for (int k = 0; k < o->n_feat; k++) cJSON_AddItemToArray(fs, cJSON_CreateString(cls_feature_names[o->features[k]]));
    cJSON_AddNumberToObject(s, "hidden", o->hidden);
    cJSON_AddNumberToObject(s, "epochs", o->epochs);
    cJSON_AddNumberToObject(s, "batch", o->batch);
    cJSON *opt = cJSON_AddObjectToObject(s, "optimizer");
    cJSON_AddStringToObject(opt, "name", "adam");
    cJSON_AddNumberToObject(opt, "lr", o->lr);
    cJSON_AddNumberToObject(opt, "beta1", o->beta1);
    cJSON_AddNumberToObject(opt, "beta2", o->beta2);
    cJSON_AddNumberToObject(opt, "eps", o->adam_eps);
    cJSON_AddStringToObject(s, "loss", "bce_with_logits, mean over the batch");
    cJSON_AddStringToObject(s, "init", "PyTorch nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), seeded");
    cJSON_AddNumberToObject(s, "neg_ratio", o->neg_ratio);
    cJSON_AddNumberToObject(s, "negatives_per_epoch", (double)k);
    cJSON_AddNumberToObject(s, "positives_per_epoch", (double)ds->train_pos);
    cJSON_AddNumberToObject(s, "seed", (double)o->seed);
    cJSON_AddNumberToObject(s, "eval_frac", o->eval_frac);
    cJSON_AddStringToObject(s, "split", "by tree, exact count, seeded");
    cJSON_AddNumberToObject(s, "beta", o->beta);
    cJSON_AddNumberToObject(s, "e2_topn", o->e2_topn);
    cJSON *sel = cJSON_AddObjectToObject(s, "selection");
    cJSON_AddStringToObject(sel, "rule", select_rule_name(o->select));
    cJSON_AddStringToObject(sel, "means",
                            o->select == SELECT_LAST    ? "the last epoch" :
                            o->select == SELECT_RANKING ? "the most accepted held-out nodes kept by the C2T tree selection "
                                                          "cut to EAGLE-2's share of nodes" :
                                                          "the highest held-out recall at beta; among epochs within "
                                                          "similar_recall of it, the smallest theta");
    if (o->select == SELECT_BETA) cJSON_AddNumberToObject(sel, "similar_recall", o->similar_recall);
    cJSON_AddBoolToObject(s, "standardize", o->standardize);
    cJSON_AddBoolToObject(s, "strict", o->strict);
    cJSON_AddNumberToObject(s, "threads", threads);
    return s;
}

static cJSON *data_json(const Dataset *ds, int64_t k) {
    cJSON *d = cJSON_CreateObject();
    cJSON *fs = cJSON_AddArrayToObject(d, "files");
    for (int f = 0; f < ds->nfiles; f++) {
        const DsFile *F = &ds->files[f];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", F->path);
        char h[32];
        snprintf(h, sizeof h, "fnv1a64:%s", F->hash);
        cJSON_AddStringToObject(e, "hash", h);
        cJSON_AddNumberToObject(e, "trees", (double)F->n_trees);
        cJSON_AddNumberToObject(e, "nodes", (double)F->n_nodes);
        cJSON_AddNumberToObject(e, "dropped_trees", (double)F->dropped_trees);
        cJSON_AddItemToArray(fs, e);
    }
    cJSON_AddNumberToObject(d, "trees", (double)ds->n_trees);
    cJSON_AddNumberToObject(d, "train_trees", (double)ds->train_trees);
    cJSON_AddNumberToObject(d, "eval_trees", (double)ds->eval_trees);
    cJSON_AddNumberToObject(d, "train_nodes", (double)ds->train_nodes);
    cJSON_AddNumberToObject(d, "train_positives", (double)ds->train_pos);
    cJSON_AddNumberToObject(d, "train_negatives", (double)ds->train_neg);
    cJSON_AddNumberToObject(d, "negatives_per_epoch", (double)k);
    cJSON_AddNumberToObject(d, "eval_nodes", (double)ds->eval.n_nodes);
    cJSON_AddNumberToObject(d, "eval_positives", (double)ds->eval.n_pos);
    cJSON *sk = cJSON_AddObjectToObject(d, "skipped");
    cJSON_AddNumberToObject(sk, "trees_nonfinite", (double)ds->dropped_trees);
    cJSON_AddNumberToObject(sk, "nodes_nonfinite", (double)ds->nonfinite_nodes);
    return d;
}

static void print_epoch(int e, int n, double loss, const EvalResult *r, int has_eval, double secs) {
    if (has_eval)
        fprintf(stderr, "epoch %d/%d: train loss %.5f | held-out: recall %.4f theta %.4f precision %.4f F1 %.4f "
                "acc %.4f AUC %.4f | C2T tree recall %.4f theta %.4f | %.2fs\n", e + 1, n, loss, r->cls.recall,
                r->cls.theta, r->cls.precision, r->cls.f1, r->cls.accuracy, r->auc, r->tree.recall, r->tree.theta, secs);
    else
        fprintf(stderr, "epoch %d/%d: train loss %.5f | %.2fs\n", e + 1, n, loss, secs);
}

/* One training run's state, shared by its steps (train_run below). */
typedef struct {
    const TrainOpts *o;
    int threads, h, np;
    double t_start, t_train, t_eval, t_data;
    Classifier *cls;
    Dataset *ds;
    FfnWork *fw;
    Adam adam;
    float *theta, *grad, *hist, *by;   /* weights, gradient, per-epoch weights, one batch's labels */
    float *bx[CLS_MAX_FEAT];           /* one batch's inputs, a column per feature */
    float *dx, *dy;                                       /* --dump-dir: an epoch's inputs and labels */
    uint32_t *perm;
    uint8_t *e2sel;
    EvalResult *res;
    EvalOpts eo;
    double *train_loss, *epoch_secs;
    int *epoch_threads;
    ClsNode **neg;               /* per epoch: its sampled negatives (a group of epochs at a time) */
    int64_t k, n_s;              /* negatives and samples per epoch */
    int group, has_eval, probe_off, step_threads;
    Progress epoch_bar;          /* the one progress line over the epochs */
} Run;

/* Reads the traces, sizes the epochs and allocates the model and buffers. */
static int run_prepare(Run *r) {
    const TrainOpts *o = r->o;
    for (int j = 0; j < r->cls->n_feat; j++) {
        r->cls->feat[j].kind = o->transform[r->cls->feat[j].id];
        r->cls->feat[j].eps = o->log_eps;
    }
    r->cls->threshold = (float)o->beta;

    DsOpts dso = {o->eval_frac, o->seed, o->strict, r->cls, o->progress};
    double t0 = now_seconds();
    r->ds = dataset_open(o->traces, o->n_traces, &dso);
    if (!r->ds) return -1;
    r->t_data += now_seconds() - t0;
    r->cls->trained_for = r->ds->trained_for;
    if (r->ds->dropped_trees)
        fprintf(stderr, "spec-train: skipped %lld of %lld trees with non-finite features (%lld nodes); "
                "see report data.skipped\n", (long long)r->ds->dropped_trees, (long long)r->ds->n_trees,
                (long long)r->ds->nonfinite_nodes);
    if (r->ds->train_trees == 0) {
        err_set("no usable training trees: %lld trees, %lld held out, %lld dropped for non-finite features",
                (long long)r->ds->n_trees, (long long)r->ds->eval_trees, (long long)r->ds->dropped_trees);
        return -1;
    }
    if (r->ds->train_pos == 0) {
        err_set("%s%s: no accepted nodes (positives) in the training part (%lld trees, %lld nodes); nothing to learn",
                o->traces[0], o->n_traces > 1 ? " ..." : "", (long long)r->ds->train_trees, (long long)r->ds->train_nodes);
        return -1;
    }
    if (r->ds->train_neg == 0) {
        err_set("%s%s: no rejected nodes (negatives) in the training part (%lld trees); nothing to learn",
                o->traces[0], o->n_traces > 1 ? " ..." : "", (long long)r->ds->train_trees);
        return -1;
    }
    if (r->ds->train_pos + r->ds->train_neg > (int64_t)UINT32_MAX) { err_set("training part too large (over 2^32 nodes)"); return -1; }
    if (o->standardize)
        for (int j = 0; j < r->cls->n_feat; j++) {
            r->cls->feat[j].mean = (float)r->ds->feat_mean[j];
            r->cls->feat[j].std = r->ds->feat_std[j] > 0 ? (float)r->ds->feat_std[j] : 1.0f;
        }
    r->has_eval = r->ds->eval.n_nodes > 0;
    if (!r->has_eval) fprintf(stderr, "spec-train: warning: no held-out trees; exporting the last epoch\n");
    else if (r->ds->eval.n_pos == 0)
        fprintf(stderr, "spec-train: warning: the held-out trees have no positives; recall is undefined, exporting the last epoch\n");
    else if (r->ds->eval.n_pos < TRAIN_FEW_EVAL_POSITIVES)
        fprintf(stderr, "spec-train: warning: the held-out trees (%lld) hold only %lld positives, fewer than %d: the held-out "
                "recall and the epoch chosen by it are noise (more traces or a larger --eval-frac)\n",
                (long long)r->ds->eval.n_trees, (long long)r->ds->eval.n_pos, TRAIN_FEW_EVAL_POSITIVES);

    r->k = llround(o->neg_ratio * (double)r->ds->train_pos);
    if (r->k < 1) r->k = 1;
    if (r->k >= r->ds->train_neg) {
        if (r->k > r->ds->train_neg)
            fprintf(stderr, "spec-train: note: --neg-ratio %g asks for %lld negatives per epoch; the training part has %lld, using all\n",
                    o->neg_ratio, (long long)r->k, (long long)r->ds->train_neg);
        r->k = r->ds->train_neg;
    }
    r->n_s = r->ds->train_pos + r->k;
    {
        double per_epoch = (double)r->k * (sizeof(ClsNode) + sizeof(int64_t) * 2);
        double g = (double)o->sample_mem / (per_epoch > 1 ? per_epoch : 1);
        r->group = g >= o->epochs ? o->epochs : (g < 1 ? 1 : (int)g);
    }

    /* model */
    r->theta = xmalloc(sizeof(float) * r->np);
    r->grad = xmalloc(sizeof(float) * r->np);
    r->hist = xmalloc(sizeof(float) * r->np * o->epochs);
    {
        Rng rng;
        rng_seed_stream(&rng, o->seed, RNG_STREAM_INIT, 0);
        ffn_init(r->theta, r->cls->n_feat, r->h, &rng);
    }
    adam_init(&r->adam, r->np, o->lr, o->beta1, o->beta2, o->adam_eps);
    int bmax = o->batch < r->n_s ? o->batch : (int)r->n_s;
    r->fw = ffn_work_new(r->cls->n_feat, r->h, bmax);
    for (int j = 0; j < r->cls->n_feat; j++) r->bx[j] = xmalloc(sizeof(float) * bmax);
    r->by = xmalloc(sizeof(float) * bmax);
    r->perm = xmalloc(sizeof(uint32_t) * r->n_s);
    r->res = xcalloc(o->epochs, sizeof(EvalResult));
    r->train_loss = xcalloc(o->epochs, sizeof(double));
    r->epoch_secs = xcalloc(o->epochs, sizeof(double));
    r->epoch_threads = xcalloc(o->epochs, sizeof(int));
    r->neg = xcalloc(o->epochs, sizeof(ClsNode *));
    memset(&r->eo, 0, sizeof r->eo);
    r->eo.n_sweep = o->n_sweep;
    memcpy(r->eo.sweep, o->sweep, sizeof(double) * o->n_sweep);
    r->eo.beta = o->beta;
    r->eo.e2_topn = o->e2_topn;
    if (r->has_eval) { r->e2sel = e2_select_all(&r->ds->eval, o->e2_topn); r->eo.e2_sel = r->e2sel; }

    if (o->dump_dir) {
        if (mkdir_p(o->dump_dir)) return -1;
        classifier_set_params(r->cls, r->theta);
        char *p = path_join(o->dump_dir, "init.safetensors");
        int bad = classifier_write_safetensors(p, r->cls);
        free(p);
        if (bad || dump_eval(o->dump_dir, r->cls, &r->ds->eval)) return -1;
        int de = o->dump_epochs < o->epochs ? o->dump_epochs : o->epochs;
        if (de > 0) { r->dx = xmalloc(sizeof(float) * r->cls->n_feat * r->n_s); r->dy = xmalloc(sizeof(float) * r->n_s); }
    }

    char feats[128];
    fprintf(stderr, "spec-train: features %s; %lld trees (%lld train, %lld held out), %lld training nodes: %lld positives, "
            "%lld negatives; %lld + %lld samples per epoch (%lld batches of %d); %d threads\n",
            cls_features_str(r->cls, feats, sizeof feats),
            (long long)r->ds->n_trees, (long long)r->ds->train_trees, (long long)r->ds->eval_trees, (long long)r->ds->train_nodes,
            (long long)r->ds->train_pos, (long long)r->ds->train_neg, (long long)r->ds->train_pos, (long long)r->k,
            (long long)((r->n_s + o->batch - 1) / o->batch), o->batch, r->threads);

    return 0;
}

/* One epoch: negatives (sampled per group of epochs), a shuffled pass of
 * Adam steps, the weights kept, the held-out evaluation. */
static int run_epoch(Run *r, int e) {
    const TrainOpts *o = r->o;
    const int threads = r->threads;
    const int np = r->np;
    Classifier *cls = r->cls;
    Dataset *ds = r->ds;
    FfnWork *fw = r->fw;
    float *theta = r->theta;
    float *grad = r->grad;
    float *hist = r->hist;
    const int nf = cls->n_feat;
    float *by = r->by;
    float *dx = r->dx;
    float *dy = r->dy;
    uint32_t *perm = r->perm;
    EvalResult *res = r->res;
    const EvalOpts *eop = &r->eo;
    double *train_loss = r->train_loss;
    double *epoch_secs = r->epoch_secs;
    int *epoch_threads = r->epoch_threads;
    ClsNode **neg = r->neg;
    const int64_t k = r->k;
    const int64_t n_s = r->n_s;
    const int group = r->group;
    const int has_eval = r->has_eval;
    double t0;
    double te = now_seconds();
    if (e % group == 0) {
        for (int j = 0; j < o->epochs; j++) { free(neg[j]); neg[j] = NULL; }
        int ng = o->epochs - e < group ? o->epochs - e : group;
        t0 = now_seconds();
        if (dataset_sample_negatives(ds, o->seed, e, ng, k, neg + e, o->progress) < 0) return -1;
        r->t_data += now_seconds() - t0;
    }
    const ClsNode *ne = neg[e];
    /* batch order: Fisher-Yates over positives then this epoch's negatives */
    for (int64_t i = 0; i < n_s; i++) perm[i] = (uint32_t)i;
    Rng rs;
    rng_seed_stream(&rs, o->seed, RNG_STREAM_SHUFFLE, (uint64_t)e);
    for (int64_t i = n_s - 1; i > 0; i--) {
        int64_t j = (int64_t)rng_below(&rs, (uint64_t)i + 1);
        uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    int dumping = dx && e < o->dump_epochs;
    double lsum = 0;
    /* threads for the gradient: fixed by --threads, else measured at the
     * start of each epoch (a parallel region per batch only pays on an
     * unloaded machine) */
    int probe = o->threads == 0 && threads > 1 && !r->probe_off ? 2 : 0;
    double probe_t[2] = {0, 0};
    if (o->threads > 0) r->step_threads = o->threads;
    int64_t nb = (n_s + o->batch - 1) / o->batch;
    Progress pr;
    char label[64], extra[64];
    snprintf(label, sizeof label, "epoch %d/%d (batches)", e + 1, o->epochs);
    const int batch_bar = o->progress && o->verbose;
    if (batch_bar) progress_start(&pr, label, nb);
    t0 = now_seconds();
    for (int64_t b = 0; b < nb; b++) {
        int64_t s0 = b * o->batch;
        int m = (int)(n_s - s0 < o->batch ? n_s - s0 : o->batch);
        for (int i = 0; i < m; i++) {
            uint32_t id = perm[s0 + i];
            const ClsNode *f = id < ds->train_pos ? &ds->pos[id] : &ne[id - ds->train_pos];
            float x[CLS_MAX_FEAT];
            classifier_input(cls, f, x);
            for (int j = 0; j < nf; j++) r->bx[j][i] = x[j];
            by[i] = id < ds->train_pos ? 1.0f : 0.0f;
            if (dumping) { memcpy(dx + (size_t)nf * (s0 + i), x, sizeof(float) * nf); dy[s0 + i] = by[i]; }
        }
        int probing = b < 2 * probe && nb > 4 * probe;
        if (probing) ffn_work_set_threads(fw, b < probe ? threads : 1);
        else ffn_work_set_threads(fw, r->step_threads);
        double tb = now_seconds();
        double l = ffn_loss_grad(fw, theta, (const float *const *)r->bx, by, m, grad);
        if (probing) {
            probe_t[b < probe ? 0 : 1] += now_seconds() - tb;
            if (b == 2 * probe - 1) {
                r->step_threads = probe_t[0] < 0.8 * probe_t[1] ? threads : 1;
                /* far slower in parallel (a loaded machine): stop measuring */
                if (probe_t[0] > 2 * probe_t[1]) r->probe_off = 1;
            }
        }
        adam_step(&r->adam, theta, grad);
        lsum += l * m;
        if (batch_bar) {
            snprintf(extra, sizeof extra, "loss %.5f", lsum / (double)(s0 + m));
            progress_update(&pr, b + 1, extra);
        }
    }
    r->t_train += now_seconds() - t0;
    train_loss[e] = lsum / (double)n_s;
    if (batch_bar) { snprintf(extra, sizeof extra, "loss %.5f", train_loss[e]); progress_end(&pr, nb, extra); }
    for (int i = 0; i < np; i++) {
        if (!isfinite(theta[i])) { err_set("training diverged: non-finite weight after epoch %d", e + 1); return -1; }
    }
    memcpy(hist + (size_t)e * np, theta, sizeof(float) * np);
    classifier_set_params(cls, theta);
    if (dumping) {
        char *p = dump_path(o->dump_dir, "epoch_%03d.safetensors", e + 1);
        StWrite w[2] = {{"x", DT_F32, 2, {n_s, nf}, dx}, {"y", DT_F32, 1, {n_s}, dy}};
        int bad = st_write(p, w, 2);
        free(p);
        p = dump_path(o->dump_dir, "c_weights_epoch_%03d.safetensors", e + 1);
        bad = bad || classifier_write_safetensors(p, cls);
        free(p);
        if (bad) return -1;
    }
    if (has_eval) {
        t0 = now_seconds();
        evaluate(cls, &ds->eval, eop, &res[e]);
        r->t_eval += now_seconds() - t0;
    }
    epoch_secs[e] = now_seconds() - te;
    epoch_threads[e] = r->step_threads;
    if (o->verbose) print_epoch(e, o->epochs, train_loss[e], &res[e], has_eval, epoch_secs[e]);
    else if (o->progress) {
        char extra2[96];
        if (has_eval) snprintf(extra2, sizeof extra2, "loss %.5f held-out recall %.4f", train_loss[e], res[e].cls.recall);
        else snprintf(extra2, sizeof extra2, "loss %.5f", train_loss[e]);
        if (e + 1 == o->epochs) progress_end(&r->epoch_bar, e + 1, extra2);
        else progress_update(&r->epoch_bar, e + 1, extra2);
    }
    return 0;
}

/* --dump-dir: what the PyTorch oracle needs to replay the run (dump.json). */
static int write_dump_manifest(Run *r) {
    const TrainOpts *o = r->o;
    const int h = r->h;
    const int64_t n_s = r->n_s;
    {
        int de = o->dump_epochs < o->epochs ? o->dump_epochs : o->epochs;
        cJSON *dj = cJSON_CreateObject();
        cJSON_AddStringToObject(dj, "format", "c2t-train-dump");
        cJSON_AddNumberToObject(dj, "hidden", h);
        cJSON_AddNumberToObject(dj, "batch", o->batch);
        cJSON_AddNumberToObject(dj, "lr", o->lr);
        cJSON_AddNumberToObject(dj, "beta1", o->beta1);
        cJSON_AddNumberToObject(dj, "beta2", o->beta2);
        cJSON_AddNumberToObject(dj, "adam_eps", o->adam_eps);
        cJSON_AddNumberToObject(dj, "epochs", o->epochs);
        cJSON_AddNumberToObject(dj, "epochs_dumped", de);
        cJSON_AddNumberToObject(dj, "samples_per_epoch", (double)n_s);
        cJSON_AddNumberToObject(dj, "beta", o->beta);
        cJSON_AddItemToObject(dj, "sweep", cJSON_CreateDoubleArray(o->sweep, o->n_sweep));
        cJSON_AddNumberToObject(dj, "e2_topn", o->e2_topn);
        cJSON_AddNumberToObject(dj, "similar_recall", o->similar_recall);
        cJSON *hs = cJSON_AddObjectToObject(dj, "hashes");
        for (int e = 0; e <= de + 1; e++) {
            char *p = e == 0 ? path_join(o->dump_dir, "init.safetensors") :
                      e == 1 ? path_join(o->dump_dir, "eval.safetensors") :
                               dump_path(o->dump_dir, "epoch_%03d.safetensors", e - 1);
            char hx[17];
            int bad = file_hash_hex(p, hx);
            const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
            if (!bad) cJSON_AddStringToObject(hs, base, hx);
            free(p);
            if (bad) { cJSON_Delete(dj); return -1; }
        }
        char *p = path_join(o->dump_dir, "dump.json");
        int bad = write_json(p, dj);
        free(p);
        cJSON_Delete(dj);
        if (bad) return -1;
    }

    return 0;
}

/* The weights file (with the chosen epoch), the optional safetensors copy
 * and the optional report of every epoch. */
static int write_outputs(Run *r, int sel) {
    const TrainOpts *o = r->o;
    const int threads = r->threads;
    Classifier *cls = r->cls;
    Dataset *ds = r->ds;
    EvalResult *res = r->res;
    const EvalOpts *eop = &r->eo;
    double *train_loss = r->train_loss;
    double *epoch_secs = r->epoch_secs;
    int *epoch_threads = r->epoch_threads;
    const int64_t k = r->k;
    const int64_t n_s = r->n_s;
    const int has_eval = r->has_eval;
    cJSON *weights = NULL, *report = NULL;
    int rc = -1;
    /* weights file */
    weights = classifier_to_json(cls);
    cJSON *tr = settings_json(o, k, ds, threads);
    cJSON_AddNumberToObject(tr, "selected_epoch", sel + 1);
    cJSON_AddItemToObject(weights, "training", tr);
    cJSON_AddItemToObject(weights, "data", data_json(ds, k));
    if (has_eval) cJSON_AddItemToObject(weights, "metrics", eval_json(&res[sel], eop, 0));
    if (write_json(o->out, weights)) goto out;
    if (o->safetensors && classifier_write_safetensors(o->safetensors, cls)) goto out;

    double total = now_seconds() - r->t_start;
    if (o->report) {
        report = cJSON_CreateObject();
        cJSON_AddStringToObject(report, "format", "c2t-train-report");
        cJSON_AddNumberToObject(report, "version", 1);
        cJSON_AddStringToObject(report, "weights", o->out);
        cJSON_AddItemToObject(report, "settings", settings_json(o, k, ds, threads));
        cJSON_AddItemToObject(report, "data", data_json(ds, k));
        cJSON *ep = cJSON_AddArrayToObject(report, "epochs");
        for (int e = 0; e < o->epochs; e++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "epoch", e + 1);
            cJSON_AddNumberToObject(x, "train_loss", train_loss[e]);
            cJSON_AddNumberToObject(x, "samples", (double)n_s);
            cJSON_AddNumberToObject(x, "seconds", epoch_secs[e]);
            cJSON_AddNumberToObject(x, "gradient_threads", epoch_threads[e]);
            if (has_eval) cJSON_AddItemToObject(x, "eval", eval_json(&res[e], eop, 0));
            cJSON_AddItemToArray(ep, x);
        }
        cJSON_AddNumberToObject(report, "selected_epoch", sel + 1);
        if (has_eval) {
            cJSON *m = eval_json(&res[sel], eop, 1);
            cJSON *sw = cJSON_DetachItemFromObject(m, "beta_sweep");
            cJSON *bt = cJSON_DetachItemFromObject(m, "entropy_buckets");
            cJSON_AddItemToObject(report, "metrics", m);
            cJSON_AddItemToObject(report, "beta_sweep", sw);
            cJSON_AddItemToObject(report, "entropy_buckets", bt);
        }
        cJSON *tm = cJSON_AddObjectToObject(report, "timing");
        cJSON_AddNumberToObject(tm, "total_s", total);
        cJSON_AddNumberToObject(tm, "data_s", r->t_data);
        cJSON_AddNumberToObject(tm, "trace_read_s", ds->read_seconds);
        cJSON_AddNumberToObject(tm, "train_s", r->t_train);
        cJSON_AddNumberToObject(tm, "eval_s", r->t_eval);
        cJSON_AddNumberToObject(tm, "nodes_read", (double)ds->nodes_read);
        cJSON_AddNumberToObject(tm, "records_per_s", total > 0 ? (double)ds->nodes_read / total : 0);
        cJSON_AddNumberToObject(tm, "train_samples_per_s", r->t_train > 0 ? (double)n_s * o->epochs / r->t_train : 0);
        if (write_json(o->report, report)) goto out;
    }
    fprintf(stderr, "spec-train: wrote %s%s%s%s%s in %.2fs (%.0f records/s; training %.0f samples/s)\n", o->out,
            o->safetensors ? ", " : "", o->safetensors ? o->safetensors : "", o->report ? ", " : "",
            o->report ? o->report : "", total, total > 0 ? (double)ds->nodes_read / total : 0,
            r->t_train > 0 ? (double)n_s * o->epochs / r->t_train : 0);
    rc = 0;
out:
    cJSON_Delete(weights);
    cJSON_Delete(report);
    return rc;
}

int train_run(const TrainOpts *o) {
    if (check_opts(o)) return -1;
    if (check_writable(o->out, "--out") || check_writable(o->safetensors, "--safetensors") ||
        check_writable(o->report, "--report"))
        return -1;
    if (o->threads > 0) omp_set_num_threads(o->threads);
    Run run = {0}, *r = &run;
    r->o = o;
    r->threads = omp_get_max_threads();
    r->t_start = now_seconds();
    r->h = o->hidden;
    r->cls = classifier_new(o->hidden, o->n_feat, o->features);
    if (!r->cls) return -1;
    r->np = classifier_nparams(r->cls);
    r->group = 1;
    r->step_threads = 1;
    int rc = -1;
    if (run_prepare(r)) goto done;
    if (o->progress && !o->verbose) progress_start(&r->epoch_bar, "spec-train epochs", o->epochs);
    for (int e = 0; e < o->epochs; e++)
        if (run_epoch(r, e)) goto done;
    if (o->dump_dir && write_dump_manifest(r)) goto done;
    int sel = o->epochs - 1;
    if (r->has_eval && r->ds->eval.n_pos > 0 && o->select == SELECT_RANKING)
        sel = select_epoch_ranking(r->res, o->epochs);
    if (r->has_eval && r->ds->eval.n_pos > 0 && o->select == SELECT_BETA) {
        Rates *rt = xmalloc(sizeof(Rates) * o->epochs);
        for (int e = 0; e < o->epochs; e++) rt[e] = r->res[e].cls;
        sel = select_epoch(rt, o->epochs, o->similar_recall);
        free(rt);
    }
    classifier_set_params(r->cls, r->hist + (size_t)sel * r->np);
    if (r->has_eval)
        fprintf(stderr, "spec-train: exporting epoch %d (--select %s): recall %.4f theta %.4f at beta %.2f; at EAGLE-2's theta "
                "%.4f recall %.4f (EAGLE-2 top-%d: %.4f)\n",
                sel + 1, select_rule_name(o->select), r->res[sel].cls.recall, r->res[sel].cls.theta, o->beta,
                r->res[sel].e2.theta, r->res[sel].tree_recall_at_e2_theta, o->e2_topn, r->res[sel].e2.recall);
    if (r->has_eval && r->ds->eval.n_pos > 0 && r->res[sel].tree_recall_at_e2_theta < r->res[sel].e2.recall)
        fprintf(stderr, "spec-train: warning: epoch %d ranks the held-out nodes worse than P alone (recall %.4f at EAGLE-2's "
                "theta against %.4f): as a c2t policy it will verify more than EAGLE-2 at equal tau%s\n", sel + 1,
                r->res[sel].tree_recall_at_e2_theta, r->res[sel].e2.recall,
                o->select == SELECT_RANKING ? "" : "; --select ranking picks the epoch that ranks best");
    if (r->has_eval && r->ds->eval.n_pos > 0 && r->res[sel].cls.recall == 0) {
        err_set("epoch %d keeps none of the %lld accepted held-out nodes at beta %.2f (recall 0): as a c2t policy it "
                "would prune every tree; nothing written (more --epochs, a lower --beta, or more traces)",
                sel + 1, (long long)r->ds->eval.n_pos, o->beta);
        goto done;
    }

    if (!r->cls->trained_for.target_config_hash[0])
        fprintf(stderr, "spec-train: note: the traces do not name their target and draft; the weights file will not "
                "either, and spec-eval cannot check that they are used with the right pair\n");
    if (write_outputs(r, sel)) goto done;
    rc = 0;
done:
    if (r->neg) for (int j = 0; j < o->epochs; j++) free(r->neg[j]);
    free(r->neg);
    free(r->theta); free(r->grad); free(r->hist); free(r->by);
    for (int j = 0; j < CLS_MAX_FEAT; j++) free(r->bx[j]);
    free(r->dx); free(r->dy); free(r->perm); free(r->e2sel); free(r->res); free(r->train_loss);
    free(r->epoch_secs); free(r->epoch_threads);
    adam_free(&r->adam);
    ffn_work_free(r->fw);
    dataset_free(r->ds);
    classifier_free(r->cls);
    return rc;
}
