/* The CUDA implementation of the kernels/ interface (kernels/kernels.h).
 *
 * Usable from C and C++.  Built into build/libc2t_cuda.a when nvcc is on
 * PATH; C sources then see -DC2T_CUDA.  See docs/cuda.md.
 *
 *  - cuda_backend: every Backend op on the current CUDA device.  Weights are
 *    uploaded once by be->weight and stay on the device; activations are
 *    device memory from be->alloc; host control arrays (tokens, positions,
 *    masks, keep lists, inv_freq) are copied to the device inside the ops.
 *    All work is issued on one stream (cu_stream, a blocking stream: it and
 *    the legacy stream wait for each other), so ops are ordered and to_host
 *    returns finished results.  Forward passes can run as one CUDA graph
 *    (record_begin / record_end, see backend_recorded in kernels.h).  One
 *    host thread at a time may use the backend (it keeps shared device
 *    scratch buffers).
 *  - Errors: every CUDA / cuBLAS status is checked.  A failure
 *    records "file:line: <error string> (<call>)" with err_set (kernels/base/util.h),
 *    prints the same line on stderr (the first 16 failures), counts it in
 *    cuda_errors() and abandons the op.  Nothing exits.  Ops that can report
 *    do so (alloc / kv_create return NULL, weight returns -1); for the void
 *    ops check cuda_errors() after a forward pass. */
#ifndef C2T_CUDA_BACKEND_H
#define C2T_CUDA_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/kernels.h"

extern const Backend cuda_backend;

/* 1 when at least one CUDA device is visible (and the driver works), else
 * 0.  Never counts as an error. */
int cuda_available(void);

/* Waits for queued work and frees what the backend keeps for the whole
 * process: scratch and control buffers, the pinned staging ring and the
 * cuBLAS handle (they are made again on next use).  Call
 * after the last model is freed, so that compute-sanitizer's leak check
 * sees only real leaks. */
void cuda_shutdown(void);

/* Forward passes run as one CUDA graph launch (record_begin/end), graphs
 * recorded and instantiated for them (the rest replayed a graph of the same
 * signature without recording), and passes that could not be recorded and
 * ran op by op.  Since the process started. */
void cuda_graph_counts(long *launched, long *instantiated, long *not_recorded);

/* Failed CUDA / cuBLAS calls since the process started, and the
 * message of the last one ("" when none). */
int cuda_errors(void);
const char *cuda_last_error(void);


#ifdef __cplusplus
}
#endif
#endif
