/* spec-train: trains the C2T classifier on trace files from spec-collect and
 * writes its weights (JSON for the decoding loop, safetensors for PyTorch). */
#include "infer/cli.h"
#include "kernels/base/util.h"
#include <limits.h>
#include "train/trainer.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "spec-train";

static void usage(FILE *f) {
    fprintf(f,
        "usage: spec-train TRACE.h5 [TRACE.h5 ...] --out WEIGHTS.json [options]\n"
        "       (--traces FILE, repeatable, names trace files too)\n"
        "Trains the C2T classifier (features) -> Linear(n,h) -> ReLU -> Linear(h,1) -> sigmoid on trace files.\n"
        "\n"
        "Data\n"
        "  --traces FILE          trace file from spec-collect (HDF5); repeat for several\n"
        "  --eval-frac F          share of trees held out for evaluation, split by tree (default 0.05)\n"
        "  --neg-ratio R          negatives drawn per positive, afresh each epoch; every positive is\n"
        "                         kept (default 2.5; more than the training part has = all of them)\n"
        "  --features LIST        the classifier's inputs, in order (default P,H,depth, the paper's);\n"
        "                         any of P (joint probability), H (entropy of the distribution the\n"
        "                         node was drawn from), depth, p (the node's own probability), rank\n"
        "                         (among its siblings, 0 = most probable), parent_H (the parent's H;\n"
        "                         a depth-1 node's own H), e.g. P,H,depth,p,rank,parent_H\n"
        "  --transform LIST       input transforms of chosen features, e.g. P=log,H=raw,depth=raw\n"
        "                         (default P=log, the rest raw); log is ln(x + eps)\n"
        "  --log-eps E            eps of the log transform (default 1e-6)\n"
        "  --standardize          standardise inputs with the training part's mean and std, stored\n"
        "                         with the weights (the default)\n"
        "  --no-standardize       raw (transformed) inputs\n"
        "  --paper-recipe         the C2T paper's App. C: raw inputs, not standardised, 10 epochs,\n"
        "                         1 negative per positive (options after it still apply)\n"
        "  --strict               a non-finite feature is an error (default: its tree is dropped,\n"
        "                         counted and reported)\n"
        "\n"
        "Training\n"
        "  --hidden N             hidden units (default 48 = 241 parameters; paper tried 2..48)\n"
        "  --epochs N             epochs (default 200)\n"
        "  --batch-size N         mini-batch size (default 1024; --batch is the old spelling)\n"
        "  --lr X                 Adam learning rate (default 1e-3)\n"
        "  --adam-betas B1,B2     Adam betas (default 0.9,0.999)\n"
        "  --adam-eps X           Adam eps (default 1e-8)\n"
        "  --seed S               seed of split, init, negative draws and batch order (default 0)\n"
        "  --threads N            OpenMP threads (default: all cores)\n"
        "  --sample-mem MB        memory for drawn negatives per pass over the data (default 512)\n"
        "\n"
        "Evaluation and model selection (held-out trees, one tree per batch)\n"
        "  --beta B               confidence threshold beta (default 0.5)\n"
        "  --sweep LIST           thresholds of the beta sweep (default 0.05,0.10,...,0.95)\n"
        "  --topn N               EAGLE-2 baseline: top N nodes per tree by P (default 60; as in\n"
        "                         spec-analyze; --e2-topn is the old spelling)\n"
        "  --select RULE          which epoch is exported (default beta):\n"
        "                         beta: the paper's rule, the highest held-out recall at beta and among\n"
        "                           epochs within --similar-recall of it the smallest positive rate theta;\n"
        "                         ranking: the most accepted held-out nodes kept by C2T's tree selection\n"
        "                           cut to EAGLE-2's theta (not fooled by an over-inclusive epoch);\n"
        "                         last: the last epoch\n"
        "  --similar-recall X     recall margin of --select beta (default 0.005 = 0.5 recall points)\n"
        "\n"
        "Output\n"
        "  --out FILE             weights JSON (read by the decoding loop; schema in docs/train.md)\n"
        "  --safetensors FILE     also write fc1.weight [h,n], fc1.bias [h], fc2.weight [1,h], fc2.bias [1]\n"
        "  --report FILE          JSON report: per-epoch metrics, selected metrics, beta sweep,\n"
        "                         entropy-bucket table (paper App. D), timing\n"
        "  --dump-init DIR        for the PyTorch oracle: init weights, every batch of the first\n"
        "                         --dump-epochs epochs, the held-out set, C weights per epoch\n"
        "  --dump-epochs N        epochs to dump with --dump-init (default 1)\n"
        "  --quiet                no progress lines\n"
        "  --verbose              a line per epoch (loss, held-out metrics, time) instead of one progress line\n"
        "  -h, --help             this text\n");
}

