/* What the trace writer, reader and merge share (collect/trace_*.c): the
 * schema tables, the HDF5 helpers, and the writer's and reader's structs
 * (merge reads one and writes the other).  Not a public interface:
 * collect/trace.h is. */
#ifndef C2T_TRACE_INTERNAL_H
#define C2T_TRACE_INTERNAL_H
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
               "the trace writer keeps chunk buffers in the file's byte order (little-endian)");

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

int tr_in_list(const char *const *list, const char *key);

/* ---- HDF5 helpers, attributes, opening (trace_schema.c) ---- */
void tr_h5_forget(void);
const char *tr_h5_reason(void);
int tr_init(void);
void tr_h5_errors_here(void);
hid_t tr_file_type(int kind, size_t size);
int tr_type_matches(hid_t t, int kind, size_t size);
void tr_describe_type(hid_t t, char *buf, size_t n);
int tr_attr_exists(hid_t loc, const char *key);
char *tr_attr_to_string(hid_t loc, const char *key);
int tr_read_int_attr(hid_t loc, const char *key, int64_t *v);
int tr_put_attr(hid_t loc, const char *key, hid_t ft, hid_t mt, const void *buf);
int tr_put_str_attr(hid_t loc, const char *key, const char *value);
int tr_put_i64_attr(hid_t loc, const char *key, int64_t v);
int tr_probe_file(const char *path, unsigned *flags);
hid_t tr_make_fapl(int unclosed);
int tr_check_schema(const char *path, hid_t file, hid_t *dsets, int64_t n[NGROUPS]);
void tr_close_dsets(hid_t *dsets);
void tr_h5_err(const char *fmt, ...) PRINTF_LIKE(1, 2);
/* A file HDF5 would not open: "PATH: WHAT: <HDF5's reason>", or for a
 * truncated file, in a user's words, how much of it is there and what to
 * do. */
void tr_h5_open_err(const char *path, const char *what);

/* ---- writer ---- */

typedef struct {
    hid_t dset, scratch, ftype;
    unsigned char *tail;       /* the tail chunk's rows, file byte order */
    hsize_t extent;            /* current extent of dset */
    int nfilters;
    unsigned raw_mask;         /* filter mask of a raw chunk: every filter skipped */
    int checked;               /* the pipeline ends with the fletcher32 checksum */
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

/* ---- reader ---- */

struct TraceReader {
    char *path;
    hid_t file;
    hid_t dset[NCOLS];
    int64_t n[NGROUPS];
    void *buf;
    size_t buf_cap;
};
#endif
