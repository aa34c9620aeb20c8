/* Products of weights kept in GGUF's block types (kernels/base/quant.h),
 * never widened to F32: llama.cpp's way, each token's activations are
 * quantised once per product to 8-bit blocks (quant_q8_row: blocks of 32
 * for the 32-element types, of 256 with sums per 16 for the K types) and
 * each weight block times activation block is an integer dot product.
 *
 * The sum of one (row, token), the contract every path keeps: for each
 * weight block b in order, the block's integer sum isum_b is exact (int32;
 * how it is added up cannot matter), then one float chain
 *   Q8_0, Q4_0, Q5_0:  acc = fma((float)isum_b, dw_b * dx_b, acc)
 *   Q4_1, Q5_1:        that, then acc = fma(mw_b, dx_b * sx_b, acc)
 *   Q4_K, Q5_K, Q2_K:  acc = fma((float)isum_b, d_b * dx_b, acc), then
 *                      acc = fma(-(float)msum_b, dmin_b * dx_b, acc)
 *   Q6_K, Q3_K, IQ4_XS: acc = fma((float)isum_b, d_b * dx_b, acc)
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
 * The vector builds read every block type from a copy made by a matrix's
 * first product (cpu_quant_make_pack), rows interleaved in groups so
 * that a vector lane is a row (the section "vector products on the
 * repacked copy" below has the layout): a dot of one row group's weight
 * bytes with 4 activation bytes broadcast adds into each row's own lane,
 * so no sum ever crosses lanes (horizontal sums, for few rows and many
 * tokens as much work as the dots themselves, are not needed), and the
 * float chain runs a group's rows per instruction.  Tiles are one row
 * group by up to KT_MAX tokens: each block of the group is unpacked once
 * per tile and serves its tokens.  The instruction set is chosen when
 * building, as the rest of kernels/cpu: AVX-512 (BW and VL; VNNI's dpbusd
 * where the build has it) takes 16-row groups, AVX2 8-row groups with
 * maddubs/madd (AVX-VNNI's dpbusd where the build has it); anything else
 * the scalar loop on the blocks as stored, with no copy.  Where the CPU
 * also has AMX-INT8, Q4_K, Q5_K and Q6_K products of several tokens take
 * the tile multiply instead, with the same sums (the section "the tile
 * multiply" below). */
#include "kernels/cpu/cpu.h"
#include "kernels/base/quant.h"
#include "kernels/base/quant_dot.h"
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
/* VNNI's dpbusd (int32 sums of 4 unsigned-times-signed byte products) on
 * the vectors of the build: AVX512-VNNI on 512-bit vectors; AVX-VNNI on
 * 256-bit ones, which CPUs without AVX-512 have (Intel's since Alder
 * Lake): where it is there, the AVX2 build's dots and K tiles use it
 * instead of maddubs and madd, the same exact integer sums. */
#if (QISA == 512 && defined(__AVX512VNNI__)) || (QISA == 256 && defined(__AVXVNNI__))
#define QVNNI 1
#else
#define QVNNI 0
#endif

/* Rows per block of the token-group loop (as matmul.c's ROW_BLOCK): the
 * block's weights stay in L2 while the token groups pass over it. */
#define QROW_BLOCK 64

/* One product's activations as 8-bit blocks: q[n][cols]; per block b and
 * token t (block-major, so a tile's tokens are adjacent) the scale d, and
 * for the 32-element blocks the integer sum s, d * s and -off * s for each
 * offset a type's unsigned integers carry (s_off[OFF32_SLOTS][nb][n], so a
 * tile's lanes start from one broadcast load, not a multiply and a move
 * per token and block); for the K blocks the sums per 16, token-major
 * [n][nb][16], and their sums per 32, block-major [nb][n][8]. */
typedef struct {
    int n, block;
    int64_t cols, nb;
    int8_t *q;
    float *d, *sd;
    int32_t *s, *s_off;
    int16_t *bs, *xs;
    size_t cap_q, cap_b;
    float *tmp_d;
    int16_t *tmp_s;
} Act;

/* The offsets of the 32-element types' unsigned integers (Q4_0 8, Q5_0 16,
 * Q8_0 128 where VNNI sums it as unsigned: Q8_OFF below), each a slot of
 * Act.s_off; Q4_1 and Q5_1 carry none. */
#define OFF32_SLOTS 3
static const int OFF32[OFF32_SLOTS] = {8, 16, 128};

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
        a->s_off = xrealloc(a->s_off, sizeof(int32_t) * nbl * OFF32_SLOTS);
        a->tmp_d = xrealloc(a->tmp_d, sizeof(float) * nbl);
        a->tmp_s = xrealloc(a->tmp_s, sizeof(int16_t) * nbl * 16);
        a->xs = xrealloc(a->xs, sizeof(int16_t) * nbl * 8);
        a->cap_b = nbl;
    }
    a->n = n; a->cols = cols; a->nb = nb; a->block = block;
}

#ifdef __AVX2__
/* quant_q8_row (kernels/base/quant.c) eight lanes at a time, the same bits:
 * the block's largest |x| is exact in any order once every element is
 * finite (else the block is bad whatever the maximum), and each integer is
 * rintf's round to nearest even of the same product, clamped as there.  As
 * a scalar loop it took about 7% of a 16-token forward of the Qwen 1.5B
 * Q4_K_M (AVX-512 build). */
static void q8_row_vec(const float *x, int64_t n, int block, int8_t *q, float *d, int16_t *sums) {
    const int group = block == 256 ? 16 : 32;
    const __m256 sign = _mm256_set1_ps(-0.0f), largest = _mm256_set1_ps(3.402823466e38f);
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);   /* the packs' lanes back in order */
    for (int64_t b = 0; b < n / block; b++) {
        const float *xb = x + b * block;
        int8_t *qb = q + b * block;
        int16_t *sb = sums + b * (block / group);
        __m256 mx = _mm256_setzero_ps(), finite = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int j = 0; j < block; j += 8) {
            const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j));
            finite = _mm256_and_ps(finite, _mm256_cmp_ps(a, largest, _CMP_LE_OQ));
            mx = _mm256_max_ps(mx, a);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        float id;
        const int zero = qd_q8_scale(_mm_cvtss_f32(m4), _mm256_movemask_ps(finite) != 0xFF, block, &d[b], &id);
        if (zero) {
            memset(qb, 0, (size_t)block);
            memset(sb, 0, sizeof(int16_t) * (size_t)(block / group));
            continue;
        }
        const __m256 vid = _mm256_set1_ps(id);
        for (int j = 0; j < block; j += 32) {
            __m256i v[4];
            for (int k = 0; k < 4; k++) {
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + j + 8 * k), vid),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
            }
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
            _mm256_storeu_si256((__m256i *)(qb + j), _mm256_permutevar8x32_epi32(p, order));
            for (int g = 0; g < 32 / group; g++) {   /* the sums of 16 or 32 integers */
                __m256i t = group == 32 ? _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]))
                                        : _mm256_add_epi32(v[2 * g], v[2 * g + 1]);
                __m128i h = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
                h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
                h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
                sb[j / group + g] = (int16_t)_mm_cvtsi128_si32(h);
            }
        }
    }
}
#endif

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
#ifdef __AVX2__
        q8_row_vec(j->x + t * cols, cols, block, a->q + t * cols, dt, sums);
#else
        quant_q8_row(j->x + t * cols, cols, block, a->q + t * cols, dt, sums);
