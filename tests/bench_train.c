/* spec-train speed and memory on the paper's data size: a synthetic trace of
 * 8880 trees x 1011 nodes = 8,977,680 records (paper App. C.1), written
 * through the trace writer (zstd) into build/bench/ (kept between runs; it
 * is regenerated when missing).  In the same run:
 *   1. spec-train with the defaults (10 epochs, --neg-ratio 1): wall time,
 *      records/s, peak RSS (wait4's ru_maxrss of the child);
 *   2. the PyTorch reference (tools/golden/train_oracle.py reference) on the
 *      same file and epochs, with 1 and with 2 torch threads: wall time, and the
 *      ratio to the faster of the two;
 *   3. both again with --neg-ratio 20 (training-bound: 21x the samples).
 * The PyTorch runs are skipped when python3 with torch, h5py and hdf5plugin
 * is not available.
 * Usage: bench_train [trees] (fewer trees for a quick look). */
#include "collect/trace.h"
#include "kernels/base/util.h"
#include "tests/synth.h"
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct { double wall; long maxrss_kb; int status; } Run;

/* Runs argv with stdout to out_path (NULL: inherit), stderr to /dev/null. */
static Run run(char *const argv[], const char *out_path) {
    Run r = {0, 0, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_path) posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    double t0 = now_seconds();
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) { posix_spawn_file_actions_destroy(&fa); return r; }
    struct rusage ru;
    int st;
    if (wait4(pid, &st, 0, &ru) == pid) {
        r.wall = now_seconds() - t0;
        r.maxrss_kb = ru.ru_maxrss;
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    posix_spawn_file_actions_destroy(&fa);
    return r;
}

static const char *bin(void) {
    const char *b = getenv("C2T_BIN");
    return b && *b ? b : "bin";
}

static double jnum(const cJSON *j, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

typedef struct { Run r; double records_per_s, train_sps, read_s, train_s, eval_s, recall, theta; int threads; } CRes;

static CRes run_spec_train(const char *trace, const char *neg) {
    char exe[512], rep[] = "build/bench/bench_train_report.json", out[] = "build/bench/bench_train_weights.json";
    snprintf(exe, sizeof exe, "%s/spec-train", bin());
    char *argv[] = {exe, "--traces", (char *)trace, "--out", out, "--report", rep, "--neg-ratio", (char *)neg,
                    "--quiet", NULL};
    CRes c;
    memset(&c, 0, sizeof c);
    c.r = run(argv, NULL);
    cJSON *j = read_json_file(rep);
    if (j) {
        c.records_per_s = jnum(j, "timing", "records_per_s");
        c.train_sps = jnum(j, "timing", "train_samples_per_s");
        c.read_s = jnum(j, "timing", "data_s");
        c.train_s = jnum(j, "timing", "train_s");
        c.eval_s = jnum(j, "timing", "eval_s");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "metrics");
        c.recall = jnum(m, "classifier", "recall");
        c.theta = jnum(m, "classifier", "theta");
        c.threads = (int)jnum(j, "settings", "threads");
        cJSON_Delete(j);
    }
    return c;
}

typedef struct { Run r; double total, import_s, read_s, train_s, eval_s, recall, theta; int ok; } PRes;

