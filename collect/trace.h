/* collect/: spec-collect's trace files (trace_schema.c, trace_writer.c,
 * trace_reader.c, trace_merge.c; this is their interface) and the zstd
 * HDF5 filter. */
/* Trace files: what spec-collect writes and spec-train reads (HDF5).
 *
 * Schema version 1 (collect/ owns it; documented in docs/trace_format.md):
 *   /nodes/      one row per draft-tree node, 1-D chunked extendible datasets
 *     P         float32  joint probability (product of p along the path)
 *     H         float32  entropy (nats) of the draft distribution the node was
 *                        drawn from, over its top-M probabilities (attr topm)
 *     depth     uint8    children of the root have depth 1
 *     accepted  uint8    1 if greedy verification accepted the node
 *     token     int32    token id
 *     parent    int32    parent's index within its tree; -1 for depth 1
 *     p         float32  local draft probability
 *     rank      uint8    rank among its siblings (0 = most probable)
 *   /trees/      one row per draft-verify cycle
 *     question  int32    row in /questions
 *     turn      int16    0-based turn of the question
 *     cycle     int32    0-based cycle within the turn
 *     first_node int64   row of its first node in /nodes
 *     n_nodes   int32    its nodes are rows [first_node, first_node + n_nodes)
 *     accept_len int32   accepted draft nodes in this cycle (τ − 1)
 *   /questions/  one row per finished question
 *     benchmark  string  benchmark name (question file stem)
 *     question_id string question_id as written in the question file
 *   root attributes: schema_version, settings and provenance (see writer).
 *
 * Crash safety: rows are only "finished" once their question is; the count
 * of finished rows lives in root attributes n_questions, n_trees, n_nodes,
 * updated and flushed after each question.  Readers trust those counts, not
 * dataset extents (a kill mid-question leaves extra unfinished rows). */
#ifndef C2T_TRACE_H
#define C2T_TRACE_H
#include <stdint.h>

#define TRACE_SCHEMA_VERSION 1
/* HDF5 filter id registered for zstd (the one hdf5plugin uses). */
#define H5Z_FILTER_ZSTD 32015

typedef struct {
    float P, H, p;
    int32_t token, parent;
    uint8_t depth, accepted, rank;
} TraceNode;

typedef struct {
    int32_t question;
    int16_t turn;
    int32_t cycle;
    int64_t first_node;
    int32_t n_nodes, accept_len;
} TraceTree;

typedef enum { TRACE_ZSTD = 0, TRACE_GZIP, TRACE_NONE } TraceCompress;

/* ---- writing ---- */
typedef struct TraceWriter TraceWriter;
/* Creates a new file (fails if it exists). */
TraceWriter *trace_create(const char *path, TraceCompress compress);
/* Reopens a file for --resume: truncates unfinished rows.  The caller
 * compares settings attributes before continuing. */
TraceWriter *trace_resume(const char *path);
int trace_set_attr_str(TraceWriter *w, const char *key, const char *value);
int trace_set_attr_num(TraceWriter *w, const char *key, double value);
/* NULL if absent (caller frees). */
char *trace_get_attr_str(TraceWriter *w, const char *key);
int64_t trace_n_questions(const TraceWriter *w);
/* The file's finished trees and nodes (a resumed file's included). */
int64_t trace_n_trees(const TraceWriter *w);
int64_t trace_n_nodes(const TraceWriter *w);
/* Appends one tree; t->first_node and t->question are filled in by the
 * writer (nodes go after all nodes written so far; question = current). */
int trace_add_tree(TraceWriter *w, TraceTree *t, const TraceNode *nodes);
/* Marks the current question finished: writes its row, updates the counts
 * and flushes to disk.  Everything added since the previous call belongs
 * to this question. */
int trace_finish_question(TraceWriter *w, const char *benchmark, const char *question_id);
int trace_close(TraceWriter *w);

/* ---- reading (streaming) ---- */
typedef struct TraceReader TraceReader;
/* Checks the schema (datasets present, types, version); errors name the
 * file and the missing piece. */
TraceReader *trace_open(const char *path);
int64_t trace_reader_trees(const TraceReader *r);
int64_t trace_reader_nodes(const TraceReader *r);
int64_t trace_reader_questions(const TraceReader *r);
int trace_read_trees(TraceReader *r, int64_t start, int64_t count, TraceTree *out);
int trace_read_nodes(TraceReader *r, int64_t start, int64_t count, TraceNode *out);
/* Only the fields named in `fields` (TRACE_F_* bits); the others are left
 * as they were.  Columns not read are not decompressed. */
