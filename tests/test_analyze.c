/* spec-analyze (train/analyze.c, train/analyze_report.c,
 * collect/spec_analyze.c): every table against hand-computed counts on a
 * three-tree trace, the streaming pass against a naive one on synthetic
 * traces larger than one read block, the CSV files of --out, and bad
 * input (one line, non-zero exit). */
#include "tests/harness.h"
#include "collect/trace.h"
#include "infer/speculative/classifier.h"
#include "kernels/base/util.h"
#include "train/analyze.h"
#include "train/export.h"
#include "tests/synth.h"
#include <cjson/cJSON.h>
#include <hdf5.h>
#include <sys/stat.h>

static char dir[] = "/tmp/c2t_analyzeXXXXXX";
static char *tpath(const char *name) { return path_join(dir, name); }

/* ---------------------------------------------------------------- the hand trace
 * question 0 "alpha": trees A and B; question 1 "beta": tree C.
 *   node  depth parent P        H    accepted
 *   A0    1     -1     0.6      0.5  1
 *   A1    1     -1     0.3      0.5  0
 *   A2    2      0     0.2      1.5  1
 *   A3    2      1     0.05     2.5  0
 *   B0    1     -1     0.9      0.2  0
 *   B1    1     -1     0.05     3.5  1
 *   B2    2      1     0.005    6.5  0
 *   C0    1     -1     0.6      1.2  1
 *   C1    2      0     0.00005  0.7  1
 * The classifier is conf = sigmoid(10 P - 3.5): conf >= 0.5 iff P >= 0.35. */
#define N(d, par, P_, H_, acc) {.P = P_, .H = H_, .p = 0.5f, .token = 1, .parent = par, .depth = d, .accepted = acc, .rank = 0}
static const TraceNode TREE_A[] = {N(1, -1, 0.6f, 0.5f, 1), N(1, -1, 0.3f, 0.5f, 0), N(2, 0, 0.2f, 1.5f, 1),
                                   N(2, 1, 0.05f, 2.5f, 0)};
static const TraceNode TREE_B[] = {N(1, -1, 0.9f, 0.2f, 0), N(1, -1, 0.05f, 3.5f, 1), N(2, 1, 0.005f, 6.5f, 0)};
static const TraceNode TREE_C[] = {N(1, -1, 0.6f, 1.2f, 1), N(2, 0, 0.00005f, 0.7f, 1)};

static int add(TraceWriter *w, const TraceNode *nd, int n, int accept_len) {
    TraceTree t = {.turn = 0, .cycle = 0, .n_nodes = n, .accept_len = accept_len};
    return trace_add_tree(w, &t, nd);
}

static int write_hand_trace(const char *path) {
    unlink(path);
    TraceWriter *w = trace_create(path, TRACE_ZSTD);
    if (!w) return -1;
    int bad = add(w, TREE_A, 4, 2) || add(w, TREE_B, 3, 1) || trace_finish_question(w, "alpha", "q0") ||
              add(w, TREE_C, 2, 2) || trace_finish_question(w, "beta", "q1");
    return trace_close(w) || bad ? -1 : 0;
}

static int write_hand_classifier(const char *path) {
    Classifier *c = classifier_new(1, CLS_DEFAULT_NFEAT, cls_default_features);
    if (!c) return -1;
    c->fc1_w[0] = 10; c->fc1_w[1] = 0; c->fc1_w[2] = 0;   /* ReLU(10 P) */
    c->fc1_b[0] = 0;
    c->fc2_w[0] = 1;
    c->fc2_b = -3.5f;
    cJSON *j = classifier_to_json(c);
    int rc = write_json(path, j);
    cJSON_Delete(j);
    classifier_free(c);
    return rc;
}

