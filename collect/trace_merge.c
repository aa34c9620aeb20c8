/* Trace files: merging shards into one file (collect/trace.h). */
#include "collect/trace_internal.h"

/* ---- merge ---- */

typedef struct {
    char **names;
    int n, cap;
} NameList;

static herr_t name_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)loc; (void)info;
    NameList *l = data;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->names = xrealloc(l->names, (size_t)l->cap * sizeof *l->names);
    }
    l->names[l->n++] = xstrdup(name);
    return 0;
}

static void list_free(NameList *l) {
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
}

static int attr_is_float_or_int(hid_t loc, const char *key) {
    hid_t a = H5Aopen(loc, key, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    H5Aclose(a);
    return cls == H5T_FLOAT || cls == H5T_INTEGER;
}

/* Settings attributes must agree across the inputs; per-shard ones may not. */
static int compare_settings(TraceReader **in, const char *const *paths, int n) {
    for (int i = 1; i < n; i++) {
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: attributes of input 0 checked in input i; pass 1: the reverse */
            TraceReader *a = pass ? in[i] : in[0], *b = pass ? in[0] : in[i];
            const char *pa = pass ? paths[i] : paths[0], *pb = pass ? paths[0] : paths[i];
            NameList names = {0};
            hsize_t idx = 0;
            H5Aiterate2(a->file, H5_INDEX_NAME, H5_ITER_INC, &idx, name_cb, &names);
            int bad = 0;
            for (int k = 0; k < names.n && !bad; k++) {
                const char *key = names.names[k];
                if (tr_in_list(RESERVED_ATTRS, key) || trace_attr_per_shard(key)) continue;
                char *va = tr_attr_to_string(a->file, key), *vb = tr_attr_to_string(b->file, key);
                if (!vb) {
                    err_set("cannot merge: settings attribute '%s' is in %s but not in %s", key, pa, pb);
                    bad = 1;
                } else if (strcmp(va, vb) != 0 || attr_is_float_or_int(a->file, key) != attr_is_float_or_int(b->file, key)) {
                    err_set("cannot merge: settings attribute '%s' differs: %s has '%s', %s has '%s'", key, pa, va, pb, vb);
                    bad = 1;
                }
                free(va);
                free(vb);
            }
            list_free(&names);
            if (bad) return -1;
        }
    }
    return 0;
}

/* Copies input 0's attributes; per-shard attributes that differ become a
 * string of the inputs' values joined by "; " (in input order). */
static int copy_attrs(TraceWriter *w, TraceReader **in, const char *const *paths, int n) {
    NameList names = {0};
    hsize_t idx = 0;
    H5Aiterate2(in[0]->file, H5_INDEX_NAME, H5_ITER_INC, &idx, name_cb, &names);
    int rc = 0;
    for (int k = 0; k < names.n && rc == 0; k++) {
        const char *key = names.names[k];
        if (tr_in_list(RESERVED_ATTRS, key) || !strcmp(key, "merged_from")) continue;
        int same = 1;
        char *v0 = tr_attr_to_string(in[0]->file, key);
        for (int i = 1; i < n && same; i++) {
            char *vi = tr_attr_to_string(in[i]->file, key);
            same = vi && !strcmp(vi, v0);
            free(vi);
        }
        if (same && attr_is_float_or_int(in[0]->file, key)) {
            double d = 0;
            hid_t a = H5Aopen(in[0]->file, key, H5P_DEFAULT);
            H5Aread(a, H5T_NATIVE_DOUBLE, &d);
            H5Aclose(a);
            rc = trace_set_attr_num(w, key, d);
        } else if (same) {
            rc = trace_set_attr_str(w, key, v0);
        } else {
            size_t cap = 1;
            char **vals = xcalloc((size_t)n, sizeof *vals);
            for (int i = 0; i < n; i++) {
                vals[i] = tr_attr_to_string(in[i]->file, key);
                if (!vals[i]) vals[i] = xstrdup("");
                cap += strlen(vals[i]) + 2;
            }
            char *joined = xcalloc(cap, 1);
            for (int i = 0; i < n; i++) {
                if (i) strcat(joined, "; ");
                strcat(joined, vals[i]);
                free(vals[i]);
            }
            free(vals);
            rc = trace_set_attr_str(w, key, joined);
            free(joined);
        }
        free(v0);
    }
    list_free(&names);
    if (rc == 0) {
        size_t cap = 1;
        for (int i = 0; i < n; i++) cap += strlen(paths[i]) + 2;
        char *joined = xcalloc(cap, 1);
        for (int i = 0; i < n; i++) {
            if (i) strcat(joined, "; ");
            strcat(joined, paths[i]);
        }
        rc = trace_set_attr_str(w, "merged_from", joined);
        free(joined);
    }
    return rc;
}

