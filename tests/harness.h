/* Minimal C test harness.  Each tests/test_*.c is one binary whose main()
 * calls RUN(fn) for each test; a test reports through CHECK (continues) or
 * REQUIRE (returns), or calls SKIP.  Output is one line per test:
 *   PASS name | FAIL name: where: what | SKIP name: why
 * tests/run.sh adds the lines up into "N passed, N failed". */
#ifndef C2T_HARNESS_H
#define C2T_HARNESS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdarg.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>
#include <errno.h>

static int h_failed, h_skipped, h_total_failed;
static const char *h_name;

static void h_fail(const char *file, int line, const char *fmt, ...) {
    if (!h_failed) printf("FAIL %s: ", h_name); else printf("FAIL %s: ", h_name);
    va_list ap; va_start(ap, fmt);
    printf("%s:%d: ", file, line); vprintf(fmt, ap); printf("\n");
    va_end(ap);
    fflush(stdout);
    h_failed++;
}

#define CHECK(cond, ...) do { if (!(cond)) h_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define REQUIRE(cond, ...) do { if (!(cond)) { h_fail(__FILE__, __LINE__, __VA_ARGS__); return; } } while (0)
#define SKIP(...) do { printf("SKIP %s: ", h_name); printf(__VA_ARGS__); printf("\n"); h_skipped = 1; return; } while (0)

#define RUN(fn) h_run(#fn, fn)
/* C2T_ONLY=substring runs only the tests whose name contains it (e.g. one
 * test under compute-sanitizer). */
/* C2T_CASE_TIMES=FILE appends "seconds binary:name" for every test run (tests/run.sh
 * names the slowest). */
static double h_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void h_run(const char *name, void (*fn)(void)) {
    const char *only = getenv("C2T_ONLY"), *times = getenv("C2T_CASE_TIMES");
    if (only && *only && !strstr(name, only)) return;
    h_name = name; h_failed = 0; h_skipped = 0;
    const double t0 = h_now();
    fn();
    if (!h_failed && !h_skipped) printf("PASS %s\n", name);
    if (h_failed) h_total_failed++;
    fflush(stdout);
    FILE *f = times && *times ? fopen(times, "a") : NULL;
    if (f) { fprintf(f, "%.2f %s:%s\n", h_now() - t0, program_invocation_short_name, name); fclose(f); }
}
static int h_done(void) { return h_total_failed ? 1 : 0; }

/* make test checks each property at the size it needs (fewer prompts,
 * tokens or cases where more would only repeat the check, each test says
 * why its size is enough); make test-long (C2T_TEST_LONG=1) runs the same
 * tests at their whole sizes: the heavy equality sweeps, run before a
 * change to the cycle lands.  TEST_SIZE(quick, whole) picks one. */
static inline int test_long(void) {
    const char *e = getenv("C2T_TEST_LONG");
    return e && !strcmp(e, "1");
}
#define TEST_SIZE(quick, whole) (test_long() ? (whole) : (quick))

/* Directory of the project's binaries (make test-asan points it elsewhere). */
__attribute__((unused)) static const char *bin_dir(void) {
    const char *b = getenv("C2T_BIN");
    return b && *b ? b : "bin";
}

/* The write-fault shim (tests/fault_write.c) beside the test binaries of
 * this build: $C2T_BUILD (make test-asan sets build-asan; another build
 * folder, e.g. an AVX2-only build-avx2, sets its own), default build/. */
__attribute__((unused)) static const char *fault_lib(void) {
    static char p[512];
    const char *b = getenv("C2T_BUILD");
    snprintf(p, sizeof p, "%s/tests/libfault_write.so", b && *b ? b : "build");
    return p;
}

/* Runs a shell command, captures its stderr (first line kept in err), and
 * returns the exit status, or 128+signal when it died of a signal. */
