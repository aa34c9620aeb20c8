/* Products of weights kept in GGUF's block types (DT_Q8_0 .. DT_Q3_K,
 * kernels/base/quant.h) on the GPU, and their embedding rows: the twins of
 * kernels/cpu/matmul_quant.c, whose header states the contract.
 *
 * Per product the n tokens' activation rows are quantised once
 * (q8_act_kernel: quant_q8_row's rule, blocks of 32 for the 32-element
 * types, of 256 for the K types), then qmm_kernel multiplies: a warp per
 * weight row and NT tokens (1, 2 or 4 for decode and chain drafts, the
 * GEMV; 8 a tile for trees and prefill, the grid's y over the token tiles),
 * its lanes on 32 units of 32 elements at a time (a 32-element block is a
 * unit, a K super-block 8).  A lane unpacks its unit of weights once and
 * multiplies it by each of the tile's tokens (dp4a), the K types' 8 lanes
 * of a super-block add their parts (integers, exact), and the block's
 * float terms (qd_terms) go to shared memory; then lane t runs token t's
 * chain over those blocks in order.  The steps are kernels/base/
 * quant_dot.h's, which tests/test_cuda.c also runs on the host.
 *
 * Exact: every result equals the CPU backend's bit for bit, wherever both
 * are finite: the activations' integers and scales are quant_q8_row's (the
 * same IEEE operations: max, a correctly rounded division by 127 and
 * reciprocal, a product, rint), each block's sums are the same integers
 * (exact in int32, so how they are added cannot matter), and the float
 * steps are the contract's: (float)isum, the scale products rounded once
 * (__fmul_rn, never fused), and one fmaf chain per (row, token) over the
 * blocks in order from 0.  So a token's result does not depend on the
 * token count, NT, the tile or matmul_many's grouping either, and greedy
 * speculative decoding on the GPU stays lossless.  A NaN or infinite
 * activation or scale gives NaN or an infinity where the CPU does, its
 * NaN's payload possibly another.
 *
 * Embedding rows (qembed_kernel) are qd_dequant's: quant_dequant_row's
 * value step for step, each element's products exact. */
#include "kernels/cuda/common.cuh"
#include "kernels/base/quant_dot.h"
#include <string.h>

#define QW 8          /* warps, and so weight rows, per block */
#define QGROUP_MAX 4  /* weights per launch (q/k/v, gate/up) */

/* A product's activations quantised: q[n][C]; per token and block the
 * scale d[n][C / block] and (blocks of 32) d times the block's integer sum
 * sd[n][C / 32]; the integer sums per 16, s16[n][C / 16]. */
struct QAct {
    const int8_t *q;
    const float *d, *sd;
    const int *s16;
};

/* ---- activations ---------------------------------------------------------
 * A warp per (token, block): lane l holds elements l·E .. l·E + E - 1. */
