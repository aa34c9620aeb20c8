/* Backend parity harness: every op of a backend under test against a
 * reference backend on random inputs.  Here: the optimised CPU backend
 * against the naive scalar one (tests/naive_backend.h); on a GPU machine
 * tests/test_cuda.c runs the same harness (tests/parity.h, where the
 * tolerances are documented) with CUDA against CPU. */
#include "tests/harness.h"
#include "tests/naive_backend.h"
#include "kernels/base/util.h"
#include "kernels/base/replay.h"
#include "tests/parity.h"
#include "tests/matmul_many_check.h"
#include "kernels/cpu/cpu.h"
#include <omp.h>
#include <stdatomic.h>
#include <time.h>

static void test_cpu_backend_is_complete(void) {
#define HAS_OP(op) CHECK(cpu_backend.op != NULL, "cpu backend lacks " #op);
    BACKEND_OPS(HAS_OP)
#undef HAS_OP
}

static void test_cpu_against_naive(void) {
    CHECK(parity(&cpu_backend, &naive_backend, 1) == 0, "the CPU backend differs from the naive reference");
}

/* Adds to *bad each token row of the n-token products of a rows x cols
 * weight in dt (n in ns[0..count), each with 1 and 2 threads) that differs
 * from the token alone, to *products every row compared, and to *copies 1
 * where the backend kept an F32 copy of the weight. */
static void count_tokens_apart(int rows, int cols, DType dt, const int *ns, int count, int *bad, int *products,
                               int *copies) {
    int nmax = 1;
    for (int i = 0; i < count; i++) nmax = ns[i] > nmax ? ns[i] : nmax;
    float *wf = xmalloc(sizeof(float) * rows * cols), *x = xmalloc(sizeof(float) * nmax * cols);
    void *wd = xmalloc(4 * (size_t)rows * cols);
    float *all = xmalloc(sizeof(float) * nmax * rows), *one = xmalloc(sizeof(float) * rows);
    fill(wf, (size_t)rows * cols, 0.5f); fill(x, (size_t)nmax * cols, 1);
    f32_to(dt, wf, wd, (size_t)rows * cols);
    Weight w;
    cpu_backend.weight(&w, wd, dt, rows, cols);
    for (int i = 0; i < count; i++)
        for (int threads = 1; threads <= 2; threads++) {
            cpu_threads_set(threads);
            cpu_backend.matmul(all, x, &w, ns[i]);
            for (int t = 0; t < ns[i]; t++) {
                cpu_backend.matmul(one, x + (size_t)t * cols, &w, 1);
                *bad += memcmp(one, all + (size_t)t * rows, sizeof(float) * rows) != 0;
                (*products)++;
            }
        }
    cpu_threads_set(cpu_threads_max());
    *copies += cpu_weight_f32(&w) != NULL;   /* made by a product of more than FEW_TOKENS tokens, if any */
    cpu_backend.weight_release(&w);
    free(wf); free(x); free(wd); free(all); free(one);
}

/* Small trees and EAGLE steps must compute each token exactly as decode
 * does: every token of an n-token product, at every n up to the few-token
 * loop's limit (FEW_TOKENS), equals the same token alone, bit for bit, in
 * every dtype, whichever tile computed it (matmul.c: 2 x 2 below
 * HALF_MIN_TOKENS and 2 x 6 from it with AVX2 alone, 4 x 6 from
 * WIDE_MIN_TOKENS with AVX-512), in full and partial token groups; and the
 * thread count changes nothing (1037 rows: split over the threads from n
 * 4).  Shapes: odd row counts leave a row outside the row pairs and tiles;
 * 83 columns end in a 3-column tail, 200 in an 8-column one, 7 have no
 * 16-column step at all, 64 no tail; 37 x 4100 (a 4-column tail) makes
 * the AVX2 tile's token groups after a block's first (streamed one row
 * at a time) run by column ranges, carrying each chain across 512-column
 * ranges, in row blocks cut by bytes (22 rows of BF16, an odd row left in
 * the last block). */
static void test_matmul_tokens_independent(void) {
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    enum { NSHAPES = 5 };
    const int shape_rows[NSHAPES] = {1037, 131, 45, 66, 37}, shape_cols[NSHAPES] = {83, 200, 7, 64, 4100};
    int ns[FEW_TOKENS], count = 0, bad = 0, products = 0, copies = 0;
    for (int n = 2; n <= FEW_TOKENS; n++) ns[count++] = n;
    for (int s = 0; s < NSHAPES; s++)
        for (int d = 0; d < 3; d++) count_tokens_apart(shape_rows[s], shape_cols[s], dts[d], ns, count, &bad, &products, &copies);
    CHECK(products > 0 && bad == 0, "%d of %d token rows of a many-token matmul differ from the token alone", bad,
          products);
}

/* A 16-bit matrix without an F32 copy (cache budget 0) keeps the fused loop
 * up to FEW_TOKENS_UNCACHED tokens: each token of such a product equals
 * the token alone, bit for bit, where sgemm (over the copy, or a per-call
 * widening) would not promise it; past the bound sgemm takes over.  Shapes
 * that run whole rows (200 columns) and column ranges (4100). */
static void test_matmul_uncached_tokens_independent(void) {
    const int ns[] = {17, 24, 33, FEW_TOKENS_UNCACHED};
    const DType dts[2] = {DT_BF16, DT_F16};
    BackendOptions o;
    backend_options_default(&o);
    o.cpu_f32_cache_mb = 0;
    REQUIRE(backend_configure(&o) == 0, "%s", err_get());
    int bad = 0, products = 0, copies = 0;
    for (int d = 0; d < 2; d++) {
        count_tokens_apart(131, 200, dts[d], ns, 4, &bad, &products, &copies);
        count_tokens_apart(37, 4100, dts[d], ns, 4, &bad, &products, &copies);
    }
    backend_options_default(&o);
    backend_configure(&o);
    CHECK(copies == 0, "%d weights got an F32 copy with a cache budget of 0", copies);
    CHECK(products > 0 && bad == 0, "%d of %d token rows of an uncached many-token matmul differ from the token alone",
          bad, products);
}

/* The F32 copy of a 16-bit matrix is made by its first product of more than
 * FEW_TOKENS tokens, not at load (an embedding read by rows and few-token
 * products take none of the budget), holds the widened rows, and a matrix
 * the budget once had no room for keeps its path when room appears. */
