/* Device ceilings for benchmarks (tests/bench_cuda.c): the copy bandwidth
 * and the BF16 GEMM rate measured on the GPU in hand, so that speeds are
 * reported as fractions of what this device can do rather than of a
 * datasheet.  Both time with CUDA events on the default stream after a
 * warm-up and return the best of several repeats. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_measure.h"
#include <stdio.h>

extern "C" int cuda_device_name(char *name, size_t n) {
    int dev = 0;
    cudaDeviceProp p;
    CU_CHECK_R(cudaGetDevice(&dev), -1);
    CU_CHECK_R(cudaGetDeviceProperties(&p, dev), -1);
    snprintf(name, n, "%s (sm_%d%d, %d SMs, %.0f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
             p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return 0;
}

extern "C" int cuda_sync(void) {
    CU_CHECK_R(cudaDeviceSynchronize(), -1);
    return 0;
}

/* Times `reps` calls of fn between two events; returns the seconds of the
 * fastest call, or -1 after reporting. */
template <typename F> static double best_seconds(int reps, F fn) {
    cudaEvent_t a, b;
    CU_CHECK_R(cudaEventCreate(&a), -1);
    CU_CHECK_R(cudaEventCreate(&b), -1);
    double best = -1;
    fn();   /* warm-up: module load, handle creation, clocks */
    for (int r = 0; r < reps; r++) {
        if (!CU_OK(cudaEventRecord(a, 0))) break;
        if (!fn()) break;
        if (!CU_OK(cudaEventRecord(b, 0)) || !CU_OK(cudaEventSynchronize(b))) break;
        float ms = 0;
        if (!CU_OK(cudaEventElapsedTime(&ms, a, b))) break;
        if (best < 0 || ms * 1e-3 < best) best = ms * 1e-3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

extern "C" double cuda_copy_bandwidth(size_t bytes) {
    void *src = NULL, *dst = NULL;
    CU_CHECK_R(cudaMalloc(&src, bytes), -1);
    if (!CU_OK(cudaMalloc(&dst, bytes))) { cudaFree(src); return -1; }
    double s = -1;
    if (CU_OK(cudaMemset(src, 0x5a, bytes)))
        s = best_seconds(10, [&] { return CU_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
    cudaFree(src);
    cudaFree(dst);
    return s > 0 ? 2.0 * (double)bytes / s : -1;   /* bytes read + bytes written */
}

/* Random BF16 in [-1, 1): zeros would flatter the tensor cores. */
__global__ void fill_bf16(__nv_bfloat16 *x, size_t n, unsigned seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    x[i] = __float2bfloat16((float)(h >> 8) / 8388608.0f - 1.0f);
}

extern "C" double cuda_gemm_bf16_flops(int m, int n, int k) {
    cublasHandle_t h = cu_blas();
    if (!h) return -1;
    size_t na = (size_t)m * k, nb = (size_t)k * n;
    __nv_bfloat16 *a = NULL, *b = NULL;
    float *c = NULL;
    double s = -1;
    if (CU_OK(cudaMalloc(&a, na * 2)) && CU_OK(cudaMalloc(&b, nb * 2)) &&
        CU_OK(cudaMalloc(&c, (size_t)m * n * sizeof(float)))) {
        fill_bf16<<<cu_blocks(na, 256), 256>>>(a, na, 1u);
        fill_bf16<<<cu_blocks(nb, 256), 256>>>(b, nb, 2u);
        if (CU_OK(cudaGetLastError())) {
            const float one = 1, zero = 0;
            /* the forward's own call: BF16 operands, F32 output and compute */
            s = best_seconds(10, [&] {
                return CU_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_16BF, k, b,
                                          CUDA_R_16BF, k, &zero, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
            });
        }
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return s > 0 ? 2.0 * m * n * (double)k / s : -1;
}
