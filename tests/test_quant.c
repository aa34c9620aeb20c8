/* Products of weights in GGUF's block types (kernels/cpu/matmul_quant.c)
 * on the CPU backend, per type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K, IQ4_NL, IQ4_XS, Q2_K, Q3_K), on random blocks (random integers, scales and minimums of either
 * sign; Q8_0 integers include -128, Q6_K scales too):
 *  - the kernel equals, bit for bit, a scalar copy of the order
 *    matmul_quant.c's header states (block sums exact, one fma chain over
 *    the blocks), and lies within a derived bound of the sum in double of
 *    the dequantised weights times the Q8 activations, and within the bound
 *    the activations' rounding adds of the plain F32 product (both bounds
 *    at test_against_references);
 *  - every token of an n-token product equals that token alone, bit for
 *    bit, for every n from 1 to FEW_TOKENS (and one beyond), with 1 and 2
 *    threads, on odd row counts and rows of several blocks;
 *  - every type, whose rows the vector builds interleave in groups, equals
 *    that order on row counts around the group size, for 1 .. FEW_TOKENS +
 *    3 tokens at once and 1 and 2 threads;
 *  - where the build and CPU have AMX-INT8, the tile multiply equals the
 *    dot products bit for bit for 2 .. 40 tokens (a line says it is
 *    skipped elsewhere);
 *  - one token's products give the same bits whichever distance they
 *    fetch the weights ahead, and the measuring of the faster one ends
 *    after the products it states;
 *  - matmul_many equals separate matmuls; embed and weight_row(s) equal
 *    quant_dequant_row; a mapped matrix's pages leave memory at its first
 *    product and every read after it is unchanged; NaN and infinite scales stay in their rows, and
 *    quant_first_nonfinite finds them (and NaN / infinite F32, F16, BF16
 *    elements); bad shapes are refused in one line;
 *  - and the checks can fail: a changed weight byte is caught.
 * The build's instruction set picks the kernel's path (AVX-512 on an
 * AVX-512 machine); the AVX2 path is checked by building this test with
 *   make BUILD=build-avx2 BIN=bin-avx2 ARCH=-march=haswell build-avx2/tests/test_quant
 * and running ./build-avx2/tests/test_quant, and the scalar one with ARCH=. */
#include "tests/harness.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include "tests/matmul_many_check.h"
#include <sys/mman.h>
#include <unistd.h>

static const DType TYPES[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_NL, DT_IQ4_XS, DT_Q2_K, DT_Q3_K};
#define NTYPES (int)(sizeof TYPES / sizeof *TYPES)

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static float rndf(void) { return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f; }

/* a random half of magnitude 2^-9 .. 2^-4 and either sign */
static uint16_t rnd_half(void) {
    return (uint16_t)((rnd() & 1) << 15 | (uint32_t)(15 - 9 + rnd() % 6) << 10 | (rnd() & 0x3FF));
}

/* where a block's half-precision scale and minimum lie (-1: none) */
static int d_at(DType t) { int d, m; quant_half_offsets(t, &d, &m); return d; }
static int m_at(DType t) { int d, m; quant_half_offsets(t, &d, &m); return m; }

/* rows x cols random blocks of type t */
static uint8_t *rnd_weight(DType t, int64_t rows, int64_t cols) {
    const int64_t rb = quant_row_bytes(t, cols), bb = (int64_t)quant_block_bytes(t);
    uint8_t *w = xmalloc((size_t)(rows * rb));
    for (int64_t i = 0; i < rows * rb; i++) w[i] = (uint8_t)(rnd() >> 24);
    for (int64_t b = 0; b < rows * rb / bb; b++) {
        uint16_t h = rnd_half();
        memcpy(w + b * bb + d_at(t), &h, 2);
        if (m_at(t) >= 0) { h = rnd_half(); memcpy(w + b * bb + m_at(t), &h, 2); }
    }
    return w;
}

/* x[n][cols]: uniform in [-1, 1] times a scale per 16 elements from 2^-3
 * to 2^3, so blocks differ in range; one block of zeros */
static float *rnd_x(int n, int64_t cols) {
    float *x = xmalloc(sizeof(float) * (size_t)n * (size_t)cols);
    for (int64_t i = 0; i < n * cols; i += 16) {
        const float s = ldexpf(1.0f, (int)(rnd() % 7) - 3);
        for (int j = 0; j < 16; j++) x[i + j] = rndf() * s;
    }
    if (n * cols >= 64) memset(x + 32, 0, 32 * sizeof(float));
    return x;
}

static Weight make_weight(DType t, const void *data, int64_t rows, int64_t cols) {
    Weight w;
    const int rc = cpu_backend.weight(&w, data, t, rows, cols);
    if (rc) printf("# weight: %s\n", err_get());
    return w;
}

/* The contract's order for one (row, token), written here a second time:
 * per block, the exact integer sum, then fmaf into one chain.  *abs_terms
 * gets the sum of the terms' magnitudes (the bound's A) and *steps the
 * number of fmaf. */
