/* The CUDA backend (kernels/cuda/) against the CPU backend.
 *
 * Runs everywhere it is built with nvcc (-DC2T_CUDA):
 *  - both backends fill every BACKEND_OPS member;
 *  - failures are reported as "file:line: ..." through err_set, never exit.
 * Needs a visible GPU (otherwise each prints one SKIP line, never a PASS):
 *  - the parity harness of tests/parity.h, CUDA vs CPU, with the harness's
 *    own tolerances (see below), plus shapes of real models (head_dim 128
 *    and 256, GQA 32/8, context 1000 split over blocks, vocabulary 128256
 *    with M = 1000, GEMMs over 12 to 80 tokens on each of the three paths);
 *  - full-model logits of llama2_f32 and llama3_bf16: prefill, a tree-masked
 *    verification forward, KV keep of a path and a decode step after it;
 *  - greedy decoding with the ar and eagle2 policies gives identical tokens
 *    on both backends (and eagle2 = ar);
 *  - batched forwards (three sequences, each its own cache, prompts then a
 *    tree, a decode token and a causal pair) and batched LM-head rows equal
 *    the CPU's; spec-eval --device cuda --batch 3 is lossless;
 *  - sample_dev: distributed as kernels.h defines, the same key the same ids,
 *    the CPU's ids on rows of a 50,000-id vocabulary;
 *  - GGUF block types (kernels/cuda/matmul_quant.cu), per type: products
 *    of 1, 2, 5, 16 and 64 tokens equal the CPU backend's bit for bit (odd
 *    row counts, rows of several blocks), matmul_many equals matmuls,
 *    embedding rows equal quant_dequant_row, and greedy decoding of
 *    tests/ckpt/qwen2_quant gives the CPU's tokens, lossless with an LM
 *    draft both ways.
 * On the CPU, GPU or not (test_cuda_quant_steps_on_host): the block
 * products' steps as the CUDA kernels take them (kernels/base/quant_dot.h)
 * give the CPU backend's activations, products and embedding rows bit for
 * bit; block-type weights the CUDA backend must refuse are refused.
 * Without nvcc every other test SKIPs.
 *
 * Tolerances (|Δ| ≤ TOL · max(1, max|ref|)): the defaults of tests/parity.h
 * apply unchanged — 1e-4 for matmul (the F16/BF16 GEMM splits activations
 * into two halves of the weight dtype, ~1e-5 relative; F32 GEMM is true
 * FP32; the GEMV and tiled paths are F32 like the CPU), 1e-5 for element-wise ops (same
 * F32 formulas, no fast math, no FMA contraction in RoPE), 1e-4 for
 * attention (online softmax vs two-pass) and probabilities / entropies; ids
 * exact.  Full-model logits: 1e-4 · max|logit|, as tests/test_runtime.c
 * bounds the CPU against transformers. */
#include "tests/harness.h"
#include "kernels/base/util.h"
#include "kernels/base/quant_dot.h"
#include "kernels/base/rng.h"
#include "kernels/kernels.h"

/* ---- GGUF block types: the CUDA kernels' steps, on the host ---- */

static const DType QTYPES[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_NL, DT_IQ4_XS, DT_Q2_K, DT_Q3_K};
#define NQTYPES (int)(sizeof QTYPES / sizeof *QTYPES)
static const int QNS[] = {1, 2, 5, 16, 64};
#define NQNS (int)(sizeof QNS / sizeof *QNS)
#define QN_MAX 64

static Rng qrng = {{0x2545F4914F6CDD1DULL, 0x9E3779B97F4A7C15ULL, 0xBF58476D1CE4E5B9ULL, 0x94D049BB133111EBULL}};
static uint32_t qrnd(void) { return (uint32_t)(rng_next(&qrng) >> 32); }

/* rows x cols random blocks of type t: random bytes, the half-precision
 * scale and minimum of either sign and magnitude 2^-9 .. 2^-4 */
static uint8_t *q_weight(DType t, int64_t rows, int64_t cols) {
    const int64_t bytes = rows * quant_row_bytes(t, cols), bb = (int64_t)quant_block_bytes(t);
    int d_at, m_at;
    quant_half_offsets(t, &d_at, &m_at);
    uint8_t *w = xmalloc((size_t)bytes);
    for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)(qrnd() >> 24);
    for (int64_t b = 0; b < bytes / bb; b++)
        for (int k = 0; k < 1 + (m_at >= 0); k++) {
            const uint16_t h = (uint16_t)((qrnd() & 1) << 15 | (6 + qrnd() % 6) << 10 | (qrnd() & 0x3FF));
            memcpy(w + b * bb + (k ? m_at : d_at), &h, 2);
        }
    return w;
}

/* x[n][cols]: a scale per 32 elements from 2^-3 to 2^3 (blocks differ in
 * range), one block of zeros */
static float *q_acts(int n, int64_t cols) {
    float *x = xmalloc(sizeof(float) * (size_t)(n * cols)), scale = 1;
    for (int64_t i = 0; i < n * cols; i++) {
        if (i % 32 == 0) scale = ldexpf(1.0f, (int)(qrnd() % 7) - 3);
        x[i] = ((float)(qrnd() >> 8) / 8388608.0f - 1.0f) * scale;
    }
    memset(x + (n * cols >= 64 ? 32 : 0), 0, 32 * sizeof(float));
    return x;
}

/* q8_act_kernel on the host, block by block: q, d, d times the block's sum
 * (blocks of 32) and the sums per 16, from quant_dot.h's steps. */
static void emu_acts(const float *x, int64_t cols, int block, int8_t *q, float *d, float *sd, int *s16) {
    for (int64_t b = 0; b < cols / block; b++) {
        float amax = 0;
        int bad = 0, s = 0;
        for (int j = 0; j < block; j++) {
            const float a = fabsf(x[b * block + j]);
            bad |= !(a <= 3.402823466e38f);
            amax = fmaxf(amax, a);
        }
        float id;
        const int zero = qd_q8_scale(amax, bad, block, &d[b], &id);
        for (int j = 0; j < block; j++) {
            q[b * block + j] = (int8_t)qd_q8(x[b * block + j], id, zero);
            s += q[b * block + j];
            if (j % 16 == 15) { s16[(b * block + j) / 16] = s; s = 0; }
        }
        if (block == 32) sd[b] = d[b] * (float)(s16[2 * b] + s16[2 * b + 1]);
    }
}

