/* The CPU backend with one more rule enforced: a forward's control arrays
 * (embed's token ids, rope's and rope_kv's positions, rope_kv's first slot,
 * attention's context lengths and masks, copy_rows' row lists, kv_keep's
 * list), and the
 * outputs of softmax_topk_dev, must lie in memory from the backend's own alloc, as kernels.h says.  On
 * the CPU any host array would work, so a caller that passes one is only
 * caught here, not on a GPU where it would read a host address.  Each op
 * given a host array counts a violation (the first few are printed) and
 * then runs as the CPU backend would.  Header-only, for tests: call
 * strict_backend() once and load the models with it.
 *
 * With strict_recording set it also plays a recording backend, as the CUDA
 * backend's record_begin / record_end do (kernels.h, backend_recorded): a
 * unit of ops is issued twice, and the ops that take part in it (the tree
 * ops, the distributions, embed, products, attention and the KV ops) sign
 * what they were given, pointers, sizes and an attention's sequence table,
 * as a GPU launch would be signed.  The CPU runs both issues, so a unit
 * that advances host state on each issue gives other results than the
 * same cycle op by op; the emulation counts what a GPU could not record: issues
 * signed differently, and host transfers or allocations inside a unit.
 * Units that grow a tree (a device program's cycle) keep their
 * signatures, and so do those that verify a tree without growing one (after
 * a program's read), so a test can count how many different graphs a GPU would
 * record for them, and say whether they walked the tree too. */
#ifndef C2T_STRICT_BACKEND_H
#define C2T_STRICT_BACKEND_H
#include "tests/harness.h"
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include "kernels/base/replay.h"
#include <stdint.h>
#include <stdio.h>

typedef struct { const char *lo; size_t bytes; } StrictRange;
static StrictRange *strict_ranges;
static int strict_n, strict_cap;
static long strict_violations;
static Backend strict_be;

/* ---- recording, emulated ---- */
static int strict_recording;            /* set by a test */
static int strict_in_unit, strict_issue;
static uint64_t strict_sig, strict_first_sig;
static int strict_grew;                 /* the unit ran tree_grow */
static int strict_walked;               /* the unit ran tree_accept */
static int strict_inputs;               /* the unit made a forward's inputs from a tree (tree_inputs) */
static long strict_units, strict_unit_mismatches, strict_unit_transfers;
#define STRICT_SIGS 64
static uint64_t strict_draft_sigs[STRICT_SIGS], strict_verify_sigs[STRICT_SIGS];
static long strict_draft_units, strict_walk_units;   /* units that grew a tree; units that walked one */
static int strict_n_draft_sigs, strict_n_verify_sigs;   /* and the units that did not grow one (a verification) */

static void strict_check(const void *p, size_t bytes, const char *what);

static inline void strict_recording_reset(void) {
    strict_units = strict_unit_mismatches = strict_unit_transfers = strict_draft_units = strict_walk_units = 0;
    strict_n_draft_sigs = strict_n_verify_sigs = 0;
}