#define MERGE_BATCH 65536

/* Refuses inputs that hold the same question (benchmark and question_id) twice,
 * within a file or across files: merging a shard twice would count its trees
 * twice in every statistic and in the classifier's training set. */
typedef struct {
    char key[TRACE_BENCHMARK_LEN + TRACE_QUESTION_ID_LEN + 2];   /* "benchmark/question_id" */
    int file;
} QuestionKey;
static int key_cmp(const void *a, const void *b) {
    return strcmp(((const QuestionKey *)a)->key, ((const QuestionKey *)b)->key);
}

static int check_no_duplicates(TraceReader **in, const char *const *paths, int n) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += in[i]->n[G_QUESTIONS];
    typedef QuestionKey Key;
    Key *keys = xmalloc(sizeof *keys * (size_t)(total ? total : 1));
    TraceQuestion *qs = xmalloc(sizeof *qs * 256);
    int64_t k = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        for (int64_t q = 0; q < in[i]->n[G_QUESTIONS] && rc == 0; q += 256) {
            int64_t len = in[i]->n[G_QUESTIONS] - q < 256 ? in[i]->n[G_QUESTIONS] - q : 256;
            if ((rc = trace_read_questions(in[i], q, len, qs)) != 0) break;
            for (int64_t j = 0; j < len; j++, k++) {
                snprintf(keys[k].key, sizeof keys[k].key, "%s/%s", qs[j].benchmark, qs[j].question_id);
                keys[k].file = i;
            }
        }
    if (rc == 0) {
        qsort(keys, (size_t)total, sizeof *keys, key_cmp);
        for (int64_t j = 1; j < total; j++)
            if (!strcmp(keys[j].key, keys[j - 1].key)) {
                int a = keys[j - 1].file < keys[j].file ? keys[j - 1].file : keys[j].file;
                int b = keys[j - 1].file < keys[j].file ? keys[j].file : keys[j - 1].file;
                if (a == b) err_set("merge: question %s is twice in %s", keys[j].key, paths[a]);
                else err_set("merge: question %s is in both %s and %s (its trees would count twice)", keys[j].key,
                             paths[a], paths[b]);
                rc = -1;
                break;
            }
    }
    free(keys);
    free(qs);
    return rc;
}