static float order_ref(DType t, const uint8_t *row, int64_t cols, const float *xrow, double *abs_terms, int *steps) {
    const int blk = quant_act_block(t);
    const int64_t bw = quant_block_elems(t), bb = (int64_t)quant_block_bytes(t);
    int8_t *q = xmalloc((size_t)cols);
    float *d = xmalloc(sizeof(float) * (size_t)(cols / blk));
    int16_t *sums = xmalloc(sizeof(int16_t) * (size_t)(cols / 16));
    quant_q8_row(xrow, cols, blk, q, d, sums);
    float acc = 0;
    double A = 0;
    int k = 0;
    for (int64_t b = 0; b < cols / bw; b++) {
        QuantBlock u;
        quant_unpack(t, row + b * bb, &u);
        const int8_t *xq = q + b * bw;
        const int sub = u.sub ? u.sub : 32;
        int64_t isum = 0, msum = 0;
        for (int j = 0; j < bw / sub; j++) {
            int64_t dot = 0, xs = 0;
            for (int e = 0; e < sub; e++) { dot += (int64_t)u.q[j * sub + e] * xq[j * sub + e]; xs += xq[j * sub + e]; }
            isum += (u.sub ? u.sc[j] : 1) * (dot - u.off * xs);
            msum += u.mn[j] * xs;
        }
        const float dx = d[b], p = u.d * dx;
        acc = fmaf((float)isum, p, acc);
        A += fabs((double)isum * p);
        k++;
        if (t == DT_Q4_1 || t == DT_Q5_1) {
            const float sd = dx * (float)sums[b];   /* block 32: one sum a block */
            acc = fmaf(u.m, sd, acc);
            A += fabs((double)u.m * sd);
            k++;
        } else if (t == DT_Q4_K || t == DT_Q5_K || t == DT_Q2_K) {
            acc = fmaf(-(float)msum, u.m * dx, acc);
            A += fabs((double)msum * (u.m * dx));
            k++;
        }
    }
    *abs_terms = A;
    *steps = k;
    free(q); free(d); free(sums);
    return acc;
}

/* For each (row, token): the kernel (1 token at a time and all n at once)
 * against order_ref bit for bit, and against two sums in double:
 *  R1 = sum_e deq_e * dx_b * qx_e (quant_dequant_row's weights times the
 *  Q8 activations).  The kernel's exact value is the same sum with the
 *  weights before the dequantiser's one rounding (|deq - w| <= u |deq|, u
 *  = 2^-24; none for Q8_0, Q4_0, Q5_0, Q6_K), and its float steps round
 *  each term at most twice ((float)isum, the scale product d * dx) and
 *  each fma once, so |kernel - R1| <= gamma(K + 2) A + 1.01 u D, where K is
 *  the number of fma steps, gamma(m) = m u / (1 - m u), A the sum of the
 *  terms' magnitudes and D = sum_e |deq_e dx qx_e| (double's own rounding
 *  is 2^29 times smaller and covered by the 1.01).
 *  R2 = sum_e deq_e * x_e, the dequantise-then-F32 product: q = x * (1/d)
 *  rounded to nearest is within 1/2 of x / d up to the two roundings of
 *  1/d and the product (|x / d| <= 127: 127 * 2.01 u), so |x - d q| <= d
 *  (1/2 + 128 * 2.01 u) and |kernel - R2| <= that bound plus sum_b d_b (1/2
 *  + 2.6e-5) sum_{e in b} |deq_e|. */
