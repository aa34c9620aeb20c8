/* Backend parity harness: every op of a backend under test against a
 * reference backend on random inputs.  tests/test_kernels.c runs the
 * optimised CPU backend against the naive scalar one (tests/naive_backend.h);
 * tests/test_cuda.c runs CUDA against CPU on a GPU machine.
 * Tolerances: |Δ| ≤ TOL · max(1, max|ref|) with TOL 1e-5 for element-wise
 * ops and 1e-4 for reductions over ≥ 64 terms (float vs double sums); ids
 * (top-k, argmax) must agree exactly.  A test file may define the
 * PARITY_TOL_* macros before including this header to set its own bounds.
 * Include after tests/harness.h. */
#ifndef C2T_PARITY_H
#define C2T_PARITY_H
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PARITY_TOL_MATMUL
#define PARITY_TOL_MATMUL 1e-4f          /* matmul (embed/bias ×10) */
#endif
#ifndef PARITY_TOL_ROWS
#define PARITY_TOL_ROWS 1e-5f            /* rmsnorm/add/swiglu/geglu/scale/concat/rope */
#endif
#ifndef PARITY_TOL_ATTENTION
#define PARITY_TOL_ATTENTION 1e-4f       /* attention/kv_keep */
#endif
#ifndef PARITY_TOL_DISTRIBUTION
#define PARITY_TOL_DISTRIBUTION 1e-4f    /* probabilities and entropies */
#endif

static uint64_t seed = 0x9E3779B97F4A7C15ULL;
static float frand(void) {
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return (float)((seed >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}
static void fill(float *x, size_t n, float scale) { for (size_t i = 0; i < n; i++) x[i] = frand() * scale; }

static void f32_to(DType dt, const float *src, void *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (dt == DT_F32) { ((float *)dst)[i] = src[i]; continue; }
        if (dt == DT_BF16) { uint32_t u; memcpy(&u, &src[i], 4); ((uint16_t *)dst)[i] = (uint16_t)((u + 0x8000) >> 16); continue; }
        _Float16 h = (_Float16)src[i]; memcpy((uint16_t *)dst + i, &h, 2);
    }
}

/* Runs an output of n floats through both backends and returns the scaled
 * max difference.  Inputs are uploaded by the op lambdas below. */
static float rel_err(const float *got, const float *ref, size_t n) {
    float m = 1, d = 0;
    for (size_t i = 0; i < n; i++) { if (fabsf(ref[i]) > m) m = fabsf(ref[i]); if (fabsf(got[i] - ref[i]) > d || isnan(got[i])) d = isnan(got[i]) ? INFINITY : fabsf(got[i] - ref[i]); }
    return d / m;
}

/* device buffer from host data */
static float *up(const Backend *b, const float *h, size_t n) { float *d = b->alloc(n); b->to_device(d, h, n); return d; }
static float *down(const Backend *b, const float *d, size_t n) { float *h = xmalloc(sizeof(float) * n); b->to_host(h, d, n); return h; }
/* a forward's control arrays (token ids, positions, masks) in b's memory */
static int *dev_ints(const Backend *b, const int *h, size_t n) {
    int *d = backend_alloc_ints(b, n ? n : 1);
    backend_ints_to_device(b, d, h, n);
    return d;
}
static uint8_t *dev_mask(const Backend *b, const uint8_t *h, size_t bytes) {
    if (!h) return NULL;
    int *w = xcalloc((bytes + 3) / 4 + 1, sizeof(int));
    memcpy(w, h, bytes);
    uint8_t *d = (uint8_t *)(void *)dev_ints(b, w, (bytes + 3) / 4);
    free(w);
    return d;
}

/* ---- one checker per op family; each returns the worst relative error ---- */

static float check_matmul(const Backend *B, const Backend *R, DType dt, int n, int rows, int cols) {
    float *wf = xmalloc(sizeof(float) * rows * cols), *x = xmalloc(sizeof(float) * n * cols);
    void *wd = xmalloc(4 * (size_t)rows * cols);
    fill(wf, (size_t)rows * cols, 0.5f); fill(x, (size_t)n * cols, 1);
    f32_to(dt, wf, wd, (size_t)rows * cols);
    Weight wb, wr;
    B->weight(&wb, wd, dt, rows, cols); R->weight(&wr, wd, dt, rows, cols);
    float *xb = up(B, x, (size_t)n * cols), *ob = B->alloc((size_t)n * rows), *orr = xmalloc(sizeof(float) * n * rows);
    B->matmul(ob, xb, &wb, n);
    R->matmul(orr, x, &wr, n);
    float *o = down(B, ob, (size_t)n * rows);
    float e = rel_err(o, orr, (size_t)n * rows);
    /* embed and bias ride along on the same weight */
    int tok[5] = {0, rows - 1, rows / 2, -1, rows};   /* the last two outside the table: zero rows */
    int *tb = dev_ints(B, tok, 5), *tr = dev_ints(R, tok, 5);
    float *eb = B->alloc(5 * (size_t)cols), *er = xmalloc(sizeof(float) * 5 * cols);
    B->embed(eb, &wb, tb, 5); R->embed(er, &wr, tr, 5);
    float *eh = down(B, eb, 5 * (size_t)cols);
    float e2 = rel_err(eh, er, 5 * (size_t)cols);
    for (size_t j = 3 * (size_t)cols; j < 5 * (size_t)cols; j++)
        if (eh[j] != 0.0f || er[j] != 0.0f) e2 = INFINITY;
    B->release(tb); R->release(tr);
    Weight bb, br;
    B->weight(&bb, wd, dt, 1, cols); R->weight(&br, wd, dt, 1, cols);
    B->add_bias(xb, &bb, n); R->add_bias(x, &br, n);
    float *xh = down(B, xb, (size_t)n * cols);
    float e3 = rel_err(xh, x, (size_t)n * cols);
    B->release(xb); B->release(ob); B->release(eb); B->weight_release(&wb); B->weight_release(&bb);
    free(wf); free(x); free(wd); free(orr); free(o); free(er); free(eh); free(xh);
    return fmaxf(e, fmaxf(e2 * 10, e3 * 10));   /* embed/bias are exact copies: tighter */
}

static float check_rows(const Backend *B, const Backend *R, DType dt, int n, int dim) {
    float *x = xmalloc(sizeof(float) * n * dim), *g = xmalloc(sizeof(float) * n * dim), *wf = xmalloc(sizeof(float) * dim);
    void *wd = xmalloc(4 * (size_t)dim);
    fill(x, (size_t)n * dim, 2); fill(g, (size_t)n * dim, 3); fill(wf, dim, 1);
    f32_to(dt, wf, wd, dim);
    Weight wb, wr;
    B->weight(&wb, wd, dt, 1, dim); R->weight(&wr, wd, dt, 1, dim);
    size_t N = (size_t)n * dim;
    float *xb = up(B, x, N), *gb = up(B, g, N), *ob = B->alloc(N), *orr = xmalloc(sizeof(float) * N);
    float worst = 0, *h;
    B->rmsnorm(ob, xb, &wb, n, 1e-5f); R->rmsnorm(orr, x, &wr, n, 1e-5f);
    h = down(B, ob, N); worst = fmaxf(worst, rel_err(h, orr, N)); free(h);
    /* add_rmsnorm against add then rmsnorm, its output over y (as the
     * layers use it); x and g restored after */
    {
        float *x2 = xmalloc(sizeof(float) * N), *g2 = xmalloc(sizeof(float) * N), *o2 = xmalloc(sizeof(float) * N);
        memcpy(x2, x, sizeof(float) * N); memcpy(g2, g, sizeof(float) * N);
        R->add(x2, g2, N); R->rmsnorm(o2, x2, &wr, n, 1e-5f);
        B->add_rmsnorm(gb, xb, gb, &wb, n, 1e-5f);
        h = down(B, xb, N); worst = fmaxf(worst, rel_err(h, x2, N)); free(h);
        h = down(B, gb, N); worst = fmaxf(worst, rel_err(h, o2, N)); free(h);
        B->to_device(xb, x, N); B->to_device(gb, g, N);
        free(x2); free(g2); free(o2);
    }
    B->add(gb, xb, N); R->add(g, x, N);
    h = down(B, gb, N); worst = fmaxf(worst, rel_err(h, g, N)); free(h);
    B->swiglu(gb, xb, N); R->swiglu(g, x, N);
    h = down(B, gb, N); worst = fmaxf(worst, rel_err(h, g, N)); free(h);
    B->geglu(gb, xb, N); R->geglu(g, x, N);
    h = down(B, gb, N); worst = fmaxf(worst, rel_err(h, g, N)); free(h);
    B->scale(gb, 25.25f, N); R->scale(g, 25.25f, N);
    h = down(B, gb, N); worst = fmaxf(worst, rel_err(h, g, N)); free(h);
    float *cb = B->alloc(2 * N), *cr = xmalloc(sizeof(float) * 2 * N);
    B->concat(cb, xb, dim, gb, dim, n); R->concat(cr, x, dim, g, dim, n);
    h = down(B, cb, 2 * N); worst = fmaxf(worst, rel_err(h, cr, 2 * N)); free(h);
    /* copy_rows: a permuting gather of x's rows into the second half of
     * concat's output, then a scatter of the first n rows to reversed rows */
    int *perm = xmalloc(sizeof(int) * n), *rev = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) { perm[i] = (i * 7 + 3) % n; rev[i] = n - 1 - i; }
    int *permb = dev_ints(B, perm, n), *permr = dev_ints(R, perm, n), *revb = dev_ints(B, rev, n), *revr = dev_ints(R, rev, n);
    B->copy_rows(cb + N, NULL, xb, permb, n, dim); R->copy_rows(cr + N, NULL, x, permr, n, dim);
    B->copy_rows(cb, revb, cb + N, NULL, n, dim); R->copy_rows(cr, revr, cr + N, NULL, n, dim);
    B->release(permb); R->release(permr); B->release(revb); R->release(revr);
    h = down(B, cb, 2 * N); worst = fmaxf(worst, rel_err(h, cr, 2 * N)); free(h);
    free(perm); free(rev);
    /* rope over heads of 16 at positions up to 4000 */
    int *pos = xmalloc(sizeof(int) * n);
    float inv[8];
    for (int i = 0; i < n; i++) pos[i] = (int)(fabsf(frand()) * 4000);
    for (int i = 0; i < 8; i++) inv[i] = powf(10000.0f, -2.0f * i / 16);
    int *posb = dev_ints(B, pos, n), *posr = dev_ints(R, pos, n);
    B->rope(xb, posb, n, dim / 16, 16, inv); R->rope(x, posr, n, dim / 16, 16, inv);
    h = down(B, xb, N); worst = fmaxf(worst, rel_err(h, x, N)); free(h);
    B->release(posb); R->release(posr);
    B->release(xb); B->release(gb); B->release(ob); B->release(cb); B->weight_release(&wb);
    free(x); free(g); free(wf); free(wd); free(orr); free(cr); free(pos);
    return worst;
}