/* qmm_kernel's sums for one (row, token) on the host: each unit's exact
 * part, the block's terms, one fmaf chain over the blocks in order. */
static float emu_dot(DType t, const uint8_t *row, int64_t cols, const int8_t *q, const float *d, const float *sd,
                     const int *s16) {
    const int E = (int)quant_block_elems(t), upb = E / 32, bb = (int)quant_block_bytes(t);
    float acc = 0;
    for (int64_t b = 0; b < cols / E; b++) {
        const uint8_t *blk = row + b * bb;
        int isum = 0, msum = 0;
        for (int g = 0; g < upb; g++) {
            const int64_t u = b * upb + g;
            uint32_t w[8], xw[8];
            int is, ms;
            qd_unit(t, blk, g, w);
            memcpy(xw, q + 32 * u, 32);
            qd_unit_sums(t, blk, g, w, xw, s16[2 * u], s16[2 * u + 1], &is, &ms);
            isum += is;
            msum += ms;
        }
        float ta[2], tb[2];
        const int k = qd_terms(t, blk, isum, msum, d[b], upb == 1 ? sd[b] : 0.0f, ta, tb);
        for (int j = 0; j < k; j++) acc = fmaf(ta[j], tb[j], acc);
    }
    return acc;
}

/* Per type, on rows of several blocks (13 rows; 512 and 1536 columns):
 * the host run of the kernels' steps gives quant_q8_row's activations
 * and the CPU backend's product of every token bit for bit (at each n of
 * QNS, all tokens in one call), and qd_dequant gives quant_dequant_row.
 * So the arithmetic the GPU runs is the CPU's; what is left to a GPU is
 * the kernels' indexing, lanes and launches (test_cuda_quant_parity). */
static void test_cuda_quant_steps_on_host(void) {
    enum { ROWS = 13 };
    const int64_t colss[2] = {512, 1536};
    int bad_act = 0, bad_dot = 0, bad_deq = 0, compared = 0;
    for (int ti = 0; ti < NQTYPES; ti++)
        for (int c = 0; c < 2; c++) {
            const DType t = QTYPES[ti];
            const int64_t cols = colss[c], rb = quant_row_bytes(t, cols);
            const int block = quant_act_block(t);
            uint8_t *wq = q_weight(t, ROWS, cols);
            float *x = q_acts(QN_MAX, cols), *deq = xmalloc(sizeof(float) * (size_t)cols);
            Weight w;
            REQUIRE(cpu_backend.weight(&w, wq, t, ROWS, cols) == 0, "%s", err_get());
            int8_t *q = xmalloc((size_t)cols), *qr = xmalloc((size_t)cols);
            float *d = xmalloc(sizeof(float) * (size_t)cols), *dr = xmalloc(sizeof(float) * (size_t)cols);
            float *sd = xmalloc(sizeof(float) * (size_t)cols), *out = xmalloc(sizeof(float) * QN_MAX * ROWS);
            int *s16 = xmalloc(sizeof(int) * (size_t)cols);
            int16_t *sr = xmalloc(sizeof(int16_t) * (size_t)cols);
            for (int k = 0; k < NQNS; k++) {
                const int n = QNS[k];
                cpu_backend.matmul(out, x, &w, n);
                for (int tok = 0; tok < n; tok++) {
                    const float *xt = x + tok * cols;
                    emu_acts(xt, cols, block, q, d, sd, s16);
                    quant_q8_row(xt, cols, block, qr, dr, sr);
                    bad_act += memcmp(q, qr, (size_t)cols) || memcmp(d, dr, sizeof(float) * (size_t)(cols / block));
                    for (int64_t g = 0; g < cols / 16; g++) bad_act += block == 256 && s16[g] != sr[g];
                    for (int r = 0; r < ROWS; r++) {
                        const float e = emu_dot(t, wq + r * rb, cols, q, d, sd, s16);
                        bad_dot += memcmp(&e, &out[tok * ROWS + r], sizeof e) != 0;
                        compared++;
                    }
                }
            }
            for (int r = 0; r < ROWS; r++) {
                quant_dequant_row(t, wq + r * rb, deq, cols);
                for (int64_t e = 0; e < cols; e++) {
                    const int E = (int)quant_block_elems(t);
                    const float v = qd_dequant(t, wq + r * rb + e / E * (int64_t)quant_block_bytes(t), (int)(e % E));
                    bad_deq += memcmp(&v, &deq[e], sizeof v) != 0;
                }
            }
            cpu_backend.weight_release(&w);
            free(wq); free(x); free(deq); free(q); free(qr); free(d); free(dr); free(sd); free(out); free(s16); free(sr);
        }
    printf("# quant_dot.h's steps on the host: %d (row, token) products of %d types against the CPU backend\n", compared,
           NQTYPES);
    CHECK(bad_act == 0, "%d activation blocks differ from quant_q8_row", bad_act);
    CHECK(bad_dot == 0, "%d products differ from the CPU backend's bits", bad_dot);
    CHECK(bad_deq == 0, "%d dequantised elements differ from quant_dequant_row", bad_deq);
}

#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "tests/parity.h"
#include "infer/speculative/decode.h"
#include "infer/session/observers.h"
#include "infer/model/generate.h"
#include "infer/model/llama.h"

#define LOGITS_REL 1e-4f

#define NEED_GPU() do { if (!cuda_available()) SKIP("no CUDA device visible (built with nvcc; GPU tests not run)"); } while (0)
/* no CUDA call failed during the test */
#define NO_NEW_ERRORS(before) CHECK(cuda_errors() == (before), "%d CUDA errors, last: %s", cuda_errors() - (before), cuda_last_error())

static void test_cuda_backend_covers_interface(void) {
#define BOTH(op) CHECK(cpu_backend.op != NULL && cuda_backend.op != NULL, "op " #op ": cpu %s, cuda %s", \
                       cpu_backend.op ? "set" : "NULL", cuda_backend.op ? "set" : "NULL");
    BACKEND_OPS(BOTH)
