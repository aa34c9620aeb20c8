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
        tr_h5_err("%s: cannot open as HDF5", path);
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
