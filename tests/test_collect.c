/* spec-collect: labels, crash safety + resume, settings checks, shards,
 * and the top-M entropy bound. */
#include "tests/harness.h"
#include "collect/trace.h"
#include "infer/util.h"
#include "kernels/kernels.h"
#include <signal.h>
#include <fcntl.h>
#include <time.h>
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

static char qfile[] = "/tmp/c2t_colqXXXXXX";
static char dir[] = "/tmp/c2t_colXXXXXX";

#define COLLECT "%s/spec-collect --target tests/ckpt/tiny_chat --template none --questions %s --max-new-tokens 24 "

/* A draft identical to the target guesses its argmax at every level, so
 * greedy verification accepts exactly the chain of rank-0 children: the
 * labels must be that chain, accept_len its length. */
static void test_labels_equal_greedy_verification(void) {
    char out[256], err[4096];
    snprintf(out, sizeof out, "%s/self.h5", dir);
    int rc = run_cmd(err, sizeof err, COLLECT "--draft tests/ckpt/tiny_chat --draft-kind lm --topk 3 --depth 3 --out %s",
                     bin_dir(), qfile, out);
    REQUIRE(rc == 0, "exit %d: %s", rc, err);
    TraceReader *r = trace_open(out);
    REQUIRE(r, "%s", err_get());
    int64_t nt = trace_reader_trees(r);
    REQUIRE(nt > 0, "no trees");
    TraceTree *trees = xmalloc(sizeof(TraceTree) * nt);
    trace_read_trees(r, 0, nt, trees);
    int bad = 0, full = 0;
    for (int64_t i = 0; i < nt && !bad; i++) {
        const TraceTree *t = &trees[i];
        if (t->n_nodes != 3 + 3 * 9) { bad = 1; break; }
        TraceNode *nd = xmalloc(sizeof(TraceNode) * t->n_nodes);
        trace_read_nodes(r, t->first_node, t->n_nodes, nd);
        int acc = 0;
        for (int j = 0; j < t->n_nodes; j++) {
            int on_chain = nd[j].rank == 0 && (nd[j].parent < 0 || (nd[nd[j].parent].rank == 0 && nd[nd[j].parent].accepted));
            /* rank-0 chain from the root, cut at depth accept_len */
            int expect = 1;
            for (int a = j; a >= 0; a = nd[a].parent) if (nd[a].rank != 0) expect = 0;
            if (nd[j].depth > t->accept_len) expect = 0;
            if (nd[j].accepted != expect) bad = 1;
            acc += nd[j].accepted;
            (void)on_chain;
        }
        if (acc != t->accept_len) bad = 1;
        full += t->accept_len == 4;
        free(nd);
    }
    CHECK(!bad, "labels differ from greedy verification");
    CHECK(full > nt / 2, "a self-draft should accept the full depth in most trees (%d of %lld)", full, (long long)nt);
    free(trees);
    trace_reader_close(r);
}

/* Compares two files record for record (all datasets). */
static int same_records(const char *a, const char *b, char *why, size_t n) {
    TraceReader *ra = trace_open(a), *rb = trace_open(b);
    if (!ra || !rb) { snprintf(why, n, "open: %s", err_get()); return 0; }
    int ok = trace_reader_trees(ra) == trace_reader_trees(rb) && trace_reader_nodes(ra) == trace_reader_nodes(rb) &&
             trace_reader_questions(ra) == trace_reader_questions(rb);
    if (!ok) snprintf(why, n, "counts differ: %lld/%lld trees", (long long)trace_reader_trees(ra), (long long)trace_reader_trees(rb));
    int64_t nt = trace_reader_trees(ra), nn = trace_reader_nodes(ra);
    if (ok) {
        TraceTree *x = xmalloc(sizeof(TraceTree) * nt), *y = xmalloc(sizeof(TraceTree) * nt);
        TraceNode *p = xmalloc(sizeof(TraceNode) * nn), *q = xmalloc(sizeof(TraceNode) * nn);
        trace_read_trees(ra, 0, nt, x); trace_read_trees(rb, 0, nt, y);
        trace_read_nodes(ra, 0, nn, p); trace_read_nodes(rb, 0, nn, q);
        for (int64_t i = 0; i < nt && ok; i++)
            ok = x[i].question == y[i].question && x[i].turn == y[i].turn && x[i].cycle == y[i].cycle &&
                 x[i].first_node == y[i].first_node && x[i].n_nodes == y[i].n_nodes && x[i].accept_len == y[i].accept_len;
        for (int64_t i = 0; i < nn && ok; i++)
            ok = p[i].P == q[i].P && p[i].H == q[i].H && p[i].p == q[i].p && p[i].token == q[i].token &&
                 p[i].parent == q[i].parent && p[i].depth == q[i].depth && p[i].accepted == q[i].accepted && p[i].rank == q[i].rank;
        if (!ok) snprintf(why, n, "records differ");
        free(x); free(y); free(p); free(q);
    }
    trace_reader_close(ra);
    trace_reader_close(rb);
    return ok;
}

