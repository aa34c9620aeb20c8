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
 * token, 4 x 2, 2 x 4); the K types 4 rows x 1 token, and for more tokens
 * 2 x 4 (AVX2) or 4 x 4 and 2 x 8 (AVX-512).  Each weight block is unpacked
 * once per tile and serves its tokens, and the pairs' exact block sums are
 * gathered into one vector so the float chain above runs all the tile's
 * pairs per instruction.  The instruction set is chosen
 * when building, as the rest of kernels/cpu: AVX-512 (BW and VL; VNNI's
 * dpbusd where the build has it) takes two pairs per 512-bit dot of the
 * 32-element types, AVX2 one per 256-bit maddubs/madd; anything else the
 * scalar loop. */
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

/* Sub-block g's 32 unsigned integers of a K super-block p. */
static inline v8i unpack_k(const uint8_t *p, int g, const DType DT) {
    const v8i m4 = _mm256_set1_epi8(0x0F);
    if (DT == DT_Q6_K) {
        const int h = g / 4, k = g % 4;
        const v8i ql = _mm256_loadu_si256((const v8i *)(p + 64 * h + 32 * (k & 1)));
        const v8i qh = _mm256_loadu_si256((const v8i *)(p + 128 + 32 * h));
        const v8i lo = _mm256_and_si256(k >> 1 ? _mm256_srli_epi16(ql, 4) : ql, m4);
        const v8i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
        return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    }
    const uint8_t *qs = p + (DT == DT_Q5_K ? 48 : 16) + 32 * (g / 2);
    const v8i q = _mm256_loadu_si256((const v8i *)qs);
    v8i v = _mm256_and_si256(g & 1 ? _mm256_srli_epi16(q, 4) : q, m4);
    if (DT == DT_Q5_K) {
        const v8i qh = _mm256_loadu_si256((const v8i *)(p + 16));
        const v8i bit = _mm256_and_si256(_mm256_srli_epi16(qh, g), _mm256_set1_epi8(1));
        v = _mm256_or_si256(v, _mm256_slli_epi16(bit, 4));
    }
    return v;
}

#if QISA == 512
/* ---- the K types on AVX-512: a super-block is 4 chunks of 64 elements
 * (chunk c: elements 64c .. 64c + 63, the activations in their order), each
 * unpacked once into one 512-bit vector of unsigned bytes and applied to
 * every token of the tile: maddubs to int16 pair sums (q <= 63, so <= 2 *
 * 63 * 127), then those times the sub-block scale as int16 added into the
 * pair's int32 lanes (VNNI's dpwssd, else madd and add).  Tiles: 4 rows x 1
 * token (decode), 4 x 4 and 2 x 8 (16 pairs: 16 accumulators, the unpacked
 * rows and one activation chunk in the 32 registers).  One reduction per
 * super-block gathers the pairs' exact sums into one vector for the float
 * chain; Q6_K's offset term (-32 sc_h times the sums of 16) is added into
 * the same lanes first, Q4_K / Q5_K's minimum term gets its own. */
typedef __m512i v16i;

static inline v16i dot2_add(v16i acc, v16i p, v16i s) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, p, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, s));
#endif
}

/* 16-bit words: a in the low 256 bits, b in the high */
static inline v16i halves16(short a, short b) {
    return _mm512_mask_mov_epi16(_mm512_set1_epi16(a), 0xFFFF0000u, _mm512_set1_epi16(b));
}