static void test_f32_copy_at_first_many_token_product(void) {
    enum { R = 300, C = 200, BR = 1024, BC = 512, N = FEW_TOKENS_UNCACHED + 1 };
    float *wf = xmalloc(sizeof(float) * BR * BC), *x = xmalloc(sizeof(float) * N * BC), *out = xmalloc(sizeof(float) * N * BR);
    uint16_t *wb = xmalloc(sizeof(uint16_t) * BR * BC);
    fill(wf, (size_t)BR * BC, 0.5f); fill(x, (size_t)N * BC, 1);
    f32_to(DT_BF16, wf, wb, (size_t)BR * BC);
    BackendOptions o;
    backend_options_default(&o);
    REQUIRE(backend_configure(&o) == 0, "%s", err_get());
    Weight w;
    cpu_backend.weight(&w, wb, DT_BF16, R, C);
    CHECK(cpu_weight_f32(&w) == NULL, "an F32 copy made at load");
    float *row = xmalloc(sizeof(float) * C);
    cpu_backend.embed(row, &w, (const int[]){7}, 1);
    cpu_backend.matmul(out, x, &w, FEW_TOKENS);
    CHECK(cpu_weight_f32(&w) == NULL, "an F32 copy made by a row read or a product of %d tokens", FEW_TOKENS);
    cpu_backend.matmul(out, x, &w, FEW_TOKENS + 1);
    const float *copy = cpu_weight_f32(&w);
    CHECK(copy != NULL, "no F32 copy after a product of %d tokens", FEW_TOKENS + 1);
    for (int r = 0; copy && r < R; r += 37) {
        cpu_weight_row(&w, r, row);
        CHECK(!memcmp(row, copy + (size_t)r * C, sizeof(float) * C), "row %d of the copy is not the widened row", r);
    }
    cpu_backend.weight_release(&w);
    /* a 2 MB copy past a 1 MB budget: refused, and for good */
    o.cpu_f32_cache_mb = 1;
    REQUIRE(backend_configure(&o) == 0, "%s", err_get());
    cpu_backend.weight(&w, wb, DT_BF16, BR, BC);
    cpu_backend.matmul(out, x, &w, FEW_TOKENS + 1);
    cpu_backend.matmul(out, x, &w, N);
    CHECK(cpu_weight_f32(&w) == NULL, "a copy past the budget");
    backend_options_default(&o);
    REQUIRE(backend_configure(&o) == 0, "%s", err_get());
    cpu_backend.matmul(out, x, &w, N);
    CHECK(cpu_weight_f32(&w) == NULL, "a matrix refused a copy got one later: its products changed path");
    cpu_backend.weight_release(&w);
    free(wf); free(x); free(out); free(wb); free(row);
}

/* matmul_many gives each weight's product bit for bit as matmul does, for
 * any token count up to FEW_TOKENS (one shared parallel region) and above
 * (sgemm), with 1 and 2 threads (its split of the joint rows moves with the
 * thread count). */
static void test_matmul_many_equals_matmuls(void) {
    enum { K = 3, COLS = 83, NMAX = 40 };
    const int rows[K] = {301, 97, 1037}, ns[] = {1, 2, 3, 4, 5, 6, 7, 9, 13, 16, 32, 33, 40};
    float *x = xmalloc(sizeof(float) * NMAX * COLS);
    fill(x, (size_t)NMAX * COLS, 1);
    int bad = 0;
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    for (int d = 0; d < 3; d++) {
        Weight w[K];
        const Weight *pw[K];
        float *many[K], *one[K];
        void *wd[K];
        for (int i = 0; i < K; i++) {
            float *wf = xmalloc(sizeof(float) * rows[i] * COLS);
            fill(wf, (size_t)rows[i] * COLS, 0.5f);
            wd[i] = xmalloc(4 * (size_t)rows[i] * COLS);
            f32_to(dts[d], wf, wd[i], (size_t)rows[i] * COLS);
            free(wf);
            cpu_backend.weight(&w[i], wd[i], dts[d], rows[i], COLS);
            pw[i] = &w[i];
            many[i] = xmalloc(sizeof(float) * NMAX * rows[i]);
            one[i] = xmalloc(sizeof(float) * NMAX * rows[i]);
        }
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) bad += many_vs_matmuls(pw, K, x, ns[j], many, one);
        for (int i = 0; i < K; i++) {
            cpu_backend.weight_release(&w[i]);
            free(wd[i]); free(many[i]); free(one[i]);
        }
    }
    cpu_threads_set(cpu_threads_max());
    CHECK(bad == 0, "%d products of matmul_many differ from matmul", bad);
    free(x);
}

/* The harness must catch a wrong kernel: break one op at a time. */
static void matmul_off_by_one(float *out, const float *x, const Weight *w, int n) {
    cpu_backend.matmul(out, x, w, n);
    out[(size_t)n * w->rows - 1] += 0.01f;
}
/* ids outside the table read row 0 instead of giving zeros */
static void embed_clamps(float *out, const Weight *table, const int *tokens, int n) {
    for (int t = 0; t < n; t++) {
        const int id = tokens[t] < 0 || tokens[t] >= table->rows ? 0 : tokens[t];
        cpu_backend.embed(out + (size_t)t * table->cols, table, &id, 1);
    }
}
static void many_skips_last(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    cpu_backend.matmul_many(outs, x, ws, count - 1, n);   /* the last weight's product left undone */
}
static void attention_unmasked(float *out, const float *q, const AttnSeq *seqs, int n_seq, int l, int nh, int nkv,
                               int hd) {
    AttnSeq *plain = xmalloc(sizeof *plain * n_seq);
    for (int i = 0; i < n_seq; i++) { plain[i] = seqs[i]; plain[i].mask = NULL; }
    cpu_backend.attention(out, q, plain, n_seq, l, nh, nkv, hd);
    free(plain);
}
/* a sliding window ignored (every slot in reach) */
static void attention_unwindowed(float *out, const float *q, const AttnSeq *seqs, int n_seq, int l, int nh, int nkv,
                                 int hd) {
    AttnSeq *whole = xmalloc(sizeof *whole * n_seq);
    for (int i = 0; i < n_seq; i++) { whole[i] = seqs[i]; whole[i].window = 0; }
    cpu_backend.attention(out, q, whole, n_seq, l, nh, nkv, hd);
    free(whole);
}
/* rope_kv that leaves the slots at their plain positions (kv_write's) */
static void rope_kv_slot_positions(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads,
                                   int hd, const float *inv_freq, KVCache *c, int layer, const int *slot) {
    cpu_rope(q, pos, n, heads, hd, inv_freq);
    cpu_rope(k, pos, n, kv_heads, hd, inv_freq);
    cpu_kv_write(c, layer, *slot, k, v, n);
}
/* the context read from the launch's bound, not from *past */
static void attention_context_from_bound(float *out, const float *q, const AttnSeq *seqs, int n_seq, int l, int nh,
                                         int nkv, int hd) {
    AttnSeq *bound = xmalloc(sizeof *bound * n_seq);
    int *past = xmalloc(sizeof(int) * (n_seq ? n_seq : 1));
    for (int i = 0; i < n_seq; i++) {
        bound[i] = seqs[i];
        past[i] = seqs[i].ctx_max - seqs[i].n;
        bound[i].past = past + i;
    }
    cpu_backend.attention(out, q, bound, n_seq, l, nh, nkv, hd);
    free(bound); free(past);
}
static void topk_ties_wrong(const float *lg, int n, int vocab, float t, int k, int *ids, float *p, int topm, float *h) {
    cpu_backend.softmax_topk(lg, n, vocab, t, k, ids, p, topm + 1, h);   /* entropy over M+1 */
}
/* the norm of x before the add */
static void add_rmsnorm_norm_first(float *out, float *x, const float *y, const Weight *w, int n, float eps) {
    cpu_rmsnorm(out, x, w, n, eps);
    cpu_add(x, y, (size_t)n * w->cols);
}
/* the cache gets k before its rotation */
static void rope_kv_writes_first(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads,
                                 int hd, const float *inv_freq, KVCache *c, int layer, const int *slot) {
    cpu_kv_write(c, layer, *slot, k, v, n);
    cpu_rope(q, pos, n, heads, hd, inv_freq);
    cpu_rope(k, pos, n, kv_heads, hd, inv_freq);
}
/* the walk takes the last matching child instead of the first */
static void accept_last_child(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    cpu_tree_accept(t, n, want, from_start, steps, walk);
    if (walk[1] > 1) walk[3 + walk[1] - 1]++;   /* a neighbouring node */
}
/* the last kept node's rank lost */
static void compact_drops_rank(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    cpu_tree_compact(dst, src, keep, m, pad);
    dst->rank[m - 1] = 0;
}
/* the padding left as it was */
static void compact_without_padding(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    (void)pad;
    cpu_tree_compact(dst, src, keep, m, m);
}
/* one node's confidence an ulp off */
static void classify_ulp_off(const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    cpu_tree_classify(t, from, n, net, conf);
    if (n > 0) conf[from + n / 2] = nextafterf(conf[from + n / 2], 2.0f);
}
/* the path confidence forgets the parent's */
static void pass_without_path(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    cpu_tree_pass(t, from, n, conf, beta, path_conf, count);
    for (int i = 0; i < *count; i++) path_conf[from + i] = conf[from + i];
}
/* the rest of the layer left as it was, not dead */
static void pass_leaves_tail(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    int *token = xmalloc(sizeof(int) * (size_t)n);
    float *c = xmalloc(sizeof(float) * (size_t)n);
    memcpy(token, t->token + from, sizeof(int) * (size_t)n);
    memcpy(c, conf + from, sizeof(float) * (size_t)n);
    cpu_tree_pass(t, from, n, conf, beta, path_conf, count);
    for (int i = *count; i < n; i++) t->token[from + i] = token[i], conf[from + i] = c[i];
    free(token);
    free(c);
}
/* children of a dead node pass */
static void pass_ignores_dead_parent(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf,
                                     int *count) {
    int *parent = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) {   /* the dead parents' children as the root's for the pass */
        parent[i] = t->parent[from + i];
        if (t->token[parent[i]] < 0) t->parent[from + i] = 0;
    }
    cpu_tree_pass(t, from, n, conf, beta, path_conf, count);
    free(parent);
}
/* the ranking by P whatever the score */
static void top_ignores_score(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    (void)score;
    cpu_tree_top(t, NULL, from, n, m, sel);
}
/* reads that leave the last one undone */
static void reads_skip_last(float *const *host, const float *const *dev, const size_t *n, int count) {
    for (int i = 0; i + 1 < count; i++) cpu_backend.to_host(host[i], dev[i], n[i]);
}
/* a batch that leaves its last tree undone */
static void batch_skips_last(const TreeOp *ops, int n) { backend_tree_batch(&cpu_backend, ops, n - 1); }
/* a batch whose every tree takes the first op's vocabulary map (an
 * argument read from the wrong op) */