/* attention over a random cache of past + n slots with n new queries, under
 * a random tree mask (use_mask) or causal, within a sliding window of that
 * many positions (0: none; query i at position past + i, the slots at
 * theirs); then kv_keep of every other new slot (their positions move with
 * them) and one causal query over the compacted cache */
static float check_attention_shape(const Backend *B, const Backend *R, int past, int n, int use_mask, int nh,
                                   int nkv, int hd, int window) {
    const int kvd = nkv * hd, nctx = past + n, layers = 2, layer = 1;
    KVCache *cb = B->kv_create(layers, nctx + 4, kvd), *cr = R->kv_create(layers, nctx + 4, kvd);
    float *k = xmalloc(sizeof(float) * nctx * kvd), *v = xmalloc(sizeof(float) * nctx * kvd);
    float *q = xmalloc(sizeof(float) * n * nh * hd);
    fill(k, (size_t)nctx * kvd, 1); fill(v, (size_t)nctx * kvd, 1); fill(q, (size_t)n * nh * hd, 2);
    float *kb = up(B, k, (size_t)nctx * kvd), *vb = up(B, v, (size_t)nctx * kvd), *qb = up(B, q, (size_t)n * nh * hd);
    B->kv_write(cb, layer, 0, kb, vb, nctx); R->kv_write(cr, layer, 0, k, v, nctx);
    uint8_t *mask = NULL;
    /* the mask's window: up to 3 earlier entries (a draft step's siblings and
     * ancestors), each visible at random, then a random tree over the n new
     * tokens; the slots before the window are visible to all */
    const int extra = past < 3 ? past : 3, w = n + extra;
    if (use_mask) {
        mask = xcalloc((size_t)n * w, 1);
        int *par = xmalloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) {
            par[i] = i ? (int)(fabsf(frand()) * i) % i : -1;
            for (int j = 0; j < extra; j++) mask[(size_t)i * w + j] = frand() > 0;
            for (int a = i; a >= 0; a = par[a]) mask[(size_t)i * w + extra + a] = 1;
        }
        free(par);
    }
    float *ob = B->alloc((size_t)n * nh * hd), *orr = xmalloc(sizeof(float) * n * nh * hd);
    uint8_t *mb = dev_mask(B, mask, (size_t)n * w), *mr = dev_mask(R, mask, (size_t)n * w);
    /* the context length in backend memory; B's launch sized for the whole
     * cache (a bucket), which must change nothing */
    int *pastb = dev_ints(B, &past, 1), *pastr = dev_ints(R, &past, 1);
    int *qpos = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) qpos[i] = past + i;
    int *qposb = dev_ints(B, qpos, n), *qposr = dev_ints(R, qpos, n);
    B->attention(ob, qb, &(AttnSeq){cb, 0, n, pastb, nctx + 4, mb, w, window, qposb}, 1, layer, nh, nkv, hd);
    R->attention(orr, q, &(AttnSeq){cr, 0, n, pastr, nctx, mr, w, window, qposr}, 1, layer, nh, nkv, hd);
    if (mb) { B->release(mb); R->release(mr); }
    B->release(pastb); R->release(pastr);
    float *o = down(B, ob, (size_t)n * nh * hd);
    float e = rel_err(o, orr, (size_t)n * nh * hd);
    /* keep every other new slot, then attend again from one query */
    int m = (n + 1) / 2, *keep = xmalloc(sizeof(int) * m);
    for (int i = 0; i < m; i++) keep[i] = 2 * i;   /* from slot past, in backend memory */
    int *keepb = dev_ints(B, keep, m), *keepr = dev_ints(R, keep, m);
    B->kv_keep(cb, past, keepb, m); R->kv_keep(cr, past, keepr, m);
    B->release(keepb); R->release(keepr);
    const int kept_past = past + m - 1;
    pastb = dev_ints(B, &kept_past, 1); pastr = dev_ints(R, &kept_past, 1);
    B->attention(ob, qb, &(AttnSeq){cb, 0, 1, pastb, past + m, NULL, 0, window, qposb + (n - 1)}, 1, layer, nh, nkv, hd);
    R->attention(orr, q, &(AttnSeq){cr, 0, 1, pastr, past + m, NULL, 0, window, qposr + (n - 1)}, 1, layer, nh, nkv, hd);
    B->release(pastb); R->release(pastr); B->release(qposb); R->release(qposr); free(qpos);
    free(o);
    o = down(B, ob, (size_t)nh * hd);
    e = fmaxf(e, rel_err(o, orr, (size_t)nh * hd));
    B->kv_free(cb); R->kv_free(cr);
    B->release(kb); B->release(vb); B->release(qb); B->release(ob);
    free(k); free(v); free(q); free(mask); free(orr); free(o); free(keep);
    return e;
}

/* rope_kv of n new tokens after `past` cached ones against rope, rope and
 * kv_write: the rotated q and k, and attention from those queries over the
 * cache, which reads the rows written, within a sliding window of that many
 * positions (0: none): rope_kv's positions (past + 0..3000 on) against the
 * reference's kv_write's slot positions and its positions written after */
static float check_rope_kv(const Backend *B, const Backend *R, int past, int n, int nh, int nkv, int hd, int window) {
    const int kvd = nkv * hd, qd = nh * hd, layer = 1;
    KVCache *cb = B->kv_create(2, past + n + 2, kvd), *cr = R->kv_create(2, past + n + 2, kvd);
    float *k = xmalloc(sizeof(float) * (past + n) * kvd), *v = xmalloc(sizeof(float) * (past + n) * kvd);
    float *q = xmalloc(sizeof(float) * n * qd), inv[64];
    fill(k, (size_t)(past + n) * kvd, 1); fill(v, (size_t)(past + n) * kvd, 1); fill(q, (size_t)n * qd, 2);
    int *pos = xmalloc(sizeof(int) * n);
    const int start = past + (int)(fabsf(frand()) * 3000);
    for (int i = 0; i < n; i++) pos[i] = start + i;
    for (int i = 0; i < hd / 2; i++) inv[i] = powf(10000.0f, -2.0f * i / hd);
    float *kb = up(B, k, (size_t)(past + n) * kvd), *vb = up(B, v, (size_t)(past + n) * kvd), *qb = up(B, q, (size_t)n * qd);
    if (past) { B->kv_write(cb, layer, 0, kb, vb, past); R->kv_write(cr, layer, 0, k, v, past); }
    float *kn = k + (size_t)past * kvd, *vn = v + (size_t)past * kvd;
    int *posb = dev_ints(B, pos, n), *posr = dev_ints(R, pos, n), *slotb = dev_ints(B, &past, 1);
    B->rope_kv(qb, kb + (size_t)past * kvd, vb + (size_t)past * kvd, posb, n, nh, nkv, hd, inv, cb, layer, slotb);
    B->release(slotb);
    /* the reference's rope, rope and kv_write (which writes slot
     * positions), then its rope_kv over copies of the same unrotated rows:
     * the same K and V again, at positions pos */
    float *q0 = xmalloc(sizeof(float) * n * qd), *k0 = xmalloc(sizeof(float) * n * kvd);
    memcpy(q0, q, sizeof(float) * n * qd); memcpy(k0, kn, sizeof(float) * n * kvd);
    R->rope(q, posr, n, nh, hd, inv);
    R->rope(kn, posr, n, nkv, hd, inv);
    R->kv_write(cr, layer, past, kn, vn, n);
    int slot = past;
    R->rope_kv(q0, k0, vn, posr, n, nh, nkv, hd, inv, cr, layer, &slot);   /* the same rows again, at pos */
    free(q0); free(k0);
    float *h = down(B, qb, (size_t)n * qd), e = rel_err(h, q, (size_t)n * qd);
    free(h);
    h = down(B, kb + (size_t)past * kvd, (size_t)n * kvd);
    e = fmaxf(e, rel_err(h, kn, (size_t)n * kvd));
    free(h);
    float *ob = B->alloc((size_t)n * qd), *orr = xmalloc(sizeof(float) * n * qd);
    int *pastb = dev_ints(B, &past, 1), *pastr = dev_ints(R, &past, 1);
    B->attention(ob, qb, &(AttnSeq){cb, 0, n, pastb, past + n, NULL, 0, window, posb}, 1, layer, nh, nkv, hd);
    R->attention(orr, q, &(AttnSeq){cr, 0, n, pastr, past + n, NULL, 0, window, posr}, 1, layer, nh, nkv, hd);
    B->release(pastb); R->release(pastr); B->release(posb); R->release(posr);
    h = down(B, ob, (size_t)n * qd);
    e = fmaxf(e, rel_err(h, orr, (size_t)n * qd));
    free(h);
    B->kv_free(cb); R->kv_free(cr);
    B->release(kb); B->release(vb); B->release(qb); B->release(ob);
    free(k); free(v); free(q); free(pos); free(orr);
    return e;
}