#undef BOTH
    CHECK(cuda_backend.name && !strcmp(cuda_backend.name, "cuda"), "backend name");
    printf("# cuda_available() = %d\n", cuda_available());
}

/* Library code must not exit: bad input and failed CUDA calls come back as
 * one line naming file:line. */
static void test_cuda_errors_are_reported(void) {
    Weight w;
    int32_t ints[4] = {0};
    CHECK(cuda_backend.weight(&w, ints, DT_I32, 2, 2) == -1 && strstr(err_get(), "I32"),
          "an I32 weight accepted: %s", err_get());
    uint8_t blocks[2 * 144] = {0};   /* block types: matrices of whole blocks only, refused before any copy */
    CHECK(cuda_backend.weight(&w, blocks, DT_Q4_0, 1, 32) == -1 && strstr(err_get(), "matrix"),
          "a Q4_0 vector accepted: %s", err_get());
    CHECK(cuda_backend.weight(&w, blocks, DT_Q4_K, 2, 100) == -1 && strstr(err_get(), "whole blocks"),
          "Q4_K rows of 100 accepted: %s", err_get());
    int before = cuda_errors();
    if (!cuda_available()) {
        /* here every CUDA call fails: the op reports and returns */
        float *p = cuda_backend.alloc(16);
        CHECK(p == NULL, "alloc without a device returned memory");
        CHECK(strstr(err_get(), "kernels/cuda/backend.cu:") != NULL, "error does not name file:line: %s", err_get());
        CHECK(cuda_errors() > before && strstr(cuda_last_error(), "cudaMalloc"), "not counted: %s", cuda_last_error());
        CHECK(cuda_backend.kv_create(2, 8, 16) == NULL, "kv_create without a device");
        float f[4] = {1, 2, 3, 4};
        CHECK(cuda_backend.weight(&w, f, DT_F32, 2, 2) == -1, "weight upload without a device");
        printf("# without a device: %s\n", err_get());
        return;
    }
    KVCache *c = cuda_backend.kv_create(1, 8, 16);
    REQUIRE(c, "kv_create: %s", err_get());
    cuda_backend.kv_write(c, 0, 6, NULL, NULL, 4);   /* past the last slot: refused before any copy */
    CHECK(cuda_errors() == before + 1 && strstr(err_get(), "kernels/cuda/attention.cu:"), "kv_write overflow: %s", err_get());
    cuda_backend.kv_free(c);
}

static void test_cuda_parity_ops(void) {
    NEED_GPU();
    int before = cuda_errors();
    CHECK(parity(&cuda_backend, &cpu_backend, 1) == 0, "the CUDA backend differs from the CPU backend");
    NO_NEW_ERRORS(before);
}

/* Shapes the harness's small cases do not reach. */
static void test_cuda_parity_model_shapes(void) {
    NEED_GPU();
    int before = cuda_errors();
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    float w = 0;
    for (int d = 0; d < 3; d++) {
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 2, 1000, 512));    /* vector GEMV */
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 12, 1000, 512));   /* tiled, 2 token groups */
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 60, 192, 576));    /* tiled: SmolLM2's k_proj, a tree */
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 64, 250, 520));    /* tiled, a partial row group */
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 60, 576, 1536));   /* over the tiled work: stacked split */
        w = fmaxf(w, check_matmul(&cuda_backend, &cpu_backend, dts[d], 80, 1000, 512));   /* two GEMMs */
    }
    printf("# cuda vs cpu: matmul at model shapes worst %.2e\n", w);
    CHECK(w <= PARITY_TOL_MATMUL, "matmul at model shapes: %.2e", w);
    w = 0;
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 1000, 1, 0, 32, 8, 128, 0));   /* decode, split context */
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 900, 60, 1, 32, 8, 128, 0));   /* tree verification */
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 0, 300, 0, 8, 8, 64, 0));      /* prefill, MHA */
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 200, 5, 1, 4, 1, 256, 0));     /* > 48 KiB shared */
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 37, 9, 1, 12, 4, 80, 0));      /* head_dim not /32 */
    /* sliding windows (Gemma 3): a tree, a long prefill, Gemma 3's head size */
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 900, 60, 1, 32, 8, 128, 300));
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 0, 300, 0, 8, 8, 64, 100));
    w = fmaxf(w, check_attention_shape(&cuda_backend, &cpu_backend, 600, 5, 1, 8, 4, 256, 512));
    printf("# cuda vs cpu: attention at model shapes worst %.2e\n", w);
    CHECK(w <= PARITY_TOL_ATTENTION, "attention at model shapes: %.2e", w);
    w = 0;
    w = fmaxf(w, check_distribution(&cuda_backend, &cpu_backend, 3, 128256, 10, 1000, 1.0f, 0));
    w = fmaxf(w, check_distribution(&cuda_backend, &cpu_backend, 2, 128256, 60, 1000, 0.7f, 1));   /* ties */
    w = fmaxf(w, check_distribution(&cuda_backend, &cpu_backend, 4, 32000, 1, 0, 1.0f, 0));
    printf("# cuda vs cpu: softmax/top-k/top-M entropy at vocab 128256 worst %.2e\n", w);
    CHECK(w <= PARITY_TOL_DISTRIBUTION, "distribution at model shapes: %.2e", w);
    NO_NEW_ERRORS(before);
}

/* matmul_many's grouped launches, the GEMV's (decode, up to 4 tokens) and
 * the tiled kernel's (5 to 64 tokens: trees, EAGLE expansions), give each
 * weight's product bit for bit as a launch of it alone, at q/k/v's and
 * gate/up's shapes (unaligned widths take the scalar path), every dtype. */
