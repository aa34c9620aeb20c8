/* spec-analyze: the C2T paper's trace analyses (Table 1, Figure 1, Table 5 /
 * App. D, recall against theta), overall and per benchmark, from any trace
 * files spec-collect wrote; tables on stdout, CSV + PNG with --out.
 *
 *   spec-analyze TRACE.h5 [TRACE.h5 ...] [--classifier W.json --beta B]
 *                [--topn N] [--out DIR]
 *   spec-analyze replay TRACE.h5 --depth D --total N [--min-p X] --json OUT.json */
#include "infer/cli.h"
#include "kernels/base/util.h"
#include "train/analyze.h"
#include "train/replay.h"
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "spec-analyze";
static const char *synopsis =
    "usage: spec-analyze TRACE.h5 [TRACE.h5 ...] [--classifier W.json --beta B] [--topn N] [--out DIR] [--quiet]\n"
    "       (--traces FILE, repeatable, names trace files too, as in spec-train)\n"
    "       spec-analyze replay TRACE.h5 --depth D --total N|all [--min-p X] --json OUT.json\n";

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
"  -h, --help             this text\n"
"replay: EAGLE-2 at depth D and total N (of them the nodes with P >= X: eagle2's\n"
"--param min_p) on a trace of every position\n"
"(spec-collect --every-position, same topk), without decoding: its tau and gamma\n"
"per turn, question and benchmark, into OUT.json in spec-eval's shape (no times),\n"
"and one summary line on stdout.  Exact where the draft's products sum each row\n"
"alone (--cpu-fast-gemm on): the trees a decoding run would build at each cycle\n"
"are the trace's (docs/commands.md)\n");
}

/* A usage error: the problem, the synopsis, exit 1 (as every command). */
static void usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", synopsis);
    exit(1);
}

/* Adds one turn's counts to a JSON totals object. */
static void add_counts(cJSON *o, const ReplayTurn *t) {
    static const char *keys[] = {"new_tokens", "cycles", "gamma", "cycle_tokens"};
    const int64_t v[] = {t->new_tokens, t->cycles, t->gamma, t->cycle_tokens};
    for (int i = 0; i < 4; i++) {
        cJSON *x = cJSON_GetObjectItem(o, keys[i]);
        if (x) cJSON_SetNumberValue(x, x->valuedouble + (double)v[i]);
        else cJSON_AddNumberToObject(o, keys[i], (double)v[i]);
    }
}

static void set_tau(cJSON *o) {
    double cy = cJSON_GetObjectItem(o, "cycles")->valuedouble;
    cJSON_AddNumberToObject(o, "tau", cy > 0 ? cJSON_GetObjectItem(o, "cycle_tokens")->valuedouble / cy : 0);
}

/* The replay as spec-eval's JSON report: settings (the policy's and the
 * trace's), benchmarks with their questions and turns, totals. */
static cJSON *replay_json(const Replay *rp, const char *trace) {
    cJSON *root = cJSON_CreateObject(), *set = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddStringToObject(root, "tool", "spec-analyze replay");
    cJSON_AddStringToObject(set, "policy", "eagle2");
    cJSON_AddNumberToObject(set, "topk", rp->topk);
    cJSON_AddNumberToObject(set, "depth", rp->depth);
    if (rp->total < 0) cJSON_AddStringToObject(set, "total", "all");
    else cJSON_AddNumberToObject(set, "total", rp->total);
    cJSON_AddNumberToObject(set, "min_p", rp->min_p);
    cJSON_AddStringToObject(set, "replay_of", trace);
    cJSON *benches = cJSON_AddArrayToObject(root, "benchmarks"), *all = cJSON_AddObjectToObject(root, "total");
    ReplayTurn zero = {0};
    add_counts(all, &zero);
    int64_t t = 0;
    for (int64_t q = 0; q < rp->n_questions; q++) {
        const TraceQuestion *tq = &rp->questions[q];
        cJSON *b = NULL, *it;
        cJSON_ArrayForEach(it, benches)
            if (!strcmp(cJSON_GetObjectItem(it, "name")->valuestring, tq->benchmark)) b = it;
        if (!b) {
            b = cJSON_CreateObject();
            cJSON_AddStringToObject(b, "name", tq->benchmark);
            cJSON_AddArrayToObject(b, "questions");
            add_counts(cJSON_AddObjectToObject(b, "total"), &zero);
            cJSON_AddItemToArray(benches, b);
        }
        cJSON *qo = cJSON_CreateObject(), *turns = cJSON_AddArrayToObject(qo, "turns");
        cJSON_AddStringToObject(qo, "question_id", tq->question_id);
        cJSON_AddItemToArray(cJSON_GetObjectItem(b, "questions"), qo);
        for (; t < rp->n_turns && rp->turns[t].question == q; t++) {
            cJSON *to = cJSON_CreateObject();
            cJSON_AddNumberToObject(to, "turn", rp->turns[t].turn + 1);
            add_counts(to, &rp->turns[t]);
            set_tau(to);
            cJSON_AddItemToArray(turns, to);
            add_counts(cJSON_GetObjectItem(b, "total"), &rp->turns[t]);
            add_counts(all, &rp->turns[t]);
        }
    }
    cJSON *b;
    cJSON_ArrayForEach(b, benches) set_tau(cJSON_GetObjectItem(b, "total"));
    set_tau(all);
    return root;
}