/* One call over three sequences, each with its own cache and context:
 * decode (1 query, causal), a small tree under a mask, and a prefill of 12
 * queries (the batched forward's mix), against the reference. */
static float check_attention_seqs(const Backend *B, const Backend *R) {
    enum { S = 3, NH = 4, NKV = 2, HD = 16, KVD = NKV * HD, L = 1 };
    const int past[S] = {7, 20, 0}, nq[S] = {1, 5, 12};
    KVCache *cb[S], *cr[S];
    AttnSeq ab[S], ar[S];
    uint8_t *mask[S] = {NULL, NULL, NULL};
    int total = 0, *pastb = dev_ints(B, past, S), *pastr = dev_ints(R, past, S);
    int qpos[12];
    for (int i = 0; i < 12; i++) qpos[i] = past[2] + i;
    int *qposb = dev_ints(B, qpos, 12), *qposr = dev_ints(R, qpos, 12);
    for (int i = 0; i < S; i++) {
        const int nctx = past[i] + nq[i];
        cb[i] = B->kv_create(1, nctx, KVD);
        cr[i] = R->kv_create(1, nctx, KVD);
        float *k = xmalloc(sizeof(float) * nctx * KVD), *v = xmalloc(sizeof(float) * nctx * KVD);
        fill(k, (size_t)nctx * KVD, 1); fill(v, (size_t)nctx * KVD, 1);
        float *kb = up(B, k, (size_t)nctx * KVD), *vb = up(B, v, (size_t)nctx * KVD);
        B->kv_write(cb[i], 0, 0, kb, vb, nctx); R->kv_write(cr[i], 0, 0, k, v, nctx);
        B->release(kb); B->release(vb); free(k); free(v);
        const int w = nq[i] + 4;   /* sequence 1's window: 4 earlier entries, then its tree */
        if (i == 1) {   /* root, two children, a grandchild under each; the earlier entries 1 and 3 seen by all */
            static const int par[5] = {-1, 0, 0, 1, 2};
            mask[i] = xcalloc((size_t)nq[i] * w, 1);
            for (int a = 0; a < nq[i]; a++) {
                mask[i][(size_t)a * w + 1] = mask[i][(size_t)a * w + 3] = 1;
                for (int p = a; p >= 0; p = par[p]) mask[i][(size_t)a * w + 4 + p] = 1;
            }
        }
        /* the prefill within a sliding window of 5 positions (its queries at past + i) */
        ab[i] = (AttnSeq){cb[i], total, nq[i], pastb + i, nctx, dev_mask(B, mask[i], (size_t)nq[i] * w), w, i == 2 ? 5 : 0, qposb};
        ar[i] = (AttnSeq){cr[i], total, nq[i], pastr + i, nctx, dev_mask(R, mask[i], (size_t)nq[i] * w), w, i == 2 ? 5 : 0, qposr};
        total += nq[i];
    }
    float *q = xmalloc(sizeof(float) * total * NH * HD), *orr = xmalloc(sizeof(float) * total * NH * HD);
    fill(q, (size_t)total * NH * HD, 2);
    float *qb = up(B, q, (size_t)total * NH * HD), *ob = B->alloc((size_t)total * NH * HD);
    B->attention(ob, qb, ab, S, 0, NH, NKV, HD);
    R->attention(orr, q, ar, S, 0, NH, NKV, HD);
    float *o = down(B, ob, (size_t)total * NH * HD);
    float e = rel_err(o, orr, (size_t)total * NH * HD);
    for (int i = 0; i < S; i++) {
        B->kv_free(cb[i]); R->kv_free(cr[i]); free(mask[i]);
        if (ab[i].mask) { B->release((void *)ab[i].mask); R->release((void *)ar[i].mask); }
    }
    B->release(qb); B->release(ob); B->release(pastb); R->release(pastr); B->release(qposb); R->release(qposr);
    free(q); free(orr); free(o);
    return e;
}

static float check_attention(const Backend *B, const Backend *R, int past, int n, int use_mask) {
    return check_attention_shape(B, R, past, n, use_mask, 4, 2, 16, 0);
}

/* The head sizes the CPU backend specialises (SmolLM2's 9 heads over 3 KV
 * heads of 64; 128 as in LLaMA 3), decode and a masked tree, odd contexts. */
static float check_attention_llama_shapes(const Backend *B, const Backend *R) {
    return fmaxf(fmaxf(check_attention_shape(B, R, 37, 1, 0, 9, 3, 64, 0), check_attention_shape(B, R, 20, 5, 1, 9, 3, 64, 0)),
                 check_attention_shape(B, R, 50, 2, 0, 4, 1, 128, 0));
}

/* Gemma 3's sliding windows: decode, a masked tree (whose window slots
 * and the slots before them both fall out of it), a prefill of more than 8
 * queries (the CPU's sgemm path) and a compacted cache, at head sizes 16
 * and Gemma 3's 256 */
static float check_attention_windows(const Backend *B, const Backend *R) {
    float w = check_attention_shape(B, R, 37, 1, 0, 4, 2, 16, 10);
    w = fmaxf(w, check_attention_shape(B, R, 20, 9, 1, 4, 2, 16, 6));
    w = fmaxf(w, check_attention_shape(B, R, 0, 40, 0, 4, 2, 16, 5));
    w = fmaxf(w, check_attention_shape(B, R, 30, 12, 0, 4, 1, 256, 7));
    w = fmaxf(w, check_attention_shape(B, R, 12, 6, 1, 8, 4, 256, 4));
    return w;
}

/* ids must agree exactly; probabilities and entropies within tolerance. */
static float check_distribution(const Backend *B, const Backend *R, int n, int vocab, int k, int topm,
                                float temp, int quantize) {
    float *l = xmalloc(sizeof(float) * n * vocab);
    fill(l, (size_t)n * vocab, 6);
    if (quantize) for (size_t i = 0; i < (size_t)n * vocab; i++) l[i] = roundf(l[i]);   /* many ties */
    float *lb = up(B, l, (size_t)n * vocab);
    int *ib = xmalloc(sizeof(int) * n * k), *ir = xmalloc(sizeof(int) * n * k);
    float *pb = xmalloc(sizeof(float) * n * k), *pr = xmalloc(sizeof(float) * n * k);
    float *hb = xmalloc(sizeof(float) * n), *hr = xmalloc(sizeof(float) * n);
    B->softmax_topk(lb, n, vocab, temp, k, ib, pb, topm, hb);
    R->softmax_topk(l, n, vocab, temp, k, ir, pr, topm, hr);
    float e = fmaxf(rel_err(pb, pr, (size_t)n * k), rel_err(hb, hr, n));
    for (int i = 0; i < n * k; i++) if (ib[i] != ir[i]) e = INFINITY;
    B->argmax(lb, n, vocab, ib); R->argmax(l, n, vocab, ir);
    for (int i = 0; i < n; i++) if (ib[i] != ir[i]) e = INFINITY;
    B->release(lb);
    free(l); free(ib); free(ir); free(pb); free(pr); free(hb); free(hr);
    return e;
}

/* matmul_many over three weights of the same width (rows 37, 300, 5)
 * against the reference's matmuls one by one. */
static float check_matmul_many(const Backend *B, const Backend *R, DType dt, int n, int cols) {
    enum { K = 3 };
    const int rows[K] = {37, 300, 5};
    float *x = xmalloc(sizeof(float) * n * cols), *xb;
    fill(x, (size_t)n * cols, 1);
    xb = up(B, x, (size_t)n * cols);
    Weight wb[K], wr[K];
    const Weight *pw[K];
    float *ob[K], *e = NULL;
    void *wd[K];
    float worst = 0;
    for (int i = 0; i < K; i++) {
        float *wf = xmalloc(sizeof(float) * rows[i] * cols);
        fill(wf, (size_t)rows[i] * cols, 0.5f);
        wd[i] = xmalloc(4 * (size_t)rows[i] * cols);
        f32_to(dt, wf, wd[i], (size_t)rows[i] * cols);
        free(wf);
        B->weight(&wb[i], wd[i], dt, rows[i], cols); R->weight(&wr[i], wd[i], dt, rows[i], cols);
        pw[i] = &wb[i];
        ob[i] = B->alloc((size_t)n * rows[i]);
    }
    B->matmul_many(ob, xb, pw, K, n);
    for (int i = 0; i < K; i++) {
        float *ref = xmalloc(sizeof(float) * n * rows[i]);
        R->matmul(ref, x, &wr[i], n);
        e = down(B, ob[i], (size_t)n * rows[i]);
        worst = fmaxf(worst, rel_err(e, ref, (size_t)n * rows[i]));
        free(e); free(ref);
        B->release(ob[i]); B->weight_release(&wb[i]); R->weight_release(&wr[i]); free(wd[i]);
    }
    B->release(xb); free(x);
    return worst;
}