static double num(const char *flag, const char *s) { return cli_num(prog, flag, s, -HUGE_VAL, HUGE_VAL); }
static long integer(const char *flag, const char *s) { return cli_int(prog, flag, s, LONG_MIN, LONG_MAX); }

static int parse_list(const char *flag, const char *s, double *out, int max) {
    int n = 0;
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) die(prog, "%s: at most %d values", flag, max);
        out[n++] = num(flag, t);
    }
    free(dup);
    if (!n) die(prog, "%s: empty list", flag);
    return n;
}

static void parse_transform(const char *s, TrainOpts *o) {
    char *dup = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq) die(prog, "--transform: expected FEATURE=TRANSFORM, got '%s'", t);
        *eq = 0;
        int k = strcmp(t, "d") ? cls_feature_parse(t) : CLS_F_DEPTH;
        if (k < 0) die(prog, "--transform: unknown feature '%s' (P, H, depth, p, rank, parent_H)", t);
        int kind = cls_transform_parse(eq + 1);
        if (kind < 0) die(prog, "--transform: unknown transform '%s' for %s (raw, log)", eq + 1, t);
        o->transform[k] = (ClsTransform)kind;
        o->transform_named |= 1u << k;   /* checked against --features once all options are read */
    }
    free(dup);
}

/* Before any trace is read: every output file can be written, none is a
 * trace (a slip such as --out TRACE.h5 would replace the trace with the
 * weights), and no two are one file. */
static void check_outputs(const TrainOpts *o) {
    const CliFile out[] = {{"--out", o->out}, {"--safetensors", o->safetensors}, {"--report", o->report}};
    const int n_out = (int)(sizeof out / sizeof *out);
    CliFile *in = xcalloc((size_t)o->n_traces, sizeof *in);
    for (int i = 0; i < o->n_traces; i++) in[i] = (CliFile){"trace", o->traces[i]};
    for (int k = 0; k < n_out; k++) {
        if (!out[k].path) continue;
        cli_check_not_input(prog, out[k].opt, out[k].path, in, o->n_traces);
        cli_check_writable(prog, out[k].opt, out[k].path);
    }
    cli_check_distinct_outputs(prog, out, n_out);
    free(in);
}

