/* Trace writing throughput and size per compression, on realistic synthetic
 * draft trees: 1011 nodes, depths 1..10, P the product of the local
 * probabilities along the path, one accepted path of 0..10 nodes (greedy
 * verification), Zipf-like token ids.
 *
 *   build/tests/bench_trace [questions [trees_per_question]]
 *
 * Durable writes (the default of trace_create: two flushes and two
 * fdatasyncs per question) unless noted.  bytes/node counts the whole file
 * (all datasets, metadata, and the partial chunks SWMR leaves behind). */
#include "collect/trace.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TREE_NODES 1011
#define MAX_DEPTH 10

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static uint64_t next(void) {
    uint64_t x = (rng_state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static double unif(void) { return (next() >> 11) * (1.0 / 9007199254740992.0); }

/* Breadth-first growth: each node gets 1 + Geometric(1/2) children (so the
 * tree reaches depth ~10), whose local probabilities are a decreasing share
 * of a random mass; H is the entropy of that draft distribution. */
static int make_tree(TraceNode *nd, TraceTree *t) {
    int n = 0, head = 0;
    /* depth-1 children of the root */
    int k = 8;
    double mass = 0.6 + 0.4 * unif(), w[16], sum = 0;
    for (int i = 0; i < k; i++) sum += (w[i] = exp(-1.2 * i) * (0.5 + unif()));
    double H = 0;
    for (int i = 0; i < k; i++) { double p = mass * w[i] / sum; H -= p * log(p); }
    for (int i = 0; i < k; i++) {
        nd[n] = (TraceNode){.P = (float)(mass * w[i] / sum), .H = (float)H, .p = (float)(mass * w[i] / sum),
                            .token = (int32_t)(32000 * pow(unif(), 3)), .parent = -1, .depth = 1, .rank = (uint8_t)i};
        n++;
    }
    while (n < TREE_NODES && head < n) {
        TraceNode *par = &nd[head];
        if (par->depth < MAX_DEPTH) {
            int c = 1;
            while (unif() < 0.5 && c < 8) c++;
            if (c > TREE_NODES - n) c = TREE_NODES - n;
            mass = 0.5 + 0.5 * unif();
            sum = 0;
            for (int i = 0; i < c; i++) sum += (w[i] = exp(-1.5 * i) * (0.3 + unif()));
            H = 0.2;
            for (int i = 0; i < c; i++) { double p = mass * w[i] / sum; H -= p * log(p); }
            for (int i = 0; i < c; i++) {
                float p = (float)(mass * w[i] / sum);
                nd[n] = (TraceNode){.P = par->P * p, .H = (float)H, .p = p, .token = (int32_t)(32000 * pow(unif(), 3)),
                                    .parent = head, .depth = (uint8_t)(par->depth + 1), .rank = (uint8_t)i};
                n++;
            }
        }
        head++;
    }
    /* greedy verification accepts one path, rank-0 first */
    int len = 0, want = (int)(unif() * 11);
    for (int cur = 0, par = -1; len < want;) {
        int found = -1;
        for (int i = cur; i < n; i++)
            if (nd[i].parent == par && nd[i].rank == 0) { found = i; break; }
        if (found < 0) break;
        nd[found].accepted = 1;
        len++;
        par = found;
        cur = found + 1;
    }
    *t = (TraceTree){.turn = 0, .cycle = 0, .n_nodes = n, .accept_len = len};
    return n;
}

typedef struct { double write_s, read_s; long long bytes; int64_t nodes, trees, accepted; } Result;

static int run(const char *path, TraceCompress c, int durable, int level, int nq, int tpq, TraceNode *pool, TraceTree *tpool,
               int npool, Result *res) {
    unlink(path);
    memset(res, 0, sizeof *res);
    TraceCreateOpts o = {durable, level, NULL};
    double t0 = now_seconds();
    TraceWriter *w = trace_create_ex(path, c, &o);
    if (!w) return -1;
    trace_set_attr_str(w, "target_model", "bench");
    for (int q = 0; q < nq; q++) {
        for (int i = 0; i < tpq; i++) {
            int k = (q * tpq + i) % npool;
            TraceTree t = tpool[k];
            t.cycle = i;
            if (trace_add_tree(w, &t, pool + (size_t)k * TREE_NODES) < 0) return -1;
            res->nodes += t.n_nodes;
            res->trees++;
        }
        char qid[32];
        snprintf(qid, sizeof qid, "q%d", q);
        if (trace_finish_question(w, "bench", qid) < 0) return -1;
    }
    if (trace_close(w) < 0) return -1;
    res->write_s = now_seconds() - t0;
    struct stat st;
    stat(path, &st);
    res->bytes = st.st_size;
    /* streaming read, the trainer's way */
    t0 = now_seconds();
    TraceReader *r = trace_open(path);
    if (!r) return -1;
    enum { B = 65536 };
    TraceNode *buf = xmalloc(sizeof *buf * B);
    for (int64_t i = 0; i < trace_reader_nodes(r); i += B) {
        int64_t n = trace_reader_nodes(r) - i < B ? trace_reader_nodes(r) - i : B;
        if (trace_read_nodes(r, i, n, buf) < 0) return -1;
        for (int64_t k = 0; k < n; k++) res->accepted += buf[k].accepted;
    }
    free(buf);
    trace_reader_close(r);
    res->read_s = now_seconds() - t0;
    return 0;
}

int main(int argc, char **argv) {
    int nq = argc > 1 ? atoi(argv[1]) : 20, tpq = argc > 2 ? atoi(argv[2]) : 100;
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/c2t_bench_trace_%d.h5", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    /* a pool of distinct trees, reused round-robin */
    int npool = 256;
    TraceNode *pool = xcalloc((size_t)npool * TREE_NODES, sizeof *pool);
    TraceTree *tpool = xmalloc(sizeof *tpool * (size_t)npool);
    int maxd = 0;
    for (int i = 0; i < npool; i++) {
        int n = make_tree(pool + (size_t)i * TREE_NODES, &tpool[i]);
        for (int k = 0; k < n; k++) if (pool[(size_t)i * TREE_NODES + k].depth > maxd) maxd = pool[(size_t)i * TREE_NODES + k].depth;
    }
    printf("bench_trace: %d questions x %d trees x %d nodes (depth 1..%d), raw %zu bytes/node in memory order\n", nq, tpq,
           TREE_NODES, maxd, (size_t)(4 + 4 + 1 + 1 + 4 + 4 + 4 + 1));
    printf("%-24s %12s %12s %10s %12s %9s\n", "compression", "nodes/s", "trees/s", "bytes/node", "read nodes/s", "file MB");
    struct { const char *label; TraceCompress c; int durable, level, tpq; } cases[] = {
        {"zstd (level 3)", TRACE_ZSTD, 1, 0, tpq},
        {"gzip (shuffle+deflate 4)", TRACE_GZIP, 1, 0, tpq},
        {"none", TRACE_NONE, 1, 0, tpq},
        {"zstd, 10 trees/question", TRACE_ZSTD, 1, 0, 10},
        {"zstd, not durable", TRACE_ZSTD, 0, 0, tpq},
        {"zstd level 1", TRACE_ZSTD, 1, 1, tpq},
        {"zstd level 9", TRACE_ZSTD, 1, 9, tpq},
        {"gzip level 1", TRACE_GZIP, 1, 1, tpq},
    };
    int rc = 0;
    int64_t acc = 0, nodes = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Result r;
        int q = cases[i].tpq == tpq ? nq : nq * tpq / cases[i].tpq;
        if (run(path, cases[i].c, cases[i].durable, cases[i].level, q, cases[i].tpq, pool, tpool, npool, &r) < 0) {
            fprintf(stderr, "bench_trace: %s: %s\n", cases[i].label, err_get());
            rc = 1;
            break;
        }
        printf("%-24s %12.0f %12.0f %10.2f %12.0f %9.1f\n", cases[i].label, r.nodes / r.write_s, r.trees / r.write_s,
               (double)r.bytes / (double)r.nodes, r.nodes / r.read_s, r.bytes / 1e6);
        fflush(stdout);
        acc = r.accepted;
        nodes = r.nodes;
    }
    if (nodes) printf("accepted nodes: %.2f%%\n", 100.0 * (double)acc / (double)nodes);
    unlink(path);
    free(pool);
    free(tpool);
    return rc;
}
