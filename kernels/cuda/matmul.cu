/* Weight products out[n][R] = x[n][C] · Wᵀ (W row-major [R][C] in F32, F16
 * or BF16, activations F32), embedding gather and bias.  Weights in GGUF's
 * block types go to matmul_quant.cu.
 *
 * Three paths, all with F32 accumulation:
 *  - n <= GEMV_MAX tokens (decode, chain drafts): a warp-per-row kernel that
 *    reads every weight byte once in its storage dtype and multiplies by the
 *    F32 activations — exactly the CPU backend's arithmetic (F32 products of
 *    widened weights), and memory-bandwidth bound as decode is; matmul_many's
 *    weights (q/k/v, gate/up) in one launch.
 *  - up to TILED_N_MAX tokens and fewer than --cuda-tiled-max (2^24)
 *    multiply-adds (tree verification and EAGLE expansions of small models,
 *    the small projections of larger ones): a tiled kernel with the same
 *    arithmetic on the CUDA cores; matmul_many's weights in one launch.  Products this
 *    small do not pay for tensor cores: the split GEMM below costs three
 *    launches (split, GEMM, add the halves) plus cuBLAS's host overhead, and
 *    the host enqueueing ops is the bottleneck there (docs/cuda.md).
 *  - more work (prefill, large trees, large models): cuBLAS
 *    cublasGemmEx.  F32 weights: A, B, C in F32 with CUBLAS_COMPUTE_32F
 *    (default math mode: true FP32, no TF32).  F16/BF16 weights: cuBLAS has no
 *    F16×F32 mixed GEMM, so the activations are converted — but not just
 *    rounded: each activation is split into hi = round(x) and lo = round(x -
 *    hi) in the weight's dtype and both halves go through one GemmEx (A =
 *    the weights as stored, B = [hi; lo] as 2n columns, C in F32,
 *    CUBLAS_COMPUTE_32F on tensor cores); out = out_hi + out_lo.  x is then
 *    represented to ~16 (BF16) / ~22 (F16) significant bits instead of 8 /
 *    11, which keeps the result within ~1e-5 relative of the F32 product
 *    (the parity tests' 1e-4 bound) at the cost of twice the tensor-core
 *    work.  Above SPLIT_STACK_MAX tokens the two halves are two GEMMs
 *    accumulating into out (beta = 1) instead of one stacked GEMM, so the
 *    workspace stays bounded.  BackendOptions.cuda_fast_gemm drops the lo
 *    half (activations rounded to the weight dtype, as a native F16/BF16
 *    forward in torch does): faster, not bit-faithful to the CPU backend. */
#include "kernels/cuda/common.cuh"
extern "C" {
#include "kernels/base/quant.h"
}
#include <string.h>
#include <stdlib.h>

#define GEMV_MAX 4
#define GEMV_THREADS 256
/* a lane's vector steps whose weight loads are in flight together: 4 for
 * one token (decode), 2 for several, whose activations take the registers */
#define GEMV_AHEAD(n) ((n) == 1 ? 4 : 2)
#define SPLIT_STACK_MAX 64
#define TILED_N_MAX 64

/* ---- GEMV: one warp per output row ------------------------------------------- */
template <typename WT> struct Ld;
template <> struct Ld<float> {
    static __device__ __forceinline__ float one(const float *p) { return __ldg(p); }
    static __device__ __forceinline__ void eight(const float *p, float *o) {
        float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
        o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
    }
};
template <> struct Ld<__half> {
    static __device__ __forceinline__ float one(const __half *p) { return __half2float(p[0]); }
    static __device__ __forceinline__ void eight(const __half *p, float *o) {
        const uint4 u = __ldg((const uint4 *)p);   /* halves widened from the words: no local copy */
        const unsigned v[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = __half2float(__ushort_as_half((unsigned short)(v[i] & 0xffffu)));
            o[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(v[i] >> 16)));
        }
    }
};
template <> struct Ld<__nv_bfloat16> {
    static __device__ __forceinline__ float one(const __nv_bfloat16 *p) { return __bfloat162float(p[0]); }
    static __device__ __forceinline__ void eight(const __nv_bfloat16 *p, float *o) {
        const uint4 u = __ldg((const uint4 *)p);   /* a BF16 is the top half of its F32 */
        const unsigned v[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            o[2 * i] = __uint_as_float(v[i] << 16);
            o[2 * i + 1] = __uint_as_float(v[i] & 0xffff0000u);
        }
    }
};