/* ---- tree ops: one random device program run on both backends ---------------- */

/* one backend's buffers of the program */
typedef struct {
    const Backend *be;
    DevTree pool, tree;
    int *root, *rows, *ids, *picks, *map, *sel, *keep, *out, *want, *walk;
    int *at;   /* tree_inputs' origin */
    float *probs, *ent;
    uint8_t *mask;
} TreeRun;

enum { TR_CAP = 700, TR_V = 50, TR_CTX = 800 };

static void tree_run_init(TreeRun *r, const Backend *be) {
    r->be = be;
    r->pool = backend_tree_alloc(be, TR_CAP);
    r->tree = backend_tree_alloc(be, TR_CAP);
    r->root = backend_alloc_ints(be, 1);
    r->rows = backend_alloc_ints(be, TR_CAP);
    r->ids = backend_alloc_ints(be, TR_CAP);
    r->picks = backend_alloc_ints(be, 2 * TR_CAP);
    r->map = backend_alloc_ints(be, TR_V);
    r->sel = backend_alloc_ints(be, TR_CAP);
    r->keep = backend_alloc_ints(be, TR_CAP);
    r->out = backend_alloc_ints(be, 4 * TR_CAP + 1);
    r->at = backend_alloc_ints(be, 1);
    r->want = backend_alloc_ints(be, TR_CAP);
    r->walk = backend_alloc_ints(be, 3 + 2 * TR_CAP);
    r->probs = be->alloc(TR_CAP);
    r->ent = be->alloc(TR_CAP);
    r->mask = (uint8_t *)(void *)be->alloc((size_t)TR_CAP * TR_CTX / 4);
}

static void tree_run_free(TreeRun *r) {
    const Backend *be = r->be;
    backend_tree_release(be, &r->pool); backend_tree_release(be, &r->tree);
    void *bufs[] = {r->root, r->rows, r->ids, r->picks, r->map, r->sel, r->keep, r->out, r->want, r->walk,
                    r->at, r->probs, r->ent, r->mask};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->release(bufs[i]);
}

/* n ints (or floats) of a's device array and b's: 0 when equal bit for bit */
static int same_ints(const TreeRun *a, const int *da, const TreeRun *b, const int *db, int n) {
    int *ha = xmalloc(sizeof(int) * (n ? n : 1)), *hb = xmalloc(sizeof(int) * (n ? n : 1));
    backend_ints_to_host(a->be, ha, da, n);
    backend_ints_to_host(b->be, hb, db, n);
    int diff = memcmp(ha, hb, sizeof(int) * n) != 0;
    free(ha); free(hb);
    return diff;
}
#define SAME_F(a, fa, b, fb, n) same_ints(a, (const int *)(const void *)(fa), b, (const int *)(const void *)(fb), n)

static int same_tree(const TreeRun *a, const DevTree *ta, const TreeRun *b, const DevTree *tb, int n) {
    return same_ints(a, ta->token, b, tb->token, n) | same_ints(a, ta->parent, b, tb->parent, n) |
           same_ints(a, ta->depth, b, tb->depth, n) | same_ints(a, ta->rank, b, tb->rank, n) |
           same_ints(a, ta->slot, b, tb->slot, n) | SAME_F(a, ta->p, b, tb->p, n) | SAME_F(a, ta->P, b, tb->P, n) |
           SAME_F(a, ta->H, b, tb->H, n);
}

static void up_ints(const TreeRun *r, int *d, const int *h, int n) { backend_ints_to_device(r->be, d, h, n); }

/* The same inputs to both runs. */
static void both_ints(TreeRun *r, int *const *d, const int *h, int n) {
    for (int i = 0; i < 2; i++) up_ints(&r[i], d[i], h, n);
}

/* An EAGLE-2-like program (root, expansion steps of the k best of the
 * newest layer, some through picks and a vocabulary map, a rerank to
 * `total`), then forward inputs and greedy walks; probabilities from a few
 * values when quantize (joint probabilities tie, so the order's tie rules
 * decide).  Returns the number of outputs that differ. */
static int check_tree_program(const Backend *B, const Backend *R, int k, int depth, int total, int quantize,
                              int use_map) {
    TreeRun r[2];
    tree_run_init(&r[0], B);
    tree_run_init(&r[1], R);
    int bad = 0, n = 1, newest = 1, n_newest = k, n_temp = 0;
    const int n_past = 9;
    int *h = xmalloc(sizeof(int) * 3 * TR_CAP), *hp = xmalloc(sizeof(int) * 2 * TR_CAP);
    float *f = xmalloc(sizeof(float) * TR_CAP);
    h[0] = 7;
    both_ints(r, (int *const[]){r[0].root, r[1].root}, h, 1);
    for (int i = 0; i < TR_V; i++) h[i] = (i * 37 + 11) % 1000;
    both_ints(r, (int *const[]){r[0].map, r[1].map}, h, TR_V);
    for (int i = 0; i < 2; i++) r[i].be->tree_root(&r[i].pool, r[i].root);
    h[0] = n_past;
    both_ints(r, (int *const[]){r[0].at, r[1].at}, h, 1);
    for (int step = 0; step <= depth && n + k * k <= TR_CAP; step++) {
        int m = 1;
        if (step == 0) {
            h[0] = 0;
            both_ints(r, (int *const[]){r[0].sel, r[1].sel}, h, 1);
        } else {   /* the frontier: the k best of the newest layer, with the draft's forward inputs */
            m = n_newest < k ? n_newest : k;
            for (int i = 0; i < 2; i++) {   /* the first absolute, the second counted from its origin */
                r[i].be->tree_top(&r[i].pool, NULL, newest, n_newest, k, r[i].sel);
                if (i == 0)
                    r[i].be->tree_inputs(&r[i].pool, r[i].sel, m, NULL, n_past + n_temp, n_past, n_past - 1,
                                         n_past + n_temp + m, r[i].out, r[i].mask);
                else
                    r[i].be->tree_inputs(&r[i].pool, r[i].sel, m, r[i].at, n_temp, 0, -1, n_temp + m, r[i].out,
                                         r[i].mask);
            }
            bad += same_ints(&r[0], r[0].sel, &r[1], r[1].sel, m);
            bad += same_ints(&r[0], r[0].out, &r[1], r[1].out, 4 * m + 1);
            bad += same_ints(&r[0], (int *)(void *)r[0].mask, &r[1], (int *)(void *)r[1].mask, (m * (n_temp + m) + 3) / 4);   /* the window [n_past, n_past + n_temp + m) */
            n_temp += m;
        }
        for (int i = 0; i < m * k; i++) {
            h[i] = (int)(frand() * 1e6f + 2e6f) % TR_V;
            f[i] = quantize ? (float)(1 + (int)(frand() * 2 + 2)) / 8 : 0.5f + frand() * 0.49f;
        }
        both_ints(r, (int *const[]){r[0].ids, r[1].ids}, h, m * k);
        for (int i = 0; i < 2; i++) r[i].be->to_device(r[i].probs, f, m * k);
        for (int i = 0; i < m; i++) f[i] = frand() + 2;
        for (int i = 0; i < 2; i++) r[i].be->to_device(r[i].ent, f, m);
        int count = m * k, with_picks = step % 2 == 1;
        if (with_picks) {   /* every other (row, rank): a static tree's pattern */
            count = 0;
            for (int c = 0; c < m * k; c += 2) { hp[2 * count] = c / k; hp[2 * count + 1] = c % k; count++; }
            both_ints(r, (int *const[]){r[0].picks, r[1].picks}, hp, 2 * count);
        }
        for (int i = 0; i < 2; i++)
            r[i].be->tree_grow(&r[i].pool, n, r[i].sel, r[i].ids, r[i].probs, step % 3 ? r[i].ent : NULL, k,
                               with_picks ? r[i].picks : NULL, count, use_map ? r[i].map : NULL);
        newest = n;
        n_newest = count;
        n += count;
        bad += same_tree(&r[0], &r[0].pool, &r[1], &r[1].pool, n);
    }
    /* rerank into the verified tree, its inputs, and the greedy walks */
    const int kept = 1 + (total < n - 1 ? total : n - 1);
    h[0] = 0;
    both_ints(r, (int *const[]){r[0].keep, r[1].keep}, h, 1);
    const int pad = kept + 1 + kept % 6;   /* a verification padded to a bucket: dead rows after the tree */
    for (int i = 0; i < 2; i++) {
        r[i].be->tree_top(&r[i].pool, NULL, 1, n - 1, total, r[i].keep + 1);
        r[i].be->tree_compact(&r[i].tree, &r[i].pool, r[i].keep, kept, pad);
        if (i == 0)   /* the other way round */
            r[i].be->tree_inputs(&r[i].tree, NULL, kept, r[i].at, 0, 0, 0, kept, r[i].out, r[i].mask);
        else
            r[i].be->tree_inputs(&r[i].tree, NULL, kept, NULL, n_past, n_past, n_past, n_past + kept, r[i].out,
                                 r[i].mask);
    }
    bad += same_ints(&r[0], r[0].keep, &r[1], r[1].keep, kept);
    bad += same_tree(&r[0], &r[0].tree, &r[1], &r[1].tree, pad);
    backend_ints_to_host(r[1].be, h, r[1].tree.token, pad);   /* dead nodes rank below every live one; padding is dead */
    for (int j = 0; j < pad; j++) bad += (h[j] < 0) != (j >= kept);
    bad += same_ints(&r[0], r[0].out, &r[1], r[1].out, 4 * kept + 1);
    bad += same_ints(&r[0], (int *)(void *)r[0].mask, &r[1], (int *)(void *)r[1].mask, (kept * kept + 3) / 4);
    /* want: mostly the token of a child (the walk goes deep), else any */
    int *tok = xmalloc(sizeof(int) * kept), *par = xmalloc(sizeof(int) * kept);
    backend_ints_to_host(R, tok, r[1].tree.token, kept);
    backend_ints_to_host(R, par, r[1].tree.parent, kept);
    for (int v = 0; v < kept; v++) {
        h[v] = (int)(frand() * 1e6f + 2e6f) % 1000;
        for (int c = kept - 1; c > v; c--) if (par[c] == v && frand() > -0.6f) h[v] = tok[c];
    }
    both_ints(r, (int *const[]){r[0].want, r[1].want}, h, kept);
    for (int i = 0; i < 2; i++) r[i].be->tree_accept(&r[i].tree, kept, r[i].want, 1, kept, r[i].walk);
    bad += same_ints(&r[0], r[0].walk, &r[1], r[1].walk, 3 + 2 * kept);
    int *full = xmalloc(sizeof(int) * (3 + 2 * kept)), *one = xmalloc(sizeof(int) * (3 + 2 * kept));
    backend_ints_to_host(B, full, r[0].walk, 3 + 2 * kept);
    B->tree_accept(&r[0].tree, kept, r[0].want, 1, 0, r[0].walk);   /* step by step: the lazy walk */
    for (int s = 0; s <= kept; s++) B->tree_accept(&r[0].tree, kept, r[0].want, 0, 1, r[0].walk);
    backend_ints_to_host(B, one, r[0].walk, 3 + 2 * kept);
    bad += memcmp(full, one, sizeof(int) * (3 + full[1])) || memcmp(full + 3 + kept, one + 3 + kept, sizeof(int) * full[1]) ||
           !full[0];
    free(full); free(one); free(tok); free(par);
    free(h); free(hp); free(f);
    tree_run_free(&r[0]);
    tree_run_free(&r[1]);
    return bad;
}