static int cell_is(AnCell c, int64_t n, int64_t acc) { return c.n == n && c.acc == acc; }
static int conf_is(Confusion c, int64_t sel, int64_t tp, int64_t total, int64_t pos) {
    return c.tp + c.fp == sel && c.tp == tp && c.tp + c.fp + c.fn + c.tn == total && c.tp + c.fn == pos;
}
/* C2T's kept / accepted-kept at grid beta q, from the histogram. */
static void c2t_point(const AnStats *s, int q, int64_t *kept, int64_t *tp) {
    *kept = *tp = 0;
    for (int j = q + 1; j <= AN_BETA_STEPS; j++) { *kept += s->beta_hist[0][j] + s->beta_hist[1][j]; *tp += s->beta_hist[1][j]; }
}

static Classifier *hand_setup(char **trace, char **wts) {
    *trace = tpath("hand.h5");
    *wts = tpath("hand_cls.json");
    if (write_hand_trace(*trace) || write_hand_classifier(*wts)) return NULL;
    return classifier_load(*wts);
}

static void test_hand_tables(void) {
    char *trace, *wts;
    Classifier *cls = hand_setup(&trace, &wts);
    REQUIRE(cls, "fixture: %s", err_get());
    AnOpts o;
    analyze_defaults(&o);
    o.topn = 2; o.cls = cls; o.progress = -1;
    Analysis a;
    const char *paths[1] = {trace};
    REQUIRE(analyze_files(paths, 1, &o, &a) == 0, "analyze: %s", err_get());
    const AnStats *s = &a.all;
    CHECK(s->questions == 2 && s->trees == 3 && s->nodes == 9 && s->accepted == 5 && s->accept_len == 5,
          "totals %lld q %lld trees %lld nodes %lld acc", (long long)s->questions, (long long)s->trees,
          (long long)s->nodes, (long long)s->accepted);
    /* P bins: 0 [0,1e-4) 2 [1e-3,0.01) 4 [0.03,0.1) 5 [0.1,0.3) 6 [0.3,0.5) 7 [0.5,1] */
    CHECK(an_p_bin(0.00005f) == 0 && an_p_bin(0.005f) == 2 && an_p_bin(0.05f) == 4 && an_p_bin(0.2f) == 5 &&
          an_p_bin(0.3f) == 6 && an_p_bin(0.6f) == 7 && an_p_bin(1.0f) == 7 && an_p_bin(1e-4f) == 1, "p bins");
    /* Table 1 */
    CHECK(cell_is(s->depth_p[1][7], 3, 2), "d1 [0.5,1]: %lld/%lld", (long long)s->depth_p[1][7].acc, (long long)s->depth_p[1][7].n);
    CHECK(cell_is(s->depth_p[1][6], 1, 0) && cell_is(s->depth_p[1][4], 1, 1), "d1 cells");
    CHECK(cell_is(s->depth_p[2][5], 1, 1) && cell_is(s->depth_p[2][4], 1, 0) && cell_is(s->depth_p[2][2], 1, 0) &&
          cell_is(s->depth_p[2][0], 1, 1), "d2 cells");
    int64_t sum = 0;
    for (int d = 0; d < AN_DEPTHS; d++) for (int k = 0; k < AN_P_BINS; k++) sum += s->depth_p[d][k].n;
    CHECK(sum == 9, "Table 1 holds %lld nodes", (long long)sum);
    /* P's prediction by depth: depth 1 sums .6 .3 .9 .05 .6 (3 accepted), depth 2 .2 .05 .005 .00005 (2) */
    CHECK(fabs(s->depth_sum_p[1] - 2.45) < 1e-6 && fabs(s->depth_sum_p[2] - 0.25505) < 1e-6,
          "sum of P by depth: %.7f %.7f", s->depth_sum_p[1], s->depth_sum_p[2]);
    /* Figure 1 */
    CHECK(cell_is(s->h_p[0][7], 2, 1) && cell_is(s->h_p[0][6], 1, 0) && cell_is(s->h_p[0][0], 1, 1), "H [0,1) cells");
    CHECK(cell_is(s->h_p[1][7], 1, 1) && cell_is(s->h_p[1][5], 1, 1) && cell_is(s->h_p[2][4], 1, 0) &&
          cell_is(s->h_p[3][4], 1, 1) && cell_is(s->h_p[6][2], 1, 0), "H cells");
    /* Table 5: top-2 per tree keeps A0 A1 B0 B1 C0 C1; C2T at 0.5 keeps A0 B0 C0 */
    const BucketTable *t = &s->buckets;
    CHECK(t->n[0] == 4 && t->n[1] == 2 && t->n[2] == 1 && t->n[3] == 1 && t->n[6] == 1 && t->n[N_BUCKETS] == 9, "bucket sizes");
    CHECK(conf_is(t->e2[0], 4, 2, 4, 2) && conf_is(t->e2[1], 1, 1, 2, 2) && conf_is(t->e2[2], 0, 0, 1, 0) &&
          conf_is(t->e2[3], 1, 1, 1, 1) && conf_is(t->e2[6], 0, 0, 1, 0), "E2 buckets");
    CHECK(conf_is(t->e2[N_BUCKETS], 6, 4, 9, 5), "E2 total");
    CHECK(conf_is(t->tree[0], 2, 1, 4, 2) && conf_is(t->tree[1], 1, 1, 2, 2) && conf_is(t->tree[N_BUCKETS], 3, 2, 9, 5),
          "C2T buckets");
    /* recall against theta: top-1 keeps A0 B0 C0; top-5 and all keep everything */
    for (int k = 0; k < o.n_sweep; k++) {
        int N = o.sweep[k];
        Confusion c = s->e2_sweep[k];
        if (N == 1) CHECK(conf_is(c, 3, 2, 9, 5), "top-1");
        if (N == 2) CHECK(conf_is(c, 6, 4, 9, 5), "top-2");
        if (N == 0 || N >= 4) CHECK(conf_is(c, 9, 5, 9, 5), "top-%d", N);
    }
    /* path minima: A0 .924 A1 .378 A2 .182 A3 .047 B0 .996 B1 .047 B2 .031 C0 .924 C1 .029 */
    static const struct { int q; int64_t kept, tp; } pts[] = {
        {49, 3, 2}, {29, 4, 2}, {9, 5, 3}, {3, 7, 4}, {2, 8, 4}, {1, 9, 5}, {98, 1, 0}};
    for (size_t i = 0; i < sizeof pts / sizeof *pts; i++) {
        int64_t kept, tp;
        c2t_point(s, pts[i].q, &kept, &tp);
        CHECK(kept == pts[i].kept && tp == pts[i].tp, "beta %.2f: kept %lld (want %lld), accepted %lld (want %lld)",
              an_beta_at(pts[i].q), (long long)kept, (long long)pts[i].kept, (long long)tp, (long long)pts[i].tp);
    }
    /* per benchmark */
    REQUIRE(a.n_bench == 2, "%d benchmarks", a.n_bench);
    const AnStats *al = &a.bench[0], *be = &a.bench[1];
    CHECK(!strcmp(al->name, "alpha") && !strcmp(be->name, "beta"), "names %s %s", al->name, be->name);
    CHECK(al->questions == 1 && al->trees == 2 && al->nodes == 7 && al->accepted == 3, "alpha totals");
    CHECK(be->questions == 1 && be->trees == 1 && be->nodes == 2 && be->accepted == 2, "beta totals");
    CHECK(cell_is(al->depth_p[1][7], 2, 1) && cell_is(be->depth_p[1][7], 1, 1), "per-benchmark Table 1");
    CHECK(conf_is(al->buckets.e2[N_BUCKETS], 4, 2, 7, 3) && conf_is(be->buckets.tree[N_BUCKETS], 1, 1, 2, 2),
          "per-benchmark Table 5");
    analysis_free(&a);
    classifier_free(cls);
    free(trace); free(wts);
}

