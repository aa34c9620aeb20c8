/* GGUF's block types: sizes, unpacking, ggml's dequantisation and the Q8
 * activations (quant.h). */
#include "kernels/base/quant_dot.h"
#include "kernels/base/util.h"
#include <math.h>
#include <string.h>

/* Dequantisation computes a*b - c as ggml's reference source writes it, no
 * fused multiply-add (GCC contracts none under -std=c11, clang would by
 * default); with these types both give the same bits (see quant_dequant_row). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static const struct { int elems, bytes; } BLOCKS[DT_COUNT] = {
    [DT_Q8_0] = {32, 34},   [DT_Q4_0] = {32, 18},   [DT_Q4_1] = {32, 20},   [DT_Q5_0] = {32, 22},
    [DT_Q5_1] = {32, 24},   [DT_Q4_K] = {256, 144}, [DT_Q5_K] = {256, 176}, [DT_Q6_K] = {256, 210}, [DT_IQ4_NL] = {32, 18},
    [DT_IQ4_XS] = {256, 136}, [DT_Q2_K] = {256, 84}, [DT_Q3_K] = {256, 110}};

int dtype_is_quant(DType t) { return (unsigned)t < DT_COUNT && BLOCKS[t].elems > 0; }

int64_t quant_block_elems(DType t) {
    if (dtype_is_quant(t)) return BLOCKS[t].elems;
    return dtype_size(t) ? 1 : 0;
}

size_t quant_block_bytes(DType t) { return dtype_is_quant(t) ? (size_t)BLOCKS[t].bytes : dtype_size(t); }

int64_t quant_row_bytes(DType t, int64_t cols) {
    const int64_t e = quant_block_elems(t);
    if (!e) { err_set("type %s has no row size", dtype_name(t)); return -1; }
    if (cols <= 0 || cols % e) {
        err_set("%s rows of %lld are not whole blocks of %lld", dtype_name(t), (long long)cols, (long long)e);
        return -1;
    }
    return cols / e * (int64_t)quant_block_bytes(t);
}

/* NaN or infinite: every exponent bit set (F32 and BF16 8 bits, F16 5) */
static inline int bad5(uint8_t hi) { return (hi & 0x7C) == 0x7C; }
#define RUN 4096   /* elements a branch-free pass looks at (a constant count, so GCC vectorises it) */

/* 1 when one of the RUN elements at p (16 or 32 bits, exponent mask m in
 * the top half) is NaN or infinite */
static int run_bad16(const uint8_t *p, uint16_t m) {
    int any = 0;
    for (int i = 0; i < RUN; i++) {
        uint16_t v;
        memcpy(&v, p + 2 * i, 2);
        any |= (v & m) == m;
    }
    return any;
}
static int run_bad32(const uint8_t *p) {
    int any = 0;
    for (int i = 0; i < RUN; i++) {
        uint32_t v;
        memcpy(&v, p + 4 * i, 4);
        any |= (v & 0x7F800000u) == 0x7F800000u;
    }
    return any;
}

static int elem_bad(const uint8_t *p, int64_t i, size_t size, uint16_t m) {
    uint16_t hi;
    memcpy(&hi, p + (size_t)i * size + size - 2, 2);   /* F32: its top half */
    return (hi & m) == m;
}

static int64_t first_bad_element(const uint8_t *p, int64_t n, size_t size, uint16_t m) {
    int64_t i0 = 0;
    for (; i0 + RUN <= n; i0 += RUN)
        if (size == 4 ? run_bad32(p + (size_t)i0 * 4) : run_bad16(p + (size_t)i0 * 2, m)) break;
    for (int64_t i = i0; i < n; i++)
        if (elem_bad(p, i, size, m)) return i;
    return -1;
}

void quant_half_offsets(DType t, int *d_at, int *m_at) {
    *d_at = qd_d_at(t);
    *m_at = t == DT_Q4_1 || t == DT_Q5_1 || t == DT_Q4_K || t == DT_Q5_K ? 2 : t == DT_Q2_K ? 82 : -1;
}

int64_t quant_first_nonfinite(DType t, const void *data, int64_t n) {
    const uint8_t *p = data;
    if (t == DT_F32 || t == DT_BF16 || t == DT_F16) return first_bad_element(p, n, dtype_size(t), t == DT_F16 ? 0x7C00 : 0x7F80);
    if (!dtype_is_quant(t)) return -1;
    int d_at, m_at;
    quant_half_offsets(t, &d_at, &m_at);
    const int64_t blocks = n / BLOCKS[t].elems;
    for (int64_t b = 0; b < blocks; b++) {
        const uint8_t *blk = p + (size_t)b * (size_t)BLOCKS[t].bytes;
        if (bad5(blk[d_at + 1]) || (m_at >= 0 && bad5(blk[m_at + 1]))) return b * BLOCKS[t].elems;
    }
    return -1;
}

