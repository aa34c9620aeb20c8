/* Trace files (collect/trace.h, docs/trace_format.md): writer, streaming
 * reader and merge on HDF5 1.10+.
 *
 * How a finished question survives kill -9 at any moment
 * -------------------------------------------------------
 * The file is written in SWMR mode (superblock v3, latest format, extensible
 * array chunk indexes).  In that mode HDF5 orders its metadata flushes so that
 * the file on disk is consistent at every instant (what a concurrent reader
 * relies on: a parent is written after its children, a chunk before the
 * index entry that points to it), and it never frees the old place of a
 * chunk it relocates.  On top of that the writer keeps three rules:
 *   1. Chunks are written whole by this code (H5Dwrite_chunk), encoded by
 *      running the dataset's own filter pipeline on an in-memory scratch
 *      dataset; HDF5 never re-encodes a chunk of ours.  Every stored chunk is
 *      either "compressed" (smaller than the raw chunk, every filter applied)
 *      or "raw" (the plain bytes, every filter skipped in its mask).
 *   2. HDF5 writes a chunk in place when the stored one has the same size
 *      (else somewhere new).  A write torn by SIGKILL (the kernel stops
 *      between two pages) must not damage the finished rows a stored chunk
 *      holds, so in place is allowed for raw over raw only, where those rows
 *      are the same bytes before and after.  A compressed encoding of exactly
 *      the stored size is skipped if its bytes are the stored ones, and
 *      stored raw otherwise (a new place, as the sizes now differ).
 *   3. A question is finished in two flushed steps: first every row and the
 *      extents (H5Fflush, fdatasync), then the counts n_questions, n_trees,
 *      n_nodes (H5Awrite, H5Fflush, fdatasync).  The counts are attributes in
 *      the first chunk of the root object header, which is created before
 *      anything else and lies in the file's first 4 KiB page, so the count
 *      update is one write of one page.
 * A reader trusts the counts, never the extents.  A writer killed in SWMR
 * mode leaves the superblock's "open for writing" flags set and, possibly,
 * its recorded end of allocated space (EOA) behind chunks the flushed indexes
 * already point to.  trace_open opens such a file with SWMR read access
 * (which reads past the EOA); trace_resume clears the flags and moves the EOA
 * to the end of the file before it allocates anything.
 *
 * Chunk placement: rows are buffered per column in the current "tail" chunk;
 * a tail that fills up is written at once, and a partial tail at every
 * finished question.  Each rewrite of a compressed partial tail leaves its old
 * copy behind (SWMR never frees), which costs at most one partial chunk per
 * dataset per question; bench_trace reports bytes per record with it.
 *
 * tests/test_trace.c checks these rules by killing writers at random moments,
 * at every step of a commit (trace_crash_at) and in the middle of every
 * in-place chunk rewrite (trace_tear_at). */
#include "collect/trace.h"
#include "collect/zstd_filter.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "trace.c keeps chunk buffers in the file's byte order (little-endian)");

/* ---- schema ---- */

enum { G_NODES, G_TREES, G_QUESTIONS, NGROUPS };
enum { K_F32, K_U8, K_I16, K_I32, K_I64, K_STR };
enum {
    C_P, C_H, C_DEPTH, C_ACC, C_TOKEN, C_PARENT, C_LP, C_RANK,
    C_TQ, C_TURN, C_CYCLE, C_FIRST, C_NN, C_ALEN,
    C_BENCH, C_QID, NCOLS
};

typedef struct {
    const char *path;
    int group, kind;
    size_t size;
} ColDef;

static const ColDef COLS[NCOLS] = {
    {"/nodes/P", G_NODES, K_F32, 4},
    {"/nodes/H", G_NODES, K_F32, 4},
    {"/nodes/depth", G_NODES, K_U8, 1},
    {"/nodes/accepted", G_NODES, K_U8, 1},
    {"/nodes/token", G_NODES, K_I32, 4},
    {"/nodes/parent", G_NODES, K_I32, 4},
    {"/nodes/p", G_NODES, K_F32, 4},
    {"/nodes/rank", G_NODES, K_U8, 1},
    {"/trees/question", G_TREES, K_I32, 4},
    {"/trees/turn", G_TREES, K_I16, 2},
    {"/trees/cycle", G_TREES, K_I32, 4},
    {"/trees/first_node", G_TREES, K_I64, 8},
    {"/trees/n_nodes", G_TREES, K_I32, 4},
    {"/trees/accept_len", G_TREES, K_I32, 4},
    {"/questions/benchmark", G_QUESTIONS, K_STR, TRACE_BENCHMARK_LEN},
    {"/questions/question_id", G_QUESTIONS, K_STR, TRACE_QUESTION_ID_LEN},
};
static const char *const GROUP_NAME[NGROUPS] = {"/nodes", "/trees", "/questions"};
static const char *const COUNT_ATTR[NGROUPS] = {"n_nodes", "n_trees", "n_questions"};
static const hsize_t GROUP_CHUNK[NGROUPS] = {TRACE_CHUNK_NODES, TRACE_CHUNK_TREES, TRACE_CHUNK_QUESTIONS};

static const char *const KIND_NAME[] = {"float32", "uint8", "int16", "int32", "int64", "fixed-length string"};

/* Root attributes trace_merge lets differ between shards. */
static const char *const PER_SHARD_ATTRS[] = {
    "shard", "device", "start_time", "end_time", "host", "hostname", "pid", "resumed", "compression", "merged_from", NULL,
};
/* Root attributes the library owns. */
static const char *const RESERVED_ATTRS[] = {"schema_version", "n_questions", "n_trees", "n_nodes", "compression", NULL};

static int in_list(const char *const *list, const char *key) {
    for (; *list; list++) if (!strcmp(*list, key)) return 1;
    return 0;
}

int trace_attr_per_shard(const char *key) { return key && in_list(PER_SHARD_ATTRS, key); }

static const char *const COMPRESS_NAME[] = {"zstd", "gzip", "none"};