/* ---------------------------------------------------------------- streaming vs naive */

static int make_synth(const char *path, int64_t trees, uint64_t seed) {
    SynthOpts so;
    synth_defaults(&so);
    so.n_trees = trees; so.nodes_per_tree = 1011; so.topk = 10; so.seed = seed;
    unlink(path);
    return synth_trace_write(path, &so);
}

/* Table 1 and top-60 E2 counts by reading every node at once, ranks by
 * counting (O(n^2) per tree): an independent pass. */
static void naive(const char *path, AnCell cells[AN_DEPTHS][AN_P_BINS], Confusion *e2) {
    TraceReader *r = trace_open(path);
    if (!r) return;
    int64_t nt = trace_reader_trees(r), nn = trace_reader_nodes(r);
    TraceTree *tr = xmalloc(sizeof(TraceTree) * (size_t)nt);
    TraceNode *nd = xmalloc(sizeof(TraceNode) * (size_t)nn);
    if (trace_read_trees(r, 0, nt, tr) == 0 && trace_read_nodes(r, 0, nn, nd) == 0)
        for (int64_t t = 0; t < nt; t++) {
            const TraceNode *x = nd + tr[t].first_node;
            for (int i = 0; i < tr[t].n_nodes; i++) {
                int k = AN_P_BINS - 1, rank = 0;
                while (k > 0 && x[i].P < (float)an_p_edges[k]) k--;
                cells[x[i].depth][k].n++;
                cells[x[i].depth][k].acc += x[i].accepted;
                for (int j = 0; j < tr[t].n_nodes; j++) rank += x[j].P > x[i].P || (x[j].P == x[i].P && j < i);
                confusion_count(e2, rank < 60, x[i].accepted);
            }
        }
    free(tr); free(nd);
    trace_reader_close(r);
}

