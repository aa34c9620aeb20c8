#include "train/dataset.h"
#include "collect/trace.h"
#include "kernels/base/util.h"
#include "kernels/base/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TREE_BLOCK 65536
/* The target and draft that trace file f's trees come from, as its root
 * attributes say; every file must name the same pair (a classifier ranks
 * one draft's nodes for one target).  A file that does not say (synthetic
 * traces) leaves *t empty for all. */
static int trained_for_of(TraceReader *r, const char *const *paths, int f, ClsTrainedFor *t) {
    static const char *const keys[4] = {"target", "target_config_hash", "draft", "draft_weights_hash"};
    char *v[4];
    for (int k = 0; k < 4; k++) v[k] = trace_reader_attr(r, keys[k]);
    ClsTrainedFor mine = {0};
    int rc = 0;
    if (v[1] && v[3] && strlen(v[1]) == 16 && strlen(v[3]) == 16) {
        snprintf(mine.target, sizeof mine.target, "%s", v[0] ? v[0] : "");
        snprintf(mine.target_config_hash, sizeof mine.target_config_hash, "%s", v[1]);
        snprintf(mine.draft, sizeof mine.draft, "%s", v[2] ? v[2] : "");
        snprintf(mine.draft_weights_hash, sizeof mine.draft_weights_hash, "%s", v[3]);
    }
    if (f == 0) *t = mine;
    else if (!mine.target_config_hash[0] || !t->target_config_hash[0]) memset(t, 0, sizeof *t);
    else if (strcmp(mine.target_config_hash, t->target_config_hash) || strcmp(mine.draft_weights_hash, t->draft_weights_hash)) {
        err_set("%s: traces of target %s (config %s) and draft %s (weights %s), but %s's are of target %s (config %s) "
                "and draft %s (weights %s): a classifier is trained on one pair's traces", paths[f], mine.target,
                mine.target_config_hash, mine.draft, mine.draft_weights_hash, paths[0], t->target,
                t->target_config_hash, t->draft, t->draft_weights_hash);
        rc = -1;
    }
    for (int k = 0; k < 4; k++) free(v[k]);
    return rc;
}

void dataset_tree_nodes(const TraceNode *nd, int n, ClsNode *out) {
    for (int i = 0; i < n; i++) {
        const TraceNode *x = &nd[i];
        float parent_H = x->parent >= 0 ? nd[x->parent].H : x->H;   /* the root has no row: own H */
        out[i] = cls_node(x->P, x->H, x->depth, x->p, x->rank, parent_H);
    }
}

unsigned dataset_fields(const Classifier *c) {
    /* labels, tree structure and the entropy buckets' H always; token stays
     * on disk, p and rank unless a feature reads them */
    unsigned f = TRACE_F_P | TRACE_F_H | TRACE_F_DEPTH | TRACE_F_ACCEPTED | TRACE_F_PARENT;
    for (int k = 0; k < c->n_feat; k++) {
        if (c->feat[k].id == CLS_F_LOCAL_P) f |= TRACE_F_LOCALP;
        if (c->feat[k].id == CLS_F_RANK) f |= TRACE_F_RANK;
    }
    return f;
}

/* Ends a file's pass: its read time and rows go to the dataset's totals. */
static void cursor_done(TraceCursor *c, Dataset *ds) {
    ds->read_seconds += c->read_seconds;
    ds->nodes_read += c->nodes_read;
    trace_cursor_free(c);
}

/* Readers live in a side array so dataset.h need not include trace.h. */
typedef struct { Dataset pub; TraceReader **readers; unsigned fields; ClsNode *tree_buf; int tree_cap; } DatasetImpl;

/* The features of one tree's nodes, in a buffer the dataset owns; those
 * whose columns stay on disk (no chosen feature reads them) are 0, so that
 * stored nodes are fully defined. */
static const ClsNode *tree_nodes(DatasetImpl *im, const TraceNode *nd, int n) {
    if (n > im->tree_cap) {
        im->tree_cap = n;
        im->tree_buf = xrealloc(im->tree_buf, sizeof(ClsNode) * (size_t)n);
    }
    dataset_tree_nodes(nd, n, im->tree_buf);
    for (int i = 0; i < n; i++) {
        if (!(im->fields & TRACE_F_LOCALP)) im->tree_buf[i].v[CLS_F_LOCAL_P] = 0;
        if (!(im->fields & TRACE_F_RANK)) im->tree_buf[i].v[CLS_F_RANK] = 0;
    }
    return im->tree_buf;
}

