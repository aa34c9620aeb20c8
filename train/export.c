#include "train/export.h"
#include "kernels/base/util.h"
#include "infer/model/safetensors.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void classifier_set_params(Classifier *c, const float *theta) {
    int h = c->hidden, nf = c->n_feat;
    memcpy(c->fc1_w, theta, sizeof(float) * nf * h);
    memcpy(c->fc1_b, theta + nf * h, sizeof(float) * h);
    memcpy(c->fc2_w, theta + (nf + 1) * h, sizeof(float) * h);
    c->fc2_b = theta[(nf + 2) * h];
}

void classifier_get_params(const Classifier *c, float *theta) {
    int h = c->hidden, nf = c->n_feat;
    memcpy(theta, c->fc1_w, sizeof(float) * nf * h);
    memcpy(theta + nf * h, c->fc1_b, sizeof(float) * h);
    memcpy(theta + (nf + 1) * h, c->fc2_w, sizeof(float) * h);
    theta[(nf + 2) * h] = c->fc2_b;
}

static cJSON *float_array(const float *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *features_json(const Classifier *c) {
    cJSON *fs = cJSON_CreateArray();
    for (int k = 0; k < c->n_feat; k++) {
        const ClsFeature *f = &c->feat[k];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", cls_feature_names[f->id]);
        cJSON_AddStringToObject(o, "transform", cls_transform_name(f->kind));
        if (f->kind == CLS_LOG) cJSON_AddNumberToObject(o, "eps", (double)f->eps);
        cJSON_AddNumberToObject(o, "mean", (double)f->mean);
        cJSON_AddNumberToObject(o, "std", (double)f->std);
        cJSON_AddItemToArray(fs, o);
    }
    return fs;
}

cJSON *classifier_to_json(const Classifier *c) {
    int h = c->hidden;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", CLS_FORMAT);
    cJSON_AddNumberToObject(j, "version", CLS_VERSION);
    cJSON_AddItemToObject(j, "features", features_json(c));
    cJSON_AddNumberToObject(j, "hidden", h);
    cJSON_AddStringToObject(j, "activation", "relu");
    cJSON_AddStringToObject(j, "output", "sigmoid");
    cJSON_AddNumberToObject(j, "threshold", (double)c->threshold);
    const ClsTrainedFor *t = &c->trained_for;
    if (t->target_config_hash[0]) {
        cJSON *tf = cJSON_AddObjectToObject(j, "trained_for");
        cJSON_AddStringToObject(tf, "target", t->target);
        cJSON_AddStringToObject(tf, "target_config_hash", t->target_config_hash);
        cJSON_AddStringToObject(tf, "draft", t->draft);
        cJSON_AddStringToObject(tf, "draft_weights_hash", t->draft_weights_hash);
    }
    cJSON *w = cJSON_AddObjectToObject(j, "weights");
    cJSON *w1 = cJSON_CreateArray();
    for (int i = 0; i < h; i++) cJSON_AddItemToArray(w1, float_array(c->fc1_w + (size_t)c->n_feat * i, c->n_feat));
    cJSON_AddItemToObject(w, "fc1.weight", w1);
    cJSON_AddItemToObject(w, "fc1.bias", float_array(c->fc1_b, h));
    cJSON *w2 = cJSON_CreateArray();
    cJSON_AddItemToArray(w2, float_array(c->fc2_w, h));
    cJSON_AddItemToObject(w, "fc2.weight", w2);
    cJSON_AddItemToObject(w, "fc2.bias", float_array(&c->fc2_b, 1));
    return j;
}

int classifier_write_safetensors(const char *path, const Classifier *c) {
    int h = c->hidden;
    StWrite w[4] = {
        {"fc1.weight", DT_F32, 2, {h, c->n_feat}, c->fc1_w}, {"fc1.bias", DT_F32, 1, {h}, c->fc1_b},
        {"fc2.weight", DT_F32, 2, {1, h}, c->fc2_w}, {"fc2.bias", DT_F32, 1, {1}, &c->fc2_b}};
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", CLS_FORMAT);
    char num[32];
    snprintf(num, sizeof num, "%d", CLS_VERSION);
    cJSON_AddStringToObject(meta, "version", num);
    snprintf(num, sizeof num, "%d", h);
    cJSON_AddStringToObject(meta, "hidden", num);
    snprintf(num, sizeof num, "%.9g", (double)c->threshold);
    cJSON_AddStringToObject(meta, "threshold", num);
    char order[128];
    cJSON_AddStringToObject(meta, "feature_order", cls_features_str(c, order, sizeof order));
    cJSON *fs = features_json(c);
    char *fjs = cJSON_PrintUnformatted(fs);
    cJSON_AddStringToObject(meta, "features", fjs);
    free(fjs);
    cJSON_Delete(fs);
    return st_write_meta(path, w, 4, meta);
}

cJSON *rates_json(const Rates *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "recall", r->recall);
    cJSON_AddNumberToObject(o, "theta", r->theta);
    cJSON_AddNumberToObject(o, "precision", r->precision);
    cJSON_AddNumberToObject(o, "f1", r->f1);
    cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
    cJSON_AddNumberToObject(o, "tp", (double)r->c.tp);
    cJSON_AddNumberToObject(o, "fp", (double)r->c.fp);
    cJSON_AddNumberToObject(o, "fn", (double)r->c.fn);
    cJSON_AddNumberToObject(o, "tn", (double)r->c.tn);
    return o;
}