#endif
        for (int64_t b = 0; b < nb; b++) {
            a->d[b * n + t] = dt[b];
            if (block == 32) {
                a->s[b * n + t] = sums[b];
                a->sd[b * n + t] = dt[b] * (float)sums[b];
                for (int k = 0; k < OFF32_SLOTS; k++) a->s_off[((size_t)k * nb + b) * n + t] = -OFF32[k] * sums[b];
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
static int k_min(DType dt) { return dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q2_K; }

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
/* ---- vector products on the repacked copy
 *
 * cpu_quant_make_pack copies a matrix of any of the block types once, at
 * its first product, into groups of KG rows (16 on AVX-512, 8 on AVX2; the
 * last group padded with zero rows, whose lanes are never stored) so that
 * a vector lane is a row: 4 bytes of each of the KG rows make one vector,
 * and one dot of unsigned weight bytes with 4 activation bytes broadcast
 * to every lane adds 4 products to each row's int32 lane, with no
 * reduction across lanes.  Per group and block (kp_block bytes, the blocks
 * of a group in order, the groups in order), a head of scales, then the
 * integers 32 elements e0 + 0..31 at a time (kp_g bytes each: 8 of them in
 * a K super-block, 1 in a 32-element block), 8 vectors v = 0..7 of KG x 4
 * bytes, vector v holding elements e0 + 4v + m (m = 0..3) of every row:
 *   4-bit integers (Q4_0, Q4_1, Q4_K) and the low nibbles of the others:
 *     4 chunks of KG x 4 bytes, chunk c row i byte m = q[e0 + 8c + m] |
 *     q[e0 + 8c + 4 + m] << 4, so vector v = 2c + h is chunk c's low (h 0)
 *     or high (h 1) nibbles;
 *   5-bit (Q5_0, Q5_1, Q5_K): then one KG x 4 plane with the fifth bit of
 *     vector v's byte at bit v;
 *   Q6_K: then two planes with its top two bits at bits 2u, 2u + 1 of
 *     plane v / 4 (u = v % 4);
 *   2-bit integers (Q2_K) instead: 2 chunks of KG x 4 bytes, chunk c row
 *     i byte m holding q[e0 + 16c + 4u + m] at bits 2u (u = 0..3), so
 *     vector v = 4c + u is chunk c's bits 2u;
 *   3-bit (Q3_K): those of its low two bits, then one KG x 4 plane with
 *     the third bit of vector v's byte at bit v;
 *   Q8_0: the 8 vectors' bytes themselves, q + Q8_OFF;
 *   IQ4_NL: its nibbles as Q4_0's, each vector's made its grid integers
 *     plus Q8_OFF (IQ4NL_LUT) as it is read; IQ4_XS likewise, each of its
 *     eight sub-blocks' nibbles as one IQ4_NL block's.
 * (q_bits below: the bits a copy's integer takes.)
 * Heads: Q8_0, Q4_0, Q5_0, IQ4_NL: d[KG] (the halves as stored); Q4_1, Q5_1:
 *   d[KG], m[KG]; Q4_K, Q5_K: d[KG], dmin[KG], sc[8][KG] and mn[4][KG][2]
 *   (the 6-bit scales and minimums as bytes, the minimums in pairs of
 *   sub-blocks); Q6_K: d[KG], sc[8][KG][2] (the int8 scales in pairs of
 *   sub-blocks); IQ4_XS: d[KG], sc[4][KG][2] (its signed ls - 32 as int8,
 *   in pairs of sub-blocks); Q2_K: d[KG], dmin[KG], sm[8][KG][2] (its
 *   bytes of a 4-bit scale and minimum as stored, in pairs of sub-blocks
 *   of 16 as Q6_K's scales: the copy has the stored bytes); Q3_K: d[KG],
 *   sc[8][KG][2] (its signed sc - 32 as int8, pairs as Q6_K's).  A
 *   32-element type's copy has the bytes it has as stored (and the
 *   padding rows').
 * K types: per sub-block the int32 lanes hold sum q * x exactly; times the
 * row lanes' scales (VNNI: vpmulld of the dpbusd sums; else the int16
 * maddubs sums, at most 32004 where added, by madd with the scale in both
 * halves) and added, that is the block's isum of the contract; Q6_K's -32
 * (Q3_K's -4) sc_j times the activations' sums of 16 and Q4_K / Q5_K's (Q2_K's: over
 * its sub-blocks of 16) minimum sums
 * come from madd of the scale or minimum pairs with the pairs of
 * activation sums, as does IQ4_XS's -Q8_OFF sc_j times the activations'
 * sums of 32 (its grid integers are signed: without VNNI each vector's
 * maddubs takes |q| and x with q's sign, as Q8_0's, and its pair sums go
 * straight to madd with the scale).  32-element types: the lanes start at -off * sx (Q4_0
 * 8, Q5_0 16, Q8_0 Q8_OFF; sx the activation block's integer sum) and add
 * the 8 dots, which is isum exactly.  Then the float chain per lane, as
 * the contract says. */

/* Q8_0's int8 made unsigned for the dot (q + 128, its sum corrected by
 * 128 * sx) where VNNI sums in int32; maddubs would saturate at 2 * 255 *
 * 127, so there the copy keeps the int8 and the sign moves to x instead
 * (|q| <= 128 times |x| <= 127, 2 a pair: fits int16). */
#if QVNNI
#define Q8_OFF 128
#else
#define Q8_OFF 0
#endif
/* IQ4_NL's copy keeps its nibbles (4 bits a weight, as Q4_0's); a vector's
 * nibbles become its grid integers through this table, plus Q8_OFF as
 * Q8_0's, and from there it is summed as Q8_0 is (the table is qd_iq4nl's,
 * tests/test_quant.c holds the two equal through the products). */
#define IQ4(k) (uint8_t)((k) + Q8_OFF)
static const uint8_t IQ4NL_LUT[16] = {IQ4(-127), IQ4(-104), IQ4(-83), IQ4(-65), IQ4(-49), IQ4(-35), IQ4(-22), IQ4(-10),
                                      IQ4(1),    IQ4(13),   IQ4(25),  IQ4(38),  IQ4(53),  IQ4(69),  IQ4(89),  IQ4(113)};
#undef IQ4
/* Tokens a tile serves, the same on every instruction set.  8 a pass beat
 * the 4 (AVX2) and 6 (AVX-512 without VNNI) they took before, each weight
 * vector's unpacking serving more tokens (on AVX2 the K tiles then hold 4
 * weight vectors at a time: K_PASS_VECTORS below).  Measured on a
 * Xeon, 8960 x 1536: AVX2 build, Q4_K / Q6_K at 16 tokens 10-17% faster
 * than 4 a pass, Q4_0 / Q8_0 the same; without VNNI, 8 tokens 10-20%
 * faster than 6 a pass, 16 up to 9%; 12 or 16 a pass no faster anywhere,
 * VNNI included. */
#define KT_MAX 8
/* Without VNNI (maddubs, madd): the weight vectors of a 32-element run
 * that one pass over the tile's tokens holds in registers.  AVX-512's 32
 * registers hold all 8 beside the 8 tokens' sums; with AVX2's 16 they
 * spilled, and two passes of 4 took Q4_K and Q6_K products of 4, 8 and 16
 * tokens 3-12% less time on a Xeon (medians of 5 alternating rounds). */
#define K_PASS_VECTORS (QISA == 512 ? 8 : 4)
#if QISA == 512
#define KG 16
typedef __m512i kv;
typedef __m512 kf;
static inline kv kv_load(const void *p) { return _mm512_loadu_si512(p); }
static inline kv kv_b32(const void *p) { int32_t v; memcpy(&v, p, 4); return _mm512_set1_epi32(v); }
static inline kv kv_zero(void) { return _mm512_setzero_si512(); }
static inline kv kv_and8(kv a, int m) { return _mm512_and_si512(a, _mm512_set1_epi8((char)m)); }
static inline kv kv_and16(kv a, int m) { return _mm512_and_si512(a, _mm512_set1_epi16((short)m)); }
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
#if QVNNI
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
static inline kv kv_odd16(kv lo, kv hi) { return _mm512_mask_blend_epi16(0xAAAAAAAAu, lo, hi); }
static inline kv kv_set16(int x) { return _mm512_set1_epi16((short)x); }
static inline kv kv_set32(int x) { return _mm512_set1_epi32(x); }
static inline kv kv_abs8(kv a) { return _mm512_abs_epi8(a); }
/* each byte i (< 16) of a as byte i of the 16-byte table t (in every lane) */
static inline kv kv_lut16(const uint8_t *t, kv a) { return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t)), a); }
/* x times the sign of w where w is not 0 (where it is: anything, |w| is 0) */
static inline kv kv_sign8(kv x, kv w) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x); }
#if QVNNI
static inline kv kv_dpbusd(kv acc, kv u, kv s) { return _mm512_dpbusd_epi32(acc, u, s); }
#endif
static inline kv kv_u8_32(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline kv kv_u8_16(const uint8_t *p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
static inline kv kv_s8_16(const uint8_t *p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
static inline kf kf_half(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline kf kf_zero(void) { return _mm512_setzero_ps(); }
static inline kf kf_mul(kf a, kf b) { return _mm512_mul_ps(a, b); }
static inline kf kf_set1(float x) { return _mm512_set1_ps(x); }
static inline kf kf_fma(kf a, kf b, kf c) { return _mm512_fmadd_ps(a, b, c); }
static inline kf kf_fmadd(kv i, kf s, kf acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
static inline kf kf_fnmadd(kv i, kf s, kf acc) { return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(i), s, acc); }
/* lanes [lo, hi) of v to p */
static inline void kf_store(float *p, kf v, int lo, int hi) {
    _mm512_mask_storeu_ps(p, (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)), v);
}
#else
#define KG 8
typedef __m256i kv;
typedef __m256 kf;
static inline kv kv_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline kv kv_b32(const void *p) { int32_t v; memcpy(&v, p, 4); return _mm256_set1_epi32(v); }
static inline kv kv_zero(void) { return _mm256_setzero_si256(); }
static inline kv kv_and8(kv a, int m) { return _mm256_and_si256(a, _mm256_set1_epi8((char)m)); }
static inline kv kv_and16(kv a, int m) { return _mm256_and_si256(a, _mm256_set1_epi16((short)m)); }
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
static inline kv kv_madd_add(kv acc, kv a, kv b) {
#if QVNNI
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}
#if QVNNI
static inline kv kv_dpbusd(kv acc, kv u, kv s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#endif
static inline kv kv_odd16(kv lo, kv hi) { return _mm256_blend_epi16(lo, hi, 0xAA); }
static inline kv kv_set16(int x) { return _mm256_set1_epi16((short)x); }
static inline kv kv_set32(int x) { return _mm256_set1_epi32(x); }
static inline kv kv_abs8(kv a) { return _mm256_abs_epi8(a); }
static inline kv kv_lut16(const uint8_t *t, kv a) { return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t)), a); }
static inline kv kv_sign8(kv x, kv w) { return _mm256_sign_epi8(x, w); }
static inline kv kv_u8_32(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline kv kv_u8_16(const uint8_t *p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline kv kv_s8_16(const uint8_t *p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)); }
static inline kf kf_half(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline kf kf_zero(void) { return _mm256_setzero_ps(); }
static inline kf kf_mul(kf a, kf b) { return _mm256_mul_ps(a, b); }
static inline kf kf_set1(float x) { return _mm256_set1_ps(x); }
static inline kf kf_fma(kf a, kf b, kf c) { return _mm256_fmadd_ps(a, b, c); }
static inline kf kf_fmadd(kv i, kf s, kf acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), s, acc); }
static inline kf kf_fnmadd(kv i, kf s, kf acc) { return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(i), s, acc); }
static inline void kf_store(float *p, kf v, int lo, int hi) {
    const __m256i k = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), k),
                                       _mm256_cmpgt_epi32(k, _mm256_set1_epi32(lo - 1)));
    _mm256_maskstore_ps(p, m, v);
}
#endif

