/* cuda_shutdown: frees what the backend's files keep for the whole process,
 * in order — graph.cu's executable graphs, runtime.cu's buffers and cuBLAS
 * handle, sample.cu's cuRAND generator, then the stream the last two are
 * bound to.  A file of its own because it calls into all three, and they
 * call only down into runtime.cu. */
#include "kernels/cuda/common.cuh"

extern "C" void cuda_shutdown(void) {
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
    cu_graphs_free();
    cu_runtime_free();
    cuda_sample_shutdown();
    cu_stream_free();
}
