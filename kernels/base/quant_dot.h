/* The block products' steps (kernels/cpu/matmul_quant.c's contract) one
 * piece at a time, compiled for the GPU (kernels/cuda/matmul_quant.cu) and
 * for the host, where tests/test_cuda.c runs them as the kernels do and
 * requires the CPU backend's bits: one definition of each step.
 *
 * A block is taken in units of 32 elements (a 32-element block is one unit,
 * a K super-block eight): a unit's integers are packed as 8 words of 4
 * bytes, element e at byte e % 4 of word e / 4, so that a 4-byte dot
 * product (dp4a) multiplies them by the activations' int8 in place.  Every
 * offset inside a block is even and every block size is even, so a block
 * is read in aligned 16-bit halves. */
#ifndef C2T_QUANT_DOT_H
#define C2T_QUANT_DOT_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __CUDACC__
#include <cuda_fp16.h>
#define QD_FN static __host__ __device__ __forceinline__
extern "C" {
#include "kernels/base/quant.h"
}
#else
#define QD_FN static inline
#include "kernels/base/quant.h"
#endif

QD_FN uint32_t qd_ld16(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return *(const uint16_t *)p;
#else
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
#endif
}

/* the 32 bits at p (2-byte aligned), little-endian */
QD_FN uint32_t qd_ld32(const uint8_t *p) { return qd_ld16(p) | qd_ld16(p + 2) << 16; }

QD_FN float qd_half(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short)qd_ld16(p)));
#else
    return quant_half((uint16_t)qd_ld16(p));
#endif
}

/* a * b and a - b rounded once, never fused into a neighbouring add */
QD_FN float qd_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
QD_FN float qd_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
QD_FN float qd_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/* IQ4_NL's grid, ggml's kvalues_iq4nl (-127 -104 -83 -65 -49 -35 -22 -10
 * 1 13 25 38 53 69 89 113), as the bytes of two words: integer i of the
 * sixteen. */
QD_FN int qd_iq4nl(uint32_t i) {
    const uint64_t lo = 0xF6EADDCFBFAD9881ull, hi = 0x7159453526190D01ull;
    return (int8_t)((i < 8 ? lo : hi) >> (8 * (i & 7)));
}

/* IQ4_XS's signed scale ls - 32 of sub-block j (quant.h) */
QD_FN int qd_iq4xs_scale(const uint8_t *blk, int j) {
    const int lo = blk[4 + j / 2] >> 4 * (j % 2) & 15, hi = (int)(qd_ld16(blk + 2) >> 2 * j & 3);
    return (lo | hi << 4) - 32;
}

/* Q3_K's signed scale sc - 32 of sub-block j (quant.h): the low 4 bits in
 * nibble j / 8 of byte 96 + j % 8, the top 2 at bits 2 (j / 4) of byte 104
 * + j % 4 */
QD_FN int qd_q3k_scale(const uint8_t *blk, int j) {
    const int lo = blk[96 + j % 8] >> 4 * (j / 8) & 15, hi = blk[104 + j % 4] >> 2 * (j / 4) & 3;
    return (lo | hi << 4) - 32;
}

/* c + the 4 products of a's and b's signed bytes (exact) */
QD_FN int qd_dot4(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a((int)a, (int)b, c);
#else
    for (int k = 0; k < 4; k++) c += (int8_t)(a >> 8 * k) * (int8_t)(b >> 8 * k);
    return c;
#endif
}

/* byte k of the result: bit 4 set where bit k of x (x < 16) is */
QD_FN uint32_t qd_bit4(uint32_t x) {
    return (x & 1) << 4 | (x & 2) << 11 | (x & 4) << 18 | (x & 8) << 25;
}

/* where a block keeps its half-precision d (quant_half_offsets') */
QD_FN int qd_d_at(DType dt) { return dt == DT_Q6_K ? 208 : dt == DT_Q2_K ? 80 : dt == DT_Q3_K ? 108 : 0; }

/* Unit g's 32 integers of block blk as stored (unsigned; Q8_0's and
 * IQ4_NL's / IQ4_XS's grid integers signed),
 * quant.h's QuantBlock.q packed as words. */
