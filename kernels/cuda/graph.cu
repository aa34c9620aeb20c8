/* CUDA-graph recording and replay: record_begin / record_end (the Backend's
 * recording members), the cache of executable graphs and cuda_graph_counts.
 * The recording state that uploads and error reports consult lives in
 * runtime.cu; this file turns it on and off. */
#include "kernels/cuda/common.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- recording: a forward pass as one CUDA graph ----------------------------
 * A decode step issues ~18 ops per layer, and each costs the host a few
 * microseconds to launch — as much as the GPU needs to run it, so neither
 * side could hide the other (docs/cuda.md).  backend_recorded() brackets a
 * forward pass with record_begin / record_end: the ops are captured from
 * cu_stream into a graph and launched with one call.  Positions, slots and
 * context lengths change every step, so the graph is captured anew each
 * time, and an executable graph of the same signature (graph_signature)
 * is updated in place (cudaGraphExecUpdate: cheap) rather than instantiated
 * again (costly); several are kept (decode, tree verification and draft
 * steps alternate).
 *
 * Off by default: recording a step costs the host its capture, signature
 * and update before the GPU can start, while op by op the host enqueues as
 * the GPU runs, so with a sync per token recording was slower than not
 * (docs/results.md has the H100 figures).  The graphs pay once a step can
 * be replayed without recording it again, which needs the position, KV slot
 * and context length read from device memory.  BackendOptions.cuda_graphs
 * (--cuda-graphs on) turns recording on. */
#define GRAPH_CACHE 32
static struct { cudaGraphExec_t exec; uint64_t sig; unsigned long long used; } execs[GRAPH_CACHE];
static unsigned long long exec_clock;
static long graphs_replayed, graphs_made, graphs_spoiled;

static int graphs_on(void) { return backend_settings()->cuda_graphs > 0; }

int cu_record_begin(void) {
    if (!graphs_on() || cu_recording()) return 0;
    cudaStream_t s = cu_stream();
    if (!s || !cu_blas()) return 0;
    if (!cu_record_prepare()) return 0;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cu_record_started();
    return 1;
}

/* What must be equal for an executable graph to be updated in place: the
 * node sequence, each kernel's function, block, shared memory and cluster
 * shape, each copy's extent.  cudaGraphExecUpdate accepts more (a kernel
 * node may change its function), but on the H100 an update that swapped
 * one cuBLAS kernel for another (prefills of different lengths, same node
 * count) ran without an error and gave wrong logits; a new graph for a
 * changed kernel is always right.  0 when a node cannot be read. */
static uint64_t graph_signature(cudaGraph_t g) {
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess || !n) return 0;
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
    if (!nodes || cudaGraphGetNodes(g, nodes, &n) != cudaSuccess) { free(nodes); return 0; }
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void *p, size_t len) {
        for (size_t i = 0; i < len; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    };
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        cudaGraphNodeType t;
        ok = cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess;
        mix(&t, sizeof t);
        if (ok && t == cudaGraphNodeTypeKernel) {
            cudaKernelNodeParams kp;
            cudaLaunchAttributeValue cl;
            memset(&cl, 0, sizeof cl);
            ok = cudaGraphKernelNodeGetParams(nodes[i], &kp) == cudaSuccess &&
                 cudaGraphKernelNodeGetAttribute(nodes[i], cudaLaunchAttributeClusterDimension, &cl) == cudaSuccess;
            mix(&kp.func, sizeof kp.func);
            mix(&kp.blockDim, sizeof kp.blockDim);
            mix(&kp.sharedMemBytes, sizeof kp.sharedMemBytes);
            mix(&cl.clusterDim, sizeof cl.clusterDim);
        } else if (ok && t == cudaGraphNodeTypeMemcpy) {
            cudaMemcpy3DParms mp;
            ok = cudaGraphMemcpyNodeGetParams(nodes[i], &mp) == cudaSuccess;
            mix(&mp.extent, sizeof mp.extent);
            mix(&mp.kind, sizeof mp.kind);
        }
    }
    free(nodes);
    if (!ok) { (void)cudaGetLastError(); return 0; }
    return h ? h : 1;
}

int cu_record_end(void) {
    cudaStream_t s = cu_stream();
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    const char *spoiled = cu_record_stopped();
    if (e != cudaSuccess || spoiled || !g) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        cu_forget_held();   /* the recorded uploads never ran */
        graphs_spoiled++;
        if (backend_settings()->cuda_graphs == 2)
            fprintf(stderr, "c2t cuda: graph not used: %s\n", spoiled ? spoiled : cudaGetErrorString(e));
        return -1;
    }
    const uint64_t sig = graph_signature(g);
    int use = -1, lru = 0;
    for (int i = 0; i < GRAPH_CACHE; i++) {
        if (!execs[i].exec) { lru = i; continue; }
        if (execs[lru].exec && execs[i].used < execs[lru].used) lru = i;
        if (sig && execs[i].sig == sig) { use = i; break; }
    }
    if (use >= 0) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(execs[use].exec, g, &info) != cudaSuccess) {
            (void)cudaGetLastError();
            lru = use;   /* made anew in the same place */
            use = -1;
        }
    }
    if (use < 0) {
        use = lru;
        if (execs[use].exec) cudaGraphExecDestroy(execs[use].exec);
        execs[use].exec = NULL;
        execs[use].sig = 0;
        if (!CU_OK(cudaGraphInstantiate(&execs[use].exec, g, 0))) { cudaGraphDestroy(g); return -1; }
        execs[use].sig = sig;
        graphs_made++;
    }
    execs[use].used = ++exec_clock;
    cudaGraphDestroy(g);
    if (!CU_OK(cudaGraphLaunch(execs[use].exec, s))) return -1;
    graphs_replayed++;
    return 0;
}

void cu_graphs_free(void) {
    for (int i = 0; i < GRAPH_CACHE; i++) {
        if (execs[i].exec) cudaGraphExecDestroy(execs[i].exec);
        execs[i].exec = NULL;
        execs[i].sig = 0;
    }
}

extern "C" void cuda_graph_counts(long *launched, long *instantiated, long *not_recorded) {
    if (launched) *launched = graphs_replayed;
    if (instantiated) *instantiated = graphs_made;
    if (not_recorded) *not_recorded = graphs_spoiled;
}