const char *trace_compress_name(TraceCompress c) {
    return (unsigned)c <= TRACE_NONE ? COMPRESS_NAME[c] : "?";
}

int trace_compress_parse(const char *name, TraceCompress *out) {
    for (int i = 0; i <= TRACE_NONE; i++)
        if (name && !strcmp(name, COMPRESS_NAME[i])) { *out = (TraceCompress)i; return 0; }
    err_set("unknown compression '%s' (expected zstd, gzip or none)", name ? name : "");
    return -1;
}

/* ---- HDF5 helpers ---- */

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    char *buf = data;
    if (n == 0 && e->desc) snprintf(buf, 256, "%s", e->desc);
    return 0;
}

/* HDF5 clears its error stack at the entry of every API call, so cleanup
 * calls between a failure and its report would lose the reason.  Instead of
 * printing the stack (the default), HDF5 calls this when an API call fails:
 * it keeps the innermost (most specific) message. */
static _Thread_local char last_reason[256];
static herr_t record_reason(hid_t estack, void *data) {
    (void)data;
    char buf[256] = "";
    H5Ewalk2(estack, H5E_WALK_UPWARD, walk_cb, buf);
    if (buf[0]) memcpy(last_reason, buf, sizeof buf);
    return 0;
}

/* Forget failures that were expected and handled. */
static void h5_forget(void) {
    H5Eclear2(H5E_DEFAULT);
    last_reason[0] = 0;
}

/* The reason of the last HDF5 failure (or ""), consumed. */
static const char *h5_reason(void) {
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s", last_reason);
    h5_forget();
    for (char *c = buf; *c; c++) if (*c == '\n') *c = ' ';
    return buf;
}

/* err_set with ": <HDF5's reason>" appended when HDF5 gave one. */
static void h5_err(const char *fmt, ...) PRINTF_LIKE(1, 2);
static void h5_err(const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *why = h5_reason();
    if (*why) err_set("%s: %s", msg, why);
    else err_set("%s", msg);
}

/* Registers the zstd filter and routes HDF5's error reports to
 * record_reason (nothing is printed: errors reach the caller as one line). */
static int trace_init(void) {
    if (trace_register_zstd() < 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, record_reason, NULL);
    h5_forget();
    return 0;
}

static hid_t file_type(int kind, size_t size) {
    switch (kind) {
    case K_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case K_U8: return H5Tcopy(H5T_STD_U8LE);
    case K_I16: return H5Tcopy(H5T_STD_I16LE);
    case K_I32: return H5Tcopy(H5T_STD_I32LE);
    case K_I64: return H5Tcopy(H5T_STD_I64LE);
    default: {
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, size);
        H5Tset_strpad(t, H5T_STR_NULLPAD);
        H5Tset_cset(t, H5T_CSET_UTF8);
        return t;
    }
    }
}

/* Does a stored dataset type match the schema's kind? */
static int type_matches(hid_t t, int kind, size_t size) {
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    switch (kind) {
    case K_F32: return cls == H5T_FLOAT && sz == 4;
    case K_STR: return cls == H5T_STRING && H5Tis_variable_str(t) == 0 && sz == size;
    default:
        if (cls != H5T_INTEGER || sz != size) return 0;
        return (H5Tget_sign(t) == H5T_SGN_NONE) == (kind == K_U8);
    }
}

static void describe_type(hid_t t, char *buf, size_t n) {
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cls == H5T_FLOAT) snprintf(buf, n, "float%zu", sz * 8);
    else if (cls == H5T_INTEGER) snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
    else if (cls == H5T_STRING) snprintf(buf, n, H5Tis_variable_str(t) > 0 ? "variable-length string" : "string of %zu bytes", sz);
    else snprintf(buf, n, "type class %d", (int)cls);
}

/* ---- attributes ---- */

static int attr_exists(hid_t loc, const char *key) { return H5Aexists(loc, key) > 0; }

/* A root attribute as text: strings as stored, integers in decimal, floats
 * with %.17g (integral values without a fraction).  NULL if absent, "" if
 * unreadable. */
static char *attr_to_string(hid_t loc, const char *key) {
    if (!attr_exists(loc, key)) return NULL;
    hid_t a = H5Aopen(loc, key, H5P_DEFAULT);
    if (a < 0) { h5_forget(); return NULL; }
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    hssize_t npts = H5Sget_simple_extent_npoints(s);
    char *out = NULL;
    H5T_class_t cls = H5Tget_class(t);
    if (npts != 1) {
        out = xstrdup("<non-scalar>");
    } else if (cls == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(t));
            char *v = NULL;
            if (H5Aread(a, mt, &v) >= 0 && v) out = xstrdup(v);
            if (v) H5free_memory(v);
            H5Tclose(mt);
        } else {
            size_t n = H5Tget_size(t);
            char *v = xcalloc(n + 1, 1);
            if (H5Aread(a, t, v) >= 0) { v[n] = 0; out = v; }
            else free(v);
        }
    } else if (cls == H5T_INTEGER) {
        long long v = 0;
        if (H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0) {
            char b[32];
            snprintf(b, sizeof b, "%lld", v);
            out = xstrdup(b);
        }
    } else if (cls == H5T_FLOAT) {
        double v = 0;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) {
            char b[40];
            if (v == (double)(long long)v && v > -9e15 && v < 9e15) snprintf(b, sizeof b, "%lld", (long long)v);
            else snprintf(b, sizeof b, "%.17g", v);
            out = xstrdup(b);
        }
    } else {
        out = xstrdup("<unsupported type>");
    }
    H5Tclose(t);
    H5Sclose(s);
    H5Aclose(a);
    if (!out) { h5_forget(); out = xstrdup(""); }
    return out;
}

