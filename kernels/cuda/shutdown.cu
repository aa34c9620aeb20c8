/* cuda_shutdown: frees what the backend's files keep for the whole process,
 * in order — graph.cu's executable graphs, runtime.cu's buffers and cuBLAS
 * handle, then the stream the handle is bound to.  A file of its own
 * because it calls into both, and graph.cu calls only down into
 * runtime.cu. */
#include "kernels/cuda/common.cuh"

extern "C" void cuda_shutdown(void) {
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
    cu_graphs_free();
    cu_runtime_free();
    cu_stream_free();
}