/* A node classifier of `hidden` units over the features ids[0..n_feat)
 * (P and p through log), random weights in both backends' memory. */
typedef struct { NodeNet net[2]; float *w[2]; } NetPair;
static void net_pair_init(NetPair *np, TreeRun *r, int hidden, const int *ids, int n_feat, float bias) {
    const size_t nw = (size_t)hidden * (n_feat + 2);
    float *w = xmalloc(sizeof(float) * nw);
    fill(w, nw, 1);
    for (int i = 0; i < 2; i++) {
        NodeNet *net = &np->net[i];
        memset(net, 0, sizeof *net);
        net->hidden = hidden;
        net->n_feat = n_feat;
        for (int k = 0; k < n_feat; k++) {
            const int log_it = ids[k] == NODE_F_P || ids[k] == NODE_F_LOCAL_P;
            net->in[k] = (NodeNetInput){ids[k], log_it ? NODE_T_LOG : NODE_T_RAW, 1e-6f, log_it ? -2.0f : 1.0f, 1.5f};
        }
        np->w[i] = up(r[i].be, w, nw);
        net->fc1_w = np->w[i];
        net->fc1_b = np->w[i] + (size_t)hidden * n_feat;
        net->fc2_w = np->w[i] + (size_t)hidden * (n_feat + 1);
        net->fc2_b = bias;
    }
    free(w);
}

/* A C2T-like program: each layer the children of the frontier grown,
 * scored by tree_classify, thresholded by tree_pass (the count read back),
 * the next frontier by tree_top over the confidences; at the end the cap
 * by path confidence and tree_compact.  Probabilities from a few values
 * when quantize, and with ties_net a classifier of depth and rank alone
 * (confidences tie): the tie rules decide.  fixed: the fixed-shape program
 * (every layer's frontier k rows, dead ones too, every layer at its own
 * place; the whole layer compared, its dead tail included), whose cap must
 * keep only live nodes.  Returns the number of outputs that differ. */
static int check_c2t_program(const Backend *B, const Backend *R, int k, int dmax, float beta, int total, int quantize,
                             int ties_net, int hidden, int fixed) {
    TreeRun r[2];
    tree_run_init(&r[0], B);
    tree_run_init(&r[1], R);
    const int all[6] = {NODE_F_P, NODE_F_H, NODE_F_DEPTH, NODE_F_LOCAL_P, NODE_F_RANK, NODE_F_PARENT_H};
    const int ties[2] = {NODE_F_DEPTH, NODE_F_RANK};
    NetPair np;
    net_pair_init(&np, r, hidden, ties_net ? ties : all, ties_net ? 2 : 6, 0.3f);
    float *conf[2], *path[2];
    int *count[2];
    const float above = 2;
    for (int i = 0; i < 2; i++) {
        conf[i] = r[i].be->alloc(TR_CAP);
        path[i] = r[i].be->alloc(TR_CAP);
        r[i].be->to_device(path[i], &above, 1);
        count[i] = backend_alloc_ints(r[i].be, 1);
    }
    int bad = 0, n = 1, nf = 1, live = 0, h[TR_CAP];
    float f[TR_CAP];
    h[0] = 7;
    both_ints(r, (int *const[]){r[0].root, r[1].root}, h, 1);
    h[0] = 0;
    both_ints(r, (int *const[]){r[0].sel, r[1].sel}, h, 1);
    for (int i = 0; i < 2; i++) r[i].be->tree_root(&r[i].pool, r[i].root);
    for (int depth = 1; depth <= dmax && nf > 0 && n + nf * k <= TR_CAP; depth++) {
        const int nc = nf * k;
        for (int i = 0; i < nc; i++) {
            h[i] = i % 17 == 5 ? -1 : (int)(frand() * 1e6f + 2e6f) % TR_V;   /* some rows short of k tokens */
            f[i] = quantize ? (float)(1 + (int)(frand() * 2 + 2)) / 8 : 0.5f + frand() * 0.49f;
        }
        both_ints(r, (int *const[]){r[0].ids, r[1].ids}, h, nc);
        for (int i = 0; i < 2; i++) r[i].be->to_device(r[i].probs, f, nc);
        for (int i = 0; i < nf; i++) f[i] = frand() + 2;
        for (int i = 0; i < 2; i++) r[i].be->to_device(r[i].ent, f, nf);
        int got[2];
        for (int i = 0; i < 2; i++) {
            const Backend *be = r[i].be;
            be->tree_grow(&r[i].pool, n, r[i].sel, r[i].ids, r[i].probs, r[i].ent, k, NULL, nc, depth % 2 ? r[i].map : NULL);
            be->tree_classify(&r[i].pool, n, nc, &np.net[i], conf[i]);
        }
        bad += SAME_F(&r[0], conf[0] + n, &r[1], conf[1] + n, nc);
        for (int i = 0; i < 2; i++) {
            r[i].be->tree_pass(&r[i].pool, n, nc, conf[i], beta, path[i], count[i]);
            backend_ints_to_host(r[i].be, &got[i], count[i], 1);
        }
        bad += got[0] != got[1];
        const int layer = fixed ? nc : got[1];   /* what the next layer leaves alone */
        bad += same_tree(&r[0], &r[0].pool, &r[1], &r[1].pool, n + layer);
        bad += SAME_F(&r[0], conf[0] + n, &r[1], conf[1] + n, layer);
        bad += SAME_F(&r[0], path[0], &r[1], path[1], n + layer);
        nf = fixed ? k : got[1] < k ? got[1] : k;
        if (nf > 0) {
            for (int i = 0; i < 2; i++) r[i].be->tree_top(&r[i].pool, conf[i], n, layer, k, r[i].sel);
            bad += same_ints(&r[0], r[0].sel, &r[1], r[1].sel, nf);
        }
        n += layer;
        live += got[1];
    }
    if (live < 7) bad += 1000;   /* the program must have grown a tree worth ranking */
    const int kept = 1 + (total < live ? total : live);
    h[0] = 0;
    both_ints(r, (int *const[]){r[0].keep, r[1].keep}, h, 1);
    const int pad = fixed ? kept + 3 : kept;
    for (int i = 0; i < 2; i++) {
        r[i].be->tree_top(&r[i].pool, path[i], 1, n - 1, kept - 1, r[i].keep + 1);
        r[i].be->tree_compact(&r[i].tree, &r[i].pool, r[i].keep, kept, pad);
    }
    bad += same_ints(&r[0], r[0].keep, &r[1], r[1].keep, kept);
    bad += same_tree(&r[0], &r[0].tree, &r[1], &r[1].tree, pad);
    backend_ints_to_host(r[1].be, h, r[1].tree.token, kept);   /* dead nodes rank below every live one */
    for (int j = 0; j < kept; j++) bad += h[j] < 0;
    for (int i = 0; i < 2; i++) {
        r[i].be->release(conf[i]); r[i].be->release(path[i]); r[i].be->release(count[i]); r[i].be->release(np.w[i]);
    }
    tree_run_free(&r[0]);
    tree_run_free(&r[1]);
    return bad;
}

