/* spec-collect: EAGLE-2 with the full draft tree (no rerank) on benchmark
 * questions; every node of every tree goes to an HDF5 trace file with its
 * joint probability, entropy, depth and whether greedy verification
 * accepted it.  Generation itself is plain lossless decoding.
 *
 *   spec-collect --target DIR --draft DIR --questions FILE ... --out F.h5
 *   spec-collect merge OUT.h5 IN.h5 ... */
#include "collect/trace.h"
#include "infer/cli.h"
#include "infer/model/safetensors.h"
#include "kernels/base/util.h"
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *prog = "spec-collect";

static void usage(FILE *f) {
    fprintf(f,
"usage: spec-collect --target DIR --draft DIR --questions FILE [...] --out FILE.h5 [options]\n"
"       spec-collect merge OUT.h5 IN.h5 [IN.h5 ...] [--compress zstd|gzip|none]\n"
"Runs EAGLE-2 with total=all (the whole 1 + k + depth*k^2 pool is verified) and\n"
"writes every tree node with (P, H, depth, accepted) to an HDF5 trace file.\n"
"  --target DIR           target checkpoint\n"
"  --draft DIR            draft: an EAGLE-1/2 head, an EAGLE-3 head or a small LM\n"
"                         (config.json + model.safetensors or pytorch_model.bin)\n"
"  --draft-kind K         %s (default auto: eagle3 when the draft's config.json\n"
"                         has draft_vocab_size or eagle_aux_hidden_state_layer_ids, else eagle)\n"
"  --draft-vocab N|full   the draft scores only the N most frequent target tokens of its\n"
"                         training data (a reduced vocabulary as EAGLE-3's; needs the draft's\n"
"                         token_counts.safetensors; an EAGLE-3 head brings its own);\n"
"                         lossless, verification is unchanged\n"
"  --tokenizer PATH       default: --target\n"
"  --template NAME        %s (default: guessed; plain text if none is recognised)\n"
"  --system TEXT          system prompt (default: the template's)\n"
"  --device D             cpu | cuda | auto (default auto: cuda when a GPU is visible)\n"
"  --questions FILE       question.jsonl; repeatable (benchmark = its folder or file stem)\n"
"  --max-questions N      first N questions of each file\n"
"  --max-turns N          first N turns of each question (1: first turns only)\n"
"  --out FILE.h5          trace file (must not exist unless --resume)\n"
"  --topk K               children per expanded node (default 10)\n"
"  --depth D              expansion steps; nodes reach depth D+1 (default 10: 1011 nodes/tree)\n"
"  --entropy-topm M       entropy over the top M draft probabilities, 0 = exact (default 1000)\n"
"  --max-new-tokens N     per turn (default 256)\n"
"  --max-ctx N            KV cache slots (default 4096)\n"
"  --compress C           zstd (default) | gzip | none\n"
"  --resume               continue an interrupted file after its last finished question;\n"
"                         refused if it was written with other settings\n"
"  --shard I/N            this process takes questions q with q %% N == I (0 <= I < N),\n"
"                         e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\n"
"  --quiet                no progress line (on a terminal it is redrawn in place; into a\n"
"                         file, a line every 10 s)\n"
"  -h, --help\n", draft_kind_names(), CHAT_TEMPLATE_NAMES);
}

typedef struct {
    TraceWriter *w;
    TraceNode *nodes;
    int cap;
    int turn;
    int64_t trees, records;
    double t_write, t_features;
} CollectCtx;