QD_FN void qd_unit(DType dt, const uint8_t *blk, int g, uint32_t w[8]) {
    const uint32_t m4 = 0x0F0F0F0Fu;
    switch (dt) {
    case DT_Q8_0:
        for (int k = 0; k < 8; k++) w[k] = qd_ld32(blk + 2 + 4 * k);
        break;
    case DT_IQ4_NL: case DT_IQ4_XS:
        for (int k = 0; k < 4; k++) {   /* elements 4k.. low nibbles, 16 + 4k.. high */
            const uint32_t v = qd_ld32(blk + (dt == DT_IQ4_XS ? 8 + 16 * g : 2) + 4 * k);
            uint32_t lo = 0, hi = 0;
            for (int m = 0; m < 4; m++) {
                lo |= (uint32_t)(uint8_t)qd_iq4nl(v >> 8 * m & 15) << 8 * m;
                hi |= (uint32_t)(uint8_t)qd_iq4nl(v >> (8 * m + 4) & 15) << 8 * m;
            }
            w[k] = lo;
            w[k + 4] = hi;
        }
        break;
    case DT_Q4_0: case DT_Q4_1: case DT_Q5_0: case DT_Q5_1: {
        const int five = dt == DT_Q5_0 || dt == DT_Q5_1, m = dt == DT_Q4_1 || dt == DT_Q5_1;
        const uint8_t *qs = blk + 2 + 2 * m + 4 * five;
        const uint32_t qh = five ? qd_ld32(blk + 2 + 2 * m) : 0;
        for (int k = 0; k < 4; k++) {   /* elements 4k.. low nibbles, 16 + 4k.. high */
            const uint32_t v = qd_ld32(qs + 4 * k);
            w[k] = (v & m4) | qd_bit4(qh >> 4 * k & 15);
            w[k + 4] = (v >> 4 & m4) | qd_bit4(qh >> (16 + 4 * k) & 15);
        }
        break;
    }
    case DT_Q4_K: case DT_Q5_K: {   /* quant.c's unpack_k45 */
        const int five = dt == DT_Q5_K;
        const uint8_t *qs = blk + (five ? 48 : 16) + 32 * (g / 2);
        for (int k = 0; k < 8; k++) {
            w[k] = qd_ld32(qs + 4 * k) >> 4 * (g & 1) & m4;
            if (five) w[k] |= (qd_ld32(blk + 16 + 4 * k) >> g & 0x01010101u) << 4;
        }
        break;
    }
    case DT_Q2_K: case DT_Q3_K:   /* quant.c's unpack_q2_k / unpack_q3_k: half g / 4, bits 2 (g % 4) of
                                   * its 32 bytes; Q3_K's third bit at bit g of hmask */
        for (int k = 0; k < 8; k++) {
            w[k] = qd_ld32(blk + (dt == DT_Q2_K ? 16 : 32) + 32 * (g / 4) + 4 * k) >> 2 * (g % 4) & 0x03030303u;
            if (dt == DT_Q3_K) w[k] |= (qd_ld32(blk + 4 * k) >> g & 0x01010101u) << 2;
        }
        break;
    default: {   /* Q6_K: quant.c's unpack_q6_k, half h, quarter k */
        const int h = g / 4, q = g % 4;
        const uint8_t *ql = blk + 64 * h + 32 * (q & 1), *qh = blk + 128 + 32 * h;
        for (int k = 0; k < 8; k++)
            w[k] = (qd_ld32(ql + 4 * k) >> 4 * (q >> 1) & m4) | (qd_ld32(qh + 4 * k) >> 2 * q & 0x03030303u) << 4;
        break;
    }
    }
}

/* Sub-block j's 6-bit scale and minimum of a Q4_K / Q5_K block
 * (quant_k_scales for one j). */
