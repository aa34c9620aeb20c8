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

/* `reps` calls of fn captured from the backend's stream into one graph,
 * replayed: the best replay's seconds, -1 after reporting.  A failed
 * capture is ended before returning, so later ops run on a stream that is
 * not capturing. */
static double graph_seconds(void (*fn)(void *), void *arg, int reps, size_t *nodes) {
    cudaStream_t s = cu_stream();
    CU_CHECK_R(cudaStreamSynchronize(s), -1);
    CU_CHECK_R(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), -1);
    for (int r = 0; r < reps; r++) fn(arg);
    cudaGraph_t g = NULL;
    CU_CHECK_R(cudaStreamEndCapture(s, &g), -1);
    cudaGraphExec_t e = NULL;
    double best = -1;
    if (CU_OK(cudaGraphGetNodes(g, NULL, nodes)) && CU_OK(cudaGraphInstantiate(&e, g, 0))) {
        cudaEvent_t a, b;
        if (CU_OK(cudaEventCreate(&a))) {
            if (CU_OK(cudaEventCreate(&b))) {
                for (int r = 0; r < 6; r++) {   /* the first is a warm-up (upload of the graph) */
                    float ms = 0;
                    if (!CU_OK(cudaEventRecord(a, s)) || !CU_OK(cudaGraphLaunch(e, s)) || !CU_OK(cudaEventRecord(b, s)) ||
                        !CU_OK(cudaEventSynchronize(b)) || !CU_OK(cudaEventElapsedTime(&ms, a, b))) {
                        best = -1;
                        break;
                    }
                    if (r > 0 && (best < 0 || ms * 1e-3 < best)) best = ms * 1e-3;
                }
                cudaEventDestroy(b);
            }
            cudaEventDestroy(a);
        }
    }
    if (e) cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    return best;
}

extern "C" double cuda_graph_call_us(void (*fn)(void *), void *arg, int reps, double *nodes) {
    fn(arg);
    CU_CHECK_R(cudaStreamSynchronize(cu_stream()), -1);
    size_t n = 0;
    const double s = graph_seconds(fn, arg, reps, &n);
    if (nodes) *nodes = (double)n / reps;
    return s > 0 ? s / reps * 1e6 : -1;
}

__global__ void empty_kernel(void) {}

static void empty_launch(void *) { empty_kernel<<<1, 32, 0, cu_stream()>>>(); }

extern "C" double cuda_empty_node_us(int reps, double *stream_us) {
    empty_launch(NULL);
    CU_CHECK_R(cudaStreamSynchronize(cu_stream()), -1);
    const double t0 = now_seconds();
    for (int r = 0; r < reps; r++) empty_launch(NULL);
    CU_CHECK_R(cudaStreamSynchronize(cu_stream()), -1);
    CU_LAUNCHED_R(-1);
    if (stream_us) *stream_us = (now_seconds() - t0) / reps * 1e6;
    return cuda_graph_call_us(empty_launch, NULL, reps, NULL);
}