static void test_cuda_matmul_many_grouped(void) {
    NEED_GPU();
    const int before = cuda_errors();
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    enum { NS = 9, NMAX = 64 };
    const int cols[2] = {576, 83}, rows[3] = {576, 192, 192}, ns[NS] = {1, 2, 3, 4, 5, 8, 17, 33, NMAX};
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (int c = 0; c < 2; c++) {
            const int C = cols[c];
            Weight w[3];
            const Weight *pw[3];
            void *wd[3];
            float *outs[3], *ones[3];
            for (int i = 0; i < 3; i++) {
                float *wf = xmalloc(sizeof(float) * rows[i] * C);
                fill(wf, (size_t)rows[i] * C, 0.5f);
                wd[i] = xmalloc(4 * (size_t)rows[i] * C);
                f32_to(dts[d], wf, wd[i], (size_t)rows[i] * C);
                free(wf);
                REQUIRE(cuda_backend.weight(&w[i], wd[i], dts[d], rows[i], C) == 0, "%s", err_get());
                pw[i] = &w[i];
                outs[i] = cuda_backend.alloc((size_t)NMAX * rows[i]);
                ones[i] = cuda_backend.alloc((size_t)NMAX * rows[i]);
            }
            float *x = xmalloc(sizeof(float) * NMAX * C);
            fill(x, (size_t)NMAX * C, 1);
            float *xd = up(&cuda_backend, x, (size_t)NMAX * C);
            for (int k = 0; k < NS; k++) {
                cuda_backend.matmul_many(outs, xd, pw, 3, ns[k]);
                for (int i = 0; i < 3; i++) {
                    cuda_backend.matmul(ones[i], xd, &w[i], ns[k]);
                    float *a = down(&cuda_backend, outs[i], (size_t)ns[k] * rows[i]);
                    float *b = down(&cuda_backend, ones[i], (size_t)ns[k] * rows[i]);
                    bad += memcmp(a, b, sizeof(float) * ns[k] * rows[i]) != 0;
                    free(a); free(b);
                }
            }
            for (int i = 0; i < 3; i++) {
                cuda_backend.release(outs[i]); cuda_backend.release(ones[i]);
                cuda_backend.weight_release(&w[i]); free(wd[i]);
            }
            cuda_backend.release(xd);
            free(x);
        }
    CHECK(bad == 0, "%d products of matmul_many differ from matmul's bit for bit", bad);
    NO_NEW_ERRORS(before);
}

/* Per block type, on 13 and 77 rows (an odd count; 77 leaves a partial
 * block of QW rows) of 512 and 1536 columns: the CUDA product of n = 1, 2,
 * 5, 16 and 64 tokens equals the CPU backend's bit for bit (the GEMV's
 * NT 1 and 2, the tiled NT 8 with a partial tile, matmul_quant.cu);
 * matmul_many of mixed types (q/k/v as tests/ckpt/qwen2_quant mixes them)
 * and of one type (a grouped launch) equals each matmul; embedding rows,
 * ids outside the table included, equal quant_dequant_row (zeros). */
static void test_cuda_quant_parity(void) {
    NEED_GPU();
    const int before = cuda_errors();
    const int rowss[2] = {13, 77};
    const int64_t colss[2] = {512, 1536};
    int bad_mm = 0, bad_many = 0, bad_embed = 0, compared = 0;
    for (int ti = 0; ti < NQTYPES; ti++)
        for (int c = 0; c < 2; c++)
            for (int ri = 0; ri < 2; ri++) {
                const DType t = QTYPES[ti];
                const int R = rowss[ri];
                const int64_t C = colss[c], rb = quant_row_bytes(t, C);
                uint8_t *wq = q_weight(t, R, C);
                float *x = q_acts(QN_MAX, C);
                Weight wc, wg;
                REQUIRE(cpu_backend.weight(&wc, wq, t, R, C) == 0 && cuda_backend.weight(&wg, wq, t, R, C) == 0,
                        "%s weight: %s", dtype_name(t), err_get());
                float *xd = up(&cuda_backend, x, (size_t)QN_MAX * C), *od = cuda_backend.alloc((size_t)QN_MAX * R);
                float *oc = xmalloc(sizeof(float) * QN_MAX * R);
                for (int k = 0; k < NQNS; k++) {
                    const int n = QNS[k];
                    cpu_backend.matmul(oc, x, &wc, n);
                    cuda_backend.matmul(od, xd, &wg, n);
                    float *og = down(&cuda_backend, od, (size_t)n * R);
                    for (int i = 0; i < n * R; i++) bad_mm += memcmp(&og[i], &oc[i], sizeof(float)) != 0;
                    compared += n * R;
                    free(og);
                }
                /* rows 0, R - 1, one past the end, -1 */
                const int ids[4] = {0, R - 1, R, -1};
                int *idd = backend_alloc_ints(&cuda_backend, 4);
                backend_ints_to_device(&cuda_backend, idd, ids, 4);
                float *ed = cuda_backend.alloc((size_t)4 * C), *deq = xmalloc(sizeof(float) * (size_t)C);
                cuda_backend.embed(ed, &wg, idd, 4);
                float *eg = down(&cuda_backend, ed, (size_t)4 * C);
                for (int i = 0; i < 4; i++) {
                    if (ids[i] >= 0 && ids[i] < R) quant_dequant_row(t, wq + ids[i] * rb, deq, C);
                    else memset(deq, 0, sizeof(float) * (size_t)C);
                    bad_embed += memcmp(eg + i * C, deq, sizeof(float) * (size_t)C) != 0;
                }
                free(eg); free(deq);
                cuda_backend.release(ed); cuda_backend.release(idd);
                cuda_backend.release(xd); cuda_backend.release(od);
                cuda_backend.weight_release(&wg); cpu_backend.weight_release(&wc);
                free(wq); free(x); free(oc);
            }
    /* matmul_many: q/k/v of three types, then gate/up of one */
    const DType sets[2][3] = {{DT_Q8_0, DT_Q4_0, DT_Q4_1}, {DT_Q4_K, DT_Q4_K, DT_Q4_K}};
    const int mrows[3] = {256, 129, 64};
    const int64_t C = 768;
    for (int set = 0; set < 2; set++) {
        const int count = set ? 2 : 3;
        Weight w[3];
        const Weight *pw[3];
        uint8_t *wq[3];
        float *outs[3], *ones[3];
        for (int i = 0; i < count; i++) {
            wq[i] = q_weight(sets[set][i], mrows[i], C);
            REQUIRE(cuda_backend.weight(&w[i], wq[i], sets[set][i], mrows[i], C) == 0, "%s", err_get());
            pw[i] = &w[i];
            outs[i] = cuda_backend.alloc((size_t)QN_MAX * mrows[i]);
            ones[i] = cuda_backend.alloc((size_t)QN_MAX * mrows[i]);
        }
        float *x = q_acts(QN_MAX, C), *xd = up(&cuda_backend, x, (size_t)QN_MAX * C);
        for (int k = 0; k < NQNS; k++) {
            cuda_backend.matmul_many(outs, xd, pw, count, QNS[k]);
            for (int i = 0; i < count; i++) {
                cuda_backend.matmul(ones[i], xd, &w[i], QNS[k]);
                float *a = down(&cuda_backend, outs[i], (size_t)QNS[k] * mrows[i]);
                float *b = down(&cuda_backend, ones[i], (size_t)QNS[k] * mrows[i]);
                bad_many += memcmp(a, b, sizeof(float) * (size_t)QNS[k] * mrows[i]) != 0;
                free(a); free(b);
            }
        }
        for (int i = 0; i < count; i++) {
            cuda_backend.release(outs[i]); cuda_backend.release(ones[i]);
            cuda_backend.weight_release(&w[i]); free(wq[i]);
        }
        cuda_backend.release(xd);
        free(x);
    }
    printf("# cuda vs cpu: %d block-type products compared bit for bit\n", compared);
    CHECK(bad_mm == 0, "%d of %d block-type products differ from the CPU backend's bits", bad_mm, compared);
    CHECK(bad_many == 0, "%d products of matmul_many differ from matmul's", bad_many);
    CHECK(bad_embed == 0, "%d embedding rows differ from quant_dequant_row", bad_embed);
    NO_NEW_ERRORS(before);
}