/* Chunk c of super-block p as 64 unsigned bytes. */
static inline v16i unpack_k64(const uint8_t *p, const int c, const DType DT) {
    const v16i m4 = _mm512_set1_epi8(0x0F);
    if (DT == DT_Q6_K) {
        /* elements 128 h + 32 m + l (m = 2k, 2k + 1): low nibbles ql[64 h +
         * 32 (m & 1) + l] >> 4k, top bits (qh[32 h + l] >> 2m) & 3 */
        const int h = c / 2, k = c % 2;
        v16i lo = _mm512_loadu_si512(p + 64 * h);
        if (k) lo = _mm512_srli_epi16(lo, 4);
        lo = _mm512_and_si512(lo, m4);
        const v16i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
        /* bits 2m, 2m + 1 of each byte to bits 4, 5 (16-bit shifts by at
         * most 4 left or 2 right bring no bit across bytes there) */
        const v16i hi = k ? _mm512_srlv_epi16(qh, halves16(0, 2)) : _mm512_sllv_epi16(qh, halves16(4, 2));
        return _mm512_ternarylogic_epi32(hi, _mm512_set1_epi8(0x30), lo, 0xEA);   /* (hi & 0x30) | lo */
    }
    /* Q4_K / Q5_K: sub-blocks 2c (low nibbles of qs[32c ..]) and 2c + 1 (high) */
    const uint8_t *qs = p + (DT == DT_Q5_K ? 48 : 16) + 32 * c;
    const v16i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qs));
    const v16i v = _mm512_and_si512(_mm512_srlv_epi16(q, halves16(0, 4)), m4);
    if (DT != DT_Q5_K) return v;
    /* bit g of qh[l] (g = 2c, 2c + 1) to bit 4 */
    const v16i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16)));
    const int g0 = 2 * c, g1 = 2 * c + 1;
    v16i b;
    if (g1 <= 4) b = _mm512_sllv_epi16(qh, halves16((short)(4 - g0), (short)(4 - g1)));
    else b = _mm512_srlv_epi16(qh, halves16((short)(g0 - 4), (short)(g1 - 4)));
    return _mm512_ternarylogic_epi32(b, _mm512_set1_epi8(0x10), v, 0xEA);
}

/* A super-block's scales as int16 words 0..7 (Q6_K: 0..15, signed) of sc,
 * Q4_K / Q5_K's minimums as the 8 words of mn, d and dmin. */
static inline void k_head(const uint8_t *p, const DType DT, v16i *sc, __m128i *mn, float *d, float *dm) {
    if (DT == DT_Q6_K) {
        *sc = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192))));
        *d = half_f(p + 208);
        return;
    }
    *d = half_f(p);
    *dm = half_f(p + 2);
    /* quant_k_scales' 6-bit fields, four bytes at a time */
    uint32_t u[3];
    memcpy(u, p + 4, 12);
    const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
    const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    *sc = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)s_hi << 32 | s_lo))));
    *mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)m_hi << 32 | m_lo)));
}

/* The int16 scale of each pair sum of chunk c. */
static inline v16i k_scale_at(v16i sc, const int c, const DType DT) {
    if (DT == DT_Q6_K) {   /* 128-bit lane L: sub-block of 16 number 4c + L */
        const short a = (short)(4 * c);
        const v16i idx = _mm512_setr_epi64(0x0001000100010001LL * a, 0x0001000100010001LL * a,
                                           0x0001000100010001LL * (a + 1), 0x0001000100010001LL * (a + 1),
                                           0x0001000100010001LL * (a + 2), 0x0001000100010001LL * (a + 2),
                                           0x0001000100010001LL * (a + 3), 0x0001000100010001LL * (a + 3));
        return _mm512_permutexvar_epi16(idx, sc);
    }
    return _mm512_permutexvar_epi16(halves16((short)(2 * c), (short)(2 * c + 1)), sc);
}

/* Sixteen vectors of 16 int32 to the vector of their 16 sums, in order. */
static inline v16i reduce16(const v16i *v) {
    v16i t[8], u[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        t[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)   /* per 128-bit lane: parts of v[4k .. 4k + 3] */
        u[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * k], t[2 * k + 1]), _mm512_unpackhi_epi64(t[2 * k], t[2 * k + 1]));
    const v16i w01 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const v16i w23 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Four vectors of 16 int32 to their 4 sums, in order. */
static inline __m128i reduce4(const v16i *v) {
    const v16i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
    const v16i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
    const v16i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* out[t][r] for rows r0 + i (i < R, rows past r1 repeating r1 - 1, not
 * stored) and tokens t0 + j (j < T): R x T is 4 x 1, 4 x 4 or 2 x 8. */
static inline __attribute__((always_inline)) void tilek512(const Weight *w, const Act *a, float *out, int64_t r0,
                                                           int64_t r1, int t0, const int R, const int T, const DType DT) {
    const size_t bb = quant_block_bytes(DT), rb = (size_t)w->cols / 256 * bb;
    const int P = R * T, n = a->n;
    const int has_m = DT != DT_Q6_K;
    const uint8_t *row[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) row[i] = (const uint8_t *)w->data + (r0 + i < r1 ? r0 + i : r1 - 1) * rb;
    __m512 acc16 = _mm512_setzero_ps();
    __m128 acc4 = _mm_setzero_ps();
    /* lane k of the 16-pair vectors: pair (k / T, k % T) */
    const v16i by_row16 = T == 4 ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
                                 : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int64_t b = 0; b < a->nb; b++) {
        v16i sc[4], ia[16];
        __m128i mn[4];
        float dw[4], dm[4];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) k_head(row[i] + b * bb, DT, &sc[i], &mn[i], &dw[i], &dm[i]);
#pragma GCC unroll 16
        for (int k = 0; k < P; k++) ia[k] = _mm512_setzero_si512();
        const int8_t *xb = a->q + (size_t)t0 * a->cols + b * 256;
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            v16i wq[4], sv[4];
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                wq[i] = unpack_k64(row[i] + b * bb, c, DT);
                sv[i] = k_scale_at(sc[i], c, DT);
            }
