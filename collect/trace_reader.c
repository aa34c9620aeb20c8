/* Trace files: the streaming reader (collect/trace.h). */
#include "collect/trace_internal.h"

TraceReader *trace_open(const char *path) {
    if (tr_init() < 0) return NULL;
    unsigned flags;
    if (tr_probe_file(path, &flags) < 0) return NULL;
    hid_t fapl = tr_make_fapl(flags != 0);
    /* A killed (or running) writer: open with SWMR read access, which HDF5
     * designed for reading a file whose writer has not closed it (among
     * other things it reads past the end of allocated space the superblock
     * recorded, which lags behind the data a killed writer left). */
    unsigned mode = H5F_ACC_RDONLY | (flags ? H5F_ACC_SWMR_READ : 0);
    hid_t file = H5Fopen(path, mode, fapl);
    H5Pclose(fapl);
    if (file < 0) {
        tr_h5_open_err(path, "cannot open as HDF5");
        return NULL;
    }
    TraceReader *r = xcalloc(1, sizeof *r);
    r->path = xstrdup(path);
    r->file = file;
    if (tr_check_schema(path, file, r->dset, r->n) < 0) {
        tr_close_dsets(r->dset);
        H5Fclose(file);
        tr_h5_forget();
        free(r->path);
        free(r);
        return NULL;
    }
    return r;
}

int64_t trace_reader_trees(const TraceReader *r) { return r ? r->n[G_TREES] : 0; }
int64_t trace_reader_nodes(const TraceReader *r) { return r ? r->n[G_NODES] : 0; }
int64_t trace_reader_questions(const TraceReader *r) { return r ? r->n[G_QUESTIONS] : 0; }

static hid_t mem_type(int kind) {
    switch (kind) {
    case K_F32: return H5T_NATIVE_FLOAT;
    case K_U8: return H5T_NATIVE_UINT8;
    case K_I16: return H5T_NATIVE_INT16;
    case K_I32: return H5T_NATIVE_INT32;
    case K_I64: return H5T_NATIVE_INT64;
    default: return -1;
    }
}

/* Rows [start, start + count) of column c into r->buf. */
static int read_col(TraceReader *r, int c, int64_t start, int64_t count) {
    tr_h5_errors_here();   /* readers may run on worker threads */
    size_t need = (size_t)count * COLS[c].size;
    if (need > r->buf_cap) {
        free(r->buf);
        r->buf_cap = need + need / 4;
        r->buf = xmalloc(r->buf_cap);
    }
    hsize_t s = (hsize_t)start, n = (hsize_t)count;
    hid_t fs = H5Dget_space(r->dset[c]);
    hid_t ms = H5Screate_simple(1, &n, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &s, NULL, &n, NULL);
    hid_t mt = COLS[c].kind == K_STR ? tr_file_type(K_STR, COLS[c].size) : mem_type(COLS[c].kind);
    herr_t rc = H5Dread(r->dset[c], mt, ms, fs, H5P_DEFAULT, r->buf);
    if (COLS[c].kind == K_STR) H5Tclose(mt);
    H5Sclose(ms);
    H5Sclose(fs);
    if (rc < 0) {
        tr_h5_err("%s: cannot read rows %" PRId64 "..%" PRId64 " of %s", r->path, start, start + count, COLS[c].path);
        return -1;
    }
    return 0;
}

static int check_range(TraceReader *r, int g, int64_t start, int64_t count, const void *out) {
    if (!r) { err_set("trace reader is NULL"); return -1; }
    if (start < 0 || count < 0 || start > r->n[g] - count || (count > 0 && !out)) {
        err_set("%s: rows [%" PRId64 ", %" PRId64 ") of %s out of range (%s = %" PRId64 ")", r->path, start,
                start + count, GROUP_NAME[g], COUNT_ATTR[g], r->n[g]);
        return -1;
    }
    return 0;
}

#define SCATTER(c, T, field)                                              \
    do {                                                                  \
        if (read_col(r, c, start, count) < 0) return -1;                  \
        const T *src = r->buf;                                            \
        for (int64_t i = 0; i < count; i++) out[i].field = src[i];        \
    } while (0)

int trace_read_node_fields(TraceReader *r, int64_t start, int64_t count, TraceNode *out, unsigned fields) {
    if (check_range(r, G_NODES, start, count, out) < 0) return -1;
    if (count == 0) return 0;
    if (fields & TRACE_F_P) SCATTER(C_P, float, P);
    if (fields & TRACE_F_H) SCATTER(C_H, float, H);
    if (fields & TRACE_F_DEPTH) SCATTER(C_DEPTH, uint8_t, depth);
    if (fields & TRACE_F_ACCEPTED) SCATTER(C_ACC, uint8_t, accepted);
    if (fields & TRACE_F_TOKEN) SCATTER(C_TOKEN, int32_t, token);
    if (fields & TRACE_F_PARENT) SCATTER(C_PARENT, int32_t, parent);
    if (fields & TRACE_F_LOCALP) SCATTER(C_LP, float, p);
    if (fields & TRACE_F_RANK) SCATTER(C_RANK, uint8_t, rank);
    return 0;
}

int trace_read_nodes(TraceReader *r, int64_t start, int64_t count, TraceNode *out) {
    return trace_read_node_fields(r, start, count, out, TRACE_F_ALL);
}