float quant_half(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF, u;
    if (exp == 0) {
        if (!man) u = sign;
        else {   /* subnormal: renormalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            u = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
        }
    } else if (exp == 31) u = sign | 0x7F800000u | man << 13;
    else u = sign | (exp + 127 - 15) << 23 | man << 13;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return quant_half(h);
}

/* the 5-bit integers of a Q5_0 / Q5_1 block: nibbles as Q4_0, and bit j of
 * the little-endian u32 qh is the fifth bit of element j */
static void q5_ints(const uint8_t *qh4, const uint8_t *qs, int16_t *q) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (int16_t)((qs[j] & 0x0F) | (int)(qh >> j & 1) << 4);
        q[j + 16] = (int16_t)((qs[j] >> 4) | (int)(qh >> (j + 16) & 1) << 4);
    }
}

/* The 12 bytes of a Q4_K / Q5_K super-block's 6-bit scales and minimums:
 * bytes 0-3 hold the low 6 bits of scales 0-3, bytes 4-7 those of
 * minimums 0-3; sub-blocks 4-7 take their low 4 bits from bytes 8-11
 * (scale in the low nibble, minimum in the high) and their top 2 bits from
 * the top 2 bits of bytes 0-3 (scales) and 4-7 (minimums). */
void quant_k_scales(const uint8_t *s, int sc[8], int mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0x0F) | (s[j] >> 6) << 4;
        mn[j + 4] = (s[j + 8] >> 4) | (s[j + 4] >> 6) << 4;
    }
}

/* Q4_K / Q5_K: sub-block s holds elements 32s..32s+31, the low (s even) or
 * high (s odd) nibbles of qs[32(s/2) + l], and for Q5_K bit s of qh[l] as
 * a fifth bit. */
static void unpack_k45(const uint8_t *p, const uint8_t *qh, const uint8_t *qs, QuantBlock *b) {
    b->d = half_at(p);
    b->m = half_at(p + 2);
    b->sub = 32;
    quant_k_scales(p + 4, b->sc, b->mn);
    for (int j = 0; j < 4; j++) {   /* sub-blocks 2j (low nibbles) and 2j + 1 (high) share 32 bytes */
        const uint8_t *q = qs + 32 * j;
        for (int l = 0; l < 32; l++) {
            const int h0 = qh ? (qh[l] >> (2 * j) & 1) << 4 : 0, h1 = qh ? (qh[l] >> (2 * j + 1) & 1) << 4 : 0;
            b->q[64 * j + l] = (int16_t)((q[l] & 0x0F) | h0);
            b->q[64 * j + 32 + l] = (int16_t)((q[l] >> 4) | h1);
        }
    }
}

/* Q6_K: in half h (128 elements; ql + 64h, qh + 32h), element 32k + l
 * (k = 0..3) has its low 4 bits in ql[32(k & 1) + l] (the low nibble for
 * k < 2, else the high) and its top 2 bits at bit 2k of qh[l]; each 16
 * elements share an int8 scale. */
static void unpack_q6_k(const uint8_t *p, QuantBlock *b) {
    b->d = half_at(p + 208);
    b->off = 32;
    b->sub = 16;
    for (int i = 0; i < 16; i++) b->sc[i] = (int8_t)p[192 + i];
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = p + 64 * h, *qh = p + 128 + 32 * h;
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int lo = ql[32 * (k & 1) + l] >> (4 * (k >> 1)) & 0x0F, hi = qh[l] >> (2 * k) & 3;
                b->q[128 * h + 32 * k + l] = (int16_t)(lo | hi << 4);
            }
    }
}

/* Q2_K's integers and Q3_K's low two bits: element 128h + 32j + l (j =
 * 0..3) is bits 2j, 2j + 1 of qs[32h + l] */
static void two_bit_ints(const uint8_t *qs, int16_t *q) {
    for (int e = 0; e < 256; e++) q[e] = (int16_t)(qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3);
}

/* Q2_K: its integers at byte 16 (two_bit_ints); sub-block s of 16 takes
 * scales[s] (byte s): the scale in its low nibble, the minimum in its high. */
