/* The CUDA backend against the GPU's own ceilings (docs/cuda.md, "Measured"):
 *  - device copy bandwidth and the cuBLAS BF16 GEMM rate, measured here;
 *  - single-token greedy decode of the random 1B-shape BF16 model
 *    (tests/bench_model.h) in tokens/s, against the bandwidth bound
 *    (weight bytes per token / copy bandwidth);
 *  - one forward of a random token tree of n = 16, 64, 256, 1011 nodes
 *    (LOGITS_ALL, as verification runs it) in model TFLOP/s against the
 *    GEMM rate;
 *  - the same at SmolLM2-135M's shape (decode; trees of 10 nodes, an EAGLE
 *    expansion, and 60, a verified EAGLE-2 tree), the real model whose
 *    checkpoint does not travel to the GPU machine in one call.
 * Without a GPU (or a CUDA build) it says so and measures nothing.
 *  - with --7b, decode at LLaMA-2-7B's shape (its 13 GB of random weights
 *    written to /tmp and loaded: about a minute more).
 *  - with --block-types, only the products of weights kept in GGUF block
 *    types (Q8_0, Q4_K, Q6_K) against BF16 at Qwen2.5-1.5B's shapes, for 1
 *    and 16 tokens (bench_products).
 * Usage: build/tests/bench_cuda [layers] [--7b | --block-types] [backend options] (layers of
 * the 1B shape; default 16, fewer for a quick look).  The backend options are the
 * commands' (--cuda-fast-gemm on measures the rounded-activation GEMM path,
 * --cuda-tiled-max 0 the split GEMM where the tiled kernel would run,
 * --cuda-graphs on recorded forwards). */
#include "infer/cli.h"
#include "infer/model/llama.h"
#include "kernels/base/util.h"
#include "tests/bench_model.h"
#include <stdio.h>
#include <stdlib.h>
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_measure.h"
#endif

#ifdef C2T_CUDA
static double seconds_synced(void) {
    if (cuda_sync()) die_err("bench_cuda");
    return now_seconds();
}

/* Multiply-adds x2 of one forward of n tokens over nctx cache slots: every
 * projection, the lm_head for every row, and attention's QK and PV over all
 * slots (what the kernel computes; the mask only zeroes weights). */
static double forward_flops(const ModelConfig *c, int n, int nctx) {
    double per_layer = (double)c->hidden * c->heads * c->head_dim * 2 +
                       (double)c->hidden * c->kv_heads * c->head_dim * 2 + 3.0 * c->hidden * c->intermediate;
    double attn = 2.0 * 2.0 * (double)nctx * c->heads * c->head_dim;
    return 2.0 * n * (c->layers * per_layer + (double)c->vocab * c->hidden) + (double)n * c->layers * attn;
}

/* A random tree of n nodes below the committed context: node i's parent is
 * a random earlier node or the root (-1); it sees the context, its ancestors
 * and itself (the mask over the tree's window, n x n), at position
 * n_past + depth. */
static void random_tree(int n, int n_past, uint8_t *mask, int *pos, unsigned *rng) {
    int *depth = malloc(n * sizeof *depth);
    for (int i = 0; i < n; i++) {
        *rng = *rng * 1664525u + 1013904223u;
        int parent = i == 0 ? -1 : (int)((*rng >> 8) % (unsigned)(i + 1)) - 1;
        uint8_t *row = mask + (size_t)i * n;
        memset(row, 0, n);
        if (parent >= 0) memcpy(row, mask + (size_t)parent * n, n);
        row[i] = 1;
        depth[i] = parent < 0 ? 0 : depth[parent] + 1;
        pos[i] = n_past + depth[i];
    }
    free(depth);
}

/* One decode op of layer 0, issued as the forward issues it. */
enum { OP_MATMUL, OP_ATTENTION, OP_ROPE, OP_RMSNORM };
typedef struct {
    const char *name;
    int kind;
    const Weight *w;    /* OP_MATMUL: out = in . w^T, one token */
    float *out, *in;
    LlamaState *st;
    const LlamaModel *m;
    const LlamaLayer *L0;
    int *dctl;          /* the context before the query, and its position (device) */
    int p;
} OpCall;

