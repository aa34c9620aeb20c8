/* Row-wise and element-wise ops: RMSNorm, RoPE (the host's inv_freq, so
 * llama3 / linear scaling applied in infer/model/config.c carries over), residual
 * add, SwiGLU, concat.  Same arithmetic as kernels/cpu/elementwise.c:
 * RMSNorm sums squares in double, the RoPE angle is the float product
 * pos · inv_freq (as HF computes it), SwiGLU is g / (1 + e^-g) · u. */
#include "kernels/cuda/common.cuh"
#include <stdlib.h>
#include <string.h>

#define RMS_THREADS 256

/* With y (add_rmsnorm), x += y first: each thread adds the elements it then
 * squares and later scales, so the sum and the output are rmsnorm's of the
 * updated x; every read of y precedes the barrier, so out may be y.  A
 * thread's first RMS_HELD elements and their weights are loaded together
 * before the reduction and kept in registers (rows up to RMS_HELD ·
 * RMS_THREADS wide wait on memory once, not once before and once after the
 * barrier); the sums and products are the same either way. */
#define RMS_HELD 8
__global__ void __launch_bounds__(RMS_THREADS) rmsnorm_kernel(float *out, float *x, const float *y, const void *__restrict__ w,
                                                              int dt, int d, float eps) {
    __shared__ double part[RMS_THREADS / 32];
    __shared__ float inv_s;
    float *xr = x + (size_t)blockIdx.x * d;
    float *o = out + (size_t)blockIdx.x * d;
    const float *yr = y ? y + (size_t)blockIdx.x * d : NULL;
    float xv[RMS_HELD], wv[RMS_HELD];
    double ss = 0;
#pragma unroll
    for (int k = 0; k < RMS_HELD; k++) {
        const int j = threadIdx.x + k * RMS_THREADS;
        if (j < d) {
            wv[k] = ld_weight(w, dt, j);
            const float v = yr ? __fadd_rn(xr[j], yr[j]) : xr[j];
            if (yr) xr[j] = v;
            xv[k] = v;
            ss += (double)v * v;
        }
    }
    for (int j = threadIdx.x + RMS_HELD * RMS_THREADS; j < d; j += RMS_THREADS) {
        const float v = yr ? __fadd_rn(xr[j], yr[j]) : xr[j];
        if (yr) xr[j] = v;
        ss += (double)v * v;
    }
    for (int k = 16; k > 0; k >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, k);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int i = 0; i < RMS_THREADS / 32; i++) t += part[i];
        inv_s = 1.0f / sqrtf((float)(t / d) + eps);
    }
    __syncthreads();
    const float inv = inv_s;
#pragma unroll
    for (int k = 0; k < RMS_HELD; k++) {
        const int j = threadIdx.x + k * RMS_THREADS;
        if (j < d) o[j] = wv[k] * (xv[k] * inv);
    }
    for (int j = threadIdx.x + RMS_HELD * RMS_THREADS; j < d; j += RMS_THREADS) o[j] = ld_weight(w, dt, j) * (xr[j] * inv);
}

void cu_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps) {
    if (n <= 0) return;
    /* x is only read without y */
    cu_launch(rmsnorm_kernel, n, RMS_THREADS, 0, out, (float *)x, (const float *)NULL, w->data, w->dtype, (int)w->cols, eps);
    CU_LAUNCHED();
}

void cu_add_rmsnorm(float *out, float *x, const float *y, const Weight *w, int n, float eps) {
    if (n <= 0) return;
    cu_launch(rmsnorm_kernel, n, RMS_THREADS, 0, out, x, y, w->data, w->dtype, (int)w->cols, eps);
    CU_LAUNCHED();
}

/* one thread per (token, head, i < half) pair of rotated values */
__global__ void rope_kernel(float *__restrict__ x, const int *__restrict__ pos, const float *__restrict__ inv_freq,
                            int n, int nheads, int head_dim) {
    const int half = head_dim / 2;
    const size_t total = (size_t)n * nheads * half;
    for (size_t id = blockIdx.x * (size_t)blockDim.x + threadIdx.x; id < total; id += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(id % half);
        const size_t th = id / half;   /* token * nheads + head */
        const int t = (int)(th / nheads);
        const float ang = __fmul_rn((float)pos[t], inv_freq[i]);
        float s, c;
        sincosf(ang, &s, &c);
        float *v = x + th * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
        v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    }
}

void cu_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq) {
    if (n <= 0 || head_dim < 2) return;
    const int half = head_dim / 2;
    const float *dinv = (const float *)cu_upload(inv_freq, sizeof(float) * half, 1);
    if (!dinv) return;
    const size_t total = (size_t)n * nheads * half;
    cu_launch(rope_kernel, cu_blocks(total, 256), 256, 0, x, pos, dinv, n, nheads, head_dim);   /* pos: device */
    CU_LAUNCHED();
}