/* One verified tree -> one /trees row and its nodes (root excluded). */
static int on_cycle(void *vctx, const Tree *t, const int *path, int n_path, int cycle) {
    CollectCtx *c = vctx;
    double t0 = now_seconds();
    int n = t->n - 1;
    if (n > c->cap) { c->cap = n * 2; c->nodes = xrealloc(c->nodes, sizeof(TraceNode) * c->cap); }
    for (int i = 0; i < n; i++) {
        int v = i + 1;
        c->nodes[i] = (TraceNode){.P = t->P[v], .H = t->H[v], .p = t->p[v], .token = t->token[v],
                                  .parent = t->parent[v] - 1, .depth = (uint8_t)t->depth[v], .accepted = 0,
                                  .rank = (uint8_t)t->rank[v]};
    }
    for (int i = 1; i < n_path; i++) c->nodes[path[i] - 1].accepted = 1;
    double t1 = now_seconds();
    TraceTree tr = {.turn = (int16_t)c->turn, .cycle = cycle, .n_nodes = n, .accept_len = n_path - 1};
    int rc = trace_add_tree(c->w, &tr, c->nodes);
    c->t_features += t1 - t0;
    c->t_write += now_seconds() - t1;
    c->trees++;
    c->records += n;
    return rc;
}

static int on_turn(void *vctx, const Question *q, int turn, const int32_t *prompt, size_t np,
                   const int *out, int n, const DecodeStats *st) {
    (void)q; (void)prompt; (void)np; (void)out; (void)n; (void)st;
    ((CollectCtx *)vctx)->turn = turn + 1;   /* the hook of the next turn */
    return 0;
}

static int cmd_merge(int argc, char **argv) {
    TraceCompress comp = TRACE_ZSTD;
    const char *files[1024];
    int n = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--compress") && i + 1 < argc) {
            if (trace_compress_parse(argv[++i], &comp)) die_err(prog);
        } else if (argv[i][0] == '-') {
            die(prog, "merge: unknown option '%s'", argv[i]);
        } else if (n < 1024) {
            files[n++] = argv[i];
        }
    }
    if (n < 2) die(prog, "merge: usage: spec-collect merge OUT.h5 IN.h5 [IN.h5 ...]");
    if (file_exists(files[0])) die(prog, "merge: %s exists; not overwriting it", files[0]);
    if (trace_merge(files[0], files + 1, n - 1, comp)) die_err(prog);
    return 0;
}

/* Identity of a checkpoint's weights (FNV-1a over its weight files): a head
 * retrained in place keeps its path and config.json, and a resume must not
 * append its trees to the old head's. */
static int weights_hash_hex(const char *dir, char out[17]) {
    SafeTensors *st = st_open(dir);
    if (!st) return -1;
    uint64_t h = FNV1A_START;
    for (int i = 0; i < st->nfiles; i++) h = fnv1a(st->files[i].map, st->files[i].size, h);
    st_close(st);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return 0;
}

/* Settings that must agree between a file and a --resume of it. */
typedef struct { const char *key; char value[1024]; } Setting;

/* Every settings attribute a new file gets was written ("device" is the
 * last), whatever its value. */
static int settings_complete(TraceWriter *w, const Setting *set, int ns) {
    for (int i = 0; i <= ns; i++) {
        char *v = trace_get_attr_str(w, i < ns ? set[i].key : "device");
        if (!v) return 0;
        free(v);
    }
    return 1;
}