/* ---- whole models ---- */


/* logits (and hidden) rows of the last forward, on the host */
static float *rows_of(const LlamaState *s, const float *dev, size_t n) {
    float *h = xmalloc(sizeof(float) * n);
    s->m->be->to_host(h, dev, n);
    return h;
}

/* worst |Δ| / max|ref| of the two states' logits and hidden rows */
static float compare_forward(const LlamaState *g, const LlamaState *c, int n, const char *what) {
    const int V = c->m->cfg.vocab, H = c->m->cfg.hidden;
    float *gl = rows_of(g, g->logits, (size_t)n * V), *cl = rows_of(c, c->logits, (size_t)n * V);
    float *gh = rows_of(g, g->hidden, (size_t)n * H), *ch = rows_of(c, c->hidden, (size_t)n * H);
    float el = max_diff(gl, cl, (size_t)n * V) / fmaxf(max_abs(cl, (size_t)n * V), 1e-30f);
    float eh = max_diff(gh, ch, (size_t)n * H) / fmaxf(max_abs(ch, (size_t)n * H), 1e-30f);
    printf("# %s: |Δlogit| %.2e, |Δhidden| %.2e of max\n", what, el, eh);
    free(gl); free(cl); free(gh); free(ch);
    return fmaxf(el, eh);
}

static void logits_parity(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/ckpt/%s", name);
    int before = cuda_errors();
    LlamaModel *mc = llama_load(dir, &cpu_backend), *mg = llama_load(dir, &cuda_backend);
    REQUIRE(mc && mg, "load %s: %s", dir, err_get());
    const int V = mc->cfg.vocab, T = 24;
    int ids[24], pos[24];
    for (int i = 0; i < T; i++) { ids[i] = (i * 37 + 11) % V; pos[i] = i; }
    LlamaState *sc = llama_state_new(mc, 64), *sg = llama_state_new(mg, 64);
    REQUIRE(sc && sg, "state: %s", err_get());
    float worst = 0;
    char what[128];

    /* prefill over every row */
    REQUIRE(llama_forward(sc, ids, pos, T, NULL, LOGITS_ALL) == 0 && llama_forward(sg, ids, pos, T, NULL, LOGITS_ALL) == 0,
            "forward: %s", err_get());
    snprintf(what, sizeof what, "%s prefill of %d", name, T);
    worst = fmaxf(worst, compare_forward(sc, sg, T, what));
    llama_commit(sc, NULL, T); llama_commit(sg, NULL, T);

    /* a tree of 7 nodes: root r, children a b, a's children c d, b's e, c's f */
    const int par[7] = {-1, 0, 0, 1, 1, 2, 3}, tok[7] = {5, 9, 17, 33, 65, 129 % V, 200 % V};
    int depth[7], tpos[7];
    uint8_t mask[7 * 7];   /* the tree's window; the prefill is visible to all */
    memset(mask, 0, sizeof mask);
    for (int i = 0; i < 7; i++) {
        depth[i] = i ? depth[par[i]] + 1 : 0;
        tpos[i] = T + depth[i];
        for (int a = i; a >= 0; a = par[a]) mask[i * 7 + a] = 1;
    }
    REQUIRE(llama_forward(sc, tok, tpos, 7, mask, LOGITS_ALL) == 0 && llama_forward(sg, tok, tpos, 7, mask, LOGITS_ALL) == 0,
            "tree forward: %s", err_get());
    snprintf(what, sizeof what, "%s tree verification of 7 nodes", name);
    worst = fmaxf(worst, compare_forward(sc, sg, 7, what));

    /* keep the path r, a, d (nodes 0, 1, 4) and decode one token after it */
    const int keep[3] = {0, 1, 4};   /* in each backend's memory (kv_keep reads it there) */
    int *kc = backend_alloc_ints(&cpu_backend, 3), *kg = backend_alloc_ints(&cuda_backend, 3);
    backend_ints_to_device(&cpu_backend, kc, keep, 3);
    backend_ints_to_device(&cuda_backend, kg, keep, 3);
    llama_commit(sc, kc, 3); llama_commit(sg, kg, 3);
    cpu_backend.release(kc); cuda_backend.release(kg);
    int next = 77 % V, p = T + 3;
    REQUIRE(llama_forward(sc, &next, &p, 1, NULL, LOGITS_LAST) == 0 && llama_forward(sg, &next, &p, 1, NULL, LOGITS_LAST) == 0,
            "decode: %s", err_get());
    snprintf(what, sizeof what, "%s decode after KV keep", name);
    worst = fmaxf(worst, compare_forward(sc, sg, 1, what));
    CHECK(worst <= LOGITS_REL, "%s: CUDA logits differ from the CPU runtime by %.2e of max (bound %.0e)", name, worst, LOGITS_REL);

    llama_state_free(sc); llama_state_free(sg);
    llama_free(mc); llama_free(mg);
    NO_NEW_ERRORS(before);
}