static int cmd_replay(int argc, char **argv) {
    enum { O_DEPTH = 256, O_TOTAL, O_MINP, O_JSON };
    static const struct option opts[] = {{"depth", required_argument, 0, O_DEPTH},
                                         {"total", required_argument, 0, O_TOTAL},
                                         {"min-p", required_argument, 0, O_MINP},
                                         {"json", required_argument, 0, O_JSON},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c, depth = -1, total = 0;
    float min_p = 0;
    const char *json = NULL;
    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_DEPTH: depth = (int)cli_int(prog, "--depth", optarg, 0, 250); break;
        case O_TOTAL: total = !strcmp(optarg, "all") ? -1 : (int)cli_int(prog, "--total", optarg, 1, 1000000); break;
        case O_MINP: min_p = (float)cli_num(prog, "--min-p", optarg, 0, 1); break;
        case O_JSON: json = optarg; break;
        case 'h': usage(stdout); return 0;
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (optind != argc - 1) usage_error("replay: one trace file expected%s", "");
    if (depth < 0 || !total || !json) usage_error("replay: --depth, --total and --json are required%s", "");
    const char *trace = argv[optind];
    const CliFile in = {"trace", trace};
    cli_check_not_input(prog, "--json", json, &in, 1);
    cli_check_writable(prog, "--json", json);
    Replay rp;
    if (replay_eagle2(trace, depth, total, min_p, &rp)) die_err(prog);
    cJSON *j = replay_json(&rp, trace);
    if (write_json(json, j)) die_err(prog);
    const cJSON *all = cJSON_GetObjectItem(j, "total");
    char tot[32] = "all";
    if (total > 0) snprintf(tot, sizeof tot, "%d", total);
    if (min_p > 0) snprintf(tot + strlen(tot), sizeof tot - strlen(tot), " min_p %g", min_p);
    printf("eagle2 topk %d depth %d total %s: tau %.4f  gamma %.0f  cycles %.0f  (%lld questions, %lld turns)\n", rp.topk,
           depth, tot, cJSON_GetObjectItem(all, "tau")->valuedouble,
           cJSON_GetObjectItem(all, "gamma")->valuedouble, cJSON_GetObjectItem(all, "cycles")->valuedouble,
           (long long)rp.n_questions, (long long)rp.n_turns);
    cJSON_Delete(j);
    replay_free(&rp);
    return 0;
}

/* --out DIR, before anything is read: a folder that can be made or written
 * into, and none of the files the analysis writes there is an input (a
 * trace or the classifier). */
static void check_out_dir(const char *dir, const char *const *files, int n_files, const char *cls_path) {
    cli_check_folder(prog, "--out", dir);
    CliFile *in = xcalloc((size_t)n_files + 1, sizeof *in);
    for (int i = 0; i < n_files; i++) in[i] = (CliFile){"trace", files[i]};
    in[n_files] = (CliFile){"--classifier", cls_path};
    for (int k = 0; analysis_files[k]; k++) {
        char *p = path_join(dir, analysis_files[k]);
        cli_check_not_input(prog, "--out", p, in, n_files + 1);
        free(p);
    }
    free(in);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "replay")) return cmd_replay(argc, argv);
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
    if (out) check_out_dir(out, files, n_files, cls_path);
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