__attribute__((unused)) static int run_cmd(char *err, size_t errlen, const char *fmt, ...) {
    char cmd[4096], full[4200], path[] = "/tmp/c2t_test_errXXXXXX";
    va_list ap; va_start(ap, fmt); vsnprintf(cmd, sizeof cmd, fmt, ap); va_end(ap);
    int fd = mkstemp(path); if (fd >= 0) close(fd);
    snprintf(full, sizeof full, "%s 2>%s >/dev/null", cmd, path);
    int st = system(full);
    if (err && errlen) {
        err[0] = 0;
        FILE *f = fopen(path, "r");
        if (f) { size_t n = fread(err, 1, errlen - 1, f); err[n] = 0; fclose(f); }
    }
    unlink(path);
    if (st == -1) return -1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    int code = WEXITSTATUS(st);
    return code;  /* the shell reports a child's death by signal as 128+sig */
}

__attribute__((unused)) static int count_lines(const char *s) {
    int n = 0; for (; *s; s++) if (*s == '\n') n++;
    return n;
}

/* An error report is "one line naming the file and the problem". */
/* Largest |a[i]|, and largest |a[i] - b[i]| (a NaN counts as infinite, so
 * it can never pass a bound). */
static inline float max_abs(const float *a, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) if (fabsf(a[i]) > m) m = fabsf(a[i]);
    return m;
}
static inline float max_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* 1 when this build has the CUDA backend and a GPU is visible. */
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
static inline int gpu_visible(void) { return cuda_available(); }
#else
static inline int gpu_visible(void) { return 0; }
#endif

/* Copies a file byte for byte (test fixtures); 0 / -1. */
static inline int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int bad = !in || !out;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, n, out) != n;
    if (in) { bad |= ferror(in); fclose(in); }
    if (out) bad |= fclose(out) != 0;
    return bad ? -1 : 0;
}

/* Writes text to path (test fixtures). */
static inline void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

/* Target / draft pairs of the tiny test checkpoints on which every policy
 * must decode losslessly: the target as its own draft LM (every guess
 * accepted, so paths run deep and the bonus-token / KV-keep logic is
 * exercised), another LM, an EAGLE head, two EAGLE-3 heads (a reduced
 * draft vocabulary in safetensors; a full one with its own embeddings in
 * pytorch_model.bin), a Qwen2 target (q/k/v biases) drafted by its own
 * weights rounded to BF16 (most guesses accepted, some not), and a Qwen2
 * target in GGUF block types (spec-convert --dtype keep of
 * tests/golden/qwen2_quant.gguf) with its BF16 conversion as draft, and the
 * other way round (a draft LM in block types). */
#define N_LOSSLESS_DRAFTS 8
static const char *const LOSSLESS_DRAFTS[N_LOSSLESS_DRAFTS][3] = {
    {"tests/ckpt/llama3_f32", "lm", "tests/ckpt/llama3_f32"},
    {"tests/ckpt/llama3_f32", "lm", "tests/ckpt/llama2_f32"},
    {"tests/ckpt/llama3_f32", "eagle", "tests/ckpt/eagle_tiny"},
    {"tests/ckpt/tiny_chat_l8", "eagle3", "tests/ckpt/eagle3_tiny"},
    {"tests/ckpt/tiny_chat_l8", "eagle3", "tests/ckpt/eagle3_tiny_bin"},
    {"tests/ckpt/qwen2_f32", "lm", "tests/ckpt/qwen2_bf16"},
    {"tests/ckpt/qwen2_quant", "lm", "tests/ckpt/qwen2_quant_bf16"},
    {"tests/ckpt/qwen2_quant_bf16", "lm", "tests/ckpt/qwen2_quant"},
};

#define CHECK_ONE_LINE_ERROR(rc, err, needle) do { \
    CHECK((rc) != 0 && (rc) < 128, "expected clean non-zero exit, got %d (%s)", (rc), (err)); \
    CHECK(count_lines(err) == 1, "expected one error line, got: %s", (err)); \
    CHECK(strstr((err), (needle)) != NULL, "error does not name '%s': %s", (needle), (err)); \
} while (0)

#endif