#pragma GCC unroll 8
            for (int j = 0; j < T; j++) {
                const v16i xq = _mm512_loadu_si512(xb + (size_t)j * a->cols + 64 * c);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) ia[i * T + j] = dot2_add(ia[i * T + j], _mm512_maddubs_epi16(wq[i], xq), sv[i]);
            }
        }
        if (DT == DT_Q6_K) {   /* -32 sc_h times the activations' sums of 16 */
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) sc[i] = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc[i], 5));
#pragma GCC unroll 8
            for (int j = 0; j < T; j++) {
                const v16i bs = _mm512_zextsi256_si512(
                    _mm256_loadu_si256((const __m256i *)(a->bs + ((size_t)(t0 + j) * a->nb + b) * 16)));
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) ia[i * T + j] = dot2_add(ia[i * T + j], sc[i], bs);
            }
        }
        const int16_t *xs = a->xs + ((size_t)b * n + t0) * 8;   /* sums of 32, token after token */
        const float *dx = a->d + (size_t)b * n + t0;
        if (P == 4) {   /* 4 rows x 1 token */
            const __m128i isum = reduce4(ia);
            const __m128 dxv = _mm_set1_ps(dx[0]);
            acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(_mm_loadu_ps(dw), dxv), acc4);
            if (has_m) {
                const __m128i x8 = _mm_loadu_si128((const __m128i *)xs);
                const __m128i m01 = _mm_hadd_epi32(_mm_madd_epi16(mn[0], x8), _mm_madd_epi16(mn[1], x8));
                const __m128i m23 = _mm_hadd_epi32(_mm_madd_epi16(mn[2], x8), _mm_madd_epi16(mn[3], x8));
                const __m128i msum = _mm_hadd_epi32(m01, m23);
                acc4 = _mm_fnmadd_ps(_mm_cvtepi32_ps(msum), _mm_mul_ps(_mm_loadu_ps(dm), dxv), acc4);
            }
        } else {
            const v16i isum = reduce16(ia);
            const __m512 dxv = T == 4 ? _mm512_broadcast_f32x4(_mm_loadu_ps(dx))
                                      : _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)dx)));
            const __m512 dwv = _mm512_permutexvar_ps(by_row16, _mm512_castps128_ps512(_mm_loadu_ps(dw)));
            acc16 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dwv, dxv), acc16);
            if (has_m) {
                /* vector v = i * T / 4 + q: row i times tokens 4q .. 4q + 3,
                 * 128-bit lane L token 4q + L, 4 parts each */
                v16i m[4];
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++) {
                    const int i = v * 4 / T, q = v % (T / 4);
                    m[v] = _mm512_madd_epi16(_mm512_broadcast_i32x4(mn[i]), _mm512_loadu_si512(xs + 32 * q));
                }
                const v16i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(m[0], m[1]), _mm512_unpackhi_epi32(m[0], m[1]));
                const v16i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(m[2], m[3]), _mm512_unpackhi_epi32(m[2], m[3]));
                const v16i e = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
                /* e's lane 4L + v is pair 4v + L */
                const v16i msum = _mm512_permutexvar_epi32(
                    _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
                const __m512 dmv = _mm512_permutexvar_ps(by_row16, _mm512_castps128_ps512(_mm_loadu_ps(dm)));
                acc16 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmv, dxv), acc16);
            }
        }
    }
    float res[16];
    if (P == 4) _mm_storeu_ps(res, acc4);
    else _mm512_storeu_ps(res, acc16);
#pragma GCC unroll 16
    for (int k = 0; k < P; k++)
        if (r0 + k / T < r1) out[(int64_t)(t0 + k % T) * w->rows + r0 + k / T] = res[k];
}

