/* spec-analyze's output (train/analyze.h): tables on stdout, CSV + PNG
 * (gnuplot) with --out.  Groups: 0 = all trees, then each benchmark. */
#include "train/analyze.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int n_groups(const Analysis *a) { return 1 + a->n_bench; }
static const AnStats *group(const Analysis *a, int g) { return g == 0 ? &a->all : &a->bench[g - 1]; }

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0; }

/* an_p_edges as short labels */
static const char *const p_edge_names[AN_P_BINS + 1] = {"0", "1e-4", "1e-3", "0.01", "0.03", "0.1", "0.3", "0.5", "1"};

/* "[0,1e-4)" ... "[0.5,1]" */
static const char *p_bin_name(int k, char *buf) {
    snprintf(buf, 32, "[%s,%s%c", p_edge_names[k], p_edge_names[k + 1], k == AN_P_BINS - 1 ? ']' : ')');
    return buf;
}

/* 1234, 12.3k, 4.5M: counts that fit a table cell */
static const char *compact(int64_t n, char *buf) {
    if (n < 10000) snprintf(buf, 24, "%lld", (long long)n);
    else if (n < 10000000) snprintf(buf, 24, "%.1fk", n / 1e3);
    else snprintf(buf, 24, "%.1fM", n / 1e6);
    return buf;
}

/* Depths with nodes anywhere (Table 1's rows): [*lo, *hi], empty if lo > hi. */
static void depth_range(const Analysis *a, int *lo, int *hi) {
    *lo = AN_DEPTHS; *hi = -1;
    for (int d = 0; d < AN_DEPTHS; d++)
        for (int k = 0; k < AN_P_BINS; k++)
            if (a->all.depth_p[d][k].n) { if (d < *lo) *lo = d; if (d > *hi) *hi = d; }
}

/* C2T's confusion at grid beta q, from the path-minimum histogram. */
static Confusion c2t_at(const AnStats *s, int q) {
    Confusion c = {0};
    for (int j = q + 1; j <= AN_BETA_STEPS; j++) { c.tp += s->beta_hist[1][j]; c.fp += s->beta_hist[0][j]; }
    c.fn = s->accepted - c.tp;
    c.tn = s->nodes - s->accepted - c.fp;
    return c;
}

/* ---------------------------------------------------------------- stdout */

static void print_cells(FILE *f, const char *label, const AnCell *row) {
    fprintf(f, "%-8s", label);
    for (int k = 0; k < AN_P_BINS; k++) {
        char c[24];
        if (row[k].n) fprintf(f, " %5.3f %-7s", ratio(row[k].acc, row[k].n), compact(row[k].n, c));
        else fprintf(f, " %-13s", "-");
    }
    fprintf(f, "\n");
}

static void print_p_header(FILE *f, const char *first) {
    fprintf(f, "%-8s", first);
    for (int k = 0; k < AN_P_BINS; k++) { char b[32]; fprintf(f, " %-13s", p_bin_name(k, b)); }
    fprintf(f, "\n");
}

static void print_table1(const Analysis *a, FILE *f) {
    int lo, hi;
    depth_range(a, &lo, &hi);
    fprintf(f, "\nTable 1: acceptance rate and nodes by depth (rows) x joint probability P (columns)\n");
    print_p_header(f, "depth");
    for (int d = lo; d <= hi; d++) {
        char l[16];
        snprintf(l, sizeof l, "%d", d);
        print_cells(f, l, a->all.depth_p[d]);
    }
}

/* Accepted nodes of a depth: measured, and predicted by the sum of P. */
static int64_t depth_accepted(const AnStats *s, int d) {
    int64_t acc = 0;
    for (int k = 0; k < AN_P_BINS; k++) acc += s->depth_p[d][k].acc;
    return acc;
}

static int64_t depth_nodes(const AnStats *s, int d) {
    int64_t n = 0;
    for (int k = 0; k < AN_P_BINS; k++) n += s->depth_p[d][k].n;
    return n;
}

