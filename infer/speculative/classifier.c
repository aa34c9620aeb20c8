#include "infer/speculative/classifier.h"
#include "infer/model/safetensors.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const cls_feature_names[CLS_N_KNOWN] = {"P", "H", "depth", "p", "rank", "parent_H"};

const ClsFeatureId cls_default_features[CLS_DEFAULT_NFEAT] = {CLS_F_P, CLS_F_H, CLS_F_DEPTH};

int cls_feature_parse(const char *name) {
    for (int k = 0; k < CLS_N_KNOWN; k++)
        if (!strcmp(name, cls_feature_names[k])) return k;
    return -1;
}

/* "P, H, depth, p, rank, parent_H" for error messages */
static const char *known_list(void) { return "P, H, depth, p, rank, parent_H"; }

int cls_features_parse(const char *list, ClsFeatureId ids[CLS_MAX_FEAT]) {
    int n = 0;
    const char *s = list;
    for (;;) {
        size_t len = strcspn(s, ",");
        char name[32];
        if (len == 0 || len >= sizeof name) { err_set("empty or overlong feature name in '%s' (known: %s)", list, known_list()); return -1; }
        memcpy(name, s, len);
        name[len] = 0;
        int id = cls_feature_parse(name);
        if (id < 0) { err_set("unknown feature '%s' (known: %s)", name, known_list()); return -1; }
        for (int k = 0; k < n; k++)
            if (ids[k] == (ClsFeatureId)id) { err_set("feature '%s' named twice", name); return -1; }
        if (n == CLS_MAX_FEAT) { err_set("more than %d features in '%s'", CLS_MAX_FEAT, list); return -1; }
        ids[n++] = (ClsFeatureId)id;
        if (!s[len]) break;
        s += len + 1;
    }
    return n;
}

const char *cls_features_str(const Classifier *c, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < c->n_feat && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", k ? "," : "", cls_feature_names[c->feat[k].id]);
    return buf;
}

int classifier_nparams(const Classifier *c) { return (c->n_feat + 2) * c->hidden + 1; }

const char *cls_transform_name(ClsTransform t) { return t == CLS_LOG ? "log" : "raw"; }

int cls_transform_parse(const char *s) {
    if (!strcmp(s, "raw")) return CLS_RAW;
    if (!strcmp(s, "log")) return CLS_LOG;
    return -1;
}

Classifier *classifier_new(int hidden, int n_feat, const ClsFeatureId *ids) {
    if (hidden < 1 || hidden > CLS_MAX_HIDDEN) {
        err_set("classifier: hidden size %d outside [1, %d]", hidden, CLS_MAX_HIDDEN);
        return NULL;
    }
    if (n_feat < 1 || n_feat > CLS_MAX_FEAT) {
        err_set("classifier: %d features, outside [1, %d]", n_feat, CLS_MAX_FEAT);
        return NULL;
    }
    for (int k = 0; k < n_feat; k++) {
        int bad = ids[k] < 0 || ids[k] >= CLS_N_KNOWN;
        for (int j = 0; j < k && !bad; j++) bad = ids[j] == ids[k];
        if (bad) { err_set("classifier: feature %d is unknown or named twice", k); return NULL; }
    }
    Classifier *c = xcalloc(1, sizeof *c);
    c->hidden = hidden;
    c->n_feat = n_feat;
    for (int k = 0; k < n_feat; k++) c->feat[k] = (ClsFeature){ids[k], CLS_RAW, 1e-6f, 0.0f, 1.0f};
    c->fc1_w = xcalloc((size_t)hidden * n_feat, sizeof(float));
    c->fc1_b = xcalloc(hidden, sizeof(float));
    c->fc2_w = xcalloc(hidden, sizeof(float));
    c->threshold = 0.5f;
    return c;
}

void classifier_free(Classifier *c) {
    if (!c) return;
    free(c->fc1_w); free(c->fc1_b); free(c->fc2_w);
    free(c);
}