/* The weights of one GEMV launch: matmul's one, or matmul_many's (q/k/v,
 * gate/up) of the same dtype and width, their rows one grid after another
 * (weight i's rows end at global row end[i]).  A warp computes a row exactly
 * as it would in a launch of that weight alone. */
#define GEMV_GROUP_MAX 4
struct GemvGroup {
    float *out[GEMV_GROUP_MAX];
    const void *w[GEMV_GROUP_MAX];
    int end[GEMV_GROUP_MAX];
    int count;
};

/* VEC: C % 8 == 0 and x and every weight 16-byte aligned, so a lane reads 8
 * weights and 8 activations per step with vector loads. */
template <int N, typename WT, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS) gemv_kernel(GemvGroup g, const float *__restrict__ x, int C) {
    const int grow = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (grow >= g.end[g.count - 1]) return;   /* whole warps leave together */
    int i = 0;
    while (grow >= g.end[i]) i++;
    const int row = grow - (i ? g.end[i - 1] : 0), R = g.end[i] - (i ? g.end[i - 1] : 0);
    float *__restrict__ out = g.out[i];
    const WT *wr = (const WT *)g.w[i] + (size_t)row * C;
    float acc[N];
#pragma unroll
    for (int t = 0; t < N; t++) acc[t] = 0.0f;
    if (VEC) {
        /* A steps' weights are loaded before the first is used, so a lane
         * waits on memory once per A steps rather than once a step (a
         * 2048-wide BF16 row is 8 steps a lane); the sums run in the same
         * order as one step at a time. */
        constexpr int A = GEMV_AHEAD(N);
        for (int c0 = lane * 8; c0 < C; c0 += A * 32 * 8) {
            float wv[A][8];
#pragma unroll
            for (int u = 0; u < A; u++)
                if (c0 + u * 32 * 8 < C) Ld<WT>::eight(wr + c0 + u * 32 * 8, wv[u]);
#pragma unroll
            for (int u = 0; u < A; u++) {
                const int c = c0 + u * 32 * 8;
                if (c >= C) break;
#pragma unroll
                for (int t = 0; t < N; t++) {
                    const float4 *xp = (const float4 *)(x + (size_t)t * C + c);
                    float4 a = __ldg(xp), b = __ldg(xp + 1);
                    acc[t] += wv[u][0] * a.x + wv[u][1] * a.y + wv[u][2] * a.z + wv[u][3] * a.w +
                              wv[u][4] * b.x + wv[u][5] * b.y + wv[u][6] * b.z + wv[u][7] * b.w;
                }
            }
        }
    } else {
        for (int c = lane; c < C; c += 32) {
            float wv = Ld<WT>::one(wr + c);
#pragma unroll
            for (int t = 0; t < N; t++) acc[t] += wv * __ldg(x + (size_t)t * C + c);
        }
    }
#pragma unroll
    for (int t = 0; t < N; t++) {
        float a = acc[t];
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) out[(size_t)t * R + row] = a;
    }
}

template <int N, typename WT>
static void gemv_launch(const GemvGroup &g, const float *x, int C) {
    const unsigned blocks = cu_blocks((size_t)g.end[g.count - 1] * 32, GEMV_THREADS);
    bool vec = C % 8 == 0 && ((uintptr_t)x & 15) == 0;
    for (int i = 0; i < g.count; i++) vec = vec && ((uintptr_t)g.w[i] & 15) == 0;
    if (vec) cu_launch((gemv_kernel<N, WT, true>), blocks, GEMV_THREADS, 0, g, x, C);
    else cu_launch((gemv_kernel<N, WT, false>), blocks, GEMV_THREADS, 0, g, x, C);
}