#define SP(x) (uint64_t)(uintptr_t)(x)
#define STRICT_SIGN(tag, ...) \
    strict_sign(tag, (const uint64_t[]){__VA_ARGS__}, sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
static void strict_sign(int tag, const uint64_t *v, size_t n) {
    if (!strict_in_unit) return;
    strict_sig = replay_sign(strict_sig, &tag, sizeof tag);
    strict_sig = replay_sign(strict_sig, v, n * sizeof *v);
}

/* what a recording could not take: a transfer or an allocation */
static void strict_no_transfer(void) { strict_unit_transfers += strict_in_unit; }

static int strict_record_begin(void) {
    if (!strict_recording || strict_in_unit) return 0;   /* a nested unit runs inside the outer one */
    strict_in_unit = 1;
    strict_issue = 0;
    strict_sig = REPLAY_SIGN_INIT;
    strict_grew = strict_walked = strict_inputs = 0;
    return 1;
}

static int strict_record_end(void) {
    if (strict_issue == 0) {   /* signed: issue it again, as a recording */
        strict_first_sig = strict_sig;
        strict_issue = 1;
        strict_sig = REPLAY_SIGN_INIT;
        strict_grew = strict_walked = strict_inputs = 0;
        return 1;
    }
    strict_in_unit = 0;
    strict_units++;
    strict_unit_mismatches += strict_sig != strict_first_sig;
    strict_walk_units += strict_walked;
    if (!strict_grew && !strict_inputs) return 0;   /* a forward of host inputs */
    uint64_t *sigs = strict_grew ? strict_draft_sigs : strict_verify_sigs;
    int *n_sigs = strict_grew ? &strict_n_draft_sigs : &strict_n_verify_sigs;
    strict_draft_units += strict_grew;
    int known = 0;
    for (int i = 0; i < *n_sigs && !known; i++) known = sigs[i] == strict_sig;
    if (!known && *n_sigs < STRICT_SIGS) sigs[(*n_sigs)++] = strict_sig;
    return 0;
}

static void strict_to_host(float *host, const float *dev, size_t n) {
    strict_no_transfer();
    cpu_backend.to_host(host, dev, n);
}
static void strict_to_device(float *dev, const float *host, size_t n) {
    strict_no_transfer();
    cpu_backend.to_device(dev, host, n);
}
static void strict_copy(float *dst, const float *src, size_t n) {
    STRICT_SIGN(1, SP(dst), SP(src), n);
    cpu_backend.copy(dst, src, n);
}
static void strict_matmul(float *out, const float *x, const Weight *w, int n) {
    STRICT_SIGN(2, SP(out), SP(x), SP(w->data), (uint64_t)n);
    cpu_backend.matmul(out, x, w, n);
}
static void strict_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    for (int i = 0; i < count; i++) STRICT_SIGN(3, SP(outs[i]), SP(x), SP(ws[i]->data), (uint64_t)n);
    cpu_backend.matmul_many(outs, x, ws, count, n);
}
static void strict_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n) {
    STRICT_SIGN(4, SP(c), (uint64_t)layer, (uint64_t)slot, SP(k), SP(v), (uint64_t)n);
    cpu_backend.kv_write(c, layer, slot, k, v, n);
}
static void strict_argmax_dev(const float *logits, int n, int vocab, int *ids) {
    STRICT_SIGN(5, SP(logits), (uint64_t)n, (uint64_t)vocab, SP(ids));
    cpu_backend.argmax_dev(logits, n, vocab, ids);
}
static void strict_tree_root(const DevTree *t, const int *root) {
    STRICT_SIGN(6, SP(t->token), SP(root));
    cpu_backend.tree_root(t, root);
}
static void strict_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs,
                             const float *entropy, int k, const int *picks, int count, const int *map) {
    STRICT_SIGN(7, SP(t->token), (uint64_t)n0, SP(rows), SP(ids), SP(probs), SP(entropy), (uint64_t)k, SP(picks),
                (uint64_t)count, SP(map));
    strict_grew = 1;
    cpu_backend.tree_grow(t, n0, rows, ids, probs, entropy, k, picks, count, map);
}
static void strict_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    STRICT_SIGN(8, SP(t->token), SP(score), (uint64_t)from, (uint64_t)n, (uint64_t)m, SP(sel));
    cpu_backend.tree_top(t, score, from, n, m, sel);
}
static void strict_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    STRICT_SIGN(9, SP(dst->token), SP(src->token), SP(keep), (uint64_t)m, (uint64_t)pad);
    cpu_backend.tree_compact(dst, src, keep, m, pad);
}
static void strict_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0,
                               int nctx, int *out, uint8_t *mask) {
    STRICT_SIGN(10, SP(t->token), SP(rows), (uint64_t)m, SP(at), (uint64_t)base, (uint64_t)ones, (uint64_t)pos0,
                (uint64_t)nctx, SP(out), SP(mask));
    if (at) strict_check(at, sizeof(int), "tree_inputs' origin");
    strict_inputs |= strict_in_unit;
    cpu_backend.tree_inputs(t, rows, m, at, base, ones, pos0, nctx, out, mask);
}

static void strict_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    STRICT_SIGN(18, SP(t->token), (uint64_t)n, SP(want), (uint64_t)from_start, (uint64_t)steps, SP(walk));
    strict_walked |= strict_in_unit;
    cpu_backend.tree_accept(t, n, want, from_start, steps, walk);
}

static void strict_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key,
                              int node0, int *ids) {
    uint32_t t, q;
    memcpy(&t, &sp->temperature, 4);
    memcpy(&q, &sp->top_p, 4);
    STRICT_SIGN(19, SP(logits), (uint64_t)n, (uint64_t)vocab, t, (uint64_t)sp->top_k, q, SP(key), (uint64_t)node0,
                SP(ids));
    strict_check(key, 2 * sizeof(uint32_t), "sample_dev's key");
    strict_check(ids, sizeof(int) * (size_t)n, "sample_dev's ids");
    cpu_backend.sample_dev(logits, n, vocab, sp, key, node0, ids);
}

