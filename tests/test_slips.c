/* Nothing lost by a slip of the hand: no command writes over one of its own
 * inputs (the same file by any path: ./x, a symlink, a hard link), an output
 * path that cannot be written is refused in one line before anything loads,
 * and spec-eval stopped by SIGINT or SIGTERM writes the turns it finished as
 * a partial report. */
#include "tests/harness.h"
#include "tests/synth.h"
#include "kernels/base/util.h"
#include "train/analyze.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

static char dir[] = "/tmp/c2t_slipsXXXXXX";
static char *trace;   /* a small synthetic trace (tests/synth.h) */

static char *tpath(const char *name) { return path_join(dir, name); }

/* The bytes of path (NULL when unreadable), *n their count. */
static char *bytes_of(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    char *b = xmalloc(cap);
    *n = 0;
    size_t got;
    while ((got = fread(b + *n, 1, cap - *n, f)) > 0) {
        *n += got;
        if (*n == cap) b = xrealloc(b, cap *= 2);
    }
    fclose(f);
    return b;
}

/* A file's bytes before a command, to compare after it. */
typedef struct {
    const char *path;
    char *b;
    size_t n;
} Snapshot;

static Snapshot snap(const char *path) {
    Snapshot s = {path, NULL, 0};
    s.b = bytes_of(path, &s.n);
    return s;
}

/* 1 when the file still holds exactly the snapshot's bytes. */
static int unchanged(Snapshot *s) {
    size_t n;
    char *b = bytes_of(s->path, &n);
    int same = b && s->b && n == s->n && !memcmp(b, s->b, n);
    free(b);
    free(s->b);
    s->b = NULL;
    return same;
}

/* Runs cmd (printf-style after the first three): it must exit non-zero
 * (not by a signal) with one stderr line holding both needles, and leave
 * file (may be NULL) byte for byte as it was.  0 / -1 (reported). */