/* tree_batch: n_trees programs of different shapes side by side (each
 * tree its own k, depth, vocabulary map, picks, score and cap; a tree
 * whose depth is reached gets ops with nothing to do), every op issued on
 * B as one backend_tree_batch over all the trees and on R through each
 * tree's single ops: root, grow, classify, pass, top, inputs, compact,
 * argmax_dev and accept, each compared tree by tree.  Returns the number
 * of outputs that differ. */
static int check_tree_batch(const Backend *B, const Backend *R, int n_trees, int quantize) {
    const int T = n_trees, V = TR_V;
    TreeRun *rb = xcalloc(T, sizeof *rb), *rr = xcalloc(T, sizeof *rr);
    TreeOp *ops = xcalloc(T, sizeof *ops);
    float **conf = xcalloc(2 * T, sizeof *conf), **path = xcalloc(2 * T, sizeof *path);
    int **count = xcalloc(2 * T, sizeof *count);
    int *n = xcalloc(T, sizeof(int)), *newest = xcalloc(T, sizeof(int)), *layer = xcalloc(T, sizeof(int));
    int *m = xcalloc(T, sizeof(int)), *grown = xcalloc(T, sizeof(int)), *n_temp = xcalloc(T, sizeof(int));
    int h[4 * TR_CAP + 1], hp[2 * TR_CAP], bad = 0, walked = 0;
    float f[TR_CAP], above = 2;
    const int all[6] = {NODE_F_P, NODE_F_H, NODE_F_DEPTH, NODE_F_LOCAL_P, NODE_F_RANK, NODE_F_PARENT_H};
    for (int t = 0; t < T; t++) {
        tree_run_init(&rb[t], B);
        tree_run_init(&rr[t], R);
        for (int s = 0; s < 2; s++) {
            const Backend *be = s ? R : B;
            conf[2 * t + s] = be->alloc(TR_CAP);
            path[2 * t + s] = be->alloc(TR_CAP);
            be->to_device(path[2 * t + s], &above, 1);
            count[2 * t + s] = backend_alloc_ints(be, 1);
        }
        h[0] = 3 + t;
        up_ints(&rb[t], rb[t].root, h, 1); up_ints(&rr[t], rr[t].root, h, 1);
        for (int i = 0; i < V; i++) h[i] = (i * 37 + 11 + t) % 1000;
        up_ints(&rb[t], rb[t].map, h, V); up_ints(&rr[t], rr[t].map, h, V);
        h[0] = 9 + t;
        up_ints(&rb[t], rb[t].at, h, 1); up_ints(&rr[t], rr[t].at, h, 1);
        h[0] = 0;
        up_ints(&rb[t], rb[t].sel, h, 1); up_ints(&rr[t], rr[t].sel, h, 1);
        n[t] = 1;
    }
    TreeRun pair[2] = {rb[0], rr[0]};
    NetPair np;
    net_pair_init(&np, pair, 9, all, 6, 0.2f);
#define KT(t) (2 + (t) % 3)
#define DT(t) (2 + (t) % 3)
#define EACH for (int t = 0; t < T; t++)
    EACH ops[t] = (TreeOp){.kind = TREE_OP_ROOT, .t = rb[t].pool, .root = rb[t].root};
    backend_tree_batch(B, ops, T);
    EACH R->tree_root(&rr[t].pool, rr[t].root);
    EACH bad += same_tree(&rb[t], &rb[t].pool, &rr[t], &rr[t].pool, 1);
    for (int step = 0; step <= 4; step++) {
        EACH {   /* this step's rows: the root, then the k best of the newest layer */
            const int on = step <= DT(t);
            m[t] = !on ? 0 : step == 0 ? 1 : layer[t] < KT(t) ? layer[t] : KT(t);
        }
        if (step > 0) {
            EACH ops[t] = (TreeOp){.kind = TREE_OP_TOP, .t = rb[t].pool, .score = t % 2 ? conf[2 * t] : NULL,
                                   .from = newest[t], .n = m[t] ? layer[t] : 0, .m = KT(t), .sel = rb[t].sel};
            backend_tree_batch(B, ops, T);
            EACH if (m[t]) R->tree_top(&rr[t].pool, t % 2 ? conf[2 * t + 1] : NULL, newest[t], layer[t], KT(t), rr[t].sel);
            EACH bad += same_ints(&rb[t], rb[t].sel, &rr[t], rr[t].sel, m[t]);
            EACH ops[t] = (TreeOp){.kind = TREE_OP_INPUTS, .t = rb[t].pool, .rows = rb[t].sel, .m = m[t],
                                   .at = rb[t].at, .base = n_temp[t], .ones = 0, .pos0 = -1, .nctx = n_temp[t] + m[t],
                                   .out = rb[t].out, .mask = rb[t].mask};
            backend_tree_batch(B, ops, T);
            EACH if (m[t]) R->tree_inputs(&rr[t].pool, rr[t].sel, m[t], rr[t].at, n_temp[t], 0, -1, n_temp[t] + m[t],
                                          rr[t].out, rr[t].mask);
            EACH if (m[t]) {
                bad += same_ints(&rb[t], rb[t].out, &rr[t], rr[t].out, 4 * m[t] + 1);
                bad += same_ints(&rb[t], (int *)(void *)rb[t].mask, &rr[t], (int *)(void *)rr[t].mask,
                                 (m[t] * (n_temp[t] + m[t]) + 3) / 4);
                n_temp[t] += m[t];
            }
        }
        EACH {   /* the distributions under the rows, and which children grow */
            const int k = KT(t), nc = m[t] * k;
            for (int i = 0; i < nc; i++) {
                h[i] = i % 11 == 4 ? -1 : (int)(frand() * 1e6f + 2e6f) % V;
                f[i] = quantize ? (float)(1 + (int)(frand() * 2 + 2)) / 8 : 0.5f + frand() * 0.49f;
            }
            up_ints(&rb[t], rb[t].ids, h, nc); up_ints(&rr[t], rr[t].ids, h, nc);
            B->to_device(rb[t].probs, f, nc); R->to_device(rr[t].probs, f, nc);
            for (int i = 0; i < m[t]; i++) f[i] = frand() + 2;
            B->to_device(rb[t].ent, f, m[t]); R->to_device(rr[t].ent, f, m[t]);
            grown[t] = nc;
            if (t % 4 == 3 && step % 2) {   /* every other (row, rank) */
                grown[t] = 0;
                for (int c = 0; c < nc; c += 2) { hp[2 * grown[t]] = c / k; hp[2 * grown[t] + 1] = c % k; grown[t]++; }
                up_ints(&rb[t], rb[t].picks, hp, 2 * grown[t]); up_ints(&rr[t], rr[t].picks, hp, 2 * grown[t]);
            }
        }
#define PICKS(r, t) (t % 4 == 3 && step % 2 ? (r)[t].picks : NULL)
#define ENT(r, t) ((step + t) % 3 ? (r)[t].ent : NULL)
#define MAP(r, t) (t % 2 ? (r)[t].map : NULL)
        EACH ops[t] = (TreeOp){.kind = TREE_OP_GROW, .t = rb[t].pool, .n0 = n[t], .rows = rb[t].sel,
                               .ids = rb[t].ids, .probs = rb[t].probs, .ent = ENT(rb, t), .k = KT(t),
                               .picks = PICKS(rb, t), .count = grown[t], .map = MAP(rb, t)};
        backend_tree_batch(B, ops, T);
        EACH R->tree_grow(&rr[t].pool, n[t], rr[t].sel, rr[t].ids, rr[t].probs, ENT(rr, t), KT(t), PICKS(rr, t),
                          grown[t], MAP(rr, t));
        EACH ops[t] = (TreeOp){.kind = TREE_OP_CLASSIFY, .t = rb[t].pool, .from = n[t], .n = grown[t], .net = np.net[0],
                               .conf = conf[2 * t]};
        backend_tree_batch(B, ops, T);
        EACH R->tree_classify(&rr[t].pool, n[t], grown[t], &np.net[1], conf[2 * t + 1]);
        EACH bad += SAME_F(&rb[t], conf[2 * t] + n[t], &rr[t], conf[2 * t + 1] + n[t], grown[t]);
        EACH ops[t] = (TreeOp){.kind = TREE_OP_PASS, .t = rb[t].pool, .from = n[t], .n = grown[t], .conf = conf[2 * t],
                               .beta = 0.35f, .path_conf = path[2 * t], .count_out = count[2 * t]};
        backend_tree_batch(B, ops, T);
        EACH R->tree_pass(&rr[t].pool, n[t], grown[t], conf[2 * t + 1], 0.35f, path[2 * t + 1], count[2 * t + 1]);
        EACH {
            newest[t] = n[t];
            layer[t] = grown[t];   /* the whole layer, its dead tail included (a fixed-shape program's) */
            n[t] += grown[t];
            bad += same_ints(&rb[t], count[2 * t], &rr[t], count[2 * t + 1], 1);
            bad += same_tree(&rb[t], &rb[t].pool, &rr[t], &rr[t].pool, n[t]);
            bad += SAME_F(&rb[t], conf[2 * t], &rr[t], conf[2 * t + 1], n[t]);
            bad += SAME_F(&rb[t], path[2 * t], &rr[t], path[2 * t + 1], n[t]);
        }
#undef PICKS
#undef ENT
#undef MAP
    }
    /* the cap (by path confidence or P), the verified tree's inputs, the
     * target's argmax of each row (mostly a child's token) and the walk */
    EACH {
        h[0] = 0;
        up_ints(&rb[t], rb[t].keep, h, 1); up_ints(&rr[t], rr[t].keep, h, 1);
    }
#define TOTAL(t) (3 + 4 * (t) % 9 < n[t] - 1 ? 3 + 4 * (t) % 9 : n[t] - 1)
    EACH ops[t] = (TreeOp){.kind = TREE_OP_TOP, .t = rb[t].pool, .score = t % 3 ? path[2 * t] : NULL, .from = 1,
                           .n = n[t] - 1, .m = TOTAL(t), .sel = rb[t].keep + 1};
    backend_tree_batch(B, ops, T);
    EACH R->tree_top(&rr[t].pool, t % 3 ? path[2 * t + 1] : NULL, 1, n[t] - 1, TOTAL(t), rr[t].keep + 1);
    EACH ops[t] = (TreeOp){.kind = TREE_OP_COMPACT, .t = rb[t].tree, .src = rb[t].pool, .keep = rb[t].keep,
                           .m = TOTAL(t) + 1, .pad = TOTAL(t) + 1 + t % 4};
    backend_tree_batch(B, ops, T);
    EACH R->tree_compact(&rr[t].tree, &rr[t].pool, rr[t].keep, TOTAL(t) + 1, TOTAL(t) + 1 + t % 4);
    EACH ops[t] = (TreeOp){.kind = TREE_OP_INPUTS, .t = rb[t].tree, .m = TOTAL(t) + 1, .at = rb[t].at,
                           .nctx = TOTAL(t) + 1, .out = rb[t].out, .mask = rb[t].mask};
    backend_tree_batch(B, ops, T);
    EACH R->tree_inputs(&rr[t].tree, NULL, TOTAL(t) + 1, rr[t].at, 0, 0, 0, TOTAL(t) + 1, rr[t].out, rr[t].mask);
    float **logits = xcalloc(2 * T, sizeof *logits);
    EACH {
        const int kept = TOTAL(t) + 1;
        bad += same_ints(&rb[t], rb[t].keep, &rr[t], rr[t].keep, kept);
        bad += same_tree(&rb[t], &rb[t].tree, &rr[t], &rr[t].tree, kept + t % 4);
        bad += same_ints(&rb[t], rb[t].out, &rr[t], rr[t].out, 4 * kept + 1);
        bad += same_ints(&rb[t], (int *)(void *)rb[t].mask, &rr[t], (int *)(void *)rr[t].mask, (kept * kept + 3) / 4);
        int tok[TR_CAP], par[TR_CAP];
        backend_ints_to_host(R, tok, rr[t].tree.token, kept);
        backend_ints_to_host(R, par, rr[t].tree.parent, kept);
        float *lg = xmalloc(sizeof(float) * kept * 1000);
        fill(lg, (size_t)kept * 1000, 1);
        for (int v = 0; v < kept; v++)
            for (int c = kept - 1; c > v; c--)
                if (par[c] == v && tok[c] >= 0 && frand() > -0.5f) lg[v * 1000 + tok[c]] = 3;
        logits[2 * t] = up(B, lg, (size_t)kept * 1000);
        logits[2 * t + 1] = up(R, lg, (size_t)kept * 1000);
        free(lg);
    }
    EACH ops[t] = (TreeOp){.kind = TREE_OP_ARGMAX, .logits = logits[2 * t], .n = TOTAL(t) + 1, .vocab = 1000,
                           .out_ids = rb[t].want};
    backend_tree_batch(B, ops, T);
    EACH R->argmax_dev(logits[2 * t + 1], TOTAL(t) + 1, 1000, rr[t].want);
    EACH bad += same_ints(&rb[t], rb[t].want, &rr[t], rr[t].want, TOTAL(t) + 1);
    EACH ops[t] = (TreeOp){.kind = TREE_OP_ACCEPT, .t = rb[t].tree, .n = TOTAL(t) + 1, .want = rb[t].want,
                           .from_start = 1, .steps = TOTAL(t) + 1, .walk = rb[t].walk};
    backend_tree_batch(B, ops, T);
    EACH R->tree_accept(&rr[t].tree, TOTAL(t) + 1, rr[t].want, 1, TOTAL(t) + 1, rr[t].walk);
    EACH {
        bad += same_ints(&rb[t], rb[t].walk, &rr[t], rr[t].walk, 3 + 2 * (TOTAL(t) + 1));
        backend_ints_to_host(R, h, rr[t].walk, 2);
        walked += h[1] > 1;
    }
    if (4 * walked < T) bad += 1000;   /* walks must go past the root, a quarter at least */
#undef TOTAL
#undef KT
#undef DT
    EACH {
        for (int s = 0; s < 2; s++) {
            const Backend *be = s ? R : B;
            be->release(conf[2 * t + s]); be->release(path[2 * t + s]); be->release(count[2 * t + s]);
            be->release(logits[2 * t + s]);
        }
        tree_run_free(&rb[t]);
        tree_run_free(&rr[t]);
    }
    B->release(np.w[0]); R->release(np.w[1]);
    free(rb); free(rr); free(ops); free(conf); free(path); free(count); free(logits);
#undef EACH
    free(n); free(newest); free(layer); free(m); free(grown); free(n_temp);
    return bad;
}

