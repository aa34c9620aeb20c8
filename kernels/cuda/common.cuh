/* Internals shared by the kernels/cuda/ sources: the runtime's interface
 * (status checks, stream, scratch, uploads; runtime.cu), what graph.cu and
 * cuda_shutdown ask of it, dtype loads, and the ops that backend.cu's table
 * names.  C++ (nvcc) only. */
#ifndef C2T_CUDA_COMMON_CUH
#define C2T_CUDA_COMMON_CUH
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda/cuda_backend.h"
extern "C" {
#include "kernels/base/util.h"
}

/* ---- status checks ------------------------------------------------------
 * cu_ok(status, file, line, call) is true on success; otherwise it reports
 * "file:line: <error string> (<call>)" (err_set + stderr + cuda_errors())
 * and is false.  The CU_* macros abandon the enclosing function. */
void cu_report(const char *file, int line, const char *call, const char *what);

static inline bool cu_ok(cudaError_t e, const char *file, int line, const char *call) {
    if (e == cudaSuccess) return true;
    cu_report(file, line, call, cudaGetErrorString(e));
    return false;
}
static inline bool cu_ok(cublasStatus_t e, const char *file, int line, const char *call) {
    if (e == CUBLAS_STATUS_SUCCESS) return true;
    cu_report(file, line, call, cublasGetStatusString(e));
    return false;
}

#define CU_OK(call) cu_ok((call), __FILE__, __LINE__, #call)
/* check; on failure return from a void function */
#define CU_CHECK(call) do { if (!CU_OK(call)) return; } while (0)
/* check; on failure return r */
#define CU_CHECK_R(call, r) do { if (!CU_OK(call)) return (r); } while (0)
/* after a kernel launch */
#define CU_LAUNCHED() CU_CHECK(cudaGetLastError())
#define CU_LAUNCHED_R(r) CU_CHECK_R(cudaGetLastError(), r)

/* Reports a failed precondition the same way (no CUDA call involved). */
#define CU_FAIL(...) cu_fail(__FILE__, __LINE__, __VA_ARGS__)
void cu_fail(const char *file, int line, const char *fmt, ...) PRINTF_LIKE(3, 4);

/* ---- shared state -------------------------------------------------------- */
/* The stream every op is issued on (created on first use; 0, the legacy
 * stream, if that fails).  A created stream, because a graph can be
 * recorded from it (graph.cu, record_begin) and not from the legacy
 * stream.  It is a blocking stream: work issued on the legacy stream (plain
 * cudaMemcpy in to_host, weight uploads) still waits for it and it for that. */
cudaStream_t cu_stream(void);
/* The cuBLAS handle (created on first use, bound to cu_stream); NULL after
 * reporting an error. */
cublasHandle_t cu_blas(void);
/* Multiprocessors of the current device (for grid sizing). */
int cu_sm_count(void);

/* Host control arrays: copies bytes from host into device slot `slot`
 * (0..CU_CTL_SLOTS-1, each its own growing buffer) and returns the device
 * copy, or NULL after reporting.  Safe to reuse op after op: the copy is
 * ordered after earlier kernels on the default stream. */
#define CU_CTL_SLOTS 4
void *cu_upload(const void *host, size_t bytes, int slot);
/* host bytes to device memory dst in stream order, the host free to reuse
 * its buffer on return (small copies staged, larger ones blocking). */
void cu_to_device_bytes(void *dst, const void *host, size_t bytes);

/* Copies bytes of device memory to a pinned host buffer (after the queued
 * work) and returns it, valid until the next call; NULL after reporting. */
const void *cu_fetch(const void *dev, size_t bytes);

/* Device temporaries: a growing buffer per slot (contents not kept across
 * calls that grow it).  NULL after reporting. */
enum { WS_MATMUL = 0, WS_MATMUL_OUT, WS_ATTN, WS_KV, WS_DIST, WS_COPY, WS_GATHER, WS_QUANT, WS_COUNT };
void *cu_workspace(int slot, size_t bytes);

/* ---- recording (graph.cu drives it; the state lives in runtime.cu) -------
 * A forward is first signed (kernels/base/replay.h): its ops are issued with
 * nothing launched, each mixing what it would launch into the signature;
 * only a signature not seen before is then recorded.  Signing is a kind of
 * recording: what spoils one (a growing buffer, a fetch) spoils the other. */
/* True between cu_record_started and cu_record_stopped. */
bool cu_recording(void);
/* True while the forward being recorded is only signed. */
bool cu_signing(void);
/* Mixes n bytes at p into the signature. */
void cu_sign(const void *p, size_t n);
/* The signature of the last signed forward (never 0). */
uint64_t cu_signature(void);
/* Where a recording's control uploads are staged: pinned memory that the
 * recorded graph copies from each time it is launched, so it is kept with
 * the graph (graph.cu) rather than taken from the staging ring; NULL after
 * the recording. */
void cu_record_arena(char *pinned, size_t cap);