void dataset_free(Dataset *ds) {
    if (!ds) return;
    DatasetImpl *im = (DatasetImpl *)ds;
    for (int f = 0; f < ds->nfiles; f++) {
        if (im->readers && im->readers[f]) trace_reader_close(im->readers[f]);
        free(ds->files[f].path);
    }
    free(im->readers);
    free(im->tree_buf);
    free(ds->files); free(ds->flag); free(ds->first); free(ds->count); free(ds->file_of);
    free(ds->pos);
    EvalSet *e = &ds->eval;
    free(e->start); free(e->x); free(e->P); free(e->H); free(e->y); free(e->parent);
    free(im);
}

/* Whether node x's P and H (the metrics read them), its chosen features
 * and its model inputs v[0..nf) are all finite; if not, a description of
 * the first bad one in why. */
static int node_finite(const Classifier *c, const ClsNode *x, const float *v, char *why, size_t size) {
    for (int id = CLS_F_P; id <= CLS_F_H; id++)
        if (!isfinite(x->v[id])) { snprintf(why, size, "%s = %g", cls_feature_names[id], (double)x->v[id]); return 0; }
    for (int k = 0; k < c->n_feat; k++) {
        float raw = x->v[c->feat[k].id];
        if (isfinite(raw) && isfinite(v[k])) continue;
        snprintf(why, size, "%s = %g%s", cls_feature_names[c->feat[k].id], (double)raw,
                 isfinite(raw) ? " after the input transform" : "");
        return 0;
    }
    return 1;
}