static void op_call(void *v) {
    const OpCall *o = v;
    const ModelConfig *c = &o->m->cfg;
    LayerScratch *ls = &o->st->solo->ls;
    switch (o->kind) {
    case OP_MATMUL: cuda_backend.matmul(o->out, o->in, o->w, 1); break;
    case OP_ATTENTION:
        cuda_backend.attention(ls->att, ls->q, &(AttnSeq){o->st->kv, 0, 1, o->dctl, o->p, NULL, 0, 0, NULL}, 1, 0, c->heads,
                               c->kv_heads, c->head_dim);
        break;
    case OP_ROPE: cuda_backend.rope(ls->q, o->dctl + 1, 1, c->heads, c->head_dim, o->m->inv_freq); break;
    default: cuda_backend.rmsnorm(ls->xb, o->st->solo->x, &o->L0->attn_norm, 1, c->rms_eps); break;
    }
}

/* Decode tok/s against the bandwidth bound, where one forward's time goes
 * (ops alone when ops is set; host enqueue vs GPU time always), and forwards
 * of random trees of the given sizes, for one random model. */
static void bench_shape(const BenchShape *sh, int layers, const int *tree_n, int ntrees, int ops, double bw,
                        double peak) {
    char dir[64];
    bench_write_model(dir, sh, layers);
    LlamaModel *m = llama_load(dir, &cuda_backend);
    if (!m) die_err("bench_cuda");
    bench_remove_model(dir);
    const int V = m->cfg.vocab, decode_tokens = 128;
    LlamaState *st = llama_state_new(m, 2048);
    if (!st) die_err("bench_cuda");

    int prompt[8] = {128000, 791, 4062, 14198, 39935, 35308, 927, 279}, pos[8];
    for (int i = 0; i < 8; i++) { prompt[i] %= V; pos[i] = i; }
    if (llama_forward(st, prompt, pos, 8, NULL, LOGITS_LAST)) die_err("bench_cuda");
    llama_commit(st, NULL, 8);
    int tok = 1000;
    printf("\n%s shape, %d layers (random BF16 weights, %.0f MB)\n", sh->name, layers, llama_weight_bytes(m) / 1e6);
    for (int i = 0; i < 4 + decode_tokens; i++) {   /* 4 warm-up tokens, then the timed ones */
        static double t0;
        if (i == 4) t0 = seconds_synced();
        int p = st->n_past;
        if (llama_forward(st, &tok, &p, 1, NULL, LOGITS_LAST)) die_err("bench_cuda");
        llama_commit(st, NULL, 1);
        cuda_backend.argmax(st->logits, 1, V, &tok);   /* the host needs the id: one round trip per token */
        if (i == 3 + decode_tokens) {
            double tps = decode_tokens / (seconds_synced() - t0);
            double bytes = (double)llama_weight_bytes(m), bound = bw / bytes;
            printf("%-34s %10s %12s %8s\n", "workload", "measured", "bound", "of bound");
            printf("%-34s %8.1f/s %10.1f/s %7.0f%%\n", "decode 1 token (tokens/s)", tps, bound, 100 * tps / bound);
        }
    }

    /* Where a decode step's time goes: each op of layer 0 alone, repeated
     * in a stream (the host launches them as fast as it can: where a
     * launch costs the host more than the kernel costs the GPU, this is
     * the host's rate) and as nodes of a replayed graph (the GPU's time
     * alone, as in a recorded forward); the floor of a node (an empty
     * kernel); and the host time to enqueue one whole forward without
     * waiting for it. */
    const int p = st->n_past;
    if (ops) {
        const LlamaLayer *L0 = &m->layer[0];
        LayerScratch *ls = &st->solo->ls;
        const int reps = 200;
        /* the ops' control values in device memory (kernels.h): the context
         * before the query, and its position */
        const int ctl[2] = {p - 1, p};
        int *dctl = backend_alloc_ints(&cuda_backend, 2);
        backend_ints_to_device(&cuda_backend, dctl, ctl, 2);
        OpCall calls[] = {
            {.name = "matmul q_proj", .kind = OP_MATMUL, .w = &L0->wq, .out = ls->gate, .in = ls->xb},
            {.name = "matmul k_proj", .kind = OP_MATMUL, .w = &L0->wk, .out = ls->gate, .in = ls->xb},
            {.name = "matmul o_proj", .kind = OP_MATMUL, .w = &L0->wo, .out = ls->gate, .in = ls->xb},
            {.name = "matmul gate_proj", .kind = OP_MATMUL, .w = &L0->gate, .out = ls->gate, .in = ls->xb},
            {.name = "matmul down_proj", .kind = OP_MATMUL, .w = &L0->down, .out = ls->xb, .in = ls->gate},
            {.name = "matmul lm_head", .kind = OP_MATMUL, .w = &m->lm_head, .out = st->logits, .in = ls->xb},
            {.name = "attention", .kind = OP_ATTENTION}, {.name = "rope q", .kind = OP_ROPE},
            {.name = "rmsnorm", .kind = OP_RMSNORM}};
        printf("decode ops of layer 0, microseconds a call: %d in a stream | as nodes of a replayed graph "
               "(GB/s of weights read)\n", reps);
        for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
            OpCall *oc = &calls[i];
            oc->st = st; oc->m = m; oc->L0 = L0; oc->dctl = dctl; oc->p = p;
            op_call(oc);
            const double t0 = seconds_synced();
            for (int r = 0; r < reps; r++) op_call(oc);
            const double us = (seconds_synced() - t0) / reps * 1e6;
            double nodes = 0;
            const double gus = cuda_graph_call_us(op_call, oc, reps, &nodes);
            char what[48];
            if (oc->w) snprintf(what, sizeof what, "%s %lldx%lld", oc->name, (long long)oc->w->rows, (long long)oc->w->cols);
            else if (oc->kind == OP_ATTENTION) snprintf(what, sizeof what, "attention over %d slots", p);
            else snprintf(what, sizeof what, "%s", oc->name);
            printf("  %-32s %8.1f | %8.1f us (%.0f nodes)", what, us, gus, nodes);
            if (oc->w && gus > 0)
                printf(" %7.0f GB/s", (double)oc->w->rows * oc->w->cols * dtype_size(oc->w->dtype) / gus * 1e-3);
            printf("\n");
        }
        double stream_us = 0;
        const double node_us = cuda_empty_node_us(reps, &stream_us);
        printf("  %-32s %8.1f | %8.1f us\n", "empty kernel (a node's floor)", stream_us, node_us);
        cuda_backend.release(dctl);
    }
    double t0 = seconds_synced();
    for (int r = 0; r < 20; r++) {
        if (llama_forward(st, &tok, &p, 1, NULL, LOGITS_LAST)) die_err("bench_cuda");
        llama_truncate(st, p);
    }
    double host = (now_seconds() - t0) / 20, all = (seconds_synced() - t0) / 20;
    printf("  one forward: host enqueues it in %.0f us, the GPU finishes in %.0f us\n", host * 1e6, all * 1e6);

    unsigned rng = 12345;
    for (int t = 0; t < ntrees; t++) {
        int n = tree_n[t], n_past = st->n_past, nctx = n_past + n;
        uint8_t *mask = malloc((size_t)n * n);
        int *tp = malloc(n * sizeof *tp), *toks = malloc(n * sizeof *toks);
        random_tree(n, n_past, mask, tp, &rng);
        for (int i = 0; i < n; i++) toks[i] = (int)((i * 7919u + 17u) % (unsigned)V);
        double best = 1e30;
        for (int r = 0; r < 6; r++) {   /* the first is a warm-up (workspace growth) */
            double t1 = seconds_synced();
            if (llama_forward(st, toks, tp, n, mask, LOGITS_ALL)) die_err("bench_cuda");
            double dt = seconds_synced() - t1;
            if (r > 0 && dt < best) best = dt;
        }
        llama_truncate(st, n_past);
        double tf = forward_flops(&m->cfg, n, nctx) / best;
        char what[64];
        snprintf(what, sizeof what, "tree forward n=%d (TFLOP/s, %.2f ms)", n, best * 1e3);
        printf("%-34s %10.1f %12.0f %7.0f%%\n", what, tf / 1e12, peak / 1e12, 100 * tf / peak);
        free(mask); free(tp); free(toks);
    }
    llama_state_free(st);
    llama_free(m);
}