template <int BLOCK>
__global__ void __launch_bounds__(256) q8_act_kernel(const float *__restrict__ x, int C, size_t blocks,
                                                     int8_t *__restrict__ q, float *__restrict__ d,
                                                     float *__restrict__ sd, int *__restrict__ s16) {
    constexpr int E = BLOCK / 32, LANES16 = 16 / E;   /* lanes per 16 elements */
    const size_t gw = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, nb = C / BLOCK;
    if (gw >= blocks) return;   /* whole warps leave together */
    const size_t t = gw / nb;
    const int b = (int)(gw % nb);
    const size_t at = t * C + (size_t)b * BLOCK + lane * E;
    float v[E], amax = 0.0f;
    int bad = 0;
#pragma unroll
    for (int i = 0; i < E; i++) {
        v[i] = x[at + i];
        const float a = fabsf(v[i]);
        bad |= !(a <= 3.402823466e38f);   /* NaN or infinite */
        amax = fmaxf(amax, a);            /* a NaN is skipped, as the CPU's comparison does */
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    bad = __any_sync(0xffffffffu, bad);
    float db, id;
    const int zero = qd_q8_scale(amax, bad, BLOCK, &db, &id);
    int s = 0;
#pragma unroll
    for (int i = 0; i < E; i++) {
        const int qi = qd_q8(v[i], id, zero);
        q[at + i] = (int8_t)qi;
        s += qi;
    }
    for (int o = 1; o < LANES16; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane % LANES16 == 0) s16[t * (C / 16) + (size_t)b * (BLOCK / 16) + lane / LANES16] = s;
    if (lane == 0) d[t * nb + b] = db;
    if (BLOCK == 32) {
        const int s32 = s + __shfl_xor_sync(0xffffffffu, s, 16);
        if (lane == 0) sd[t * nb + b] = __fmul_rn(db, (float)s32);
    }
}

/* ---- products ------------------------------------------------------------ */
/* The weights of one launch, of one type and width, their rows one after
 * another along the grid (weight i's end at global row end[i]); each row's
 * sums are what a launch of its weight alone gives. */
struct QGroup {
    float *out[QGROUP_MAX];
    const uint8_t *w[QGROUP_MAX];
    int R[QGROUP_MAX], end[QGROUP_MAX];
    int count;
};

static constexpr __host__ __device__ int q_block_bytes(int dt) {
    return dt == DT_Q8_0 ? 34 : dt == DT_Q4_0 || dt == DT_IQ4_NL ? 18 : dt == DT_Q4_1 ? 20 : dt == DT_Q5_0 ? 22
         : dt == DT_Q5_1 ? 24 : dt == DT_Q4_K ? 144 : dt == DT_Q5_K ? 176 : dt == DT_IQ4_XS ? 136
         : dt == DT_Q2_K ? 84 : dt == DT_Q3_K ? 110 : 210;
}
static constexpr __host__ __device__ bool q_is_k(int dt) {
    return dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q6_K || dt == DT_IQ4_XS || dt == DT_Q2_K || dt == DT_Q3_K;
}
static constexpr __host__ __device__ int q_terms(int dt) {
    return dt == DT_Q4_1 || dt == DT_Q5_1 || dt == DT_Q4_K || dt == DT_Q5_K || dt == DT_Q2_K ? 2 : 1;
}

/* out[t][row] for tokens [t_base + blockIdx.y·NT, + NT) and row = this
 * warp's: the lanes' exact unit sums, then lane t's chain (header). */
template <int DT, int NT>
__global__ void __launch_bounds__(QW * 32, 1) qmm_kernel(QGroup g, QAct a, int C, int n, int t_base) {
    constexpr DType dt = (DType)DT;
    constexpr int UPB = q_is_k(DT) ? 8 : 1, BB = q_block_bytes(DT), TERMS = q_terms(DT);
    __shared__ float ta[QW][NT][64], tb[QW][NT][64];   /* per block of a chunk: TERMS fma operands */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int grow = blockIdx.x * QW + warp;
    int row = -1, R = 0;
    const uint8_t *wb = NULL;
    float *out = NULL;
#pragma unroll
    for (int k = 0; k < QGROUP_MAX; k++)   /* constant indices: the group stays in registers */
        if (k < g.count && grow < g.end[k] && grow >= (k ? g.end[k - 1] : 0)) {
            row = grow - (k ? g.end[k - 1] : 0);
            R = g.R[k];
            wb = g.w[k];
            out = g.out[k];
        }
    if (row < 0) return;   /* past the last row: whole warps leave together */
    const int units = C / 32, nb = units / UPB;
    const uint8_t *__restrict__ wr = wb + (size_t)row * nb * BB;
    const int t0 = t_base + blockIdx.y * NT, nt = n - t0 < NT ? n - t0 : NT;
    float acc = 0.0f;
    for (int u0 = 0; u0 < units; u0 += 32) {
        const int u = u0 + lane, b = u / UPB, sub = u % UPB;
        const bool valid = u < units;
        const uint8_t *blk = wr + (size_t)b * BB;
        uint32_t w[8];
        if (valid) qd_unit(dt, blk, sub, w);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;   /* the same for every lane */
            const size_t tok = (size_t)(t0 + t);
            int isum = 0, msum = 0;
            if (valid) {
                const int4 *xp = (const int4 *)(a.q + tok * C + 32 * (size_t)u);
                const int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
                const uint32_t xw[8] = {(uint32_t)x0.x, (uint32_t)x0.y, (uint32_t)x0.z, (uint32_t)x0.w,
                                        (uint32_t)x1.x, (uint32_t)x1.y, (uint32_t)x1.z, (uint32_t)x1.w};
                const int *s = a.s16 + tok * (C / 16) + 2 * (size_t)u;
                qd_unit_sums(dt, blk, sub, w, xw, __ldg(s), __ldg(s + 1), &isum, &msum);
            }
#pragma unroll
            for (int o = 1; o < UPB; o <<= 1) {   /* a super-block's 8 lanes: integers, exact */
                isum += __shfl_xor_sync(0xffffffffu, isum, o);
                msum += __shfl_xor_sync(0xffffffffu, msum, o);
            }
            if (valid && sub == 0) {
                const size_t at = tok * nb + b;
                float ra[2], rb[2];
                qd_terms(dt, blk, isum, msum, __ldg(a.d + at), UPB == 1 ? __ldg(a.sd + at) : 0.0f, ra, rb);
                const int slot = TERMS * (b - u0 / UPB);
#pragma unroll
                for (int k = 0; k < TERMS; k++) { ta[warp][t][slot + k] = ra[k]; tb[warp][t][slot + k] = rb[k]; }
            }
        }
        __syncwarp();
        if (lane < nt) {
            const int blocks = nb - u0 / UPB < 32 / UPB ? nb - u0 / UPB : 32 / UPB;
            for (int k = 0; k < TERMS * blocks; k++) acc = fmaf(ta[warp][lane][k], tb[warp][lane][k], acc);
        }
        __syncwarp();
    }
    if (lane < nt) out[(size_t)(t0 + lane) * R + row] = acc;
}