static float *strict_alloc(size_t n) {
    strict_no_transfer();
    float *p = cpu_backend.alloc(n);
    if (strict_n == strict_cap) {
        strict_cap = strict_cap ? 2 * strict_cap : 256;
        strict_ranges = xrealloc(strict_ranges, sizeof *strict_ranges * strict_cap);
    }
    strict_ranges[strict_n++] = (StrictRange){(const char *)p, n * sizeof(float)};
    return p;
}

static void strict_release(void *p) {
    strict_no_transfer();
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
    STRICT_SIGN(11, SP(out), SP(table->data), SP(tokens), (uint64_t)n);
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
    STRICT_SIGN(12, SP(q), SP(k), SP(v), SP(pos), (uint64_t)n, SP(c), (uint64_t)layer, SP(slot));
    cpu_backend.rope_kv(q, k, v, pos, n, heads, kv_heads, head_dim, inv_freq, c, layer, slot);
}
static void strict_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads,
                             int nkv, int head_dim) {
    STRICT_SIGN(13, SP(out), SP(q), (uint64_t)n_seq, (uint64_t)layer);
    for (int i = 0; i < n_seq; i++) {   /* the sequence table: a GPU uploads it with the launch */
        const AttnSeq *a = &seqs[i];
        STRICT_SIGN(14, SP(a->kv), (uint64_t)a->off, (uint64_t)a->n, SP(a->past), (uint64_t)a->ctx_max, SP(a->mask),
                    (uint64_t)a->mask_w);
    }
    for (int i = 0; i < n_seq; i++) {
        if (seqs[i].n <= 0) continue;
        strict_check(seqs[i].mask, (size_t)seqs[i].n * seqs[i].mask_w, "an attention mask");
        strict_check(seqs[i].past, sizeof(int), "an attention's context length");
    }
    cpu_backend.attention(out, q, seqs, n_seq, layer, nheads, nkv, head_dim);
}

static void strict_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    strict_check(keep, sizeof(int) * (size_t)m, "kv_keep's list");
    STRICT_SIGN(15, SP(c), (uint64_t)dst, SP(keep), (uint64_t)m);
    cpu_backend.kv_keep(c, dst, keep, m);
}

static void strict_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n,
                             int width) {
    strict_check(dst_rows, sizeof(int) * (size_t)n, "copy_rows' destination rows");
    strict_check(src_rows, sizeof(int) * (size_t)n, "copy_rows' source rows");
    STRICT_SIGN(16, SP(dst), SP(dst_rows), SP(src), SP(src_rows), (uint64_t)n, (uint64_t)width);
    cpu_backend.copy_rows(dst, dst_rows, src, src_rows, n, width);
}

/* the cycle's distribution outputs in backend memory */
static void strict_softmax_topk_dev(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                                    float *probs, int topm, float *entropy) {
    const size_t nk = (size_t)n * (k > 0 ? k : 0);
    strict_check(ids, sizeof(int) * nk, "softmax_topk_dev's ids");
    strict_check(probs, sizeof(float) * nk, "softmax_topk_dev's probabilities");
    strict_check(entropy, sizeof(float) * (size_t)n, "softmax_topk_dev's entropies");
    STRICT_SIGN(17, SP(logits), (uint64_t)n, (uint64_t)vocab, (uint64_t)k, SP(ids), SP(probs), (uint64_t)topm,
                SP(entropy));
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
    strict_be.to_host = strict_to_host;
    strict_be.to_device = strict_to_device;
    strict_be.copy = strict_copy;
    strict_be.matmul = strict_matmul;
    strict_be.matmul_many = strict_matmul_many;
    strict_be.kv_write = strict_kv_write;
    strict_be.argmax_dev = strict_argmax_dev;
    strict_be.tree_root = strict_tree_root;
    strict_be.tree_grow = strict_tree_grow;
    strict_be.tree_top = strict_tree_top;
    strict_be.tree_compact = strict_tree_compact;
    strict_be.tree_inputs = strict_tree_inputs;
    strict_be.tree_accept = strict_tree_accept;
    strict_be.sample_dev = strict_sample_dev;
    strict_be.record_begin = strict_record_begin;
    strict_be.record_end = strict_record_end;
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
