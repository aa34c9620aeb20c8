/* Products of weights kept in GGUF's block types (kernels/base/quant.h),
 * read as stored: llama.cpp's way, each token's activations are quantised
 * once per product to 8-bit blocks (quant_q8_row: blocks of 32 for the
 * 32-element types, of 256 with sums per 16 for the K types) and each
 * weight block times activation block is an integer dot product.
 *
 * The sum of one (row, token), the contract every path keeps: for each
 * weight block b in order, the block's integer sum isum_b is exact (int32;
 * how it is added up cannot matter), then one float chain
 *   Q8_0, Q4_0, Q5_0:  acc = fma((float)isum_b, dw_b * dx_b, acc)
 *   Q4_1, Q5_1:        that, then acc = fma(mw_b, dx_b * sx_b, acc)
 *   Q4_K, Q5_K:        acc = fma((float)isum_b, d_b * dx_b, acc), then
 *                      acc = fma(-(float)msum_b, dmin_b * dx_b, acc)
 *   Q6_K:              acc = fma((float)isum_b, d_b * dx_b, acc)
 * from acc = 0, where isum_b = sum over sub-blocks j of sc_j * (sum q*qx -
 * off * sum qx) (quant.h's QuantBlock: sc 1 and one sub-block for the
 * 32-element types), sx_b the activation block's integer sum and msum_b =
 * sum over sub-blocks of mn_j times the activations' sum over it.  So a
 * result does not depend on the token count, the tile, the thread split or
 * the instruction set: the scalar, AVX2 and AVX-512 builds give the same
 * bits (tests/test_quant.c holds a scalar copy of this order and requires
 * them), and greedy verification of any tree, at any size, sums each token
 * as decode does.
 *
 * Tiles: the 32-element types 8 (row, token) pairs at a time (8 rows x 1
 * token, 4 x 2, 2 x 4), read as stored: each weight block is unpacked once
 * per tile and serves its tokens, and the pairs' exact block sums are
 * gathered into one vector so the float chain above runs all the tile's
 * pairs per instruction.  The K types (Q4_K, Q5_K, Q6_K) are read from a
 * copy the backend makes when the weight is made (cpu_quant_pack), rows
 * interleaved so that a vector lane is a row (the section "the K types on
 * the repacked copy" below has the layout): their products need no sum
 * across lanes, which for many tokens was as much work as the dots
 * themselves; tiles of one row group by up to KT_MAX tokens.  The
 * instruction set is chosen when building, as the rest of kernels/cpu:
 * AVX-512 (BW and VL; VNNI's dpbusd where the build has it) takes two pairs
 * per 512-bit dot of the 32-element types and 16-row groups of the K types,
 * AVX2 one pair per 256-bit maddubs/madd and 8-row groups; anything else
 * the scalar loop on the blocks as stored. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)
#define QISA 512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QISA 256
#else
#define QISA 0
#endif

/* Rows per block of the token-group loop (as matmul.c's ROW_BLOCK): the
 * block's weights stay in L2 while the token groups pass over it. */
#define QROW_BLOCK 64

/* One product's activations as 8-bit blocks: q[n][cols]; per block b and
 * token t (block-major, so a tile's tokens are adjacent) the scale d, and
 * for the 32-element blocks the integer sum s and d * s; for the K blocks
 * the sums per 16, token-major [n][nb][16], and their sums per 32, block-major
 * [nb][n][8]. */
typedef struct {
    int n, block;
    int64_t cols, nb;
    int8_t *q;
    float *d, *sd;
    int32_t *s;
    int16_t *bs, *xs;
    size_t cap_q, cap_b;
    float *tmp_d;
    int16_t *tmp_s;
} Act;

static void act_grow(Act *a, int n, int64_t cols, int block) {
    const int64_t nb = cols / block;
    const size_t nq = (size_t)n * (size_t)cols, nbl = (size_t)n * (size_t)nb;
    if (nq > a->cap_q) {
        a->q = xrealloc(a->q, nq);
        a->bs = xrealloc(a->bs, sizeof(int16_t) * (nq / 16 + 16));
        a->cap_q = nq;
    }
    if (nbl > a->cap_b) {
        a->d = xrealloc(a->d, sizeof(float) * nbl);
        a->sd = xrealloc(a->sd, sizeof(float) * nbl);
        a->s = xrealloc(a->s, sizeof(int32_t) * nbl);
        a->tmp_d = xrealloc(a->tmp_d, sizeof(float) * nbl);
        a->tmp_s = xrealloc(a->tmp_s, sizeof(int16_t) * nbl * 16);
        a->xs = xrealloc(a->xs, sizeof(int16_t) * nbl * 8);
        a->cap_b = nbl;
    }
    a->n = n; a->cols = cols; a->nb = nb; a->block = block;
}

/* x[n][cols] quantised as quant_q8_row does (blocks of `block`), the
 * tokens split over the threads (each token's blocks depend on it alone). */
typedef struct {
    Act *a;
    const float *x;
} ActJob;

