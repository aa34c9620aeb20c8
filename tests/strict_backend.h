/* The CPU backend with one more rule enforced: a forward's control arrays
 * (embed's token ids, rope's and rope_kv's positions, rope_kv's first slot,
 * attention's context lengths and masks, copy_rows' row lists, kv_keep's
 * list), and the
 * outputs of softmax_topk_dev, must lie in memory from the backend's own alloc, as kernels.h says.  On
 * the CPU any host array would work, so a caller that passes one is only
 * caught here, not on a GPU where it would read a host address.  Each op
 * given a host array counts a violation (the first few are printed) and
 * then runs as the CPU backend would.  Header-only, for tests: call
 * strict_backend() once and load the models with it. */
#ifndef C2T_STRICT_BACKEND_H
#define C2T_STRICT_BACKEND_H
#include "tests/harness.h"
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include <stdint.h>
#include <stdio.h>

typedef struct { const char *lo; size_t bytes; } StrictRange;
static StrictRange *strict_ranges;
static int strict_n, strict_cap;
static long strict_violations;
static Backend strict_be;

static float *strict_alloc(size_t n) {
    float *p = cpu_backend.alloc(n);
    if (strict_n == strict_cap) {
        strict_cap = strict_cap ? 2 * strict_cap : 256;
        strict_ranges = xrealloc(strict_ranges, sizeof *strict_ranges * strict_cap);
    }
    strict_ranges[strict_n++] = (StrictRange){(const char *)p, n * sizeof(float)};
    return p;
}

static void strict_release(void *p) {
    for (int i = 0; i < strict_n; i++)
        if (strict_ranges[i].lo == p) { strict_ranges[i] = strict_ranges[--strict_n]; break; }
    cpu_backend.release(p);
}

/* whether [p, p + bytes) lies inside one allocation */
static void strict_check(const void *p, size_t bytes, const char *what) {
    if (!p || !bytes) return;
    const char *c = p;
    for (int i = 0; i < strict_n; i++)
        if (c >= strict_ranges[i].lo && c + bytes <= strict_ranges[i].lo + strict_ranges[i].bytes) return;
    if (strict_violations++ < 5) fprintf(stderr, "# strict backend: %s is not backend memory\n", what);
}

static void strict_embed(float *out, const Weight *table, const int *tokens, int n) {
    strict_check(tokens, sizeof(int) * (size_t)n, "embed's token ids");
    cpu_backend.embed(out, table, tokens, n);
}
static void strict_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq) {
    strict_check(pos, sizeof(int) * (size_t)n, "rope's positions");
    cpu_backend.rope(x, pos, n, nheads, head_dim, inv_freq);
}
static void strict_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads,
                           int head_dim, const float *inv_freq, KVCache *c, int layer, const int *slot) {
    strict_check(pos, sizeof(int) * (size_t)n, "rope_kv's positions");
    strict_check(slot, sizeof(int), "rope_kv's first slot");
    cpu_backend.rope_kv(q, k, v, pos, n, heads, kv_heads, head_dim, inv_freq, c, layer, slot);
}
static void strict_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads,
                             int nkv, int head_dim) {
    for (int i = 0; i < n_seq; i++) {
        if (seqs[i].n <= 0) continue;
        strict_check(seqs[i].mask, (size_t)seqs[i].n * seqs[i].mask_w, "an attention mask");
        strict_check(seqs[i].past, sizeof(int), "an attention's context length");
    }
    cpu_backend.attention(out, q, seqs, n_seq, layer, nheads, nkv, head_dim);
}

static void strict_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    strict_check(keep, sizeof(int) * (size_t)m, "kv_keep's list");
    cpu_backend.kv_keep(c, dst, keep, m);
}

static void strict_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n,
                             int width) {
    strict_check(dst_rows, sizeof(int) * (size_t)n, "copy_rows' destination rows");
    strict_check(src_rows, sizeof(int) * (size_t)n, "copy_rows' source rows");
    cpu_backend.copy_rows(dst, dst_rows, src, src_rows, n, width);
}

/* the device cycle's distribution outputs */
static void strict_softmax_topk_dev(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                                    float *probs, int topm, float *entropy) {
    const size_t nk = (size_t)n * (k > 0 ? k : 0);
    strict_check(ids, sizeof(int) * nk, "softmax_topk_dev's ids");
    strict_check(probs, sizeof(float) * nk, "softmax_topk_dev's probabilities");
    strict_check(entropy, sizeof(float) * (size_t)n, "softmax_topk_dev's entropies");
    cpu_backend.softmax_topk_dev(logits, n, vocab, temperature, k, ids, probs, topm, entropy);
}

static const Backend *strict_backend(void) {
    strict_be = cpu_backend;
    strict_be.alloc = strict_alloc;
    strict_be.release = strict_release;
    strict_be.embed = strict_embed;
    strict_be.rope = strict_rope;
    strict_be.rope_kv = strict_rope_kv;
    strict_be.attention = strict_attention;
    strict_be.copy_rows = strict_copy_rows;
    strict_be.kv_keep = strict_kv_keep;
    strict_be.softmax_topk_dev = strict_softmax_topk_dev;
    return &strict_be;
}

/* Run last: no forward of the test passed a host array, and the check
 * itself catches one (rope given host positions). */
static void test_forward_inputs_in_backend_memory(void) {
    CHECK(strict_violations == 0, "%ld control arrays of forwards were host memory", strict_violations);
    const long before = strict_violations;
    float *x = strict_be.alloc(16), inv[8] = {0};
    const int pos[1] = {3};
    strict_be.rope(x, pos, 1, 1, 16, inv);
    CHECK(strict_violations == before + 1, "rope given host positions was not caught");
    strict_violations = before;
    strict_be.release(x);
}
#endif
