/* Trace files (collect/trace.h, docs/trace_format.md): schema and HDF5 helpers; the writer, streaming
 * reader and merge are trace_writer.c, trace_reader.c, trace_merge.c. */
#include "collect/trace_internal.h"

int tr_in_list(const char *const *list, const char *key) {
    for (; *list; list++) if (!strcmp(*list, key)) return 1;
    return 0;
}

int trace_attr_per_shard(const char *key) { return key && tr_in_list(PER_SHARD_ATTRS, key); }

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
    if (n != 0 || !e->desc) return 0;
    /* The file driver's I/O errors carry a dump of their arguments (time,
     * descriptor, buffer address, sizes): keep "file write failed: <the
     * system's message>". */
    const char *msg = strstr(e->desc, "error message = '"), *colon = strchr(e->desc, ':');
    if (msg && colon && colon < msg) {
        msg += strlen("error message = '");
        const char *end = strchr(msg, '\'');
        snprintf(buf, 256, "%.*s: %.*s", (int)(colon - e->desc), e->desc, (int)(end ? end - msg : 200), msg);
    } else {
        snprintf(buf, 256, "%s", e->desc);
    }
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
void tr_h5_forget(void) {
    H5Eclear2(H5E_DEFAULT);
    last_reason[0] = 0;
}

/* The reason of the last HDF5 failure (or ""), consumed. */
const char *tr_h5_reason(void) {
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s", last_reason);
    tr_h5_forget();
    for (char *c = buf; *c; c++) if (*c == '\n') *c = ' ';
    return buf;
}

/* err_set with ": <HDF5's reason>" appended when HDF5 gave one. */
void tr_h5_err(const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *why = tr_h5_reason();
    if (*why) err_set("%s: %s", msg, why);
    else err_set("%s", msg);
}

void tr_h5_open_err(const char *path, const char *what) {
    const char *why = tr_h5_reason();
    long long have, want;
    const char *t = strstr(why, "truncated file: eof = ");
    const char *s = t ? strstr(t, "stored_eof = ") : NULL;
    if (t && s && sscanf(t, "truncated file: eof = %lld", &have) == 1 && sscanf(s, "stored_eof = %lld", &want) == 1) {
        err_set("%s: truncated: %lld of the %lld bytes it was written with are there (an interrupted copy or "
                "download?); it can be neither read nor resumed: copy it again, or collect anew into a new file",
                path, have, want);
        return;
    }
    if (*why) err_set("%s: %s: %s", path, what, why);
    else err_set("%s: %s", path, what);
}

/* HDF5's error reports go to record_reason on this thread (HDF5 keeps the
 * setting per thread; a thread that never set it prints HDF5's stack). */
void tr_h5_errors_here(void) {
    static _Thread_local int done;
    if (done) return;
    done = 1;
    H5Eset_auto2(H5E_DEFAULT, record_reason, NULL);
}

/* Registers the zstd filter and routes HDF5's error reports to
 * record_reason (nothing is printed: errors reach the caller as one line). */
int tr_init(void) {
    /* No HDF5 cleanup at exit: every handle of ours is closed by its owner,
     * except a writer's broken by a write error, which libhdf5 1.10 cannot
     * close (its flush fails again and H5F__close_cb crashes); the process
     * then just ends, as if killed, which the file survives.  Must come
     * before the library's first use (later it is a no-op). */
    static int once;
    if (!once) {
        once = 1;
        H5dont_atexit();
    }
    if (trace_register_zstd() < 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, record_reason, NULL);
    tr_h5_forget();
    return 0;
}