static void act_part(void *v, int part, int parts) {
    const ActJob *j = v;
    Act *a = j->a;
    const int n = a->n, block = a->block;
    const int64_t nb = a->nb, cols = a->cols;
    int64_t t0, t1;
    part_range(n, part, parts, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float *dt = a->tmp_d + t * nb;
        int16_t *sums = block == 256 ? a->bs + t * nb * 16 : a->tmp_s + t * nb;
        quant_q8_row(j->x + t * cols, cols, block, a->q + t * cols, dt, sums);
        for (int64_t b = 0; b < nb; b++) {
            a->d[b * n + t] = dt[b];
            if (block == 32) {
                a->s[b * n + t] = sums[b];
                a->sd[b * n + t] = dt[b] * (float)sums[b];
            } else
                for (int g = 0; g < 8; g++) a->xs[(b * n + t) * 8 + g] = (int16_t)(sums[b * 16 + 2 * g] + sums[b * 16 + 2 * g + 1]);
        }
    }
}

static void act_make(Act *a, const float *x, int n, int64_t cols, int block) {
    act_grow(a, n, cols, block);
    ActJob j = {a, x};
    cpu_parallel(act_part, &j, n > 1 && (int64_t)n * cols > PAR_MIN_WORK / 16);
}

/* products run one at a time (batch.c's fibers share one thread), their
 * parallel regions inside: one buffer per kind of activation block */
static Act act32, actk;

#if !QISA
/* ---- the scalar loop: the contract written out, one (row, token) at a time */

static int has_min(DType dt) { return dt == DT_Q4_1 || dt == DT_Q5_1; }
static int k_min(DType dt) { return dt == DT_Q4_K || dt == DT_Q5_K; }

/* acc after block qb of a row (unpacked) times token t's block b. */
static float block_step(DType dt, const QuantBlock *qb, const Act *a, int t, int64_t b, float acc) {
    const int8_t *x = a->q + (size_t)t * a->cols + b * a->block;
    const float dx = a->d[b * a->n + t];
    if (a->block == 32) {
        int isum = 0;
        for (int e = 0; e < 32; e++) isum += qb->q[e] * x[e];
        isum -= qb->off * a->s[b * a->n + t];
        acc = fmaf((float)isum, qb->d * dx, acc);
        return has_min(dt) ? fmaf(qb->m, a->sd[b * a->n + t], acc) : acc;
    }
    const int16_t *bs = a->bs + ((size_t)t * a->nb + b) * 16;
    const int per = qb->sub / 16;   /* sums of 16 per sub-block */
    int isum = 0, msum = 0;
    for (int j = 0; j < 256 / qb->sub; j++) {
        int part = 0, xs = 0;
        for (int e = j * qb->sub; e < (j + 1) * qb->sub; e++) part += qb->q[e] * x[e];
        for (int h = 0; h < per; h++) xs += bs[j * per + h];
        isum += qb->sc[j] * (part - qb->off * xs);
        msum += qb->mn[j] * xs;
    }
    acc = fmaf((float)isum, qb->d * dx, acc);
    return k_min(dt) ? fmaf(-(float)msum, qb->m * dx, acc) : acc;
}

#define SCALAR_TOKENS 16

static void rows_scalar(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1) {
    const DType dt = w->dtype;
    const size_t rb = (size_t)quant_row_bytes(dt, w->cols), bb = quant_block_bytes(dt);
    QuantBlock qb;
    for (int64_t r = r0; r < r1; r++)
        for (int t0 = 0; t0 < a->n; t0 += SCALAR_TOKENS) {
            const int k = a->n - t0 < SCALAR_TOKENS ? a->n - t0 : SCALAR_TOKENS;
            float acc[SCALAR_TOKENS] = {0};
            for (int64_t b = 0; b < a->nb; b++) {
                quant_unpack(dt, (const uint8_t *)w->data + r * rb + b * bb, &qb);
                for (int t = 0; t < k; t++) acc[t] = block_step(dt, &qb, a, t0 + t, b, acc[t]);
            }
            for (int t = 0; t < k; t++) out[(int64_t)(t0 + t) * w->rows + r] = acc[t];
        }
}
#endif

#if QISA
/* ---- vector tiles: 8 pairs (i, j) = (k / T, k % T) of R rows x T tokens */

typedef __m256i v8i;

static inline float half_f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 8 floats of a per-row value v[k / T] */
static inline __m256 by_row(const float *v, const int T) {
    return _mm256_setr_ps(v[0 / T], v[1 / T], v[2 / T], v[3 / T], v[4 / T], v[5 / T], v[6 / T], v[7 / T]);
}
/* 8 lanes of the T adjacent 32-bit values at p (lane k: p[k % T]) */
static inline __m256 by_token(const void *p, const int T) {
    if (T == 1) return _mm256_broadcast_ss(p);
    if (T == 2) return _mm256_castpd_ps(_mm256_broadcast_sd(p));
    if (T == 4) return _mm256_broadcast_ps(p);
    return _mm256_loadu_ps(p);
}

/* Eight vectors of 8 int32 to the vector of their 8 sums (pair order). */
static inline v8i reduce8(const v8i p[8]) {
    const v8i a = _mm256_hadd_epi32(p[0], p[1]), b = _mm256_hadd_epi32(p[2], p[3]);
    const v8i c = _mm256_hadd_epi32(p[4], p[5]), d = _mm256_hadd_epi32(p[6], p[7]);
    const v8i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);   /* per 128-bit half: 4 pairs */
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* int32 sums of 4 adjacent u8 x s8 products (no saturation: VNNI, or
 * maddubs on operands whose pair sums fit int16, which each caller says) */