/* On a GPU machine: a full-tree collection on cuda has the same trees,
 * tokens and labels as on cpu, and P / H within float tolerance. */
static void test_cuda_collection_equals_cpu(void) {
    int gpu = 0;
#ifdef C2T_CUDA
    gpu = cuda_available();
#endif
    if (!gpu) SKIP("no CUDA device visible (the cuda-vs-cpu collection check needs a GPU)");
    char a[256], b[256], err[4096];
    snprintf(a, sizeof a, "%s/dev_cpu.h5", dir);
    snprintf(b, sizeof b, "%s/dev_cuda.h5", dir);
    const char *args = "--draft tests/ckpt/tiny_chat_eagle --topk 4 --depth 4";
    int rc = run_cmd(err, sizeof err, COLLECT "%s --device cpu --out %s", bin_dir(), qfile, args, a);
    REQUIRE(rc == 0, "cpu: %s", err);
    rc = run_cmd(err, sizeof err, COLLECT "%s --device cuda --out %s", bin_dir(), qfile, args, b);
    REQUIRE(rc == 0, "cuda: %s", err);
    TraceReader *ra = trace_open(a), *rb = trace_open(b);
    REQUIRE(ra && rb, "%s", err_get());
    int64_t nn = trace_reader_nodes(ra);
    REQUIRE(nn == trace_reader_nodes(rb) && trace_reader_trees(ra) == trace_reader_trees(rb),
            "node/tree counts differ: %lld vs %lld nodes", (long long)nn, (long long)trace_reader_nodes(rb));
    TraceNode *p = xmalloc(sizeof(TraceNode) * nn), *q = xmalloc(sizeof(TraceNode) * nn);
    trace_read_nodes(ra, 0, nn, p);
    trace_read_nodes(rb, 0, nn, q);
    int64_t diff_labels = 0;
    float dP = 0, dH = 0;
    for (int64_t i = 0; i < nn; i++) {
        diff_labels += p[i].accepted != q[i].accepted || p[i].token != q[i].token || p[i].parent != q[i].parent;
        dP = fmaxf(dP, fabsf(p[i].P - q[i].P));
        dH = fmaxf(dH, fabsf(p[i].H - q[i].H));
    }
    CHECK(diff_labels == 0, "%lld of %lld nodes differ in token, parent or label", (long long)diff_labels, (long long)nn);
    CHECK(dP <= 1e-3f && dH <= 1e-3f, "max |dP| %g, |dH| %g", dP, dH);
    printf("# cuda vs cpu collection: %lld nodes, labels identical, max |dP| %.1e |dH| %.1e\n", (long long)nn, dP, dH);
    free(p); free(q);
    trace_reader_close(ra);
    trace_reader_close(rb);
}

static void test_kill_and_resume_equals_uninterrupted(void) {
    char full[256], part[256], err[4096];
    snprintf(full, sizeof full, "%s/full.h5", dir);
    snprintf(part, sizeof part, "%s/part.h5", dir);
    const char *args = "--draft tests/ckpt/tiny_chat_eagle --topk 4 --depth 4";
    int rc = run_cmd(err, sizeof err, COLLECT "%s --out %s", bin_dir(), qfile, args, full);
    REQUIRE(rc == 0, "uninterrupted run: %s", err);
    srand(12345);
    int kills = 0;
    for (int attempt = 0; attempt < 12; attempt++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec " COLLECT "%s --out %s %s", bin_dir(), qfile, args, part,
                 file_exists(part) ? "--resume" : "");
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 2);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        struct timespec ts = {0, (long)(rand() % 150) * 1000000L};   /* 0..150 ms */
        nanosleep(&ts, NULL);
        int st;
        if (waitpid(pid, &st, WNOHANG) == 0) {
            kill(pid, SIGKILL);   /* the shell exec'ed spec-collect: this is it */
            waitpid(pid, &st, 0);
            kills++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            break;   /* finished */
        }
        /* whatever happened, the file must open */
        if (file_exists(part)) {
            TraceReader *r = trace_open(part);
            CHECK(r != NULL, "file killed mid-write does not open: %s", err_get());
            if (r) trace_reader_close(r);
        }
    }
    rc = run_cmd(err, sizeof err, COLLECT "%s --out %s --resume", bin_dir(), qfile, args, part);
    REQUIRE(rc == 0, "final resume: %s", err);
    char why[256] = "";
    CHECK(same_records(full, part, why, sizeof why), "after %d kills + resume: %s", kills, why);
    printf("# %d kill -9 during collection, resumed; records equal the uninterrupted run\n", kills);

    /* resume with other settings is refused, naming the setting */
    rc = run_cmd(err, sizeof err, COLLECT "--draft tests/ckpt/tiny_chat_eagle --topk 5 --depth 4 --out %s --resume",
                 bin_dir(), qfile, part);
    CHECK_ONE_LINE_ERROR(rc, err, "topk");
    rc = run_cmd(err, sizeof err, COLLECT "%s --out %s", bin_dir(), qfile, args, part);
    CHECK_ONE_LINE_ERROR(rc, err, "exists");
}

