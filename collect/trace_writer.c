/* Trace files (collect/trace.h, docs/trace_format.md): the writer, on HDF5
 * 1.10+.
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
   4. The file is allocated in pages (HDF5's paged file-space strategy,
 *      TRACE_PAGE bytes), so a metadata entry smaller than a page lies in
 *      one page.  The kernel copies a write into the file page by page and
 *      a fatal signal stops it only between pages, so each such entry is
 *      left whole, old or new; SWMR's ordering does the rest.  Without
 *      paging a dataset's object header could straddle two pages, and a
 *      kill that tore its in-place update lost the whole file.  Entries
 *      larger than a page are the chunk index's data blocks of a dataset
 *      past ~8,000 chunks (~67M nodes); up to 48M nodes the largest
 *      metadata write measured 3,862 bytes.
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
 * at every step of a commit (trace_crash_at), in the middle of every
 * in-place chunk rewrite (trace_tear_at) and after the first page of every
 * write that crosses a page (tests/fault_write.c's tear mode). */
#include "collect/trace_internal.h"

/* The page that one write of the kernel lands whole (rule 4). */
enum { TRACE_PAGE = 4096 };

static size_t chunk_bytes(int c) { return GROUP_CHUNK[COLS[c].group] * COLS[c].size; }

/* Test hooks (tests/test_trace.c, not in trace.h).  With trace_crash_at = k
 * the process dies at the k-th crash point it passes, with _exit (no HDF5
 * cleanup, as under kill -9); the points are the steps of a commit and of
 * writing a group's chunks.  With trace_tear_at = k, the k-th chunk rewrite
 * that HDF5 would do in place is instead torn: only the first half of the
 * new bytes reach the file, then the process dies (what SIGKILL can do to a
 * multi-page write()). */
int trace_crash_at, trace_tear_at;
/* With trace_no_checksum set, new files are written as before checksums
 * (no fletcher32 filter): the tests' files of the older format. */
int trace_no_checksum;
static int crash_points, tear_points;
static void crash_point(void) {
    if (trace_crash_at && ++crash_points == trace_crash_at) _exit(99);
}

/* After a failed write (disk full, EIO, a file size limit) the writer stops
 * writing for good, as if killed at that moment, which rules 1-3 survive:
 * the file's descriptor is replaced by a read-only /dev/null, so nothing
 * HDF5 flushes later (trace_close, its atexit cleanup) reaches the file and
 * no index can point at a chunk that was never written.  --resume continues
 * the file from its last finished question. */
static int broke(TraceWriter *w) {
    w->broken = 1;
    void *h = NULL;
    if (w->file >= 0 && H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h) >= 0 && h) {
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd >= 0) {
            dup2(null_fd, *(int *)h);
            close(null_fd);
        }
    }
    return -1;
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
    if (H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h) < 0 || !h) { tr_h5_err("%s: no file handle", w->path); return -1; }
    if (fdatasync(*(int *)h) != 0) { err_set("%s: fdatasync: %s", w->path, strerror(errno)); return -1; }
    return 0;
}

/* Writes one encoded chunk at off; disk_size is the size stored there now
 * (0: none).  Same size means in place (rule 2: raw over raw only). */