static inline v8i dot4(v8i u, v8i s) {
#if defined(__AVX512VNNI__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* byte j: 0xFF where bit j of x is set */
static inline v8i bit_bytes(uint32_t x) {
    const v8i pick = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
    const v8i mask = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const v8i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)x), pick), mask);
    return _mm256_cmpeq_epi8(v, mask);
}

static inline v8i nibbles(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* Q8_0's int8 made unsigned for the dot (q + 128, its sum corrected by
 * 128 * sx) where VNNI sums in int32; maddubs would saturate at 2 * 255 *
 * 127, so there the sign moves to x instead (|q| <= 128: 2 * 128 * 127
 * fits). */
#if defined(__AVX512VNNI__)
#define Q8_OFF 128
#else
#define Q8_OFF 0
#endif

/* A 32-element block of a row as 32 unsigned bytes (Q8_0: see Q8_OFF), its
 * d, its minimum (Q4_1, Q5_1). */
static inline v8i unpack32(const uint8_t *p, const DType DT, float *d, float *m) {
    *d = half_f(p);
    switch (DT) {
    case DT_Q4_0: return nibbles(p + 2);
    case DT_Q4_1: *m = half_f(p + 2); return nibbles(p + 4);
    case DT_Q5_0: case DT_Q5_1: {
        const int o = DT == DT_Q5_1 ? 2 : 0;
        if (o) *m = half_f(p + 2);
        uint32_t qh;
        memcpy(&qh, p + 2 + o, 4);
        return _mm256_or_si256(nibbles(p + 6 + o), _mm256_and_si256(bit_bytes(qh), _mm256_set1_epi8(0x10)));
    }
    default: {   /* Q8_0 */
        const v8i q = _mm256_loadu_si256((const v8i *)(p + 2));
        return Q8_OFF ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
    }
}

/* The integer that is subtracted times sx: Q4_0 8, Q5_0 16, Q8_0 Q8_OFF. */
static inline int off32(const DType DT) {
    return DT == DT_Q4_0 ? 8 : DT == DT_Q5_0 ? 16 : DT == DT_Q8_0 ? Q8_OFF : 0;
}

/* Block sums of the 8 pairs: w[R] weight blocks, x[T] activation blocks. */
static inline v8i dots32(const v8i *w, const v8i *x, const int R, const int T, const DType DT) {
    (void)R; (void)DT;
#if QISA == 512
    /* two pairs per 512-bit dot: (i, j), (i, j+1), or (i, 0), (i+1, 0) */
    __m512i z[4];
#pragma GCC unroll 4
    for (int h = 0; h < 4; h++) {
        const int k = 2 * h, i = k / T, j = k % T;
        __m512i ww, xx;
        if (T >= 2) {
            ww = _mm512_broadcast_i64x4(w[i]);
            xx = _mm512_inserti64x4(_mm512_castsi256_si512(x[j]), x[j + 1], 1);
        } else {
            ww = _mm512_inserti64x4(_mm512_castsi256_si512(w[i]), w[i + 1], 1);
            xx = _mm512_broadcast_i64x4(x[0]);
        }
#if defined(__AVX512VNNI__)
        z[h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ww, xx);
#else
        if (DT == DT_Q8_0) {   /* |q| and x with q's sign: pair sums <= 2 * 128 * 127 */
            xx = _mm512_mask_sub_epi8(xx, _mm512_movepi8_mask(ww), _mm512_setzero_si512(), xx);
            ww = _mm512_abs_epi8(ww);
        }
        z[h] = _mm512_madd_epi16(_mm512_maddubs_epi16(ww, xx), _mm512_set1_epi16(1));
#endif
    }
    /* per 128-bit lane L of z[0..3]: their 4 lane sums; lanes 0, 1 hold
     * the even pairs' halves, 2, 3 the odd pairs' */
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
    const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
    const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(u, v), _mm512_unpackhi_epi64(u, v));
    const __m512i q = _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(3, 1, 2, 0));   /* lanes 0, 2, 1, 3 */
    const v8i e = _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));   /* 0 2 4 6 1 3 5 7 */
    return _mm256_permutevar8x32_epi32(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
#else
    v8i p[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const int i = k / T, j = k % T;
        if (DT == DT_Q8_0 && !Q8_OFF)   /* pair sums <= 2 * 128 * 127 */
            p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w[i]), _mm256_sign_epi8(x[j], w[i])),
                                     _mm256_set1_epi16(1));
        else p[k] = dot4(w[i], x[j]);   /* unsigned q <= 31: pair sums <= 2 * 31 * 127 */
    }
    return reduce8(p);
#endif
}

/* out[t][r] for rows r0 + i (i < R, the rows past r1 repeating r1 - 1 and
 * not stored) and tokens t0 + j (j < T) of a 32-element type. */