/* NT tokens a warp: 1, 2 or 4 when n is at most that (the GEMV), else 8. */
template <int DT>
static void qmm_launch(const QGroup &g, const QAct &a, int C, int n) {
    const int nt = n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
    const unsigned gx = cu_blocks((size_t)g.end[g.count - 1], QW);
    for (int t_base = 0; t_base < n; t_base += 65535 * nt) {   /* gridDim.y limit */
        const int tiles = (n - t_base + nt - 1) / nt;
        const dim3 grid(gx, (unsigned)(tiles < 65535 ? tiles : 65535));
        switch (nt) {
        case 1: cu_launch((qmm_kernel<DT, 1>), grid, QW * 32, 0, g, a, C, n, t_base); break;
        case 2: cu_launch((qmm_kernel<DT, 2>), grid, QW * 32, 0, g, a, C, n, t_base); break;
        case 4: cu_launch((qmm_kernel<DT, 4>), grid, QW * 32, 0, g, a, C, n, t_base); break;
        default: cu_launch((qmm_kernel<DT, 8>), grid, QW * 32, 0, g, a, C, n, t_base); break;
        }
        CU_LAUNCHED();
    }
}

static void qmm(DType dt, const QGroup &g, const QAct &a, int C, int n) {
    switch (dt) {
    case DT_Q8_0: qmm_launch<DT_Q8_0>(g, a, C, n); break;
    case DT_Q4_0: qmm_launch<DT_Q4_0>(g, a, C, n); break;
    case DT_Q4_1: qmm_launch<DT_Q4_1>(g, a, C, n); break;
    case DT_Q5_0: qmm_launch<DT_Q5_0>(g, a, C, n); break;
    case DT_Q5_1: qmm_launch<DT_Q5_1>(g, a, C, n); break;
    case DT_Q4_K: qmm_launch<DT_Q4_K>(g, a, C, n); break;
    case DT_Q5_K: qmm_launch<DT_Q5_K>(g, a, C, n); break;
    case DT_IQ4_NL: qmm_launch<DT_IQ4_NL>(g, a, C, n); break;
    case DT_IQ4_XS: qmm_launch<DT_IQ4_XS>(g, a, C, n); break;
    case DT_Q2_K: qmm_launch<DT_Q2_K>(g, a, C, n); break;
    case DT_Q3_K: qmm_launch<DT_Q3_K>(g, a, C, n); break;
    default: qmm_launch<DT_Q6_K>(g, a, C, n); break;
    }
}

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* Bytes of one kind's activations (QAct) for n tokens of width C. */
static size_t act_bytes(int block, int n, int C) {
    const size_t nb = (size_t)n * (C / block);
    return align256((size_t)n * C) + 2 * align256(nb * sizeof(float)) + align256((size_t)n * (C / 16) * sizeof(int));
}