static void test_shards_merge_to_the_whole(void) {
    char a[256], b[256], m[256], full[256], err[4096];
    snprintf(a, sizeof a, "%s/s0.h5", dir);
    snprintf(b, sizeof b, "%s/s1.h5", dir);
    snprintf(m, sizeof m, "%s/merged.h5", dir);
    snprintf(full, sizeof full, "%s/one.h5", dir);
    const char *args = "--draft tests/ckpt/tiny_chat_eagle --topk 3 --depth 2";
    int rc = run_cmd(err, sizeof err, COLLECT "%s --out %s --shard 0/2", bin_dir(), qfile, args, a);
    REQUIRE(rc == 0, "shard 0: %s", err);
    rc = run_cmd(err, sizeof err, COLLECT "%s --out %s --shard 1/2", bin_dir(), qfile, args, b);
    REQUIRE(rc == 0, "shard 1: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-collect merge %s %s %s", bin_dir(), m, a, b);
    REQUIRE(rc == 0, "merge: %s", err);
    TraceReader *ra = trace_open(a), *rb = trace_open(b), *rm = trace_open(m);
    REQUIRE(ra && rb && rm, "open: %s", err_get());
    CHECK(trace_reader_nodes(rm) == trace_reader_nodes(ra) + trace_reader_nodes(rb), "merged node count");
    CHECK(trace_reader_questions(ra) == 2 && trace_reader_questions(rb) == 1, "shards split 3 questions 2 + 1");
    trace_reader_close(ra); trace_reader_close(rb); trace_reader_close(rm);
    rc = run_cmd(err, sizeof err, COLLECT "%s --out %s/x.h5 --shard 2/2", bin_dir(), qfile, args, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "--shard");
    rc = run_cmd(err, sizeof err, COLLECT "%s --out %s/x.h5 --shard 1", bin_dir(), qfile, args, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "--shard");
    (void)full;
}

/* 0 <= H - H_M <= r log((V - M) / r), r = tail mass beyond the top M: the
 * tail's entropy is largest when its mass is spread evenly. */
static void test_topm_entropy_bound(void) {
    const int V = 5000, cases = 6;
    float *logits = xmalloc(sizeof(float) * V);
    srand(7);
    for (int c = 0; c < cases; c++) {
        float scale = c < 3 ? 1.0f : 12.0f;   /* flat-ish and peaked */
        for (int j = 0; j < V; j++) logits[j] = scale * ((float)rand() / RAND_MAX) * ((float)rand() / RAND_MAX);
        int Ms[3] = {10, 1000, 8000};
        float exact;
        cpu_backend.softmax_topk(logits, 1, V, 1.0f, 0, NULL, NULL, 0, &exact);
        for (int k = 0; k < 3; k++) {
            float hm;
            cpu_backend.softmax_topk(logits, 1, V, 1.0f, 0, NULL, NULL, Ms[k], &hm);
            if (Ms[k] >= V) { CHECK(fabsf(hm - exact) < 1e-5f, "M > vocab must be exact"); continue; }
            /* tail mass r: sum of probabilities beyond the top M */
            float mx = -INFINITY;
            for (int j = 0; j < V; j++) if (logits[j] > mx) mx = logits[j];
            double *p = xmalloc(sizeof(double) * V), z = 0;
            for (int j = 0; j < V; j++) { p[j] = exp(logits[j] - mx); z += p[j]; }
            for (int j = 0; j < V; j++) p[j] /= z;
            for (int a = 0; a < V; a++) for (int b2 = a + 1; b2 < V && a < Ms[k]; b2++) if (p[b2] > p[a]) { double t = p[a]; p[a] = p[b2]; p[b2] = t; }
            double r = 0;
            for (int j = Ms[k]; j < V; j++) r += p[j];
            double bound = r > 0 ? r * log((V - Ms[k]) / r) : 0;
            CHECK(hm <= exact + 1e-4f && exact - hm <= bound + 1e-4, "case %d M=%d: H %g, H_M %g, bound %g", c, Ms[k], exact, hm, bound);
            free(p);
        }
    }
    free(logits);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    close(mkstemp(qfile));
    write_file(qfile, "{\"question_id\": 1, \"category\": \"t\", \"turns\": [\"static int x = 1;\", \"int main(void) {\"]}\n"
                      "{\"question_id\": \"b2\", \"category\": \"t\", \"turns\": [\"const char *name\"]}\n"
                      "{\"question_id\": 3, \"category\": \"t\", \"turns\": [\"for (int i = 0;\"]}\n");
    RUN(test_labels_equal_greedy_verification);
    RUN(test_kill_and_resume_equals_uninterrupted);
    RUN(test_shards_merge_to_the_whole);
    RUN(test_topm_entropy_bound);
    RUN(test_cuda_collection_equals_cpu);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    unlink(qfile);
    return h_done();
}