static void test_against_references(void) {
    enum { ROWS = 13, N = 5 };
    const int64_t colss[2] = {256, 1536};
    const double u = ldexp(1.0, -24);
    int bad_bits = 0, bad_r1 = 0, bad_r2 = 0, compared = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int c = 0; c < 2; c++) {
            const DType t = TYPES[ti];
            const int64_t cols = colss[c], rb = quant_row_bytes(t, cols);
            uint8_t *wd = rnd_weight(t, ROWS, cols);
            float *x = rnd_x(N, cols), *out = xmalloc(sizeof(float) * N * ROWS), *deq = xmalloc(sizeof(float) * cols);
            const int blk = quant_act_block(t);
            int8_t *q = xmalloc((size_t)cols);
            float *d = xmalloc(sizeof(float) * (size_t)(cols / 32));
            int16_t *sums = xmalloc(sizeof(int16_t) * (size_t)(cols / 16));
            Weight w = make_weight(t, wd, ROWS, cols);
            cpu_backend.matmul(out, x, &w, N);
            double worst1 = 0, worst2 = 0;
            for (int tok = 0; tok < N; tok++) {
                quant_q8_row(x + tok * cols, cols, blk, q, d, sums);
                for (int r = 0; r < ROWS; r++) {
                    double A;
                    int K;
                    const float want = order_ref(t, wd + r * rb, cols, x + tok * cols, &A, &K);
                    const float got = out[tok * ROWS + r];
                    bad_bits += memcmp(&want, &got, 4) != 0;
                    quant_dequant_row(t, wd + r * rb, deq, cols);
                    double r1 = 0, r2 = 0, D = 0, E = 0;
                    for (int64_t e = 0; e < cols; e++) {
                        const double xq = (double)d[e / blk] * q[e];
                        r1 += deq[e] * xq;
                        r2 += (double)deq[e] * x[tok * cols + e];
                        D += fabs(deq[e] * xq);
                        E += (double)d[e / blk] * (0.5 + 2.6e-5) * fabs(deq[e]);
                    }
                    const double g = (K + 2) * u / (1 - (K + 2) * u);
                    const double b1 = g * A + 1.01 * u * D, b2 = b1 + E + 1e-12 * D;
                    bad_r1 += !(fabs(got - r1) <= b1);
                    bad_r2 += !(fabs(got - r2) <= b2);
                    if (b1 > 0 && fabs(got - r1) / b1 > worst1) worst1 = fabs(got - r1) / b1;
                    if (b2 > 0 && fabs(got - r2) / b2 > worst2) worst2 = fabs(got - r2) / b2;
                    compared++;
                }
            }
            printf("# %s cols %lld: error / bound at most %.3f (Q8 activations), %.3f (F32 activations)\n",
                   dtype_name(t), (long long)cols, worst1, worst2);
            cpu_backend.weight_release(&w);
            free(wd); free(x); free(out); free(deq); free(q); free(d); free(sums);
        }
    CHECK(compared > 0 && bad_bits == 0, "%d of %d results differ from the stated order", bad_bits, compared);
    CHECK(bad_r1 == 0, "%d of %d results outside the bound against the Q8-activation sum in double", bad_r1, compared);
    CHECK(bad_r2 == 0, "%d of %d results outside the bound against the F32 product", bad_r2, compared);
}

/* Every token of an n-token product, n = 1 .. FEW_TOKENS and FEW_TOKENS +
 * 7, equals the token alone, bit for bit, with 1 and 2 threads.  Shapes:
 * 67 rows (odd: past the 8-row tiles' and the threads' splits), 9, 130; 
 * rows of 3 and 48 blocks of 32, 2 and 3 of 256. */
static void test_tokens_independent(void) {
    const int nmax = FEW_TOKENS + 7;
    const int rowss[3] = {67, 9, 130};
    int bad = 0, products = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int s = 0; s < 2; s++) {
            const DType t = TYPES[ti];
            const int rows = rowss[(ti + s) % 3];
            const int64_t cols = quant_block_elems(t) == 256 ? (s ? 768 : 512) : (s ? 1536 : 96);
            uint8_t *wd = rnd_weight(t, rows, cols);
            float *x = rnd_x(nmax, cols), *one = xmalloc(sizeof(float) * nmax * rows),
                  *all = xmalloc(sizeof(float) * nmax * rows);
            Weight w = make_weight(t, wd, rows, cols);
            cpu_threads_set(1);
            for (int tok = 0; tok < nmax; tok++) cpu_backend.matmul(one + tok * rows, x + tok * cols, &w, 1);
            for (int threads = 1; threads <= 2; threads++) {
                cpu_threads_set(threads);
                for (int n = 1; n <= nmax; n = n == FEW_TOKENS ? nmax : n + 1) {
                    cpu_backend.matmul(all, x, &w, n);
                    bad += memcmp(all, one, sizeof(float) * n * rows) != 0;
                    products++;
                }
            }
            cpu_backend.weight_release(&w);
            free(wd); free(x); free(one); free(all);
        }
    cpu_threads_set(cpu_threads_max());
    CHECK(products > 0 && bad == 0, "%d of %d products differ from their tokens alone", bad, products);
}

/* The row groups of every type (16 or 8 rows interleaved, the last one
 * padded): for 2, 15, 16, 17 and 33 rows, every token of 1 .. FEW_TOKENS +
 * 3 at once, with 1 and 2 threads, equals the stated order bit for bit. */
static void test_row_groups(void) {
    static const int rowss[5] = {2, 15, 16, 17, 33};
    const int64_t cols = 512;
    const int nmax = FEW_TOKENS + 3;
    int bad = 0, products = 0;
    float *x = rnd_x(nmax, cols);
    for (int ti = 0; ti < NTYPES; ti++)
        for (int ri = 0; ri < 5; ri++) {
            const DType t = TYPES[ti];
            const int rows = rowss[ri];
            const int64_t rb = quant_row_bytes(t, cols);
            uint8_t *wd = rnd_weight(t, rows, cols);
            float *want = xmalloc(sizeof(float) * nmax * rows), *got = xmalloc(sizeof(float) * nmax * rows);
            for (int tok = 0; tok < nmax; tok++)
                for (int r = 0; r < rows; r++) {
                    double A;
                    int K;
                    want[tok * rows + r] = order_ref(t, wd + r * rb, cols, x + tok * cols, &A, &K);
                }
            Weight w = make_weight(t, wd, rows, cols);
            for (int threads = 1; threads <= 2; threads++) {
                cpu_threads_set(threads);
                for (int n = 1; n <= nmax; n++) {
                    cpu_backend.matmul(got, x, &w, n);
                    bad += memcmp(got, want, sizeof(float) * n * rows) != 0;
                    products++;
                }
            }
            cpu_backend.weight_release(&w);
            free(wd); free(want); free(got);
        }
    cpu_threads_set(cpu_threads_max());
    free(x);
    CHECK(products > 0 && bad == 0, "%d of %d row-group products differ from the stated order", bad, products);
}