QD_FN void qd_k_scale(const uint8_t *blk, int j, int *sc, int *mn) {
    const uint8_t *s = blk + 4;
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Unit g of block blk, its integers w (qd_unit), times the activation unit
 * x (8 words of int8) whose sums over its two halves of 16 are xs0, xs1:
 * the unit's part of the block's exact sums (matmul_quant.c's isum_b and
 * msum_b are the sums of these parts over the block's units). */
QD_FN void qd_unit_sums(DType dt, const uint8_t *blk, int g, const uint32_t w[8], const uint32_t x[8], int xs0,
                        int xs1, int *isum, int *msum) {
    int lo = 0, hi = 0;
    for (int k = 0; k < 4; k++) lo = qd_dot4(w[k], x[k], lo);
    for (int k = 4; k < 8; k++) hi = qd_dot4(w[k], x[k], hi);
    *msum = 0;
    switch (dt) {
    case DT_Q4_0: *isum = lo + hi - 8 * (xs0 + xs1); break;
    case DT_Q5_0: *isum = lo + hi - 16 * (xs0 + xs1); break;
    case DT_Q4_K: case DT_Q5_K: {
        int sc, mn;
        qd_k_scale(blk, g, &sc, &mn);
        *isum = sc * (lo + hi);
        *msum = mn * (xs0 + xs1);
        break;
    }
    case DT_IQ4_XS: *isum = qd_iq4xs_scale(blk, g) * (lo + hi); break;
    case DT_Q3_K: *isum = qd_q3k_scale(blk, 2 * g) * (lo - 4 * xs0) + qd_q3k_scale(blk, 2 * g + 1) * (hi - 4 * xs1); break;
    case DT_Q2_K:   /* sub-blocks 2g and 2g + 1: scale low nibble, minimum high */
        *isum = (blk[2 * g] & 15) * lo + (blk[2 * g + 1] & 15) * hi;
        *msum = (blk[2 * g] >> 4) * xs0 + (blk[2 * g + 1] >> 4) * xs1;
        break;
    case DT_Q6_K: {
        const int8_t *sc = (const int8_t *)blk + 192 + 2 * g;
        *isum = sc[0] * (lo - 32 * xs0) + sc[1] * (hi - 32 * xs1);
        break;
    }
    default: *isum = lo + hi; break;   /* Q8_0, IQ4_NL, Q4_1, Q5_1 */
    }
}

/* The float chain's terms of one block, from its exact sums, the token's
 * activation scale dx and (Q4_1, Q5_1) dx times the block's activation sum:
 * acc = fma(ta[k], tb[k], acc) for k < the count returned, in order. */
QD_FN int qd_terms(DType dt, const uint8_t *blk, int isum, int msum, float dx, float sdx, float ta[2], float tb[2]) {
    ta[0] = (float)isum;
    tb[0] = qd_mul(qd_half(blk + qd_d_at(dt)), dx);
    if (dt == DT_Q4_1 || dt == DT_Q5_1) {
        ta[1] = qd_half(blk + 2);
        tb[1] = sdx;
        return 2;
    }
    if (dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q2_K) {
        ta[1] = -(float)msum;
        tb[1] = qd_mul(qd_half(blk + (dt == DT_Q2_K ? 82 : 2)), dx);
        return 2;
    }
    return 1;
}

QD_FN float qd_div(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/* quant_q8_row's rule for one activation block of `block` elements from
 * its max|x| (bad: the block holds a NaN or an infinity): the scale *d and
 * the factor *id by which each element is multiplied and rounded to its
 * integer (qd_q8).  K super-blocks (256) take llama.cpp's Q8_K rule, id =
 * 127 / amax and d = 1 / id, so that greedy tokens on a K-quant file equal
 * llama.cpp's up to the float order of its sums; 32-element blocks d =
 * amax / 127 and id = 1 / d.  Returns 1 where every integer is 0: a bad
 * block (d NaN, which the products carry into the row), an all-zero one or
 * one so small that id overflows (d 0). */
QD_FN int qd_q8_scale(float amax, int bad, int block, float *d, float *id) {
    *id = 0.0f;
    if (bad) { *d = NAN; return 1; }
    const float d32 = qd_div(amax, 127.0f);
    const float f = block == 256 ? qd_div(127.0f, amax) : qd_div(1.0f, d32);   /* amax 0: inf */
    if (!(f <= 3.402823466e38f)) { *d = 0.0f; return 1; }
    *id = f;
    *d = block == 256 ? qd_div(1.0f, f) : d32;
    return 0;
}

/* quant_q8_row's integer of element x of a block of factor id
 * (qd_q8_scale): 0 where the block's integers all are, else x times id
 * rounded to nearest even, in [-127, 127]. */
QD_FN int qd_q8(float x, float id, int zero) {
    if (zero) return 0;
    const float v = rintf(qd_mul(x, id));
    return v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;
}

/* Element e of block blk dequantised: quant_dequant_row's value, step for
 * step (every product exact, so only the last addition rounds). */
QD_FN float qd_dequant(DType dt, const uint8_t *blk, int e) {
    const int g = e / 32;
    uint32_t w[8];
    qd_unit(dt, blk, g, w);
    const int l = e % 32;
    uint32_t word = 0;
    for (int k = 0; k < 8; k++) word = k == l / 4 ? w[k] : word;   /* no dynamic index: w stays in registers */
    const int q = dt == DT_Q8_0 || dt == DT_IQ4_NL || dt == DT_IQ4_XS ? (int8_t)(word >> 8 * (l % 4)) : (int)(word >> 8 * (l % 4) & 0xFF);
    const float d = qd_half(blk + qd_d_at(dt));
    switch (dt) {
    case DT_Q4_1: case DT_Q5_1: return qd_add(qd_mul((float)q, d), qd_half(blk + 2));
    case DT_Q4_K: case DT_Q5_K: {
        int sc, mn;
        qd_k_scale(blk, g, &sc, &mn);
        return qd_sub(qd_mul(qd_mul(d, (float)sc), (float)q), qd_mul(qd_half(blk + 2), (float)mn));
    }
    case DT_Q6_K: return qd_mul(qd_mul(d, (float)((const int8_t *)blk)[192 + e / 16]), (float)(q - 32));
    case DT_Q3_K: return qd_mul(qd_mul(d, (float)qd_q3k_scale(blk, e / 16)), (float)(q - 4));
    case DT_Q2_K: return qd_sub(qd_mul(qd_mul(d, (float)(blk[e / 16] & 15)), (float)q), qd_mul(qd_half(blk + 82), (float)(blk[e / 16] >> 4)));
    case DT_IQ4_XS: return qd_mul(qd_mul(d, (float)qd_iq4xs_scale(blk, g)), (float)q);
    case DT_Q4_0: return qd_mul((float)(q - 8), d);
    case DT_Q5_0: return qd_mul((float)(q - 16), d);
    default: return qd_mul((float)q, d);   /* Q8_0, IQ4_NL */
    }
}
#endif