static int refused(const char *file, const char *needle, const char *needle2, const char *fmt, ...) {
    char cmd[4096], err[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    Snapshot s = snap(file ? file : "/dev/null");
    const int rc = run_cmd(err, sizeof err, "%s", cmd);
    const int before = h_failed;
    CHECK(rc != 0 && rc < 128, "%s: expected a clean refusal, got exit %d: %s", cmd, rc, err);
    CHECK(count_lines(err) == 1, "%s: expected one error line, got: %s", cmd, err);
    CHECK(strstr(err, needle) && strstr(err, needle2), "%s: the error does not say '%s' ... '%s': %s", cmd, needle,
          needle2, err);
    if (file) CHECK(unchanged(&s), "%s: %s was changed", cmd, file);
    free(s.b);
    return h_failed == before ? 0 : -1;
}

/* ---------------------------------------------------------------- spec-train */

/* --out, --report and --safetensors onto the trace, by its own path, by
 * ./ and // in it, a symlink, a hard link, and as --traces: refused, the
 * trace untouched.  A new --out still trains (the check refuses only a
 * clash). */
static void test_train_never_writes_over_its_trace(void) {
    char *sym = tpath("link.h5"), *hard = tpath("hard.h5"), *dotted = xmalloc(strlen(dir) + 16),
         *doubled = xmalloc(strlen(dir) + 16), *w = tpath("w.json");
    sprintf(dotted, "%s/./t.h5", dir);
    sprintf(doubled, "%s//t.h5", dir);
    unlink(sym); unlink(hard);
    REQUIRE(symlink(trace, sym) == 0 && link(trace, hard) == 0, "symlink/link: %s", strerror(errno));
    const char *outs[] = {trace, dotted, doubled, sym, hard};
    for (int i = 0; i < 5; i++) {
        refused(trace, outs[i], "is one of its inputs", "%s/spec-train %s --out %s --quiet", bin_dir(), trace, outs[i]);
        refused(trace, outs[i], "--report", "%s/spec-train --traces %s --out %s --report %s --quiet", bin_dir(), trace, w,
                outs[i]);
        refused(trace, outs[i], "--safetensors", "%s/spec-train %s --out %s --safetensors %s --quiet", bin_dir(), trace, w,
                outs[i]);
    }
    CHECK(!file_exists(w), "a refused run wrote %s", w);
    /* two outputs onto one file: the weights would be lost to the report */
    refused(NULL, "the same file as --out", w, "%s/spec-train %s --out %s --report %s --quiet", bin_dir(), trace, w, w);
    char err[4096];
    int rc = run_cmd(err, sizeof err, "%s/spec-train %s --out %s --epochs 1 --hidden 4 --quiet", bin_dir(), trace, w);
    CHECK(rc == 0 && file_exists(w), "spec-train with a new --out: exit %d: %s", rc, err);
    free(sym); free(hard); free(dotted); free(doubled); free(w);
}

/* ---------------------------------------------------------------- spec-analyze */

/* --out DIR holding a trace under the name of one of its CSV files, --out
 * onto the trace itself, replay --json onto the trace: refused, untouched.
 * And analysis_files (what the check compares) names every file the
 * analysis writes. */
static void test_analyze_never_writes_over_its_trace(void) {
    char *sub = tpath("an_in"), *in_csv = tpath("an_in/recall_theta.csv"), *fresh = tpath("an_out");
    mkdir(sub, 0777);
    REQUIRE(copy_file(trace, in_csv) == 0, "copy %s", in_csv);
    refused(in_csv, "is one of its inputs", "recall_theta.csv", "%s/spec-analyze %s --out %s --quiet", bin_dir(), in_csv,
            sub);
    refused(trace, "not a folder", trace, "%s/spec-analyze %s --out %s --quiet", bin_dir(), trace, trace);
    refused(trace, "is one of its inputs", "--json", "%s/spec-analyze replay %s --depth 1 --total 10 --json %s",
            bin_dir(), trace, trace);
    char err[4096];
    int rc = run_cmd(err, sizeof err, "%s/spec-analyze %s --out %s --quiet", bin_dir(), trace, fresh);
    REQUIRE(rc == 0, "spec-analyze --out a new folder: exit %d: %s", rc, err);
    DIR *d = opendir(fresh);
    REQUIRE(d, "%s: %s", fresh, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        int listed = 0;
        for (int k = 0; analysis_files[k]; k++) listed |= !strcmp(analysis_files[k], e->d_name);
        CHECK(listed, "spec-analyze wrote %s, which analysis_files does not name", e->d_name);
        n++;
    }
    closedir(d);
    CHECK(n >= 6, "spec-analyze --out wrote %d files", n);
    free(sub); free(in_csv); free(fresh);
}

/* ---------------------------------------------------------------- spec-eval */

/* --json and --csv onto a --questions file or the --classifier, and onto
 * each other: refused before any model loads, the files untouched. */
static void test_eval_never_writes_over_its_inputs(void) {
    char *q = tpath("q.jsonl"), *cls = tpath("cls.json"), *r = tpath("r.json");
    REQUIRE(copy_file("data/demo/prompts/code_test.jsonl", q) == 0 && copy_file("data/demo/classifier.json", cls) == 0,
            "copy the demo's questions and classifier");
    const char *base = "--target data/demo/target --template none --draft data/demo/eagle --max-new-tokens 8";
    refused(q, "is one of its inputs", "--questions", "%s/spec-eval %s --questions %s --json %s", bin_dir(), base, q, q);
    refused(q, "is one of its inputs", "--csv", "%s/spec-eval %s --questions data/demo/prompts/code_test.jsonl "
            "--questions %s --csv %s", bin_dir(), base, q, q);
    refused(cls, "is one of its inputs", "--classifier", "%s/spec-eval %s --questions %s --policy c2t --classifier %s "
            "--json %s", bin_dir(), base, q, cls, cls);
    refused(cls, "is one of its inputs", "--classifier", "%s/spec-eval %s --questions %s --policy c2t "
            "--param classifier=%s --json %s", bin_dir(), base, q, cls, cls);
    refused(NULL, "the same file as --json", r, "%s/spec-eval %s --questions %s --json %s --csv %s", bin_dir(), base, q,
            r, r);
    CHECK(!file_exists(r), "a refused run wrote %s", r);
    free(q); free(cls); free(r);
}

/* ---------------------------------------------------------------- spec-convert, spec-collect */

/* spec-convert with the GGUF inside OUTDIR under a name it writes, or
 * OUTDIR the GGUF itself; spec-collect --resume --out onto its questions,
 * merge onto an input: refused, untouched. */
static void test_convert_and_collect_never_write_over_inputs(void) {
    char *conv = tpath("conv"), *gguf = tpath("conv/config.json"), *q = tpath("cq.jsonl");
    mkdir(conv, 0777);
    REQUIRE(copy_file("tests/golden/gguf/small.gguf", gguf) == 0, "copy the GGUF");
    refused(gguf, "is one of its inputs", "config.json", "%s/spec-convert %s %s", bin_dir(), gguf, conv);
    refused(gguf, "not a folder", gguf, "%s/spec-convert %s %s", bin_dir(), gguf, gguf);
    REQUIRE(copy_file("data/demo/prompts/code_test.jsonl", q) == 0, "copy questions");
    refused(q, "is one of its inputs", "--questions", "%s/spec-collect --target data/demo/target --draft data/demo/eagle "
            "--template none --questions %s --out %s --resume", bin_dir(), q, q);
    refused(trace, "is one of its inputs", "IN.h5", "%s/spec-collect merge %s %s", bin_dir(), trace, trace);
    free(conv); free(gguf); free(q);
}

/* ---------------------------------------------------------------- outputs first */

/* An output into a folder that does not exist is refused in one line
 * naming the option and the folder, before any model or trace is read (a
 * late error would come from the writer, without the option's name, after
 * the loading). */
static void test_missing_folder_refused_first(void) {
    char *m = tpath("missing/x"), *g = "tests/golden/gguf/small.gguf";
    const char *decode = "--target data/demo/target --template none --draft data/demo/eagle "
                         "--questions data/demo/prompts/code_test.jsonl --max-new-tokens 8";
    refused(NULL, "--out", "missing", "%s/spec-collect %s --out %s.h5", bin_dir(), decode, m);
    refused(NULL, "--json", "missing", "%s/spec-eval %s --json %s.json", bin_dir(), decode, m);
    refused(NULL, "--csv", "missing", "%s/spec-eval %s --csv %s.csv", bin_dir(), decode, m);
    refused(NULL, "--out", "missing", "%s/spec-train %s --out %s.json --quiet", bin_dir(), trace, m);
    refused(NULL, "--report", "missing", "%s/spec-train %s --out %s/w.json --report %s.json --quiet", bin_dir(), trace,
            dir, m);
    refused(NULL, "--out", "missing", "%s/spec-analyze %s --out %s --quiet", bin_dir(), trace, m);
    refused(NULL, "--json", "missing", "%s/spec-analyze replay %s --depth 1 --total 10 --json %s.json", bin_dir(), trace, m);
    refused(NULL, "OUTDIR", "missing", "%s/spec-convert %s %s", bin_dir(), g, m);
    refused(NULL, "OUT.h5", "missing", "%s/spec-collect merge %s.h5 %s %s", bin_dir(), m, trace, trace);
    free(m);
}

/* ---------------------------------------------------------------- spec-eval interrupted */

/* The command under sh -c "exec ...", its stderr a new terminal (so that
 * the progress line, "spec-eval turns N/M", is redrawn twice a second) and
 * its stdout the file out.  The pid; *master reads the terminal. */
static pid_t start_on_terminal(const char *cmd, const char *out, int *master) {
    *master = posix_openpt(O_RDWR | O_NOCTTY);
    if (*master < 0 || grantpt(*master) || unlockpt(*master)) return -1;
    const char *slave = ptsname(*master);
    pid_t pid = fork();
    if (pid == 0) {
        int s = open(slave, O_RDWR | O_NOCTTY), o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (s < 0 || o < 0) _exit(127);
        dup2(s, 2);
        dup2(o, 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The turns done in the last progress line of text, or -1. */
static long turns_shown(const char *text) {
    const char *p = NULL;
    for (const char *at = text; (at = strstr(at, "spec-eval turns ")); at++) p = at;
    long done = -1;
    if (p && sscanf(p, "spec-eval turns %ld/", &done) != 1) done = -1;
    return done;
}

/* 1 when this machine can open a pseudo-terminal (containers without
 * /dev/ptmx cannot). */
static int have_pty(void) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m >= 0) close(m);
    return m >= 0;
}

/* Runs cmd on a terminal and sends sig once the progress line shows a
 * finished turn.  Its exit status (-1: it ended first, or never showed
 * one within 15 minutes), its stderr into term. */
static int interrupt_after_a_turn(const char *cmd, const char *out, int sig, char *term, size_t cap) {
    int master;
    pid_t pid = start_on_terminal(cmd, out, &master);
    if (pid < 0) return -1;
    size_t n = 0;
    int sent = 0, status = -1;
    term[0] = 0;
    const double t0 = now_seconds();
    for (;;) {
        struct pollfd pf = {master, POLLIN, 0};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t got = read(master, term + n, cap - 1 - n);
            if (got > 0) n += (size_t)got;
            if (n > cap / 2) {   /* keep the last half: the latest progress line is what counts */
                memmove(term, term + n - cap / 4, cap / 4);
                n = cap / 4;
            }
            term[n] = 0;
        }
        if (!sent && turns_shown(term) >= 1) sent = kill(pid, sig) == 0;
        if (!sent && now_seconds() - t0 > 900) kill(pid, SIGKILL);
        if (waitpid(pid, &status, WNOHANG) == pid) break;
    }
    for (ssize_t got; (got = read(master, term + n, cap - 1 - n)) > 0;) n += (size_t)got;   /* what is left */
    term[n] = 0;
    close(master);
    return sent && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* A partial report: partial true, 0 < turns_done < turns_total, the signal
 * named, and the totals those of the turns listed (no question without a
 * finished turn). */
static void check_partial_report(const char *json, const char *sig) {
    char *text = read_text_file(json, NULL);
    cJSON *r = text ? cJSON_Parse(text) : NULL;
    free(text);
    REQUIRE(r, "%s does not parse as JSON", json);
    const double done = num(r, "turns_done"), total = num(r, "turns_total");
    const cJSON *ib = cJSON_GetObjectItem(r, "interrupted_by");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(r, "partial")), "%s: partial is not true", json);
    CHECK(done > 0 && done < total, "%s: turns_done %g of %g", json, done, total);
    CHECK(cJSON_IsString(ib) && !strcmp(ib->valuestring, sig), "%s: interrupted_by is not %s", json, sig);
    double tokens = 0, cycles = 0, gamma = 0, turns = 0;
    const cJSON *b, *q, *t;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(r, "benchmarks")) cJSON_ArrayForEach(q, cJSON_GetObjectItem(b, "questions")) {
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(q, "turns")) > 0, "%s: a question without a finished turn", json);
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(q, "turns")) {
            tokens += num(t, "new_tokens");
            cycles += num(t, "cycles");
            gamma += num(t, "gamma");
            turns++;
        }
    }
    const cJSON *all = cJSON_GetObjectItem(r, "total");
    CHECK(turns == done, "%s: %g turns listed, turns_done %g", json, turns, done);
    CHECK(tokens == num(all, "new_tokens") && cycles == num(all, "cycles") && gamma == num(all, "gamma"),
          "%s: the totals (%g tokens, %g cycles, gamma %g) are not the turns' (%g, %g, %g)", json, num(all, "new_tokens"),
          num(all, "cycles"), num(all, "gamma"), tokens, cycles, gamma);
    cJSON_Delete(r);
}

