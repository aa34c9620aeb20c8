/* Backend parity harness: every op of a backend under test against a
 * reference backend on random inputs.  Here: the optimised CPU backend
 * against the naive scalar one (tests/naive_backend.h); on a GPU machine
 * tests/test_cuda.c runs the same harness (tests/parity.h, where the
 * tolerances are documented) with CUDA against CPU. */
#include "tests/harness.h"
#include "tests/naive_backend.h"
#include "kernels/base/util.h"
#include "tests/parity.h"

static void test_cpu_backend_is_complete(void) {
#define HAS_OP(op) CHECK(cpu_backend.op != NULL, "cpu backend lacks " #op);
    BACKEND_OPS(HAS_OP)
#undef HAS_OP
}

static void test_cpu_against_naive(void) {
    CHECK(parity(&cpu_backend, &naive_backend, 1) == 0, "the CPU backend differs from the naive reference");
}

/* The harness must catch a wrong kernel: break one op at a time. */
static void matmul_off_by_one(float *out, const float *x, const Weight *w, int n) {
    cpu_backend.matmul(out, x, w, n);
    out[(size_t)n * w->rows - 1] += 0.01f;
}
static void attention_unmasked(float *out, const float *q, const KVCache *c, int l, int n, int nctx,
                               const uint8_t *mask, int nh, int nkv, int hd) {
    (void)mask;
    cpu_backend.attention(out, q, c, l, n, nctx, NULL, nh, nkv, hd);
}
static void topk_ties_wrong(const float *lg, int n, int vocab, float t, int k, int *ids, float *p, int topm, float *h) {
    cpu_backend.softmax_topk(lg, n, vocab, t, k, ids, p, topm + 1, h);   /* entropy over M+1 */
}
static void test_harness_catches_wrong_kernels(void) {
    Backend broken = cpu_backend;
    broken.matmul = matmul_off_by_one;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "broken matmul not caught");
    broken = cpu_backend;
    broken.attention = attention_unmasked;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "attention ignoring the tree mask not caught");
    broken = cpu_backend;
    broken.softmax_topk = topk_ties_wrong;
    CHECK(parity(&broken, &naive_backend, 0) > 0, "top-M entropy over the wrong M not caught");
}

int main(void) {
    RUN(test_cpu_backend_is_complete);
    RUN(test_cpu_against_naive);
    RUN(test_harness_catches_wrong_kernels);
    return h_done();
}