/* sample_dev over rows of every kind of setting (temperature alone, top-k,
 * top-p, both, top-k 1, ties at either cut, -inf logits), two keys and
 * node offsets, alone and as one tree_batch on B (R through single ops):
 * the number of ids that differ, plus 1000 where the draws look stuck
 * (rows of the same logits drawing one id). */
static int check_sample(const Backend *B, const Backend *R) {
    enum { ROWS = 24 };
    const SampleParams sps[] = {{1.0f, 0, 1.0f, 0}, {0.7f, 50, 1.0f, 0}, {1.3f, 0, 0.9f, 0}, {0.8f, 20, 0.5f, 0},
                                {1.0f, 1, 1.0f, 0}, {1.0f, 0, 0.99f, 0}, {2.0f, 7, 0.3f, 0}};
    const int vocabs[] = {1000, 3000};
    int bad = 0, varied = 0;
    for (int vi = 0; vi < 2; vi++)
        for (int shape = 0; shape < 3; shape++) {
            const int V = vocabs[vi];
            float *lg = xmalloc(sizeof(float) * ROWS * V);
            fill(lg, (size_t)ROWS * V, 3);
            for (size_t j = 0; j < (size_t)ROWS * V; j++) {
                if (shape == 1) lg[j] = roundf(lg[j] * 2) / 2;   /* ties at the cuts */
                if (shape == 2 && j % 7 == 3) lg[j] = -INFINITY;
            }
            if (shape == 0)   /* the last rows alike: their draws must differ */
                for (int r = ROWS / 2; r < ROWS; r++) memcpy(lg + (size_t)r * V, lg, sizeof(float) * V);
            float *lb = up(B, lg, (size_t)ROWS * V), *lr = up(R, lg, (size_t)ROWS * V);
            int *kb = backend_alloc_ints(B, 2), *kr = backend_alloc_ints(R, 2);
            int *ib = backend_alloc_ints(B, ROWS), *ir = backend_alloc_ints(R, ROWS);
            int hb[ROWS], hr[ROWS];
            for (size_t c = 0; c < sizeof sps / sizeof *sps; c++)
                for (int k = 0; k < 2; k++) {
                    const int key[2] = {(int)(0x9E3779B9u * (c + 1)), k ? -7 : 12345}, node0 = k ? 5 : 0;
                    backend_ints_to_device(B, kb, key, 2);
                    backend_ints_to_device(R, kr, key, 2);
                    if (k) {
                        TreeOp ops[3];
                        for (int o = 0; o < 3; o++)   /* rows [8o, 8o+8) as three ops */
                            ops[o] = (TreeOp){.kind = TREE_OP_SAMPLE, .logits = lb + (size_t)8 * o * V, .n = 8,
                                              .vocab = V, .sp = sps[c], .key = (const uint32_t *)kb,
                                              .n0 = node0 + 8 * o, .out_ids = ib + 8 * o};
                        backend_tree_batch(B, ops, 3);
                    } else {
                        B->sample_dev(lb, ROWS, V, &sps[c], (const uint32_t *)kb, node0, ib);
                    }
                    R->sample_dev(lr, ROWS, V, &sps[c], (const uint32_t *)kr, node0, ir);
                    backend_ints_to_host(B, hb, ib, ROWS);
                    backend_ints_to_host(R, hr, ir, ROWS);
                    for (int r = 0; r < ROWS; r++) bad += hb[r] != hr[r] || hr[r] < 0 || hr[r] >= V;
                    if (shape == 0 && sps[c].top_k != 1)
                        for (int r = ROWS / 2 + 1; r < ROWS; r++) varied += hr[r] != hr[ROWS / 2];
                }
            B->release(lb); R->release(lr); B->release(kb); R->release(kr); B->release(ib); R->release(ir);
            free(lg);
        }
    return bad + (varied < 20 ? 1000 : 0);
}