/* SIGINT after the first finished turn, one sequence: exit 130, one line
 * saying what was written, the table marked, the JSON partial and
 * consistent, the CSV row marked partial. */
static void test_eval_interrupted_writes_partial(void) {
    char *json = tpath("int.json"), *csv = tpath("int.csv"), *out = tpath("int.out"), cmd[2048], term[16384];
    snprintf(cmd, sizeof cmd, "exec %s/spec-eval --target data/demo/target --template none --draft data/demo/eagle "
             "--questions data/demo/prompts/code_test.jsonl --max-new-tokens 64 --total 60 --draft-vocab full "
             "--cost-cache none --json %s --csv %s", bin_dir(), json, csv);
    if (!have_pty()) SKIP("no pseudo-terminal to watch the progress line on");
    const int rc = interrupt_after_a_turn(cmd, out, SIGINT, term, sizeof term);
    REQUIRE(rc == 130, "exit %d, expected 130 (stderr: %s)", rc, term);
    CHECK(strstr(term, "spec-eval: interrupted by SIGINT: wrote the ") && strstr(term, json) && strstr(term, "(partial"),
          "no line saying what was written: %s", term);
    char *table = read_text_file(out, NULL);
    CHECK(table && strstr(table, "PARTIAL: interrupted after "), "the table is not marked partial: %s", table ? table : "");
    free(table);
    check_partial_report(json, "SIGINT");
    char *rows = read_text_file(csv, NULL);
    CHECK(rows && strstr(rows, "\neagle2,-,-;partial="), "the CSV row is not marked partial: %s", rows ? rows : "");
    free(rows);
    free(json); free(csv); free(out);
}