/* Rows [r0, r1) for tokens [t0, t0 + T) of a K type, R x T tiles. */
static inline __attribute__((always_inline)) void spank(const Weight *w, const Act *a, float *out, int64_t r0,
                                                        int64_t r1, int t0, const int R, const int T, const DType DT) {
    for (int64_t r = r0; r < r1; r += R) tilek512(w, a, out, r, r1, t0, R, T, DT);
}
#endif

#if QISA == 256
/* ---- the K types on AVX2: as the AVX-512 tiles above with 256-bit
 * vectors: chunk g is sub-block g of 32 (unpack_k), unpacked once and
 * applied to 4 x 1 or 2 x 4 (row, token) tiles by maddubs, then madd with
 * the int16 sub-block scale; Q6_K's offset term added into the same lanes,
 * Q4_K / Q5_K's minimum sums from the per-32 activation sums. */

/* A super-block's scales: Q4_K / Q5_K the 8 as int16 words of both 128-bit
 * lanes of *sc, the minimums as the 8 words of *mn; Q6_K the 16 int8 in
 * *sc8. */
static inline void k_head256(const uint8_t *p, const DType DT, v8i *sc, __m128i *sc8, __m128i *mn, float *d, float *dm) {
    if (DT == DT_Q6_K) {
        *sc8 = _mm_loadu_si128((const __m128i *)(p + 192));
        *sc = _mm256_cvtepi8_epi16(*sc8);
        *d = half_f(p + 208);
        return;
    }
    *d = half_f(p);
    *dm = half_f(p + 2);
    uint32_t u[3];
    memcpy(u, p + 4, 12);
    const uint32_t s_lo = u[0] & 0x3F3F3F3Fu, m_lo = u[1] & 0x3F3F3F3Fu;
    const uint32_t s_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    *sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)s_hi << 32 | s_lo))));
    *mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)((uint64_t)m_hi << 32 | m_lo)));
}

/* The int16 scale of each pair sum of chunk g. */
static inline v8i k_scale256(v8i sc, __m128i sc8, const int g, const DType DT) {
    if (DT == DT_Q6_K)   /* 128-bit lane L: sub-block of 16 number 2g + L */
        return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_setr_epi8((char)(2 * g), (char)(2 * g), (char)(2 * g),
            (char)(2 * g), (char)(2 * g), (char)(2 * g), (char)(2 * g), (char)(2 * g), (char)(2 * g + 1), (char)(2 * g + 1),
            (char)(2 * g + 1), (char)(2 * g + 1), (char)(2 * g + 1), (char)(2 * g + 1), (char)(2 * g + 1), (char)(2 * g + 1))));
    return _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(0x0100 * (2 * g + 1) + 2 * g)));
}