int classifier_check(const Classifier *c, const char *where) {
    if (c->hidden < 1 || c->hidden > CLS_MAX_HIDDEN) {
        err_set("%s: hidden size %d outside [1, %d]", where, c->hidden, CLS_MAX_HIDDEN);
        return -1;
    }
    if (c->n_feat < 1 || c->n_feat > CLS_MAX_FEAT) {
        err_set("%s: %d features, outside [1, %d]", where, c->n_feat, CLS_MAX_FEAT);
        return -1;
    }
    for (int k = 0; k < c->n_feat; k++) {
        const ClsFeature *f = &c->feat[k];
        if (f->id < 0 || f->id >= CLS_N_KNOWN) { err_set("%s: features[%d]: unknown feature", where, k); return -1; }
        const char *nm = cls_feature_names[f->id];
        if (f->kind != CLS_RAW && f->kind != CLS_LOG) { err_set("%s: feature %s: unknown transform", where, nm); return -1; }
        if (f->kind == CLS_LOG && !(isfinite(f->eps) && f->eps > 0)) {
            err_set("%s: feature %s: log eps must be a finite number > 0", where, nm);
            return -1;
        }
        if (!isfinite(f->mean)) { err_set("%s: feature %s: mean is not finite", where, nm); return -1; }
        if (!(isfinite(f->std) && f->std > 0)) { err_set("%s: feature %s: std must be a finite number > 0", where, nm); return -1; }
    }
    const struct { const char *name; const float *v; int n; } t[] = {
        {"fc1.weight", c->fc1_w, c->n_feat * c->hidden}, {"fc1.bias", c->fc1_b, c->hidden},
        {"fc2.weight", c->fc2_w, c->hidden}, {"fc2.bias", &c->fc2_b, 1}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < t[i].n; j++)
            if (!isfinite(t[i].v[j])) {
                err_set("%s: %s has a non-finite value (%g at flat index %d)", where, t[i].name, (double)t[i].v[j], j);
                return -1;
            }
    if (!(c->threshold >= 0 && c->threshold <= 1)) { err_set("%s: threshold must be in [0, 1]", where); return -1; }
    return 0;
}

/* ---- JSON loading ---- */

/* Reads a numeric array of the expected shape [d0] or [d0][d1] into out. */
static int read_array(const char *path, const cJSON *w, const char *name, int d0, int d1, float *out) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(w, name);
    if (!a) { err_set("%s: weights: missing tensor %s", path, name); return -1; }
    char want[48];
    if (d1) snprintf(want, sizeof want, "[%d, %d]", d0, d1); else snprintf(want, sizeof want, "[%d]", d0);
    if (!cJSON_IsArray(a)) { err_set("%s: weights.%s: not an array, expected shape %s", path, name, want); return -1; }
    int n0 = cJSON_GetArraySize(a);
    if (!d1) {
        if (n0 != d0) { err_set("%s: weights.%s: shape [%d], expected %s", path, name, n0, want); return -1; }
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            if (cJSON_IsArray(e)) { err_set("%s: weights.%s: nested array, expected shape %s", path, name, want); return -1; }
            if (!cJSON_IsNumber(e)) { err_set("%s: weights.%s[%d]: not a number", path, name, i); return -1; }
            if (!isfinite(e->valuedouble) || !isfinite((float)e->valuedouble)) {
                err_set("%s: weights.%s[%d]: not a finite float (%g)", path, name, i, e->valuedouble);
                return -1;
            }
            out[i] = (float)e->valuedouble;
        }
        return 0;
    }
    int i = 0;
    for (const cJSON *r = a->child; r; r = r->next, i++) {
        int n1 = cJSON_IsArray(r) ? cJSON_GetArraySize(r) : -1;
        if (n0 != d0 || n1 != d1) {
            if (n1 < 0) err_set("%s: weights.%s: shape [%d], expected %s", path, name, n0, want);
            else err_set("%s: weights.%s: shape [%d, %d], expected %s", path, name, n0, n1, want);
            return -1;
        }
        int j = 0;
        for (const cJSON *e = r->child; e; e = e->next, j++) {
            if (!cJSON_IsNumber(e)) { err_set("%s: weights.%s[%d][%d]: not a number", path, name, i, j); return -1; }
            if (!isfinite(e->valuedouble) || !isfinite((float)e->valuedouble)) {
                err_set("%s: weights.%s[%d][%d]: not a finite float (%g)", path, name, i, j, e->valuedouble);
                return -1;
            }
            out[(size_t)i * d1 + j] = (float)e->valuedouble;
        }
    }
    if (n0 != d0) { err_set("%s: weights.%s: shape [%d, ...], expected %s", path, name, n0, want); return -1; }
    return 0;
}

static int get_num(const cJSON *o, const char *key, double def, double *out) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!e) { *out = def; return 0; }
    if (!cJSON_IsNumber(e)) return -1;
    *out = e->valuedouble;
    return 0;
}

/* One string field of "trained_for" into out (size bytes); a hash must be
 * 16 hex digits.  Absent: empty. */