static void test_streaming_matches_naive(void) {
    char *p1 = tpath("syn1.h5"), *p2 = tpath("syn2.h5");
    REQUIRE(make_synth(p1, 90, 7) == 0 && make_synth(p2, 40, 8) == 0, "synth: %s", err_get());
    static AnCell cells[AN_DEPTHS][AN_P_BINS];
    memset(cells, 0, sizeof cells);
    Confusion e2 = {0};
    naive(p1, cells, &e2);
    naive(p2, cells, &e2);
    AnOpts o;
    analyze_defaults(&o);
    o.progress = -1;
    Analysis a;
    const char *paths[2] = {p1, p2};
    REQUIRE(analyze_files(paths, 2, &o, &a) == 0, "analyze: %s", err_get());
    CHECK(a.all.trees == 130 && a.all.nodes == 130 * 1011, "%lld trees %lld nodes", (long long)a.all.trees,
          (long long)a.all.nodes);
    int same = 1;
    for (int d = 0; d < AN_DEPTHS; d++)
        for (int k = 0; k < AN_P_BINS; k++)
            same &= cells[d][k].n == a.all.depth_p[d][k].n && cells[d][k].acc == a.all.depth_p[d][k].acc;
    CHECK(same, "Table 1 differs from the naive pass");
    Confusion c = a.all.buckets.e2[N_BUCKETS];
    CHECK(c.tp == e2.tp && c.fp == e2.fp && c.fn == e2.fn && c.tn == e2.tn, "E2 top-60: tp %lld/%lld fp %lld/%lld",
          (long long)c.tp, (long long)e2.tp, (long long)c.fp, (long long)e2.fp);
    /* one benchmark name in both files: one benchmark, equal to all */
    CHECK(a.n_bench == 1 && a.bench[0].nodes == a.all.nodes && a.bench[0].questions == a.all.questions,
          "%d benchmarks", a.n_bench);
    /* each file alone adds up to both together */
    Analysis b1, b2;
    REQUIRE(analyze_files(paths, 1, &o, &b1) == 0 && analyze_files(paths + 1, 1, &o, &b2) == 0, "single files");
    CHECK(b1.all.nodes + b2.all.nodes == a.all.nodes && b1.all.accepted + b2.all.accepted == a.all.accepted &&
          b1.all.buckets.e2[N_BUCKETS].tp + b2.all.buckets.e2[N_BUCKETS].tp == c.tp, "files do not add up");
    analysis_free(&a); analysis_free(&b1); analysis_free(&b2);
    free(p1); free(p2);
}