/* x[n][C] quantised in blocks of `block` into ws (act_bytes of it). */
static bool act_make(QAct *a, char *ws, const float *x, int block, int n, int C) {
    const size_t nb = (size_t)n * (C / block);
    int8_t *q = (int8_t *)ws;
    float *d = (float *)(ws + align256((size_t)n * C));
    float *sd = (float *)((char *)d + align256(nb * sizeof(float)));
    int *s16 = (int *)((char *)sd + align256(nb * sizeof(float)));
    const unsigned grid = cu_blocks(nb * 32, 256);
    if (block == 32) cu_launch(q8_act_kernel<32>, grid, 256, 0, x, C, nb, q, d, sd, s16);
    else cu_launch(q8_act_kernel<256>, grid, 256, 0, x, C, nb, q, d, sd, s16);
    CU_LAUNCHED_R(false);
    a->q = q; a->d = d; a->sd = sd; a->s16 = s16;
    return true;
}

/* Every weight of ws is a block type, all of width cols (the backend's
 * matmul and matmul_many send them here).  The activations are quantised
 * once per kind of block; runs of weights of one type share a launch. */
void cu_quant_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    if (n <= 0 || count <= 0) return;
    const int C = (int)ws[0]->cols;
    bool need[2] = {false, false};   /* blocks of 32, of 256 */
    for (int i = 0; i < count; i++) need[quant_act_block(ws[i]->dtype) == 256] = true;
    const size_t b32 = need[0] ? act_bytes(32, n, C) : 0, bk = need[1] ? act_bytes(256, n, C) : 0;
    char *w = (char *)cu_workspace(WS_QUANT, b32 + bk);
    if (!w) return;
    QAct act[2];
    memset(act, 0, sizeof act);   /* padding too: its bytes are signed (cu_launch) */
    if (need[0] && !act_make(&act[0], w, x, 32, n, C)) return;
    if (need[1] && !act_make(&act[1], w + b32, x, 256, n, C)) return;
    for (int i = 0; i < count;) {
        QGroup g;
        memset(&g, 0, sizeof g);
        const DType dt = ws[i]->dtype;
        for (int end = 0; i < count && g.count < QGROUP_MAX && ws[i]->dtype == dt; i++, g.count++) {
            g.out[g.count] = outs[i];
            g.w[g.count] = (const uint8_t *)ws[i]->data;
            g.R[g.count] = (int)ws[i]->rows;
            g.end[g.count] = end += (int)ws[i]->rows;
        }
        qmm(dt, g, act[quant_act_block(dt) == 256], C, n);
    }
}

/* ---- embedding rows --------------------------------------------------------- */
__global__ void qembed_kernel(float *__restrict__ out, const uint8_t *__restrict__ table, int dt, int64_t rows,
                              int64_t row_bytes, int E, int BB, const int *__restrict__ tokens, int cols) {
    const int t = blockIdx.y, id = tokens[t];
    const bool in = id >= 0 && id < rows;   /* outside: a row of zeros, as the CPU's */
    const uint8_t *row = table + (in ? (int64_t)id * row_bytes : 0);
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x)
        out[(size_t)t * cols + j] = in ? qd_dequant((DType)dt, row + (size_t)(j / E) * BB, j % E) : 0.0f;
}

void cu_quant_embed(float *out, const Weight *table, const int *tokens, int n) {
    const int cols = (int)table->cols;
    const int64_t rb = quant_row_bytes(table->dtype, table->cols);
    const int E = (int)quant_block_elems(table->dtype), BB = (int)quant_block_bytes(table->dtype);
    for (int t0 = 0; t0 < n; t0 += 65535) {   /* gridDim.y limit */
        const int nt = n - t0 < 65535 ? n - t0 : 65535;
        const dim3 grid(cu_blocks(cols, 256) < 64 ? cu_blocks(cols, 256) : 64, nt);
        cu_launch(qembed_kernel, grid, 256, 0, out + (size_t)t0 * cols, (const uint8_t *)table->data,
                  (int)table->dtype, (int64_t)table->rows, rb, E, BB, tokens + t0, cols);
        CU_LAUNCHED();
    }
}