static inline __attribute__((always_inline)) void tilek256(const Weight *w, const Act *a, float *out, int64_t r0,
                                                           int64_t r1, int t0, const int R, const int T, const DType DT) {
    const size_t bb = quant_block_bytes(DT), rb = (size_t)w->cols / 256 * bb;
    const int P = R * T, n = a->n;
    const int has_m = DT != DT_Q6_K;
    const uint8_t *row[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) row[i] = (const uint8_t *)w->data + (r0 + i < r1 ? r0 + i : r1 - 1) * rb;
    __m256 acc8 = _mm256_setzero_ps();
    __m128 acc4 = _mm_setzero_ps();
    for (int64_t b = 0; b < a->nb; b++) {
        v8i sc[4], ia[8];
        __m128i sc8[4], mn[4];
        float dw[4], dm[4];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) k_head256(row[i] + b * bb, DT, &sc[i], &sc8[i], &mn[i], &dw[i], &dm[i]);
#pragma GCC unroll 8
        for (int k = 0; k < P; k++) ia[k] = _mm256_setzero_si256();
        const int8_t *xb = a->q + (size_t)t0 * a->cols + b * 256;
        for (int g = 0; g < 8; g++) {
            v8i wq[4], sv[4];
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                wq[i] = unpack_k(row[i] + b * bb, g, DT);
                sv[i] = k_scale256(sc[i], sc8[i], g, DT);
            }
#pragma GCC unroll 4
            for (int j = 0; j < T; j++) {
                const v8i xq = _mm256_loadu_si256((const v8i *)(xb + (size_t)j * a->cols + 32 * g));
#pragma GCC unroll 4
                for (int i = 0; i < R; i++)
                    ia[i * T + j] = _mm256_add_epi32(ia[i * T + j], _mm256_madd_epi16(_mm256_maddubs_epi16(wq[i], xq), sv[i]));
            }
        }
        if (DT == DT_Q6_K) {   /* -32 sc_h times the activations' sums of 16 */
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) sc[i] = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc[i], 5));
#pragma GCC unroll 4
            for (int j = 0; j < T; j++) {
                const v8i bs = _mm256_loadu_si256((const v8i *)(a->bs + ((size_t)(t0 + j) * a->nb + b) * 16));
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) ia[i * T + j] = _mm256_add_epi32(ia[i * T + j], _mm256_madd_epi16(sc[i], bs));
            }
        }
        const int16_t *xs = a->xs + ((size_t)b * n + t0) * 8;
        const float *dx = a->d + (size_t)b * n + t0;
        if (P == 4) {   /* 4 rows x 1 token */
            const v8i h = _mm256_hadd_epi32(_mm256_hadd_epi32(ia[0], ia[1]), _mm256_hadd_epi32(ia[2], ia[3]));
            const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            const __m128 dxv = _mm_set1_ps(dx[0]);
            acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(_mm_loadu_ps(dw), dxv), acc4);
            if (has_m) {
                const __m128i x8 = _mm_loadu_si128((const __m128i *)xs);
                const __m128i m01 = _mm_hadd_epi32(_mm_madd_epi16(mn[0], x8), _mm_madd_epi16(mn[1], x8));
                const __m128i m23 = _mm_hadd_epi32(_mm_madd_epi16(mn[2], x8), _mm_madd_epi16(mn[3], x8));
                acc4 = _mm_fnmadd_ps(_mm_cvtepi32_ps(_mm_hadd_epi32(m01, m23)), _mm_mul_ps(_mm_loadu_ps(dm), dxv), acc4);
            }
        } else {   /* 2 rows x 4 tokens */
            const v8i isum = reduce8(ia);
            const __m256 dxv = by_token(dx, T);
            acc8 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(by_row(dw, T), dxv), acc8);
            if (has_m) {
                /* vector v = 2i + h: row i times tokens 2h, 2h + 1 (128-bit lane L token 2h + L) */
                v8i m[4];
#pragma GCC unroll 4
                for (int v = 0; v < 4; v++)
                    m[v] = _mm256_madd_epi16(_mm256_broadcastsi128_si256(mn[v / 2]), _mm256_loadu_si256((const v8i *)(xs + 16 * (v % 2))));
                const v8i e = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
                /* e's lane 4L + v is pair 2v + L */
                const v8i msum = _mm256_permutevar8x32_epi32(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                acc8 = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(by_row(dm, T), dxv), acc8);
            }
        }
    }
    float res[8];
    if (P == 4) _mm_storeu_ps(res, acc4);
    else _mm256_storeu_ps(res, acc8);
#pragma GCC unroll 8
    for (int k = 0; k < P; k++)
        if (r0 + k / T < r1) out[(int64_t)(t0 + k % T) * w->rows + r0 + k / T] = res[k];
}

static inline __attribute__((always_inline)) void spank(const Weight *w, const Act *a, float *out, int64_t r0,
                                                        int64_t r1, int t0, const int R, const int T, const DType DT) {
    for (int64_t r = r0; r < r1; r += R) tilek256(w, a, out, r, r1, t0, R, T, DT);
}
#endif

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
        if (DT == DT_Q4_K || DT == DT_Q5_K || DT == DT_Q6_K) {
#if QISA == 512
            for (; t + 8 <= a->n; t += 8) spank(w, a, out, b0, b1, t, 2, 8, DT);
            for (; t + 4 <= a->n; t += 4) spank(w, a, out, b0, b1, t, 4, 4, DT);
#else
            for (; t + 4 <= a->n; t += 4) spank(w, a, out, b0, b1, t, 2, 4, DT);
#endif
            for (; t < a->n; t++) spank(w, a, out, b0, b1, t, 4, 1, DT);
            continue;
        }
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
    case DT_Q4_K: rows_typed(w, a, out, r0, r1, DT_Q4_K); break;
    case DT_Q5_K: rows_typed(w, a, out, r0, r1, DT_Q5_K); break;
    case DT_Q6_K: rows_typed(w, a, out, r0, r1, DT_Q6_K); break;
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

void cpu_quant_row(const Weight *w, int64_t r, float *out) {
    const int64_t rb = quant_row_bytes(w->dtype, w->cols);
    quant_dequant_row(w->dtype, (const uint8_t *)w->data + r * rb, out, w->cols);
}