int main(int argc, char **argv) {
    enum { O_TRACES = 256, O_OUT, O_ST, O_REPORT, O_HIDDEN, O_EPOCHS, O_BATCH, O_LR, O_BETAS, O_AEPS, O_NEG,
           O_SEED, O_BETA, O_EVALF, O_E2, O_SIM, O_LAST, O_SWEEP, O_TRANSFORM, O_LOGEPS, O_STD, O_STRICT,
           O_THREADS, O_SMEM, O_DUMP, O_DUMPE, O_QUIET, O_VERBOSE, O_NO_STD, O_PAPER, O_E2_OLD, O_BATCH_OLD,
           O_FEATURES, O_SELECT };
    static const struct option opts[] = {
        {"traces", required_argument, 0, O_TRACES}, {"out", required_argument, 0, O_OUT},
        {"safetensors", required_argument, 0, O_ST}, {"report", required_argument, 0, O_REPORT},
        {"hidden", required_argument, 0, O_HIDDEN}, {"epochs", required_argument, 0, O_EPOCHS},
        {"batch-size", required_argument, 0, O_BATCH}, {"batch", required_argument, 0, O_BATCH_OLD}, {"lr", required_argument, 0, O_LR},
        {"adam-betas", required_argument, 0, O_BETAS}, {"adam-eps", required_argument, 0, O_AEPS},
        {"neg-ratio", required_argument, 0, O_NEG}, {"seed", required_argument, 0, O_SEED},
        {"beta", required_argument, 0, O_BETA}, {"eval-frac", required_argument, 0, O_EVALF},
        {"topn", required_argument, 0, O_E2}, {"e2-topn", required_argument, 0, O_E2_OLD}, {"similar-recall", required_argument, 0, O_SIM},
        {"select", required_argument, 0, O_SELECT}, {"select-last", no_argument, 0, O_LAST}, {"sweep", required_argument, 0, O_SWEEP},
        {"features", required_argument, 0, O_FEATURES}, {"transform", required_argument, 0, O_TRANSFORM}, {"log-eps", required_argument, 0, O_LOGEPS},
        {"standardize", no_argument, 0, O_STD}, {"no-standardize", no_argument, 0, O_NO_STD},
        {"paper-recipe", no_argument, 0, O_PAPER}, {"strict", no_argument, 0, O_STRICT},
        {"threads", required_argument, 0, O_THREADS}, {"sample-mem", required_argument, 0, O_SMEM},
        {"dump-init", required_argument, 0, O_DUMP}, {"dump-epochs", required_argument, 0, O_DUMPE},
        {"quiet", no_argument, 0, O_QUIET}, {"verbose", no_argument, 0, O_VERBOSE}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    TrainOpts o;
    train_defaults(&o);
    const char **traces = xcalloc(argc + 1, sizeof(char *));
    o.traces = traces;
    int c;
    double betas[2];
    opterr = 0;   /* one error line, ours */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_TRACES: traces[o.n_traces++] = optarg; break;
        case O_OUT: o.out = optarg; break;
        case O_ST: o.safetensors = optarg; break;
        case O_REPORT: o.report = optarg; break;
        case O_HIDDEN: o.hidden = (int)integer("--hidden", optarg); break;
        case O_EPOCHS: o.epochs = (int)integer("--epochs", optarg); break;
        case O_BATCH_OLD: fprintf(stderr, "%s: --batch is now spelled --batch-size (the mini-batch; --batch of spec-eval and spec-collect counts sequences)\n", prog); /* fall through */
        case O_BATCH: o.batch = (int)integer("--batch-size", optarg); break;
        case O_LR: o.lr = num("--lr", optarg); break;
        case O_BETAS:
            if (parse_list("--adam-betas", optarg, betas, 2) != 2) die(prog, "--adam-betas: give B1,B2");
            o.beta1 = betas[0]; o.beta2 = betas[1];
            break;
        case O_AEPS: o.adam_eps = num("--adam-eps", optarg); break;
        case O_NEG: o.neg_ratio = num("--neg-ratio", optarg); break;
        case O_SEED: o.seed = cli_u64(prog, "--seed", optarg); break;
        case O_BETA: o.beta = num("--beta", optarg); break;
        case O_EVALF: o.eval_frac = num("--eval-frac", optarg); break;
        case O_E2_OLD: fprintf(stderr, "%s: --e2-topn is now spelled --topn (as in spec-analyze)\n", prog); /* fall through */
        case O_E2: o.e2_topn = (int)integer("--topn", optarg); break;
        case O_SIM: o.similar_recall = num("--similar-recall", optarg); break;
        case O_LAST:
            fprintf(stderr, "%s: --select-last is now spelled --select last\n", prog);
            o.select = SELECT_LAST;
            break;
        case O_SELECT: {
            int rule = select_rule_parse(optarg);
            if (rule < 0) die(prog, "--select: unknown rule '%s' (beta, ranking, last)", optarg);
            o.select = (SelectRule)rule;
            break;
        }
        case O_SWEEP: o.n_sweep = parse_list("--sweep", optarg, o.sweep, TRAIN_MAX_SWEEP); break;
        case O_FEATURES:
            o.n_feat = cls_features_parse(optarg, o.features);
            if (o.n_feat < 0) die(prog, "--features: %s", err_get());
            break;
        case O_TRANSFORM: parse_transform(optarg, &o); break;
        case O_LOGEPS: o.log_eps = (float)num("--log-eps", optarg); break;
        case O_STD: o.standardize = 1; break;
        case O_NO_STD: o.standardize = 0; break;
        case O_PAPER: train_paper_recipe(&o); break;
        case O_STRICT: o.strict = 1; break;
        case O_THREADS: o.threads = (int)integer("--threads", optarg); break;
        case O_SMEM: {
            long mb = integer("--sample-mem", optarg);
            if (mb < 1) die(prog, "--sample-mem must be at least 1 (MB)");
            o.sample_mem = (size_t)mb << 20;
            break;
        }
        case O_DUMP: o.dump_dir = optarg; break;
        case O_DUMPE: o.dump_epochs = (int)integer("--dump-epochs", optarg); break;
        case O_QUIET: o.progress = 0; break;
        case O_VERBOSE: o.verbose = 1; break;
        case 'h': usage(stdout); free(traces); return 0;
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    while (optind < argc) traces[o.n_traces++] = argv[optind++];   /* trace files, as spec-analyze takes them */
    if (!o.n_traces) die(prog, "no trace file given (see --help)");
    if (!o.out) die(prog, "--out is required (see --help)");
    if (o.threads < 0) die(prog, "--threads must be >= 0");
    check_outputs(&o);
    if (train_run(&o)) die_err(prog);
    free(traces);
    return 0;
}