/* Products at Qwen2.5-1.5B's shapes (its q/o projections, gate/up, down,
 * LM head) for weights of each type, 1 and 16 tokens: microseconds a
 * product and the weight bytes read a second, which for one token is what
 * bounds decode (against the copy bandwidth bw).  Each product reads the
 * next of as many copies of the weight as make COPY_BYTES, so that none
 * is still in a cache (a GPU's L2 holds 50-60 MB); every copy is
 * multiplied once before the clock starts (first-call setup).  Any
 * backend: be, and synced() its clock read after its queue drains; on the
 * CUDA backend one token's products also as nodes of a replayed graph
 * (the GPU's time without the host's launches, which bound the small
 * shapes in a stream). */
typedef struct {
    const Backend *be;
    float *out, *x;
    const Weight *w;
    int copies, next, n;
} ProductCall;

static void product_call(void *v) {
    ProductCall *p = v;
    p->be->matmul(p->out, p->x, &p->w[p->next++ % p->copies], p->n);
}

static void bench_products(const Backend *be, double (*synced)(void), double bw) {
    static const DType types[] = {DT_BF16, DT_Q8_0, DT_Q4_K, DT_Q6_K};
    static const struct { const char *name; int64_t rows, cols; } shapes[] = {
        {"q/o_proj", 1536, 1536}, {"gate/up_proj", 8960, 1536}, {"down_proj", 1536, 8960}, {"lm_head", 151936, 1536}};
    enum { NMAX = 16, REPS = 64 };
    const double COPY_BYTES = 256e6;
    const int ns[2] = {1, NMAX};
    const int64_t cols_max = 8960, rows_max = 151936;
    float *x = xmalloc(sizeof(float) * NMAX * cols_max);
    for (int64_t i = 0; i < NMAX * cols_max; i++) x[i] = bench_rand_act();
    float *xd = be->alloc((size_t)NMAX * cols_max), *od = be->alloc((size_t)NMAX * rows_max);
    if (!xd || !od) die_err("bench_products");
    be->to_device(xd, x, (size_t)NMAX * cols_max);
    printf("\nproducts at Qwen2.5-1.5B's shapes, microseconds a product (GB/s of weights; 1 token: %% of %.0f GB/s)\n",
           bw / 1e9);
    const int graphs = be == &cuda_backend;
    printf("%-26s %-6s %6s %16s %16s%s\n", "shape", "type", "copies", "1 token", "16 tokens",
           graphs ? "   1 token, graph" : "");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            const int64_t rows = shapes[s].rows, cols = shapes[s].cols;
            const size_t bytes = bench_weight_bytes(types[t], rows, cols);
            int copies = (int)(COPY_BYTES / (double)bytes) + 1;
            if (copies > REPS) copies = REPS;
            size_t all;
            uint8_t *wq = bench_blocks(types[t], rows * copies, cols, &all);
            Weight w[REPS];
            for (int c = 0; c < copies; c++) {
                if (be->weight(&w[c], wq + (size_t)c * bytes, types[t], rows, cols)) die_err("bench_products");
                be->matmul(od, xd, &w[c], NMAX);
            }
            char what[40];
            snprintf(what, sizeof what, "%s %lldx%lld", shapes[s].name, (long long)rows, (long long)cols);
            printf("%-26s %-6s %6d", what, dtype_name(types[t]), copies);
            ProductCall pc = {be, od, xd, w, copies, 0, 1};
            for (int k = 0; k < 2; k++) {
                pc.n = ns[k];
                const double t0 = synced();
                for (int r = 0; r < REPS; r++) product_call(&pc);
                const double us = (synced() - t0) / REPS * 1e6, gbs = (double)bytes / us * 1e-3;
                if (k == 0) printf(" %7.1f (%4.0f %3.0f%%)", us, gbs, 100 * gbs * 1e9 / bw);
                else printf(" %7.1f (%5.0f)", us, gbs);
            }
            if (graphs) {
                pc.n = 1;
                const double us = cuda_graph_call_us(product_call, &pc, REPS, NULL), gbs = (double)bytes / us * 1e-3;
                printf(" %7.1f (%4.0f %3.0f%%)", us, gbs, 100 * gbs * 1e9 / bw);
            }
            printf("\n");
            for (int c = 0; c < copies; c++) be->weight_release(&w[c]);
            free(wq);
        }
    be->release(xd);
    be->release(od);
    free(x);
}
#endif