/* Where the build and the CPU have AMX-INT8 (matmul_quant.c's tile
 * multiply, taken by Q4_K and Q5_K products of several tokens): products
 * of 2 .. 40 tokens equal the dot products' bit for bit, every type, odd
 * row counts, 1 and 2 threads; skipped with a line elsewhere. */
static void test_tiles_equal_dots(void) {
    if (!cpu_quant_tiles(1)) SKIP("this build or CPU has no AMX-INT8");
    enum { NMAX = 40 };
    static const int ns[] = {2, 3, 5, 8, 15, 16, 17, 31, 33, NMAX};
    int bad = 0, products = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int s = 0; s < 2; s++) {
            const DType t = TYPES[ti];
            const int rows = s ? 67 : 33;
            const int64_t cols = quant_block_elems(t) == 256 ? (s ? 768 : 256) : (s ? 1536 : 96);
            uint8_t *wd = rnd_weight(t, rows, cols);
            float *x = rnd_x(NMAX, cols), *dots = xmalloc(sizeof(float) * NMAX * rows),
                  *tiles = xmalloc(sizeof(float) * NMAX * rows);
            Weight w = make_weight(t, wd, rows, cols);
            for (int threads = 1; threads <= 2; threads++) {
                cpu_threads_set(threads);
                for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                    cpu_quant_tiles(0);
                    cpu_backend.matmul(dots, x, &w, ns[k]);
                    cpu_quant_tiles(1);
                    cpu_backend.matmul(tiles, x, &w, ns[k]);
                    bad += memcmp(dots, tiles, sizeof(float) * ns[k] * rows) != 0;
                    products++;
                }
            }
            cpu_backend.weight_release(&w);
            free(wd); free(x); free(dots); free(tiles);
        }
    cpu_threads_set(cpu_threads_max());
    CHECK(products > 0 && bad == 0, "%d of %d tile products differ from the dot products", bad, products);
}

/* One token's products fetch ahead one row group or a fixed distance, or
 * measure which is faster (cpu_quant_fetch_arm): every type gives the
 * same bits under each, on 67 rows (whole 8- and 16-row groups and a
 * part) with 1 and 2 threads; the measuring ends after exactly FETCH_PAIRS pairs of one-token
 * products past a matrix's first, products of several tokens not
 * counted, and then keeps one of the two distances. */
static void test_fetch_distances(void) {
    enum { ROWS = 67 };
    int bad = 0, products = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        const DType t = TYPES[ti];
        const int64_t cols = quant_block_elems(t) == 256 ? 768 : 1536;
        uint8_t *wd = rnd_weight(t, ROWS, cols);
        float *x = rnd_x(1, cols), *group = xmalloc(sizeof(float) * ROWS), *near = xmalloc(sizeof(float) * ROWS);
        Weight w = make_weight(t, wd, ROWS, cols);
        for (int threads = 1; threads <= 2; threads++) {
            cpu_threads_set(threads);
            cpu_quant_fetch_arm(FETCH_GROUP);
            cpu_backend.matmul(group, x, &w, 1);
            cpu_quant_fetch_arm(FETCH_NEAR);
            cpu_backend.matmul(near, x, &w, 1);
            bad += memcmp(group, near, sizeof(float) * ROWS) != 0;
            products++;
        }
        cpu_backend.weight_release(&w);
        free(wd); free(x); free(group); free(near);
    }
    cpu_threads_set(cpu_threads_max());
    CHECK(products == 2 * NTYPES && bad == 0, "%d of %d one-token products differ between the fetch distances", bad,
          products);

    const DType t = DT_Q4_K;
    uint8_t *wd = rnd_weight(t, ROWS, 256);
    float *x = rnd_x(3, 256), *out = xmalloc(sizeof(float) * 3 * ROWS), *fixed = xmalloc(sizeof(float) * ROWS);
    Weight w = make_weight(t, wd, ROWS, 256);
    cpu_quant_fetch_arm(FETCH_GROUP);
    cpu_backend.matmul(fixed, x, &w, 1);
    cpu_quant_fetch_arm(FETCH_MEASURE);
    int calls = 0, changed = 0, during = 0;
    while (cpu_quant_fetch_arm(FETCH_KEEP) == FETCH_MEASURE && calls < 4 * FETCH_PAIRS) {
        cpu_backend.matmul(out, x, &w, 3);   /* not counted */
        cpu_backend.matmul(out, x, &w, 1);
        changed += memcmp(out, fixed, sizeof(float) * ROWS) != 0;
        during += cpu_quant_fetch_arm(FETCH_KEEP) == FETCH_MEASURE;
        calls++;
    }
    const int arm = cpu_quant_fetch_arm(FETCH_KEEP);
    cpu_backend.weight_release(&w);
    free(wd); free(x); free(out); free(fixed);
    if (arm == FETCH_NONE) {   /* the scalar kernel (this test's object is built once, for every kernel) */
        CHECK(calls == 0 && !changed, "the scalar kernel measured %d products or changed %d", calls, changed);
        return;
    }
    /* the matrix's first product under measuring is not timed, as if it made the copy */
    CHECK(calls == 2 * FETCH_PAIRS + 1 && during == calls - 1 && (arm == FETCH_GROUP || arm == FETCH_NEAR) && !changed,
          "measuring took %d one-token products (expected %d), ended on %d, %d products changed", calls,
          2 * FETCH_PAIRS + 1, arm, changed);
}