static int read_int_attr(hid_t loc, const char *key, int64_t *v) {
    if (!attr_exists(loc, key)) return -1;
    hid_t a = H5Aopen(loc, key, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    long long x = 0;
    int rc = (cls == H5T_INTEGER && H5Aread(a, H5T_NATIVE_LLONG, &x) >= 0) ? 0 : -1;
    H5Aclose(a);
    *v = x;
    return rc;
}

/* Creates or overwrites a scalar attribute of file type ft from buf (memory
 * type mt).  Keeps an existing attribute of the same type (H5Awrite in place),
 * otherwise replaces it. */
static int put_attr(hid_t loc, const char *key, hid_t ft, hid_t mt, const void *buf) {
    hid_t a = -1;
    if (attr_exists(loc, key)) {
        a = H5Aopen(loc, key, H5P_DEFAULT);
        hid_t t = a >= 0 ? H5Aget_type(a) : -1;
        int same = t >= 0 && H5Tequal(t, ft) > 0;
        if (t >= 0) H5Tclose(t);
        if (!same) {
            if (a >= 0) H5Aclose(a);
            a = -1;
            if (H5Adelete(loc, key) < 0) return -1;
        }
    }
    if (a < 0) {
        hid_t s = H5Screate(H5S_SCALAR);
        a = H5Acreate2(loc, key, ft, s, H5P_DEFAULT, H5P_DEFAULT);
        H5Sclose(s);
        if (a < 0) return -1;
    }
    int rc = H5Awrite(a, mt, buf) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

static int put_str_attr(hid_t loc, const char *key, const char *value) {
    size_t n = strlen(value);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *buf = xcalloc(n + 1, 1);
    memcpy(buf, value, n);
    int rc = put_attr(loc, key, t, t, buf);
    free(buf);
    H5Tclose(t);
    return rc;
}

static int put_i64_attr(hid_t loc, const char *key, int64_t v) {
    long long x = v;
    return put_attr(loc, key, H5T_STD_I64LE, H5T_NATIVE_LLONG, &x);
}

/* ---- opening files ---- */

/* Looks at the superblock ourselves before HDF5 does: a missing, empty or
 * non-HDF5 file gets a plain message, and the v3 superblock's status flags
 * tell whether a writer left the file open (killed, or still running).
 * Returns 0 (flags in *flags: 1 = write, 2 = SWMR write) or -1 + err_set. */
static int probe_file(const char *path, unsigned *flags) {
    *flags = 0;
    struct stat st;
    if (stat(path, &st) != 0) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    if (S_ISDIR(st.st_mode)) { err_set("%s: is a directory, not a trace file", path); return -1; }
    if (st.st_size == 0) { err_set("%s: empty file (0 bytes), not an HDF5 trace file", path); return -1; }
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char sb[16];
    int found = 0;
    /* The superblock sits at 0, 512, 1024, 2048, ... (after a user block). */
    for (long long off = 0; off + 8 <= (long long)st.st_size; off = off ? off * 2 : 512) {
        if (fseeko(f, off, SEEK_SET) != 0) break;
        size_t got = fread(sb, 1, sizeof sb, f);
        if (got >= 8 && !memcmp(sb, sig, 8)) {
            found = 1;
            /* version 3: status flags, 0x1 open for writing, 0x4 for SWMR writing */
            if (got >= 12 && sb[8] >= 3) *flags = (sb[11] & 0x1 ? 1u : 0u) | (sb[11] & 0x4 ? 2u : 0u);
            break;
        }
    }
    fclose(f);
    if (!found) { err_set("%s: not an HDF5 file (no HDF5 signature)", path); return -1; }
    return 0;
}

/* File access properties: latest format (SWMR needs superblock v3); for a
 * file a writer did not close, ignore its status flags in memory (the
 * h5clear properties) and skip the "truncated file" check, as the end of
 * allocated space may not have been written. */
static hid_t make_fapl(int unclosed) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    if (unclosed) {
        hbool_t yes = 1;
        if (H5Pexist(fapl, "clear_status_flags") > 0) H5Pset(fapl, "clear_status_flags", &yes);
        if (H5Pexist(fapl, "skip_eof_check") > 0) H5Pset(fapl, "skip_eof_check", &yes);
        h5_forget();
    }
    return fapl;
}

/* Checks schema_version, every dataset's presence, type and rank, the count
 * attributes and that the extents hold the counted rows.  Opens dsets[]. */
static int check_schema(const char *path, hid_t file, hid_t *dsets, int64_t n[NGROUPS]) {
    for (int c = 0; c < NCOLS; c++) dsets[c] = -1;
    int64_t ver;
    if (!attr_exists(file, "schema_version")) {
        err_set("%s: not a trace file (no root attribute schema_version)", path);
        return -1;
    }
    if (read_int_attr(file, "schema_version", &ver) < 0) {
        h5_err("%s: cannot read root attribute schema_version", path);
        return -1;
    }
    if (ver != TRACE_SCHEMA_VERSION) {
        err_set("%s: schema_version %" PRId64 ", this build reads version %d", path, ver, TRACE_SCHEMA_VERSION);
        return -1;
    }
    for (int g = 0; g < NGROUPS; g++) {
        if (H5Lexists(file, GROUP_NAME[g], H5P_DEFAULT) <= 0) {
            h5_forget();
            err_set("%s: missing group %s", path, GROUP_NAME[g]);
            return -1;
        }
        if (!attr_exists(file, COUNT_ATTR[g])) {
            err_set("%s: missing root attribute %s", path, COUNT_ATTR[g]);
            return -1;
        }
        if (read_int_attr(file, COUNT_ATTR[g], &n[g]) < 0 || n[g] < 0) {
            h5_err("%s: bad root attribute %s", path, COUNT_ATTR[g]);
            return -1;
        }
    }
    for (int c = 0; c < NCOLS; c++) {
        const ColDef *d = &COLS[c];
        if (H5Lexists(file, d->path, H5P_DEFAULT) <= 0) {
            h5_forget();
            err_set("%s: missing dataset %s", path, d->path);
            return -1;
        }
        hid_t ds = H5Dopen2(file, d->path, H5P_DEFAULT);
        if (ds < 0) { h5_err("%s: cannot open dataset %s", path, d->path); return -1; }
        dsets[c] = ds;
        hid_t t = H5Dget_type(ds);
        int ok = type_matches(t, d->kind, d->size);
        if (!ok) {
            char have[64], want[64];
            describe_type(t, have, sizeof have);
            if (d->kind == K_STR) snprintf(want, sizeof want, "string of %zu bytes", d->size);
            else snprintf(want, sizeof want, "%s", KIND_NAME[d->kind]);
            H5Tclose(t);
            err_set("%s: dataset %s has type %s, expected %s", path, d->path, have, want);
            return -1;
        }
        H5Tclose(t);
        hid_t s = H5Dget_space(ds);
        hsize_t dims[2] = {0, 0};
        int rank = H5Sget_simple_extent_ndims(s);
        if (rank == 1) H5Sget_simple_extent_dims(s, dims, NULL);
        H5Sclose(s);
        if (rank != 1) {
            err_set("%s: dataset %s has %d dimensions, expected 1", path, d->path, rank);
            return -1;
        }
        if ((int64_t)dims[0] < n[d->group]) {
            err_set("%s: dataset %s holds %llu rows but %s = %" PRId64 " (file damaged)", path, d->path,
                    (unsigned long long)dims[0], COUNT_ATTR[d->group], n[d->group]);
            return -1;
        }
        hid_t dcpl = H5Dget_create_plist(ds);
        int nf = H5Pget_nfilters(dcpl);
        for (int i = 0; i < nf; i++) {
            unsigned fl;
            size_t ncd = 0;
            H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &fl, &ncd, NULL, 0, NULL, NULL);
            if (H5Zfilter_avail(id) <= 0) {
                H5Pclose(dcpl);
                h5_forget();
                err_set("%s: dataset %s needs HDF5 filter %d, which this HDF5 does not have", path, d->path, (int)id);
                return -1;
            }
        }
        H5Pclose(dcpl);
    }
    return 0;
}

