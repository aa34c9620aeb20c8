/* spec-analyze's statistics over trace files (train/analyze.h). */
#include "train/analyze.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

const double an_p_edges[AN_P_BINS + 1] = {0, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.3, 0.5, 1};

#define TREE_CHUNK 4096   /* /trees rows per read */
#define QUESTION_CHUNK 1024
/* the columns the tables use, and those the classifier's features read
 * (dataset_fields); the token stays on disk */
static unsigned an_fields(const Classifier *c) {
    return c ? dataset_fields(c) : TRACE_F_P | TRACE_F_H | TRACE_F_DEPTH | TRACE_F_ACCEPTED | TRACE_F_PARENT;
}

void analyze_defaults(AnOpts *o) {
    static const int sweep[] = {1, 2, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200, 300, 500, 0};
    memset(o, 0, sizeof *o);
    o->topn = 60;
    o->beta = 0.5;
    o->n_sweep = (int)(sizeof sweep / sizeof *sweep);
    memcpy(o->sweep, sweep, sizeof sweep);
}

double an_beta_at(int q) { return (q + 1) / 100.0; }

int an_p_bin(float P) {
    /* compared as float, so a P stored as 1e-4f falls in [1e-4, 1e-3) */
    int k = AN_P_BINS - 1;
    while (k > 0 && !(P >= (float)an_p_edges[k])) k--;
    return k;
}

/* How many grid betas a path-minimum confidence reaches (pm >= beta, as
 * c2t_tree_select compares). */
static int beta_index(float pm) {
    double v = pm;
    int j = v > 0 ? (int)floor(v * 100) : 0;
    if (j > AN_BETA_STEPS) j = AN_BETA_STEPS;
    while (j < AN_BETA_STEPS && v >= an_beta_at(j)) j++;
    while (j > 0 && !(v >= an_beta_at(j - 1))) j--;
    return j;
}

/* One tree's columns and what is derived from them, per node. */
typedef struct {
    int cap;
    float *P, *H, *conf, *pm;
    ClsNode *x;
    int32_t *parent;
    int *rank;
    uint8_t *scratch;
} TreeBuf;

static void treebuf_reserve(TreeBuf *b, int n) {
    if (n <= b->cap) return;
    b->cap = n;
    size_t f = sizeof(float) * (size_t)n;
    b->P = xrealloc(b->P, f); b->H = xrealloc(b->H, f);
    b->x = xrealloc(b->x, sizeof(ClsNode) * (size_t)n);
    b->conf = xrealloc(b->conf, f); b->pm = xrealloc(b->pm, f);
    b->parent = xrealloc(b->parent, sizeof(int32_t) * (size_t)n);
    b->rank = xrealloc(b->rank, sizeof(int) * (size_t)n);
    b->scratch = xrealloc(b->scratch, (size_t)n);
}

static void treebuf_free(TreeBuf *b) {
    free(b->P); free(b->H); free(b->x); free(b->conf); free(b->pm);
    free(b->parent); free(b->rank); free(b->scratch);
}

/* Fills b from the nodes; 0 if every P and H is finite. */
static int treebuf_fill(TreeBuf *b, const TraceNode *nd, int n, const Classifier *cls) {
    treebuf_reserve(b, n);
    for (int i = 0; i < n; i++) {
        if (!isfinite(nd[i].P) || !isfinite(nd[i].H)) return -1;
        b->P[i] = nd[i].P; b->H[i] = nd[i].H; b->parent[i] = nd[i].parent;
    }
    e2_rank(b->P, n, b->rank);
    if (cls) {
        /* C2T keeps a node at beta iff its path minimum reaches beta */
        dataset_tree_nodes(nd, n, b->x);
        classifier_forward(cls, b->x, n, b->conf);
        c2t_path_min(b->conf, b->parent, n, b->pm);
    }
    return 0;
}

static void cell_add(AnCell *c, int y) { c->n++; c->acc += y; }

static void add_tree(AnStats *s, const TreeBuf *b, const TraceNode *nd, int n, int accept_len, const AnOpts *o) {
    s->trees++;
    s->accept_len += accept_len;
    for (int i = 0; i < n; i++) {
        int y = nd[i].accepted, pb = an_p_bin(b->P[i]);
        s->nodes++;
        s->accepted += y;
        cell_add(&s->depth_p[nd[i].depth][pb], y);
        s->depth_sum_p[nd[i].depth] += b->P[i];
        cell_add(&s->h_p[entropy_bucket(b->H[i])][pb], y);
        bucket_count(&s->buckets, b->H[i], y, o->cls && b->pm[i] >= o->beta, b->rank[i] < o->topn);
        for (int k = 0; k < o->n_sweep; k++)
            confusion_count(&s->e2_sweep[k], o->sweep[k] == 0 || b->rank[i] < o->sweep[k], y);
        if (o->cls) s->beta_hist[y][beta_index(b->pm[i])]++;
    }
}

/* Index of the benchmark called name, added if new. */
static int bench_index(Analysis *a, const char *name) {
    if (!*name) name = "(unnamed)";
    for (int i = 0; i < a->n_bench; i++)
        if (!strcmp(a->bench[i].name, name)) return i;
    a->bench = xrealloc(a->bench, sizeof(AnStats) * (size_t)(a->n_bench + 1));
    AnStats *s = &a->bench[a->n_bench];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    return a->n_bench++;
}