static void print_calibration(const Analysis *a, FILE *f) {
    int lo, hi;
    depth_range(a, &lo, &hi);
    fprintf(f, "\nP as a prediction of acceptance, by depth (a calibrated head: accepted = sum of P)\n");
    fprintf(f, "%-8s %12s %14s %12s %16s\n", "depth", "nodes", "predicted", "accepted", "accepted/pred.");
    double sp = 0;
    int64_t sn = 0, sa = 0;
    for (int d = lo; d <= hi; d++) {
        const double p = a->all.depth_sum_p[d];
        const int64_t n = depth_nodes(&a->all, d), acc = depth_accepted(&a->all, d);
        sp += p; sn += n; sa += acc;
        fprintf(f, "%-8d %12lld %14.1f %12lld %16.3f\n", d, (long long)n, p, (long long)acc, p > 0 ? acc / p : 0.0);
    }
    fprintf(f, "%-8s %12lld %14.1f %12lld %16.3f\n", "all", (long long)sn, sp, (long long)sa, sp > 0 ? sa / sp : 0.0);
}

static void print_fig1(const Analysis *a, FILE *f) {
    fprintf(f, "\nFigure 1: acceptance rate and nodes by entropy H (rows, nats) x P (columns)\n");
    print_p_header(f, "H");
    for (int b = 0; b < N_BUCKETS; b++) {
        char l[16];
        print_cells(f, entropy_bucket_name(b, l), a->all.h_p[b]);
    }
}

static void print_table5(const Analysis *a, FILE *f) {
    const BucketTable *t = &a->all.buckets;
    int c2t = a->o.cls != NULL;
    fprintf(f, "\nTable 5 / App. D: nodes selected and accepted per entropy bucket: EAGLE-2 top-%d", a->o.topn);
    if (c2t) fprintf(f, " vs C2T at beta %g", a->o.beta);
    fprintf(f, "\n%-8s %10s %6s | %10s %9s %7s %7s", "H", "nodes", "share", "E2 sel", "E2 acc", "recall", "prec");
    if (c2t) fprintf(f, " | %10s %9s %7s %7s", "C2T sel", "C2T acc", "recall", "prec");
    fprintf(f, "\n");
    for (int b = 0; b <= N_BUCKETS; b++) {
        char l[16];
        Rates e = rates_of(t->e2[b]), c = rates_of(t->tree[b]);
        fprintf(f, "%-8s %10lld %6.3f | %10lld %9lld %7.4f %7.4f", entropy_bucket_name(b, l), (long long)t->n[b],
                ratio(t->n[b], t->n[N_BUCKETS]), (long long)(e.c.tp + e.c.fp), (long long)e.c.tp, e.recall,
                e.precision);
        if (c2t)
            fprintf(f, " | %10lld %9lld %7.4f %7.4f", (long long)(c.c.tp + c.c.fp), (long long)c.c.tp, c.recall,
                    c.precision);
        fprintf(f, "\n");
    }
}

static void print_recall(const Analysis *a, FILE *f) {
    fprintf(f, "\nRecall against theta (share of nodes kept), all trees\n");
    fprintf(f, "EAGLE-2 top-N:  %6s %8s %8s\n", "N", "theta", "recall");
    for (int k = 0; k < a->o.n_sweep; k++) {
        Rates r = rates_of(a->all.e2_sweep[k]);
        char n[16];
        snprintf(n, sizeof n, "%d", a->o.sweep[k]);
        fprintf(f, "                %6s %8.4f %8.4f\n", a->o.sweep[k] ? n : "all", r.theta, r.recall);
    }
    if (!a->o.cls) return;
    fprintf(f, "C2T at beta:    %6s %8s %8s   (--out has every beta 0.01..0.99)\n", "beta", "theta", "recall");
    for (int q = 9; q < AN_BETA_STEPS; q += 10) {
        Rates r = rates_of(c2t_at(&a->all, q));
        fprintf(f, "                %6.2f %8.4f %8.4f\n", an_beta_at(q), r.theta, r.recall);
    }
}

static void print_benchmarks(const Analysis *a, FILE *f) {
    int c2t = a->o.cls != NULL;
    fprintf(f, "\nPer benchmark (tau = 1 + mean accepted nodes of the full tree; recall and theta at top-%d",
            a->o.topn);
    if (c2t) fprintf(f, " and beta %g", a->o.beta);
    fprintf(f, ")\n%-16s %6s %8s %10s %9s %8s %6s | %8s %8s", "benchmark", "quest.", "trees", "nodes", "accepted",
            "acc.rate", "tau", "E2 rec", "E2 theta");
    if (c2t) fprintf(f, " | %8s %8s", "C2T rec", "C2T th.");
    fprintf(f, "\n");
    /* the benchmarks (when there are several), then all */
    for (int g = a->n_bench > 1 ? 1 : n_groups(a); g <= n_groups(a); g++) {
        const AnStats *s = group(a, g % n_groups(a));
        Rates e = rates_of(s->buckets.e2[N_BUCKETS]), c = rates_of(s->buckets.tree[N_BUCKETS]);
        fprintf(f, "%-16s %6lld %8lld %10lld %9lld %8.5f %6.3f | %8.4f %8.4f", s->name, (long long)s->questions,
                (long long)s->trees, (long long)s->nodes, (long long)s->accepted, ratio(s->accepted, s->nodes),
                1 + ratio(s->accept_len, s->trees), e.recall, e.theta);
        if (c2t) fprintf(f, " | %8.4f %8.4f", c.recall, c.theta);
        fprintf(f, "\n");
    }
}

