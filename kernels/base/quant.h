/* GGUF's block types (DT_Q8_0 .. DT_Q3_K, kernels/base/dtype.h), stored as
 * ggml lays out its blocks, and the one reference for what they mean.
 *
 * Blocks of 32 elements: Q8_0 (f16 d, int8 q[32]; 34 bytes), Q4_0 (f16 d,
 * 16 bytes of nibbles, low nibbles elements 0-15, high 16-31; 18), Q4_1
 * (f16 d, f16 m, nibbles as Q4_0; 20), Q5_0 (f16 d, u32 qh: bit j the fifth
 * bit of element j, nibbles; 22), Q5_1 (f16 d, f16 m, qh, nibbles; 24).
 * Super-blocks of 256: Q4_K (f16 d, f16 dmin, 12 bytes of 6-bit scales and
 * minimums of 8 sub-blocks of 32, 128 bytes of nibbles; 144), Q5_K (as
 * Q4_K with 32 bytes qh before the nibbles; 176), Q6_K (128 bytes of low
 * nibbles, 64 of top 2 bits, 16 int8 scales of 16 elements, f16 d; 210).
 * IQ4_NL (f16 d, nibbles as Q4_0; 18): element e is d times K[nibble], K
 * the sixteen integers of its non-linear grid (qd_iq4nl).  IQ4_XS (f16 d,
 * u16 scales_h, u8 scales_l[4], 128 bytes of nibbles; 136) is a super-block
 * of 256 on the same grid: sub-block j of 32 has the nibbles of an IQ4_NL
 * block at byte 8 + 16j and the 6-bit scale ls_j (low 4 bits nibble j % 2
 * of scales_l[j / 2], top 2 bits bits 2j of scales_h); element e is
 * (d * (ls - 32)) * K[nibble] (qd_iq4xs_scale gives ls - 32).  Q2_K (16
 * bytes of scales, 64 of 2-bit integers, f16 d, f16 dmin; 84): sub-blocks
 * of 16, byte s of the scales sub-block s's 4-bit scale (low nibble) and
 * minimum (high); element 128h + 32j + l is bits 2j of qs[32h + l];
 * element e is (d * sc) * q - dmin * mn.  Q3_K (hmask[32], qs[64], 12
 * bytes of 16 6-bit scales, f16 d; 110): Q2_K's 2-bit layout for the low
 * bits, the third bit of element 128h + 32j + l at bit 4h + j of hmask[l];
 * element e is (d * (sc - 32)) * (q - 4) (qd_q3k_scale gives sc - 32).
 * Element types (F32, F16, BF16, ...) are blocks of 1 here. */
#ifndef C2T_QUANT_H
#define C2T_QUANT_H
#include "kernels/base/dtype.h"

/* 1 for the block types DT_Q8_0 .. DT_Q3_K. */
int dtype_is_quant(DType t);
/* Elements per block: 32 or 256 for a block type, 1 for an element type,
 * 0 for none. */
int64_t quant_block_elems(DType t);
/* Bytes per block (an element type: dtype_size). */
size_t quant_block_bytes(DType t);
/* Bytes of a row of cols elements; -1 with err_set when cols is not a
 * positive number of whole blocks. */
int64_t quant_row_bytes(DType t, int64_t cols);
/* IEEE half precision to F32 (exact; subnormals, inf and NaN kept). */
float quant_half(uint16_t h);
/* F32 to IEEE half precision, rounded to nearest even (as a cast to
 * _Float16 or F16C's vcvtps2ph do; subnormals kept, too large to
 * infinity, NaN quiet), in plain C for every compiler and build. */
uint16_t quant_f16_bits(float x);

/* out[0..n) = the n elements that start at blocks, bit for bit what ggml's
 * dequantize_row_* (and gguf-py's gguf.quants.dequantize) give: d times a
 * sub-block scale first, then times the integer, then the minimum added
 * (Q4_1, Q5_1) or dmin times its minimum taken off (Q4_K, Q5_K, Q2_K).
 * F32, F16 and BF16 rows convert exactly.  A NaN or infinite scale is
 * passed on as ggml computes it.  0, or -1 with err_set for another type
 * or n not whole blocks. */