enum { TRACE_F_P = 1, TRACE_F_H = 2, TRACE_F_DEPTH = 4, TRACE_F_ACCEPTED = 8, TRACE_F_TOKEN = 16,
       TRACE_F_PARENT = 32, TRACE_F_LOCALP = 64, TRACE_F_RANK = 128, TRACE_F_ALL = 255 };
int trace_read_node_fields(TraceReader *r, int64_t start, int64_t count, TraceNode *out, unsigned fields);
/* Root attribute as a string (numbers formatted); NULL if absent. */
char *trace_reader_attr(TraceReader *r, const char *key);
void trace_reader_close(TraceReader *r);

/* Joins finished rows of several files into out (spec-collect merge). */
int trace_merge(const char *out, const char *const *inputs, int n, TraceCompress compress);

/* ---- additions (docs/trace_format.md) ---- */
/* /questions strings are fixed-length UTF-8, NUL-padded, of these many bytes;
 * longer names are refused by trace_finish_question. */
#define TRACE_BENCHMARK_LEN 64
#define TRACE_QUESTION_ID_LEN 128
/* Rows per chunk of the datasets of each group. */
#define TRACE_CHUNK_NODES 8192
#define TRACE_CHUNK_TREES 1024
#define TRACE_CHUNK_QUESTIONS 256

typedef struct {
    char benchmark[TRACE_BENCHMARK_LEN + 1];
    char question_id[TRACE_QUESTION_ID_LEN + 1];
} TraceQuestion;

typedef struct {
    /* 1 (what trace_create uses): every finished question is on disk and
     * survives kill -9 (SWMR-ordered writes, two flushes and an fdatasync per
     * question).  0: chunks are written when full and at trace_close only, no
     * flushes; an interrupted run leaves an unusable file, so write under a
     * temporary name and rename (trace_merge does). */
    int durable;
    int level;   /* compression level; 0 = default (zstd 3, gzip 4) */
    /* key, value, key, value, ..., NULL: string attributes written before
     * the file appears at path, so that no file there lacks them (a run
     * interrupted while setting them one by one could leave the root's
     * attributes unreadable); NULL for none */
    const char *const *attrs;
} TraceCreateOpts;
TraceWriter *trace_create_ex(const char *path, TraceCompress compress, const TraceCreateOpts *opts);
/* Rows [start, start + count) of /questions. */
int trace_read_questions(TraceReader *r, int64_t start, int64_t count, TraceQuestion *out);
/* "zstd" | "gzip" | "none" -> 0; -1 + err_set otherwise. */
int trace_compress_parse(const char *name, TraceCompress *out);
const char *trace_compress_name(TraceCompress c);
/* 1 for root attributes that may differ between the shards trace_merge
 * joins (shard, start_time, ...: the list is in docs/trace_format.md). */
int trace_attr_per_shard(const char *key);
/* ---- tree-by-tree passes (spec-train's dataset, spec-analyze) ---- */
/* Node rows of one file handed out tree by tree, read in blocks of
 * TRACE_CURSOR_BLOCK rows (or one tree, if larger) so that each compressed
 * chunk is decoded once while memory stays one block. */
#define TRACE_CURSOR_BLOCK 65536
typedef struct {
    TraceReader *r;
    unsigned fields;        /* TRACE_F_* columns read; the others stay on disk */
    TraceNode *buf;
    int64_t cap, start, len;
    double read_seconds;    /* time spent in trace_read_node_fields */
    int64_t nodes_read;
} TraceCursor;
void trace_cursor_init(TraceCursor *c, TraceReader *r, unsigned fields);
/* The nodes of tree row tree_row, [first, first + count) (a pointer into the
 * cursor's block, valid until the next call); NULL + err_set on a read
 * error (a failed checksum, a truncated file), naming the file and the tree. */
const TraceNode *trace_cursor_get(TraceCursor *c, int64_t tree_row, int64_t first, int64_t count);
void trace_cursor_free(TraceCursor *c);
/* Checks one tree's n nodes (rows first_row..): accepted is 0 or 1, parent
 * is -1 or another node of the tree, and the parent links reach the root
 * (no cycle).  0, or -1 + err_set naming path and row.  scratch: n bytes. */
int trace_check_tree(const char *path, int64_t tree_row, int64_t first_row, const TraceNode *nd, int n,
                     uint8_t *scratch);
#endif