static cJSON *bucket_rates(Confusion c) {
    Rates r = rates_of(c);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "accuracy", r.accuracy);
    cJSON_AddNumberToObject(o, "precision", r.precision);
    cJSON_AddNumberToObject(o, "recall", r.recall);
    cJSON_AddNumberToObject(o, "f1", r.f1);
    cJSON_AddNumberToObject(o, "selected", (double)(c.tp + c.fp));
    return o;
}

cJSON *eval_json(const EvalResult *r, const EvalOpts *o, int with_tables) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "beta", o->beta);
    cJSON_AddNumberToObject(j, "trees", (double)r->n_trees);
    cJSON_AddNumberToObject(j, "nodes", (double)r->n_nodes);
    cJSON_AddNumberToObject(j, "positives", (double)r->n_pos);
    cJSON_AddNumberToObject(j, "auc", r->auc);
    cJSON_AddNumberToObject(j, "loss", r->loss);
    cJSON_AddItemToObject(j, "classifier", rates_json(&r->cls));
    cJSON_AddItemToObject(j, "c2t_tree", rates_json(&r->tree));
    cJSON_AddNumberToObject(j, "c2t_tree_recall_at_eagle2_theta", r->tree_recall_at_e2_theta);
    cJSON *e2 = rates_json(&r->e2);
    cJSON_AddNumberToObject(e2, "topn", o->e2_topn);
    cJSON_AddItemToObject(j, "eagle2", e2);
    if (!with_tables) return j;
    cJSON *sw = cJSON_AddArrayToObject(j, "beta_sweep");
    for (int k = 0; k < o->n_sweep; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "beta", o->sweep[k]);
        cJSON_AddItemToObject(e, "classifier", rates_json(&r->sweep_cls[k]));
        cJSON_AddItemToObject(e, "c2t_tree", rates_json(&r->sweep_tree[k]));
        cJSON_AddItemToArray(sw, e);
    }
    cJSON *bt = cJSON_AddArrayToObject(j, "entropy_buckets");
    for (int b = 0; b <= N_BUCKETS; b++) {
        cJSON *e = cJSON_CreateObject();
        const BucketTable *t = &r->buckets;
        char rng[16];
        cJSON_AddStringToObject(e, "range", entropy_bucket_name(b, rng));
        cJSON_AddNumberToObject(e, "nodes", (double)t->n[b]);
        cJSON_AddNumberToObject(e, "proportion", t->n[N_BUCKETS] ? (double)t->n[b] / t->n[N_BUCKETS] : 0);
        cJSON_AddItemToObject(e, "E2", bucket_rates(t->e2[b]));
        cJSON_AddItemToObject(e, "C2T", bucket_rates(t->tree[b]));
        cJSON_AddItemToArray(bt, e);
    }
    return j;
}