static inline int is_k(const DType DT) {
    return DT == DT_Q4_K || DT == DT_Q5_K || DT == DT_Q6_K || DT == DT_IQ4_XS || DT == DT_Q2_K || DT == DT_Q3_K;
}
/* K types of two sub-blocks of 16 in each 32-element run, vectors 0-3 and 4-7 */
static inline int k_sub16(const DType DT) { return DT == DT_Q6_K || DT == DT_Q2_K || DT == DT_Q3_K; }
/* where a head's scale pairs start (Q6_K, IQ4_XS: int8; Q2_K: a scale and a minimum in a byte) */
static inline size_t k_pairs_at(const DType DT) { return (size_t)KG * (DT == DT_Q2_K ? 4 : 2); }
/* maddubs results (pair sums) a K tile adds in int16 before one madd with
 * the sub-block's scale: at most 16 products of q <= 15, 8 of q <= 31 or 4
 * of q <= 63, times |x| <= 127: <= 32004 (Q6_K's vectors 0-3 and 4-7 are
 * two sub-blocks of 16, each with its own scale; Q2_K's and Q3_K's
 * likewise, the 4 vectors of a sub-block of 16 at most 8 products of q <=
 * 3 or 7); IQ4_XS's pair sums of |q| <= 127 times |x| go
 * to madd alone */
static inline int k_int16_group(const DType DT) {
    return DT == DT_Q4_K ? 8 : DT == DT_Q5_K || DT == DT_Q2_K || DT == DT_Q3_K ? 4 : DT == DT_IQ4_XS ? 1 : 2;
}
static inline int has_min32(const DType DT) { return DT == DT_Q4_1 || DT == DT_Q5_1; }
/* bits of an integer as the copy keeps it: 2, 3, 4, 5, 6 or 8 (IQ4_NL, IQ4_XS: its 4-bit index) */
static inline int is_iq4(const DType DT) { return DT == DT_IQ4_NL || DT == DT_IQ4_XS; }
static inline int q_bits(const DType DT) {
    return DT == DT_Q4_0 || DT == DT_Q4_1 || DT == DT_Q4_K || is_iq4(DT) ? 4 : DT == DT_Q5_0 || DT == DT_Q5_1 || DT == DT_Q5_K ? 5
         : DT == DT_Q6_K ? 6 : DT == DT_Q2_K ? 2 : DT == DT_Q3_K ? 3 : 8;
}

/* bytes of a group's block: its head (scales), then per 32 elements */
static inline size_t kp_head(const DType DT) {
    return (size_t)KG * (DT == DT_Q6_K || DT == DT_Q3_K ? 18 : DT == DT_IQ4_XS ? 10 : is_k(DT) ? 20 : has_min32(DT) ? 4 : 2);
}
static inline size_t kp_g(const DType DT) {
    return (size_t)KG * (size_t)(q_bits(DT) == 8 ? 32 : 16 + 4 * (q_bits(DT) - 4));
}
static inline size_t kp_block(const DType DT) { return kp_head(DT) + (is_k(DT) ? 8 : 1) * kp_g(DT); }

/* A group's 32 elements of row i, as the kpack_* functions below write them
 * straight from the block bytes (each byte of row i written once): vector
 * v (elements 4v .. 4v + 3) in the low (v even) or high nibble of pair
 * v / 2's bytes, o[(v / 2 * KG + i) * 4 + m] for element 4v + m; a 5-bit
 * type's fifth bits at bit v of plane byte o[16 KG + 4i + m]; a 6-bit
 * type's top two at bits 2(v % 4) of o[16 KG + (v / 4) 4 KG + 4i + m];
 * an 8-bit type's integers plus Q8_OFF whole, o[(v KG + i) * 4 + m]. */

/* Q4_K's 256 nibbles (sub-block g in nibble g % 2 of the 32 bytes at
 * qs + 32 (g / 2)) straight into row i's bytes of the eight groups. */
static void kpack_q4k(uint8_t *body, size_t gb, const uint8_t *qs, int i) {
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = qs + 32 * (g / 2);
        uint8_t *o = body + g * gb;
        for (int c = 0; c < 4; c++)
            for (int m = 0; m < 4; m++) {
                const uint8_t lo = q[8 * c + m], hi = q[8 * c + 4 + m];
                o[(c * KG + i) * 4 + m] = g % 2 ? (uint8_t)(lo >> 4 | (hi & 0xF0)) : (uint8_t)((lo & 15) | hi << 4);
            }
    }
}

/* Multipliers that gather fields spread one per byte into one byte: the
 * low bit of each of 8 bytes (x & 0x01..01) times PACK1, shifted right by
 * 56, holds byte v's bit at bit v; the low two bits of each of 4 bytes
 * (x & 0x03030303) times PACK2, shifted right by 18, byte u's at bits 2u
 * (no sum of the products carries into those bits). */
#define PACK1 0x0102040810204080ULL
#define PACK2 0x41041u

/* Q6_K's 256 integers straight into row i's bytes of the eight groups:
 * group g = 4h + k
 * takes its low nibbles from nibble k / 2 of the 32 bytes at ql = s + 64h
 * + 32 (k % 2) and its top two bits from bits 2k of qh = s + 128 + 32h. */
static void kpack_q6k(uint8_t *body, size_t gb, const uint8_t *s, int i) {
    for (int g = 0; g < 8; g++) {
        const int h = g / 4, k = g % 4, sh = 4 * (k / 2);
        const uint8_t *ql = s + 64 * h + 32 * (k % 2), *qh = s + 128 + 32 * h;
        uint8_t *o = body + g * gb;
        for (int c = 0; c < 4; c++)
            for (int m = 0; m < 4; m++)
                o[(c * KG + i) * 4 + m] = (uint8_t)((ql[8 * c + m] >> sh & 15) | (ql[8 * c + 4 + m] >> sh & 15) << 4);
        for (int p = 0; p < 2; p++)
            for (int m = 0; m < 4; m++) {   /* bits 2k, 2k + 1 of 4 bytes at stride 4, gathered by PACK2 */
                const uint32_t x = (uint32_t)qh[16 * p + m] | (uint32_t)qh[16 * p + 4 + m] << 8 |
                                   (uint32_t)qh[16 * p + 8 + m] << 16 | (uint32_t)qh[16 * p + 12 + m] << 24;
                o[16 * KG + p * 4 * KG + i * 4 + m] = (uint8_t)(((x >> (2 * k) & 0x03030303u) * PACK2) >> 18);
            }
    }
}

/* Q2_K's (and Q3_K's low two bits of its) 256 integers (run g at bits 2
 * (g % 4) of the 32 bytes at qs + 32 (g / 4)) straight into row i's bytes
 * of the eight groups; Q3_K's third bit (run g's element l at bit g of
 * hmask[l]) into the plane at bit v. */