static inline __attribute__((always_inline)) void tile32(const Weight *w, const Act *a, float *out, int64_t r0,
                                                         int64_t r1, int t0, const int R, const int T, const DType DT) {
    const size_t rb = (size_t)w->cols / 32 * quant_block_bytes(DT), bb = quant_block_bytes(DT);
    const uint8_t *row[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) row[i] = (const uint8_t *)w->data + (r0 + i < r1 ? r0 + i : r1 - 1) * rb;
    const int n = a->n;
    const int off = off32(DT);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < a->nb; b++) {
        v8i wq[8], xq[8];
        float dw[8], mw[8];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) wq[i] = unpack32(row[i] + b * bb, DT, &dw[i], &mw[i]);
#pragma GCC unroll 8
        for (int j = 0; j < T; j++) xq[j] = _mm256_loadu_si256((const v8i *)(a->q + (size_t)(t0 + j) * a->cols + b * 32));
        v8i isum = dots32(wq, xq, R, T, DT);
        const size_t at = (size_t)b * n + t0;
        if (off) isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(_mm256_castps_si256(by_token(a->s + at, T)),
                                                                  _mm256_set1_epi32(off)));
        const __m256 scale = _mm256_mul_ps(by_row(dw, T), by_token(a->d + at, T));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
        if (DT == DT_Q4_1 || DT == DT_Q5_1) acc = _mm256_fmadd_ps(by_row(mw, T), by_token(a->sd + at, T), acc);
    }
    float res[8];
    _mm256_storeu_ps(res, acc);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        if (r0 + k / T < r1) out[(int64_t)(t0 + k % T) * w->rows + r0 + k / T] = res[k];
}

/* ---- the K types (Q4_K, Q5_K, Q6_K) on the repacked copy
 *
 * cpu_quant_pack copies a K-type matrix once, when the weight is made,
 * into groups of KG rows (16 on AVX-512, 8 on AVX2; the last group padded
 * with zero rows, whose lanes are never stored) so that a vector lane is a
 * row: 4 bytes of each of the KG rows make one vector, and one dot of
 * unsigned weight bytes with 4 activation bytes broadcast to every lane
 * adds 4 products to each row's int32 lane, with no reduction across
 * lanes.  Per group and super-block, KPACK_* bytes:
 *   Q4_K, Q5_K: d[KG], dmin[KG] (the halves as stored), sc[8][KG] and
 *     mn[4][KG][2] (the 6-bit scales and minimums as bytes, the minimums
 *     in pairs of sub-blocks);
 *   Q6_K: d[KG], sc[8][KG][2] (the int8 scales in pairs of sub-blocks);
 *   then for each 32 elements e0 + 0..31 (g = 0..7): 4 chunks of KG x 4
 *   bytes, chunk c row i byte m = q[e0 + 8c + m] | q[e0 + 8c + 4 + m] << 4,
 *   so vector v = 2c + h (h: high nibbles) holds elements e0 + 4v + m;
 *   Q5_K then one KG x 4 plane with the fifth bit of vector v's byte at bit
 *   v; Q6_K two planes with its top two bits at bits 2u, 2u + 1 of plane
 *   v / 4 (u = v % 4).
 * Per sub-block the int32 lanes hold sum q * x exactly; times the row
 * lanes' scales (VNNI: vpmulld of the dpbusd sums; else the int16 maddubs
 * sums, at most 32004 where added, by madd with the scale in both halves)
 * and added, that is the block's isum of the contract; Q6_K's -32 sc_j
 * times the activations' sums of 16 and Q4_K / Q5_K's minimum sums come
 * from madd of the scale or minimum pairs with the pairs of activation
 * sums.  Then the float chain per lane, as the contract says. */