static void test_cuda_logits_llama2_f32(void) { NEED_GPU(); logits_parity("llama2_f32"); }
static void test_cuda_logits_llama3_bf16(void) { NEED_GPU(); logits_parity("llama3_bf16"); }
/* Qwen2: the q/k/v biases through cu_add_bias inside the recorded forward */
static void test_cuda_logits_qwen2(void) {
    NEED_GPU();
    logits_parity("qwen2_f32");
    logits_parity("qwen2_bf16");
}
/* Qwen3: each head's q and k through cu_rmsnorm (rows of head_dim) before
 * RoPE, a head size other than hidden / heads */
static void test_cuda_logits_qwen3(void) {
    NEED_GPU();
    logits_parity("qwen3_f32");
    logits_parity("qwen3_bf16");
}
/* Gemma 3: sliding layers (the cache's positions, written by rope_kv and
 * moved by kv_keep, against each query's), GELU, scaled embeddings, the
 * norms after attention and MLP */
static void test_cuda_logits_gemma3(void) {
    NEED_GPU();
    logits_parity("gemma3_f32");
    logits_parity("gemma3_bf16");
}

/* The batched forward on the GPU: three sequences of different lengths,
 * each over its own cache (prompts; then a tree under a mask, one decode
 * token, a causal pair), against the same batch on the CPU; and a batched
 * row of LM-head logits. */
static void test_cuda_batched_forward(void) {
    NEED_GPU();
    int before = cuda_errors();
    const char *dir = "tests/ckpt/llama3_bf16";
    LlamaModel *mc = llama_load(dir, &cpu_backend), *mg = llama_load(dir, &cuda_backend);
    REQUIRE(mc && mg, "load %s: %s", dir, err_get());
    enum { S = 3 };
    const int V = mc->cfg.vocab;
    LlamaState *sc[S], *sg[S];
    for (int i = 0; i < S; i++) {
        sc[i] = llama_state_new(mc, 64);
        sg[i] = llama_state_new(mg, 64);
        REQUIRE(sc[i] && sg[i], "state: %s", err_get());
    }
    LlamaBatch *bc = llama_batch_new(mc), *bg = llama_batch_new(mg);
    float worst = 0;
    for (int step = 0; step < 2; step++) {
        static const int lens[2][S] = {{5, 9, 3}, {4, 1, 2}};
        static const int par[4] = {-1, 0, 0, 1};
        int off[S + 1] = {0}, tok[32], pos[32];
        uint8_t tmask[16];
        const uint8_t *masks[S] = {NULL, NULL, NULL};
        for (int i = 0; i < S; i++) {
            const int n = lens[step][i], past = sc[i]->n_past;
            for (int t = 0; t < n; t++) {
                tok[off[i] + t] = (i * 31 + t * 7 + step * 101) % V;
                pos[off[i] + t] = past + (step && i == 0 ? (t ? 1 + (t == 3) : 0) : t);
            }
            if (step && i == 0) {   /* a tree: 0 -> {1, 2}, 1 -> 3, over its window */
                memset(tmask, 0, sizeof tmask);
                for (int a = 0; a < n; a++)
                    for (int p = a; p >= 0; p = par[p]) tmask[a * n + p] = 1;
                masks[0] = tmask;
            }
            off[i + 1] = off[i] + n;
        }
        REQUIRE(!llama_forward_batch(bc, sc, S, tok, pos, off, masks, NULL, NULL) &&
                    !llama_forward_batch(bg, sg, S, tok, pos, off, masks, NULL, NULL), "batched forward: %s", err_get());
        for (int i = 0; i < S; i++) {
            char what[96];
            snprintf(what, sizeof what, "batched step %d, sequence %d (%d tokens)", step, i, lens[step][i]);
            worst = fmaxf(worst, compare_forward(sg[i], sc[i], lens[step][i], what));
        }
        if (step == 0)
            for (int i = 0; i < S; i++) { llama_commit(sc[i], NULL, lens[0][i]); llama_commit(sg[i], NULL, lens[0][i]); }
    }
    const int rows[S] = {3, 0, 1};
    llama_rows_logits(bc, sc, rows, S);
    llama_rows_logits(bg, sg, rows, S);
    for (int i = 0; i < S; i++) worst = fmaxf(worst, compare_forward(sg[i], sc[i], 1, "batched LM-head row"));
    CHECK(worst <= LOGITS_REL, "batched CUDA forward differs from the CPU's by %.2e of max (bound %.0e)", worst,
          LOGITS_REL);
    llama_batch_free(bc); llama_batch_free(bg);
    for (int i = 0; i < S; i++) { llama_state_free(sc[i]); llama_state_free(sg[i]); }
    llama_free(mc); llama_free(mg);
    NO_NEW_ERRORS(before);
}

/* spec-eval --batch on the GPU: every policy lossless against ar at the same
 * batch size (continuous and static batches). */
static void test_cuda_batched_decoding(void) {
    NEED_GPU();
    char qs[] = "/tmp/c2t_cudabXXXXXX", err[4096];
    close(mkstemp(qs));
    FILE *f = fopen(qs, "w");
    REQUIRE(f, "%s", qs);
    fputs("{\"question_id\": 1, \"turns\": [\"static int x = 1;\", \"int main(void) {\"]}\n"
          "{\"question_id\": 2, \"turns\": [\"const char *name\"]}\n"
          "{\"question_id\": 3, \"turns\": [\"for (int i = 0;\"]}\n"
          "{\"question_id\": 4, \"turns\": [\"return\", \"while (1)\"]}\n", f);
    fclose(f);
    const char *runs[] = {"--policy ar", "--policy eagle2 --topk 4 --depth 3 --total 16",
                          "--policy chain --draft-len 4", "--policy eagle2 --static-batches"};
    for (int r = 0; r < 4; r++) {
        int rc = run_cmd(err, sizeof err, "%s/spec-eval --device cuda --target tests/ckpt/tiny_chat --template none "
                         "--draft tests/ckpt/tiny_chat_eagle --max-new-tokens 24 --quiet --questions %s --batch 3 "
                         "--check-lossless %s", bin_dir(), qs, runs[r]);
        CHECK(rc == 0, "cuda --batch 3 %s: exit %d: %s", runs[r], rc, err);
    }
    unlink(qs);
}