static void batch_first_map(const TreeOp *ops, int n) {
    TreeOp *o = xmalloc(sizeof *o * n);
    for (int i = 0; i < n; i++) { o[i] = ops[i]; o[i].map = ops[0].map; }
    backend_tree_batch(&cpu_backend, o, n);
    free(o);
}
/* draws keyed by the row, not the node (a lazy walk's row would draw another number) */
static void sample_ignores_node0(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key,
                                 int node0, int *ids) {
    (void)node0;
    cpu_sample_dev(logits, n, vocab, sp, key, 0, ids);
}
static void test_harness_catches_wrong_kernels(void) {
    Backend broken = cpu_backend;
    broken.matmul = matmul_off_by_one;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "broken matmul not caught");
    broken = cpu_backend;
    broken.embed = embed_clamps;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "embed reading a row for an id outside the table not caught");
    broken = cpu_backend;
    broken.matmul_many = many_skips_last;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "matmul_many leaving a product undone not caught");
    broken = cpu_backend;
    broken.attention = attention_unmasked;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "attention ignoring the tree mask not caught");
    broken = cpu_backend;
    broken.attention = attention_context_from_bound;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "attention over its launch bound, not its context, not caught");
    broken = cpu_backend;
    broken.attention = attention_unwindowed;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "attention ignoring a sliding window not caught");
    broken = cpu_backend;
    broken.rope_kv = rope_kv_slot_positions;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "rope_kv leaving its positions unwritten not caught");
    broken = cpu_backend;
    broken.geglu = cpu_swiglu;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "geglu computing SiLU not caught");
    broken = cpu_backend;
    broken.softmax_topk = topk_ties_wrong;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "top-M entropy over the wrong M not caught");
    broken = cpu_backend;
    broken.add_rmsnorm = add_rmsnorm_norm_first;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "add_rmsnorm normalising before the add not caught");
    broken = cpu_backend;
    broken.rope_kv = rope_kv_writes_first;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "rope_kv caching k unrotated not caught");
    broken = cpu_backend;
    broken.tree_compact = compact_drops_rank;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "tree_compact losing a rank not caught");
    broken = cpu_backend;
    broken.tree_compact = compact_without_padding;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "tree_compact leaving its padding stale not caught");
    broken = cpu_backend;
    broken.sample_dev = sample_ignores_node0;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "sample_dev drawing a row's number, not its node's, not caught");
    broken = cpu_backend;
    broken.tree_accept = accept_last_child;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "a wrong accepted path not caught");
    broken = cpu_backend;
    broken.tree_classify = classify_ulp_off;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "a confidence an ulp off not caught");
    broken = cpu_backend;
    broken.tree_pass = pass_without_path;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "path confidences without the parent's not caught");
    broken = cpu_backend;
    broken.tree_pass = pass_leaves_tail;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "tree_pass leaving the rest of the layer alive not caught");
    broken = cpu_backend;
    broken.tree_pass = pass_ignores_dead_parent;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "tree_pass keeping a dead node's children not caught");
    broken = cpu_backend;
    broken.tree_top = top_ignores_score;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "tree_top ignoring its score not caught");
    broken = cpu_backend;
    broken.tree_batch = batch_skips_last;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "a tree batch leaving a tree undone not caught");
    broken = cpu_backend;
    broken.tree_batch = batch_first_map;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "a tree batch reading another op's argument not caught");
    broken = cpu_backend;
    broken.to_host_many = reads_skip_last;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "reads at once leaving one undone not caught");
}

/* --cpu-fast-gemm on and amx: every product of a BF16 weight is a BF16 pair
 * dot product of the weights and the activations rounded to BF16 — close to
 * that product summed in double, each token's row bit for bit the same
 * whatever the product's token count (beyond FEW_TOKENS too, where the F32
 * path switches to sgemm) and thread count, and in matmul_many; it differs
 * from the F32 path (the option does something); no F32 copy of such
 * weights is kept.  1037 rows and 83 columns leave partial tiles of rows
 * and columns, 130 tokens a partial group.  Without the instructions the
 * setting is refused. */