#if QISA == 512
#define KG 16
#if defined(__AVX512VNNI__)
#define KT_MAX 8
#else
#define KT_MAX 6
#endif
typedef __m512i kv;
typedef __m512 kf;
static inline kv kv_load(const void *p) { return _mm512_loadu_si512(p); }
static inline kv kv_b32(const void *p) { int32_t v; memcpy(&v, p, 4); return _mm512_set1_epi32(v); }
static inline kv kv_zero(void) { return _mm512_setzero_si512(); }
static inline kv kv_and8(kv a, int m) { return _mm512_and_si512(a, _mm512_set1_epi8((char)m)); }
static inline kv kv_srl16(kv a, const int k) { return _mm512_srli_epi16(a, k); }
static inline kv kv_sll16(kv a, const int k) { return _mm512_slli_epi16(a, k); }
static inline kv kv_or(kv a, kv b) { return _mm512_or_si512(a, b); }
static inline kv kv_add32(kv a, kv b) { return _mm512_add_epi32(a, b); }
static inline kv kv_sub32(kv a, kv b) { return _mm512_sub_epi32(a, b); }
static inline kv kv_add16(kv a, kv b) { return _mm512_add_epi16(a, b); }
static inline kv kv_mul32(kv a, kv b) { return _mm512_mullo_epi32(a, b); }
static inline kv kv_sll32(kv a, const int k) { return _mm512_slli_epi32(a, k); }
static inline kv kv_srl32(kv a, const int k) { return _mm512_srli_epi32(a, k); }
static inline kv kv_sra32(kv a, const int k) { return _mm512_srai_epi32(a, k); }
static inline kv kv_maddubs(kv u, kv s) { return _mm512_maddubs_epi16(u, s); }
static inline kv kv_madd(kv a, kv b) { return _mm512_madd_epi16(a, b); }
static inline kv kv_madd_add(kv acc, kv a, kv b) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
static inline kv kv_odd16(kv lo, kv hi) { return _mm512_mask_blend_epi16(0xAAAAAAAAu, lo, hi); }
static inline kv kv_u8_32(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline kv kv_u8_16(const uint8_t *p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
static inline kv kv_s8_16(const uint8_t *p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
static inline kf kf_half(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline kf kf_zero(void) { return _mm512_setzero_ps(); }
static inline kf kf_mul(kf a, kf b) { return _mm512_mul_ps(a, b); }
static inline kf kf_set1(float x) { return _mm512_set1_ps(x); }
static inline kf kf_fmadd(kv i, kf s, kf acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
static inline kf kf_fnmadd(kv i, kf s, kf acc) { return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
/* lanes [lo, hi) of v to p */
static inline void kf_store(float *p, kf v, int lo, int hi) {
    _mm512_mask_storeu_ps(p, (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), v);
}
#else
#define KG 8
#define KT_MAX 4
typedef __m256i kv;
typedef __m256 kf;
static inline kv kv_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline kv kv_b32(const void *p) { int32_t v; memcpy(&v, p, 4); return _mm256_set1_epi32(v); }
static inline kv kv_zero(void) { return _mm256_setzero_si256(); }
static inline kv kv_and8(kv a, int m) { return _mm256_and_si256(a, _mm256_set1_epi8((char)m)); }
static inline kv kv_srl16(kv a, const int k) { return _mm256_srli_epi16(a, k); }
static inline kv kv_sll16(kv a, const int k) { return _mm256_slli_epi16(a, k); }
static inline kv kv_or(kv a, kv b) { return _mm256_or_si256(a, b); }
static inline kv kv_add32(kv a, kv b) { return _mm256_add_epi32(a, b); }
static inline kv kv_sub32(kv a, kv b) { return _mm256_sub_epi32(a, b); }
static inline kv kv_add16(kv a, kv b) { return _mm256_add_epi16(a, b); }
static inline kv kv_mul32(kv a, kv b) { return _mm256_mullo_epi32(a, b); }
static inline kv kv_sll32(kv a, const int k) { return _mm256_slli_epi32(a, k); }
static inline kv kv_srl32(kv a, const int k) { return _mm256_srli_epi32(a, k); }
static inline kv kv_sra32(kv a, const int k) { return _mm256_srai_epi32(a, k); }
static inline kv kv_maddubs(kv u, kv s) { return _mm256_maddubs_epi16(u, s); }
static inline kv kv_madd(kv a, kv b) { return _mm256_madd_epi16(a, b); }
static inline kv kv_madd_add(kv acc, kv a, kv b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
static inline kv kv_odd16(kv lo, kv hi) { return _mm256_blend_epi16(lo, hi, 0xAA); }
static inline kv kv_u8_32(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline kv kv_u8_16(const uint8_t *p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline kv kv_s8_16(const uint8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline kf kf_half(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline kf kf_zero(void) { return _mm256_setzero_ps(); }
static inline kf kf_mul(kf a, kf b) { return _mm256_mul_ps(a, b); }
static inline kf kf_set1(float x) { return _mm256_set1_ps(x); }
static inline kf kf_fmadd(kv i, kf s, kf acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), s, acc); }
static inline kf kf_fnmadd(kv i, kf s, kf acc) { return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(i), s, acc); }
static inline void kf_store(float *p, kf v, int lo, int hi) {
    const __m256i k = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), k),
                                       _mm256_cmpgt_epi32(k, _mm256_set1_epi32(lo - 1)));
    _mm256_maskstore_ps(p, m, v);
}
#endif

/* bytes of a group's super-block: its head (scales), then per 32 elements */
static inline size_t kp_head(const DType DT) { return (size_t)KG * (DT == DT_Q6_K ? 18 : 20); }
static inline size_t kp_g(const DType DT) { return (size_t)KG * (DT == DT_Q4_K ? 16 : DT == DT_Q5_K ? 20 : 24); }
static inline size_t kp_block(const DType DT) { return kp_head(DT) + 8 * kp_g(DT); }

/* One group's super-block b from the stored rows (n of them, at most KG). */
static void kpack_block(DType dt, const uint8_t *src, size_t rb, int n, int64_t b, uint8_t *p) {
    const size_t bb = quant_block_bytes(dt);
    memset(p, 0, kp_block(dt));
    uint8_t *hd = p, *body = p + kp_head(dt);
    const size_t gb = kp_g(dt);
    QuantBlock qb;
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * rb + (size_t)b * bb;
        quant_unpack(dt, s, &qb);
        if (dt == DT_Q6_K) {
            memcpy(hd + 2 * i, s + 208, 2);
            for (int j = 0; j < 16; j++) hd[2 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = (uint8_t)(int8_t)qb.sc[j];
        } else {
            memcpy(hd + 2 * i, s, 2);
            memcpy(hd + 2 * KG + 2 * i, s + 2, 2);
            for (int j = 0; j < 8; j++) {
                hd[4 * KG + j * KG + i] = (uint8_t)qb.sc[j];
                hd[12 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = (uint8_t)qb.mn[j];
            }
        }
        for (int g = 0; g < 8; g++) {
            uint8_t *o = body + g * gb;
            const int16_t *q = qb.q + 32 * g;
            for (int v = 0; v < 8; v++)
                for (int m = 0; m < 4; m++) {
                    const int e = 4 * v + m, c = v / 2, h = v % 2;
                    o[(c * KG + i) * 4 + m] |= (uint8_t)((q[e] & 15) << (4 * h));
                    if (dt == DT_Q5_K) o[16 * KG + i * 4 + m] |= (uint8_t)(((q[e] >> 4) & 1) << v);
                    if (dt == DT_Q6_K) o[16 * KG + (v / 4) * 4 * KG + i * 4 + m] |= (uint8_t)(((q[e] >> 4) & 3) << (2 * (v % 4)));
                }
        }
    }
}

typedef struct {
    const Weight *w;
    uint8_t *p;
} KPackJob;

static void kpack_part(void *v, int part, int parts) {
    const KPackJob *j = v;
    const DType dt = j->w->dtype;
    const int64_t groups = (j->w->rows + KG - 1) / KG, nb = j->w->cols / 256;
    const size_t rb = (size_t)quant_row_bytes(dt, j->w->cols);
    int64_t g0, g1;
    part_range(groups, part, parts, &g0, &g1);
    for (int64_t gi = g0; gi < g1; gi++) {
        const int64_t r = gi * KG;
        const int n = j->w->rows - r < KG ? (int)(j->w->rows - r) : KG;
        for (int64_t b = 0; b < nb; b++)
            kpack_block(dt, (const uint8_t *)j->w->data + r * rb, rb, n, b, j->p + (size_t)(gi * nb + b) * kp_block(dt));
    }
}

/* vector v (0..7) of 32 elements at o */
static inline __attribute__((always_inline)) kv k_vec(const uint8_t *o, const int v, const DType DT) {
    const kv raw = kv_load(o + (v / 2) * 4 * KG);
    kv q = kv_and8(v % 2 ? kv_srl16(raw, 4) : raw, 0x0F);
    if (DT == DT_Q5_K) {   /* bit v to bit 4 (16-bit shifts bring no bit across bytes there) */
        const kv pl = kv_load(o + 16 * KG);
        q = kv_or(q, kv_and8(v <= 4 ? kv_sll16(pl, 4 - v) : kv_srl16(pl, v - 4), 0x10));
    } else if (DT == DT_Q6_K) {   /* bits 2u, 2u + 1 to bits 4, 5 */
        const kv pl = kv_load(o + 16 * KG + (v / 4) * 4 * KG);
        const int u = v % 4;
        q = kv_or(q, kv_and8(u <= 2 ? kv_sll16(pl, 4 - 2 * u) : kv_srl16(pl, 2), 0x30));
    }
    return q;
}

/* out[t][r] for the rows r in [r0, r1) of group gi, tokens t0 .. t0 + T - 1 */
static inline __attribute__((always_inline)) void tilek(const Weight *w, const uint8_t *pk, const Act *a, float *out,
                                                        int64_t gi, int64_t r0, int64_t r1, int t0, const int T,
                                                        const DType DT) {
    const int64_t nb = a->nb, n = a->n;
    const size_t blk = kp_block(DT), gb = kp_g(DT);
    kf acc[KT_MAX];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = kf_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *hd = pk + (size_t)(gi * nb + b) * blk, *body = hd + kp_head(DT);
        kv isum[KT_MAX];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) isum[t] = kv_zero();
        const int8_t *xb = a->q + (size_t)t0 * a->cols + b * 256;
        for (int g = 0; g < 8; g++) {
            const uint8_t *o = body + g * gb;
            kv wq[8];
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) wq[v] = k_vec(o, v, DT);
            kv s0, s1;   /* the scales of the sub-blocks (Q6_K: 2g, 2g + 1; else g) */
#if defined(__AVX512VNNI__)
            if (DT == DT_Q6_K) {
                const kv pr = kv_s8_16(hd + 2 * KG + g * 2 * KG);
                s0 = kv_sra32(kv_sll32(pr, 16), 16);
                s1 = kv_sra32(pr, 16);
            } else s0 = s1 = kv_u8_32(hd + 4 * KG + g * KG);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int8_t *x = xb + (size_t)t * a->cols + 32 * g;
                kv p0 = kv_zero(), p1 = kv_zero();
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++) {
                    if (DT == DT_Q6_K ? v < 4 : v % 2 == 0) p0 = _mm512_dpbusd_epi32(p0, wq[v], kv_b32(x + 4 * v));
                    else p1 = _mm512_dpbusd_epi32(p1, wq[v], kv_b32(x + 4 * v));
                }
                if (DT == DT_Q6_K) isum[t] = kv_add32(isum[t], kv_add32(kv_mul32(p0, s0), kv_mul32(p1, s1)));
                else isum[t] = kv_add32(isum[t], kv_mul32(kv_add32(p0, p1), s0));
            }
#else
            /* the scale in both int16 halves of each lane */
            if (DT == DT_Q6_K) {
                const kv pr = kv_s8_16(hd + 2 * KG + g * 2 * KG);
                s0 = kv_odd16(pr, kv_sll32(pr, 16));
                s1 = kv_odd16(kv_srl32(pr, 16), pr);
            } else {
                const kv s = kv_u8_32(hd + 4 * KG + g * KG);
                s0 = s1 = kv_or(s, kv_sll32(s, 16));
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int8_t *x = xb + (size_t)t * a->cols + 32 * g;
                kv m[8];
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++) m[v] = kv_maddubs(wq[v], kv_b32(x + 4 * v));
                /* int16 sums of at most 16 products of q <= 15, 8 of q <= 31, 4 of q <= 63: <= 32004 */
                if (DT == DT_Q4_K) {
                    const kv s = kv_add16(kv_add16(kv_add16(m[0], m[1]), kv_add16(m[2], m[3])),
                                          kv_add16(kv_add16(m[4], m[5]), kv_add16(m[6], m[7])));
                    isum[t] = kv_madd_add(isum[t], s, s0);
                } else if (DT == DT_Q5_K) {
                    isum[t] = kv_madd_add(isum[t], kv_add16(kv_add16(m[0], m[1]), kv_add16(m[2], m[3])), s0);
                    isum[t] = kv_madd_add(isum[t], kv_add16(kv_add16(m[4], m[5]), kv_add16(m[6], m[7])), s0);
                } else {
                    isum[t] = kv_madd_add(isum[t], kv_add16(m[0], m[1]), s0);
                    isum[t] = kv_madd_add(isum[t], kv_add16(m[2], m[3]), s0);
                    isum[t] = kv_madd_add(isum[t], kv_add16(m[4], m[5]), s1);
                    isum[t] = kv_madd_add(isum[t], kv_add16(m[6], m[7]), s1);
                }
            }
#endif
        }
        const kf dw = kf_half(hd);
        const float *dx = a->d + (size_t)b * n + t0;
        if (DT == DT_Q6_K) {   /* -32 sc_j times the activations' sums of 16, by pairs of sub-blocks */
            kv pr[8];
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) pr[p] = kv_s8_16(hd + 2 * KG + p * 2 * KG);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int16_t *bs = a->bs + ((size_t)(t0 + t) * nb + b) * 16;
                kv o = kv_zero();
#pragma GCC unroll 8
                for (int p = 0; p < 8; p++) o = kv_madd_add(o, pr[p], kv_b32(bs + 2 * p));
                acc[t] = kf_fmadd(kv_sub32(isum[t], kv_sll32(o, 5)), kf_mul(dw, kf_set1(dx[t])), acc[t]);
            }
        } else {   /* the minimum sums, by pairs of sub-blocks */
            const kf dm = kf_half(hd + 2 * KG);
            kv mn[4];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) mn[p] = kv_u8_16(hd + 12 * KG + p * 2 * KG);
            const int16_t *xs = a->xs + ((size_t)b * n + t0) * 8;
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                kv ms = kv_zero();
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) ms = kv_madd_add(ms, mn[p], kv_b32(xs + 8 * t + 2 * p));
                const kf dxv = kf_set1(dx[t]);
                acc[t] = kf_fmadd(isum[t], kf_mul(dw, dxv), acc[t]);
                acc[t] = kf_fnmadd(ms, kf_mul(dm, dxv), acc[t]);
            }
        }
    }
    const int64_t g0 = gi * KG;
    const int lo = r0 > g0 ? (int)(r0 - g0) : 0, hi = r1 < g0 + KG ? (int)(r1 - g0) : KG;
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) kf_store(out + (int64_t)(t0 + t) * w->rows + g0, acc[t], lo, hi);
}