/* Pass A over every node (see dataset.h).  Returns 0 or -1 + err_set. */
static int scan_nodes(Dataset *ds, const DsOpts *o) {
    DatasetImpl *im = (DatasetImpl *)ds;
    EvalSet *E = &ds->eval;
    const Classifier *cls = o->cls;
    const int nf = cls->n_feat;
    int64_t max_tree = 0;
    for (int64_t t = 0; t < ds->n_trees; t++) if (ds->count[t] > max_tree) max_tree = ds->count[t];
    uint8_t *scratch = xmalloc(max_tree + 1);
    float *in = xmalloc(sizeof(float) * nf * (max_tree + 1));
    TraceCursor cur = {0};
    int rc = -1;
    int64_t pos_cap = 1024;
    ds->pos = xmalloc(sizeof(ClsNode) * pos_cap);
    double shift[CLS_MAX_FEAT] = {0}, s1[CLS_MAX_FEAT] = {0}, s2[CLS_MAX_FEAT] = {0};
    int have_shift = 0;
    int64_t total_nodes = 0, done_nodes = 0;
    for (int f = 0; f < ds->nfiles; f++) total_nodes += ds->files[f].n_nodes;
    Progress pr;
    if (o->progress) progress_start(&pr, "reading traces (nodes)", total_nodes);
    for (int f = 0; f < ds->nfiles; f++) {
        DsFile *F = &ds->files[f];
        trace_cursor_init(&cur, im->readers[f], im->fields);
        for (int64_t ti = 0; ti < F->n_trees; ti++) {
            int64_t g = F->tree0 + ti;
            int cnt = ds->count[g];
            const TraceNode *nd = trace_cursor_get(&cur, ti, ds->first[g], cnt);
            if (!nd || trace_check_tree(F->path, ti, ds->first[g], nd, cnt, scratch)) goto out;
            const ClsNode *xs = tree_nodes(im, nd, cnt);
            int bad = 0;
            for (int i = 0; i < cnt; i++) {
                float *v = in + nf * i;
                classifier_input(cls, &xs[i], v);
                char why[128];
                if (!node_finite(cls, &xs[i], v, why, sizeof why)) {
                    if (o->strict) {
                        err_set("%s: node row %lld (tree row %lld): non-finite feature (%s)", F->path,
                                (long long)(ds->first[g] + i), (long long)ti, why);
                        goto out;
                    }
                    bad++;
                }
            }
            done_nodes += cnt;
            if (o->progress) progress_update(&pr, done_nodes, NULL);
            if (bad) {
                ds->flag[g] |= DS_DROPPED;
                ds->dropped_trees++;
                F->dropped_trees++;
                ds->nonfinite_nodes += bad;
                continue;
            }
            if (ds->flag[g] & DS_EVAL) {
                int64_t s = E->start[E->n_trees];
                for (int i = 0; i < cnt; i++) {
                    E->x[s + i] = xs[i];
                    E->P[s + i] = nd[i].P; E->H[s + i] = nd[i].H;
                    E->y[s + i] = nd[i].accepted; E->parent[s + i] = nd[i].parent;
                    E->n_pos += nd[i].accepted;
                }
                E->n_trees++;
                E->start[E->n_trees] = s + cnt;
                E->n_nodes = s + cnt;
                ds->eval_trees++;
                continue;
            }
            ds->train_trees++;
            if (!have_shift && cnt) { for (int k = 0; k < nf; k++) shift[k] = in[k]; have_shift = 1; }
            for (int i = 0; i < cnt; i++) {
                for (int k = 0; k < nf; k++) {
                    double dv = (double)in[nf * i + k] - shift[k];
                    s1[k] += dv; s2[k] += dv * dv;
                }
                if (nd[i].accepted) {
                    if (ds->train_pos == pos_cap) { pos_cap *= 2; ds->pos = xrealloc(ds->pos, sizeof(ClsNode) * pos_cap); }
                    ds->pos[ds->train_pos++] = xs[i];
                }
            }
            ds->train_nodes += cnt;
        }
        cursor_done(&cur, ds);
    }
    ds->train_neg = ds->train_nodes - ds->train_pos;
    if (o->progress) progress_end(&pr, done_nodes, NULL);
    for (int k = 0; k < nf; k++) {
        double N = (double)ds->train_nodes, m = N > 0 ? s1[k] / N : 0;
        double var = N > 1 ? (s2[k] - N * m * m) / (N - 1) : 0;
        ds->feat_mean[k] = shift[k] + m;
        ds->feat_std[k] = var > 0 ? sqrt(var) : 0;
    }
    rc = 0;
out:
    trace_cursor_free(&cur); free(scratch); free(in);
    return rc;
}