template <typename WT>
static void gemv_typed(const GemvGroup &g, const float *x, int C, int n) {
    switch (n) {
    case 1: gemv_launch<1, WT>(g, x, C); break;
    case 2: gemv_launch<2, WT>(g, x, C); break;
    case 3: gemv_launch<3, WT>(g, x, C); break;
    default: gemv_launch<4, WT>(g, x, C); break;
    }
}

/* outs[i] = x · ws[i]ᵀ for n <= GEMV_MAX tokens in one launch; the weights
 * share dtype and cols (count <= GEMV_GROUP_MAX). */
static void gemv(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    GemvGroup g;
    memset(&g, 0, sizeof g);   /* padding too: its bytes are signed (cu_launch) */
    g.count = count;
    for (int i = 0, end = 0; i < count; i++) {
        g.out[i] = outs[i];
        g.w[i] = ws[i]->data;
        g.end[i] = end += (int)ws[i]->rows;
    }
    const int C = (int)ws[0]->cols;
    if (ws[0]->dtype == DT_F32) gemv_typed<float>(g, x, C, n);
    else if (ws[0]->dtype == DT_BF16) gemv_typed<__nv_bfloat16>(g, x, C, n);
    else gemv_typed<__half>(g, x, C, n);
    CU_LAUNCHED();
}

/* ---- tiled kernel for a few tokens -------------------------------------------------
 * Each warp owns TILE_R weight rows and TILE_TOK tokens; a block's 8 warps
 * are row_groups x token groups, enough token groups for n (so no warp of a
 * block idles) and the rest along rows.  Each lane walks the columns 8 at a
 * time (as the GEMV does) and keeps TILE_R x TILE_TOK partial sums; a warp
 * reduction ends each.  No shared memory and no barrier: every warp streams
 * its loads independently; warps of a block that share rows read them from
 * memory once and then from L1.  A first version staged tiles through shared
 * memory with a barrier per 64 columns and was slower than the split GEMM
 * on the H200 (14.2 vs 2.6 ms for a 16-node tree on the 1B shape): with few
 * blocks, the memory latency of each step was paid in series. */
#define TILE_R 4
#define TILE_TOK 8
#define TILE_WARPS 8

/* The weights of one tiled launch: matmul's one, or matmul_many's of one
 * dtype and width, their row blocks one after another along the grid's x
 * (weight i's end at block end[i]).  Each output is summed as in a launch
 * of its weight alone: a warp's lanes and reduction do not depend on where
 * its block lies. */
struct TiledGroup {
    float *out[GEMV_GROUP_MAX];
    const void *w[GEMV_GROUP_MAX];
    int R[GEMV_GROUP_MAX], end[GEMV_GROUP_MAX];
    int count;
};