/* ---- greedy decoding ---- */

static int decode(const LlamaModel *target, Draft *d, const char *policy, const int *prompt, int np, int max_new,
                  int *out) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", policy);
    if (!strcmp(policy, "eagle2")) {
        policy_params_set(&prm, "topk", "4");
        policy_params_set(&prm, "depth", "3");
        policy_params_set(&prm, "total", "12");
    }
    Policy *p = policy_new(&prm);
    if (!p) return -1;
    SampleParams sp = {0};
    Decoder *dec = decoder_new(target, d, p, np + max_new + policy_max_nodes(p) + 8, sp);
    if (dec && p->wants_cost) decoder_watch_costs(dec);
    DecodeStats st;
    int n = dec ? decoder_run(dec, prompt, np, max_new, out, &st) : -1;
    decoder_free(dec);
    policy_free(p);
    return n;
}

/* The same tokens from both backends; with a draft, also the same as ar. */
static void greedy_parity_with(const char *target_dir, const char *policy, const char *kind, const char *draft_dir) {
    int before = cuda_errors();
    long graphs0, made0, spoiled0, graphs1, made1, spoiled1;
    cuda_graph_counts(&graphs0, &made0, &spoiled0);
    const int need_draft = strcmp(policy, "ar") != 0;
    LlamaModel *mc = llama_load(target_dir, &cpu_backend), *mg = llama_load(target_dir, &cuda_backend);
    REQUIRE(mc && mg, "load %s: %s", target_dir, err_get());
    Draft *dc = need_draft ? draft_load(kind, draft_dir, mc, 4096) : NULL;
    Draft *dg = need_draft ? draft_load(kind, draft_dir, mg, 4096) : NULL;
    REQUIRE(!need_draft || (dc && dg), "draft: %s", err_get());
    const int max_new = 40;
    int prompts[3][8] = {{1, 21, 208, 255, 244, 151, 37, 9}, {1, 5, 6, 7, 8, 9, 10, 11}, {1, 99, 98, 97, 96, 95, 94, 93}};
    for (int q = 0; q < 3; q++) {
        int oc[64], og[64], oar[64];
        int nc = decode(mc, dc, policy, prompts[q], 8, max_new, oc);
        int ng = decode(mg, dg, policy, prompts[q], 8, max_new, og);
        REQUIRE(nc >= 0 && ng >= 0, "%s: %s", policy, err_get());
        int same = nc == ng;
        for (int i = 0; same && i < nc; i++) same = oc[i] == og[i];
        CHECK(same, "%s policy %s prompt %d: CUDA tokens differ from CPU (%d vs %d tokens)", target_dir, policy, q, ng, nc);
        if (need_draft) {
            int nar = decode(mg, NULL, "ar", prompts[q], 8, max_new, oar);
            same = nar == ng;
            for (int i = 0; same && i < ng; i++) same = oar[i] == og[i];
            CHECK(same, "%s prompt %d: CUDA %s tokens differ from CUDA ar", target_dir, q, policy);
        }
    }
    draft_free(dc); draft_free(dg);
    llama_free(mc); llama_free(mg);
    NO_NEW_ERRORS(before);
    /* with graphs on (test_cuda --cuda-graphs on) the forwards above ran as recorded graphs (the
     * parity checks covered them); a pass that needs a scratch buffer to
     * grow is not recorded and runs op by op (the first of each size) */
    cuda_graph_counts(&graphs1, &made1, &spoiled1);
    const long graphs = graphs1 - graphs0, made = made1 - made0;
    printf("# %s %s: %ld forward passes as graphs (%ld replayed without recording), %ld op by op\n", target_dir,
           policy, graphs, graphs - made, spoiled1 - spoiled0);
    /* the contexts here stay inside one attention bucket (replay.h), so
     * every forward of a shape seen before replays its graph */
    if (backend_settings()->cuda_graphs) {
        CHECK(graphs > 4 * (spoiled1 - spoiled0), "%s %s: only %ld of %ld forward passes ran as graphs", target_dir,
              policy, graphs, graphs + spoiled1 - spoiled0);
        CHECK(graphs - made > made, "%s %s: %ld of %ld graphs replayed without recording", target_dir, policy,
              graphs - made, graphs);
    }
}
static void greedy_parity(const char *target_dir, const char *policy) {
    greedy_parity_with(target_dir, policy, "eagle", "tests/ckpt/eagle_tiny");
}

static void test_cuda_greedy_ar(void) {
    NEED_GPU();
    greedy_parity("tests/ckpt/llama2_f32", "ar");
    greedy_parity("tests/ckpt/llama3_f32", "ar");
    greedy_parity("tests/ckpt/llama3_bf16", "ar");
}
static void test_cuda_greedy_eagle2(void) {
    NEED_GPU();
    greedy_parity("tests/ckpt/llama3_f32", "eagle2");
    greedy_parity("tests/ckpt/llama3_bf16", "eagle2");
}
/* EAGLE-3: the target's captured layer inputs and the head on the GPU */
static void test_cuda_greedy_eagle3(void) {
    NEED_GPU();
    greedy_parity_with("tests/ckpt/tiny_chat_l8", "eagle2", "eagle3", "tests/ckpt/eagle3_tiny");
    greedy_parity_with("tests/ckpt/tiny_chat_l8", "eagle2", "eagle3", "tests/ckpt/eagle3_tiny_bin");
}
/* a Qwen2 target drafted by its BF16 copy, both with q/k/v biases */
static void test_cuda_greedy_qwen2_lm_draft(void) {
    NEED_GPU();
    greedy_parity("tests/ckpt/qwen2_bf16", "ar");
    greedy_parity_with("tests/ckpt/qwen2_f32", "eagle2", "lm", "tests/ckpt/qwen2_bf16");
    greedy_parity_with("tests/ckpt/qwen2_bf16", "chain", "lm", "tests/ckpt/qwen2_f32");
}