static void kpack_q2k(uint8_t *body, size_t gb, const uint8_t *qs, const uint8_t *hmask, int i) {
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = qs + 32 * (g / 4);
        uint8_t *o = body + g * gb;
        for (int c = 0; c < 2; c++)
            for (int m = 0; m < 4; m++) {
                unsigned b = 0;
                for (int u = 0; u < 4; u++) b |= (unsigned)(q[16 * c + 4 * u + m] >> 2 * (g % 4) & 3) << 2 * u;
                o[(c * KG + i) * 4 + m] = (uint8_t)b;
            }
        for (int m = 0; hmask && m < 4; m++) {
            unsigned b = 0;
            for (int v = 0; v < 8; v++) b |= (unsigned)(hmask[4 * v + m] >> g & 1) << v;
            o[8 * KG + i * 4 + m] = (uint8_t)b;
        }
    }
}

/* A 32-element 4-bit block's nibbles (Q4_0, Q4_1: element e < 16 in the
 * low nibble of qs[e], e >= 16 in the high nibble of qs[e - 16]) straight
 * into row i's bytes. */
static void kpack_nib32(uint8_t *o, const uint8_t *qs, int i) {
    for (int c = 0; c < 4; c++)
        for (int m = 0; m < 4; m++) {
            const uint8_t lo = qs[8 * (c % 2) + m], hi = qs[8 * (c % 2) + 4 + m];
            o[(c * KG + i) * 4 + m] = c < 2 ? (uint8_t)((lo & 15) | hi << 4) : (uint8_t)(lo >> 4 | (hi & 0xF0));
        }
}

/* Q5_K's 256 integers: the nibbles at s + 48 as Q4_K's, the fifth bit of
 * group g's element l at bit g of qh[l] (qh = s + 16), into row i's plane
 * byte of each group. */
static void kpack_q5k(uint8_t *body, size_t gb, const uint8_t *s, int i) {
    kpack_q4k(body, gb, s + 48, i);
    const uint8_t *qh = s + 16;
    for (int m = 0; m < 4; m++) {   /* qh[m], qh[4 + m], ..., qh[28 + m]: bit g of each, gathered by PACK1 */
        uint64_t x = 0;
        for (int v = 0; v < 8; v++) x |= (uint64_t)qh[4 * v + m] << (8 * v);
        for (int g = 0; g < 8; g++)
            body[g * gb + 16 * KG + i * 4 + m] = (uint8_t)(((x >> g & 0x0101010101010101ULL) * PACK1) >> 56);
    }
}

/* A 32-element 5-bit block (Q5_0, Q5_1): its nibbles at qs as
 * kpack_nib32's, the fifth bit of element e at bit e of the little-endian
 * word at qh, into row i's plane byte. */
static void kpack_5bit32(uint8_t *o, const uint8_t *qh4, const uint8_t *qs, int i) {
    kpack_nib32(o, qs, i);
    const uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    for (int m = 0; m < 4; m++) {
        unsigned b = 0;
        for (int v = 0; v < 8; v++) b |= (qh >> (4 * v + m) & 1) << v;
        o[16 * KG + i * 4 + m] = (uint8_t)b;
    }
}

/* Q8_0's 32 int8 at qs into row i's bytes, offset by Q8_OFF. */
static void kpack_q8_0(uint8_t *o, const uint8_t *qs, int i) {
    for (int v = 0; v < 8; v++)
        for (int m = 0; m < 4; m++) o[(v * KG + i) * 4 + m] = (uint8_t)((int8_t)qs[4 * v + m] + Q8_OFF);
}

/* One group's block b from the stored rows (n of them, at most KG; every
 * byte of a row is written, those of rows past n are zero): the scales
 * into the head, the integers moved as stored (the kpack_* above). */