template <typename WT, bool VEC>
__global__ void __launch_bounds__(TILE_WARPS * 32) tiled_kernel(TiledGroup g, const float *__restrict__ x, int C,
                                                                int n, int row_groups) {
    int i = 0;
    while ((int)blockIdx.x >= g.end[i]) i++;
    const int bx = blockIdx.x - (i ? g.end[i - 1] : 0), R = g.R[i];
    float *__restrict__ out = g.out[i];
    const WT *__restrict__ w = (const WT *)g.w[i];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int token_groups = TILE_WARPS / row_groups;
    const int r0 = (bx * row_groups + warp % row_groups) * TILE_R;
    const int t0 = (blockIdx.y * token_groups + warp / row_groups) * TILE_TOK;
    if (t0 >= n || r0 >= R) return;   /* whole warps leave together */
    const int nt = n - t0 < TILE_TOK ? n - t0 : TILE_TOK, nr = R - r0 < TILE_R ? R - r0 : TILE_R;
    float acc[TILE_R][TILE_TOK];
#pragma unroll
    for (int r = 0; r < TILE_R; r++)
#pragma unroll
        for (int t = 0; t < TILE_TOK; t++) acc[r][t] = 0.0f;
    const float *xt = x + (size_t)t0 * C;
    if (VEC) {
        for (int c = lane * 8; c < C; c += 32 * 8) {
            float wv[TILE_R][8];
#pragma unroll
            for (int r = 0; r < TILE_R; r++) {
                if (r < nr) Ld<WT>::eight(w + (size_t)(r0 + r) * C + c, wv[r]);
                else
#pragma unroll
                    for (int e = 0; e < 8; e++) wv[r][e] = 0.0f;
            }
#pragma unroll
            for (int t = 0; t < TILE_TOK; t++) {
                if (t >= nt) break;
                const float4 *xp = (const float4 *)(xt + (size_t)t * C + c);
                const float4 a = __ldg(xp), b = __ldg(xp + 1);
#pragma unroll
                for (int r = 0; r < TILE_R; r++)
                    acc[r][t] += wv[r][0] * a.x + wv[r][1] * a.y + wv[r][2] * a.z + wv[r][3] * a.w +
                                 wv[r][4] * b.x + wv[r][5] * b.y + wv[r][6] * b.z + wv[r][7] * b.w;
            }
        }
    } else {
        for (int c = lane; c < C; c += 32) {
            float wv[TILE_R];
#pragma unroll
            for (int r = 0; r < TILE_R; r++) wv[r] = r < nr ? Ld<WT>::one(w + (size_t)(r0 + r) * C + c) : 0.0f;
#pragma unroll
            for (int t = 0; t < TILE_TOK; t++) {
                if (t >= nt) break;
                const float xv = __ldg(xt + (size_t)t * C + c);
#pragma unroll
                for (int r = 0; r < TILE_R; r++) acc[r][t] += wv[r] * xv;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < TILE_R; r++)
#pragma unroll
        for (int t = 0; t < TILE_TOK; t++) {
            float v = acc[r][t];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && r < nr && t < nt) out[(size_t)(t0 + t) * R + r0 + r] = v;
        }
}

/* outs[i] = x · ws[i]ᵀ by the tiled kernel in one launch; the weights share
 * dtype and cols (count <= GEMV_GROUP_MAX). */
template <typename WT>
static void tiled_typed(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    const int C = (int)ws[0]->cols;
    bool vec = C % 8 == 0 && ((uintptr_t)x & 15) == 0;
    int token_groups = 1;   /* a power of two: the block's warps split evenly */
    while (token_groups < TILE_WARPS && token_groups * TILE_TOK < n) token_groups *= 2;
    const int row_groups = TILE_WARPS / token_groups;
    const int per_block = token_groups * TILE_TOK;
    TiledGroup g;
    memset(&g, 0, sizeof g);   /* padding too: its bytes are signed (cu_launch) */
    g.count = count;
    for (int i = 0, end = 0; i < count; i++) {
        g.out[i] = outs[i];
        g.w[i] = ws[i]->data;
        g.R[i] = (int)ws[i]->rows;
        g.end[i] = end += (int)cu_blocks(g.R[i], TILE_R * row_groups);
        vec = vec && ((uintptr_t)g.w[i] & 15) == 0;
    }
    const dim3 grid((unsigned)g.end[count - 1], (unsigned)((n + per_block - 1) / per_block));
    if (vec) cu_launch((tiled_kernel<WT, true>), grid, TILE_WARPS * 32, 0, g, x, C, n, row_groups);
    else cu_launch((tiled_kernel<WT, false>), grid, TILE_WARPS * 32, 0, g, x, C, n, row_groups);
}

static void tiled(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    if (ws[0]->dtype == DT_F32) tiled_typed<float>(outs, x, ws, count, n);
    else if (ws[0]->dtype == DT_BF16) tiled_typed<__nv_bfloat16>(outs, x, ws, count, n);
    else tiled_typed<__half>(outs, x, ws, count, n);
    CU_LAUNCHED();
}

/* BackendOptions.cuda_tiled_max: a product of GEMV_MAX < n <= TILED_N_MAX
 * tokens with fewer multiply-adds (rows x cols x tokens) takes the tiled
 * path; 0 sends every such product to cuBLAS. */
static long long tiled_max(void) { return backend_settings()->cuda_tiled_max; }

/* ---- activation split for the F16/BF16 GEMM ------------------------------------ */
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

/* hi[i] = round(x[i]); lo[i] = round(x[i] - hi[i]) (lo may be NULL) */
template <typename T>
__global__ void split_kernel(const float *__restrict__ x, T *__restrict__ hi, T *__restrict__ lo, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        T h = from_f<T>(v);
        hi[i] = h;
        if (lo) lo[i] = from_f<T>(v - to_f<T>(h));
    }
}