int main(int argc, char **argv) {
    /* Past a file size limit (ulimit -f) a write fails with EFBIG instead
     * of the signal killing us: the writer stops cleanly (--resume). */
    signal(SIGXFSZ, SIG_IGN);
    if (argc > 1 && !strcmp(argv[1], "merge")) return cmd_merge(argc, argv);
    SessionConfig cfg = {0};
    cfg.max_new = 256;
    cfg.sp.top_p = 1.0f;
    policy_params_default(&cfg.prm);
    snprintf(cfg.prm.name, sizeof cfg.prm.name, "eagle2");
    policy_params_set(&cfg.prm, "depth", "10");   /* the C2T paper's collection setting */
    policy_params_set(&cfg.prm, "total", "all");
    cfg.prm.want_entropy = 1;
    CliQuestions qs = {0};
    const char *out = NULL, *compress = "zstd";
    int resume = 0, shard_i = 0, shard_n = 1;
    enum { O_OUT = CLI_OWN, O_COMP, O_RESUME, O_SHARD };
    static const struct option opts[] = {
        CLI_SESSION_OPTIONS,
        {"out", 1, 0, O_OUT}, {"compress", 1, 0, O_COMP}, {"resume", 0, 0, O_RESUME}, {"shard", 1, 0, O_SHARD},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_session_option(prog, c, optarg, &cfg, &qs)) continue;
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_COMP: compress = optarg; break;
        case O_RESUME: resume = 1; break;
        case O_SHARD:
            if (sscanf(optarg, "%d/%d", &shard_i, &shard_n) != 2 || shard_n < 1 || shard_i < 0 || shard_i >= shard_n)
                die(prog, "--shard %s: expected I/N with 0 <= I < N", optarg);
            break;
        case 'h': usage(stdout); return 0;
        default: cli_unknown_option(prog, argv);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!cfg.target_dir || !cfg.draft_dir) die(prog, "--target and --draft are required (see --help)");
    if (!out) die(prog, "--out FILE.h5 is required");
    if (!qs.n) die(prog, "at least one --questions file is required");
    TraceCompress comp;
    if (trace_compress_parse(compress, &comp)) die_err(prog);
    if (!resume && file_exists(out)) die(prog, "%s exists; use --resume to continue it or choose another --out", out);
    if (resume && !file_exists(out)) die(prog, "--resume: %s does not exist", out);

    /* this shard's questions, in file order */
    QuestionSet *sets[64];
    int total_q = 0, mine = 0;
    for (int i = 0; i < qs.n; i++) {
        sets[i] = cli_questions_load(prog, &qs, i);
        for (int j = 0; j < sets[i]->n; j++, total_q++) mine += total_q % shard_n == shard_i;
    }

    Policy *policy = policy_new(&cfg.prm);
    if (!policy) die_err(prog);
    double topk, depth;
    policy_param_num(policy, "topk", &topk);
    policy_param_num(policy, "depth", &depth);
    /* the trace format stores a node's sibling rank in 8 bits */
    if (topk > 255) die(prog, "--topk: expected an integer in [1, 255] for a trace file, got %g", topk);
    Session s;
    if (session_open(&s, &cfg, prog)) die_err(prog);
    Decoder *dec = session_decoder(&s, policy);
    if (!dec) die_err(prog);

    Setting set[32];
    int ns = 0;