static void close_dsets(hid_t *dsets) {
    for (int c = 0; c < NCOLS; c++) if (dsets[c] >= 0) { H5Dclose(dsets[c]); dsets[c] = -1; }
}

/* ---- writer ---- */

typedef struct {
    hid_t dset, scratch, ftype;
    unsigned char *tail;       /* the tail chunk's rows, file byte order */
    hsize_t extent;            /* current extent of dset */
    int nfilters;
    unsigned raw_mask;         /* filter mask of a raw chunk: every filter skipped */
} WCol;

typedef struct {
    int64_t rows;              /* appended rows, unfinished included */
    int64_t done;              /* finished rows (the count attribute) */
    int64_t tail_chunk;        /* chunk index of the tail */
    int dirty;                 /* tail has rows not written yet */
} WGroup;

struct TraceWriter {
    char *path;
    int lock_fd;               /* holds the writer lock (see take_writer_lock) */
    hid_t file, scratch_file;
    WCol col[NCOLS];
    WGroup grp[NGROUPS];
    int durable;
    int broken;
    unsigned char *enc, *cmp;  /* an encoded chunk; a stored one to compare */
    size_t enc_cap;
};

static size_t chunk_bytes(int c) { return GROUP_CHUNK[COLS[c].group] * COLS[c].size; }

/* Test hooks (tests/test_trace.c, not in trace.h).  With trace_crash_at = k
 * the process dies at the k-th crash point it passes, with _exit (no HDF5
 * cleanup, as under kill -9); the points are the steps of a commit and of
 * writing a group's chunks.  With trace_tear_at = k, the k-th chunk rewrite
 * that HDF5 would do in place is instead torn: only the first half of the
 * new bytes reach the file, then the process dies (what SIGKILL can do to a
 * multi-page write()). */
int trace_crash_at, trace_tear_at;
static int crash_points, tear_points;
static void crash_point(void) {
    if (trace_crash_at && ++crash_points == trace_crash_at) _exit(99);
}

static int writer_failed(TraceWriter *w) {
    if (!w) { err_set("trace writer is NULL"); return 1; }
    if (w->broken) {
        err_set("%s: trace writer unusable after an earlier write error", w->path);
        return 1;
    }
    return 0;
}

static int fsync_file(TraceWriter *w) {
    void *h = NULL;
    if (H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h) < 0 || !h) { h5_err("%s: no file handle", w->path); return -1; }
    if (fdatasync(*(int *)h) != 0) { err_set("%s: fdatasync: %s", w->path, strerror(errno)); return -1; }
    return 0;
}

/* Encodes the tail of column c through the dataset's filter pipeline (by
 * writing it to the scratch dataset and reading the stored chunk back) and
 * stores it as chunk `chunk` of the real dataset, keeping rule 2 above. */
