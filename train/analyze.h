/* spec-analyze's tables over trace files (collect/trace.h): the C2T paper's
 * Table 1 (acceptance by depth x joint probability P), Figure 1 (acceptance
 * against P within entropy buckets), Table 5 / App. D (nodes selected and
 * accepted per entropy bucket by EAGLE-2's top-N and by C2T at beta) and
 * recall against theta (share of nodes kept) for both selections; and,
 * ours, P as a prediction of acceptance by depth: in a full tree a node is
 * accepted with probability P when the head is calibrated, so the
 * accepted nodes of a depth should number the sum of their P (what sizes
 * trees from measured costs, --total auto, relies on).
 *
 * analyze_files() streams the files a tree at a time (TraceCursor: one
 * block of nodes in memory, whatever the file size) and adds every tree to
 * the overall statistics and to those of its benchmark (the /questions
 * row of its question; the same name in several files is one benchmark).
 * analyze_report.c prints the tables and writes them as CSV + PNG. */
#ifndef C2T_TRAIN_ANALYZE_H
#define C2T_TRAIN_ANALYZE_H
#include "collect/trace.h"
#include "infer/speculative/classifier.h"
#include "train/metrics.h"
#include <stdint.h>
#include <stdio.h>

/* Joint-probability bins [e[k], e[k+1]), the last closed: decades below
 * 0.01, finer above, where most accepted nodes are. */
#define AN_P_BINS 8
extern const double an_p_edges[AN_P_BINS + 1];   /* 0 1e-4 1e-3 1e-2 0.03 0.1 0.3 0.5 1 */
#define AN_DEPTHS 256                             /* depth is a uint8 */
/* C2T's recall curve: beta = 0.01, 0.02, ..., 0.99 */
#define AN_BETA_STEPS 99
#define AN_MAX_SWEEP 32                            /* EAGLE-2 top-N sweep points */

typedef struct { int64_t n, acc; } AnCell;

typedef struct {
    char name[TRACE_BENCHMARK_LEN + 1];
    int64_t questions, trees, nodes, accepted, accept_len;   /* accept_len: sum over trees */
    AnCell depth_p[AN_DEPTHS][AN_P_BINS];   /* Table 1 */
    double depth_sum_p[AN_DEPTHS];          /* by depth: the sum of P, the acceptances P predicts */
    AnCell h_p[N_BUCKETS][AN_P_BINS];       /* Figure 1 */
    BucketTable buckets;                    /* Table 5: e2 at topn, tree = C2T at beta */
    Confusion e2_sweep[AN_MAX_SWEEP];       /* top-N for each AnOpts.sweep */
    /* nodes by label and by how many grid betas their path-minimum
     * confidence reaches: C2T keeps a node at grid beta q iff index > q */
    int64_t beta_hist[2][AN_BETA_STEPS + 1];
} AnStats;

typedef struct {
    int topn;                  /* EAGLE-2's top-N of Table 5 (60) */
    double beta;               /* C2T's threshold of Table 5 (0.5) */
    const Classifier *cls;     /* NULL: no C2T columns or curve */
    int n_sweep;
    int sweep[AN_MAX_SWEEP];   /* top-N of the recall curve; 0 = every node */
    int progress;              /* progress line: 1 from the start, 0 once 10 s have gone, -1 never */
} AnOpts;

typedef struct {
    AnOpts o;
    int n_files;
    AnStats all;
    AnStats *bench;            /* in order of first appearance */
    int n_bench;
    int64_t skipped_trees, skipped_nodes;   /* trees with a non-finite P or H */
} Analysis;

/* The default sweep 1, 2, 5, 10, 20, ..., all. */
void analyze_defaults(AnOpts *o);
/* 0, or -1 + err_set naming the file and the problem; a is filled either
 * way and must be freed. */
int analyze_files(const char *const *paths, int n, const AnOpts *o, Analysis *a);
void analysis_free(Analysis *a);
/* Grid beta q (0-based) of the recall curve. */
double an_beta_at(int q);
/* The bin of a joint probability (NaN: bin 0; callers skip those trees). */
int an_p_bin(float P);

/* ---- analyze_report.c ---- */
/* Every table, for people, to f. */
void analysis_print(const Analysis *a, FILE *f);
/* The CSV files and, when gnuplot is there, the PNGs into dir (created if
 * missing); names in docs/commands.md.  0; 1 when there is no gnuplot (CSVs only);
 * -1 + err_set. */
int analysis_write(const Analysis *a, const char *dir);
/* Every file name analysis_write may write into dir, NULL-terminated (a
 * command checks that none of them is one of its inputs before it reads). */
extern const char *const analysis_files[];
#endif