#define SET(k, ...) do { set[ns].key = k; snprintf(set[ns].value, sizeof set[ns].value, __VA_ARGS__); ns++; } while (0)
    SET("tool", "spec-collect");
    SET("target", "%s", cfg.target_dir);
    SET("target_config_hash", "%s", s.target->config_hash);
    SET("draft", "%s", cfg.draft_dir);
    SET("draft_kind", "%s", draft_kind_name(s.draft));
    SET("draft_config_hash", "%s", s.draft->config_hash);
    char draft_weights[17];
    if (weights_hash_hex(cfg.draft_dir, draft_weights)) die_err(prog);
    SET("draft_weights_hash", "%s", draft_weights);
    SET("draft_vocab", "%d", s.draft->Vd);
    SET("tokenizer", "%s", tokenizer_path(s.tok));
    SET("template", "%s", chat_template_name(s.tmpl));
    SET("system", "%s", cfg.system ? cfg.system : "(template default)");
    SET("policy", "eagle2 total=all");
    SET("topk", "%d", (int)topk);
    SET("depth", "%d", (int)depth);
    SET("entropy_topm", "%d", cfg.prm.topm);
    SET("max_new_tokens", "%d", cfg.max_new);
    SET("max_questions", "%d", qs.max_questions);
    SET("max_turns", "%d", qs.max_turns);
    SET("depth_convention", "children of the root have depth 1");
    char qlist[1024] = "";
    for (int i = 0; i < qs.n; i++) snprintf(qlist + strlen(qlist), sizeof qlist - strlen(qlist), "%s%s", i ? ";" : "", qs.files[i]);
    SET("questions", "%s", qlist);
    SET("n_shards", "%d", shard_n);

    TraceWriter *w = NULL;
    if (resume) {
        w = trace_resume(out);
        if (!w) die_err(prog);
        /* A file killed before its first finished question may lack some
         * settings (they are written one by one after it is created): it
         * holds nothing, so it is started again rather than refused. */
        if (trace_n_questions(w) == 0 && !settings_complete(w, set, ns)) {
            fprintf(stderr, "%s: %s holds no finished question and not all its settings: starting it again\n", prog, out);
            trace_close(w);
            if (unlink(out) != 0) die(prog, "cannot remove %s to start it again", out);
            w = NULL;
            resume = 0;
        }
    }
    if (w) {
        for (int i = 0; i < ns; i++) {
            char *have = trace_get_attr_str(w, set[i].key);
            if (!have || strcmp(have, set[i].value))
                die(prog, "--resume: %s was written with %s = '%s', this run has '%s'", out, set[i].key,
                    have ? have : "(absent)", set[i].value);
            free(have);
        }
        char *sh = trace_get_attr_str(w, "shard");
        char want[32];
        snprintf(want, sizeof want, "%d/%d", shard_i, shard_n);
        if (!sh || strcmp(sh, want)) die(prog, "--resume: %s was written as shard %s, this run is %s", out, sh ? sh : "(absent)", want);
        free(sh);
    } else {
        w = trace_create(out, comp);
        if (!w) die_err(prog);
        int bad = 0;
        for (int i = 0; i < ns && !bad; i++) bad = trace_set_attr_str(w, set[i].key, set[i].value);
        char sh[32], stamp[32];
        snprintf(sh, sizeof sh, "%d/%d", shard_i, shard_n);
        time_t now = time(NULL);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        if (bad || trace_set_attr_str(w, "shard", sh) || trace_set_attr_str(w, "start_time", stamp) ||
            trace_set_attr_str(w, "version", C2T_VERSION) || trace_set_attr_str(w, "device", s.target->be->name)) {
            /* a file without its settings cannot be resumed, and it holds
             * nothing yet: removed, so that the same command starts again */
            char why[1024];
            snprintf(why, sizeof why, "%s", err_get());
            trace_close(w);
            unlink(out);
            die(prog, "%s", why);
        }
    }
    int64_t skip = trace_n_questions(w);
    if (skip > mine) die(prog, "--resume: %s holds %lld questions, more than this shard has (%d)", out, (long long)skip, mine);
    if (skip) fprintf(stderr, "%s: resuming after %lld finished questions\n", prog, (long long)skip);

    CollectCtx ctx = {.w = w};
    dec->hook = on_cycle;
    dec->hook_ctx = &ctx;
    Progress bar;
    progress_start(&bar, "spec-collect questions", mine);
    int g = 0, done = 0;
    double t0 = now_seconds();
    for (int i = 0; i < qs.n; i++) {
        char bench[64];
        benchmark_name(qs.files[i], bench, sizeof bench);
        for (int j = 0; j < sets[i]->n; j++, g++) {
            if (g % shard_n != shard_i) continue;
            if (done++ < skip) continue;
            const Question *q = &sets[i]->q[j];
            ctx.turn = 0;
            if (session_question(&s, dec, q, on_turn, &ctx)) die_err(prog);
            double tw = now_seconds();
            if (trace_finish_question(w, bench, q->id)) die_err(prog);
            ctx.t_write += now_seconds() - tw;
            char extra[128];
            double el = now_seconds() - t0;
            snprintf(extra, sizeof extra, "trees %lld  records %lld (%.0f/s)", (long long)ctx.trees,
                     (long long)ctx.records, el > 0 ? ctx.records / el : 0);
            progress_update(&bar, done, extra);
        }
    }
    double el = now_seconds() - t0;
    char extra[160];
    snprintf(extra, sizeof extra, "trees %lld  records %lld  features %.2f%%  writing %.2f%% of the time",
             (long long)ctx.trees, (long long)ctx.records, 100 * ctx.t_features / (el > 0 ? el : 1),
             100 * ctx.t_write / (el > 0 ? el : 1));
    progress_end(&bar, done, extra);
    if (trace_close(w)) die_err(prog);
    free(ctx.nodes);
    decoder_free(dec);
    policy_free(policy);
    for (int i = 0; i < qs.n; i++) questions_free(sets[i]);
    session_close(&s);
    return 0;
}