void analysis_print(const Analysis *a, FILE *f) {
    const AnStats *s = &a->all;
    fprintf(f, "%d trace file%s: %lld questions, %lld trees, %lld nodes, %lld accepted (rate %.5f), %d benchmark%s\n",
            a->n_files, a->n_files == 1 ? "" : "s", (long long)s->questions, (long long)s->trees,
            (long long)s->nodes, (long long)s->accepted, ratio(s->accepted, s->nodes), a->n_bench,
            a->n_bench == 1 ? "" : "s");
    if (a->skipped_trees)
        fprintf(f, "skipped %lld trees (%lld nodes) with a non-finite P or H\n", (long long)a->skipped_trees,
                (long long)a->skipped_nodes);
    print_benchmarks(a, f);
    print_table1(a, f);
    print_calibration(a, f);
    print_fig1(a, f);
    print_table5(a, f);
    print_recall(a, f);
}

/* ---------------------------------------------------------------- CSV */

typedef void (*CsvRows)(const Analysis *a, FILE *f);

static void csv_table1(const Analysis *a, FILE *f) {
    int lo, hi;
    depth_range(a, &lo, &hi);
    fprintf(f, "benchmark,depth,p_lo,p_hi,nodes,accepted,acceptance\n");
    for (int g = 0; g < n_groups(a); g++)
        for (int d = lo; d <= hi; d++)
            for (int k = 0; k < AN_P_BINS; k++) {
                AnCell c = group(a, g)->depth_p[d][k];
                fprintf(f, "%s,%d,%g,%g,%lld,%lld,%.6f\n", group(a, g)->name, d, an_p_edges[k], an_p_edges[k + 1],
                        (long long)c.n, (long long)c.acc, ratio(c.acc, c.n));
            }
}

static void csv_calibration(const Analysis *a, FILE *f) {
    int lo, hi;
    depth_range(a, &lo, &hi);
    fprintf(f, "benchmark,depth,nodes,predicted_accepted,accepted\n");
    for (int g = 0; g < n_groups(a); g++)
        for (int d = lo; d <= hi; d++) {
            const AnStats *s = group(a, g);
            fprintf(f, "%s,%d,%lld,%.6f,%lld\n", s->name, d, (long long)depth_nodes(s, d), s->depth_sum_p[d],
                    (long long)depth_accepted(s, d));
        }
}

static void csv_fig1(const Analysis *a, FILE *f) {
    fprintf(f, "benchmark,h_bucket,p_lo,p_hi,nodes,accepted,acceptance\n");
    for (int g = 0; g < n_groups(a); g++)
        for (int b = 0; b < N_BUCKETS; b++)
            for (int k = 0; k < AN_P_BINS; k++) {
                AnCell c = group(a, g)->h_p[b][k];
                char l[16];
                fprintf(f, "%s,\"%s\",%g,%g,%lld,%lld,%.6f\n", group(a, g)->name, entropy_bucket_name(b, l),
                        an_p_edges[k], an_p_edges[k + 1], (long long)c.n, (long long)c.acc, ratio(c.acc, c.n));
            }
}

static void csv_confusion(FILE *f, Confusion c) {
    Rates r = rates_of(c);
    fprintf(f, ",%lld,%lld,%.6f,%.6f", (long long)(c.tp + c.fp), (long long)c.tp, r.recall, r.precision);
}