int main(int argc, char **argv) {
#ifndef C2T_CUDA
    (void)argc; (void)argv;
    printf("bench_cuda: this build has no CUDA backend (nvcc was not on PATH); nothing measured\n");
    return 0;
#else
    if (!cuda_available()) {
        printf("bench_cuda: no CUDA device is visible; nothing measured\n");
        return 0;
    }
    int layers = argc > 1 && argv[1][0] != '-' ? atoi(argv[1]) : BENCH_1B.layers;
    BackendOptions bo;
    backend_options_default(&bo);
    enum { O_7B = CLI_OWN, O_BLOCK_TYPES };
    static const struct option opts[] = {CLI_BACKEND_OPTIONS, {"7b", 0, 0, O_7B}, {"block-types", 0, 0, O_BLOCK_TYPES},
                                         {0, 0, 0, 0}};
    int c, shape_7b = 0, block_types = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
        if (c == O_7B) shape_7b = 1;
        else if (c == O_BLOCK_TYPES) block_types = 1;
        else if (!cli_backend_option("bench_cuda", c, optarg, &bo)) cli_unknown_option("bench_cuda", argv[optind - 1]);
    if (backend_configure(&bo)) die_err("bench_cuda");
    char dev[256];
    if (cuda_device_name(dev, sizeof dev)) die_err("bench_cuda");
    const int fast_gemm = bo.cuda_fast_gemm;
    double bw = cuda_copy_bandwidth((size_t)1 << 30);
    double peak = cuda_gemm_bf16_flops(8192, 8192, 8192);
    if (bw <= 0 || peak <= 0) die_err("bench_cuda");
    printf("device: %s\n", dev);
    printf("copy bandwidth %.0f GB/s (read+write); cuBLAS BF16 GEMM 8192^3 (F32 compute) %.0f TFLOP/s\n",
           bw / 1e9, peak / 1e12);
    printf("gemm path: %s; tiled path up to %lld multiply-adds; graphs %s\n",
           fast_gemm ? "fast (activations rounded to BF16)" : "exact (activations as BF16 hi + lo, 2x tensor work)",
           bo.cuda_tiled_max, bo.cuda_graphs ? "on" : "off");

    const int trees_1b[4] = {16, 64, 256, 1011}, trees_small[3] = {10, 60, 256};
    if (block_types) bench_products(&cuda_backend, seconds_synced, bw);
    else {
        bench_shape(&BENCH_1B, layers, trees_1b, 4, 1, bw, peak);
        bench_shape(&BENCH_SMOLLM2, BENCH_SMOLLM2.layers, trees_small, 3, 0, bw, peak);
        if (shape_7b) bench_shape(&BENCH_7B, BENCH_7B.layers, NULL, 0, 0, bw, peak);
    }
    long launched, made, direct;
    cuda_graph_counts(&launched, &made, &direct);
    printf("forward passes: %ld as graphs (%ld recorded, %ld replayed without recording), %ld op by op\n",
           launched, made, launched - made, direct);
    int errors = cuda_errors();
    if (errors) {
        fprintf(stderr, "bench_cuda: %d CUDA errors, last: %s\n", errors, cuda_last_error());
        return 1;
    }
    return 0;
#endif
}