static void unpack_q2_k(const uint8_t *p, QuantBlock *b) {
    b->d = half_at(p + 80);
    b->m = half_at(p + 82);
    b->sub = 16;
    for (int s = 0; s < 16; s++) {
        b->sc[s] = p[s] & 0x0F;
        b->mn[s] = p[s] >> 4;
    }
    two_bit_ints(p + 16, b->q);
}

/* Q3_K: element 128h + 32j + l has its low two bits in qs at byte 32
 * (two_bit_ints) and its third at bit 4h + j of hmask[l] (byte l); sub-block s of 16 its 6-bit scale, the low 4 bits in
 * nibble s / 8 of byte 96 + s % 8, the top 2 at bits 2 (s / 4) of byte
 * 104 + s % 4, taken as sc - 32; the integer's offset is 4. */
static void unpack_q3_k(const uint8_t *p, QuantBlock *b) {
    b->d = half_at(p + 108);
    b->off = 4;
    b->sub = 16;
    for (int s = 0; s < 16; s++) b->sc[s] = qd_q3k_scale(p, s);
    two_bit_ints(p + 32, b->q);
    for (int e = 0; e < 256; e++) b->q[e] = (int16_t)(b->q[e] | (p[e % 32] >> (e / 32) & 1) << 2);
}

/* 32 grid integers of IQ4_NL / IQ4_XS from 16 bytes of nibbles (element
 * j < 16 the low nibble of qs[j], j >= 16 the high nibble of qs[j - 16]) */
static void iq4_ints(const uint8_t *qs, int16_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int16_t)qd_iq4nl(qs[j] & 0x0Fu);
        q[j + 16] = (int16_t)qd_iq4nl(qs[j] >> 4);
    }
}

void quant_unpack(DType t, const void *block, QuantBlock *b) {
    const uint8_t *p = block;
    /* every field but q past the type's elements (never read): a repack
     * unpacks every block of a model once */
    b->off = b->sub = 0;
    b->d = b->m = 0;
    memset(b->sc, 0, sizeof b->sc);
    memset(b->mn, 0, sizeof b->mn);
    switch (t) {
    case DT_Q8_0:
        b->d = half_at(p);
        for (int j = 0; j < 32; j++) b->q[j] = (int8_t)p[2 + j];
        break;
    case DT_Q4_0: case DT_Q4_1: {
        const int m = t == DT_Q4_1;
        b->d = half_at(p);
        if (m) b->m = half_at(p + 2);
        else b->off = 8;
        for (int j = 0; j < 16; j++) {
            b->q[j] = p[2 + 2 * m + j] & 0x0F;
            b->q[j + 16] = p[2 + 2 * m + j] >> 4;
        }
        break;
    }
    case DT_Q5_0: b->d = half_at(p); b->off = 16; q5_ints(p + 2, p + 6, b->q); break;
    case DT_IQ4_NL: b->d = half_at(p); iq4_ints(p + 2, b->q); break;
    case DT_Q5_1: b->d = half_at(p); b->m = half_at(p + 2); q5_ints(p + 4, p + 8, b->q); break;
    case DT_Q4_K: unpack_k45(p, NULL, p + 16, b); break;
    case DT_Q5_K: unpack_k45(p, p + 16, p + 48, b); break;
    case DT_Q6_K: unpack_q6_k(p, b); break;
    case DT_Q2_K: unpack_q2_k(p, b); break;
    case DT_Q3_K: unpack_q3_k(p, b); break;
    case DT_IQ4_XS:
        b->d = half_at(p);
        b->sub = 32;
        for (int g = 0; g < 8; g++) {
            b->sc[g] = qd_iq4xs_scale(p, g);
            iq4_ints(p + 8 + 16 * g, b->q + 32 * g);
        }
        break;
    default: break;
    }
}

/* One block into y, in the order of ggml's dequantize_row_* (ggml-quants.c),
 * which gguf-py's numpy code (gguf.quants) follows too: d times a sub-block
 * scale first, then times the integer, then the minimum added or taken off.
 * Every product is exact in float (d has 11 significant bits, a sub-block
 * scale and an integer together at most 12: Q6_K's int8 scale and 6-bit
 * integer, IQ4_XS's |ls - 32| <= 32 and a grid integer of at most 7
 * significant bits, Q2_K's 4-bit scale and 2-bit integer, Q3_K's |sc - 32|
 * <= 32 and |q - 4| <= 4; 65504 * 128 * 32 is far from overflow, and half-precision
 * subnormals are normal floats), so only that last addition rounds, and a
 * fused multiply-add would give the same bits. */