static PRes run_torch(const char *trace, const char *neg, const char *threads) {
    char out[] = "build/bench/bench_train_torch.json";
    char *argv[] = {"python3", "tools/golden/train_oracle.py", "reference", "--traces", (char *)trace, "--epochs", "10",
                    "--neg-ratio", (char *)neg, "--threads", (char *)threads, NULL};
    PRes p;
    memset(&p, 0, sizeof p);
    p.r = run(argv, out);
    cJSON *j = p.r.status == 0 ? read_json_file(out) : NULL;
    if (j) {
        p.ok = 1;
        p.total = jnum(j, "total_s", NULL);
        p.import_s = jnum(j, "import_s", NULL);
        p.read_s = jnum(j, "read_s", NULL);
        p.train_s = jnum(j, "train_s", NULL);
        p.eval_s = jnum(j, "eval_s", NULL);
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "epochs");
        const cJSON *last = cJSON_GetArrayItem(ep, cJSON_GetArraySize(ep) - 1);
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(last, "eval");
        p.recall = jnum(ev, "recall", NULL);
        p.theta = jnum(ev, "theta", NULL);
        cJSON_Delete(j);
    }
    return p;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int64_t trees = argc > 1 ? atoll(argv[1]) : 8880;
    const int nodes = 1011;
    mkdir("build", 0777);
    mkdir("build/bench", 0777);
    char trace[256];
    snprintf(trace, sizeof trace, "build/bench/synth_%lldx%d.h5", (long long)trees, nodes);
    struct stat sb;
    TraceReader *chk = stat(trace, &sb) == 0 ? trace_open(trace) : NULL;
    int ok = chk && trace_reader_nodes(chk) == trees * nodes;
    if (chk) trace_reader_close(chk);
    if (!ok) {
        unlink(trace);
        SynthOpts o;
        synth_defaults(&o);
        o.n_trees = trees; o.nodes_per_tree = nodes; o.topk = 10; o.seed = 2025; o.fast = 1;
        double t0 = now_seconds();
        if (synth_trace_write(trace, &o)) { fprintf(stderr, "bench_train: %s\n", err_get()); return 1; }
        printf("wrote %s through the trace writer in %.1f s\n", trace, now_seconds() - t0);
        stat(trace, &sb);
    }
    double n_rec = (double)trees * nodes;
    printf("trace: %s, %lld trees x %d nodes = %.0f records, %.1f MB (zstd)\n", trace, (long long)trees, nodes, n_rec,
           sb.st_size / 1e6);
    int torch = system("python3 -c 'import torch, numpy, h5py, hdf5plugin' >/dev/null 2>&1") == 0;
    if (!torch) printf("PyTorch comparison skipped: python3 with torch, numpy, h5py and hdf5plugin not available\n");
    const char *negs[2] = {"1", "20"};
    for (int k = 0; k < 2; k++) {
        CRes c = run_spec_train(trace, negs[k]);
        if (c.r.status != 0) { fprintf(stderr, "bench_train: spec-train failed (status %d)\n", c.r.status); return 1; }
        printf("\n-- 10 epochs, --neg-ratio %s%s\n", negs[k], k == 0 ? " (defaults)" : " (training-bound)");
        printf("spec-train        wall %7.2f s  %6.2f M records/s  peak RSS %6.1f MB  (data %.2f s, train %.2f s at "
               "%.1f M samples/s, eval %.2f s; %d threads)  recall %.4f theta %.4f\n",
               c.r.wall, n_rec / c.r.wall / 1e6, c.r.maxrss_kb / 1024.0, c.read_s, c.train_s, c.train_sps / 1e6,
               c.eval_s, c.threads, c.recall, c.theta);
        if (!torch) continue;
        /* torch with 1 and 2 intra-op threads; the faster one counts */
        PRes best = {0};
        int have = 0;
        for (int t = 1; t <= 2; t++) {
            PRes p = run_torch(trace, negs[k], t == 1 ? "1" : "2");
            if (!p.ok) { printf("PyTorch reference (%d threads) failed (status %d)\n", t, p.r.status); continue; }
            printf("PyTorch, %d thr   wall %7.2f s  %6.2f M records/s  peak RSS %6.1f MB  (import %.2f s, read %.2f s, "
                   "train %.2f s, eval %.2f s)  recall %.4f theta %.4f\n",
                   t, p.r.wall, n_rec / p.r.wall / 1e6, p.r.maxrss_kb / 1024.0, p.import_s, p.read_s, p.train_s,
                   p.eval_s, p.recall, p.theta);
            if (!have || p.r.wall < best.r.wall) { best = p; have = 1; }
        }
        if (have)
            printf("speed ratio, faster PyTorch / spec-train: %.1fx wall clock, %.1fx without PyTorch's start-up "
                   "(imports, first optimizer), %.1fx training loop alone\n",
                   best.r.wall / c.r.wall, (best.total - best.import_s) / c.r.wall,
                   c.train_s > 0 ? best.train_s / c.train_s : 0);
    }
    return 0;
}