static void csv_table5(const Analysis *a, FILE *f) {
    fprintf(f, "benchmark,h_bucket,nodes,share,e2_selected,e2_accepted,e2_recall,e2_precision");
    if (a->o.cls) fprintf(f, ",c2t_selected,c2t_accepted,c2t_recall,c2t_precision");
    fprintf(f, "\n");
    for (int g = 0; g < n_groups(a); g++)
        for (int b = 0; b <= N_BUCKETS; b++) {
            const BucketTable *t = &group(a, g)->buckets;
            char l[16];
            fprintf(f, "%s,\"%s\",%lld,%.6f", group(a, g)->name, entropy_bucket_name(b, l), (long long)t->n[b],
                    ratio(t->n[b], t->n[N_BUCKETS]));
            csv_confusion(f, t->e2[b]);
            if (a->o.cls) csv_confusion(f, t->tree[b]);
            fprintf(f, "\n");
        }
}

static void csv_point(FILE *f, const char *bench, const char *method, const char *param, Confusion c) {
    Rates r = rates_of(c);
    fprintf(f, "%s,%s,%s,%lld,%lld,%lld,%lld,%.6f,%.6f\n", bench, method, param, (long long)(c.tp + c.fp),
            (long long)(c.tp + c.fp + c.fn + c.tn), (long long)c.tp, (long long)(c.tp + c.fn), r.theta, r.recall);
}

static void csv_recall(const Analysis *a, FILE *f) {
    fprintf(f, "benchmark,method,param,kept,nodes,accepted_kept,accepted,theta,recall\n");
    for (int g = 0; g < n_groups(a); g++) {
        const AnStats *s = group(a, g);
        char p[16];
        for (int k = 0; k < a->o.n_sweep; k++) {
            if (a->o.sweep[k]) snprintf(p, sizeof p, "%d", a->o.sweep[k]);
            else snprintf(p, sizeof p, "all");
            csv_point(f, s->name, "e2_topn", p, s->e2_sweep[k]);
        }
        if (!a->o.cls) continue;
        for (int q = 0; q < AN_BETA_STEPS; q++) {
            snprintf(p, sizeof p, "%.2f", an_beta_at(q));
            csv_point(f, s->name, "c2t_beta", p, c2t_at(s, q));
        }
    }
}

static void csv_benchmarks(const Analysis *a, FILE *f) {
    fprintf(f, "benchmark,questions,trees,nodes,accepted,acceptance,tau,e2_topn,e2_recall,e2_theta");
    if (a->o.cls) fprintf(f, ",c2t_beta,c2t_recall,c2t_theta");
    fprintf(f, "\n");
    for (int g = 0; g < n_groups(a); g++) {
        const AnStats *s = group(a, g);
        Rates e = rates_of(s->buckets.e2[N_BUCKETS]), c = rates_of(s->buckets.tree[N_BUCKETS]);
        fprintf(f, "%s,%lld,%lld,%lld,%lld,%.6f,%.6f,%d,%.6f,%.6f", s->name, (long long)s->questions,
                (long long)s->trees, (long long)s->nodes, (long long)s->accepted, ratio(s->accepted, s->nodes),
                1 + ratio(s->accept_len, s->trees), a->o.topn, e.recall, e.theta);
        if (a->o.cls) fprintf(f, ",%g,%.6f,%.6f", a->o.beta, c.recall, c.theta);
        fprintf(f, "\n");
    }
}

static int write_csv(const char *dir, const char *name, CsvRows rows, const Analysis *a) {
    char *path = path_join(dir, name), *tmp = NULL;
    FILE *f = atomic_create(path, &tmp);
    int rc = -1;
    if (f) {
        rows(a, f);
        rc = atomic_finish(f, tmp, path, 0);
    }
    free(path);
    return rc;
}

/* ---------------------------------------------------------------- PNG */

#define PLOT_MAX 128
typedef struct {
    char title[48];
    int n;
    double x[PLOT_MAX], y[PLOT_MAX];
} Series;

typedef struct {
    const char *name, *title, *xlabel, *ylabel;
    const char *const *xtics;   /* labels of x = 0, 1, ...; NULL: numeric x */
    int n_xtics;
} PlotSpec;

static void series_add(Series *s, double x, double y) {
    if (s->n < PLOT_MAX) { s->x[s->n] = x; s->y[s->n] = y; s->n++; }
}

/* A gnuplot single-quoted string: ' doubled. */
static void gp_quoted(FILE *g, const char *s) {
    fputc('\'', g);
    for (; *s; s++) { if (*s == '\'') fputc('\'', g); fputc(*s, g); }
    fputc('\'', g);
}