/* matmul_many over weights of several block types (one activation
 * quantisation per kind), of one type, and beside a BF16 weight equals
 * separate matmuls, for 1, 3, 17 and 70 tokens and 1 and 2 threads. */
static void test_matmul_many_equals_matmuls(void) {
    enum { K = 3, COLS = 512, NMAX = 70 };
    static const DType sets[3][K] = {{DT_Q4_K, DT_Q8_0, DT_Q6_K}, {DT_Q4_0, DT_Q4_0, DT_Q4_0}, {DT_Q5_1, DT_BF16, DT_Q5_K}};
    const int rows[K] = {131, 40, 77}, ns[4] = {1, 3, 17, NMAX};
    float *x = rnd_x(NMAX, COLS);
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        Weight w[K];
        const Weight *pw[K];
        float *many[K], *one[K];
        void *wd[K];
        for (int i = 0; i < K; i++) {
            if (sets[s][i] == DT_BF16) {
                uint16_t *b = xmalloc(2 * (size_t)rows[i] * COLS);
                for (int j = 0; j < rows[i] * COLS; j++) b[j] = f32_to_bf16(rndf());
                wd[i] = b;
            } else {
                wd[i] = rnd_weight(sets[s][i], rows[i], COLS);
            }
            w[i] = make_weight(sets[s][i], wd[i], rows[i], COLS);
            pw[i] = &w[i];
            many[i] = xmalloc(sizeof(float) * NMAX * rows[i]);
            one[i] = xmalloc(sizeof(float) * NMAX * rows[i]);
        }
        for (int j = 0; j < 4; j++) bad += many_vs_matmuls(pw, K, x, ns[j], many, one);
        for (int i = 0; i < K; i++) {
            cpu_backend.weight_release(&w[i]);
            free(wd[i]); free(many[i]); free(one[i]);
        }
    }
    cpu_threads_set(cpu_threads_max());
    free(x);
    CHECK(bad == 0, "%d products of matmul_many differ from matmul", bad);
}

/* embed (ids in and out of range), weight_row and weight_rows give
 * quant_dequant_row's values bit for bit. */
static void test_rows_are_dequantised(void) {
    enum { ROWS = 37 };
    int bad = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        const DType t = TYPES[ti];
        const int64_t cols = quant_block_elems(t) * 3, rb = quant_row_bytes(t, cols);
        uint8_t *wd = rnd_weight(t, ROWS, cols);
        Weight w = make_weight(t, wd, ROWS, cols);
        float *want = xmalloc(sizeof(float) * ROWS * cols), *got = xmalloc(sizeof(float) * ROWS * cols);
        for (int r = 0; r < ROWS; r++) quant_dequant_row(t, wd + r * rb, want + r * cols, cols);
        cpu_weight_rows(&w, 0, ROWS, got);
        bad += memcmp(want, got, sizeof(float) * ROWS * cols) != 0;
        cpu_weight_row(&w, 29, got);
        bad += memcmp(want + 29 * cols, got, sizeof(float) * cols) != 0;
        const int ids[4] = {36, 0, ROWS, -1};
        cpu_backend.embed(got, &w, ids, 4);
        bad += memcmp(want + 36 * cols, got, sizeof(float) * cols) != 0;
        bad += memcmp(want, got + cols, sizeof(float) * cols) != 0;
        for (int64_t e = 0; e < 2 * cols; e++) bad += got[2 * cols + e] != 0;
        cpu_backend.weight_release(&w);
        free(wd); free(want); free(got);
    }
    CHECK(bad == 0, "%d rows differ from quant_dequant_row", bad);
}

/* The resident KiB of the mapping that holds p (its "Rss:" in
 * /proc/self/smaps, counted from the page tables, so exact, unlike
 * /proc/self/status's per-thread counters); -1 where the kernel does not
 * say. */
static long mapping_rss_kib(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long kib = -1;
    int inside = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && sscanf(line, "Rss: %ld", &kib) == 1) break;
    }
    fclose(f);
    return kib;
}