int quant_dequant_row(DType t, const void *blocks, float *out, int64_t n);

/* One block's integers and scales as stored, nothing rounded: element e
 * is (d * sc[e / sub]) * (q[e] - off) - m * mn[e / sub] for the K types
 * (sub 32; Q6_K, Q3_K: sub 16, no minimum; Q2_K: sub 16; IQ4_XS: sc = ls - 32, no minimum),
 * (q[e] - off) * d for Q4_0, Q5_0, Q8_0, IQ4_NL, q[e] * d + m for Q4_1 and
 * Q5_1 (sub 0: no sub-block scales). */
typedef struct {
    int16_t q[256];       /* unsigned as stored; Q8_0: the int8; IQ4_NL, IQ4_XS: the grid's integers
                             (32-element types: q[0..31]) */
    int off;              /* 8 Q4_0, 16 Q5_0, 32 Q6_K, 4 Q3_K, else 0 */
    float d, m;           /* scale; minimum (Q4_1, Q5_1) or dmin (Q4_K, Q5_K, Q2_K), else 0 */
    int sub;              /* elements per sub-block scale: 32, 16, or 0 */
    int sc[16], mn[16];   /* per sub-block: integer scale (Q6_K's int8, Q3_K's sc - 32) and minimum */
} QuantBlock;
void quant_unpack(DType t, const void *block, QuantBlock *b);
/* The 8 scales and minimums of a Q4_K / Q5_K super-block from its 12
 * packed bytes (the block's bytes 4-15). */
void quant_k_scales(const uint8_t *packed, int sc[8], int mn[8]);

/* Where a block of type t keeps its half-precision scale d (*d_at: 0,
 * Q6_K 208, Q2_K 80, Q3_K 108) and its minimum or dmin (*m_at: Q4_1, Q5_1, Q4_K,
 * Q5_K 2, Q2_K 82; -1 for the others), in bytes from its start. */
void quant_half_offsets(DType t, int *d_at, int *m_at);

/* The index of the first of the n elements at data (n whole blocks for a
 * block type) that is not a finite number, or -1 when all are: an F32,
 * F16 or BF16 element that is NaN or infinite, or an element of a block
 * whose stored scale is (d; Q4_1 and Q5_1's m; Q4_K, Q5_K and Q2_K's dmin),
 * given as the block's first element.  Other types: -1.  Reads bytes, so
 * data need not be aligned. */
int64_t quant_first_nonfinite(DType t, const void *data, int64_t n);

/* Activations as the block products take them (kernels/cpu/matmul_quant.c):
 * blocks of 32 for the 32-element types, of 256 for the K types. */
int quant_act_block(DType t);
/* x[0..n) (n whole blocks of `block`, 32 or 256) to 8-bit integers: per
 * block d = max|x| / 127 (F32) and q = x / d (x times 1/d) rounded to
 * nearest, ties to even, in [-127, 127]; sums[] the sums of q over each 32
 * elements (block 32) or each 16 (block 256: 16 a block).  A block of
 * zeros has d 0; a block holding a NaN or an infinity has d NaN and q 0
 * (its products come out NaN, as an F32 product with them would be NaN or
 * infinite). */
void quant_q8_row(const float *x, int64_t n, int block, int8_t *q, float *d, int16_t *sums);

/* x[0..n) (finite; n whole blocks of 32) as Q4_0 blocks at out, bit for bit
 * what ggml's quantize_row_q4_0_ref (and gguf-py's gguf.quants.quantize)
 * write: per block d = the first element of the largest magnitude, signed,
 * over -8, stored in F16 (to nearest even); element j's nibble
 * min(15, trunc(x[j] * (1/d) + 8.5)) in F32 (1/d taken as 0 where d is 0).
 * 0, or -1 with err_set when n is not whole blocks. */
int quant_q4_0_row(const float *x, int64_t n, void *out);

#endif