/* Rows [r0, r1) of every token of a K type: blocks of QROW_BLOCK rows (whole
 * groups), in each the tokens KT_MAX at a time, then the rest at once. */
static inline __attribute__((always_inline)) void rows_k(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1,
                                                         const DType DT) {
    const uint8_t *pk = ((const CpuWeightCopies *)w->priv)->kpack;
    const int64_t G0 = r0 / KG, G1 = (r1 + KG - 1) / KG, per = QROW_BLOCK / KG;
    for (int64_t b0 = G0; b0 < G1; b0 += per) {
        const int64_t b1 = b0 + per < G1 ? b0 + per : G1;
        int t = 0;
        for (; t + KT_MAX <= a->n; t += KT_MAX)
            for (int64_t gi = b0; gi < b1; gi++) tilek(w, pk, a, out, gi, r0, r1, t, KT_MAX, DT);
        const int left = a->n - t;
        if (!left) continue;
        for (int64_t gi = b0; gi < b1; gi++) switch (left) {
            case 1: tilek(w, pk, a, out, gi, r0, r1, t, 1, DT); break;
            case 2: tilek(w, pk, a, out, gi, r0, r1, t, 2, DT); break;
            case 3: tilek(w, pk, a, out, gi, r0, r1, t, 3, DT); break;
#if KT_MAX > 4
            case 4: tilek(w, pk, a, out, gi, r0, r1, t, 4, DT); break;
            case 5: tilek(w, pk, a, out, gi, r0, r1, t, 5, DT); break;
#endif
#if KT_MAX > 6
            case 6: tilek(w, pk, a, out, gi, r0, r1, t, 6, DT); break;
            case 7: tilek(w, pk, a, out, gi, r0, r1, t, 7, DT); break;
#endif
            default: break;
            }
    }
}