/* A matrix in a read-only private file mapping (w.mapped, as the
 * checkpoint loader marks them) leaves this process's memory at its first
 * product, the vector builds' copy then holding every byte a product
 * reads: the mapping's resident size falls by exactly its whole pages (it
 * lies 100 bytes into the file, so the pages it shares are kept), and products of 1 and 5 tokens,
 * rows and embeddings read after the drop equal those of the same bytes in
 * heap memory, which is never dropped.  Where the build has no copy (the
 * scalar loop) nothing may drop: a line says so. */
static void test_mapped_pages_dropped(void) {
    enum { ROWS = 512, OFF = 100 };
    const DType types[2] = {DT_Q4_0, DT_Q6_K};
    int bad = 0;
    for (int ti = 0; ti < 2; ti++) {
        const DType t = types[ti];
        const int64_t cols = 2048, bytes = ROWS * quant_row_bytes(t, cols);
        uint8_t *wd = rnd_weight(t, ROWS, cols);
        char path[] = "/tmp/c2t_mapped_XXXXXX";
        const int fd = mkstemp(path);
        uint8_t head[OFF] = {0}, *map = MAP_FAILED;
        if (fd >= 0 && write(fd, head, OFF) == OFF && write(fd, wd, (size_t)bytes) == bytes)
            map = mmap(NULL, (size_t)(OFF + bytes), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (fd >= 0) { close(fd); unlink(path); }
        if (map == MAP_FAILED) {
            CHECK(0, "%s: cannot write and map %s", dtype_name(t), path);
            free(wd);
            return;
        }
        Weight wm = make_weight(t, map + OFF, ROWS, cols), wh = make_weight(t, wd, ROWS, cols);
        wm.mapped = 1;
        float *x = rnd_x(5, cols), *got = xmalloc(sizeof(float) * 5 * cols), *want = xmalloc(sizeof(float) * 5 * cols);
        const long before = mapping_rss_kib(map);
        cpu_backend.matmul(got, x, &wm, 5);
        const long after = mapping_rss_kib(map);
        cpu_backend.matmul(want, x, &wh, 5);
        bad += memcmp(got, want, sizeof(float) * 5 * ROWS) != 0;
        cpu_backend.matmul(got, x + cols, &wm, 1);
        cpu_backend.matmul(want, x + cols, &wh, 1);
        bad += memcmp(got, want, sizeof(float) * ROWS) != 0;
        const int ids[2] = {ROWS - 1, 7};
        cpu_backend.embed(got, &wm, ids, 2);
        cpu_backend.embed(want, &wh, ids, 2);
        bad += memcmp(got, want, sizeof(float) * 2 * cols) != 0;
        cpu_weight_row(&wm, 300, got);
        cpu_weight_row(&wh, 300, want);
        bad += memcmp(got, want, sizeof(float) * cols) != 0;
        const long page_kib = sysconf(_SC_PAGESIZE) / 1024, whole_kib = (OFF + bytes) / 1024 / page_kib * page_kib - page_kib;
        if (!((const CpuWeightCopies *)wm.priv)->kpack)
            printf("# %s: this build reads the blocks in place (no copy): nothing to drop\n", dtype_name(t));
        else if (before < 0)
            printf("# %s: /proc/self/smaps says nothing of the mapping: the drop is not measured\n", dtype_name(t));
        else
            CHECK(before - after == whole_kib, "%s: the mapping's resident size fell by %ld KiB, the matrix's whole pages are %ld",
                  dtype_name(t), before - after, whole_kib);
        cpu_backend.weight_release(&wm);
        cpu_backend.weight_release(&wh);
        munmap(map, (size_t)(OFF + bytes));
        free(wd); free(x); free(got); free(want);
    }
    CHECK(bad == 0, "%d reads of a dropped matrix differ from the same bytes in heap memory", bad);
}

/* A NaN or infinite weight scale (or minimum) makes its row's results
 * non-finite and leaves every other row as it was; a NaN activation does
 * the same to its token.  No crash, no refusal (as ggml). */
static void test_nan_and_inf_scales(void) {
    enum { ROWS = 11, N = 3 };
    static const uint16_t bad_half[3] = {0x7E00, 0x7C00, 0xFC00};
    int bad = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int h = 0; h < 3; h++)
            for (int at_min = 0; at_min < 2; at_min++) {
                const DType t = TYPES[ti];
                if (at_min && m_at(t) < 0) continue;
                const int64_t cols = quant_block_elems(t) * 2, rb = quant_row_bytes(t, cols);
                uint8_t *wd = rnd_weight(t, ROWS, cols);
                float *x = rnd_x(N, cols), *ok = xmalloc(sizeof(float) * N * ROWS), *out = xmalloc(sizeof(float) * N * ROWS);
                Weight w = make_weight(t, wd, ROWS, cols);
                cpu_backend.matmul(ok, x, &w, N);
                cpu_backend.weight_release(&w);   /* the vector builds copy the blocks at a weight's first product */
                memcpy(wd + 4 * rb + (at_min ? m_at(t) : d_at(t)), &bad_half[h], 2);   /* row 4, block 0 */
                x[1 * cols + 7] = NAN;                                                   /* token 1 */
                w = make_weight(t, wd, ROWS, cols);
                cpu_backend.matmul(out, x, &w, N);
                for (int tok = 0; tok < N; tok++)
                    for (int r = 0; r < ROWS; r++) {
                        const int hit = r == 4 || tok == 1;
                        if (hit) bad += isfinite(out[tok * ROWS + r]) != 0;
                        else bad += memcmp(&out[tok * ROWS + r], &ok[tok * ROWS + r], 4) != 0;
                    }
                cpu_backend.weight_release(&w);
                free(wd); free(x); free(ok); free(out);
            }
    CHECK(bad == 0, "%d results wrong around NaN / infinite scales", bad);
}