static int trained_for_field(const char *path, const cJSON *o, const char *key, char *out, size_t size, int hash) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
    out[0] = 0;
    if (!e) return 0;
    if (!cJSON_IsString(e) || strlen(e->valuestring) >= size ||
        (hash && (strlen(e->valuestring) != 16 || strspn(e->valuestring, "0123456789abcdef") != 16))) {
        err_set("%s: trained_for.%s must be %s", path, key, hash ? "16 hex digits" : "a string");
        return -1;
    }
    memcpy(out, e->valuestring, strlen(e->valuestring) + 1);
    return 0;
}

static int read_trained_for(const char *path, const cJSON *j, ClsTrainedFor *t) {
    memset(t, 0, sizeof *t);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "trained_for");
    if (!o) return 0;
    if (!cJSON_IsObject(o)) { err_set("%s: \"trained_for\" must be an object", path); return -1; }
    if (trained_for_field(path, o, "target", t->target, sizeof t->target, 0) ||
        trained_for_field(path, o, "target_config_hash", t->target_config_hash, sizeof t->target_config_hash, 1) ||
        trained_for_field(path, o, "draft", t->draft, sizeof t->draft, 0) ||
        trained_for_field(path, o, "draft_weights_hash", t->draft_weights_hash, sizeof t->draft_weights_hash, 1))
        return -1;
    if (!t->target_config_hash[0] || !t->draft_weights_hash[0]) {
        err_set("%s: trained_for needs both target_config_hash and draft_weights_hash", path);
        return -1;
    }
    return 0;
}

static Classifier *from_json(const char *path, const cJSON *j) {
    if (!cJSON_IsObject(j)) { err_set("%s: not a JSON object", path); return NULL; }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CLS_FORMAT)) {
        err_set("%s: not a classifier weights file (\"format\" must be \"%s\")", path, CLS_FORMAT);
        return NULL;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
    if (!cJSON_IsNumber(ver)) { err_set("%s: missing \"version\"", path); return NULL; }
    if (ver->valuedouble != CLS_VERSION) {
        err_set("%s: unsupported version %g (this build reads version %d)", path, ver->valuedouble, CLS_VERSION);
        return NULL;
    }
    const cJSON *hid = cJSON_GetObjectItemCaseSensitive(j, "hidden");
    if (!cJSON_IsNumber(hid) || hid->valuedouble != floor(hid->valuedouble) || hid->valuedouble < 1 ||
        hid->valuedouble > CLS_MAX_HIDDEN) {
        err_set("%s: \"hidden\" must be an integer in [1, %d]", path, CLS_MAX_HIDDEN);
        return NULL;
    }
    int h = (int)hid->valuedouble;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "activation");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "relu"))) {
        err_set("%s: unsupported activation (only \"relu\")", path);
        return NULL;
    }
    const cJSON *outp = cJSON_GetObjectItemCaseSensitive(j, "output");
    if (outp && (!cJSON_IsString(outp) || strcmp(outp->valuestring, "sigmoid"))) {
        err_set("%s: unsupported output (only \"sigmoid\")", path);
        return NULL;
    }
    const cJSON *feats = cJSON_GetObjectItemCaseSensitive(j, "features");
    int nf = cJSON_IsArray(feats) ? cJSON_GetArraySize(feats) : 0;
    if (nf < 1 || nf > CLS_MAX_FEAT) {
        err_set("%s: \"features\" must list 1 to %d features (known: %s)", path, CLS_MAX_FEAT, known_list());
        return NULL;
    }
    ClsFeatureId ids[CLS_MAX_FEAT];
    int k = 0;
    for (const cJSON *f = feats->child; f; f = f->next, k++) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        int id = cJSON_IsString(nm) ? cls_feature_parse(nm->valuestring) : -1;
        if (id < 0) {
            err_set("%s: features[%d]: unknown feature name %s%s%s (known: %s)", path, k, cJSON_IsString(nm) ? "\"" : "",
                    cJSON_IsString(nm) ? nm->valuestring : "(not a string)", cJSON_IsString(nm) ? "\"" : "", known_list());
            return NULL;
        }
        for (int q = 0; q < k; q++)
            if (ids[q] == (ClsFeatureId)id) {
                err_set("%s: features[%d]: feature \"%s\" named twice", path, k, nm->valuestring);
                return NULL;
            }
        ids[k] = (ClsFeatureId)id;
    }
    Classifier *c = classifier_new(h, nf, ids);   /* cannot fail: hidden and ids are checked */
    if (!c) return NULL;
    k = 0;
    for (const cJSON *f = feats->child; f; f = f->next, k++) {
        const char *want = cls_feature_names[ids[k]];
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(f, "transform");
        int kind = CLS_RAW;
        if (tr) {
            if (!cJSON_IsString(tr)) { err_set("%s: feature %s: \"transform\" must be a string", path, want); goto fail; }
            kind = cls_transform_parse(tr->valuestring);
            if (kind < 0) {
                err_set("%s: feature %s: unknown transform \"%s\" (known: raw, log)", path, want, tr->valuestring);
                goto fail;
            }
        }
        double eps, mean, sd;
        if (get_num(f, "eps", 1e-6, &eps) || get_num(f, "mean", 0, &mean) || get_num(f, "std", 1, &sd)) {
            err_set("%s: feature %s: eps, mean and std must be numbers", path, want);
            goto fail;
        }
        c->feat[k] = (ClsFeature){ids[k], (ClsTransform)kind, (float)eps, (float)mean, (float)sd};
    }
    double thr;
    if (get_num(j, "threshold", 0.5, &thr)) { err_set("%s: \"threshold\" must be a number", path); goto fail; }
    c->threshold = (float)thr;
    if (read_trained_for(path, j, &c->trained_for)) goto fail;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "weights");
    if (!cJSON_IsObject(w)) { err_set("%s: missing \"weights\" object", path); goto fail; }
    float b2 = 0;
    if (read_array(path, w, "fc1.weight", h, nf, c->fc1_w) || read_array(path, w, "fc1.bias", h, 0, c->fc1_b) ||
        read_array(path, w, "fc2.weight", 1, h, c->fc2_w) || read_array(path, w, "fc2.bias", 1, 0, &b2))
        goto fail;
    c->fc2_b = b2;
    if (classifier_check(c, path)) goto fail;
    return c;