static void fast_gemm_case(int mode) {
    enum { R = 1037, NMAX = 130 };
    const int colss[2] = {83, 576}, ns[] = {1, 2, 6, 7, 13, 16, 17, 64, 65, 130};
    BackendOptions o;
    backend_options_default(&o);
    o.cpu_fast_gemm = mode;
    float *x = xmalloc(sizeof(float) * NMAX * 576), *all = xmalloc(sizeof(float) * NMAX * R),
          *one = xmalloc(sizeof(float) * R), *f32 = xmalloc(sizeof(float) * NMAX * R);
    int bad_tokens = 0, bad_many = 0;
    float worst = 0, moved = 0;
    for (int c = 0; c < 2; c++) {
        const int C = colss[c];
        float *wf = xmalloc(sizeof(float) * R * C);
        uint16_t *wb = xmalloc(sizeof(uint16_t) * R * C);
        fill(wf, (size_t)R * C, 0.5f);
        fill(x, (size_t)NMAX * C, 1);
        f32_to(DT_BF16, wf, wb, (size_t)R * C);
        Weight w, w32;
        BackendOptions plain;
        backend_options_default(&plain);
        REQUIRE(backend_configure(&plain) == 0, "%s", err_get());
        cpu_backend.weight(&w32, wb, DT_BF16, R, C);   /* the F32 path, for comparison */
        cpu_backend.matmul(f32, x, &w32, NMAX);
        cpu_backend.weight_release(&w32);
        REQUIRE(backend_configure(&o) == 0, "%s", err_get());
        cpu_backend.weight(&w, wb, DT_BF16, R, C);
        CHECK((cpu_weight_tiles(&w) != NULL) == (mode == CPU_GEMM_AMX), "%s: a tile copy %s", cpu_gemm_name(mode),
              mode == CPU_GEMM_AMX ? "missing" : "made although the tiles are not used");
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (int threads = 1; threads <= 2; threads++) {
                cpu_threads_set(threads);
                cpu_backend.matmul(all, x, &w, ns[i]);
                for (int t = 0; t < ns[i]; t += 5) {
                    cpu_backend.matmul(one, x + (size_t)t * C, &w, 1);
                    bad_tokens += memcmp(one, all + (size_t)t * R, sizeof(float) * R) != 0;
                }
            }
        cpu_threads_set(cpu_threads_max());
        CHECK(cpu_weight_f32(&w) == NULL, "an F32 copy of a BF16 weight made although it is never widened (%d tokens)",
              NMAX);
        /* against double sums of BF16 products, and against the F32 path */
        cpu_backend.matmul(all, x, &w, NMAX);
        for (int t = 0; t < NMAX; t += 7)
            for (int r = 0; r < R; r++) {
                double ref = 0;
                for (int j = 0; j < C; j++) {
                    const uint32_t a = (uint32_t)wb[(size_t)r * C + j] << 16, b = (uint32_t)f32_to_bf16(x[(size_t)t * C + j]) << 16;
                    float fa, fb;
                    memcpy(&fa, &a, 4); memcpy(&fb, &b, 4);
                    ref += (double)fa * fb;
                }
                worst = fmaxf(worst, (float)(fabs(all[(size_t)t * R + r] - ref) / fmax(1.0, fabs(ref))));
                moved = fmaxf(moved, fabsf(all[(size_t)t * R + r] - f32[(size_t)t * R + r]));
            }
        /* matmul_many: two weights of the same cols, bit for bit matmul's */
        float *m0 = xmalloc(sizeof(float) * NMAX * R), *m1 = xmalloc(sizeof(float) * NMAX * R);
        float *outs[2] = {m0, m1};
        const Weight *pw[2] = {&w, &w};
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            cpu_backend.matmul_many(outs, x, pw, 2, ns[i]);
            cpu_backend.matmul(all, x, &w, ns[i]);
            bad_many += memcmp(m0, all, sizeof(float) * ns[i] * R) != 0 || memcmp(m1, all, sizeof(float) * ns[i] * R) != 0;
        }
        free(m0); free(m1);
        cpu_backend.weight_release(&w);
        free(wf); free(wb);
    }
    printf("# fast gemm %s: worst %.2e relative to double sums, %.2e from the F32 path\n", cpu_gemm_name(mode), worst,
           moved);
    CHECK(bad_tokens == 0, "%s: %d token rows differ from the token alone", cpu_gemm_name(mode), bad_tokens);
    CHECK(bad_many == 0, "%s: %d matmul_many products differ from matmul", cpu_gemm_name(mode), bad_many);
    CHECK(worst <= 1e-5f, "%s: BF16 products differ from their double sums by %.2e (relative)", cpu_gemm_name(mode),
          worst);
    CHECK(moved > 1e-4f, "%s: the fast path gives the F32 path's results (largest difference %.2e)",
          cpu_gemm_name(mode), moved);
    free(x); free(all); free(one); free(f32);
    backend_options_default(&o);
    backend_configure(&o);
}

static void test_cpu_fast_gemm(void) {
#ifndef __AVX512BF16__
    BackendOptions o;
    backend_options_default(&o);
    o.cpu_fast_gemm = CPU_GEMM_BF16;
    CHECK(backend_configure(&o) == -1 && strstr(err_get(), "AVX512-BF16"), "accepted without AVX512-BF16: %s",
          err_get());
#else
    fast_gemm_case(CPU_GEMM_BF16);
#endif
}

/* The tile multiply's arithmetic (matmul_amx.c), as a scalar model: per
 * group of 32 columns, the even columns' products summed in order, the odd
 * columns' likewise, the running sum plus (even + odd); then the columns
 * past the last multiple of 32 one by one.  Products of BF16 values are
 * exact in F32. */
static float amx_model_dot(const uint16_t *w, const uint16_t *x, int C) {
    float sum = 0;
    for (int g = 0; g + 32 <= C; g += 32) {
        float even = bf16_to_f32(w[g]) * bf16_to_f32(x[g]), odd = bf16_to_f32(w[g + 1]) * bf16_to_f32(x[g + 1]);
        for (int p = 1; p < 16; p++) {
            even += bf16_to_f32(w[g + 2 * p]) * bf16_to_f32(x[g + 2 * p]);
            odd += bf16_to_f32(w[g + 2 * p + 1]) * bf16_to_f32(x[g + 2 * p + 1]);
        }
        sum += even + odd;
    }
    for (int j = C / 32 * 32; j < C; j++) sum += bf16_to_f32(w[j]) * bf16_to_f32(x[j]);
    return sum;
}

/* amx's products are the model's bit for bit: rows that leave a partial
 * block of 16, 83 columns (two groups and a tail), 17 tokens (a partial
 * token group), at 1 and 2 threads; and a weight made under another
 * setting (its tile copy made at its first product) gives the same. */