/* out[t][r] = a[t][r] + a[n + t][r] */
__global__ void sum_halves_kernel(float *__restrict__ out, const float *__restrict__ a, size_t half) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < half; i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + a[half + i];
}

static int fast_gemm(void) { return backend_settings()->cuda_fast_gemm; }

/* out_cm[R][cols] = Wᵀ-as-stored (column-major view) × B: cuBLAS sees W as
 * a C×R column-major matrix, so op(A) = T gives R×C. */
static bool gemm_ex(float *out, const void *w, cudaDataType_t wt, const void *b, int R, int C, int cols,
                    float beta) {
    cublasHandle_t h = cu_blas();
    if (!h) return false;
    const float alpha = 1.0f;
    if (cu_signing()) {   /* cuBLAS picks its kernels from these alone (handle, stream and workspace fixed) */
        const void *args[3] = {out, w, b};
        const int dims[4] = {(int)wt, R, C, cols};
        cu_sign(args, sizeof args);
        cu_sign(dims, sizeof dims);
        cu_sign(&beta, sizeof beta);
        return true;
    }
    return CU_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, R, cols, C, &alpha, w, wt, C, b, wt, C, &beta, out,
                              CUDA_R_32F, R, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <typename T>
static void gemm_split(float *out, const float *x, const Weight *w, cudaDataType_t wt, int n) {
    const int R = (int)w->rows, C = (int)w->cols;
    const size_t nx = (size_t)n * C;
    const bool lo_too = !fast_gemm();
    T *hl = (T *)cu_workspace(WS_MATMUL, nx * sizeof(T) * (lo_too ? 2 : 1));
    if (!hl) return;
    cu_launch((split_kernel<T>), cu_blocks(nx, 256), 256, 0, x, hl, lo_too ? hl + nx : NULL, nx);
    CU_LAUNCHED();
    if (!lo_too) { gemm_ex(out, w->data, wt, hl, R, C, n, 0.0f); return; }
    if (n <= SPLIT_STACK_MAX) {   /* one GEMM over [hi; lo], then add the halves */
        float *tmp = (float *)cu_workspace(WS_MATMUL_OUT, 2 * (size_t)n * R * sizeof(float));
        if (!tmp || !gemm_ex(tmp, w->data, wt, hl, R, C, 2 * n, 0.0f)) return;
        cu_launch(sum_halves_kernel, cu_blocks((size_t)n * R, 256), 256, 0, out, tmp, (size_t)n * R);
        CU_LAUNCHED();
    } else {
        if (!gemm_ex(out, w->data, wt, hl, R, C, n, 0.0f)) return;
        gemm_ex(out, w->data, wt, hl + nx, R, C, n, 1.0f);
    }
}

void cu_matmul(float *out, const float *x, const Weight *w, int n) {
    if (n <= 0) return;
    if (dtype_is_quant(w->dtype)) {   /* GGUF block types: matmul_quant.cu */
        cu_quant_matmul_many(&out, x, &w, 1, n);
        return;
    }
    const int R = (int)w->rows, C = (int)w->cols;
    if (n <= GEMV_MAX) {
        gemv(&out, x, &w, 1, n);
        return;
    }
    if (n <= TILED_N_MAX && (long long)R * C * n < tiled_max()) {
        tiled(&out, x, &w, 1, n);
        return;
    }
    if (w->dtype == DT_F32) gemm_ex(out, w->data, CUDA_R_32F, x, R, C, n, 0.0f);
    else if (w->dtype == DT_BF16) gemm_split<__nv_bfloat16>(out, x, w, CUDA_R_16BF, n);
    else gemm_split<__half>(out, x, w, CUDA_R_16F, n);
}

/* Weights of one dtype and width (q/k/v, gate/up) in one launch where each
 * would take the same kernel alone: the grouped GEMV for decode and chain
 * drafts (n <= GEMV_MAX), the grouped tiled kernel for trees and EAGLE
 * expansions, each output exactly what its own launch gives; else, and for
 * products cuBLAS takes, one product per weight. */
void cu_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    int quant = 0;
    for (int i = 0; i < count; i++) quant += dtype_is_quant(ws[i]->dtype);
    if (quant && quant == count) { cu_quant_matmul_many(outs, x, ws, count, n); return; }
    if (quant) {   /* block types beside others: each its own product, the same sums */
        for (int i = 0; i < count; i++) cu_matmul(outs[i], x, ws[i], n);
        return;
    }
    int grouped = n > 0 && count >= 1 && count <= GEMV_GROUP_MAX;
    for (int i = 1; i < count && grouped; i++)
        grouped = ws[i]->dtype == ws[0]->dtype && ws[i]->cols == ws[0]->cols;
    for (int i = 0; i < count && grouped && n > GEMV_MAX; i++)
        grouped = n <= TILED_N_MAX && (long long)ws[i]->rows * ws[i]->cols * n < tiled_max();
    if (grouped && n <= GEMV_MAX) gemv(outs, x, ws, count, n);
    else if (grouped) tiled(outs, x, ws, count, n);
    else for (int i = 0; i < count; i++) cu_matmul(outs[i], x, ws[i], n);
}

