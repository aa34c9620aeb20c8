/* kernels/base/: the lowest layer, basics every other folder may include
 * (this file, rng.h, dtype.h) and that include nothing of ours. */
/* Shared plumbing: error reporting, files, JSON, progress.
 * Library functions never exit: they record one line in the thread's error
 * slot (err_set) and return NULL / -1; commands print it with die_err(). */
#ifndef C2T_UTIL_H
#define C2T_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;

#if defined(__GNUC__)
#define PRINTF_LIKE(a, b) __attribute__((format(printf, a, b)))
#else
#define PRINTF_LIKE(a, b)
#endif

void err_set(const char *fmt, ...) PRINTF_LIKE(1, 2);
const char *err_get(void);
/* Prints "prog: <last error>" and exits 1. */
void die_err(const char *prog) __attribute__((noreturn));
void die(const char *prog, const char *fmt, ...) PRINTF_LIKE(2, 3) __attribute__((noreturn));

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* Whole file into a NUL-terminated buffer; NULL + err_set on failure. */
char *read_text_file(const char *path, size_t *len);
/* Parses a JSON file; the error names the file and the position. */
struct cJSON *read_json_file(const char *path);
/* Pretty-printed JSON to path, atomically (path.tmp, then rename); 0 / -1. */
int write_json(const char *path, const struct cJSON *j);
/* Writing a file so that a reader never sees half of it and a failed write
 * (disk full, I/O error) leaves what was there: atomic_create opens
 * path.tmp (*tmp owns that name); atomic_finish closes it and renames it over
 * path, or, when bad is set or anything failed, removes it and sets the
 * error "path: write failed: why".  0 / -1. */
FILE *atomic_create(const char *path, char **tmp);
int atomic_finish(FILE *f, char *tmp, const char *path, int bad);
/* A JSON value that must be an integer in [lo, hi] (|lo|, |hi| <= 2^53):
 * 0 with it in *out, else -1 with "<file>: <what>: expected an integer in
 * [lo, hi], got ..." (a number like 6.7e29 is never cast: that is UB). */
int json_int(const struct cJSON *v, const char *file, const char *what, int64_t lo, int64_t hi, int64_t *out);
int file_exists(const char *path);
/* dir + "/" + name into a fresh string. */
char *path_join(const char *dir, const char *name);
/* FNV-1a 64 of a file's bytes, as 16 hex digits (config identities). */
int file_hash_hex(const char *path, char out[17]);
/* FNV-1a 64 of n bytes, continuing from h (FNV1A_START for a new hash). */
#define FNV1A_START 1469598103934665603ULL
uint64_t fnv1a(const void *data, size_t n, uint64_t h);
/* The whole pages inside [p, p + bytes) of a read-only private file
 * mapping leave this process's memory (MADV_DONTNEED: read again, a page
 * faults back in from the file; the pages shared with the bytes around
 * stay): a checkpoint's bytes once a copy holds them.  Advice only: a
 * refusal changes no result. */
void pages_drop(const void *p, size_t bytes);

double now_seconds(void);

/* A progress line on stderr: "label done/total rate unit/s ETA", the unit
 * being the label's last word ("spec-eval turns": turns/s; "reading traces
 * (nodes)": nodes/s).  On a terminal it is redrawn in place, at most twice a
 * second; where stderr is a file or a pipe, a whole line is written at most
 * every 10 s and at the end (not again when the last line already said it),
 * so a log holds no carriage returns.  progress_update may be called as
 * often as wanted (a decoding loop calls it every cycle, so that a long
 * item still shows a line every 10 s).  progress_quiet(1) silences every bar
 * (the commands' --quiet). */
typedef struct {
    const char *label;
    char unit[32];
    int64_t total;
    int64_t base;             /* done before this run (a resume): not in the rate */
    double t0, last;
    int tty;
    int printed;              /* a line was written */
    int64_t printed_done;     /* ... at this count */
    char printed_extra[256];  /* ... with this extra */
} Progress;
void progress_quiet(int on);
void progress_start(Progress *p, const char *label, int64_t total);
void progress_update(Progress *p, int64_t done, const char *extra);
void progress_end(Progress *p, int64_t done, const char *extra);

#endif