static void kpack_block(DType dt, const uint8_t *src, size_t rb, int n, int64_t b, uint8_t *p) {
    const size_t bb = quant_block_bytes(dt);
    if (n < KG) memset(p, 0, kp_block(dt));
    uint8_t *hd = p, *body = p + kp_head(dt);
    const size_t gb = kp_g(dt);
    int sc[8], mn[8];
    for (int i = 0; i < n; i++) {
        const uint8_t *s = src + (size_t)i * rb + (size_t)b * bb;
        if (dt == DT_Q4_K || dt == DT_Q5_K) quant_k_scales(s + 4, sc, mn);
        if (dt == DT_Q6_K) {   /* d, then the 16 int8 scales as stored */
            memcpy(hd + 2 * i, s + 208, 2);
            for (int j = 0; j < 16; j++) hd[2 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = s[192 + j];
        } else if (dt == DT_Q2_K) {   /* d, dmin, then the 16 bytes of a scale and a minimum */
            memcpy(hd + 2 * i, s + 80, 2);
            memcpy(hd + 2 * KG + 2 * i, s + 82, 2);
            for (int j = 0; j < 16; j++) hd[4 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = s[j];
        } else if (dt == DT_Q3_K) {   /* d, then the 16 signed scales */
            memcpy(hd + 2 * i, s + 108, 2);
            for (int j = 0; j < 16; j++) hd[2 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = (uint8_t)(int8_t)qd_q3k_scale(s, j);
        } else if (dt == DT_IQ4_XS) {   /* d, then the 8 signed scales */
            memcpy(hd + 2 * i, s, 2);
            for (int j = 0; j < 8; j++) hd[2 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = (uint8_t)(int8_t)qd_iq4xs_scale(s, j);
        } else {   /* d first; Q4_1, Q5_1's m and Q4_K, Q5_K's dmin next */
            memcpy(hd + 2 * i, s, 2);
            if (is_k(dt) || has_min32(dt)) memcpy(hd + 2 * KG + 2 * i, s + 2, 2);
            if (is_k(dt))
                for (int j = 0; j < 8; j++) {
                    hd[4 * KG + j * KG + i] = (uint8_t)sc[j];
                    hd[12 * KG + (j / 2) * 2 * KG + 2 * i + j % 2] = (uint8_t)mn[j];
                }
        }
        if (dt == DT_Q4_K) kpack_q4k(body, gb, s + 16, i);
        else if (dt == DT_Q5_K) kpack_q5k(body, gb, s, i);
        else if (dt == DT_Q6_K) kpack_q6k(body, gb, s, i);
        else if (dt == DT_Q2_K) kpack_q2k(body, gb, s + 16, NULL, i);
        else if (dt == DT_Q3_K) kpack_q2k(body, gb, s + 32, s, i);
        else if (dt == DT_IQ4_XS)
            for (int g = 0; g < 8; g++) kpack_nib32(body + g * gb, s + 8 + 16 * g, i);
        else if (dt == DT_Q4_0 || dt == DT_IQ4_NL) kpack_nib32(body, s + 2, i);
        else if (dt == DT_Q4_1) kpack_nib32(body, s + 4, i);
        else if (dt == DT_Q5_0) kpack_5bit32(body, s + 2, s + 6, i);
        else if (dt == DT_Q5_1) kpack_5bit32(body, s + 4, s + 8, i);
        else kpack_q8_0(body, s + 2, i);
    }
}

typedef struct {
    const Weight *w;
    uint8_t *p;
} KPackJob;

static void kpack_part(void *v, int part, int parts) {
    const KPackJob *j = v;
    const DType dt = j->w->dtype;
    const int64_t groups = (j->w->rows + KG - 1) / KG, nb = j->w->cols / quant_block_elems(dt);
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
    const int bits = q_bits(DT);
    if (bits == 8) return kv_load(o + v * 4 * KG);
    if (bits <= 3) {   /* two bits of each byte; Q3_K's third from bit v of the plane to bit 2 */
        const kv lo = kv_and8(kv_srl16(kv_load(o + (v / 4) * 4 * KG), 2 * (v % 4)), 3);
        if (bits == 2) return lo;
        const kv pl = kv_load(o + 8 * KG);
        return kv_or(lo, kv_and8(v <= 2 ? kv_sll16(pl, 2 - v) : kv_srl16(pl, v - 2), 0x04));
    }
    const kv raw = kv_load(o + (v / 2) * 4 * KG);
    kv q = kv_and8(v % 2 ? kv_srl16(raw, 4) : raw, 0x0F);
    if (bits == 5) {   /* bit v to bit 4 (16-bit shifts bring no bit across bytes there) */
        const kv pl = kv_load(o + 16 * KG);
        q = kv_or(q, kv_and8(v <= 4 ? kv_sll16(pl, 4 - v) : kv_srl16(pl, v - 4), 0x10));
    } else if (bits == 6) {   /* bits 2u, 2u + 1 to bits 4, 5 */
        const kv pl = kv_load(o + 16 * KG + (v / 4) * 4 * KG);
        const int u = v % 4;
        q = kv_or(q, kv_and8(u <= 2 ? kv_sll16(pl, 4 - 2 * u) : kv_srl16(pl, 2), 0x30));
    } else if (is_iq4(DT)) {
        q = kv_lut16(IQ4NL_LUT, q);
    }
    return q;
}

/* The bytes [p, p + len) on their way to L2 (a tile's first pass over a
 * row block fetches the next block's, which the passes' jumps back would
 * hide from the hardware's stream detection; one token's single pass
 * fetches the next group's, one group ahead of its reads: on a Xeon the
 * hardware alone kept the cores waiting on the first load of each block,
 * decode of the Qwen 0.5B / 1.5B GGUFs 18-27% slower).  The K types fetch a block's
 * eighth beside each of its eight 32-element runs, not the block at once:
 * on a Xeon a burst of a block's 36-53 lines stalled the core (16-node
 * trees of the 1.5B Q4_K_M 118-122 ms against 104-108 spread, 4 nodes on
 * the dots 1.18x one token against 1.07x). */
static inline void prefetch_l2(const uint8_t *p, size_t len) {
    for (size_t o = 0; o < len; o += 64) __builtin_prefetch(p + o, 0, 2);
}

/* Products of up to this many tokens (trees, a draft's steps) fetch ahead;
 * a prompt's, of more, run as before: measured on a Zen 4, fetching ahead
 * in the prompt's products left the decode after it about 8% slower. */
#define PREFETCH_TOKENS 16

/* group gi's copy, or NULL past the last group */
static inline const uint8_t *ahead(const uint8_t *pk, int64_t gi, int64_t groups, int64_t nb, const DType DT) {
    return gi < groups ? pk + (size_t)(gi * nb) * kp_block(DT) : NULL;
}

#define NEAR_AHEAD 6144   /* bytes (fetch_arm) */
static inline const uint8_t *fetch_at(const uint8_t *pk, int64_t gi, int64_t groups, int64_t nb, const DType DT, int arm) {
    if (arm == FETCH_GROUP) return ahead(pk, gi + 1, groups, nb, DT);
    return gi + 1 < groups ? pk + (size_t)(gi * nb) * kp_block(DT) + NEAR_AHEAD : NULL;
}

/* out[t][r] = acc[t - t0]'s lane r - gi * KG for the rows r in [r0, r1) of
 * group gi and tokens t0 .. t0 + T - 1 */
static inline __attribute__((always_inline)) void k_store(const Weight *w, float *out, const kf *acc, int64_t gi,
                                                          int64_t r0, int64_t r1, int t0, const int T) {
    const int64_t g0 = gi * KG;
    const int lo = r0 > g0 ? (int)(r0 - g0) : 0, hi = r1 < g0 + KG ? (int)(r1 - g0) : KG;
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) kf_store(out + (int64_t)(t0 + t) * w->rows + g0, acc[t], lo, hi);
}

/* The float chain of a K block b after its integer sums: acc[t] += isum[t]
 * times d * dx, less the minimums' (Q6_K, IQ4_XS: the offsets') part, for
 * tokens t0 .. t0 + T - 1 (the contract's order). */
static inline __attribute__((always_inline)) void kfinish(const uint8_t *hd, const Act *a, int64_t b, int t0,
                                                          const int T, const kv *isum, kf *acc, const DType DT) {
    const int64_t nb = a->nb, n = a->n;
    const kf dw = kf_half(hd);
    const float *dx = a->d + (size_t)b * n + t0;
    if (DT == DT_Q6_K || DT == DT_Q3_K || DT == DT_IQ4_XS) {   /* -off sc_j times the activations' sums over
                                                                * sub-block j, by pairs of sub-blocks: Q6_K's 32
                                                                * and Q3_K's 4 over their sums of 16, IQ4_XS's
                                                                * Q8_OFF over its sums of 32 */
        const int q6 = DT != DT_IQ4_XS, pairs = q6 ? 8 : 4, shift = DT == DT_Q6_K ? 5 : DT == DT_Q3_K ? 2 : 7,
                  off = q6 || Q8_OFF;
        kv pr[8];
#pragma GCC unroll 8
        for (int p = 0; p < pairs; p++) pr[p] = kv_s8_16(hd + 2 * KG + p * 2 * KG);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const int16_t *sums = q6 ? a->bs + ((size_t)(t0 + t) * nb + b) * 16 : a->xs + ((size_t)b * n + t0 + t) * 8;
            kv s = isum[t];
            if (off) {
                kv o = kv_zero();
#pragma GCC unroll 8
                for (int p = 0; p < pairs; p++) o = kv_madd_add(o, pr[p], kv_b32(sums + 2 * p));
                s = kv_sub32(s, kv_sll32(o, shift));
            }
            acc[t] = kf_fmadd(s, kf_mul(dw, kf_set1(dx[t])), acc[t]);
        }
    } else {   /* the minimum sums, by pairs of sub-blocks (Q2_K's of 16, over the sums of 16) */
        const int q2 = DT == DT_Q2_K, pairs = q2 ? 8 : 4;
        const kf dm = kf_half(hd + 2 * KG);
        kv mn[8];
#pragma GCC unroll 8
        for (int p = 0; p < pairs; p++)   /* Q2_K: each byte's high nibble */
            mn[p] = q2 ? kv_srl16(kv_u8_16(hd + 4 * KG + p * 2 * KG), 4) : kv_u8_16(hd + 12 * KG + p * 2 * KG);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const int16_t *sums = q2 ? a->bs + ((size_t)(t0 + t) * nb + b) * 16 : a->xs + ((size_t)b * n + t0 + t) * 8;
            kv ms = kv_zero();
#pragma GCC unroll 8
            for (int p = 0; p < pairs; p++) ms = kv_madd_add(ms, mn[p], kv_b32(sums + 2 * p));
            const kf dxv = kf_set1(dx[t]);
            acc[t] = kf_fmadd(isum[t], kf_mul(dw, dxv), acc[t]);
            acc[t] = kf_fnmadd(ms, kf_mul(dm, dxv), acc[t]);
        }
    }
}

/* The scales of pair p of a Q6_K's, Q2_K's or IQ4_XS's head (Q6_K, Q2_K:
 * the sub-blocks 2p, 2p + 1 of the 32-element run p; IQ4_XS: runs 2p,
 * 2p + 1) as int16, sc_2p in the low half of each row's lane, sc_2p+1 in
 * the high */
static inline __attribute__((always_inline)) kv pair16(const uint8_t *hd, int p, const DType DT) {
    const uint8_t *at = hd + k_pairs_at(DT) + p * 2 * KG;
    return DT == DT_Q2_K ? kv_and16(kv_u8_16(at), 15) : kv_s8_16(at);   /* Q2_K: each byte's low nibble */
}
/* the same, sc_2p (*s0) and sc_2p+1 (*s1) each in both int16 halves of the lane */
static inline __attribute__((always_inline)) void pair_scales16(const uint8_t *hd, int p, kv *s0, kv *s1, const DType DT) {
    const kv pr = pair16(hd, p, DT);   /* sc_2p, sc_2p+1 of each row */
    *s0 = kv_odd16(pr, kv_sll32(pr, 16));
    *s1 = kv_odd16(kv_srl32(pr, 16), pr);
}

/* out[t][r] for the rows r in [r0, r1) of group gi, tokens t0 .. t0 + T - 1 */
static inline __attribute__((always_inline)) void tilek(const Weight *w, const uint8_t *pk, const Act *a, float *out,
                                                        int64_t gi, int64_t r0, int64_t r1, int t0, const int T,
                                                        const DType DT, const uint8_t *pf) {
    const int64_t nb = a->nb;
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
            if (pf) prefetch_l2(pf + (size_t)b * blk + g * blk / 8, blk / 8);
            const uint8_t *o = body + g * gb;
            kv s0, s1;   /* the scales of the sub-blocks (Q6_K, Q2_K: 2g, 2g + 1; else g) */
#if QVNNI
            kv wq[8];
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) wq[v] = k_vec(o, v, DT);
            if (k_sub16(DT) || DT == DT_IQ4_XS) {   /* int8 scales in pairs: Q6_K's and Q2_K's pair g, IQ4_XS's g / 2 */
                const kv pr = pair16(hd, k_sub16(DT) ? g : g / 2, DT);
                s0 = kv_sra32(kv_sll32(pr, 16), 16);
                s1 = kv_sra32(pr, 16);
                if (DT == DT_IQ4_XS && g % 2) s0 = s1;
            } else s0 = s1 = kv_u8_32(hd + 4 * KG + g * KG);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const int8_t *x = xb + (size_t)t * a->cols + 32 * g;
                kv p0 = kv_zero(), p1 = kv_zero();
#pragma GCC unroll 8
                for (int v = 0; v < 8; v++) {
                    if (k_sub16(DT) ? v < 4 : v % 2 == 0) p0 = kv_dpbusd(p0, wq[v], kv_b32(x + 4 * v));
                    else p1 = kv_dpbusd(p1, wq[v], kv_b32(x + 4 * v));
                }
                if (k_sub16(DT)) isum[t] = kv_add32(isum[t], kv_add32(kv_mul32(p0, s0), kv_mul32(p1, s1)));
                else isum[t] = kv_add32(isum[t], kv_mul32(kv_add32(p0, p1), s0));
            }