Dataset *dataset_open(const char *const *paths, int n, const DsOpts *o) {
    if (n < 1) { err_set("no trace files given"); return NULL; }
    DatasetImpl *im = xcalloc(1, sizeof *im);
    Dataset *ds = &im->pub;
    ds->nfiles = n;
    ds->files = xcalloc(n, sizeof(DsFile));
    im->readers = xcalloc(n, sizeof(TraceReader *));
    im->fields = dataset_fields(o->cls);
    TraceTree *tb = NULL;

    /* files and their tree tables */
    for (int f = 0; f < n; f++) {
        DsFile *F = &ds->files[f];
        F->path = xstrdup(paths[f]);
        for (int g = 0; g < f; g++)
            if (!strcmp(paths[g], paths[f])) { err_set("%s: given twice with --traces", paths[f]); goto fail; }
        TraceReader *r = trace_open(paths[f]);
        if (!r) goto fail;
        im->readers[f] = r;
        F->n_trees = trace_reader_trees(r);
        F->n_nodes = trace_reader_nodes(r);
        if (F->n_trees <= 0 || F->n_nodes <= 0) {
            err_set("%s: empty trace file (%lld finished trees, %lld nodes)", paths[f], (long long)F->n_trees,
                    (long long)F->n_nodes);
            goto fail;
        }
        F->tree0 = ds->n_trees;
        ds->n_trees += F->n_trees;
        if (trained_for_of(r, paths, f, &ds->trained_for)) goto fail;
    }
    ds->flag = xcalloc(ds->n_trees, 1);
    ds->first = xmalloc(sizeof(int64_t) * ds->n_trees);
    ds->count = xmalloc(sizeof(int32_t) * ds->n_trees);
    ds->file_of = xmalloc(sizeof(int32_t) * ds->n_trees);
    tb = xmalloc(sizeof(TraceTree) * TREE_BLOCK);
    for (int f = 0; f < n; f++) {
        DsFile *F = &ds->files[f];
        for (int64_t t0 = 0; t0 < F->n_trees; t0 += TREE_BLOCK) {
            int64_t m = F->n_trees - t0 < TREE_BLOCK ? F->n_trees - t0 : TREE_BLOCK;
            double ts = now_seconds();
            if (trace_read_trees(im->readers[f], t0, m, tb)) goto fail;
            ds->read_seconds += now_seconds() - ts;
            for (int64_t i = 0; i < m; i++) {
                const TraceTree *t = &tb[i];
                int64_t g = F->tree0 + t0 + i;
                if (t->n_nodes < 0 || t->first_node < 0 || t->first_node + t->n_nodes > F->n_nodes) {
                    err_set("%s: tree row %lld: nodes [%lld, %lld) outside the %lld finished nodes", F->path,
                            (long long)(t0 + i), (long long)t->first_node,
                            (long long)(t->first_node + t->n_nodes), (long long)F->n_nodes);
                    goto fail;
                }
                ds->first[g] = t->first_node;
                ds->count[g] = t->n_nodes;
                ds->file_of[g] = f;
            }
        }
    }
    free(tb); tb = NULL;

    /* split by tree: exactly round(frac * trees) held out (selection sampling) */
    int64_t T = ds->n_trees, n_eval = 0;
    if (o->eval_frac > 0 && T >= 2) {
        n_eval = llround(o->eval_frac * (double)T);
        if (n_eval < 1) n_eval = 1;
        if (n_eval > T - 1) n_eval = T - 1;
    }
    {
        Rng r;
        rng_seed_stream(&r, o->seed, RNG_STREAM_SPLIT, 0);
        int64_t need = n_eval;
        for (int64_t t = 0; t < T && need > 0; t++)
            if ((int64_t)rng_below(&r, (uint64_t)(T - t)) < need) { ds->flag[t] |= DS_EVAL; need--; }
    }
    int64_t eval_cap = 0;
    for (int64_t t = 0; t < T; t++) if (ds->flag[t] & DS_EVAL) eval_cap += ds->count[t];
    EvalSet *E = &ds->eval;
    E->start = xmalloc(sizeof(int64_t) * (n_eval + 1));
    E->x = xmalloc(sizeof(ClsNode) * (eval_cap + 1));
    E->P = xmalloc(sizeof(float) * (eval_cap + 1));
    E->H = xmalloc(sizeof(float) * (eval_cap + 1));
    E->y = xmalloc(eval_cap + 1);
    E->parent = xmalloc(sizeof(int32_t) * (eval_cap + 1));
    E->start[0] = 0;

    /* the node pass, with the file hashes computed on another thread */
    int scan_rc = 0, hash_rc = 0;
    char hash_err[1024] = "", scan_err[1024] = "";   /* the error slot is per thread */
#pragma omp parallel sections num_threads(2)
    {
#pragma omp section
        {
            for (int f = 0; f < n && !hash_rc; f++)
                if (file_hash_hex(paths[f], ds->files[f].hash)) {
                    hash_rc = -1;
                    snprintf(hash_err, sizeof hash_err, "%s", err_get());
                }
        }
#pragma omp section
        {
            scan_rc = scan_nodes(ds, o);
            if (scan_rc) snprintf(scan_err, sizeof scan_err, "%s", err_get());
        }
    }
    if (scan_rc) { err_set("%s", scan_err); goto fail; }
    if (hash_rc) { err_set("%s", hash_err); goto fail; }
    return ds;
fail:
    free(tb);
    dataset_free(ds);
    return NULL;
}