static int write_chunk(TraceWriter *w, int c, int64_t chunk) {
    WCol *col = &w->col[c];
    size_t raw = chunk_bytes(c);
    const void *bytes = col->tail;
    size_t size = raw;
    unsigned mask = col->raw_mask;
    hsize_t off0 = 0, off = (hsize_t)chunk * GROUP_CHUNK[COLS[c].group];
    if (col->nfilters > 0) {
        hsize_t stored = 0;
        uint32_t m = 0;
        if (H5Dwrite(col->scratch, col->ftype, H5S_ALL, H5S_ALL, H5P_DEFAULT, col->tail) < 0 ||
            H5Dget_chunk_storage_size(col->scratch, &off0, &stored) < 0 || stored == 0) {
            h5_err("%s: cannot encode a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (stored > w->enc_cap) {   /* deflate may expand incompressible data */
            w->enc_cap = (size_t)stored;
            w->enc = xrealloc(w->enc, w->enc_cap);
            w->cmp = xrealloc(w->cmp, w->enc_cap);
        }
        if (H5Dread_chunk(col->scratch, H5P_DEFAULT, &off0, &m, w->enc) < 0) {
            h5_err("%s: cannot encode a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (m == 0 && stored < raw) {     /* compressed; otherwise keep it raw */
            bytes = w->enc;
            size = stored;
            mask = 0;
        }
    }
    /* Rule 2: HDF5 overwrites a stored chunk of the same size in place (and
     * keeps its filter mask); allowed raw over raw only, as the stored copy
     * may hold finished rows.  Asked from HDF5 for every write, so chunks a
     * killed run left past the counts are covered too. */
    unsigned disk_mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t disk_size = 0;
    if (H5Dget_chunk_info_by_coord(col->dset, &off, &disk_mask, &addr, &disk_size) < 0) {
        h5_err("%s: cannot look up a chunk of %s", w->path, COLS[c].path);
        return -1;
    }
    if (addr == HADDR_UNDEF) disk_size = 0;
    if (disk_size == size && size != raw) {
        /* The same bytes (a tail that did not change, a chunk rewritten
         * after resume) need no write; other bytes are stored raw. */
        uint32_t m = 0;
        if (H5Dread_chunk(col->dset, H5P_DEFAULT, &off, &m, w->cmp) < 0) {
            h5_err("%s: cannot read a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (m == mask && !memcmp(w->cmp, bytes, size)) return 0;
        bytes = col->tail;
        size = raw;
        mask = col->raw_mask;
    }
    if (disk_size == size && disk_mask != mask) {
        err_set("%s: a chunk of %s is stored with filter mask %u, cannot overwrite it in place with mask %u", w->path,
                COLS[c].path, disk_mask, mask);
        return -1;
    }
    if (disk_size == size && trace_tear_at && ++tear_points == trace_tear_at) {
        void *h = NULL;
        H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h);
        if (h && pwrite(*(int *)h, bytes, size / 2, (off_t)addr) != (ssize_t)(size / 2)) _exit(97);
        _exit(98);
    }
    if (H5Dwrite_chunk(col->dset, H5P_DEFAULT, mask, &off, size, bytes) < 0) {
        h5_err("%s: cannot write a chunk of %s", w->path, COLS[c].path);
        return -1;
    }
    return 0;
}

static int set_extent(TraceWriter *w, int c, hsize_t rows) {
    WCol *col = &w->col[c];
    if (rows <= col->extent) return 0;
    if (H5Dset_extent(col->dset, &rows) < 0) { h5_err("%s: cannot extend %s", w->path, COLS[c].path); return -1; }
    col->extent = rows;
    return 0;
}

/* Writes the tail chunk of every column of group g (full or partial). */
static int flush_tail(TraceWriter *w, int g) {
    WGroup *gr = &w->grp[g];
    if (!gr->dirty) return 0;
    int first = 1;
    for (int c = 0; c < NCOLS; c++) {
        if (COLS[c].group != g) continue;
        if (set_extent(w, c, (hsize_t)gr->rows) < 0 || write_chunk(w, c, gr->tail_chunk) < 0) return -1;
        if (first) crash_point();   /* one column of the group written */
        first = 0;
    }
    crash_point();
    gr->dirty = 0;
    return 0;
}

/* After appending one row to group g: a full tail is written and a fresh,
 * zeroed tail begins. */
static int row_added(TraceWriter *w, int g) {
    WGroup *gr = &w->grp[g];
    gr->rows++;
    gr->dirty = 1;
    if (gr->rows % (int64_t)GROUP_CHUNK[g]) return 0;
    if (flush_tail(w, g) < 0) return -1;
    gr->tail_chunk++;
    for (int c = 0; c < NCOLS; c++)
        if (COLS[c].group == g) memset(w->col[c].tail, 0, chunk_bytes(c));
    return 0;
}

static inline void *slot(TraceWriter *w, int c) {
    int64_t r = w->grp[COLS[c].group].rows % (int64_t)GROUP_CHUNK[COLS[c].group];
    return w->col[c].tail + (size_t)r * COLS[c].size;
}

static void writer_free(TraceWriter *w) {
    if (!w) return;
    for (int c = 0; c < NCOLS; c++) {
        if (w->col[c].dset >= 0) H5Dclose(w->col[c].dset);
        if (w->col[c].scratch >= 0) H5Dclose(w->col[c].scratch);
        if (w->col[c].ftype >= 0) H5Tclose(w->col[c].ftype);
        free(w->col[c].tail);
    }
    if (w->scratch_file >= 0) H5Fclose(w->scratch_file);
    if (w->file >= 0) H5Fclose(w->file);
    if (w->lock_fd >= 0) close(w->lock_fd);
    h5_forget();
    free(w->enc);
    free(w->cmp);
    free(w->path);
    free(w);
}

static TraceWriter *writer_new(const char *path) {
    TraceWriter *w = xcalloc(1, sizeof *w);
    w->path = xstrdup(path);
    w->lock_fd = -1;
    w->file = w->scratch_file = -1;
    for (int c = 0; c < NCOLS; c++) {
        w->col[c].dset = w->col[c].scratch = w->col[c].ftype = -1;
        w->col[c].tail = xcalloc(chunk_bytes(c), 1);
        if (chunk_bytes(c) > w->enc_cap) w->enc_cap = chunk_bytes(c);
    }
    w->enc = xmalloc(w->enc_cap);
    w->cmp = xmalloc(w->enc_cap);
    return w;
}

/* One writer per file: a SWMR writer drops HDF5's own file lock once the
 * file is open (so that readers can open it), and a second writer would
 * clear the "open for writing" flags of a live one.  So the writer holds an
 * open-file-description lock (fcntl F_OFD_SETLK, released when the process
 * dies, independent of the flock() HDF5 uses) on the file's first byte. */
static int take_writer_lock(TraceWriter *w) {
    w->lock_fd = open(w->path, O_RDWR | O_CLOEXEC);
    if (w->lock_fd < 0) { err_set("%s: cannot open: %s", w->path, strerror(errno)); return -1; }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    if (fcntl(w->lock_fd, F_OFD_SETLK, &fl) != 0) {
        if (errno == EAGAIN || errno == EACCES) err_set("%s: being written by another process", w->path);
        else err_set("%s: cannot lock: %s", w->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The in-memory scratch file and one scratch dataset per column with the
 * real dataset's creation properties (chunking, filters); no chunk cache, so
 * a write goes through the filters at once. */
static int open_scratch(TraceWriter *w) {
    static int serial;
    char name[64];
    snprintf(name, sizeof name, "c2t-trace-scratch-%d-%d", (int)getpid(), ++serial);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 20, 0);
    w->scratch_file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (w->scratch_file < 0) { h5_err("%s: cannot create the in-memory encoding file", w->path); return -1; }
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_chunk_cache(dapl, 0, 0, 1.0);
    for (int c = 0; c < NCOLS; c++) {
        WCol *col = &w->col[c];
        hsize_t dim = GROUP_CHUNK[COLS[c].group];
        hid_t dcpl = H5Dget_create_plist(col->dset);
        hid_t space = H5Screate_simple(1, &dim, NULL);
        char nm[16];
        snprintf(nm, sizeof nm, "c%d", c);
        col->scratch = H5Dcreate2(w->scratch_file, nm, col->ftype, space, H5P_DEFAULT, dcpl, dapl);
        col->nfilters = H5Pget_nfilters(dcpl);
        col->raw_mask = col->nfilters > 0 ? (unsigned)((1ull << col->nfilters) - 1) : 0;
        H5Sclose(space);
        H5Pclose(dcpl);
        if (col->scratch < 0) {
            H5Pclose(dapl);
            h5_err("%s: cannot create the encoding dataset for %s", w->path, COLS[c].path);
            return -1;
        }
    }
    H5Pclose(dapl);
    return 0;
}

static hid_t make_dcpl(int c, TraceCompress compress, int level) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = GROUP_CHUNK[COLS[c].group];
    H5Pset_chunk(dcpl, 1, &chunk);
    int numeric = COLS[c].kind != K_STR;
    if (compress == TRACE_ZSTD) {
        unsigned cd = (unsigned)(level ? level : C2T_ZSTD_DEFAULT_LEVEL);
        if (numeric && COLS[c].size > 1) H5Pset_shuffle(dcpl);
        H5Pset_filter(dcpl, H5Z_FILTER_ZSTD, H5Z_FLAG_OPTIONAL, 1, &cd);
    } else if (compress == TRACE_GZIP) {
        if (numeric && COLS[c].size > 1) H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, (unsigned)(level ? level : 4));
    }
    return dcpl;
}

TraceWriter *trace_create(const char *path, TraceCompress compress) {
    TraceCreateOpts o = {1, 0};
    return trace_create_ex(path, compress, &o);
}

TraceWriter *trace_create_ex(const char *path, TraceCompress compress, const TraceCreateOpts *opts) {
    if (trace_init() < 0) return NULL;
    if ((unsigned)compress > TRACE_NONE) { err_set("%s: unknown compression %d", path, (int)compress); return NULL; }
    TraceCreateOpts o = opts ? *opts : (TraceCreateOpts){1, 0};
    if (compress == TRACE_ZSTD && (o.level < -7 || o.level > 22)) { err_set("%s: zstd level %d out of range", path, o.level); return NULL; }
    if (compress == TRACE_GZIP && (o.level < 0 || o.level > 9)) { err_set("%s: gzip level %d out of range", path, o.level); return NULL; }
    struct stat st;
    if (stat(path, &st) == 0) { err_set("%s: already exists (use --resume to continue it)", path); return NULL; }
    TraceWriter *w = writer_new(path);
    w->durable = o.durable;
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    /* Room for the count attributes in the root object header's first chunk,
     * which sits in the first page (rule 3; they are created first). */
    H5Pset_est_link_info(fcpl, 16, 24);
    hid_t fapl = make_fapl(0);
    unsigned flags = H5F_ACC_EXCL | (o.durable ? H5F_ACC_SWMR_WRITE : 0);
    w->file = H5Fcreate(path, flags, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (w->file < 0) { h5_err("%s: cannot create", path); writer_free(w); return NULL; }
    if (take_writer_lock(w) < 0) goto fail;
    int rc = 0;
    for (int g = 0; g < NGROUPS && rc == 0; g++) rc = put_i64_attr(w->file, COUNT_ATTR[NGROUPS - 1 - g], 0);
    if (rc == 0) rc = put_i64_attr(w->file, "schema_version", TRACE_SCHEMA_VERSION);
    if (rc == 0) rc = put_str_attr(w->file, "compression", trace_compress_name(compress));
    if (rc < 0) { h5_err("%s: cannot write root attributes", path); goto fail; }
    for (int g = 0; g < NGROUPS; g++) {
        hid_t gid = H5Gcreate2(w->file, GROUP_NAME[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (gid < 0) { h5_err("%s: cannot create group %s", path, GROUP_NAME[g]); goto fail; }
        H5Gclose(gid);
    }
    for (int c = 0; c < NCOLS; c++) {
        WCol *col = &w->col[c];
        hsize_t zero = 0, unlim = H5S_UNLIMITED;
        hid_t space = H5Screate_simple(1, &zero, &unlim);
        hid_t dcpl = make_dcpl(c, compress, o.level);
        col->ftype = file_type(COLS[c].kind, COLS[c].size);
        col->dset = H5Dcreate2(w->file, COLS[c].path, col->ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Sclose(space);
        H5Pclose(dcpl);
        if (col->dset < 0) { h5_err("%s: cannot create dataset %s", path, COLS[c].path); goto fail; }
    }
    if (open_scratch(w) < 0) goto fail;
    if (w->durable && (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0 || fsync_file(w) < 0)) {
        h5_err("%s: cannot flush", path);
        goto fail;
    }
    return w;
fail:
    writer_free(w);
    unlink(path);
    return NULL;
}

TraceWriter *trace_resume(const char *path) {
    /* The reader's checks first, for the same errors as trace_open. */
    TraceReader *r = trace_open(path);
    if (!r) return NULL;
    trace_reader_close(r);
    TraceWriter *w = writer_new(path);
    w->durable = 1;
    unsigned flags;
    if (take_writer_lock(w) < 0 || probe_file(path, &flags) < 0) { writer_free(w); return NULL; }
    hid_t fapl = make_fapl(flags != 0);
    w->file = H5Fopen(path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl);
    H5Pclose(fapl);
    if (w->file < 0) {
        h5_err("%s: cannot open for writing (SWMR, needs a file written by trace_create)", path);
        writer_free(w);
        return NULL;
    }
    /* A killed writer's superblock may record an end of allocated space
     * (EOA) that lags behind chunks the flushed indexes already point to;
     * allocating from there would overwrite them.  Everything referenced was
     * written, so it lies before the end of the file: allocate after both. */
    if (H5Fincrement_filesize(w->file, 0) < 0) {
        h5_err("%s: cannot set the end of allocated space", path);
        writer_free(w);
        return NULL;
    }
    hid_t dsets[NCOLS];
    int64_t n[NGROUPS];
    if (check_schema(path, w->file, dsets, n) < 0) { close_dsets(dsets); writer_free(w); return NULL; }
    for (int c = 0; c < NCOLS; c++) {
        w->col[c].dset = dsets[c];
        w->col[c].ftype = file_type(COLS[c].kind, COLS[c].size);
        hid_t s = H5Dget_space(dsets[c]);
        H5Sget_simple_extent_dims(s, &w->col[c].extent, NULL);
        H5Sclose(s);
    }
    if (open_scratch(w) < 0) { writer_free(w); return NULL; }
    /* Unfinished rows past the counts are ignored and overwritten. */
    for (int g = 0; g < NGROUPS; g++) {
        WGroup *gr = &w->grp[g];
        gr->rows = gr->done = n[g];
        gr->tail_chunk = n[g] / (int64_t)GROUP_CHUNK[g];
        hsize_t start = (hsize_t)gr->tail_chunk * GROUP_CHUNK[g], count = (hsize_t)(n[g] - (int64_t)start);
        if (count == 0) continue;
        for (int c = 0; c < NCOLS; c++) {
            if (COLS[c].group != g) continue;
            WCol *col = &w->col[c];
            hid_t fs = H5Dget_space(col->dset);
            hid_t ms = H5Screate_simple(1, &count, NULL);
            H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
            herr_t r = H5Dread(col->dset, col->ftype, ms, fs, H5P_DEFAULT, col->tail);
            if (r < 0) h5_err("%s: cannot read the last chunk of %s", path, COLS[c].path);
            H5Sclose(ms);
            H5Sclose(fs);
            if (r < 0) {
                writer_free(w);
                return NULL;
            }
        }
    }
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0 || fsync_file(w) < 0) {
        h5_err("%s: cannot flush", path);
        writer_free(w);
        return NULL;
    }
    return w;
}

static int check_key(TraceWriter *w, const char *key) {
    if (writer_failed(w)) return -1;
    if (!key || !*key) { err_set("%s: empty attribute name", w->path); return -1; }
    if (in_list(RESERVED_ATTRS, key)) { err_set("%s: attribute %s is set by the trace library", w->path, key); return -1; }
    return 0;
}

static int attr_written(TraceWriter *w, int rc, const char *key) {
    if (rc < 0) { h5_err("%s: cannot write attribute %s", w->path, key); return -1; }
    if (w->durable && H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { h5_err("%s: cannot flush", w->path); return -1; }
    return 0;
}

int trace_set_attr_str(TraceWriter *w, const char *key, const char *value) {
    if (check_key(w, key) < 0) return -1;
    return attr_written(w, put_str_attr(w->file, key, value ? value : ""), key);
}

int trace_set_attr_num(TraceWriter *w, const char *key, double value) {
    if (check_key(w, key) < 0) return -1;
    return attr_written(w, put_attr(w->file, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value), key);
}

char *trace_get_attr_str(TraceWriter *w, const char *key) {
    if (!w || !key) return NULL;
    return attr_to_string(w->file, key);
}

int64_t trace_n_questions(const TraceWriter *w) { return w ? w->grp[G_QUESTIONS].done : 0; }

int trace_add_tree(TraceWriter *w, TraceTree *t, const TraceNode *nodes) {
    if (writer_failed(w)) return -1;
    if (!t || t->n_nodes < 0 || (t->n_nodes > 0 && !nodes)) {
        err_set("%s: trace_add_tree: bad tree (n_nodes %d)", w->path, t ? t->n_nodes : -1);
        return -1;
    }
    t->question = (int32_t)w->grp[G_QUESTIONS].done;
    t->first_node = w->grp[G_NODES].rows;
    for (int32_t i = 0; i < t->n_nodes; i++) {
        const TraceNode *nd = &nodes[i];
        memcpy(slot(w, C_P), &nd->P, 4);
        memcpy(slot(w, C_H), &nd->H, 4);
        *(uint8_t *)slot(w, C_DEPTH) = nd->depth;
        *(uint8_t *)slot(w, C_ACC) = nd->accepted;
        memcpy(slot(w, C_TOKEN), &nd->token, 4);
        memcpy(slot(w, C_PARENT), &nd->parent, 4);
        memcpy(slot(w, C_LP), &nd->p, 4);
        *(uint8_t *)slot(w, C_RANK) = nd->rank;
        if (row_added(w, G_NODES) < 0) { w->broken = 1; return -1; }
    }
    memcpy(slot(w, C_TQ), &t->question, 4);
    memcpy(slot(w, C_TURN), &t->turn, 2);
    memcpy(slot(w, C_CYCLE), &t->cycle, 4);
    memcpy(slot(w, C_FIRST), &t->first_node, 8);
    memcpy(slot(w, C_NN), &t->n_nodes, 4);
    memcpy(slot(w, C_ALEN), &t->accept_len, 4);
    if (row_added(w, G_TREES) < 0) { w->broken = 1; return -1; }
    return 0;
}

/* Rule 3, step 2: the counts, in one flushed write. */
static int write_counts(TraceWriter *w) {
    for (int g = 0; g < NGROUPS; g++)
        if (put_i64_attr(w->file, COUNT_ATTR[g], w->grp[g].done) < 0) {
            h5_err("%s: cannot write attribute %s", w->path, COUNT_ATTR[g]);
            return -1;
        }
    return 0;
}

static int commit(TraceWriter *w) {
    for (int g = 0; g < NGROUPS; g++) {
        if (flush_tail(w, g) < 0) return -1;
        for (int c = 0; c < NCOLS; c++)
            if (COLS[c].group == g && set_extent(w, c, (hsize_t)w->grp[g].rows) < 0) return -1;
    }
    crash_point();
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { h5_err("%s: cannot flush", w->path); return -1; }
    if (fsync_file(w) < 0) return -1;
    crash_point();
    for (int g = 0; g < NGROUPS; g++) w->grp[g].done = w->grp[g].rows;
    if (write_counts(w) < 0) return -1;
    crash_point();
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { h5_err("%s: cannot flush", w->path); return -1; }
    if (fsync_file(w) < 0) return -1;
    crash_point();
    return 0;
}

int trace_finish_question(TraceWriter *w, const char *benchmark, const char *question_id) {
    if (writer_failed(w)) return -1;
    if (!benchmark) benchmark = "";
    if (!question_id) question_id = "";
    size_t bl = strlen(benchmark), ql = strlen(question_id);
    if (bl > TRACE_BENCHMARK_LEN) { err_set("%s: benchmark name longer than %d bytes: %s", w->path, TRACE_BENCHMARK_LEN, benchmark); return -1; }
    if (ql > TRACE_QUESTION_ID_LEN) { err_set("%s: question_id longer than %d bytes: %s", w->path, TRACE_QUESTION_ID_LEN, question_id); return -1; }
    memcpy(slot(w, C_BENCH), benchmark, bl);
    memcpy(slot(w, C_QID), question_id, ql);
    if (row_added(w, G_QUESTIONS) < 0) { w->broken = 1; return -1; }
    if (!w->durable) {
        for (int g = 0; g < NGROUPS; g++) w->grp[g].done = w->grp[g].rows;
        return 0;
    }
    if (commit(w) < 0) { w->broken = 1; return -1; }
    return 0;
}

int trace_close(TraceWriter *w) {
    if (!w) return 0;
    int rc = 0;
    if (!w->broken && !w->durable) {
        /* Only finished rows count; unfinished ones are left past the counts. */
        for (int g = 0; g < NGROUPS && rc == 0; g++) {
            rc = flush_tail(w, g);
            for (int c = 0; c < NCOLS && rc == 0; c++)
                if (COLS[c].group == g) rc = set_extent(w, c, (hsize_t)w->grp[g].rows);
        }
        if (rc == 0) rc = write_counts(w);
        if (rc == 0 && H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { h5_err("%s: cannot flush", w->path); rc = -1; }
        if (rc == 0) rc = fsync_file(w);
    }
    for (int c = 0; c < NCOLS; c++) {
        if (w->col[c].dset >= 0) H5Dclose(w->col[c].dset);
        w->col[c].dset = -1;
    }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && rc == 0) { h5_err("%s: cannot close", w->path); rc = -1; }
    w->file = -1;
    writer_free(w);
    return rc;
}

/* ---- reader ---- */

struct TraceReader {
    char *path;
    hid_t file;
    hid_t dset[NCOLS];
    int64_t n[NGROUPS];
    void *buf;
    size_t buf_cap;
};

TraceReader *trace_open(const char *path) {
    if (trace_init() < 0) return NULL;
    unsigned flags;
    if (probe_file(path, &flags) < 0) return NULL;
    hid_t fapl = make_fapl(flags != 0);
    /* A killed (or running) writer: open with SWMR read access, which HDF5
     * designed for reading a file whose writer has not closed it (among
     * other things it reads past the end of allocated space the superblock
     * recorded, which lags behind the data a killed writer left). */
    unsigned mode = H5F_ACC_RDONLY | (flags ? H5F_ACC_SWMR_READ : 0);
    hid_t file = H5Fopen(path, mode, fapl);
    H5Pclose(fapl);
    if (file < 0) {
        h5_err("%s: cannot open as HDF5", path);
        return NULL;
    }
    TraceReader *r = xcalloc(1, sizeof *r);
    r->path = xstrdup(path);
    r->file = file;
    if (check_schema(path, file, r->dset, r->n) < 0) {
        close_dsets(r->dset);
        H5Fclose(file);
        h5_forget();
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
    hid_t mt = COLS[c].kind == K_STR ? file_type(K_STR, COLS[c].size) : mem_type(COLS[c].kind);
    herr_t rc = H5Dread(r->dset[c], mt, ms, fs, H5P_DEFAULT, r->buf);
    if (COLS[c].kind == K_STR) H5Tclose(mt);
    H5Sclose(ms);
    H5Sclose(fs);
    if (rc < 0) {
        h5_err("%s: cannot read rows %" PRId64 "..%" PRId64 " of %s", r->path, start, start + count, COLS[c].path);
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
    return attr_to_string(r->file, key);
}

void trace_reader_close(TraceReader *r) {
    if (!r) return;
    close_dsets(r->dset);
    if (r->file >= 0) H5Fclose(r->file);
    h5_forget();
    free(r->buf);
    free(r->path);
    free(r);
}

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
                if (in_list(RESERVED_ATTRS, key) || trace_attr_per_shard(key)) continue;
                char *va = attr_to_string(a->file, key), *vb = attr_to_string(b->file, key);
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
        if (in_list(RESERVED_ATTRS, key) || !strcmp(key, "merged_from")) continue;
        int same = 1;
        char *v0 = attr_to_string(in[0]->file, key);
        for (int i = 1; i < n && same; i++) {
            char *vi = attr_to_string(in[i]->file, key);
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
                vals[i] = attr_to_string(in[i]->file, key);
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
    if (rc == 0) {
        /* Written under a temporary name and renamed when complete: the
         * merge writer is not durable (no per-question flushes). */
        size_t len = strlen(out) + 16;
        tmp = xmalloc(len);
        snprintf(tmp, len, "%s.partial", out);
        unlink(tmp);
        TraceCreateOpts o = {0, 0};
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