static void dequant_block(DType t, const uint8_t *p, float *y) {
    QuantBlock b;
    quant_unpack(t, p, &b);
    const int n = BLOCKS[t].elems;
    if (t == DT_Q4_1 || t == DT_Q5_1) {
        for (int e = 0; e < n; e++) y[e] = (float)b.q[e] * b.d + b.m;
    } else if (b.sub) {
        for (int e = 0; e < n; e++) {
            const float ds = b.d * (float)b.sc[e / b.sub], v = (float)(b.q[e] - b.off);
            y[e] = t == DT_Q6_K || t == DT_Q3_K || t == DT_IQ4_XS ? ds * v : ds * v - b.m * (float)b.mn[e / b.sub];
        }
    } else {
        for (int e = 0; e < n; e++) y[e] = (float)(b.q[e] - b.off) * b.d;
    }
}

int quant_dequant_row(DType t, const void *blocks, float *out, int64_t n) {
    const uint8_t *p = blocks;
    if (quant_row_bytes(t, n ? n : quant_block_elems(t)) < 0) return -1;
    switch (t) {
    case DT_F32: memcpy(out, p, (size_t)n * 4); return 0;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) out[i] = half_at(p + 2 * i);
        return 0;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(out + i, &u, 4);
        }
        return 0;
    default:
        if (!dtype_is_quant(t)) { err_set("type %s does not dequantise", dtype_name(t)); return -1; }
    }
    const int64_t e = BLOCKS[t].elems;
    for (int64_t b = 0; b < n / e; b++) dequant_block(t, p + b * BLOCKS[t].bytes, out + b * e);
    return 0;
}

int quant_act_block(DType t) { return quant_block_elems(t) == 256 ? 256 : 32; }

void quant_q8_row(const float *x, int64_t n, int block_elems, int8_t *q, float *d, int16_t *sums) {
    const int block = block_elems == 256 ? 256 : 32, group = block == 256 ? 16 : 32;
    for (int64_t b = 0; b < n / block; b++) {
        const float *xb = x + b * block;
        int8_t *qb = q + b * block;
        float amax = 0, id;
        int bad = 0;
        for (int j = 0; j < block; j++) {
            const float a = fabsf(xb[j]);
            bad |= !(a <= 3.402823466e38f);   /* NaN or infinite */
            amax = a > amax ? a : amax;
        }
        const int zero = qd_q8_scale(amax, bad, block, &d[b], &id);
        for (int j = 0; j < block; j++) qb[j] = (int8_t)qd_q8(xb[j], id, zero);
        for (int g = 0; g < block / group; g++) {
            int s = 0;
            for (int j = 0; j < group; j++) s += qb[g * group + j];
            sums[b * (block / group) + g] = (int16_t)s;
        }
    }
}

uint16_t quant_f16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));   /* NaN, quiet */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);   /* 65520 and above round to infinity */
    if (a >= 0x38800000u) {   /* normal: exponent rebiased from 127 to 15, 13 bits rounded off */
        const uint32_t r = a - 0x38000000u;
        return (uint16_t)(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
    }
    const int e = (int)(a >> 23);   /* subnormal in half: units of 2^-24 */
    if (e < 102) return (uint16_t)sign;   /* below 2^-25: zero (2^-25 itself ties to even zero below) */
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u, s = (uint32_t)(126 - e), half = 1u << (s - 1);
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

int quant_q4_0_row(const float *x, int64_t n, void *out) {
    if (n <= 0 || n % 32) {
        err_set("Q4_0 rows of %lld are not whole blocks of 32", (long long)n);
        return -1;
    }
    uint8_t *y = out;
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 18) {
        float amax = 0, max = 0;   /* the first element of largest magnitude, with its sign */
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        const float d = max / -8, id = d != 0 ? 1.0f / d : 0.0f;
        const uint16_t h = quant_f16_bits(d);
        memcpy(y, &h, 2);
        for (int j = 0; j < 16; j++) {
            const float lo = x[j] * id + 8.5f, hi = x[16 + j] * id + 8.5f;
            const int qlo = (int)lo < 15 ? (int)lo : 15, qhi = (int)hi < 15 ? (int)hi : 15;
            y[2 + j] = (uint8_t)(qlo | qhi << 4);
        }
    }
    return 0;
}

