/* spec-analyze: the C2T paper's trace analyses (Table 1, Figure 1, Table 5 /
 * App. D, recall against theta), overall and per benchmark, from any trace
 * files spec-collect wrote; tables on stdout, CSV + PNG with --out.
 *
 *   spec-analyze TRACE.h5 [TRACE.h5 ...] [--classifier W.json --beta B]
 *                [--topn N] [--out DIR] */
#include "infer/cli.h"
#include "kernels/base/util.h"
#include "train/analyze.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "spec-analyze";
static const char *synopsis =
    "usage: spec-analyze TRACE.h5 [TRACE.h5 ...] [--classifier W.json --beta B] [--topn N] [--out DIR] [--quiet]\n"
    "       (--traces FILE, repeatable, names trace files too, as in spec-train)\n";

static void usage(FILE *f) {
    fputs(synopsis, f);
    fprintf(f,
"Reads trace files (spec-collect; several are added up, a benchmark name in\n"
"several files is one benchmark) a tree at a time and prints:\n"
"  per benchmark  questions, trees, nodes, acceptance rate, tau of the full tree,\n"
"                 recall and theta of EAGLE-2's top-N (and of C2T at beta)\n"
"  Table 1        acceptance rate and nodes by depth x joint probability P\n"
"                 (P bins [0,1e-4) [1e-4,1e-3) [1e-3,0.01) [0.01,0.03) [0.03,0.1)\n"
"                 [0.1,0.3) [0.3,0.5) [0.5,1])\n"
"  Figure 1       the same by entropy bucket H [0,1) ... [6,inf) nats x P\n"
"  Table 5        nodes, selected and accepted per entropy bucket for EAGLE-2's\n"
"                 top-N per tree (and C2T: classifier >= beta, then drop nodes whose\n"
"                 parent is dropped)\n"
"  recall/theta   recall (share of accepted nodes kept) against theta (share of\n"
"                 nodes kept) for top-N, N = 1 ... 500, all (and C2T at beta 0.1 ... 0.9)\n"
"Options\n"
"  --classifier W.json    C2T classifier weights (spec-train); adds the C2T columns\n"
"                         and its recall curve\n"
"  --beta B               C2T threshold of Table 5 and the summary (default 0.5)\n"
"  --topn N               EAGLE-2's top-N of Table 5 and the summary (default 60)\n"
"  --out DIR              also write benchmarks.csv, table1_depth_p.csv,\n"
"                         fig1_entropy_p.csv, table5_entropy_buckets.csv,\n"
"                         recall_theta.csv (every benchmark and 'all'; every beta\n"
"                         0.01 ... 0.99) and a PNG of each table (gnuplot)\n"
"  --quiet                no progress line (otherwise shown on a terminal, or\n"
"                         once the reading has taken 10 s)\n"
"  -h, --help             this text\n");
}

/* A usage error: the problem, the synopsis, exit 1 (as every command). */
static void usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", synopsis);
    exit(1);
}

int main(int argc, char **argv) {
    enum { O_CLS = 256, O_BETA, O_TOPN, O_OUT, O_QUIET, O_TRACES };
    static const struct option opts[] = {
        {"traces", required_argument, 0, O_TRACES},
        {"classifier", required_argument, 0, O_CLS}, {"beta", required_argument, 0, O_BETA},
        {"topn", required_argument, 0, O_TOPN}, {"out", required_argument, 0, O_OUT},
        {"quiet", no_argument, 0, O_QUIET}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    AnOpts o;
    analyze_defaults(&o);
    o.progress = isatty(2);
    const char *cls_path = NULL, *out = NULL;
    const char **files = xcalloc((size_t)argc + 1, sizeof(char *));
    int c, quiet = 0, n_files = 0;
    opterr = 0;   /* one error line, ours */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_CLS: cls_path = optarg; break;
        case O_BETA: o.beta = cli_num(prog, "--beta", optarg, 0, 1); break;
        case O_TOPN: o.topn = (int)cli_int(prog, "--topn", optarg, 1, 1 << 30); break;
        case O_OUT: out = optarg; break;
        case O_QUIET: quiet = 1; break;
        case O_TRACES: files[n_files++] = optarg; break;
        case 'h': usage(stdout); free(files); return 0;
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    while (optind < argc) files[n_files++] = argv[optind++];
    if (!n_files) usage_error("no trace file given%s", "");
    if (quiet) o.progress = -1;
    Classifier *cls = NULL;
    if (cls_path && !(cls = classifier_load(cls_path))) die_err(prog);
    o.cls = cls;
    Analysis a;
    if (analyze_files(files, n_files, &o, &a)) die_err(prog);
    analysis_print(&a, stdout);
    fflush(stdout);
    int w = out ? analysis_write(&a, out) : 0;
    if (w < 0) die_err(prog);
    if (w > 0) fprintf(stderr, "%s: gnuplot not found: wrote the CSV files to %s, no PNGs (make deps installs gnuplot-nox)\n", prog, out);
    analysis_free(&a);
    classifier_free(cls);
    free(files);
    return 0;
}