/* Appends every finished question of r to w, tree by tree. */
static int merge_one(TraceWriter *w, TraceReader *r) {
    int64_t nq = r->n[G_QUESTIONS], nt = r->n[G_TREES], nn = r->n[G_NODES];
    TraceTree *trees = xmalloc(sizeof *trees * 4096);
    TraceQuestion *qs = xmalloc(sizeof *qs * 256);
    TraceNode *win = NULL;
    int64_t win_start = 0, win_len = 0, win_cap = 0;
    int64_t t_start = 0, t_len = 0, t = 0, q_start = 0, q_len = 0;
    int rc = 0;
    for (int64_t q = 0; q < nq && rc == 0; q++) {
        while (rc == 0 && t < nt) {
            if (t >= t_start + t_len) {
                t_start = t;
                t_len = nt - t < 4096 ? nt - t : 4096;
                rc = trace_read_trees(r, t_start, t_len, trees);
                if (rc) break;
            }
            TraceTree tr = trees[t - t_start];
            if (tr.question < q || tr.question >= nq) {
                err_set("%s: tree %" PRId64 " belongs to question %d, out of order", r->path, t, tr.question);
                rc = -1;
                break;
            }
            if (tr.question != q) break;
            if (tr.n_nodes < 0 || tr.first_node < 0 || tr.first_node > nn - tr.n_nodes) {
                err_set("%s: tree %" PRId64 " has nodes [%" PRId64 ", +%d) outside n_nodes = %" PRId64, r->path, t,
                        tr.first_node, tr.n_nodes, nn);
                rc = -1;
                break;
            }
            if (tr.first_node < win_start || tr.first_node + tr.n_nodes > win_start + win_len) {
                int64_t len = tr.n_nodes > MERGE_BATCH ? tr.n_nodes : MERGE_BATCH;
                if (len > nn - tr.first_node) len = nn - tr.first_node;
                if (len > win_cap) {
                    free(win);
                    win_cap = len;
                    win = xmalloc(sizeof *win * (size_t)(win_cap ? win_cap : 1));
                }
                win_start = tr.first_node;
                win_len = len;
                if ((rc = trace_read_nodes(r, win_start, win_len, win)) != 0) break;
            }
            rc = trace_add_tree(w, &tr, tr.n_nodes ? win + (tr.first_node - win_start) : NULL);
            t++;
        }
        if (rc) break;
        if (q >= q_start + q_len) {
            q_start = q;
            q_len = nq - q < 256 ? nq - q : 256;
            if ((rc = trace_read_questions(r, q_start, q_len, qs)) != 0) break;
        }
        rc = trace_finish_question(w, qs[q - q_start].benchmark, qs[q - q_start].question_id);
    }
    if (rc == 0 && t != nt) {
        err_set("%s: %" PRId64 " trees belong to no finished question", r->path, nt - t);
        rc = -1;
    }
    free(trees);
    free(qs);
    free(win);
    return rc;
}

int trace_merge(const char *out, const char *const *inputs, int n, TraceCompress compress) {
    if (!out || !inputs || n < 1) { err_set("trace_merge: nothing to merge"); return -1; }
    struct stat st;
    if (stat(out, &st) == 0) { err_set("%s: already exists", out); return -1; }
    TraceReader **in = xcalloc((size_t)n, sizeof *in);
    char *tmp = NULL;
    TraceWriter *w = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (!(in[i] = trace_open(inputs[i]))) rc = -1;
    if (rc == 0) rc = compare_settings(in, inputs, n);
    if (rc == 0) rc = check_no_duplicates(in, inputs, n);
    if (rc == 0) {
        /* Written under a temporary name and renamed when complete: the
         * merge writer is not durable (no per-question flushes). */
        size_t len = strlen(out) + 16;
        tmp = xmalloc(len);
        snprintf(tmp, len, "%s.partial", out);
        unlink(tmp);
        TraceCreateOpts o = {0, 0, NULL};
        if (!(w = trace_create_ex(tmp, compress, &o))) rc = -1;
    }
    if (rc == 0) rc = copy_attrs(w, in, inputs, n);
    for (int i = 0; i < n && rc == 0; i++) rc = merge_one(w, in[i]);
    if (w) {
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", err_get());
        int crc = trace_close(w);
        if (rc == 0) rc = crc;
        else err_set("%s", saved);
    }
    if (rc == 0 && rename(tmp, out) != 0) {
        err_set("%s: cannot rename %s: %s", out, tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0 && tmp) unlink(tmp);
    for (int i = 0; i < n; i++) trace_reader_close(in[i]);
    free(in);
    free(tmp);
    return rc;
}