static void amx_model_case(void) {
    enum { R = 1037, N = 17 };
    const int colss[2] = {83, 576};
    BackendOptions o;
    backend_options_default(&o);
    int bad = 0, bad_late = 0;
    for (int c = 0; c < 2; c++) {
        const int C = colss[c];
        float *wf = xmalloc(sizeof(float) * R * C), *x = xmalloc(sizeof(float) * N * C);
        float *out = xmalloc(sizeof(float) * N * R);
        uint16_t *wb = xmalloc(sizeof(uint16_t) * R * C), *xb = xmalloc(sizeof(uint16_t) * N * C);
        fill(wf, (size_t)R * C, 0.5f);
        fill(x, (size_t)N * C, 3);
        f32_to(DT_BF16, wf, wb, (size_t)R * C);
        for (int i = 0; i < N * C; i++) xb[i] = f32_to_bf16(x[i]);
        Weight w;
        o.cpu_fast_gemm = CPU_GEMM_BF16;
        REQUIRE(backend_configure(&o) == 0, "%s", err_get());
        cpu_backend.weight(&w, wb, DT_BF16, R, C);   /* made without the tiles */
        o.cpu_fast_gemm = CPU_GEMM_AMX;
        REQUIRE(backend_configure(&o) == 0, "%s", err_get());
        for (int pass = 0; pass < 3; pass++) {
            cpu_threads_set(pass == 2 ? 1 : cpu_threads_max());
            cpu_backend.matmul(out, x, &w, N);
            for (int t = 0; t < N; t++)
                for (int r = 0; r < R; r++) {
                    const float ref = amx_model_dot(wb + (size_t)r * C, xb + (size_t)t * C, C);
                    const int differs = memcmp(&ref, &out[(size_t)t * R + r], sizeof ref) != 0;
                    bad += differs;
                    bad_late += pass == 0 && differs;
                }
        }
        cpu_threads_set(cpu_threads_max());
        cpu_backend.weight_release(&w);
        free(wf); free(x); free(out); free(wb); free(xb);
    }
    CHECK(bad_late == 0, "amx: %d sums of a weight made under another setting differ from the model", bad_late);
    CHECK(bad == 0, "amx: %d sums differ from the tile multiply's model (matmul_amx.c)", bad);
    backend_options_default(&o);
    backend_configure(&o);
}

/* The same for amx, where the CPU has AMX-BF16; and its sums are not the
 * AVX512-BF16 path's (another arithmetic, reported as such). */
static void test_cpu_amx_gemm(void) {
    BackendOptions o;
    backend_options_default(&o);
    o.cpu_fast_gemm = CPU_GEMM_AMX;
    if (!cpu_amx_ready()) {
        CHECK(backend_configure(&o) == -1 && strstr(err_get(), "AMX-BF16"), "amx accepted without AMX-BF16: %s",
              err_get());
        printf("# skipped: amx products (no AMX-BF16 on this CPU or build)\n");
        backend_options_default(&o);
        backend_configure(&o);
        return;
    }
    fast_gemm_case(CPU_GEMM_AMX);
    amx_model_case();
    enum { R = 64, C = 576, N = 8 };
    float *wf = xmalloc(sizeof(float) * R * C), *x = xmalloc(sizeof(float) * N * C);
    float *out[2] = {xmalloc(sizeof(float) * N * R), xmalloc(sizeof(float) * N * R)};
    uint16_t *wb = xmalloc(sizeof(uint16_t) * R * C);
    fill(wf, (size_t)R * C, 0.5f);
    fill(x, (size_t)N * C, 1);
    f32_to(DT_BF16, wf, wb, (size_t)R * C);
    const int modes[2] = {CPU_GEMM_BF16, CPU_GEMM_AMX};
    for (int i = 0; i < 2; i++) {
        o.cpu_fast_gemm = modes[i];
        REQUIRE(backend_configure(&o) == 0, "%s", err_get());
        Weight w;
        cpu_backend.weight(&w, wb, DT_BF16, R, C);
        cpu_backend.matmul(out[i], x, &w, N);
        cpu_backend.weight_release(&w);
    }
    CHECK(memcmp(out[0], out[1], sizeof(float) * N * R) != 0, "amx gives the AVX512-BF16 path's sums bit for bit");
    free(wf); free(x); free(out[0]); free(out[1]); free(wb);
    backend_options_default(&o);
    backend_configure(&o);
}

/* --kv-dtype bf16: the CPU cache rounds K and V to BF16 as written (one slot
 * of attention returns its V as stored), and every attention case (masks,
 * kv_keep, several sequences in a call) matches the naive reference that
 * keeps the same rounded values. */