#else
            /* the scale in both int16 halves of each lane */
            if (k_sub16(DT)) {
                pair_scales16(hd, g, &s0, &s1, DT);
            } else if (DT == DT_IQ4_XS) {
                pair_scales16(hd, g / 2, &s0, &s1, DT);
                if (g % 2) s0 = s1;
            } else {
                const kv s = kv_u8_32(hd + 4 * KG + g * KG);
                s0 = s1 = kv_or(s, kv_sll32(s, 16));
            }
            /* K_PASS_VECTORS weight vectors at a time serve every token */
#pragma GCC unroll 2
            for (int v0 = 0; v0 < 8; v0 += K_PASS_VECTORS) {
                kv wq[K_PASS_VECTORS];
#pragma GCC unroll 8
                for (int v = 0; v < K_PASS_VECTORS; v++) wq[v] = k_vec(o, v0 + v, DT);
                const int G = k_int16_group(DT) < K_PASS_VECTORS ? k_int16_group(DT) : K_PASS_VECTORS;
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const int8_t *x = xb + (size_t)t * a->cols + 32 * g + 4 * v0;
#pragma GCC unroll 8
                    for (int v = 0; v < K_PASS_VECTORS; v += G) {
                        kv m[8];   /* G products, added pairwise */
#pragma GCC unroll 8
                        for (int u = 0; u < G; u++)   /* IQ4_XS: |q| times x with q's sign, as Q8_0's */
                            m[u] = DT == DT_IQ4_XS ? kv_maddubs(kv_abs8(wq[v + u]), kv_sign8(kv_b32(x + 4 * (v + u)), wq[v + u]))
                                                   : kv_maddubs(wq[v + u], kv_b32(x + 4 * (v + u)));
#pragma GCC unroll 3
                        for (int w = 1; w < G; w *= 2)
#pragma GCC unroll 4
                            for (int u = 0; u + w < G; u += 2 * w) m[u] = kv_add16(m[u], m[u + w]);
                        isum[t] = kv_madd_add(isum[t], m[0], k_sub16(DT) && v0 + v >= 4 ? s1 : s0);
                    }
                }
            }
#endif
        }
        kfinish(hd, a, b, t0, T, isum, acc, DT);
    }
    k_store(w, out, acc, gi, r0, r1, t0, T);
}

/* One token's block sums over a 32-element block: lane i is init_i + the
 * exact sum over the 32 elements of row i's unsigned integer (Q8_0 without
 * VNNI: its int8, the sign moved to x) times x. */
static inline __attribute__((always_inline)) kv dot32(const kv wq[8], const int8_t *x, kv init, const DType DT) {
#if QVNNI
    (void)DT;
    kv p0 = init, p1 = kv_zero();
#pragma GCC unroll 4
    for (int v = 0; v < 8; v += 2) {
        p0 = kv_dpbusd(p0, wq[v], kv_b32(x + 4 * v));
        p1 = kv_dpbusd(p1, wq[v + 1], kv_b32(x + 4 * v + 4));
    }
    return kv_add32(p0, p1);
#else
    const kv one = kv_set16(1);
    if (DT == DT_Q8_0 || is_iq4(DT)) {   /* |q| times x with q's sign: pair sums <= 2 * 128 * 127 */
        kv p = init;
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++)
            p = kv_madd_add(p, kv_maddubs(kv_abs8(wq[v]), kv_sign8(kv_b32(x + 4 * v), wq[v])), one);
        return p;
    }
    kv m[8];
#pragma GCC unroll 8
    for (int v = 0; v < 8; v++) m[v] = kv_maddubs(wq[v], kv_b32(x + 4 * v));
    /* int16 sums of at most 16 products of q <= 15 or 8 of q <= 31: <= 31496 */
    const kv lo = kv_add16(kv_add16(m[0], m[1]), kv_add16(m[2], m[3]));
    const kv hi = kv_add16(kv_add16(m[4], m[5]), kv_add16(m[6], m[7]));
    if (q_bits(DT) == 4) return kv_madd_add(init, kv_add16(lo, hi), one);
    return kv_madd_add(kv_madd_add(init, lo, one), hi, one);
#endif
}

/* out[t][r] for the rows r in [r0, r1) of group gi, tokens t0 .. t0 + T - 1
 * of a 32-element type */
static inline __attribute__((always_inline)) void tile32(const Weight *w, const uint8_t *pk, const Act *a, float *out,
                                                         int64_t gi, int64_t r0, int64_t r1, int t0, const int T,
                                                         const DType DT, const uint8_t *pf) {
    const int64_t nb = a->nb, n = a->n;
    const size_t blk = kp_block(DT);
    const int off = DT == DT_Q4_0 ? 8 : DT == DT_Q5_0 ? 16 : DT == DT_Q8_0 || is_iq4(DT) ? Q8_OFF : 0;
    const int32_t *s_off = a->s_off + (size_t)(DT == DT_Q4_0 ? 0 : DT == DT_Q5_0 ? 1 : 2) * (size_t)(nb * n);
    kf acc[KT_MAX];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = kf_zero();
    const uint8_t *hd = pk + (size_t)gi * (size_t)nb * blk;
    for (int64_t b = 0; b < nb; b++, hd += blk) {
        if (pf) prefetch_l2(pf + (size_t)b * blk, blk);
        kv wq[8];
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) wq[v] = k_vec(hd + kp_head(DT), v, DT);
        const kf dw = kf_half(hd);
        const size_t at = (size_t)b * n + t0;
        const int8_t *xb = a->q + (size_t)t0 * a->cols + b * 32;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const kv isum = dot32(wq, xb + (size_t)t * a->cols, off ? kv_set32(s_off[at + t]) : kv_zero(), DT);
            acc[t] = kf_fmadd(isum, kf_mul(dw, kf_set1(a->d[at + t])), acc[t]);
            if (has_min32(DT)) acc[t] = kf_fma(kf_half(hd + 2 * KG), kf_set1(a->sd[at + t]), acc[t]);
        }
    }
    k_store(w, out, acc, gi, r0, r1, t0, T);
}

static inline __attribute__((always_inline)) void tile(const Weight *w, const uint8_t *pk, const Act *a, float *out,
                                                       int64_t gi, int64_t r0, int64_t r1, int t0, const int T,
                                                       const DType DT, const uint8_t *pf) {
    if (is_k(DT)) tilek(w, pk, a, out, gi, r0, r1, t0, T, DT, pf);
    else tile32(w, pk, a, out, gi, r0, r1, t0, T, DT, pf);
}

/* ---- the tile multiply (AMX-INT8) for the K types' products of several tokens
 *
 * Where the build and the CPU have AMX-INT8, a Q4_K, Q5_K or Q6_K product of
 * at least QAMX_MIN_TOKENS tokens takes its integer sums from the tile
 * multiply (int32 sums of activation bytes, signed, times weight bytes).  A
 * group's 16 rows are a B tile's 16 columns, and a vector v of the repacked
 * copy (elements 4v .. 4v + 3 of each of the 16 rows) is B's row v.  The
 * sub-block scales go into the weight bytes, split so that every byte fits,
 * and a super-block's exact sum is two tile sums over its 256 elements (4
 * products of K = 64 each), lo and hi:
 *   Q4_K, Q5_K: sc_j (6 bits, unsigned) = 8 hi + lo (hi, lo <= 7): bytes
 *               q lo and q hi (<= 31 * 7 < 256; one vpmullw per vector, no
 *               carry crossing a byte), TDPBSUD both, isum_b = C_lo + 8 C_hi;
 *   Q6_K:       P = q sc_j (q <= 63, sc_j a signed byte: |P| <= 8064, an
 *               exact int16) = 256 hi + lo: lo its low byte (unsigned,
 *               TDPBSUD), hi its high byte (signed, TDPBSSD), isum_b = C_lo
 *               + 256 C_hi before the -32 offsets (kfinish subtracts them
 *               as the dot path does);
 * sums of at most 256 * 127 * 8064 < 2^31: the same exact integer as the dot
 * path's, then the same float chain (kfinish): the same bits at any token
 * count (tests/test_quant.c compares the two paths).  Per group and
 * super-block the tile work is 8 products, 12 tile loads and 2 stores
 * whatever the token count (1 to 16), where the dots grow with each token.
 * The 32-element types carry a float scale per 32: those stay on the dot
 * path (measured: their tiles of K = 32 with a store per block were no
 * faster). */
#if QISA == 512 && defined(CPU_AMX) && defined(__AMX_INT8__) && defined(__AVX512VNNI__)
#define QAMX 1
#define QAMX_TOKENS 16     /* tokens of an A or C tile */
#define QAMX_MIN_TOKENS 8  /* fewer take the dot path (measured: slower there) */
static int qamx_allowed = -1;   /* -1: not asked yet (cpu_quant_matmul_many asks, before any thread) */

static int qamx_type(const DType DT) { return DT == DT_Q4_K || DT == DT_Q5_K || DT == DT_Q6_K; }