/* quant_first_nonfinite (what loading a checkpoint refuses): in F32, F16
 * and BF16 every NaN and infinity is found at its index (in the first run
 * of 4096 elements, a later run, the tail past the last whole run; at an
 * odd address), the first of two, and no finite value is (the largest of
 * either sign, the smallest subnormal, -0); in every block type a NaN or
 * infinite d or minimum gives its block's first element, and random finite
 * blocks none. */
static void test_first_nonfinite(void) {
    static const struct { DType t; size_t size; uint32_t bad[3], finite[4]; } E[] = {
        {DT_F32, 4, {0x7FC00000u, 0x7F800000u, 0xFF800001u}, {0x7F7FFFFFu, 0xFF7FFFFFu, 1u, 0x80000000u}},
        {DT_F16, 2, {0x7E00, 0x7C00, 0xFC01}, {0x7BFF, 0xFBFF, 1, 0x8000}},
        {DT_BF16, 2, {0x7FC0, 0x7F80, 0xFF81}, {0x7F7F, 0xFF7F, 1, 0x8000}},
    };
    enum { N = 3 * 4096 + 37 };
    static const int64_t at[] = {0, 7, 4095, 4096, 9000, N - 37, N - 1};
    uint8_t *buf = xmalloc(4 * N + 1), *p = buf + 1;
    int wrong = 0;
    for (int e = 0; e < 3; e++) {
        const size_t sz = E[e].size;
        for (int64_t i = 0; i < N; i++) memcpy(p + i * sz, &E[e].finite[i % 4], sz);
        wrong += quant_first_nonfinite(E[e].t, p, N) != -1;
        for (size_t k = 0; k < sizeof at / sizeof *at; k++)
            for (int b = 0; b < 3; b++) {
                uint8_t keep[4];
                memcpy(keep, p + at[k] * sz, sz);
                memcpy(p + at[k] * sz, &E[e].bad[b], sz);
                const int64_t got = quant_first_nonfinite(E[e].t, p, N);
                if (got != at[k]) { wrong++; fprintf(stderr, "# %s: bad value at %lld found at %lld\n", dtype_name(E[e].t), (long long)at[k], (long long)got); }
                memcpy(p + at[k] * sz, keep, sz);
            }
        memcpy(p + 5000 * sz, &E[e].bad[0], sz);
        memcpy(p + 9000 * sz, &E[e].bad[1], sz);
        wrong += quant_first_nonfinite(E[e].t, p, N) != 5000;
    }
    free(buf);
    static const uint16_t bad_half[3] = {0x7E00, 0x7C00, 0xFC00};
    for (int ti = 0; ti < NTYPES; ti++) {
        const DType t = TYPES[ti];
        const int64_t el = quant_block_elems(t), bb = (int64_t)quant_block_bytes(t);
        uint8_t *w = rnd_weight(t, 1, 5 * el);
        wrong += quant_first_nonfinite(t, w, 5 * el) != -1;
        for (int h = 0; h < 3; h++)
            for (int at_min = 0; at_min < 2; at_min++) {
                if (at_min && m_at(t) < 0) continue;
                uint8_t *s = w + 3 * bb + (at_min ? m_at(t) : d_at(t)), keep[2];
                memcpy(keep, s, 2);
                memcpy(s, &bad_half[h], 2);
                const int64_t got = quant_first_nonfinite(t, w, 5 * el);
                if (got != 3 * el) { wrong++; fprintf(stderr, "# %s: a bad scale in block 3 found at %lld\n", dtype_name(t), (long long)got); }
                memcpy(s, keep, 2);
            }
        free(w);
    }
    CHECK(wrong == 0, "%d answers of quant_first_nonfinite wrong", wrong);
}

/* Activation blocks at the edges of the quantisation rule (quant_q8_row:
 * the products quantise with a vector copy of it on AVX2 and AVX-512): a
 * block so small that its scale's inverse overflows (all integers 0),
 * halves exactly between two integers (round to even: largest |x| 127
 * makes the factor 1), a largest element of either sign and -0.0.  Every
 * (row, token) equal bit for bit to the contract's order on
 * quant_q8_row's integers, for every type, 1 to 9 tokens. */