/* Benchmark index of every /questions row of r (caller frees). */
static int *question_benchmarks(Analysis *a, TraceReader *r) {
    int64_t nq = trace_reader_questions(r);
    int *qb = xmalloc(sizeof(int) * (size_t)(nq + 1));
    TraceQuestion *buf = xmalloc(sizeof(TraceQuestion) * QUESTION_CHUNK);
    for (int64_t q0 = 0; q0 < nq; q0 += QUESTION_CHUNK) {
        int64_t m = nq - q0 < QUESTION_CHUNK ? nq - q0 : QUESTION_CHUNK;
        if (trace_read_questions(r, q0, m, buf)) { free(buf); free(qb); return NULL; }
        for (int64_t i = 0; i < m; i++) {
            qb[q0 + i] = bench_index(a, buf[i].benchmark);
            a->bench[qb[q0 + i]].questions++;
            a->all.questions++;
        }
    }
    free(buf);
    return qb;
}

/* The row's nodes and question must lie inside the finished rows. */
static int check_tree_row(const char *path, TraceReader *r, int64_t row, const TraceTree *t) {
    int64_t nn = trace_reader_nodes(r), nq = trace_reader_questions(r);
    if (t->n_nodes < 0 || t->first_node < 0 || t->first_node > nn - t->n_nodes) {
        err_set("%s: tree row %lld: nodes [%lld, %lld) outside the %lld finished nodes", path, (long long)row,
                (long long)t->first_node, (long long)t->first_node + t->n_nodes, (long long)nn);
        return -1;
    }
    if (t->question < 0 || t->question >= nq) {
        err_set("%s: tree row %lld: question %d outside the %lld finished questions", path, (long long)row,
                t->question, (long long)nq);
        return -1;
    }
    return 0;
}

typedef struct {
    Progress pr;
    int shown;
    int64_t done, total;
} AnProgress;

/* A progress line when asked for, or once the pass has run 10 s. */
static void an_progress(AnProgress *p, int wanted) {
    if (wanted < 0 || (!p->shown && !wanted && now_seconds() - p->pr.t0 < 10)) return;
    p->shown = 1;
    progress_update(&p->pr, p->done, NULL);
}

static int analyze_file(Analysis *a, const char *path, TraceReader *r, TreeBuf *b, AnProgress *p) {
    int *qb = question_benchmarks(a, r);
    if (!qb) return -1;
    TraceTree *trees = xmalloc(sizeof(TraceTree) * TREE_CHUNK);
    TraceCursor cur;
    trace_cursor_init(&cur, r, an_fields(a->o.cls));
    int64_t nt = trace_reader_trees(r);
    int rc = -1;
    for (int64_t t0 = 0; t0 < nt; t0 += TREE_CHUNK) {
        int64_t m = nt - t0 < TREE_CHUNK ? nt - t0 : TREE_CHUNK;
        if (trace_read_trees(r, t0, m, trees)) goto out;
        for (int64_t i = 0; i < m; i++) {
            const TraceTree *t = &trees[i];
            if (check_tree_row(path, r, t0 + i, t)) goto out;
            const TraceNode *nd = trace_cursor_get(&cur, t0 + i, t->first_node, t->n_nodes);
            treebuf_reserve(b, t->n_nodes);
            if (!nd || trace_check_tree(path, t0 + i, t->first_node, nd, t->n_nodes, b->scratch)) goto out;
            p->done++;
            an_progress(p, a->o.progress);
            if (treebuf_fill(b, nd, t->n_nodes, a->o.cls)) {
                a->skipped_trees++;
                a->skipped_nodes += t->n_nodes;
                continue;
            }
            add_tree(&a->all, b, nd, t->n_nodes, t->accept_len, &a->o);
            add_tree(&a->bench[qb[t->question]], b, nd, t->n_nodes, t->accept_len, &a->o);
        }
    }
    rc = 0;
out:
    trace_cursor_free(&cur);
    free(trees);
    free(qb);
    return rc;
}

int analyze_files(const char *const *paths, int n, const AnOpts *o, Analysis *a) {
    memset(a, 0, sizeof *a);
    a->o = *o;
    a->n_files = n;
    snprintf(a->all.name, sizeof a->all.name, "all");
    /* open (and so check) every file before the long pass */
    TraceReader **rd = xcalloc((size_t)n, sizeof *rd);
    AnProgress p = {0};
    int rc = -1;
    for (int f = 0; f < n; f++) {
        for (int g = 0; g < f; g++)
            if (!strcmp(paths[g], paths[f])) { err_set("%s: given twice", paths[f]); goto out; }
        if (!(rd[f] = trace_open(paths[f]))) goto out;
        p.total += trace_reader_trees(rd[f]);
    }
    progress_start(&p.pr, "spec-analyze trees", p.total);
    TreeBuf b = {0};
    rc = 0;
    for (int f = 0; f < n && !rc; f++) rc = analyze_file(a, paths[f], rd[f], &b, &p);
    treebuf_free(&b);
    if (p.shown) progress_end(&p.pr, p.done, NULL);
out:
    for (int f = 0; f < n; f++) trace_reader_close(rd[f]);
    free(rd);
    return rc;
}

void analysis_free(Analysis *a) {
    free(a->bench);
    a->bench = NULL;
    a->n_bench = 0;
}