int trace_read_trees(TraceReader *r, int64_t start, int64_t count, TraceTree *out) {
    if (check_range(r, G_TREES, start, count, out) < 0) return -1;
    if (count == 0) return 0;
    SCATTER(C_TQ, int32_t, question);
    SCATTER(C_TURN, int16_t, turn);
    SCATTER(C_CYCLE, int32_t, cycle);
    SCATTER(C_FIRST, int64_t, first_node);
    SCATTER(C_NN, int32_t, n_nodes);
    SCATTER(C_ALEN, int32_t, accept_len);
    return 0;
}

int trace_read_questions(TraceReader *r, int64_t start, int64_t count, TraceQuestion *out) {
    if (check_range(r, G_QUESTIONS, start, count, out) < 0) return -1;
    if (count == 0) return 0;
    if (read_col(r, C_BENCH, start, count) < 0) return -1;
    for (int64_t i = 0; i < count; i++) {
        memcpy(out[i].benchmark, (char *)r->buf + i * TRACE_BENCHMARK_LEN, TRACE_BENCHMARK_LEN);
        out[i].benchmark[TRACE_BENCHMARK_LEN] = 0;
    }
    if (read_col(r, C_QID, start, count) < 0) return -1;
    for (int64_t i = 0; i < count; i++) {
        memcpy(out[i].question_id, (char *)r->buf + i * TRACE_QUESTION_ID_LEN, TRACE_QUESTION_ID_LEN);
        out[i].question_id[TRACE_QUESTION_ID_LEN] = 0;
    }
    return 0;
}

char *trace_reader_attr(TraceReader *r, const char *key) {
    if (!r || !key) return NULL;
    return tr_attr_to_string(r->file, key);
}

void trace_reader_close(TraceReader *r) {
    if (!r) return;
    tr_close_dsets(r->dset);
    if (r->file >= 0) H5Fclose(r->file);
    tr_h5_forget();
    free(r->buf);
    free(r->path);
    free(r);
}

void trace_cursor_init(TraceCursor *c, TraceReader *r, unsigned fields) {
    memset(c, 0, sizeof *c);
    c->r = r;
    c->fields = fields;
    c->start = -1;
}

const TraceNode *trace_cursor_get(TraceCursor *c, int64_t tree_row, int64_t first, int64_t count) {
    if (count == 0) return c->buf;
    if (first >= c->start && first + count <= c->start + c->len) return c->buf + (first - c->start);
    int64_t len = count > TRACE_CURSOR_BLOCK ? count : TRACE_CURSOR_BLOCK, n = trace_reader_nodes(c->r);
    if (first + len > n) len = n - first;
    if (len < count) len = count;   /* out of range: trace_read_node_fields says so */
    if (len > c->cap) {
        c->cap = len;
        c->buf = xrealloc(c->buf, sizeof(TraceNode) * (size_t)len);
    }
    double t0 = now_seconds();
    int rc = trace_read_node_fields(c->r, first, len, c->buf, c->fields);
    if (rc && len > count) {
        /* a damaged chunk somewhere in the block: this tree's rows alone
         * may be fine; if not, the error names this tree */
        len = count;
        rc = trace_read_node_fields(c->r, first, len, c->buf, c->fields);
    }
    if (rc) {
        /* "<path>: cannot read rows ..." -> "<path>: tree row T: cannot ..." */
        char why[1024];
        snprintf(why, sizeof why, "%s", err_get());
        size_t n = strlen(c->r->path);
        const char *rest = !strncmp(why, c->r->path, n) && !strncmp(why + n, ": ", 2) ? why + n + 2 : why;
        err_set("%s: tree row %" PRId64 ": %s", c->r->path, tree_row, rest);
        return NULL;
    }
    c->read_seconds += now_seconds() - t0;
    c->nodes_read += len;
    c->start = first;
    c->len = len;
    return c->buf;
}

void trace_cursor_free(TraceCursor *c) {
    free(c->buf);
    c->buf = NULL;
    c->cap = c->len = 0;
    c->start = -1;
}

/* 0 if every node's chain of parents reaches the root (validated indices). */
static int acyclic(const TraceNode *nd, int n, uint8_t *state) {
    memset(state, 0, (size_t)n);   /* 0 unknown, 1 on the current path, 2 reaches the root */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j >= 0 && state[j] == 0) { state[j] = 1; j = nd[j].parent; }
        if (j >= 0 && state[j] == 1) return -1;
        for (j = i; j >= 0 && state[j] == 1; j = nd[j].parent) state[j] = 2;
    }
    return 0;
}

int trace_check_tree(const char *path, int64_t tree_row, int64_t first_row, const TraceNode *nd, int n,
                     uint8_t *scratch) {
    for (int i = 0; i < n; i++) {
        const TraceNode *x = &nd[i];
        if (x->accepted > 1) {
            err_set("%s: node row %lld: accepted = %d, expected 0 or 1", path, (long long)(first_row + i), x->accepted);
            return -1;
        }
        if (x->parent < -1 || x->parent >= n || x->parent == i) {
            err_set("%s: node row %lld (tree row %lld): parent %d is not another node of its tree (%d nodes)", path,
                    (long long)(first_row + i), (long long)tree_row, x->parent, n);
            return -1;
        }
    }
    if (n > 0 && acyclic(nd, n, scratch)) {
        err_set("%s: tree row %lld: the parent links form a cycle", path, (long long)tree_row);
        return -1;
    }
    return 0;
}