/* One kernel launch on cu_stream; while signing, the kernel, its grid,
 * block and shared memory and every argument's bytes mixed into the
 * signature instead (a struct argument's padding must be zeroed, or its
 * forward is never replayed). */
template <typename... P, typename... A>
static inline void cu_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, const A &...args) {
    if (cu_signing()) {
        cu_sign(&kernel, sizeof kernel);
        cu_sign(&grid, sizeof grid);
        cu_sign(&block, sizeof block);
        cu_sign(&smem, sizeof smem);
        (cu_sign(&args, sizeof args), ...);
        return;
    }
    kernel<<<grid, block, smem, cu_stream()>>>(args...);
}
/* cudaMemcpy2DAsync of device memory on cu_stream (height rows of width
 * bytes), or signed; false after reporting. */
bool cu_copy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height);
static inline bool cu_copy_async(void *dst, const void *src, size_t bytes) {
    return cu_copy2d_async(dst, bytes, src, bytes, bytes, 1);
}
/* Forgets what every control slot holds, so that its next upload is issued
 * (recorded) whatever it held before. */
void cu_forget_held(void);
/* The runtime's part of record_begin, before a capture starts: the dummy
 * buffer a spoiled recording hands out, every slot's held bytes forgotten
 * (a signing and the recording after it then make the same uploads).  0
 * when that fails (then nothing is recorded). */
int cu_record_prepare(void);
/* Recording is on (a capture has begun) and not spoiled; sign: the ops are
 * only signed (the signature starts anew). */
void cu_record_started(bool sign);
/* Recording is off; returns why it was spoiled, or NULL when it was not. */
const char *cu_record_stopped(void);

/* ---- teardown, in cuda_shutdown's order (shutdown.cu) --------------------- */
/* Destroys the executable graphs (graph.cu). */
void cu_graphs_free(void);
/* Frees the control and scratch buffers, the staging ring, the fetch buffer
 * and the cuBLAS handle (runtime.cu). */
void cu_runtime_free(void);
/* Frees the recording's dummy buffer and destroys the stream, last: cuBLAS
 * is bound to it (runtime.cu). */
void cu_stream_free(void);

/* ---- dtype loads (DType values of kernels.h) ----------------------------- */
__device__ __forceinline__ float ld_weight(const void *base, int dt, int64_t i) {
    if (dt == DT_F32) return ((const float *)base)[i];
    if (dt == DT_BF16) return __bfloat162float(((const __nv_bfloat16 *)base)[i]);
    return __half2float(((const __half *)base)[i]);
}

static inline unsigned cu_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 0x7fffffff ? 0x7fffffff : (b ? b : 1));
}

/* ---- ops, one file per family -------------------------------------------- */
void cu_embed(float *out, const Weight *table, const int *tokens, int n);
void cu_matmul(float *out, const float *x, const Weight *w, int n);
void cu_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n);
/* the GGUF block types (matmul_quant.cu): products of weights that are all
 * block types, of one width; embedding rows */
void cu_quant_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n);
void cu_quant_embed(float *out, const Weight *table, const int *tokens, int n);
void cu_add_bias(float *x, const Weight *b, int n);
void cu_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps);
void cu_add_rmsnorm(float *out, float *x, const float *y, const Weight *w, int n, float eps);
void cu_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq);
void cu_add(float *x, const float *y, size_t n);
void cu_swiglu(float *gate, const float *up, size_t n);
void cu_geglu(float *gate, const float *up, size_t n);
void cu_scale(float *x, float s, size_t n);
void cu_concat(float *out, const float *a, int da, const float *b, int db, int n);
void cu_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n, int width);
KVCache *cu_kv_create(int layers, int slots, int kv_dim);
void cu_kv_free(KVCache *c);
int cu_kv_slots(const KVCache *c);
void cu_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n);
void cu_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int head_dim,
                const float *inv_freq, KVCache *c, int layer, const int *slot);
void cu_kv_keep(KVCache *c, int dst, const int *keep, int m);
void cu_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                  int head_dim);
void cu_softmax_topk(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                     float *probs, int topm, float *entropy);
void cu_argmax(const float *logits, int n, int vocab, int *ids);
void cu_softmax_topk_dev(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                         float *probs, int topm, float *entropy);
void cu_argmax_dev(const float *logits, int n, int vocab, int *ids);
void cu_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                   int *ids);
void cu_tree_root(const DevTree *t, const int *root);
void cu_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                  int k, const int *picks, int count, const int *map);
void cu_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel);
void cu_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf);
void cu_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count);
void cu_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad);
void cu_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0, int nctx,
                     int *out, uint8_t *mask);
void cu_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk);
/* tree_batch (tree.cu); its argmax_dev ops (distribution.cu) */
void cu_tree_batch(const TreeOp *ops, int n);
/* to_host_many (elementwise.cu) */
void cu_to_host_many(float *const *host, const float *const *dev, const size_t *n, int count);
void cu_argmax_batch(const TreeOp *ops, int n);
/* record_begin / record_end (graph.cu) */
int cu_record_begin(void);
int cu_record_end(void);
#endif