/* ---------------------------------------------------------------- the command */

static char *slurp(const char *path) { return read_text_file(path, NULL); }

static void test_cli_out(void) {
    char *trace, *wts, *out = tpath("out"), *stdout_path = tpath("stdout.txt");
    Classifier *cls = hand_setup(&trace, &wts);
    REQUIRE(cls, "fixture: %s", err_get());
    classifier_free(cls);
    char cmd[2048], err[1024];
    /* run_cmd sends stdout to /dev/null: the subshell keeps ours */
    snprintf(cmd, sizeof cmd, "(%s/spec-analyze %s --topn 2 --classifier %s --out %s --quiet > %s)", bin_dir(), trace,
             wts, out, stdout_path);
    int rc = run_cmd(err, sizeof err, "%s", cmd);
    REQUIRE(rc == 0, "exit %d: %s", rc, err);
    char *so = slurp(stdout_path);
    REQUIRE(so, "no stdout");
    CHECK(strstr(so, "Table 1") && strstr(so, "Figure 1") && strstr(so, "Table 5") && strstr(so, "Recall against theta") &&
          strstr(so, "P as a prediction of acceptance"), "stdout lacks a table");
    CHECK(strstr(so, "alpha") && strstr(so, "beta "), "per-benchmark rows missing");
    free(so);
    static const struct { const char *file; int rows; const char *line; } want[] = {
        /* 3 groups (all, alpha, beta) x depths 1..2 x 8 P bins */
        {"table1_depth_p.csv", 3 * 2 * 8, "\nall,1,0.5,1,3,2,0.666667\n"},
        {"table1_depth_p.csv", 0, "\nalpha,2,0.1,0.3,1,1,1.000000\n"},
        {"fig1_entropy_p.csv", 3 * 7 * 8, "\nall,\"[0,1)\",0.5,1,2,1,0.500000\n"},
        {"table5_entropy_buckets.csv", 3 * 8, "\nall,\"total\",9,1.000000,6,4,0.800000,0.666667,3,2,0.400000,0.666667\n"},
        {"table5_entropy_buckets.csv", 0, "\nbeta,\"[1,2)\",1,0.500000,1,1,1.000000,1.000000,1,1,1.000000,1.000000\n"},
        {"recall_theta.csv", 3 * (15 + 99), "\nall,e2_topn,2,6,9,4,5,0.666667,0.800000\n"},
        {"recall_theta.csv", 0, "\nall,c2t_beta,0.50,3,9,2,5,0.333333,0.400000\n"},
        {"recall_theta.csv", 0, "\nall,e2_topn,all,9,9,5,5,1.000000,1.000000\n"},
        {"benchmarks.csv", 3, "\nalpha,1,2,7,3,0.428571,2.500000,2,0.666667,0.571429,0.5,0.333333,0.285714\n"},
        {"benchmarks.csv", 0, "\nall,2,3,9,5,0.555556,2.666667,2,0.800000,0.666667,0.5,0.400000,0.333333\n"},
        {"calibration_depth.csv", 3 * 2, "\nall,1,5,2.450000,3\n"},
        {"calibration_depth.csv", 0, "\nalpha,2,3,0.255000,1\n"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char *p = path_join(out, want[i].file), *text = slurp(p);
        CHECK(text, "%s missing", want[i].file);
        if (text) {
            if (want[i].rows) CHECK(count_lines(text) == want[i].rows + 1, "%s: %d lines, want %d", want[i].file,
                                    count_lines(text), want[i].rows + 1);
            CHECK(strstr(text, want[i].line), "%s lacks the row %s", want[i].file, want[i].line + 1);
        }
        free(text); free(p);
    }
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        static const char *png[] = {"table1_depth_p.png", "fig1_entropy_p.png", "table5_entropy_buckets.png",
                                    "recall_theta.png", "calibration_depth.png"};
        for (int i = 0; i < 5; i++) {
            char *p = path_join(out, png[i]);
            struct stat st;
            CHECK(stat(p, &st) == 0 && st.st_size > 1000, "%s missing or empty", png[i]);
            free(p);
        }
    }
    free(trace); free(wts); free(out); free(stdout_path);
}

