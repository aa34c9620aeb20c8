/* The runtime against the machine: single-token decode next to the memory
 * bandwidth bound, and forwards of n tokens next to the GEMM peak.
 *
 *   bench_forward [--tsv FILE] [--threads T|auto] [--kv-dtype f32|bf16] [--cpu-fast-gemm on|off|amx]
 *                 [--quant-tiles on|off] [--fetch group|near|measure]
 *                 [--tg-only] [--batched B,... [--npp N] [--ntg N]] [--tree N,...] [--pp N,...] MODEL_DIR|1b ...
 *
 * Per model (a checkpoint directory, or "1b": the random 1B-shape BF16 model
 * of bench_model.h, written to /tmp and removed after loading):
 *   tg     greedy decode of 128 tokens after an 8-token prompt (what
 *          llama-bench's tg128 times) -> tok/s and % of the bandwidth bound
 *          (weight bytes one token reads / copy bandwidth);
 *   pp n   a forward of n tokens after a 32-token context, logits of the
 *          last one only (the work llama-bench's pp n does) -> tok/s, GFLOP/s
 *          and % of the GEMM peak;
 *   tree n the same n tokens as a random token tree under its mask with
 *          the logits verification reads (what verifying a draft tree costs):
 *          every node's up to lazy_logits_nodes nodes, else those of a path
 *          of TREE_PATH nodes, one LM-head product each (infer/speculative/decode.c).
 * With --batched B1,B2,... (and --npp, --ntg) only batched plain decoding,
 * what llama.cpp's llama-batched-bench times: per B, B prompts of npp
 * tokens prefilled in one forward (S_PP, tok/s), then ntg greedy steps of
 * one token for each of the B sequences in one forward (S_TG, tok/s); with
 * spec-eval's --cpu-fast-gemm on and --kv-dtype bf16 its rows are named
 * batched_{pp,tg}[_fast_gemm|_amx][_kv_bf16]; after a warm-up at the
 * largest B (one step), as llama-batched-bench's.
 * The machine: copy bandwidth (STREAM convention), the read bandwidth of a
 * plain summing stream (decode is also given as % of that bound), and
 * OpenBLAS sgemm on 2048^3 squares with T threads.  Each figure is the best
 * of 5 runs after a warm-up (tg: of 2).  --tsv appends one row per figure for
 * tools/experiments/bench.sh.
 * --threads auto: decode as the commands decode by default, each token one
 * unit of the backend's thread tuner (kernels/cpu/backend.c: probes of one
 * thread against all, the faster kept); the other figures use all threads.
 * --tg-only: one tg128 run and nothing else (tools/experiments/noisy.sh, which
 * sets it beside llama-bench's single run).
 * --tree N1,N2,...: the tree figure alone at those node counts, each as ms
 * per verification forward and as a multiple of the first count's (what
 * verifying N nodes costs against one token's forward when N1 is 1).
 * --quant-tiles off: products of GGUF block types on the dot products
 * alone, where the build and CPU would take AMX-INT8 tiles for several
 * tokens (the same bits; on, the default there: the tiles).
 * --fetch group|near|measure: one token's products of block types fetch
 * the weights one row group or 6 KB ahead of their reads, or measure which
 * is faster first (the default: matmul_quant.c's fetch_arm).
 * --pp N1,N2,...: the pp figure alone at those prompt lengths (llama-bench's
 * pp512 is --pp 512). */
#include "infer/model/llama.h"
#include "infer/speculative/cycle.h"
#include "infer/speculative/decode.h"
#include "tests/bench_model.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int);

static const int NS[] = {4, 8, 16, 32, 64, 128};
enum { N_NS = sizeof NS / sizeof *NS, CTX = 32, TG = 128, REPS = 5 };

/* Copy bandwidth (STREAM convention: bytes read + bytes written per second)
 * of a 512 MiB memcpy split over all threads; best of 5. */
static double copy_bandwidth(void) {
    size_t n = 512u << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n); memset(b, 2, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t chunk = n / nt;
            memcpy(b + id * chunk, a + id * chunk, chunk);
        }
        double bw = 2.0 * n / (now_seconds() - t0);
        if (bw > best) best = bw;
    }
    free(a); free(b);
    return best;
}