/* tiles 0, 1 the lo and hi sums (T tokens x 16 rows, int32), 2 the
 * activations (T x 64 bytes), 4, 5 the lo and hi weights (16 x 64 bytes) */
static void qamx_configure(int T) {
    const int rows[8] = {T, T, T, 0, 16, 16, 0, 0}, colsb[8] = {64, 64, 64, 0, 64, 64, 0, 0};
    cpu_amx_configure(rows, colsb);
}

/* One super-block of a group as the lo and hi B tiles: w[h][p] (h 0 lo, 1
 * hi; p the pair of 32-element runs 2p, 2p + 1, K = 64) */
static inline __attribute__((always_inline)) void qamx_weights(const uint8_t *hd, uint8_t (*w)[4][1024], const DType DT,
                                                               const uint8_t *pf) {
    const uint8_t *body = hd + kp_head(DT);
    const size_t blk = kp_block(DT);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        if (pf) prefetch_l2(pf + g * blk / 8, blk / 8);
        uint8_t *l = w[0][g / 2] + (g % 2) * 512, *h = w[1][g / 2] + (g % 2) * 512;
        if (DT == DT_Q6_K) {   /* P = q sc (int16) = 256 hi + lo: lo, hi its bytes */
            kv s0, s1;
            pair_scales16(hd, g, &s0, &s1, DT_Q6_K);
            const kv even = kv_set16(0x00FF);
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) {
                const kv q = k_vec(body + g * kp_g(DT), v, DT), s = v < 4 ? s0 : s1;
                const kv pe = _mm512_mullo_epi16(_mm512_and_si512(q, even), s);   /* even bytes' P */
                const kv po = _mm512_mullo_epi16(kv_srl16(q, 8), s);              /* odd bytes' P */
                /* (0xE4: per bit, the third operand's bit selects the first's, else the second's) */
                _mm512_store_si512(l + 64 * v, _mm512_ternarylogic_epi32(pe, kv_sll16(po, 8), even, 0xE4));
                _mm512_store_si512(h + 64 * v, _mm512_ternarylogic_epi32(kv_srl16(pe, 8), po, even, 0xE4));
            }
            continue;
        }
        const kv s = kv_u8_32(hd + 4 * KG + g * KG), s16 = kv_or(s, kv_sll32(s, 16));   /* sc in both halves */
        const kv lo = kv_and8(s16, 7), hi = kv_srl16(s16, 3);
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            const kv q = k_vec(body + g * kp_g(DT), v, DT);
            _mm512_store_si512(l + 64 * v, _mm512_mullo_epi16(q, lo));
            _mm512_store_si512(h + 64 * v, _mm512_mullo_epi16(q, hi));
        }
    }
    /* (GCC's tile load is an asm without a memory operand: the barrier
     * keeps these stores, which nothing else reads, before it) */
    __asm__ volatile("" : : : "memory");
}

/* The lo and hi sums of one super-block (weights w, activations at x, T
 * rows ld apart) to lo[T][16], hi[T][16] */
static inline __attribute__((always_inline)) void qamx_sums(uint8_t (*w)[4][1024], const int8_t *x, int64_t ld,
                                                            int32_t *lo, int32_t *hi, const DType DT) {
    _tile_zero(0);
    _tile_zero(1);
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        _tile_loadd(2, x + 64 * p, ld);
        _tile_loadd(4, w[0][p], 64);
        _tile_dpbsud(0, 2, 4);
        _tile_loadd(5, w[1][p], 64);
        if (DT == DT_Q6_K) _tile_dpbssd(1, 2, 5);   /* Q6_K's hi bytes are signed */
        else _tile_dpbsud(1, 2, 5);
    }
    _tile_stored(0, lo, 64);
    _tile_stored(1, hi, 64);
}

/* tilek on the tile multiply, T <= QAMX_TOKENS: block b's tile products
 * are issued, then block b + 1's weights made and block b - 1's sums read
 * back, so that no tile load waits on the stores just before it and the
 * tile unit and the vector units overlap */
static inline __attribute__((always_inline)) void qamx_tilek(const Weight *w, const uint8_t *pk, const Act *a, float *out,
                                                             int64_t gi, int64_t r0, int64_t r1, int t0, const int T,
                                                             const DType DT, const uint8_t *pf) {
    const int64_t nb = a->nb, ld = a->cols;
    const size_t blk = kp_block(DT);
    const int shift = DT == DT_Q6_K ? 8 : 3;   /* isum = C_lo + 2^shift C_hi */
    uint8_t wt[2][2][4][1024] __attribute__((aligned(64)));
    int32_t lo[2][QAMX_TOKENS * 16] __attribute__((aligned(64))), hi[2][QAMX_TOKENS * 16] __attribute__((aligned(64)));
    kf acc[QAMX_TOKENS];
    kv isum[QAMX_TOKENS];
    for (int t = 0; t < T; t++) acc[t] = kf_zero();
    const uint8_t *g0 = pk + (size_t)(gi * nb) * blk;
    qamx_weights(g0, wt[0], DT, pf);
    for (int64_t b = 0; b <= nb; b++) {
        if (b < nb) {
            qamx_sums(wt[b % 2], a->q + (size_t)t0 * ld + b * 256, ld, lo[b % 2], hi[b % 2], DT);
            if (b + 1 < nb) qamx_weights(g0 + (size_t)(b + 1) * blk, wt[(b + 1) % 2], DT, pf ? pf + (size_t)(b + 1) * blk : NULL);
        }
        if (b > 0) {
            const int e = (int)((b - 1) % 2);
            for (int t = 0; t < T; t++) isum[t] = kv_add32(kv_load(lo[e] + 16 * t), kv_sll32(kv_load(hi[e] + 16 * t), shift));
            kfinish(g0 + (size_t)(b - 1) * blk, a, b - 1, t0, T, isum, acc, DT);
        }
    }
    k_store(w, out, acc, gi, r0, r1, t0, T);
}

/* rows_typed's loop on the tile multiply: passes of at most QAMX_TOKENS */
static inline __attribute__((always_inline)) void qamx_rows(const Weight *w, const Act *a, float *out, int64_t r0,
                                                            int64_t r1, const DType DT) {
    const uint8_t *pk = ((const CpuWeightCopies *)w->priv)->kpack;
    const int64_t G0 = r0 / KG, G1 = (r1 + KG - 1) / KG, per = QROW_BLOCK / KG;
    const int64_t groups = (w->rows + KG - 1) / KG, nb = a->nb;
    const int passes = (a->n + QAMX_TOKENS - 1) / QAMX_TOKENS;
    int configured = 0;
    for (int64_t b0 = G0; b0 < G1; b0 += per) {
        const int64_t b1 = b0 + per < G1 ? b0 + per : G1;
        for (int p = 0, t = 0; p < passes; p++) {
            const int T = (a->n - t + passes - p - 1) / (passes - p);
            if (T != configured) {
                qamx_configure(T);
                configured = T;
            }
            for (int64_t gi = b0; gi < b1; gi++) {
                const uint8_t *pf = p || a->n > PREFETCH_TOKENS ? NULL : ahead(pk, gi + per, groups, nb, DT);
                qamx_tilek(w, pk, a, out, gi, r0, r1, t, T, DT, pf);
            }
            t += T;
        }
    }
    _tile_release();   /* the tile state back to its initial one: cheaper context switches */
}
#endif

/* Rows [r0, r1) of every token: blocks of QROW_BLOCK rows (whole groups),
 * in each the tokens in passes of at most KT_MAX, as even as they come (9
 * tokens 5 + 4, not 8 + 1: a pass of one token waits on its dot chain).
 * The first pass over a block fetches the next block's bytes. */