static void test_kv_bf16_against_naive(void) {
    BackendOptions o;
    backend_options_default(&o);
    o.kv_dtype = DT_BF16;
    REQUIRE(backend_configure(&o) == 0, "%s", err_get());
    const float x = 1.0f + 1.0f / 1024;   /* between two BF16 values: rounds to 1 */
    float k[8], v[8], q[8], out[8];
    for (int i = 0; i < 8; i++) { k[i] = x; v[i] = x * (i + 1); q[i] = 0.5f; }
    KVCache *c = cpu_backend.kv_create(1, 4, 8);
    REQUIRE(c, "kv_create");
    cpu_backend.kv_write(c, 0, 0, k, v, 1);
    const int none = 0;
    cpu_backend.attention(out, q, &(AttnSeq){c, 0, 1, &none, 1, NULL, 0, 0, NULL}, 1, 0, 1, 1, 8);
    for (int i = 0; i < 8; i++) {
        const uint32_t u = (uint32_t)f32_to_bf16(v[i]) << 16;
        float want;
        memcpy(&want, &u, 4);
        CHECK(out[i] == want && want != v[i], "slot value %d: %.9g, want the BF16 value %.9g (of %.9g)", i, out[i], want,
              v[i]);
    }
    cpu_backend.kv_free(c);
    float w = 0;
    const int cases[][3] = {{0, 1, 0}, {10, 3, 1}, {5, 4, 0}, {20, 9, 1}, {30, 60, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        w = fmaxf(w, check_attention(&cpu_backend, &naive_backend, cases[i][0], cases[i][1], cases[i][2]));
    w = fmaxf(w, check_attention_llama_shapes(&cpu_backend, &naive_backend));
    w = fmaxf(w, check_attention_seqs(&cpu_backend, &naive_backend));
    CHECK(w <= PARITY_TOL_ATTENTION, "BF16 cache: CPU attention differs from the naive reference by %.2e", w);
    backend_options_default(&o);
    backend_configure(&o);
}

/* sample_dev on the CPU draws from the distribution kernels.h defines
 * (the parity against the naive backend, in test_cpu_against_naive, says
 * it draws the ids of that definition bit for bit). */
static void test_sample_distribution(void) {
    CHECK(check_sample_distribution(&cpu_backend) == 0, "the CPU's sample_dev is not distributed as defined");
}

/* argmax's vector scan against the scalar rule (the first index whose
 * value no later one exceeds under >): ties across and within lanes, the
 * largest in the tail, NaNs (never chosen; one at 0 keeps 0), -inf rows. */
static void test_argmax_edge_cases(void) {
    enum { V = 1000, ROWS = 8 };
    float *l = malloc(sizeof(float) * ROWS * V);
    int got[ROWS], want[ROWS];
    for (int i = 0; i < ROWS * V; i++) l[i] = (float)((i * 7919) % 13);
    l[1 * V + 999] = 20;                                  /* largest in the tail */
    l[2 * V + 5] = NAN; l[2 * V + 17] = 12.5f;            /* a NaN early, the max after */
    l[3 * V + 0] = NAN;                                   /* NaN at 0: 0 */
    for (int j = 0; j < V; j++) l[4 * V + j] = -INFINITY; /* all -inf: 0 */
    for (int j = 0; j < V; j++) l[5 * V + j] = j % 2 ? NAN : 1.0f;   /* NaNs and ties */
    l[6 * V + 0] = 12;                                    /* the max at 0, tied later */
    for (int j = 0; j < V; j++) l[7 * V + j] = j == 500 ? INFINITY : -INFINITY;
    cpu_backend.argmax(l, ROWS, V, got);
    naive_backend.argmax(l, ROWS, V, want);
    for (int r = 0; r < ROWS; r++) CHECK(got[r] == want[r], "row %d: argmax %d, the scalar rule gives %d", r, got[r], want[r]);
    CHECK(want[1] == 999 && want[3] == 0 && want[4] == 0 && want[6] == 0 && want[7] == 500, "the reference's rule changed");
    free(l);
}

/* A tree's query attends to the committed slots and its ancestors' slots
 * among the tree's; the same token decoded alone attends to the same
 * values in contiguous slots.  Both must sum alike, bit for bit, or greedy
 * verification could pick another token than decoding at a near tie: for
 * the vector path (head size 64, SmolLM2's 9 heads over 3) and the generic
 * one (head size 24), F32 and BF16 caches, past 16 slots of context so the
 * 16-lane sums see the tree's gaps. */
static void test_tree_query_sums_as_decode(void) {
    enum { PAST = 37, TREE = 12, NH = 9, NKV = 3 };
    /* a tree: parents of nodes 1..11 (node 0 is the root); node 11's path is 0, 2, 6, 11 */
    static const int parent[TREE] = {-1, 0, 0, 1, 1, 2, 2, 3, 5, 6, 6, 6};
    const int hds[2] = {64, 24};
    const DType dts[2] = {DT_F32, DT_BF16};
    for (int d = 0; d < 2; d++)
        for (int h = 0; h < 2; h++) {
            BackendOptions o;
            backend_options_default(&o);
            o.kv_dtype = dts[d];
            REQUIRE(backend_configure(&o) == 0, "%s", err_get());
            const int hd = hds[h], kvd = NKV * hd, qd = NH * hd, nctx = PAST + TREE;
            float *k = malloc(sizeof(float) * nctx * kvd), *v = malloc(sizeof(float) * nctx * kvd);
            float *q = malloc(sizeof(float) * TREE * qd), *out = malloc(sizeof(float) * TREE * qd);
            fill(k, (size_t)nctx * kvd, 1); fill(v, (size_t)nctx * kvd, 1); fill(q, (size_t)TREE * qd, 2);
            uint8_t *mask = calloc((size_t)TREE * TREE, 1);   /* the tree's window */
            for (int a = 0; a < TREE; a++)
                for (int p = a; p >= 0; p = parent[p]) mask[(size_t)a * TREE + p] = 1;
            KVCache *tree = cpu_backend.kv_create(1, nctx, kvd), *line = cpu_backend.kv_create(1, nctx, kvd);
            REQUIRE(tree && line, "kv_create");
            cpu_backend.kv_write(tree, 0, 0, k, v, nctx);
            const int past = PAST, line_past = PAST + 3;
            cpu_backend.attention(out, q, &(AttnSeq){tree, 0, TREE, &past, nctx, mask, TREE, 0, NULL}, 1, 0, NH, NKV, hd);
            /* node 11 decoded alone: the committed slots, then its path 0, 2, 6, 11 */
            static const int path[4] = {0, 2, 6, 11};
            cpu_backend.kv_write(line, 0, 0, k, v, PAST);
            for (int p = 0; p < 4; p++)
                cpu_backend.kv_write(line, 0, PAST + p, k + (size_t)(PAST + path[p]) * kvd, v + (size_t)(PAST + path[p]) * kvd, 1);
            float *alone = malloc(sizeof(float) * qd);
            cpu_backend.attention(alone, q + (size_t)11 * qd, &(AttnSeq){line, 0, 1, &line_past, PAST + 4, NULL, 0, 0, NULL}, 1, 0,
                                  NH, NKV, hd);
            CHECK(!memcmp(alone, out + (size_t)11 * qd, sizeof(float) * qd),
                  "head size %d, %s cache: a tree row differs from the token decoded alone", hd, dtype_name(dts[d]));
            cpu_backend.kv_free(tree); cpu_backend.kv_free(line);
            free(k); free(v); free(q); free(out); free(mask); free(alone);
        }
    BackendOptions o;
    backend_options_default(&o);
    backend_configure(&o);
}

/* The backend's thread pool: every piece of a region runs exactly once,
 * with the region's piece count, whoever claims it; a region inside a
 * piece runs alone on its caller; many short regions in a row (the decode
 * pattern) lose and repeat nothing. */
typedef struct { _Atomic int runs[64]; _Atomic int parts_seen; _Atomic int nested_ok; int nest; } PoolProbe;
static void probe_inner(void *v, int part, int parts) {
    PoolProbe *p = v;
    if (part == 0 && parts == 1) atomic_fetch_add(&p->nested_ok, 1);
}
static void probe_piece(void *v, int part, int parts) {
    PoolProbe *p = v;
    atomic_fetch_add(&p->runs[part], 1);
    atomic_store(&p->parts_seen, parts);
    if (p->nest) cpu_parallel(probe_inner, p, 1);
}
static void count_piece(void *v, int part, int parts) {
    (void)parts;
    atomic_fetch_add((_Atomic long *)v, part + 1);
}

/* n units of the thread tuner whose cycles take us_one microseconds on one
 * thread and us_all on all; how many ran on all threads, and of the last
 * `tail` units how many. */
static int tuner_units(BackendTuner *t, int n, int us_one, int us_all, int tail, int *all_in_tail) {
    int all = 0;
    *all_in_tail = 0;
    for (int i = 0; i < n; i++) {
        cpu_backend.unit_begin(t);
        const int us = t->slot ? us_all : us_one;
        nanosleep(&(struct timespec){0, us * 1000L}, NULL);
        all += t->slot;
        if (i >= n - tail) *all_in_tail += t->slot;
        cpu_backend.unit_end(t);
    }
    return all;
}

/* The backend's thread tuner: where one thread is three times faster it
 * settles on one thread, its windows growing so that probes on all threads
 * become rare (about 14 of 3,000 cycles; under 4% allows one window of 48
 * misjudged by a probe that a neighbouring test run disturbed); when the
 * costs turn, it follows within the longest window (768 cycles) and stays.
 * A stall in a late probe misjudges a window of 768, so the whole run gets
 * three tries (test_tuner_weighs_units says why). */
static void test_tuner_backs_off(void) {
    if (cpu_threads_max() < 2) SKIP("one CPU thread only");
    BackendTuner t;
    int all = 0, all2 = 0, tail = 0, tail2 = 0, window = 0;
    int64_t one_before = 0;
    for (int try = 0; try < 3; try++) {
        t = (BackendTuner){0};
        all = tuner_units(&t, 3000, 300, 900, 500, &tail);
        one_before = t.one_thread_units;
        window = t.window;
        all2 = tuner_units(&t, 1600, 900, 300, 500, &tail2);
        if (all < 120 && tail <= 4 && window == 768 && tail2 >= 490) break;
    }
    CHECK(all < 120 && tail <= 4, "one thread is faster: %d of 3000 cycles on all threads, %d of the last 500", all,
          tail);
    CHECK(window == 768, "windows confirmed again and again did not grow to 768 cycles (%d)", window);
    CHECK(one_before == 3000 - all, "%lld units counted on one thread, %d ran there", (long long)one_before, 3000 - all);
    CHECK(t.one_thread_units - one_before == 1600 - all2, "then %lld units counted on one thread, %d ran there",
          (long long)(t.one_thread_units - one_before), 1600 - all2);
    CHECK(tail2 >= 490, "all threads became faster: only %d of the last 500 cycles on them", tail2);
    cpu_threads_set(cpu_threads_max());
}

/* Units of different sizes: all threads take 300 us per unit of work and one
 * thread 480, but the one-thread probes meet cycles of work 1 and the
 * all-thread probes cycles of work 10 (a chain that grew).  Weighed by
 * work (t.work, as the decoder's cost model sets it) the tuner keeps all
 * threads; by time alone it would choose one thread for the window. */
static int sized_units(BackendTuner *t, int n, int weigh, int *probes) {
    int all = 0;
    for (int i = 0; i < n; i++) {
        cpu_backend.unit_begin(t);
        *probes += t->probe;
        const int work = t->slot ? 10 : 1;
        nanosleep(&(struct timespec){0, (t->slot ? 300 : 480) * work * 1000L}, NULL);
        all += t->slot;
        t->work = weigh ? work : 0;
        cpu_backend.unit_end(t);
    }
    return all;
}

/* A probe is one sleep, and a process beside the test (make test runs two
 * at once) can stall it by a scheduler slice: a window of n units from a
 * fresh tuner gets three tries to end on want_best with want units on all
 * threads (or, with count_probes, want probe units); the last try's count.
 * A tuner that decides wrongly fails all three. */
static int sized_tries(BackendTuner *t, int n, int weigh, int count_probes, int want_best, int want) {
    int count = 0;
    for (int try = 0; try < 3; try++) {
        *t = (BackendTuner){0};
        int probes = 0;
        const int all = sized_units(t, n, weigh, &probes);
        count = count_probes ? probes : all;
        if (t->best == want_best && count == want) break;
    }
    return count;
}

static void test_tuner_weighs_units(void) {
    if (cpu_threads_max() < 2) SKIP("one CPU thread only");
    BackendTuner weighed, timed, two;
    const int all_weighed = sized_tries(&weighed, 48, 1, 0, 1, 46);
    CHECK(weighed.best == 1 && all_weighed == 46, "weighed by work: best %d, %d of 48 units on all threads (want 46)",
          weighed.best, all_weighed);
    const int all_timed = sized_tries(&timed, 48, 0, 0, 0, 2);
    CHECK(timed.best == 0 && all_timed == 2, "by time alone the probes' sizes decide: best %d, %d of 48 on all threads",
          timed.best, all_timed);
    /* probes: the first window's four (nothing chosen yet), then the two of
     * one thread in the next (all threads chosen) */
    const int probes = sized_tries(&two, 96, 1, 1, 1, 6);
    CHECK(two.best == 1 && probes == 6, "over two windows: best %d, %d probe units (want 6)", two.best, probes);
    cpu_threads_set(cpu_threads_max());
}

/* A unit the tuner runs on one thread leaves every thread to what runs
 * after it, outside any unit (a prompt's prefill, a calibration). */
static void test_tuner_unit_restores_threads(void) {
    if (cpu_threads_max() < 2) SKIP("one CPU thread only");
    BackendTuner t = {0};
    static _Atomic long sum;
    cpu_backend.unit_begin(&t);   /* the first probe: one thread */
    atomic_store(&sum, 0);
    cpu_parallel(count_piece, (void *)&sum, 1);
    const long inside = atomic_load(&sum);
    cpu_backend.unit_end(&t);
    atomic_store(&sum, 0);
    cpu_parallel(count_piece, (void *)&sum, 1);
    const long nt = cpu_threads_max(), after = atomic_load(&sum);
    CHECK(t.slot == 0 && inside == 1, "the first unit: slot %d, pieces summing to %ld (want one thread's 1)", t.slot, inside);
    CHECK(after == nt * (nt + 1) / 2, "after a one-thread unit: pieces summing to %ld, want all %ld threads' %ld", after,
          nt, nt * (nt + 1) / 2);
    cpu_threads_set(cpu_threads_max());
}

static void test_thread_pool(void) {
    if (cpu_threads_max() < 2) SKIP("one CPU thread only");
    const int nt = cpu_threads_max() < 64 ? cpu_threads_max() : 64;
    cpu_threads_set(nt);
    static PoolProbe p;
    p.nest = 1;
    cpu_parallel(probe_piece, &p, 1);
    CHECK(atomic_load(&p.parts_seen) == nt, "pieces %d, want the thread count %d", atomic_load(&p.parts_seen), nt);
    for (int i = 0; i < nt; i++) CHECK(atomic_load(&p.runs[i]) == 1, "piece %d ran %d times", i, atomic_load(&p.runs[i]));
    CHECK(atomic_load(&p.nested_ok) == nt, "a region inside a piece should run alone: %d of %d", atomic_load(&p.nested_ok), nt);
    static _Atomic long sum;
    const int regions = 20000;
    for (int r = 0; r < regions; r++) cpu_parallel(count_piece, (void *)&sum, 1);
    CHECK(atomic_load(&sum) == (long)regions * nt * (nt + 1) / 2, "%d regions: sum %ld, want %ld", regions,
          atomic_load(&sum), (long)regions * nt * (nt + 1) / 2);
    atomic_store(&sum, 0);
    cpu_parallel(count_piece, (void *)&sum, 0);   /* too little work: the caller alone, one piece */
    CHECK(atomic_load(&sum) == 1, "parallel 0: sum %ld, want 1", atomic_load(&sum));
    cpu_threads_set(1);
    atomic_store(&sum, 0);
    cpu_parallel(count_piece, (void *)&sum, 1);
    CHECK(atomic_load(&sum) == 1, "one thread: sum %ld, want 1", atomic_load(&sum));
    cpu_threads_set(cpu_threads_max());
}

/* What decides a replay (kernels/base/replay.h): contexts share the
 * attention's bound in buckets, a signature tells apart any change of the
 * bytes signed or of their order, and the cache replaces the least recently
 * used recording. */
static void test_replay_keys(void) {
    const int slots = 4096;
    int prev = 0, distinct = 0, bad = 0;
    for (int ctx = 1; ctx <= slots; ctx++) {
        const int b = attn_ctx_bound(ctx, slots);
        if (b < ctx || b > slots || (b % ATTN_CTX_BUCKET && b != slots) || b < prev) bad++;
        distinct += b != prev;
        prev = b;
    }
    CHECK(!bad, "%d contexts got a bound below them, past the cache, off a bucket or below an earlier one", bad);
    CHECK(distinct == slots / ATTN_CTX_BUCKET, "%d bounds for contexts 1..%d, want %d", distinct, slots,
          slots / ATTN_CTX_BUCKET);
    CHECK(attn_ctx_bound(1000, 1100) == 1024 && attn_ctx_bound(1050, 1100) == 1100 && attn_ctx_bound(1200, 1100) == 1200,
          "a bound near or past the cache's end: %d %d %d", attn_ctx_bound(1000, 1100), attn_ctx_bound(1050, 1100),
          attn_ctx_bound(1200, 1100));

    /* verification rows: n padded to a bucket at most half again as large
     * (2 log2 buckets up to the cap), never past the cap */
    int buckets = 0, prev_rows = 0, bad_rows = 0;
    const int cap = 300;
    for (int n = 1; n <= cap; n++) {
        const int r = verify_rows_bound(n, cap);
        bad_rows += r < n || r > cap || r < prev_rows || (n > 8 && 2 * r > 3 * n);
        buckets += r != prev_rows;
        prev_rows = r;
    }
    CHECK(!bad_rows, "%d verification sizes padded below themselves, past the cap, out of order or by more than half", bad_rows);
    CHECK(buckets <= 16 && verify_rows_bound(9, cap) == 12 && verify_rows_bound(13, cap) == 16 &&
              verify_rows_bound(17, cap) == 24 && verify_rows_bound(61, cap) == 64 && verify_rows_bound(5, cap) == 8 &&
              verify_rows_bound(1, cap) == 1 && verify_rows_bound(70, 66) == 70 && verify_rows_bound(60, 62) == 62,
          "%d buckets for trees of 1..%d nodes; 9 -> %d, 13 -> %d, 17 -> %d, 61 -> %d, 5 -> %d, 1 -> %d", buckets, cap,
          verify_rows_bound(9, cap), verify_rows_bound(13, cap), verify_rows_bound(17, cap), verify_rows_bound(61, cap),
          verify_rows_bound(5, cap), verify_rows_bound(1, cap));

    unsigned char a[64], b2[64];
    for (int i = 0; i < 64; i++) a[i] = b2[i] = (unsigned char)(i * 37 + 5);
    const uint64_t h = replay_sign(REPLAY_SIGN_INIT, a, sizeof a);
    CHECK(h == replay_sign(REPLAY_SIGN_INIT, b2, sizeof b2), "equal bytes, different signatures");
    int same = 0;
    for (int i = 0; i < 64; i++)
        for (int bit = 0; bit < 8; bit++) {
            b2[i] ^= (unsigned char)(1 << bit);
            same += replay_sign(REPLAY_SIGN_INIT, b2, sizeof b2) == h;
            b2[i] ^= (unsigned char)(1 << bit);
        }
    CHECK(!same, "%d one-bit changes kept the signature", same);
    const uint64_t ab = replay_sign(replay_sign(REPLAY_SIGN_INIT, a, 32), a + 32, 32),
                   ba = replay_sign(replay_sign(REPLAY_SIGN_INIT, a + 32, 32), a, 32);
    CHECK(ab == h && ab != ba, "pieces signed in turn must equal the whole and depend on their order");

    static ReplayCache c;
    memset(&c, 0, sizeof c);
    CHECK(replay_find(&c, 0) < 0 && replay_find(&c, 42) < 0 && c.misses == 2, "an empty cache found something");
    for (uint64_t k = 1; k <= REPLAY_ENTRIES; k++) {
        const int v = replay_victim(&c);
        CHECK(v >= 0 && v < REPLAY_ENTRIES && !c.key[v], "key %llu: victim %d is not a free entry", (unsigned long long)k, v);
        replay_store(&c, v, k * 1000);
    }
    int lost = 0;
    for (uint64_t k = REPLAY_ENTRIES; k >= 1; k--) lost += replay_find(&c, k * 1000) < 0;   /* key 1000 used last */
    CHECK(!lost && c.hits == REPLAY_ENTRIES, "%d of %d stored keys not found", lost, REPLAY_ENTRIES);
    const int v = replay_victim(&c);
    CHECK(c.key[v] == REPLAY_ENTRIES * 1000ull, "a full cache gives up key %llu, not the least recently used %llu",
          (unsigned long long)c.key[v], (unsigned long long)(REPLAY_ENTRIES * 1000ull));
    replay_drop(&c, v);
    CHECK(replay_find(&c, REPLAY_ENTRIES * 1000ull) < 0 && replay_victim(&c) == v, "a dropped entry is still found or not free");
}

/* backend_recorded's protocol (kernels.h): record_end's 1 asks for the ops
 * once more, 0 means they ran, -1 that they must run directly. */
static int fake_replies[4], fake_next, fake_begun, ops_issued;
static int fake_begin(void) { fake_begun++; return 1; }
static int fake_end(void) { return fake_replies[fake_next++]; }
static void count_ops(void *arg) { (void)arg; ops_issued++; }
static void test_recorded_protocol(void) {
    Backend be = cpu_backend;
    be.record_begin = fake_begin;
    be.record_end = fake_end;
    const struct { int replies[3], issued; } cases[] = {
        {{0}, 1},            /* signed, replayed */
        {{1, 0}, 2},         /* signed, then recorded and launched */
        {{1, -1}, 3},        /* signed, recording spoiled: run directly */
        {{-1}, 2},           /* signing spoiled: run directly */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        memcpy(fake_replies, cases[c].replies, sizeof cases[c].replies);
        fake_next = fake_begun = ops_issued = 0;
        backend_recorded(&be, count_ops, NULL);
        CHECK(fake_begun == 1 && ops_issued == cases[c].issued, "case %zu: begun %d, ops issued %d times, want %d", c,
              fake_begun, ops_issued, cases[c].issued);
    }
    ops_issued = 0;
    backend_recorded(&cpu_backend, count_ops, NULL);
    CHECK(ops_issued == 1, "a backend without recording issued the ops %d times", ops_issued);
}

int main(void) {
    RUN(test_replay_keys);
    RUN(test_recorded_protocol);
    RUN(test_thread_pool);
    RUN(test_tuner_backs_off);
    RUN(test_tuner_weighs_units);
    RUN(test_tuner_unit_restores_threads);
    RUN(test_cpu_backend_is_complete);
    RUN(test_cpu_against_naive);
    RUN(test_matmul_tokens_independent);
    RUN(test_matmul_uncached_tokens_independent);
    RUN(test_f32_copy_at_first_many_token_product);
    RUN(test_matmul_many_equals_matmuls);
    RUN(test_harness_catches_wrong_kernels);
    RUN(test_kv_bf16_against_naive);
    RUN(test_cpu_fast_gemm);
    RUN(test_cpu_amx_gemm);
    RUN(test_argmax_edge_cases);
    RUN(test_sample_distribution);
    RUN(test_tree_query_sums_as_decode);
    return h_done();
}