/* Rows [r0, r1) for tokens [t0, t0 + T) of a 32-element type, R = 8 / T
 * rows a tile. */
static inline __attribute__((always_inline)) void span(const Weight *w, const Act *a, float *out, int64_t r0,
                                                       int64_t r1, int t0, const int T, const DType DT) {
    const int R = 8 / T;
    for (int64_t r = r0; r < r1; r += R) tile32(w, a, out, r, r1, t0, R, T, DT);
}

/* Rows [r0, r1) of every token: blocks of QROW_BLOCK rows, inside each the
 * tokens in groups of 4, then 2, then 1. */
static inline __attribute__((always_inline)) void rows_typed(const Weight *w, const Act *a, float *out, int64_t r0,
                                                             int64_t r1, const DType DT) {
    for (int64_t b0 = r0; b0 < r1; b0 += QROW_BLOCK) {
        const int64_t b1 = b0 + QROW_BLOCK < r1 ? b0 + QROW_BLOCK : r1;
        int t = 0;
        for (; t + 4 <= a->n; t += 4) span(w, a, out, b0, b1, t, 4, DT);
        for (; t + 2 <= a->n; t += 2) span(w, a, out, b0, b1, t, 2, DT);
        for (; t < a->n; t++) span(w, a, out, b0, b1, t, 1, DT);
    }
}