/* ---- embedding gather and bias --------------------------------------------------- */
__global__ void embed_kernel(float *__restrict__ out, const void *__restrict__ table, int dt, int64_t rows,
                             const int *__restrict__ tokens, int cols) {
    const int t = blockIdx.y, id = tokens[t];
    const bool in = id >= 0 && id < rows;   /* outside: a row of zeros, as the CPU's */
    const int64_t row = in ? (int64_t)id * cols : 0;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x)
        out[(size_t)t * cols + j] = in ? ld_weight(table, dt, row + j) : 0.0f;
}

/* tokens are in device memory (kernels.h): read there, never by the host */
void cu_embed(float *out, const Weight *table, const int *tokens, int n) {
    if (n <= 0) return;
    if (dtype_is_quant(table->dtype)) { cu_quant_embed(out, table, tokens, n); return; }
    const int cols = (int)table->cols;
    for (int t0 = 0; t0 < n; t0 += 65535) {   /* gridDim.y limit */
        const int nt = n - t0 < 65535 ? n - t0 : 65535;
        dim3 grid(cu_blocks(cols, 256) < 64 ? cu_blocks(cols, 256) : 64, nt);
        cu_launch(embed_kernel, grid, 256, 0, out + (size_t)t0 * cols, table->data, table->dtype,
                  (int64_t)table->rows, tokens + t0, cols);
        CU_LAUNCHED();
    }
}

__global__ void add_bias_kernel(float *__restrict__ x, const void *__restrict__ b, int dt, int cols, size_t total) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        x[i] += ld_weight(b, dt, (int64_t)(i % cols));
}

void cu_add_bias(float *x, const Weight *b, int n) {
    if (n <= 0) return;
    const size_t total = (size_t)n * b->cols;
    cu_launch(add_bias_kernel, cu_blocks(total, 256), 256, 0, x, b->data, b->dtype, (int)b->cols, total);
    CU_LAUNCHED();
}