static int store_chunk(TraceWriter *w, int c, const hsize_t *off, unsigned mask, size_t size, const void *bytes,
                       hsize_t disk_size) {
    WCol *col = &w->col[c];
    if (disk_size == size) {
        unsigned disk_mask = 0;
        haddr_t addr = HADDR_UNDEF;
        if (H5Dget_chunk_info_by_coord(col->dset, off, &disk_mask, &addr, NULL) < 0) {
            tr_h5_err("%s: cannot look up a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (disk_mask != mask || mask != col->raw_mask) {
            err_set("%s: a chunk of %s is stored with filter mask %u, cannot overwrite it in place with mask %u",
                    w->path, COLS[c].path, disk_mask, mask);
            return -1;
        }
        if (trace_tear_at && ++tear_points == trace_tear_at) {
            void *h = NULL;
            H5Fget_vfd_handle(w->file, H5P_DEFAULT, &h);
            if (h && pwrite(*(int *)h, bytes, size / 2, (off_t)addr) != (ssize_t)(size / 2)) _exit(97);
            _exit(98);
        }
    }
    if (H5Dwrite_chunk(col->dset, H5P_DEFAULT, mask, off, size, bytes) < 0) {
        tr_h5_err("%s: cannot write a chunk of %s", w->path, COLS[c].path);
        return -1;
    }
    return 0;
}

/* Encodes the tail of column c through the dataset's filter pipeline (by
 * writing it to the scratch dataset and reading the stored chunk back) and
 * stores it as chunk `chunk` of the real dataset, keeping rule 2 above.
 * The pipeline ends with HDF5's fletcher32 checksum (mandatory, so every
 * encoding carries it; an incompressible chunk is stored with the
 * compression filters skipped in its mask, checksum kept).  Only the raw
 * form (every filter skipped, exactly the chunk's bytes) has no checksum,
 * and it is written only to move a chunk aside: see below. */
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
            tr_h5_err("%s: cannot encode a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (stored > w->enc_cap) {   /* the checksum (and deflate) may make it longer */
            w->enc_cap = (size_t)stored;
            w->enc = xrealloc(w->enc, w->enc_cap);
            w->cmp = xrealloc(w->cmp, w->enc_cap);
        }
        if (H5Dread_chunk(col->scratch, H5P_DEFAULT, &off0, &m, w->enc) < 0) {
            tr_h5_err("%s: cannot encode a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        /* An encoding of exactly the raw size would share the raw form's
         * in-place class (rule 2): stored raw instead (rare; unchecked). */
        if (col->checked ? stored != raw : (m == 0 && stored < raw)) {
            bytes = w->enc;
            size = stored;
            mask = m;
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
        tr_h5_err("%s: cannot look up a chunk of %s", w->path, COLS[c].path);
        return -1;
    }
    if (addr == HADDR_UNDEF) disk_size = 0;
    if (disk_size == size && size != raw) {
        /* The same bytes (a tail that did not change, a chunk rewritten
         * after resume) need no write.  Other bytes of the same size are
         * first stored raw (a new place, or raw over raw), which moves the
         * encoding's write to a new place too. */
        uint32_t m = 0;
        if (H5Dread_chunk(col->dset, H5P_DEFAULT, &off, &m, w->cmp) < 0) {
            tr_h5_err("%s: cannot read a chunk of %s", w->path, COLS[c].path);
            return -1;
        }
        if (m == mask && !memcmp(w->cmp, bytes, size)) return 0;
        if (store_chunk(w, c, &off, col->raw_mask, raw, col->tail, disk_size) < 0) return -1;
        disk_size = raw;
    }
    return store_chunk(w, c, &off, mask, size, bytes, disk_size);
}

static int set_extent(TraceWriter *w, int c, hsize_t rows) {
    WCol *col = &w->col[c];
    if (rows <= col->extent) return 0;
    if (H5Dset_extent(col->dset, &rows) < 0) { tr_h5_err("%s: cannot extend %s", w->path, COLS[c].path); return -1; }
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
    tr_h5_forget();
    free(w->enc);
    free(w->cmp);
    free(w->path);
    free(w);
}

/* Frees a broken writer but leaves its HDF5 file open: closing flushes,
 * which fails again, and libhdf5 1.10 then crashes (see tr_init).  Its
 * descriptor is /dev/null already (broke). */
static void writer_abandon(TraceWriter *w) {
    for (int c = 0; c < NCOLS; c++) w->col[c].dset = -1;
    w->file = -1;
    writer_free(w);
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
    if (w->scratch_file < 0) { tr_h5_err("%s: cannot create the in-memory encoding file", w->path); return -1; }
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
        col->checked = col->nfilters > 0 &&
                       H5Pget_filter2(dcpl, (unsigned)col->nfilters - 1, NULL, NULL, NULL, 0, NULL, NULL) ==
                           H5Z_FILTER_FLETCHER32;
        H5Sclose(space);
        H5Pclose(dcpl);
        if (col->scratch < 0) {
            H5Pclose(dapl);
            tr_h5_err("%s: cannot create the encoding dataset for %s", w->path, COLS[c].path);
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
    /* Last, so that it covers the stored bytes: a flipped bit anywhere in
     * a chunk fails the read that touches it (HDF5 verifies on every read). */
    if (!trace_no_checksum) H5Pset_fletcher32(dcpl);
    return dcpl;
}

TraceWriter *trace_create(const char *path, TraceCompress compress) {
    TraceCreateOpts o = {1, 0, NULL};
    return trace_create_ex(path, compress, &o);
}

TraceWriter *trace_create_ex(const char *path, TraceCompress compress, const TraceCreateOpts *opts) {
    if (tr_init() < 0) return NULL;
    if ((unsigned)compress > TRACE_NONE) { err_set("%s: unknown compression %d", path, (int)compress); return NULL; }
    TraceCreateOpts o = opts ? *opts : (TraceCreateOpts){1, 0, NULL};
    if (compress == TRACE_ZSTD && (o.level < -7 || o.level > 22)) { err_set("%s: zstd level %d out of range", path, o.level); return NULL; }
    if (compress == TRACE_GZIP && (o.level < 0 || o.level > 9)) { err_set("%s: gzip level %d out of range", path, o.level); return NULL; }
    struct stat st;
    if (stat(path, &st) == 0) { err_set("%s: already exists (use --resume to continue it)", path); return NULL; }
    /* Made under a temporary name and linked to path once its root
     * attributes and groups are on disk: a writer killed while creating the
     * file leaves no file at path that does not open as a trace. */
    size_t tlen = strlen(path) + 16;
    char *tmp = xmalloc(tlen);
    snprintf(tmp, tlen, "%s.creating", path);
    unlink(tmp);   /* what a writer killed while creating left */
    TraceWriter *w = writer_new(tmp);
    w->durable = o.durable;
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    /* Room for the count attributes in the root object header's first chunk,
     * which sits in the first page (rule 3; they are created first). */
    H5Pset_est_link_info(fcpl, 16, 24);
    /* Rule 4: paged allocation, so that no metadata entry smaller than a
     * page crosses a page boundary. */
    H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_PAGE, 0, 1);
    H5Pset_file_space_page_size(fcpl, TRACE_PAGE);
    hid_t fapl = tr_make_fapl(0);
    unsigned flags = H5F_ACC_EXCL | (o.durable ? H5F_ACC_SWMR_WRITE : 0);
    w->file = H5Fcreate(tmp, flags, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (w->file < 0) {
        tr_h5_err("%s: cannot create", path);
        writer_free(w);
        unlink(tmp);   /* created by H5Fcreate (exclusive) before it failed */
        free(tmp);
        return NULL;
    }
    if (take_writer_lock(w) < 0) goto fail;
    int rc = 0;
    for (int g = 0; g < NGROUPS && rc == 0; g++) rc = tr_put_i64_attr(w->file, COUNT_ATTR[NGROUPS - 1 - g], 0);
    if (rc == 0) rc = tr_put_i64_attr(w->file, "schema_version", TRACE_SCHEMA_VERSION);
    if (rc == 0) rc = tr_put_str_attr(w->file, "compression", trace_compress_name(compress));
    if (rc < 0) { tr_h5_err("%s: cannot write root attributes", path); goto fail; }
    for (int g = 0; g < NGROUPS; g++) {
        hid_t gid = H5Gcreate2(w->file, GROUP_NAME[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (gid < 0) { tr_h5_err("%s: cannot create group %s", path, GROUP_NAME[g]); goto fail; }
        H5Gclose(gid);
    }
    for (int c = 0; c < NCOLS; c++) {
        WCol *col = &w->col[c];
        hsize_t zero = 0, unlim = H5S_UNLIMITED;
        hid_t space = H5Screate_simple(1, &zero, &unlim);
        hid_t dcpl = make_dcpl(c, compress, o.level);
        col->ftype = tr_file_type(COLS[c].kind, COLS[c].size);
        col->dset = H5Dcreate2(w->file, COLS[c].path, col->ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Sclose(space);
        H5Pclose(dcpl);
        if (col->dset < 0) { tr_h5_err("%s: cannot create dataset %s", path, COLS[c].path); goto fail; }
    }
    for (const char *const *a = o.attrs; a && a[0]; a += 2) {
        if (!a[1] || tr_in_list(RESERVED_ATTRS, a[0])) {
            err_set("%s: attribute %s: %s", path, a[0], a[1] ? "set by the trace library" : "no value");
            goto fail;
        }
        if (tr_put_str_attr(w->file, a[0], a[1]) < 0) { tr_h5_err("%s: cannot write attribute %s", path, a[0]); goto fail; }
    }
    if (open_scratch(w) < 0) goto fail;
    if (w->durable && (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0 || fsync_file(w) < 0)) {
        tr_h5_err("%s: cannot flush", path);
        goto fail;
    }
    /* link, not rename: a file another writer made at path meanwhile stays */
    if (link(tmp, path) != 0) {
        err_set("%s: cannot create: %s", path, errno == EEXIST ? "it appeared meanwhile" : strerror(errno));
        goto fail;
    }
    unlink(tmp);
    free(w->path);
    w->path = xstrdup(path);
    free(tmp);
    return w;
fail:
    broke(w);
    writer_abandon(w);
    unlink(tmp);
    free(tmp);
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
    if (take_writer_lock(w) < 0 || tr_probe_file(path, &flags) < 0) { writer_free(w); return NULL; }
    hid_t fapl = tr_make_fapl(flags != 0);
    w->file = H5Fopen(path, H5F_ACC_RDWR | H5F_ACC_SWMR_WRITE, fapl);
    H5Pclose(fapl);
    if (w->file < 0) {
        tr_h5_open_err(path, "cannot open for writing (SWMR, needs a file written by trace_create)");
        writer_free(w);
        return NULL;
    }
    /* A killed writer's superblock may record an end of allocated space
     * (EOA) that lags behind chunks the flushed indexes already point to;
     * allocating from there would overwrite them.  Everything referenced was
     * written, so it lies before the end of the file: allocate after both. */
    if (H5Fincrement_filesize(w->file, 0) < 0) {
        tr_h5_err("%s: cannot set the end of allocated space", path);
        writer_free(w);
        return NULL;
    }
    hid_t dsets[NCOLS];
    int64_t n[NGROUPS];
    if (tr_check_schema(path, w->file, dsets, n) < 0) { tr_close_dsets(dsets); writer_free(w); return NULL; }
    for (int c = 0; c < NCOLS; c++) {
        w->col[c].dset = dsets[c];
        w->col[c].ftype = tr_file_type(COLS[c].kind, COLS[c].size);
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
            if (r < 0) tr_h5_err("%s: cannot read the last chunk of %s", path, COLS[c].path);
            H5Sclose(ms);
            H5Sclose(fs);
            if (r < 0) {
                writer_free(w);
                return NULL;
            }
        }
    }
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0 || fsync_file(w) < 0) {
        tr_h5_err("%s: cannot flush", path);
        writer_free(w);
        return NULL;
    }
    return w;
}

static int check_key(TraceWriter *w, const char *key) {
    if (writer_failed(w)) return -1;
    if (!key || !*key) { err_set("%s: empty attribute name", w->path); return -1; }
    if (tr_in_list(RESERVED_ATTRS, key)) { err_set("%s: attribute %s is set by the trace library", w->path, key); return -1; }
    return 0;
}

static int attr_written(TraceWriter *w, int rc, const char *key) {
    if (rc < 0) { tr_h5_err("%s: cannot write attribute %s", w->path, key); return broke(w); }
    if (w->durable && H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) {
        tr_h5_err("%s: cannot flush", w->path);
        return broke(w);
    }
    return 0;
}

int trace_set_attr_str(TraceWriter *w, const char *key, const char *value) {
    if (check_key(w, key) < 0) return -1;
    return attr_written(w, tr_put_str_attr(w->file, key, value ? value : ""), key);
}

int trace_set_attr_num(TraceWriter *w, const char *key, double value) {
    if (check_key(w, key) < 0) return -1;
    return attr_written(w, tr_put_attr(w->file, key, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value), key);
}

char *trace_get_attr_str(TraceWriter *w, const char *key) {
    if (!w || !key) return NULL;
    return tr_attr_to_string(w->file, key);
}

int64_t trace_n_questions(const TraceWriter *w) { return w ? w->grp[G_QUESTIONS].done : 0; }
int64_t trace_n_trees(const TraceWriter *w) { return w ? w->grp[G_TREES].done : 0; }
int64_t trace_n_nodes(const TraceWriter *w) { return w ? w->grp[G_NODES].done : 0; }

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
        if (row_added(w, G_NODES) < 0) return broke(w);
    }
    memcpy(slot(w, C_TQ), &t->question, 4);
    memcpy(slot(w, C_TURN), &t->turn, 2);
    memcpy(slot(w, C_CYCLE), &t->cycle, 4);
    memcpy(slot(w, C_FIRST), &t->first_node, 8);
    memcpy(slot(w, C_NN), &t->n_nodes, 4);
    memcpy(slot(w, C_ALEN), &t->accept_len, 4);
    if (row_added(w, G_TREES) < 0) return broke(w);
    return 0;
}

/* Rule 3, step 2: the counts, in one flushed write. */
static int write_counts(TraceWriter *w) {
    for (int g = 0; g < NGROUPS; g++)
        if (tr_put_i64_attr(w->file, COUNT_ATTR[g], w->grp[g].done) < 0) {
            tr_h5_err("%s: cannot write attribute %s", w->path, COUNT_ATTR[g]);
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
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { tr_h5_err("%s: cannot flush", w->path); return -1; }
    if (fsync_file(w) < 0) return -1;
    crash_point();
    for (int g = 0; g < NGROUPS; g++) w->grp[g].done = w->grp[g].rows;
    if (write_counts(w) < 0) return -1;
    crash_point();
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { tr_h5_err("%s: cannot flush", w->path); return -1; }
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
    if (row_added(w, G_QUESTIONS) < 0) return broke(w);
    if (!w->durable) {
        for (int g = 0; g < NGROUPS; g++) w->grp[g].done = w->grp[g].rows;
        return 0;
    }
    if (commit(w) < 0) return broke(w);
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
        if (rc == 0 && H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0) { tr_h5_err("%s: cannot flush", w->path); rc = -1; }
        if (rc == 0) rc = fsync_file(w);
    }
    if (w->broken) {
        err_set("%s: closed after a write error; it keeps the questions finished before it (--resume)", w->path);
        writer_abandon(w);
        return -1;
    }
    for (int c = 0; c < NCOLS; c++) {
        if (w->col[c].dset >= 0) H5Dclose(w->col[c].dset);
        w->col[c].dset = -1;
    }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && rc == 0) { tr_h5_err("%s: cannot close", w->path); rc = -1; }
    w->file = -1;
    writer_free(w);
    return rc;
}