/* ---- negative sampling ---- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* k distinct integers of [0, N), uniform (Floyd's algorithm), sorted. */
static int64_t *draw_sorted(Rng *r, int64_t N, int64_t k) {
    int64_t *out = xmalloc(sizeof(int64_t) * (k + 1));
    uint64_t cap = 16;
    while (cap < (uint64_t)k * 2) cap <<= 1;
    uint64_t *set = xcalloc(cap, sizeof(uint64_t));   /* value + 1; 0 = empty */
    int64_t m = 0;
    for (int64_t j = N - k; j < N; j++) {
        int64_t t = (int64_t)rng_below(r, (uint64_t)j + 1);
        /* insert t, or j if t is already in */
        for (int pass = 0; pass < 2; pass++) {
            uint64_t key = (uint64_t)(pass ? j : t) + 1, hsh = key * 0x9E3779B97F4A7C15ULL, i = hsh & (cap - 1);
            int found = 0;
            while (set[i]) {
                if (set[i] == key) { found = 1; break; }
                i = (i + 1) & (cap - 1);
            }
            if (!found) { set[i] = key; out[m++] = (int64_t)key - 1; break; }
        }
    }
    free(set);
    qsort(out, (size_t)m, sizeof(int64_t), cmp_i64);
    return out;
}

int64_t dataset_sample_negatives(Dataset *ds, uint64_t seed, int first_epoch, int n_epochs, int64_t k,
                                 ClsNode **out, int progress) {
    DatasetImpl *im = (DatasetImpl *)ds;
    int64_t N = ds->train_neg;
    if (k > N) k = N;
    if (k < 0) k = 0;
    int all = k == N;
    int64_t **idx = xcalloc(n_epochs, sizeof(int64_t *));
    int64_t *ptr = xcalloc(n_epochs, sizeof(int64_t));
    for (int e = 0; e < n_epochs; e++) {
        out[e] = xmalloc(sizeof(ClsNode) * (k + 1));
        if (!all) {
            Rng r;
            rng_seed_stream(&r, seed, RNG_STREAM_NEG, (uint64_t)(first_epoch + e));
            idx[e] = draw_sorted(&r, N, k);
        }
    }
    Progress pr;
    if (progress) progress_start(&pr, "drawing negatives (nodes)", ds->train_nodes);
    int64_t c = 0, done = 0, next = 0;
    TraceCursor cur = {0};
    int ok = 1;
    if (!all) {
        next = INT64_MAX;
        for (int e = 0; e < n_epochs; e++) if (k && idx[e][0] < next) next = idx[e][0];
    }
    for (int f = 0; f < ds->nfiles && ok; f++) {
        const DsFile *F = &ds->files[f];
        trace_cursor_init(&cur, im->readers[f], im->fields);
        for (int64_t ti = 0; ti < F->n_trees; ti++) {
            int64_t g = F->tree0 + ti;
            if (ds->flag[g]) continue;
            if (!all && next == INT64_MAX) break;   /* every epoch complete */
            int cnt = ds->count[g];
            const TraceNode *nd = trace_cursor_get(&cur, ti, ds->first[g], cnt);
            if (!nd) { ok = 0; break; }
            const ClsNode *xs = tree_nodes(im, nd, cnt);
            for (int i = 0; i < cnt; i++) {
                if (nd[i].accepted) continue;
                if (all || c == next) {
                    ClsNode ft = xs[i];
                    if (all) {
                        for (int e = 0; e < n_epochs; e++) out[e][c] = ft;
                    } else {
                        next = INT64_MAX;
                        for (int e = 0; e < n_epochs; e++) {
                            if (ptr[e] < k && idx[e][ptr[e]] == c) out[e][ptr[e]++] = ft;
                            if (ptr[e] < k && idx[e][ptr[e]] < next) next = idx[e][ptr[e]];
                        }
                    }
                }
                c++;
            }
            done += cnt;
            if (progress) progress_update(&pr, done, NULL);
        }
        cursor_done(&cur, ds);
    }
    trace_cursor_free(&cur);
    if (progress) progress_end(&pr, done, NULL);
    if (ok && !all)
        for (int e = 0; e < n_epochs; e++)
            if (ptr[e] != k) { err_set("negative sampling: drew %lld of %lld (trace changed while reading?)", (long long)ptr[e], (long long)k); ok = 0; }
    for (int e = 0; e < n_epochs; e++) free(idx[e]);
    free(idx); free(ptr);
    if (!ok) {
        for (int e = 0; e < n_epochs; e++) { free(out[e]); out[e] = NULL; }
        return -1;
    }
    return k;
}