static void test_activation_edges(void) {
    enum { ROWS = 9, N = 9 };
    const int64_t cols = 512;
    int bad = 0, compared = 0;
    float *x = xmalloc(sizeof(float) * N * cols);
    for (int tok = 0; tok < N; tok++) {
        float *xr = x + tok * cols;
        for (int64_t e = 0; e < cols; e++) xr[e] = rndf() * (1 + tok);
        for (int e = 0; e < 32; e++) xr[e] = ldexpf(rndf(), -140);               /* subnormal: a zero block */
        for (int e = 32; e < 64; e++) xr[e] = (float)((int)(rnd() % 254) - 127) + 0.5f * (e % 2);
        xr[40] = tok % 2 ? -127.0f : 127.0f;                                     /* ties at factor 1 */
        for (int e = 256; e < 288; e++) xr[e] = e % 3 ? -0.0f : 0.0f;            /* signed zeros */
    }
    for (int ti = 0; ti < NTYPES; ti++) {
        const DType t = TYPES[ti];
        const int64_t rb = quant_row_bytes(t, cols);
        uint8_t *wd = rnd_weight(t, ROWS, cols);
        float *out = xmalloc(sizeof(float) * N * ROWS);
        Weight w = make_weight(t, wd, ROWS, cols);
        for (int n = 1; n <= N; n++) {
            cpu_backend.matmul(out, x, &w, n);
            for (int tok = 0; tok < n; tok++)
                for (int r = 0; r < ROWS; r++) {
                    double A;
                    int K;
                    const float want = order_ref(t, wd + r * rb, cols, x + tok * cols, &A, &K);
                    bad += memcmp(&want, &out[tok * ROWS + r], 4) != 0;
                    compared++;
                }
        }
        cpu_backend.weight_release(&w);
        free(wd); free(out);
    }
    free(x);
    CHECK(bad == 0 && compared > 0, "%d of %d results differ from the contract's order at the activations' edges", bad,
          compared);
}

/* Rows that are not whole blocks, and vectors, are refused in one line;
 * quant_dequant_row refuses part blocks and types it cannot read. */
static void test_bad_shapes_refused(void) {
    static uint8_t data[4096];
    Weight w;
    CHECK(cpu_backend.weight(&w, data, DT_Q4_K, 4, 288) == -1 && strstr(err_get(), "not whole blocks of 256") &&
          !strchr(err_get(), '\n'), "Q4_K rows of 288: %s", err_get());
    CHECK(cpu_backend.weight(&w, data, DT_Q8_0, 4, 48) == -1 && strstr(err_get(), "not whole blocks of 32"),
          "Q8_0 rows of 48: %s", err_get());
    CHECK(cpu_backend.weight(&w, data, DT_Q6_K, 1, 256) == -1 && strstr(err_get(), "must be a matrix"),
          "a Q6_K vector: %s", err_get());
    float out[256];
    CHECK(quant_dequant_row(DT_Q4_0, data, out, 48) == -1, "48 elements of Q4_0 dequantised");
    CHECK(quant_dequant_row(DT_I32, data, out, 8) == -1, "I32 dequantised");
    CHECK(quant_row_bytes(DT_Q5_K, 512) == 352 && quant_row_bytes(DT_Q5_0, 64) == 44, "row bytes");
}

/* The checks above can fail: a weight byte changed behind the reference's
 * back (the kernel reads a copy) is seen by the bit comparison, and a
 * changed scale by the bound. */
static void test_checks_can_fail(void) {
    const DType t = DT_Q4_K;
    const int64_t cols = 512, rb = quant_row_bytes(t, cols);
    uint8_t *wd = rnd_weight(t, 3, cols), *copy = xmalloc((size_t)(3 * rb));
    float *x = rnd_x(1, cols), out[3];
    memcpy(copy, wd, (size_t)(3 * rb));
    copy[rb + 100] ^= 0x11;   /* row 1: two nibbles */
    Weight w = make_weight(t, copy, 3, cols);
    cpu_backend.matmul(out, x, &w, 1);
    double A;
    int K;
    const float want0 = order_ref(t, wd, cols, x, &A, &K), want1 = order_ref(t, wd + rb, cols, x, &A, &K);
    CHECK(memcmp(&want0, &out[0], 4) == 0, "an untouched row differs");
    CHECK(memcmp(&want1, &out[1], 4) != 0, "a changed weight byte went unseen");
    cpu_backend.weight_release(&w);
    free(wd); free(copy); free(x);
}

int main(void) {
#ifdef __AVX512BW__
    if (!__builtin_cpu_supports("avx512bw")) { printf("SKIP test_quant: built for AVX-512, which this CPU lacks\n"); return 0; }
#endif
    RUN(test_against_references);
    RUN(test_tokens_independent);
    RUN(test_row_groups);
    RUN(test_tiles_equal_dots);
    RUN(test_fetch_distances);
    RUN(test_matmul_many_equals_matmuls);
    RUN(test_rows_are_dequantised);
    RUN(test_mapped_pages_dropped);
    RUN(test_nan_and_inf_scales);
    RUN(test_first_nonfinite);
    RUN(test_activation_edges);
    RUN(test_bad_shapes_refused);
    RUN(test_checks_can_fail);
    return h_done();
}