fail:
    classifier_free(c);
    return NULL;
}

Classifier *classifier_load(const char *path) {
    cJSON *j = read_json_file(path);
    if (!j) return NULL;
    Classifier *c = from_json(path, j);
    cJSON_Delete(j);
    return c;
}

int classifier_check_trained_for(const char *path, const char *target_dir, const char *target_config_hash,
                                 const char *draft_dir, int *unknown) {
    *unknown = 0;
    Classifier *c = classifier_load(path);
    if (!c) return -1;
    const ClsTrainedFor t = c->trained_for;
    classifier_free(c);
    if (!t.target_config_hash[0]) { *unknown = 1; return 0; }
    char draft_hash[17] = "";
    if (draft_dir && st_weights_hash_hex(draft_dir, draft_hash)) return -1;
    if (strcmp(t.target_config_hash, target_config_hash) || strcmp(t.draft_weights_hash, draft_hash)) {
        err_set("%s was trained for target %s (config %s) with draft %s (weights %s), not for target %s (config %s) "
                "with draft %s (weights %s): train one on traces of this pair, or pass --force",
                path, t.target, t.target_config_hash, t.draft, t.draft_weights_hash, target_dir, target_config_hash,
                draft_dir ? draft_dir : "(none)", draft_hash[0] ? draft_hash : "-");
        return -1;
    }
    return 0;
}

/* ---- forward: the arithmetic of kernels/base/node_net.h ---- */

_Static_assert(sizeof(ClsNode) == sizeof(float) * NODE_N_FEAT, "a ClsNode is a row of node_net's raw features");

NodeNet classifier_net(const Classifier *c) {
    NodeNet net = {.hidden = c->hidden, .n_feat = c->n_feat, .fc1_w = c->fc1_w, .fc1_b = c->fc1_b, .fc2_w = c->fc2_w,
                   .fc2_b = c->fc2_b};
    for (int k = 0; k < c->n_feat; k++) {
        const ClsFeature *f = &c->feat[k];
        net.in[k] = (NodeNetInput){(int)f->id, f->kind == CLS_LOG ? NODE_T_LOG : NODE_T_RAW, f->eps, f->mean, f->std};
    }
    return net;
}

void classifier_input(const Classifier *c, const ClsNode *node, float *x) {
    const NodeNet net = classifier_net(c);
    for (int k = 0; k < c->n_feat; k++) x[k] = node_net_input(&net, k, node->v);
}

void classifier_logits(const Classifier *c, const ClsNode *nodes, int n, float *logit) {
    const NodeNet net = classifier_net(c);
    node_net_logits(&net, nodes->v, CLS_N_KNOWN, n, logit);
}

float classifier_sigmoid(float z) { return node_net_sigmoid(z); }

void classifier_forward(const Classifier *c, const ClsNode *nodes, int n, float *conf) {
    classifier_logits(c, nodes, n, conf);
    for (int i = 0; i < n; i++) conf[i] = classifier_sigmoid(conf[i]);
}
