#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char err_buf[1024];

/* Formats into a temporary first: callers may pass err_get() to add
 * context to the message already there ("%s: %s", file, err_get()), and
 * vsnprintf must not write the buffer it is reading. */
void err_set(const char *fmt, ...) {
    char msg[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(err_buf, msg, sizeof err_buf);
    /* one line, always */
    for (char *c = err_buf; *c; c++) if (*c == '\n') *c = ' ';
}

const char *err_get(void) { return err_buf[0] ? err_buf : "unknown error"; }

void die_err(const char *prog) {
    fprintf(stderr, "%s: %s\n", prog, err_get());
    exit(1);
}

void die(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void oom(size_t n) {
    fprintf(stderr, "out of memory allocating %zu bytes\n", n);
    exit(1);
}
void *xmalloc(size_t n) { void *p = malloc(n ? n : 1); if (!p) oom(n); return p; }
void *xcalloc(size_t n, size_t s) { void *p = calloc(n ? n : 1, s ? s : 1); if (!p) oom(n * s); return p; }
void *xrealloc(void *q, size_t n) { void *p = realloc(q, n ? n : 1); if (!p) oom(n); return p; }
char *xstrdup(const char *s) { size_t n = strlen(s) + 1; char *p = xmalloc(n); memcpy(p, s, n); return p; }

char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) { cap *= 2; buf = xrealloc(buf, cap); }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f), why = errno;
    fclose(f);
    if (bad) {
        free(buf);
        if (why == EISDIR) err_set("%s: is a directory, not a file", path);
        else err_set("%s: read error: %s", path, strerror(why));
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

cJSON *read_json_file(const char *path) {
    size_t n;
    char *text = read_text_file(path, &n);
    if (!text) return NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!j) {
        size_t off = end ? (size_t)(end - text) : 0;
        int line = 1;
        for (size_t i = 0; i < off && i < n; i++) if (text[i] == '\n') line++;
        /* JSON has no NaN/Infinity; Python's json module writes them anyway */
        if (strstr(text, "NaN") || strstr(text, "Infinity"))
            err_set("%s: non-finite number (NaN/Infinity) near line %d; JSON numbers must be finite", path, line);
        else
            err_set("%s: malformed JSON near line %d (byte %zu)", path, line, off);
    }
    free(text);
    return j;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ULL; }
    return h;
}

int file_hash_hex(const char *path, char out[17]) {
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    uint64_t h = FNV1A_START;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = fnv1a(buf, n, h);
    fclose(f);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return 0;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int progress_off;
void progress_quiet(int on) { progress_off = on; }

void progress_start(Progress *p, const char *label, int64_t total) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->t0 = p->last = now_seconds();
    p->tty = isatty(2);
    const char *w = strrchr(label, ' ');
    w = w ? w + 1 : label;
    w += *w == '(';
    snprintf(p->unit, sizeof p->unit, "%.*s", (int)strcspn(w, ")"), w);
}

static void progress_print(Progress *p, int64_t done, const char *extra, int final) {
    if (progress_off) return;
    if (final && !p->tty && p->printed && p->printed_done == done && !strcmp(p->printed_extra, extra ? extra : ""))
        return;   /* the last line said it all */
    double t = now_seconds(), el = t - p->t0;
    double rate = el > 0 ? (done - p->base) / el : 0;
    double eta = (rate > 0 && p->total > done) ? (p->total - done) / rate : 0;
    fprintf(stderr, "%s%s %lld/%lld  %.*f %s/s  elapsed %.0fs  ETA %.0fs%s%s%s", p->tty ? "\r" : "",
            p->label, (long long)done, (long long)p->total, rate < 10 ? 2 : 1, rate, p->unit, el, eta,
            extra ? "  " : "", extra ? extra : "", final || !p->tty ? "\n" : "");
    fflush(stderr);
    p->printed = 1;
    p->printed_done = done;
    snprintf(p->printed_extra, sizeof p->printed_extra, "%s", extra ? extra : "");
}

void progress_update(Progress *p, int64_t done, const char *extra) {
    double t = now_seconds();
    if (t - p->last < (p->tty ? 0.5 : 10)) return;
    p->last = t;
    progress_print(p, done, extra, 0);
}

void progress_end(Progress *p, int64_t done, const char *extra) { progress_print(p, done, extra, 1); }

int json_int(const cJSON *v, const char *file, const char *what, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) {
        err_set("%s: %s: expected an integer in [%lld, %lld], got %s", file, what, (long long)lo, (long long)hi,
                v ? "a non-number" : "nothing");
        return -1;
    }
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
        err_set("%s: %s: expected an integer in [%lld, %lld], got %.17g", file, what, (long long)lo, (long long)hi, d);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

FILE *atomic_create(const char *path, char **tmp) {
    size_t len = strlen(path);
    *tmp = xmalloc(len + 5);
    memcpy(*tmp, path, len);
    memcpy(*tmp + len, ".tmp", 5);
    FILE *f = fopen(*tmp, "wb");
    if (!f) {
        err_set("%s: cannot create: %s", path, strerror(errno));
        free(*tmp);
        *tmp = NULL;
    }
    return f;
}

int atomic_finish(FILE *f, char *tmp, const char *path, int bad) {
    int err = bad ? errno : 0;
    if (fclose(f) != 0 && !err) { bad = 1; err = errno; }
    if (!bad && rename(tmp, path) != 0) { bad = 1; err = errno; }
    if (bad) {
        err_set("%s: write failed: %s", path, strerror(err ? err : EIO));
        remove(tmp);
    }
    free(tmp);
    return bad ? -1 : 0;
}

int write_json(const char *path, const cJSON *j) {
    char *tmp;
    FILE *f = atomic_create(path, &tmp);
    if (!f) return -1;
    char *s = cJSON_Print(j);
    int bad = fputs(s, f) < 0 || fputc('\n', f) == EOF;
    free(s);
    return atomic_finish(f, tmp, path, bad);
}

void pages_drop(const void *p, size_t bytes) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)p,
                    lo = (start + page - 1) & ~(page - 1), hi = (start + bytes) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