static void rows_vector(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1) {
    switch (w->dtype) {
    case DT_Q8_0: rows_typed(w, a, out, r0, r1, DT_Q8_0); break;
    case DT_Q4_0: rows_typed(w, a, out, r0, r1, DT_Q4_0); break;
    case DT_Q4_1: rows_typed(w, a, out, r0, r1, DT_Q4_1); break;
    case DT_Q5_0: rows_typed(w, a, out, r0, r1, DT_Q5_0); break;
    case DT_Q5_1: rows_typed(w, a, out, r0, r1, DT_Q5_1); break;
    case DT_Q4_K: rows_k(w, a, out, r0, r1, DT_Q4_K); break;
    case DT_Q5_K: rows_k(w, a, out, r0, r1, DT_Q5_K); break;
    case DT_Q6_K: rows_k(w, a, out, r0, r1, DT_Q6_K); break;
    default: break;
    }
}
#endif

static void rows_any(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1) {
#if QISA
    rows_vector(w, a, out, r0, r1);
#else
    rows_scalar(w, a, out, r0, r1);
#endif
}

/* The rows of all the weights, in order, as one range split in contiguous
 * parts (matmul.c's RowsJob): each part streams its rows. */
typedef struct {
    float *const *outs;
    const Weight *const *ws;
    int count;
    int64_t total;
} QuantJob;

static void quant_part(void *v, int part, int parts) {
    const QuantJob *j = v;
    int64_t g0, g1, base = 0;
    part_range(j->total, part, parts, &g0, &g1);
    for (int i = 0; i < j->count; base += j->ws[i]->rows, i++) {
        const int64_t lo = g0 > base ? g0 : base, hi = g1 < base + j->ws[i]->rows ? g1 : base + j->ws[i]->rows;
        const Act *a = quant_act_block(j->ws[i]->dtype) == 256 ? &actk : &act32;
        if (lo < hi) rows_any(j->ws[i], a, j->outs[i], lo - base, hi - base);
    }
}

void cpu_quant_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    int need32 = 0, needk = 0;
    int64_t total = 0, work = 0;
    for (int i = 0; i < count; i++) {
        if (quant_act_block(ws[i]->dtype) == 256) needk = 1;
        else need32 = 1;
        total += ws[i]->rows;
        work += ws[i]->rows * ws[i]->cols * n;
    }
    if (!count || n <= 0) return;
    const int64_t cols = ws[0]->cols;
    if (need32) act_make(&act32, x, n, cols, 32);
    if (needk) act_make(&actk, x, n, cols, 256);
    QuantJob j = {outs, ws, count, total};
    cpu_parallel(quant_part, &j, work > PAR_MIN_WORK);
}

int cpu_quant_pack(const Weight *w, void **packed) {
    *packed = NULL;
#if QISA
    const DType dt = w->dtype;
    if (dt != DT_Q4_K && dt != DT_Q5_K && dt != DT_Q6_K) return 0;
    const int64_t groups = (w->rows + KG - 1) / KG;
    const size_t bytes = (size_t)groups * (size_t)(w->cols / 256) * kp_block(dt);
    uint8_t *p = malloc(bytes);
    if (!p) {
        err_set("no memory for the repacked copy of a %s weight (%zu bytes)", dtype_name(dt), bytes);
        return -1;
    }
    KPackJob j = {w, p};
    cpu_parallel(kpack_part, &j, groups > 1);
    *packed = p;
#else
    (void)w;
#endif
    return 0;
}

void cpu_quant_row(const Weight *w, int64_t r, float *out) {
    const int64_t rb = quant_row_bytes(w->dtype, w->cols);
    quant_dequant_row(w->dtype, (const uint8_t *)w->data + r * rb, out, w->cols);
}