/* dir/name.png as a line plot of the series (empty ones left out). */
static int plot_png(const char *dir, const PlotSpec *ps, const Series *s, int ns) {
    FILE *g = popen("gnuplot", "w");
    if (!g) { err_set("cannot run gnuplot: %s", strerror(errno)); return -1; }
    char *png = path_join(dir, ps->name);
    fprintf(g, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1000,640 noenhanced }"
               " else { set terminal png size 1000,640 }\nset output ");
    gp_quoted(g, png);
    fprintf(g, "\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\nset key outside right\n", ps->title,
            ps->xlabel, ps->ylabel);
    if (ps->xtics) {
        fprintf(g, "set xtics rotate by -30 (");
        for (int k = 0; k < ps->n_xtics; k++) fprintf(g, "%s'%s' %d", k ? ", " : "", ps->xtics[k], k);
        fprintf(g, ")\nset xrange [-0.5:%g]\n", ps->n_xtics - 0.5);
    }
    int plotted = 0;
    for (int i = 0; i < ns; i++) {
        if (!s[i].n) continue;
        fprintf(g, "$d%d << EOD\n", i);
        for (int k = 0; k < s[i].n; k++) fprintf(g, "%.9g %.9g\n", s[i].x[k], s[i].y[k]);
        fprintf(g, "EOD\n");
    }
    for (int i = 0; i < ns; i++) {
        if (!s[i].n) continue;
        fprintf(g, "%s $d%d using 1:2 with linespoints title ", plotted++ ? "," : "plot", i);
        gp_quoted(g, s[i].title);
    }
    fprintf(g, "%s\n", plotted ? "" : "set label 'no data' at graph 0.5, 0.5\nplot NaN notitle");
    int st = pclose(g);
    int rc = st == 0 ? 0 : -1;
    if (rc) err_set("%s: gnuplot failed (status %d)", png, st);
    free(png);
    return rc;
}


/* Table 1: acceptance against depth, a line per P bin (at equal P, deeper
 * nodes are accepted more often: the lines rise). */
static int png_table1(const Analysis *a, const char *dir) {
    Series s[AN_P_BINS];
    memset(s, 0, sizeof s);
    int lo, hi;
    depth_range(a, &lo, &hi);
    for (int k = 0; k < AN_P_BINS; k++) {
        char l[32];
        snprintf(s[k].title, sizeof s[k].title, "P %s", p_bin_name(k, l));
        for (int d = lo; d <= hi; d++)
            if (a->all.depth_p[d][k].n) series_add(&s[k], d, ratio(a->all.depth_p[d][k].acc, a->all.depth_p[d][k].n));
    }
    PlotSpec ps = {"table1_depth_p.png", "Acceptance by depth at equal joint probability P (Table 1)", "depth",
                   "acceptance rate", NULL, 0};
    return plot_png(dir, &ps, s, AN_P_BINS);
}

/* Accepted nodes per depth, measured and predicted by the sum of P. */
static int png_calibration(const Analysis *a, const char *dir) {
    Series s[2];
    memset(s, 0, sizeof s);
    snprintf(s[0].title, sizeof s[0].title, "predicted: sum of P");
    snprintf(s[1].title, sizeof s[1].title, "measured: accepted nodes");
    int lo, hi;
    depth_range(a, &lo, &hi);
    for (int d = lo; d <= hi; d++) {
        series_add(&s[0], d, a->all.depth_sum_p[d]);
        series_add(&s[1], d, (double)depth_accepted(&a->all, d));
    }
    PlotSpec ps = {"calibration_depth.png", "Accepted nodes by depth: predicted by P and measured", "depth",
                   "nodes", NULL, 0};
    return plot_png(dir, &ps, s, 2);
}

/* Figure 1: acceptance against P, a line per entropy bucket. */
static int png_fig1(const Analysis *a, const char *dir) {
    Series s[N_BUCKETS];
    memset(s, 0, sizeof s);
    for (int b = 0; b < N_BUCKETS; b++) {
        char l[16];
        snprintf(s[b].title, sizeof s[b].title, "H %s", entropy_bucket_name(b, l));
        for (int k = 0; k < AN_P_BINS; k++)
            if (a->all.h_p[b][k].n) series_add(&s[b], k, ratio(a->all.h_p[b][k].acc, a->all.h_p[b][k].n));
    }
    char names[AN_P_BINS][32];
    const char *tics[AN_P_BINS];
    for (int k = 0; k < AN_P_BINS; k++) tics[k] = p_bin_name(k, names[k]);
    PlotSpec ps = {"fig1_entropy_p.png", "Acceptance against P within entropy buckets (Figure 1)",
                   "joint probability P", "acceptance rate", tics, AN_P_BINS};
    return plot_png(dir, &ps, s, N_BUCKETS);
}

