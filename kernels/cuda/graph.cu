/* CUDA-graph recording and replay: record_begin / record_end (the Backend's
 * recording members), the cache of executable graphs and cuda_graph_counts.
 * The recording state that uploads and error reports consult lives in
 * runtime.cu; this file turns it on and off. */
#include "kernels/cuda/common.cuh"
extern "C" {
#include "kernels/base/replay.h"
}
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- recording: a forward pass as one CUDA graph ----------------------------
 * A decode step issues ~18 ops per layer, and each costs the host a few
 * microseconds to launch, as much as the GPU needs to run it, so neither
 * side could hide the other (docs/cuda.md).  backend_recorded() brackets a
 * forward pass with record_begin / record_end, and the forward is run once
 * as one graph launch:
 *   1. signed (kernels/base/replay.h): its ops issued with nothing launched,
 *      each mixing its kernel, shape, arguments and uploads into a
 *      signature (under a stream capture that nothing should reach: an op
 *      that launched anyway is caught there, and the forward runs op by op);
 *   2. a signature recorded before replays its graph: one launch, and the
 *      host has spent only the signing (no CUDA call per op);
 *   3. else the ops are captured from cu_stream into a new graph, which is
 *      instantiated, kept under its signature and launched.  Its control
 *      uploads are staged in pinned memory kept with it (cu_record_arena),
 *      so that each launch copies the bytes that were signed.
 * Everything that changes from cycle to cycle is read in device memory
 * (kernels.h: positions, KV slots, context lengths, masks), and the
 * attention's bound on the context moves in buckets (attn_ctx_bound), so
 * the forwards of one shape replay one graph.
 *
 * Off by default (BackendOptions.cuda_graphs, --cuda-graphs on): it has not
 * been measured against op-by-op launches on a GPU yet (docs/cuda.md). */
#define ARENA_BYTES ((size_t)256 << 10)   /* a recording's control uploads */
static ReplayCache cache;
static struct { cudaGraphExec_t exec; char *arena; } entry[REPLAY_ENTRIES];
static enum { PHASE_IDLE, PHASE_SIGNING, PHASE_RECORDING } phase;
static int rec_entry;
static uint64_t rec_key;
static long graphs_launched, graphs_made, graphs_spoiled;

static int graphs_on(void) { return backend_settings()->cuda_graphs > 0; }

static void say_not_used(const char *why) {
    graphs_spoiled++;
    if (backend_settings()->cuda_graphs == 2) fprintf(stderr, "c2t cuda: graph not used: %s\n", why);
}

/* a capture on cu_stream with the runtime told (sign: only signing) */
static int capture_begin(bool sign) {
    if (!cu_record_prepare()) return 0;
    if (cudaStreamBeginCapture(cu_stream(), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cu_record_started(sign);
    return 1;
}

int cu_record_begin(void) {
    if (!graphs_on() || phase != PHASE_IDLE || !cu_stream() || !cu_blas()) return 0;
    if (!capture_begin(true)) return 0;
    phase = PHASE_SIGNING;
    return 1;
}

/* Entry i emptied for a new recording, its arena allocated; 0 on failure. */
static int make_room(int i) {
    if (entry[i].exec) {
        /* its last launch may still be copying from the arena */
        if (!CU_OK(cudaStreamSynchronize(cu_stream()))) return 0;
        cudaGraphExecDestroy(entry[i].exec);
        entry[i].exec = NULL;
        replay_drop(&cache, i);
    }
    return entry[i].arena || CU_OK(cudaMallocHost((void **)&entry[i].arena, ARENA_BYTES));
}

/* After signing: 0 (the graph of that signature launched), 1 (recording
 * begun: issue the ops again) or -1 (run them op by op). */
static int end_signing(void) {
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(cu_stream(), &g);
    const char *spoiled = cu_record_stopped();
    size_t strays = 0;
    if (g && cudaGraphGetNodes(g, NULL, &strays) != cudaSuccess) strays = 1;
    if (g) cudaGraphDestroy(g);
    phase = PHASE_IDLE;
    if (e != cudaSuccess || spoiled || strays) {
        (void)cudaGetLastError();
        cu_forget_held();   /* the signed uploads never ran */
        say_not_used(spoiled ? spoiled : strays ? "an op launched while its forward was signed" : cudaGetErrorString(e));
        return -1;
    }
    const uint64_t key = cu_signature();
    const int hit = replay_find(&cache, key);
    if (hit >= 0) {
        if (!CU_OK(cudaGraphLaunch(entry[hit].exec, cu_stream()))) { cu_forget_held(); return -1; }
        graphs_launched++;
        return 0;
    }
    cu_forget_held();
    const int i = replay_victim(&cache);
    if (!make_room(i)) return -1;
    cu_record_arena(entry[i].arena, ARENA_BYTES);
    if (!capture_begin(false)) { cu_record_arena(NULL, 0); return -1; }
    phase = PHASE_RECORDING;
    rec_entry = i;
    rec_key = key;
    return 1;
}

/* After recording: 0 (instantiated, kept and launched) or -1. */
static int end_recording(void) {
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(cu_stream(), &g);
    const char *spoiled = cu_record_stopped();
    cu_record_arena(NULL, 0);
    phase = PHASE_IDLE;
    const int i = rec_entry;
    if (e != cudaSuccess || spoiled || !g) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        cu_forget_held();   /* the recorded uploads never ran */
        say_not_used(spoiled ? spoiled : cudaGetErrorString(e));
        return -1;
    }
    const bool made = CU_OK(cudaGraphInstantiate(&entry[i].exec, g, 0));
    cudaGraphDestroy(g);
    if (!made) { entry[i].exec = NULL; cu_forget_held(); return -1; }
    replay_store(&cache, i, rec_key);
    graphs_made++;
    if (!CU_OK(cudaGraphLaunch(entry[i].exec, cu_stream()))) { cu_forget_held(); return -1; }
    graphs_launched++;
    return 0;
}

int cu_record_end(void) {
    if (phase == PHASE_SIGNING) return end_signing();
    if (phase == PHASE_RECORDING) return end_recording();
    return -1;
}

void cu_graphs_free(void) {
    for (int i = 0; i < REPLAY_ENTRIES; i++) {
        if (entry[i].exec) cudaGraphExecDestroy(entry[i].exec);
        if (entry[i].arena) cudaFreeHost(entry[i].arena);
        entry[i].exec = NULL;
        entry[i].arena = NULL;
        replay_drop(&cache, i);
    }
}

extern "C" void cuda_graph_counts(long *launched, long *instantiated, long *not_recorded) {
    if (launched) *launched = graphs_launched;
    if (instantiated) *instantiated = graphs_made;
    if (not_recorded) *not_recorded = graphs_spoiled;
}