static inline __attribute__((always_inline)) void rows_typed(const Weight *w, const Act *a, float *out, int64_t r0,
                                                             int64_t r1, const DType DT, int arm) {
#ifdef QAMX
    if (qamx_type(DT) && qamx_allowed > 0 && a->n >= QAMX_MIN_TOKENS) {
        qamx_rows(w, a, out, r0, r1, DT);
        return;
    }
#endif
    const uint8_t *pk = ((const CpuWeightCopies *)w->priv)->kpack;
    const int64_t G0 = r0 / KG, G1 = (r1 + KG - 1) / KG, per = QROW_BLOCK / KG;
    const int64_t groups = (w->rows + KG - 1) / KG, nb = a->nb;
    if (a->n == 1) {   /* one pass in order, fetching ahead as arm says (prefetch_l2) */
        for (int64_t gi = G0; gi < G1; gi++) tile(w, pk, a, out, gi, r0, r1, 0, 1, DT, fetch_at(pk, gi, groups, nb, DT, arm));
        return;
    }
    const int passes = (a->n + KT_MAX - 1) / KT_MAX;
    for (int64_t b0 = G0; b0 < G1; b0 += per) {
        const int64_t b1 = b0 + per < G1 ? b0 + per : G1;
        for (int p = 0, t = 0; p < passes; p++) {
            const int T = (a->n - t + passes - p - 1) / (passes - p);
            for (int64_t gi = b0; gi < b1; gi++) {
                const uint8_t *pf = p || a->n > PREFETCH_TOKENS ? NULL : ahead(pk, gi + per, groups, nb, DT);
                switch (T) {
                case 2: tile(w, pk, a, out, gi, r0, r1, t, 2, DT, pf); break;
                case 3: tile(w, pk, a, out, gi, r0, r1, t, 3, DT, pf); break;
                case 4: tile(w, pk, a, out, gi, r0, r1, t, 4, DT, pf); break;
                case 5: tile(w, pk, a, out, gi, r0, r1, t, 5, DT, pf); break;
                case 6: tile(w, pk, a, out, gi, r0, r1, t, 6, DT, pf); break;
                case 7: tile(w, pk, a, out, gi, r0, r1, t, 7, DT, pf); break;
                case 8: tile(w, pk, a, out, gi, r0, r1, t, 8, DT, pf); break;
                default: break;
                }
            }
            t += T;
        }
    }
}

static void rows_vector(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1, int arm) {
    switch (w->dtype) {
    case DT_Q8_0: rows_typed(w, a, out, r0, r1, DT_Q8_0, arm); break;
    case DT_Q4_0: rows_typed(w, a, out, r0, r1, DT_Q4_0, arm); break;
    case DT_Q4_1: rows_typed(w, a, out, r0, r1, DT_Q4_1, arm); break;
    case DT_Q5_0: rows_typed(w, a, out, r0, r1, DT_Q5_0, arm); break;
    case DT_Q5_1: rows_typed(w, a, out, r0, r1, DT_Q5_1, arm); break;
    case DT_Q4_K: rows_typed(w, a, out, r0, r1, DT_Q4_K, arm); break;
    case DT_Q5_K: rows_typed(w, a, out, r0, r1, DT_Q5_K, arm); break;
    case DT_Q6_K: rows_typed(w, a, out, r0, r1, DT_Q6_K, arm); break;
    case DT_IQ4_NL: rows_typed(w, a, out, r0, r1, DT_IQ4_NL, arm); break;
    case DT_IQ4_XS: rows_typed(w, a, out, r0, r1, DT_IQ4_XS, arm); break;
    case DT_Q2_K: rows_typed(w, a, out, r0, r1, DT_Q2_K, arm); break;
    case DT_Q3_K: rows_typed(w, a, out, r0, r1, DT_Q3_K, arm); break;
    default: break;
    }
}
#endif

static void rows_any(const Weight *w, const Act *a, float *out, int64_t r0, int64_t r1, int arm) {
#if QISA
    rows_vector(w, a, out, r0, r1, arm);
#else
    (void)arm;
    rows_scalar(w, a, out, r0, r1);
#endif
}

/* The rows of all the weights, in order, as one range split in contiguous
 * parts (matmul.c's RowsJob): each part streams its rows. */
typedef struct {
    float *const *outs;
    const Weight *const *ws;
    int count;
    int arm;   /* where one token's pass fetches ahead (fetch_at) */
    int64_t total;
} QuantJob;

static void quant_part(void *v, int part, int parts) {
    const QuantJob *j = v;
    int64_t g0, g1, base = 0;
    part_range(j->total, part, parts, &g0, &g1);
    for (int i = 0; i < j->count; base += j->ws[i]->rows, i++) {
        const int64_t lo = g0 > base ? g0 : base, hi = g1 < base + j->ws[i]->rows ? g1 : base + j->ws[i]->rows;
        const Act *a = quant_act_block(j->ws[i]->dtype) == 256 ? &actk : &act32;
        if (lo < hi) rows_any(j->ws[i], a, j->outs[i], lo - base, hi - base, j->arm);
    }
}

/* How far one token's single pass fetches ahead of its reads differs by
 * CPU: one group (13.8-118 KB for the 1.5B's matrices on AVX-512) made
 * the decode of the Qwen GGUFs 15-27% faster on a Xeon, where the
 * hardware alone left each block's first load waiting; on a Zen 4 a
 * fixed NEAR_AHEAD bytes decodes the 1.5B Q4_K_M 4-7% (one thread) and
 * 8-13% (two) faster than one group, and distances near 4 KB (2, 4, 5
 * KB) slower than either.  So the process measures (cpu_quant_fetch_arm):
 * each matrix's one-token products alternate the two distances, each
 * pair of a matrix's consecutive products adding both times to the
 * sums (every matrix weighs alike in both), and after FETCH_PAIRS pairs
 * the faster distance stays.  Where it fetches changes no sum. */
static int fetch_arm = -1;   /* FETCH_GROUP, FETCH_NEAR, or -1: measuring */
static int fetch_pairs;
static double fetch_secs[2];

/* One timed one-token product of c's matrices with distance arm: each
 * matrix's first product (it makes the copy) is not timed, then its
 * products pair up; a pair's times go to the sums. */
static void fetch_measured(CpuWeightCopies *c, int arm, double secs) {
    if (c->fetch_calls++ == 0) {
        c->fetch_first = (int)(((uintptr_t)c >> 6) & 1);   /* half the matrices start with each arm */
        return;
    }
    if (c->fetch_calls % 2 == 0) {
        c->fetch_secs = secs;
        return;
    }
    fetch_secs[arm] += secs;
    fetch_secs[!arm] += c->fetch_secs;
    if (++fetch_pairs == FETCH_PAIRS) fetch_arm = fetch_secs[FETCH_NEAR] < fetch_secs[FETCH_GROUP] ? FETCH_NEAR : FETCH_GROUP;
}

int cpu_quant_fetch_arm(int arm) {
    if (!QISA) return FETCH_NONE;
    if (arm != FETCH_KEEP) {
        fetch_arm = arm;
        fetch_pairs = 0;
        fetch_secs[0] = fetch_secs[1] = 0;
    }
    return fetch_arm;
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
    for (int i = 0; i < count; i++) cpu_quant_make_pack(ws[i]);
#ifdef QAMX
    if (qamx_allowed < 0) qamx_allowed = cpu_amx_ready();
#endif
    const int64_t cols = ws[0]->cols;
    if (need32) act_make(&act32, x, n, cols, 32);
    if (needk) act_make(&actk, x, n, cols, 256);
    CpuWeightCopies *c = ws[0]->priv;
    const int measure = QISA && n == 1 && fetch_arm < 0 && c;   /* (the scalar loop fetches nothing) */
    QuantJob j = {outs, ws, count, measure ? (c->fetch_calls + c->fetch_first) % 2 : fetch_arm < 0 ? FETCH_GROUP : fetch_arm,
                  total};
    const double t0 = measure ? now_seconds() : 0;
    cpu_parallel(quant_part, &j, work > PAR_MIN_WORK);
    if (measure) fetch_measured(c, j.arm, now_seconds() - t0);
}

#if QISA
/* A mapped matrix's pages, once its copy holds every byte a product reads
 * (pages_drop), so a checkpoint of block types takes its size in memory
 * once rather than twice; an embedding row read later, or a second copy
 * of rows (llama_lm_head_rows), faults its page in from the file again. */
static void drop_mapped_pages(const Weight *w, size_t bytes) {
    if (w->mapped) pages_drop(w->data, bytes);
}
#endif

/* The row-interleaved copy of a block-type matrix, made by its first
 * product (quant_weight in backend.c gives every such weight its
 * CpuWeightCopies); called before any parallel region.  Out of memory is
 * fatal, as for any buffer a forward needs.  A mapped matrix's pages are
 * then dropped (drop_mapped_pages). */
void cpu_quant_make_pack(const Weight *w) {
#if QISA
    CpuWeightCopies *c = w->priv;
    if (!c || c->kpack || !dtype_is_quant(w->dtype)) return;
    const DType dt = w->dtype;
    const int64_t groups = (w->rows + KG - 1) / KG;
    uint8_t *p = xmalloc((size_t)groups * (size_t)(w->cols / quant_block_elems(dt)) * kp_block(dt));
    KPackJob j = {w, p};
    cpu_parallel(kpack_part, &j, groups > 1);
    c->kpack = p;
    drop_mapped_pages(w, (size_t)w->rows * (size_t)quant_row_bytes(dt, w->cols));
#else
    (void)w;
#endif
}

int cpu_quant_tiles(int allow) {
#ifdef QAMX
    qamx_allowed = allow && cpu_amx_ready();
    return qamx_allowed;
#else
    (void)allow;
    return 0;
#endif
}

void cpu_quant_row(const Weight *w, int64_t r, float *out) {
    const int64_t rb = quant_row_bytes(w->dtype, w->cols);
    quant_dequant_row(w->dtype, (const uint8_t *)w->data + r * rb, out, w->cols);
}