static void test_help_and_usage(void) {
    char err[1024];
    int rc = run_cmd(err, sizeof err, "%s/spec-analyze --help", bin_dir());
    CHECK(rc == 0, "--help: exit %d", rc);
    rc = run_cmd(err, sizeof err, "%s/spec-analyze --frobnicate x.h5", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "unknown option or missing value '--frobnicate' (see spec-analyze --help)");
    rc = run_cmd(err, sizeof err, "%s/spec-analyze x.h5 --out", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "'--out'");
    rc = run_cmd(err, sizeof err, "%s/spec-analyze", bin_dir());
    CHECK(rc == 1 && strstr(err, "usage:"), "no file: %d %s", rc, err);
    rc = run_cmd(err, sizeof err, "%s/spec-analyze x.h5 --beta 2", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--beta");
    /* --traces names a trace file as in spec-train: the same error as the positional form */
    rc = run_cmd(err, sizeof err, "%s/spec-analyze --traces /nonexistent/x.h5 --quiet", bin_dir());
    CHECK(rc == 1 && strstr(err, "/nonexistent/x.h5") && !strstr(err, "usage:"), "--traces: %d %s", rc, err);
}

static void write_foreign(const char *path) {
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 3;
    hid_t s = H5Screate_simple(1, &n, NULL);
    int v[3] = {1, 2, 3};
    hid_t d = H5Dcreate2(f, "/x", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d); H5Sclose(s); H5Fclose(f);
}

static void test_bad_input(void) {
    char *missing = tpath("nope.h5"), *garbage = tpath("garbage.h5"), *foreign = tpath("foreign.h5");
    char *trunc = tpath("trunc.h5"), *syn = tpath("syn1.h5"), *cyc = tpath("cycle.h5");
    write_file(garbage, "this is not an HDF5 file at all, just text\n");
    write_foreign(foreign);
    if (!file_exists(syn)) make_synth(syn, 90, 7);
    size_t n;
    char *b = read_text_file(syn, &n);
    REQUIRE(b, "read %s", syn);
    FILE *f = fopen(trunc, "wb");
    if (f) { fwrite(b, 1, n / 2, f); fclose(f); }
    free(b);
    /* a tree whose parent links form a cycle: 0 -> 1 -> 0 */
    unlink(cyc);
    TraceWriter *w = trace_create(cyc, TRACE_NONE);
    REQUIRE(w, "create: %s", err_get());
    TraceNode nd[2] = {N(1, 1, 0.5f, 1.0f, 0), N(2, 0, 0.2f, 1.0f, 0)};
    add(w, nd, 2, 0);
    trace_finish_question(w, "x", "q");
    trace_close(w);
    static const char *needle[] = {"No such file", "not an HDF5 file", "not a trace file", "", "cycle"};
    const char *files[] = {missing, garbage, foreign, trunc, cyc};
    for (int i = 0; i < 5; i++) {
        char err[1024];
        int rc = run_cmd(err, sizeof err, "%s/spec-analyze %s", bin_dir(), files[i]);
        CHECK_ONE_LINE_ERROR(rc, err, files[i]);
        CHECK(strstr(err, needle[i]), "%s: error does not say '%s': %s", files[i], needle[i], err);
    }
    char err[1024];
    int rc = run_cmd(err, sizeof err, "%s/spec-analyze %s %s", bin_dir(), syn, syn);
    CHECK_ONE_LINE_ERROR(rc, err, "given twice");
    free(missing); free(garbage); free(foreign); free(trunc); free(syn); free(cyc);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_hand_tables);
    RUN(test_streaming_matches_naive);
    RUN(test_cli_out);
    RUN(test_help_and_usage);
    RUN(test_bad_input);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return h_done();
}