/* SIGTERM, batched: exit 143 and the finished turns written. */
static void test_eval_terminated_batched_writes_partial(void) {
    char *json = tpath("term.json"), *out = tpath("term.out"), cmd[2048], term[16384];
    snprintf(cmd, sizeof cmd, "exec %s/spec-eval --target data/demo/target --template none --draft data/demo/eagle "
             "--questions data/demo/prompts/code_test.jsonl --max-new-tokens 64 --total 60 --cost-cache none "
             "--batch 3 --json %s", bin_dir(), json);
    if (!have_pty()) SKIP("no pseudo-terminal to watch the progress line on");
    const int rc = interrupt_after_a_turn(cmd, out, SIGTERM, term, sizeof term);
    REQUIRE(rc == 143, "exit %d, expected 143 (stderr: %s)", rc, term);
    CHECK(strstr(term, "spec-eval: interrupted by SIGTERM: wrote the "), "no line saying what was written: %s", term);
    check_partial_report(json, "SIGTERM");
    free(json); free(out);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    setenv("XDG_CACHE_HOME", dir, 1);   /* a cost cache a run might write is this run's, not the user's */
    trace = tpath("t.h5");
    SynthOpts so;
    synth_defaults(&so);
    so.n_trees = 60;
    so.nodes_per_tree = 111;
    so.trees_per_question = 10;
    if (synth_trace_write(trace, &so)) { fprintf(stderr, "synth: %s\n", err_get()); return 1; }
    RUN(test_train_never_writes_over_its_trace);
    RUN(test_analyze_never_writes_over_its_trace);
    RUN(test_eval_never_writes_over_its_inputs);
    RUN(test_convert_and_collect_never_write_over_inputs);
    RUN(test_missing_folder_refused_first);
    RUN(test_eval_interrupted_writes_partial);
    RUN(test_eval_terminated_batched_writes_partial);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    free(trace);
    return h_done();
}