/* Table 5: selected and accepted nodes per entropy bucket. */
static int png_table5(const Analysis *a, const char *dir) {
    Series s[4];
    memset(s, 0, sizeof s);
    const BucketTable *t = &a->all.buckets;
    snprintf(s[0].title, sizeof s[0].title, "EAGLE-2 top-%d selected", a->o.topn);
    snprintf(s[1].title, sizeof s[1].title, "EAGLE-2 top-%d accepted", a->o.topn);
    snprintf(s[2].title, sizeof s[2].title, "C2T beta %g selected", a->o.beta);
    snprintf(s[3].title, sizeof s[3].title, "C2T beta %g accepted", a->o.beta);
    for (int b = 0; b < N_BUCKETS; b++) {
        series_add(&s[0], b, (double)(t->e2[b].tp + t->e2[b].fp));
        series_add(&s[1], b, (double)t->e2[b].tp);
        if (!a->o.cls) continue;
        series_add(&s[2], b, (double)(t->tree[b].tp + t->tree[b].fp));
        series_add(&s[3], b, (double)t->tree[b].tp);
    }
    char names[N_BUCKETS][16];
    const char *tics[N_BUCKETS];
    for (int b = 0; b < N_BUCKETS; b++) tics[b] = entropy_bucket_name(b, names[b]);
    PlotSpec ps = {"table5_entropy_buckets.png", "Nodes selected and accepted per entropy bucket (Table 5 / App. D)",
                   "entropy H (nats)", "nodes", tics, N_BUCKETS};
    return plot_png(dir, &ps, s, 4);
}

/* Recall against theta for the top-N sweep and the beta grid. */
static int png_recall(const Analysis *a, const char *dir) {
    Series s[2];
    memset(s, 0, sizeof s);
    snprintf(s[0].title, sizeof s[0].title, "EAGLE-2 top-N");
    snprintf(s[1].title, sizeof s[1].title, "C2T beta 0.01..0.99");
    for (int k = 0; k < a->o.n_sweep; k++) {
        Rates r = rates_of(a->all.e2_sweep[k]);
        series_add(&s[0], r.theta, r.recall);
    }
    for (int q = 0; a->o.cls && q < AN_BETA_STEPS; q++) {
        Rates r = rates_of(c2t_at(&a->all, q));
        series_add(&s[1], r.theta, r.recall);
    }
    PlotSpec ps = {"recall_theta.png", "Recall against theta (share of nodes kept)", "theta", "recall", NULL, 0};
    return plot_png(dir, &ps, s, 2);
}

static int have_gnuplot(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

const char *const analysis_files[] = {
    "benchmarks.csv",     "table1_depth_p.csv", "fig1_entropy_p.csv",        "table5_entropy_buckets.csv",
    "recall_theta.csv",   "calibration_depth.csv", "table1_depth_p.png",     "calibration_depth.png",
    "fig1_entropy_p.png", "table5_entropy_buckets.png", "recall_theta.png", NULL};

int analysis_write(const Analysis *a, const char *dir) {
    if (mkdir(dir, 0777) && errno != EEXIST) { err_set("%s: cannot create: %s", dir, strerror(errno)); return -1; }
    static const struct { const char *name; CsvRows rows; } csv[] = {
        {"benchmarks.csv", csv_benchmarks}, {"table1_depth_p.csv", csv_table1}, {"fig1_entropy_p.csv", csv_fig1},
        {"table5_entropy_buckets.csv", csv_table5}, {"recall_theta.csv", csv_recall},
        {"calibration_depth.csv", csv_calibration}};
    for (size_t i = 0; i < sizeof csv / sizeof *csv; i++)
        if (write_csv(dir, csv[i].name, csv[i].rows, a)) return -1;
    if (!have_gnuplot()) return 1;
    int (*const png[])(const Analysis *, const char *) = {png_table1, png_fig1, png_table5, png_recall,
                                                          png_calibration};
    for (size_t i = 0; i < sizeof png / sizeof *png; i++)
        if (png[i](a, dir)) return -1;
    return 0;
}
