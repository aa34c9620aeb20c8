/* The cuda_backend ops table, and the ops that exist only to fill it: device
 * memory (alloc, release, to_host, to_device, copy) and weight upload.  The
 * other ops live in matmul.cu, elementwise.cu, attention.cu, distribution.cu
 * and tree.cu, recording in graph.cu; what they share (stream, scratch,
 * uploads, error reporting) in runtime.cu. */
#include "kernels/cuda/common.cuh"
extern "C" {
#include "kernels/base/quant.h"
}

/* ---- memory -------------------------------------------------------------------- */
static float *cu_alloc(size_t n) {
    void *p = NULL;
    size_t bytes = (n ? n : 1) * sizeof(float);
    CU_CHECK_R(cudaMalloc(&p, bytes), NULL);
    if (!CU_OK(cudaMemset(p, 0, bytes))) { cudaFree(p); return NULL; }
    return (float *)p;
}

static void cu_release(void *p) {
    if (p) CU_CHECK(cudaFree(p));
}

static void cu_to_host(float *host, const float *dev, size_t n) {
    if (n) CU_CHECK(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
}

static void cu_to_device(float *dev, const float *host, size_t n) {
    cu_to_device_bytes(dev, host, n * sizeof(float));
}

/* memmove semantics: overlapping ranges go through a temporary */
static void cu_copy(float *dst, const float *src, size_t n) {
    if (!n || dst == src) return;
    size_t bytes = n * sizeof(float);
    if (dst < src + n && src < dst + n) {
        void *tmp = cu_workspace(WS_COPY, bytes);
        if (!tmp) return;
        if (cu_copy_async(tmp, src, bytes)) cu_copy_async(dst, tmp, bytes);
        return;
    }
    cu_copy_async(dst, src, bytes);
}

/* ---- weights: uploaded once, kept on the device ------------------------------------ */
/* GGUF's block types are uploaded as stored (matmul_quant.cu reads them
 * there; no F32 copy), for matrices only, as on the CPU: norms and biases
 * read their vectors element by element. */
static int cu_weight(Weight *w, const void *host, DType dt, int64_t rows, int64_t cols) {
    const int quant = dtype_is_quant(dt);
    if (dt != DT_F32 && dt != DT_F16 && dt != DT_BF16 && !quant) {
        err_set("weights must be F32, F16, BF16 or a GGUF block type, not %s", dtype_name(dt));
        return -1;
    }
    if (rows <= 0 || cols <= 0 || rows > INT32_MAX || cols > INT32_MAX) {
        err_set("weight of %lld x %lld is outside what the CUDA backend handles", (long long)rows, (long long)cols);
        return -1;
    }
    if (quant && rows < 2) {
        err_set("a %s weight must be a matrix (rows %lld): vectors must be F32, F16 or BF16", dtype_name(dt),
                (long long)rows);
        return -1;
    }
    const int64_t row_bytes = quant_row_bytes(dt, cols);   /* err_set where cols is not whole blocks */
    if (row_bytes < 0) return -1;
    size_t bytes = (size_t)rows * (size_t)row_bytes;
    void *d = NULL;
    CU_CHECK_R(cudaMalloc(&d, bytes), -1);
    if (!CU_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice))) { cudaFree(d); return -1; }
    w->data = d; w->dtype = dt; w->rows = rows; w->cols = cols; w->priv = NULL; w->mapped = 0;
    return 0;
}

static void cu_weight_release(Weight *w) {
    const void *p = w->data;
    w->data = NULL;
    w->priv = NULL;
    if (p) CU_CHECK(cudaFree((void *)p));
}

/* Designated initialisers in member order (nvcc/g++ accept them in C++17;
 * a reordered struct is a compile error, not a silent mix-up). */
extern "C" const Backend cuda_backend = {
    .name = "cuda",
    .alloc = cu_alloc,
    .release = cu_release,
    .to_host = cu_to_host,
    .to_device = cu_to_device,
    .copy = cu_copy,
    .weight = cu_weight,
    .weight_release = cu_weight_release,
    .embed = cu_embed,
    .matmul = cu_matmul,
    .matmul_many = cu_matmul_many,
    .add_bias = cu_add_bias,
    .rmsnorm = cu_rmsnorm,
    .add_rmsnorm = cu_add_rmsnorm,
    .rope = cu_rope,
    .add = cu_add,
    .swiglu = cu_swiglu,
    .geglu = cu_geglu,
    .scale = cu_scale,
    .concat = cu_concat,
    .copy_rows = cu_copy_rows,
    .kv_create = cu_kv_create,
    .kv_free = cu_kv_free,
    .kv_slots = cu_kv_slots,
    .kv_write = cu_kv_write,
    .rope_kv = cu_rope_kv,
    .kv_keep = cu_kv_keep,
    .attention = cu_attention,
    .softmax_topk = cu_softmax_topk,
    .argmax = cu_argmax,
    .softmax_topk_dev = cu_softmax_topk_dev,
    .argmax_dev = cu_argmax_dev,
    .sample_dev = cu_sample_dev,
    .tree_root = cu_tree_root,
    .tree_grow = cu_tree_grow,
    .tree_top = cu_tree_top,
    .tree_classify = cu_tree_classify,
    .tree_pass = cu_tree_pass,
    .tree_compact = cu_tree_compact,
    .tree_inputs = cu_tree_inputs,
    .tree_accept = cu_tree_accept,
    .tree_batch = cu_tree_batch,
    .to_host_many = cu_to_host_many,
    .record_begin = cu_record_begin,
    .record_end = cu_record_end,
    .unit_begin = NULL,   /* nothing to tune per cycle on the GPU */
    .unit_end = NULL,
};