__global__ void add_kernel(float *__restrict__ x, const float *__restrict__ y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

void cu_add(float *x, const float *y, size_t n) {
    if (!n) return;
    cu_launch(add_kernel, cu_blocks(n, 256), 256, 0, x, y, n);
    CU_LAUNCHED();
}

__global__ void swiglu_kernel(float *__restrict__ g, const float *__restrict__ u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i];
        g[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

void cu_swiglu(float *gate, const float *up, size_t n) {
    if (!n) return;
    cu_launch(swiglu_kernel, cu_blocks(n, 256), 256, 0, gate, up, n);
    CU_LAUNCHED();
}

/* gelu(g) * u with GELU's tanh form written as the CPU twin's
 * g / (1 + exp(-2z)), z = sqrt(2/pi) (g + 0.044715 g^3) */
__global__ void geglu_kernel(float *__restrict__ g, const float *__restrict__ u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = g[i], a = -2.0f * 0.7978845608028654f * fmaf(0.044715f * v, v * v, v);
        g[i] = v / (1.0f + expf(a)) * u[i];
    }
}

void cu_geglu(float *gate, const float *up, size_t n) {
    if (!n) return;
    cu_launch(geglu_kernel, cu_blocks(n, 256), 256, 0, gate, up, n);
    CU_LAUNCHED();
}

__global__ void scale_kernel(float *__restrict__ x, float s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

void cu_scale(float *x, float s, size_t n) {
    if (!n) return;
    cu_launch(scale_kernel, cu_blocks(n, 256), 256, 0, x, s, n);
    CU_LAUNCHED();
}

/* one block per row; the row lists are device memory (kernels.h), NULL
 * meaning rows 0..n-1 */
__global__ void copy_rows_kernel(float *__restrict__ dst, const int *__restrict__ dst_rows,
                                 const float *__restrict__ src, const int *__restrict__ src_rows, int width) {
    const int i = blockIdx.x;
    const size_t d = (size_t)(dst_rows ? dst_rows[i] : i) * width, s = (size_t)(src_rows ? src_rows[i] : i) * width;
    for (int j = threadIdx.x; j < width; j += blockDim.x) dst[d + j] = src[s + j];
}

void cu_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n, int width) {
    if (n <= 0 || width <= 0) return;
    cu_launch(copy_rows_kernel, n, 128, 0, dst, dst_rows, src, src_rows, width);
    CU_LAUNCHED();
}

/* two strided copies: a's rows into the first da columns, b's after them */
void cu_concat(float *out, const float *a, int da, const float *b, int db, int n) {
    if (n <= 0) return;
    const size_t pitch = (size_t)(da + db) * sizeof(float);
    if (da > 0 && !cu_copy2d_async(out, pitch, a, (size_t)da * sizeof(float), (size_t)da * sizeof(float), n)) return;
    if (db > 0) cu_copy2d_async(out + da, pitch, b, (size_t)db * sizeof(float), (size_t)db * sizeof(float), n);
}

/* ---- to_host_many: several reads gathered into one copy ---------------------------- */
#define GATHER_CHUNK 64
struct GatherOps {
    const float *src[GATHER_CHUNK];
    size_t n[GATHER_CHUNK], off[GATHER_CHUNK];
};

/* read blockIdx.y's elements to its place in the staging buffer */
__global__ void gather_kernel(const __grid_constant__ GatherOps g, float *__restrict__ out) {
    const int r = blockIdx.y;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < g.n[r]; i += (size_t)gridDim.x * blockDim.x)
        out[g.off[r] + i] = g.src[r][i];
}

void cu_to_host_many(float *const *host, const float *const *dev, const size_t *n, int count) {
    for (int c0 = 0; c0 < count; c0 += GATHER_CHUNK) {
        const int c = count - c0 < GATHER_CHUNK ? count - c0 : GATHER_CHUNK;
        GatherOps g;
        memset(&g, 0, sizeof g);   /* padding too: its bytes are signed (cu_launch) */
        size_t total = 0, most = 0;
        for (int i = 0; i < c; i++) {
            g.src[i] = dev[c0 + i];
            g.n[i] = n[c0 + i];
            g.off[i] = total;
            total += n[c0 + i];
            if (n[c0 + i] > most) most = n[c0 + i];
        }
        if (!total) continue;
        float *stage = (float *)cu_workspace(WS_GATHER, total * sizeof(float));
        if (!stage) return;
        const unsigned blocks = cu_blocks(most, 256) < 64 ? cu_blocks(most, 256) : 64;
        cu_launch(gather_kernel, dim3(blocks, (unsigned)c), 256, 0, g, stage);
        CU_LAUNCHED();
        const float *h = (const float *)cu_fetch(stage, total * sizeof(float));
        if (!h) return;
        for (int i = 0; i < c; i++)
            if (n[c0 + i]) memcpy(host[c0 + i], h + g.off[i], n[c0 + i] * sizeof(float));
    }
}