/* tests/ckpt/qwen2_quant (every matrix a GGUF block type, the ten
 * types mixed) on the GPU: ar's tokens are the CPU's, and an LM draft is
 * lossless both ways (its BF16 conversion drafting it, it drafting that) */
static void test_cuda_greedy_qwen2_quant(void) {
    NEED_GPU();
    greedy_parity("tests/ckpt/qwen2_quant", "ar");
    greedy_parity_with("tests/ckpt/qwen2_quant", "eagle2", "lm", "tests/ckpt/qwen2_quant_bf16");
    greedy_parity_with("tests/ckpt/qwen2_quant_bf16", "chain", "lm", "tests/ckpt/qwen2_quant");
}

/* ---- sampling ---- */

/* sample_dev on the GPU: distributed as defined (its ids equal the CPU's
 * in the parity harness, test_cuda_parity_ops), and the same key gives the
 * same ids, run after run. */
static void test_cuda_sample_dev(void) {
    NEED_GPU();
    int before = cuda_errors();
    CHECK(check_sample_distribution(&cuda_backend) == 0, "the GPU's sample_dev is not distributed as defined");
    enum { N = 64, V = 50000 };
    float *h = xmalloc(sizeof(float) * N * V);
    fill(h, (size_t)N * V, 4);
    float *d = up(&cuda_backend, h, (size_t)N * V);
    int *key = backend_alloc_ints(&cuda_backend, 2), *ids = backend_alloc_ints(&cuda_backend, N);
    backend_ints_to_device(&cuda_backend, key, (const int[]){7, 9}, 2);
    const SampleParams sp = {0.9f, 40, 0.95f, 0};
    int a[N], b[N], c[N];
    cuda_backend.sample_dev(d, N, V, &sp, (const uint32_t *)key, 3, ids);
    backend_ints_to_host(&cuda_backend, a, ids, N);
    cuda_backend.sample_dev(d, N, V, &sp, (const uint32_t *)key, 3, ids);
    backend_ints_to_host(&cuda_backend, b, ids, N);
    cpu_backend.sample_dev(h, N, V, &sp, (const uint32_t[]){7, 9}, 3, c);
    int same = 1, as_cpu = 0;
    for (int r = 0; r < N; r++) { same &= a[r] == b[r]; as_cpu += a[r] == c[r]; }
    CHECK(same, "the same key gave other ids");
    CHECK(as_cpu == N, "%d of %d rows of a 50,000-id vocabulary drew the CPU's id", as_cpu, N);
    cuda_backend.release(d); cuda_backend.release(key); cuda_backend.release(ids);
    free(h);
    NO_NEW_ERRORS(before);
}

#else /* built without nvcc */

#define NO_CUDA() SKIP("built without nvcc (no CUDA backend)")
/* harness.h's CHECK machinery is unused here */
__attribute__((unused)) static void (*const unused_h_fail)(const char *, int, const char *, ...) = h_fail;
static void test_cuda_backend_covers_interface(void) { NO_CUDA(); }
static void test_cuda_errors_are_reported(void) { NO_CUDA(); }
static void test_cuda_parity_ops(void) { NO_CUDA(); }
static void test_cuda_parity_model_shapes(void) { NO_CUDA(); }
static void test_cuda_matmul_many_grouped(void) { NO_CUDA(); }
static void test_cuda_quant_parity(void) { NO_CUDA(); }
static void test_cuda_greedy_qwen2_quant(void) { NO_CUDA(); }
static void test_cuda_batched_forward(void) { NO_CUDA(); }
static void test_cuda_batched_decoding(void) { NO_CUDA(); }
static void test_cuda_logits_llama2_f32(void) { NO_CUDA(); }
static void test_cuda_logits_llama3_bf16(void) { NO_CUDA(); }
static void test_cuda_logits_qwen2(void) { NO_CUDA(); }
static void test_cuda_greedy_qwen2_lm_draft(void) { NO_CUDA(); }
static void test_cuda_greedy_ar(void) { NO_CUDA(); }
static void test_cuda_greedy_eagle2(void) { NO_CUDA(); }
static void test_cuda_greedy_eagle3(void) { NO_CUDA(); }
static void test_cuda_sample_dev(void) { NO_CUDA(); }
#endif

/* test_cuda [--cuda-graphs on]: the backend options as the commands take
 * them; with graphs on, the greedy runs must mostly replay graphs. */
int main(int argc, char **argv) {
    BackendOptions bo;
    backend_options_default(&bo);
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--cuda-graphs")) bo.cuda_graphs = !strcmp(argv[i + 1], "on");
    if (backend_configure(&bo)) die_err("test_cuda");
    RUN(test_cuda_backend_covers_interface);
    RUN(test_cuda_errors_are_reported);
    RUN(test_cuda_parity_ops);
    RUN(test_cuda_parity_model_shapes);
    RUN(test_cuda_matmul_many_grouped);
    RUN(test_cuda_quant_steps_on_host);
    RUN(test_cuda_quant_parity);
    RUN(test_cuda_logits_llama2_f32);
    RUN(test_cuda_logits_llama3_bf16);
    RUN(test_cuda_logits_qwen2);
    RUN(test_cuda_logits_qwen3);
    RUN(test_cuda_logits_gemma3);
    RUN(test_cuda_greedy_ar);
    RUN(test_cuda_greedy_eagle2);
    RUN(test_cuda_greedy_eagle3);
    RUN(test_cuda_greedy_qwen2_lm_draft);
    RUN(test_cuda_greedy_qwen2_quant);
    RUN(test_cuda_batched_forward);
    RUN(test_cuda_batched_decoding);
    RUN(test_cuda_sample_dev);
#ifdef C2T_CUDA
    backend_shutdown(&cuda_backend);   /* compute-sanitizer's leak check then sees only real leaks */
#endif
    return h_done();
}
