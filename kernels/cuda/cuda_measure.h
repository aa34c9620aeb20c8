/* Device ceilings and synchronisation for benchmarks (kernels/cuda/measure.cu).
 * Usable from C; each returns -1 after reporting a CUDA error the way the
 * backend does (cuda_errors(), err_set). */
#ifndef C2T_CUDA_MEASURE_H
#define C2T_CUDA_MEASURE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79 GiB)" into name. */
int cuda_device_name(char *name, size_t n);
/* Waits for every queued op; 0 or -1. */
int cuda_sync(void);
/* Device-to-device copy of `bytes`, best of 10: bytes read + written per second. */
double cuda_copy_bandwidth(size_t bytes);
/* cublasGemmEx with BF16 operands and F32 output/compute (the call the
 * forward makes for more than 4 tokens), m x n x k on random data, best of
 * 10: floating-point operations per second. */
double cuda_gemm_bf16_flops(int m, int n, int k);
/* The GPU's time for one call of fn (ops issued on the backend's stream,
 * each fn(arg) the same work): fn once to warm up (scratch, handles), then
 * `reps` calls captured into one graph and the graph replayed, best of 5;
 * microseconds a call.  The host's launch cost is out of it: what the call
 * costs as a node of a replayed forward.  *nodes (may be NULL): the graph's
 * nodes a call.  -1 after reporting a CUDA error (the stream left out of
 * capture). */
double cuda_graph_call_us(void (*fn)(void *), void *arg, int reps, double *nodes);
/* The floor of a node: an empty one-warp kernel, `reps` of them in a
 * stream (*stream_us, the host's launch rate bounds it) and in a replayed
 * graph (the result), microseconds each; -1 after reporting. */
double cuda_empty_node_us(int reps, double *stream_us);
#ifdef __cplusplus
}
#endif
#endif