hid_t tr_file_type(int kind, size_t size) {
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
int tr_type_matches(hid_t t, int kind, size_t size) {
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

void tr_describe_type(hid_t t, char *buf, size_t n) {
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cls == H5T_FLOAT) snprintf(buf, n, "float%zu", sz * 8);
    else if (cls == H5T_INTEGER) snprintf(buf, n, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
    else if (cls == H5T_STRING) snprintf(buf, n, H5Tis_variable_str(t) > 0 ? "variable-length string" : "string of %zu bytes", sz);
    else snprintf(buf, n, "type class %d", (int)cls);
}

/* ---- attributes ---- */

int tr_attr_exists(hid_t loc, const char *key) { return H5Aexists(loc, key) > 0; }

/* A root attribute as text: strings as stored, integers in decimal, floats
 * with %.17g (integral values without a fraction).  NULL if absent, "" if
 * unreadable. */
char *tr_attr_to_string(hid_t loc, const char *key) {
    if (!tr_attr_exists(loc, key)) return NULL;
    hid_t a = H5Aopen(loc, key, H5P_DEFAULT);
    if (a < 0) { tr_h5_forget(); return NULL; }
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
    if (!out) { tr_h5_forget(); out = xstrdup(""); }
    return out;
}

int tr_read_int_attr(hid_t loc, const char *key, int64_t *v) {
    if (!tr_attr_exists(loc, key)) return -1;
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
int tr_put_attr(hid_t loc, const char *key, hid_t ft, hid_t mt, const void *buf) {
    hid_t a = -1;
    if (tr_attr_exists(loc, key)) {
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

int tr_put_str_attr(hid_t loc, const char *key, const char *value) {
    size_t n = strlen(value);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n ? n : 1);
    H5Tset_strpad(t, H5T_STR_NULLPAD);
    H5Tset_cset(t, H5T_CSET_UTF8);
    char *buf = xcalloc(n + 1, 1);
    memcpy(buf, value, n);
    int rc = tr_put_attr(loc, key, t, t, buf);
    free(buf);
    H5Tclose(t);
    return rc;
}

int tr_put_i64_attr(hid_t loc, const char *key, int64_t v) {
    long long x = v;
    return tr_put_attr(loc, key, H5T_STD_I64LE, H5T_NATIVE_LLONG, &x);
}

/* ---- opening files ---- */

/* Looks at the superblock ourselves before HDF5 does: a missing, empty or
 * non-HDF5 file gets a plain message, and the v3 superblock's status flags
 * tell whether a writer left the file open (killed, or still running).
 * Returns 0 (flags in *flags: 1 = write, 2 = SWMR write) or -1 + err_set. */
int tr_probe_file(const char *path, unsigned *flags) {
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
#define TRACE_READ_ATTEMPTS 10

hid_t tr_make_fapl(int unclosed) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    /* A SWMR reader retries a metadata read whose checksum fails, 100 times
     * with growing sleeps: on a corrupt file that stalled trace_open for
     * minutes (found by tests/fuzz).  One attempt is too few: a file a
     * killed writer left needs the retries that re-read an entry at its
     * real length (with one, test_kill9_then_resume failed in 1 of 25 runs
     * of 60 kills; with 10, in none of 50).
     * TRACE_READ_ATTEMPTS bounds the stall and keeps those reads. */
    H5Pset_metadata_read_attempts(fapl, TRACE_READ_ATTEMPTS);
    if (unclosed) {
        hbool_t yes = 1;
        if (H5Pexist(fapl, "clear_status_flags") > 0) H5Pset(fapl, "clear_status_flags", &yes);
        if (H5Pexist(fapl, "skip_eof_check") > 0) H5Pset(fapl, "skip_eof_check", &yes);
        tr_h5_forget();
    }
    return fapl;
}

/* Checks schema_version, every dataset's presence, type and rank, the count
 * attributes and that the extents hold the counted rows.  Opens dsets[]. */
int tr_check_schema(const char *path, hid_t file, hid_t *dsets, int64_t n[NGROUPS]) {
    for (int c = 0; c < NCOLS; c++) dsets[c] = -1;
    int64_t ver;
    if (!tr_attr_exists(file, "schema_version")) {
        err_set("%s: not a trace file (no root attribute schema_version)", path);
        return -1;
    }
    if (tr_read_int_attr(file, "schema_version", &ver) < 0) {
        tr_h5_err("%s: cannot read root attribute schema_version", path);
        return -1;
    }
    if (ver != TRACE_SCHEMA_VERSION) {
        err_set("%s: schema_version %" PRId64 ", this build reads version %d", path, ver, TRACE_SCHEMA_VERSION);
        return -1;
    }
    for (int g = 0; g < NGROUPS; g++) {
        if (H5Lexists(file, GROUP_NAME[g], H5P_DEFAULT) <= 0) {
            tr_h5_forget();
            err_set("%s: missing group %s", path, GROUP_NAME[g]);
            return -1;
        }
        if (!tr_attr_exists(file, COUNT_ATTR[g])) {
            err_set("%s: missing root attribute %s", path, COUNT_ATTR[g]);
            return -1;
        }
        if (tr_read_int_attr(file, COUNT_ATTR[g], &n[g]) < 0 || n[g] < 0) {
            tr_h5_err("%s: bad root attribute %s", path, COUNT_ATTR[g]);
            return -1;
        }
    }
    for (int c = 0; c < NCOLS; c++) {
        const ColDef *d = &COLS[c];
        if (H5Lexists(file, d->path, H5P_DEFAULT) <= 0) {
            tr_h5_forget();
            err_set("%s: missing dataset %s", path, d->path);
            return -1;
        }
        hid_t ds = H5Dopen2(file, d->path, H5P_DEFAULT);
        if (ds < 0) { tr_h5_err("%s: cannot open dataset %s", path, d->path); return -1; }
        dsets[c] = ds;
        hid_t t = H5Dget_type(ds);
        int ok = tr_type_matches(t, d->kind, d->size);
        if (!ok) {
            char have[64], want[64];
            tr_describe_type(t, have, sizeof have);
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
                tr_h5_forget();
                err_set("%s: dataset %s needs HDF5 filter %d, which this HDF5 does not have", path, d->path, (int)id);
                return -1;
            }
        }
        H5Pclose(dcpl);
    }
    return 0;
}

void tr_close_dsets(hid_t *dsets) {
    for (int c = 0; c < NCOLS; c++) if (dsets[c] >= 0) { H5Dclose(dsets[c]); dsets[c] = -1; }
}