/* sample_dev's draws against its distribution: 40000 rows of eight logits,
 * each row its own node, under temperature alone, top-k and top-p; the
 * expected probabilities worked out here in double from kernels.h's
 * definition.  The number of settings whose counts fail a chi-square test
 * at alpha 0.001 (Wilson-Hilferty's quantile), or that drew an id outside
 * the kept set. */
static int check_sample_distribution(const Backend *B) {
    enum { V = 8, N = 40000 };
    const float row[V] = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -2.0f, 1.5f, 0.7f};   /* descending: 3 6 0 7 1 4 2 5 */
    const int order[V] = {3, 6, 0, 7, 1, 4, 2, 5};
    const SampleParams sps[] = {{0.8f, 0, 1.0f, 0}, {1.0f, 3, 1.0f, 0}, {1.2f, 0, 0.6f, 0}};
    float *h = xmalloc(sizeof(float) * N * V);
    for (int r = 0; r < N; r++) memcpy(h + (size_t)r * V, row, sizeof row);
    float *d = up(B, h, (size_t)N * V);
    int *key = backend_alloc_ints(B, 2), *ids = backend_alloc_ints(B, N), *got = xmalloc(sizeof(int) * N), failed = 0;
    backend_ints_to_device(B, key, (const int[]){0x2545F491, 0x4F6CDD1D}, 2);
    for (size_t c = 0; c < sizeof sps / sizeof *sps; c++) {
        double p[V] = {0}, z = 0, cum = 0;
        int kept = 0;
        for (int i = 0; i < V && (sps[c].top_k == 0 || i < sps[c].top_k); i++, kept++)
            z += p[order[i]] = exp((row[order[i]] - 2.0) / sps[c].temperature);
        for (int i = 0; i < kept; i++)   /* top-p: the most probable until their mass reaches top_p */
            if (cum >= sps[c].top_p * z) p[order[i]] = 0;
            else cum += p[order[i]];
        long count[V] = {0};
        B->sample_dev(d, N, V, &sps[c], (const uint32_t *)key, 0, ids);
        backend_ints_to_host(B, got, ids, N);
        int outside = 0;
        for (int r = 0; r < N; r++) {
            outside += got[r] < 0 || got[r] >= V || p[got[r]] == 0;
            if (!outside) count[got[r]]++;
        }
        double x = 0;
        int cells = 0;
        for (int j = 0; j < V; j++)
            if (p[j] > 0) {
                const double e = p[j] / cum * N;
                x += (count[j] - e) * (count[j] - e) / e;
                cells++;
            }
        const double a = 2.0 / (9.0 * (cells - 1)), crit = (cells - 1) * pow(1 - a + 3.090 * sqrt(a), 3);
        printf("# %s sample_dev T=%.1f top_k=%d top_p=%.1f: chi2 %.1f (%d dof, critical %.1f), %d ids outside\n",
               B->name, sps[c].temperature, sps[c].top_k, sps[c].top_p, x, cells - 1, crit, outside);
        failed += outside > 0 || !(x < crit);
    }
    B->release(d); B->release(key); B->release(ids);
    free(h); free(got);
    return failed;
}

/* to_host_many: reads of several sizes (none among them) at once against
 * each read alone; the number of elements that differ. */
static int check_to_host_many(const Backend *B) {
    enum { R = 5 };
    const size_t n[R] = {7, 0, 1, 1000, 33};
    float *dev[R], *got[R], *want[R];
    int bad = 0;
    for (int i = 0; i < R; i++) {
        float *h = xmalloc(sizeof(float) * (n[i] + 1));
        fill(h, n[i] + 1, 3);
        dev[i] = up(B, h, n[i] + 1);
        got[i] = xcalloc(n[i] + 1, sizeof(float));
        want[i] = h;
    }
    backend_to_host_many(B, got, (const float *const *)dev, n, R);
    for (int i = 0; i < R; i++) {
        for (size_t j = 0; j <= n[i]; j++) bad += j < n[i] ? got[i][j] != want[i][j] : got[i][j] != 0;   /* nothing past n */
        B->release(dev[i]); free(got[i]); free(want[i]);
    }
    return bad;
}

/* The whole harness for one pair of backends; prints the worst error of
 * each op family and returns the number of families over tolerance. */
__attribute__((unused)) static int parity(const Backend *B, const Backend *R, int verbose) {
    int bad = 0;
    float w = 0;
    const DType dts[3] = {DT_F32, DT_F16, DT_BF16};
    const int ns[5] = {1, 3, 4, 5, 33};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 5; i++) {
            w = fmaxf(w, check_matmul(B, R, dts[d], ns[i], 37, 67));
            w = fmaxf(w, check_matmul(B, R, dts[d], ns[i], 300, 128));
            w = fmaxf(w, check_matmul_many(B, R, dts[d], ns[i], 67));
        }
    if (verbose) printf("# %s vs %s: matmul/embed/bias worst %.2e\n", B->name, R->name, w);
    bad += w > PARITY_TOL_MATMUL;
    w = 0;
    for (int d = 0; d < 3; d++) { w = fmaxf(w, check_rows(B, R, dts[d], 1, 64)); w = fmaxf(w, check_rows(B, R, dts[d], 7, 256)); }
    if (verbose) printf("# %s vs %s: rmsnorm/add/swiglu/geglu/scale/concat/rope worst %.2e\n", B->name, R->name, w);
    bad += w > PARITY_TOL_ROWS;
    w = 0;
    const int cases[][3] = {{0, 1, 0}, {10, 1, 0}, {10, 3, 1}, {5, 4, 0}, {20, 9, 1}, {0, 40, 0}, {30, 60, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) w = fmaxf(w, check_attention(B, R, cases[c][0], cases[c][1], cases[c][2]));
    w = fmaxf(w, check_attention_llama_shapes(B, R));
    w = fmaxf(w, check_attention_seqs(B, R));
    w = fmaxf(w, check_rope_kv(B, R, 0, 1, 4, 2, 16, 0));
    w = fmaxf(w, check_rope_kv(B, R, 9, 5, 9, 3, 64, 0));    /* SmolLM2's heads */
    w = fmaxf(w, check_rope_kv(B, R, 30, 33, 8, 8, 32, 0));
    {   /* sliding windows, on draws of their own: the checks after them keep their inputs (the C2T
         * programs' random classifiers must grow trees worth ranking) */
        const uint64_t kept_seed = seed;
        seed = 0x5DEECE66DULL;
        w = fmaxf(w, check_attention_windows(B, R));
        w = fmaxf(w, check_rope_kv(B, R, 30, 12, 4, 2, 16, 9));   /* positions far past the slots, a window of 9 */
        seed = kept_seed;
    }
    if (verbose) printf("# %s vs %s: attention/kv_keep/rope_kv worst %.2e\n", B->name, R->name, w);
    bad += w > PARITY_TOL_ATTENTION;
    w = 0;
    w = fmaxf(w, check_distribution(B, R, 1, 1000, 10, 0, 1.0f, 0));
    w = fmaxf(w, check_distribution(B, R, 5, 1000, 10, 100, 0.7f, 0));
    w = fmaxf(w, check_distribution(B, R, 3, 500, 20, 5000, 1.0f, 1));   /* M > vocab, ties */
    w = fmaxf(w, check_distribution(B, R, 2, 3000, 1, 1000, 1.0f, 1));
    if (verbose) printf("# %s vs %s: softmax/top-k/entropy/argmax worst %.2e\n", B->name, R->name, w);
    bad += w > PARITY_TOL_DISTRIBUTION;
    /* the tree ops: EAGLE-2's default shape, a wide one, ties, a map */
    const int programs[][5] = {{10, 6, 60, 0, 0}, {10, 6, 60, 1, 1}, {4, 5, 8, 1, 0}, {1, 5, 5, 0, 1}, {20, 1, 500, 1, 0}};
    int tree_bad = 0;
    for (size_t c = 0; c < sizeof programs / sizeof *programs; c++)
        tree_bad += check_tree_program(B, R, programs[c][0], programs[c][1], programs[c][2], programs[c][3], programs[c][4]);
    /* C2T's: a wide layer, a cap, ties of probability and of confidence, an odd hidden size */
    const int c2t_programs[][7] = {{10, 6, 40, 60, 0, 0, 16}, {6, 8, 30, 25, 1, 0, 7}, {4, 6, 20, 12, 1, 1, 8},
                                   {3, 8, 10, 1000, 0, 1, 5}};
    for (size_t c = 0; c < sizeof c2t_programs / sizeof *c2t_programs; c++) {
        const int *q = c2t_programs[c];
        for (int fixed = 0; fixed < 2; fixed++)
            tree_bad += check_c2t_program(B, R, q[0], q[1], (float)q[2] / 100, q[3], q[4], q[5], q[6], fixed);
    }
    /* the same ops over many trees at once: a few (ties), and more than a launch takes */
    tree_bad += check_tree_batch(B, R, 3, 1);
    tree_bad += check_tree_batch(B, R, 53, 0);
    const int sample_bad = check_sample(B, R);
    if (verbose) printf("# %s vs %s: sample_dev: %d ids differ\n", B->name, R->name, sample_bad);
    bad += sample_bad > 0;
    if (verbose) printf("# %s vs %s: tree ops: %d outputs differ\n", B->name, R->name, tree_bad);
    bad += tree_bad > 0;
    const int read_bad = check_to_host_many(B);
    if (verbose) printf("# %s: to_host_many: %d elements differ from reads alone\n", B->name, read_bad);
    bad += read_bad > 0;
    return bad;
}

#endif