/* Read bandwidth of a plain stream: each thread sums its half of a 512 MiB
 * buffer in 32-byte vectors, four chains, no software prefetch; best of 5.
 * What a weight-streaming loop can hope for, where STREAM's copy figure
 * (which also counts the writes) may promise more. */
typedef uint64_t v4u64 __attribute__((vector_size(32)));
static volatile uint64_t read_sink;
static double read_bandwidth(void) {
    size_t n = 512u << 20;
    char *a = malloc(n);
    memset(a, 1, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t chunk = n / nt / 128 * 128;
            const char *p = a + id * chunk;
            v4u64 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            for (size_t i = 0; i < chunk; i += 128) {
                v4u64 v0, v1, v2, v3;
                memcpy(&v0, p + i, 32); memcpy(&v1, p + i + 32, 32);
                memcpy(&v2, p + i + 64, 32); memcpy(&v3, p + i + 96, 32);
                s0 += v0; s1 += v1; s2 += v2; s3 += v3;
            }
            v4u64 t = s0 + s1 + s2 + s3;
            read_sink += t[0] + t[1] + t[2] + t[3];
        }
        double bw = (double)n / (now_seconds() - t0);
        if (bw > best) best = bw;
    }
    free(a);
    return best;
}

static double sgemm_peak(int threads) {
    const int n = 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
    openblas_set_num_threads(threads);
    double best = 0;
    for (int r = 0; r < 4; r++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * n / (now_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    openblas_set_num_threads(1);   /* the runtime drives OpenBLAS from its own threads */
    free(a); free(b); free(c);
    return best;
}

/* multiply-adds per token of the weight products: every matrix once; the LM
 * head counted only where logits are asked for */
static double flops_per_token(const LlamaModel *m, int with_head) {
    const ModelConfig *c = &m->cfg;
    double qd = (double)c->heads * c->head_dim, kd = (double)c->kv_heads * c->head_dim;
    double layer = c->hidden * (qd + 2 * kd) + qd * c->hidden + 3.0 * c->hidden * c->intermediate;
    return 2.0 * (c->layers * layer + (with_head ? (double)c->vocab * c->hidden : 0));
}

static FILE *tsv;
static void row(const char *model, const char *test, int n, double tps, double gflops, double pct) {
    if (tsv) fprintf(tsv, "%s\t%s\t%d\t%.3f\t%.2f\t%.1f\n", model, test, n, tps, gflops, pct);
}

static void commit_prompt(LlamaState *st, int n) {
    int *tok = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) { tok[i] = 100 + 37 * i % 5000; pos[i] = i; }
    if (llama_forward(st, tok, pos, n, NULL, LOGITS_LAST)) die_err("bench_forward");
    llama_commit(st, NULL, n);
    free(tok); free(pos);
}

static int tune_threads;   /* --threads auto */
static int tg_runs = 2;   /* 128 tokens take seconds: two runs (--tg-only: one) */

static double decode_tps(LlamaState *st) {
    double best = 0;
    BackendTuner tuner = {0};
    for (int r = 0; r < tg_runs; r++) {
        llama_truncate(st, 0);
        commit_prompt(st, 8);
        int tok = 1000;
        double t0 = now_seconds();
        for (int i = 0; i < TG; i++) {
            int p = st->n_past;
            if (tune_threads) backend_unit_begin(&cpu_backend, &tuner);
            if (llama_forward(st, &tok, &p, 1, NULL, LOGITS_LAST)) die_err("bench_forward");
            llama_commit(st, NULL, 1);
            cpu_backend.argmax(st->logits, 1, st->m->cfg.vocab, &tok);
            if (tune_threads) backend_unit_end(&cpu_backend, &tuner);
        }
        double tps = TG / (now_seconds() - t0);
        if (tps > best) best = tps;
    }
    return best;
}

/* A random tree of n nodes after CTX context tokens: node i's parent is
 * i-1 half the time, else an earlier node or the context's end. */
static void tree_inputs(int n, int *tok, int *pos, uint8_t *mask) {
    int *parent = xmalloc(sizeof(int) * n), *depth = xmalloc(sizeof(int) * n);
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    memset(mask, 0, (size_t)n * n);   /* the tree's window; the context is visible to all */
    for (int i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        parent[i] = i == 0 ? -1 : (s & 1) ? i - 1 : (int)((s >> 8) % (uint64_t)(i + 1)) - 1;
        depth[i] = parent[i] < 0 ? 1 : depth[parent[i]] + 1;
        tok[i] = 200 + (int)((s >> 20) % 4000);
        pos[i] = CTX - 1 + depth[i];
        uint8_t *r = mask + (size_t)i * n;
        for (int a = i; a >= 0; a = parent[a]) r[a] = 1;
    }
    free(parent); free(depth);
}

#define TREE_PATH 2   /* nodes scored in a tree verification past lazy_logits_nodes: τ ≈ 1.5-2 on SmolLM2 */

static double forward_tps(LlamaState *st, int n, int tree) {
    int *tok = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    uint8_t *mask = xmalloc((size_t)n * n);
    tree_inputs(n, tok, pos, mask);
    if (!tree)
        for (int i = 0; i < n; i++) pos[i] = CTX + i;
    double best = 0;
    for (int r = 0; r <= REPS; r++) {   /* r = 0 warms up */
        double t0 = now_seconds();
        const int lazy = tree && n > lazy_logits_nodes(st->m->be);
        if (llama_forward(st, tok, pos, n, tree ? mask : NULL, !tree ? LOGITS_LAST : lazy ? LOGITS_NONE : LOGITS_ALL))
            die_err("bench_forward");
        for (int p = 0; lazy && p < TREE_PATH; p++) llama_row_logits(st, p);
        double tps = n / (now_seconds() - t0);
        if (r && tps > best) best = tps;
        llama_truncate(st, CTX);
    }
    free(tok); free(pos); free(mask);
    return best;
}

/* llama-batched-bench's figures for B sequences: one forward prefills all
 * the prompts, then each step decodes one token of every sequence. */
/* B prompts of npp tokens in one forward, then ntg steps of B tokens; with
 * report, the S_PP and S_TG line and rows. */
static void batched_decode(const LlamaModel *m, const char *name, int B, int npp, int ntg, int report) {
    LlamaState **st = xmalloc(sizeof *st * B);
    LogitsMode *last = xmalloc(sizeof *last * B);
    int *off = xmalloc(sizeof(int) * (B + 1)), *tok = xmalloc(sizeof(int) * B * npp), *pos = xmalloc(sizeof(int) * B * npp);
    LlamaBatch *b = llama_batch_new(m);
    for (int i = 0; i < B; i++) {
        if (!(st[i] = llama_state_new(m, npp + ntg + 1))) die_err("bench_forward");
        last[i] = LOGITS_LAST;
        off[i] = i * npp;
        for (int j = 0; j < npp; j++) { tok[i * npp + j] = 100 + (37 * j + 11 * i) % 5000; pos[i * npp + j] = j; }
    }
    off[B] = B * npp;
    double t0 = now_seconds();
    if (llama_forward_batch(b, st, B, tok, pos, off, NULL, NULL, last)) die_err("bench_forward");
    const double t_pp = now_seconds() - t0;
    for (int i = 0; i < B; i++) {
        llama_commit(st[i], NULL, npp);
        off[i] = i;
        cpu_backend.argmax(st[i]->logits, 1, m->cfg.vocab, &tok[i]);
    }
    off[B] = B;
    t0 = now_seconds();
    for (int step = 0; step < ntg; step++) {
        for (int i = 0; i < B; i++) pos[i] = st[i]->n_past;
        if (llama_forward_batch(b, st, B, tok, pos, off, NULL, NULL, last)) die_err("bench_forward");
        for (int i = 0; i < B; i++) {
            llama_commit(st[i], NULL, 1);
            cpu_backend.argmax(st[i]->logits, 1, m->cfg.vocab, &tok[i]);
        }
    }
    const double t_tg = now_seconds() - t0;
    if (report) {
        printf("  batch %-4d  S_PP %9.1f tok/s   S_TG %9.1f tok/s\n", B, B * npp / t_pp, B * ntg / t_tg);
        /* rows under other arithmetic are named apart */
        char pp[64], tg[64];
        const char *tag = backend_settings()->cpu_fast_gemm == CPU_GEMM_AMX ? "_amx"
                          : backend_settings()->cpu_fast_gemm                 ? "_fast_gemm"
                                                                              : "";
        const char *kv = backend_settings()->kv_dtype == DT_BF16 ? "_kv_bf16" : "";
        snprintf(pp, sizeof pp, "batched_pp%s%s", tag, kv);
        snprintf(tg, sizeof tg, "batched_tg%s%s", tag, kv);
        row(name, pp, B, B * npp / t_pp, 0, 0);
        row(name, tg, B, B * ntg / t_tg, 0, 0);
    }
    for (int i = 0; i < B; i++) llama_state_free(st[i]);
    llama_batch_free(b);
    free(st); free(last); free(off); free(tok); free(pos);
}

static void bench_batched(const char *dir, const int *bs, int nb, int npp, int ntg) {
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_forward");
    printf("\n%s: %s weights%s%s%s, %s KV cache, batched decoding, %d-token prompts, %d steps\n", dir,
           dtype_name(m->embed.dtype), backend_settings()->cpu_fast_gemm ? " (--cpu-fast-gemm " : "",
           backend_settings()->cpu_fast_gemm ? cpu_gemm_name(backend_settings()->cpu_fast_gemm) : "",
           backend_settings()->cpu_fast_gemm ? ")" : "",
           dtype_name(backend_settings()->kv_dtype), npp, ntg);
    /* a warm-up at the largest batch, as the other figures have one: the
     * backend's copies of the weights (F32 for sgemm, interleaved blocks)
     * are made by their first many-token products */
    int most = 1;
    for (int i = 0; i < nb; i++) most = bs[i] > most ? bs[i] : most;
    batched_decode(m, dir, most, npp, 1, 0);
    for (int i = 0; i < nb; i++) batched_decode(m, dir, bs[i], npp, ntg, 1);
    llama_free(m);
}

/* --tree: verification forwards of ns[0..count) nodes after CTX tokens */
static void bench_tree_curve(const char *dir, const int *ns, int count) {
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_forward");
    LlamaState *st = llama_state_new(m, CTX + 256);
    commit_prompt(st, CTX);
    printf("%s: %s weights, tree verification forwards after %d tokens (best of %d)\n", dir, dtype_name(m->embed.dtype),
           CTX, REPS);
    double first = 0;
    for (int i = 0; i < count; i++) {
        const double ms = 1e3 * ns[i] / forward_tps(st, ns[i], 1);
        if (i == 0) first = ms;
        printf("  tree %-4d %9.1f ms  %5.2fx\n", ns[i], ms, ms / first);
        row(dir, "tree_ms", ns[i], ms, 0, 0);
    }
    llama_state_free(st);
    llama_free(m);
}

/* --pp: the prompt figures alone */
static void bench_pp_only(const char *dir, const int *ns, int count) {
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_forward");
    int most = 0;
    for (int i = 0; i < count; i++) most = ns[i] > most ? ns[i] : most;
    LlamaState *st = llama_state_new(m, CTX + most);
    commit_prompt(st, CTX);
    for (int i = 0; i < count; i++) {
        const double pp = forward_tps(st, ns[i], 0);
        printf("%s: pp%d %.1f tok/s\n", dir, ns[i], pp);
        row(dir, "pp", ns[i], pp, 0, 0);
    }
    llama_state_free(st);
    llama_free(m);
}

/* --tg-only: the decode figure alone, from one run */
static void bench_decode_only(const char *dir) {
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_forward");
    LlamaState *st = llama_state_new(m, CTX + 256);
    double tg = decode_tps(st);
    const int arm = cpu_quant_fetch_arm(FETCH_KEEP);   /* FETCH_MEASURE still: no product of block types measured it */
    printf("%s: tg128 %.1f tok/s (%s threads%s)\n", dir, tg, tune_threads ? "auto" : "fixed",
           arm == FETCH_GROUP ? "; block types fetched one group ahead" : arm == FETCH_NEAR ? "; block types fetched 6 KB ahead" : "");
    row(dir, "tg", TG, tg, 0, 0);
    llama_state_free(st);
    llama_free(m);
}

static void bench_model(const char *arg, double bw, double rbw, double peak) {
    char dir[512];
    int random_1b = !strcmp(arg, "1b");
    if (random_1b) bench_write_model(dir, &BENCH_1B, BENCH_1B.layers);
    else snprintf(dir, sizeof dir, "%s", arg);
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_forward");
    if (random_1b) bench_remove_model(dir);
    const char *name = random_1b ? "1b-random" : arg;
    LlamaState *st = llama_state_new(m, CTX + 256);
    double bytes = (double)llama_weight_bytes(m), bound = bw / bytes;
    printf("\n%s: %s weights, %.1f MB read per decoded token; bandwidth bound %.1f tok/s\n", name,
           dtype_name(m->embed.dtype), bytes / 1e6, bound);
    double tg = decode_tps(st);
    printf("  %-8s %9.1f tok/s  %5.0f%% of the bandwidth bound (%.0f%% of the read-stream bound, %.1f tok/s)\n",
           "tg128", tg, 100 * tg / bound, 100 * tg * bytes / rbw, rbw / bytes);
    row(name, "tg", TG, tg, 0, 100 * tg / bound);
    printf("  %-8s %9s %12s %8s   %9s %12s %8s\n", "n", "pp tok/s", "GFLOP/s", "% peak", "tree tok/s", "GFLOP/s",
           "% peak");
    llama_truncate(st, 0);
    commit_prompt(st, CTX);
    for (int i = 0; i < N_NS; i++) {
        int n = NS[i];
        double pp = forward_tps(st, n, 0), tr = forward_tps(st, n, 1);
        /* the tree's LM-head work: every node, or the path's TREE_PATH rows */
        const double head = flops_per_token(m, 1) - flops_per_token(m, 0);
        const double head_share = n > lazy_logits_nodes(m->be) ? (double)TREE_PATH / n : 1;
        double gp = pp * flops_per_token(m, 0) / 1e9, gt = tr * (flops_per_token(m, 0) + head_share * head) / 1e9;
        printf("  %-8d %9.1f %12.1f %7.0f%%   %9.1f %12.1f %7.0f%%\n", n, pp, gp, 100 * gp / peak, tr, gt,
               100 * gt / peak);
        row(name, "pp", n, pp, gp, 100 * gp / peak);
        row(name, "tree", n, tr, gt, 100 * gt / peak);
    }
    llama_state_free(st);
    llama_free(m);
}

int main(int argc, char **argv) {
    int threads = 2, first = 1, bs[16], nb = 0, npp = 128, ntg = 128, tree_ns[16], ntree = 0, pp_ns[16], npp_only = 0;
    for (; first < argc && argv[first][0] == '-'; first += 2) {
        if (!strcmp(argv[first], "--tg-only")) {   /* takes no value */
            tg_runs = 1;
            first--;
            continue;
        }
        if (first + 1 >= argc) { fprintf(stderr, "bench_forward: %s needs a value\n", argv[first]); return 2; }
        if (!strcmp(argv[first], "--tsv")) {
            tsv = fopen(argv[first + 1], "a");
            if (!tsv) { perror(argv[first + 1]); return 1; }
        } else if (!strcmp(argv[first], "--threads")) {
            tune_threads = !strcmp(argv[first + 1], "auto");
            threads = tune_threads ? cpu_threads_max() : atoi(argv[first + 1]);
        } else if (!strcmp(argv[first], "--npp")) npp = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--ntg")) ntg = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--kv-dtype") && (!strcmp(argv[first + 1], "f32") || !strcmp(argv[first + 1], "bf16"))) {
            BackendOptions o = *backend_settings();
            o.kv_dtype = strcmp(argv[first + 1], "bf16") ? DT_F32 : DT_BF16;
            backend_configure(&o);
        } else if (!strcmp(argv[first], "--cpu-fast-gemm") &&
                   (!strcmp(argv[first + 1], "on") || !strcmp(argv[first + 1], "off") || !strcmp(argv[first + 1], "amx"))) {
            BackendOptions o = *backend_settings();
            o.cpu_fast_gemm = !strcmp(argv[first + 1], "amx") ? CPU_GEMM_AMX : !strcmp(argv[first + 1], "on") ? CPU_GEMM_BF16 : CPU_GEMM_F32;
            if (backend_configure(&o)) die_err("bench_forward");
        }
        else if (!strcmp(argv[first], "--quant-tiles") && (!strcmp(argv[first + 1], "on") || !strcmp(argv[first + 1], "off"))) {
            if (!cpu_quant_tiles(!strcmp(argv[first + 1], "on")) && !strcmp(argv[first + 1], "on")) {
                fprintf(stderr, "bench_forward: --quant-tiles on: this build or CPU has no AMX-INT8\n");
                return 2;
            }
        }
        else if (!strcmp(argv[first], "--fetch") &&
                 (!strcmp(argv[first + 1], "group") || !strcmp(argv[first + 1], "near") || !strcmp(argv[first + 1], "measure"))) {
            cpu_quant_fetch_arm(!strcmp(argv[first + 1], "group") ? FETCH_GROUP : !strcmp(argv[first + 1], "near") ? FETCH_NEAR : FETCH_MEASURE);
        }
        else if (!strcmp(argv[first], "--cpu-f32-cache-mb")) {
            BackendOptions o = *backend_settings();
            o.cpu_f32_cache_mb = atoi(argv[first + 1]);
            if (backend_configure(&o)) die_err("bench_forward");
        }
        else if (!strcmp(argv[first], "--batched") || !strcmp(argv[first], "--tree") || !strcmp(argv[first], "--pp")) {
            const int tree = !strcmp(argv[first], "--tree"), pp = !strcmp(argv[first], "--pp");
            int *v = tree ? tree_ns : pp ? pp_ns : bs, *count = tree ? &ntree : pp ? &npp_only : &nb;
            const int most = tree ? 256 : pp ? 4096 : 1 << 20;
            for (char *p = argv[first + 1]; *p && *count < 16; p += strspn(p, ",")) {
                char *end;
                v[*count] = (int)strtol(p, &end, 10);
                if (end == p || v[*count] < 1 || v[*count] > most) {
                    fprintf(stderr, "bench_forward: %s takes sizes like 1,8,32 (at most %d)\n", argv[first], most);
                    return 2;
                }
                (*count)++;
                p = end;
            }
        } else {
            fprintf(stderr, "usage: bench_forward [--tsv FILE] [--threads T|auto] [--kv-dtype f32|bf16] [--cpu-fast-gemm on|off|amx] [--quant-tiles on|off] [--fetch group|near|measure] [--cpu-f32-cache-mb MB] "
                            "[--tg-only] [--batched B,... [--npp N] [--ntg N]] [--tree N,...] [--pp N,...] "
                            "MODEL_DIR|1b ...\n");
            return 2;
        }
    }
    if (npp < 1 || ntg < 1) { fprintf(stderr, "bench_forward: --npp and --ntg must be at least 1\n"); return 2; }
    if (threads < 1) threads = 1;
    cpu_threads_set(threads);
    omp_set_num_threads(threads);
    if (tg_runs == 1) {
        for (int i = first; i < argc; i++) bench_decode_only(argv[i]);
        if (tsv) fclose(tsv);
        return 0;
    }
    if (npp_only) {
        for (int i = first; i < argc; i++) bench_pp_only(argv[i], pp_ns, npp_only);
        if (tsv) fclose(tsv);
        return 0;
    }
    if (ntree) {
        for (int i = first; i < argc; i++) bench_tree_curve(argv[i], tree_ns, ntree);
        if (tsv) fclose(tsv);
        return 0;
    }
    if (nb) {
        for (int i = first; i < argc; i++) bench_batched(argv[i], bs, nb, npp, ntg);
        if (tsv) fclose(tsv);
        return 0;
    }
    double bw = copy_bandwidth(), rbw = read_bandwidth(), peak = sgemm_peak(threads);
    printf("machine: %d threads, copy bandwidth %.1f GB/s, read stream %.1f GB/s, sgemm peak %.1f GFLOP/s "
           "(OpenBLAS, 2048^3)\n", threads, bw / 1e9, rbw / 1e9, peak);
    row("machine", "copy_GBps", 0, bw / 1e9, 0, 0);
    row("machine", "read_GBps", 0, rbw / 1e9, 0, 0);
    row("machine", "sgemm_GFLOPs", 0, peak, peak, 100);
    for (int i = first; i < argc; i++) bench_model(argv[i], bw, rbw, peak);
    if (first == argc) bench_model("1b", bw, rbw, peak);
    if (tsv) fclose(tsv);
    return 0;
}
