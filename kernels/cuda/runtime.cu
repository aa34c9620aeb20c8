/* The CUDA runtime the op files share: the stream, the cuBLAS handle, the
 * device scratch buffers, control uploads through the pinned staging ring
 * (cu_upload), result fetches (cu_fetch), status checks and error reporting
 * (cu_report, cu_fail, cuda_errors), cuda_available, and the recording state
 * that uploads and reports consult (graph.cu drives it). */
#include "kernels/cuda/common.cuh"
extern "C" {
#include "kernels/base/replay.h"
}
#include <pthread.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- error reporting ------------------------------------------------------ */
#define MAX_PRINTED 16
static int n_errors;
static char last_error[1024];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

static void record(const char *msg) {
    pthread_mutex_lock(&err_lock);
    n_errors++;
    snprintf(last_error, sizeof last_error, "%s", msg);
    if (n_errors <= MAX_PRINTED) fprintf(stderr, "c2t cuda: %s\n", msg);
    if (n_errors == MAX_PRINTED) fprintf(stderr, "c2t cuda: further CUDA errors are not printed\n");
    pthread_mutex_unlock(&err_lock);
}

/* While a graph is being recorded nothing runs, so a failure there spoils
 * the recording instead of counting: the ops are issued again directly,
 * and a real failure is reported then.  What cannot be recorded (a growing
 * buffer, a wait) spoils it the same way (cu_record_spoil, below).  graph.cu
 * turns recording on and off (cu_record_started, cu_record_stopped); the
 * state lives here, where it is consulted. */
static bool recording;
static bool signing;     /* recording only to sign (graph.cu): nothing is captured but strays */
static bool spoiled;
static char spoil_why[160];
static uint64_t signature;
static char *arena;      /* the recording's pinned upload buffer (cu_record_arena) */
static size_t arena_cap, arena_used;

static void cu_record_spoil(const char *why) {
    if (!spoiled) snprintf(spoil_why, sizeof spoil_why, "%s", why);
    spoiled = true;
}

void cu_report(const char *file, int line, const char *call, const char *what) {
    /* name the called function, not its whole argument list */
    char fn[64];
    size_t k = 0;
    while (call[k] && call[k] != '(' && k + 1 < sizeof fn) { fn[k] = call[k]; k++; }
    fn[k] = 0;
    err_set("%s:%d: %s (%s)", file, line, what ? what : "unknown error", fn);
    if (recording) cu_record_spoil(err_get());
    else record(err_get());
}

void cu_fail(const char *file, int line, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set("%s:%d: %s", file, line, msg);
    if (recording) cu_record_spoil(err_get());
    else record(err_get());
}

extern "C" int cuda_errors(void) {
    pthread_mutex_lock(&err_lock);
    int n = n_errors;
    pthread_mutex_unlock(&err_lock);
    return n;
}

extern "C" const char *cuda_last_error(void) { return last_error; }

extern "C" int cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();   /* not an error: there is simply no GPU */
        return 0;
    }
    return n > 0;
}

/* ---- shared state ------------------------------------------------------------ */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t blas;
static void *blas_ws;
static int sm_count;
static cudaStream_t stream;
static bool stream_made;

cudaStream_t cu_stream(void) {
    if (!stream_made) {
        stream_made = true;
        if (!CU_OK(cudaStreamCreate(&stream))) stream = 0;
    }
    return stream;
}

/* cuBLAS's own workspace, given to it so that a GEMM recorded into a graph
 * allocates nothing (32 MiB: what cuBLAS asks for on Hopper) */
#define BLAS_WS_BYTES ((size_t)32 << 20)

cublasHandle_t cu_blas(void) {
    pthread_mutex_lock(&state_lock);
    if (!blas) {
        cublasHandle_t h = NULL;
        if (CU_OK(cublasCreate(&h))) {
            /* cu_stream: ordered with every other op of the backend.
             * Default math: tensor cores for F16/BF16 inputs, but no TF32
             * for the F32 GEMMs (that needs CUBLAS_TF32_TENSOR_OP_MATH or
             * CUBLAS_COMPUTE_32F_FAST_TF32, neither used here). */
            if (!blas_ws && !CU_OK(cudaMalloc(&blas_ws, BLAS_WS_BYTES))) blas_ws = NULL;
            if (blas_ws && CU_OK(cublasSetStream(h, cu_stream())) &&
                CU_OK(cublasSetWorkspace(h, blas_ws, BLAS_WS_BYTES)) && CU_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)))
                blas = h;
            else cublasDestroy(h);
        }
    }
    cublasHandle_t h = blas;
    pthread_mutex_unlock(&state_lock);
    return h;
}

int cu_sm_count(void) {
    if (!sm_count) {
        int dev = 0, n = 0;
        if (CU_OK(cudaGetDevice(&dev)) && CU_OK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev)))
            sm_count = n > 0 ? n : 1;
        else
            return 1;
    }
    return sm_count;
}

typedef struct { void *p; size_t cap; } Buf;
static Buf ctl[CU_CTL_SLOTS], ws[WS_COUNT];
static void *rec_dummy;   /* handed out by a spoiled recording: never used */

static void *grow(Buf *b, size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes <= b->cap) return b->p;
    if (recording) {   /* cudaFree waits for the device: not while recording */
        cu_record_spoil("a scratch buffer must grow");
        return b->p ? b->p : rec_dummy;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < bytes) cap *= 2;
    if (b->p) {
        void *old = b->p;
        b->p = NULL;
        b->cap = 0;
        CU_CHECK_R(cudaFree(old), NULL);   /* synchronises: no kernel still reads it */
    }
    void *p = NULL;
    CU_CHECK_R(cudaMalloc(&p, cap), NULL);
    b->p = p;
    b->cap = cap;
    return p;
}

/* Pinned staging ring for control uploads.  A cudaMemcpy from pageable
 * memory waits for every queued kernel before it copies, so the host could
 * never run ahead of the GPU: rope alone uploaded positions four times per
 * layer, and a 1B-shape decode step spent 3/4 of its time in those waits.
 * Instead the bytes are copied into pinned memory and sent with
 * cudaMemcpyAsync on the default stream (ordered after earlier kernels, like
 * before).  A region of the ring is reused only after a wrap, and a wrap
 * first waits for the stream, so no queued copy still reads it. */
#define STAGE_BYTES ((size_t)32 << 20)
static char *stage;
static size_t stage_used;
static int stage_failed;

/* What each control slot's device buffer holds (host copy), so that an
 * upload of the same bytes is skipped: positions are uploaded by both ropes
 * of every layer and inv_freq by every rope, with the same content all
 * through a forward.  Only cu_upload writes these buffers, in stream order,
 * so equal bytes here mean equal bytes there for every later kernel. */
static struct { void *bytes; size_t len, cap; } held[CU_CTL_SLOTS];

/* bytes a control upload moves: rounded up to a power of two (at least
 * 256), so that its slot's buffer grows seldom (a grown buffer moves, and a
 * forward that uploads into it signs anew); the bytes past the host data
 * are never read */
static size_t upload_size(size_t bytes) {
    size_t r = 256;
    while (r < bytes) r *= 2;
    return r;
}

static int stage_copy(void *dst, const void *host, size_t bytes, size_t xfer);

/* While signing, the upload is signed (slot, destination, bytes) and held[]
 * is kept as the upload would keep it, so that the signing skips what the
 * recording (and each launch of the graph) skips. */
void *cu_upload(const void *host, size_t bytes, int slot) {
    size_t before = ctl[slot].cap;
    const size_t xfer = upload_size(bytes);
    void *d = grow(&ctl[slot], xfer);
    if (!d || !bytes) return d;
    if (ctl[slot].cap == before && held[slot].len == bytes && !memcmp(held[slot].bytes, host, bytes)) return d;
    held[slot].len = 0;
    if (bytes > held[slot].cap) {
        void *p = realloc(held[slot].bytes, bytes);
        if (p) { held[slot].bytes = p; held[slot].cap = bytes; }
    }
    if (bytes <= held[slot].cap) { memcpy(held[slot].bytes, host, bytes); held[slot].len = bytes; }
    if (signing) {
        cu_sign(&slot, sizeof slot);
        cu_sign(&d, sizeof d);
        cu_sign(&xfer, sizeof xfer);
        cu_sign(host, bytes);
        return d;
    }
    if (stage_copy(d, host, bytes, xfer)) { held[slot].len = 0; return NULL; }
    return d;
}

/* host[0..bytes) -> dst through the ring (while recording, through the
 * recording's arena), xfer bytes sent (>= bytes; the tail is never read),
 * in stream order; -1 on a failed copy (reported). */
static int stage_copy(void *dst, const void *host, size_t bytes, size_t xfer) {
    if (recording) {   /* from the recording's arena, which its graph keeps */
        const size_t off = (arena_used + 255) & ~(size_t)255;
        if (!arena || off + xfer > arena_cap) {
            cu_record_spoil("the recording's uploads overflow its buffer");
            return 0;
        }
        memcpy(arena + off, host, bytes);
        if (!CU_OK(cudaMemcpyAsync(dst, arena + off, xfer, cudaMemcpyHostToDevice, cu_stream()))) return -1;
        arena_used = off + xfer;
        return 0;
    }
    if (!stage && !stage_failed && !CU_OK(cudaMallocHost((void **)&stage, STAGE_BYTES))) stage_failed = 1;
    if (!stage || xfer > STAGE_BYTES)   /* the plain synchronous copy */
        return CU_OK(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice)) ? 0 : -1;
    size_t off = (stage_used + 255) & ~(size_t)255;
    if (off + xfer > STAGE_BYTES) {
        if (!CU_OK(cudaStreamSynchronize(cu_stream()))) return -1;
        off = 0;
    }
    memcpy(stage + off, host, bytes);
    if (!CU_OK(cudaMemcpyAsync(dst, stage + off, xfer, cudaMemcpyHostToDevice, cu_stream()))) return -1;
    stage_used = off + xfer;
    return 0;
}

/* to_device of up to a MiB (a forward's tokens, positions and masks) goes
 * through the ring too: the host returns at once and the copy lands in
 * stream order, after the kernels queued before it and before those queued
 * after, as the blocking copy did. */
void cu_to_device_bytes(void *dst, const void *host, size_t bytes) {
    if (!bytes) return;
    if (signing) {
        cu_sign(&dst, sizeof dst);
        cu_sign(host, bytes);
        return;
    }
    if (bytes <= ((size_t)1 << 20) || recording) stage_copy(dst, host, bytes, bytes);
    else CU_CHECK(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice));
}

bool cu_copy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height) {
    if (signing) {
        const void *at[2] = {dst, src};
        const size_t shape[4] = {dpitch, spitch, width, height};
        cu_sign(at, sizeof at);
        cu_sign(shape, sizeof shape);
        return true;
    }
    return CU_OK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, cu_stream()));
}

/* Results for the host (top-k lists, entropies, argmax ids) come back in
 * one copy into pinned memory: one wait per op instead of one per array,
 * and pinned copies skip the driver's bounce buffer. */
static char *fetch_buf;
static size_t fetch_cap;

const void *cu_fetch(const void *dev, size_t bytes) {
    if (bytes > fetch_cap) {
        if (fetch_buf) cudaFreeHost(fetch_buf);
        fetch_buf = NULL;
        fetch_cap = 0;
        size_t cap = bytes < 65536 ? 65536 : bytes;
        CU_CHECK_R(cudaMallocHost((void **)&fetch_buf, cap), NULL);
        fetch_cap = cap;
    }
    if (recording) { cu_record_spoil("a result fetched while recording"); return NULL; }
    CU_CHECK_R(cudaMemcpyAsync(fetch_buf, dev, bytes ? bytes : 1, cudaMemcpyDeviceToHost, cu_stream()), NULL);
    CU_CHECK_R(cudaStreamSynchronize(cu_stream()), NULL);
    return fetch_buf;
}

void *cu_workspace(int slot, size_t bytes) { return grow(&ws[slot], bytes); }

/* ---- recording: what graph.cu asks of the runtime -------------------------- */
bool cu_recording(void) { return recording; }
bool cu_signing(void) { return signing; }
void cu_sign(const void *p, size_t n) { signature = replay_sign(signature, p, n); }
uint64_t cu_signature(void) { return signature ? signature : 1; }

void cu_record_arena(char *pinned, size_t cap) {
    arena = pinned;
    arena_cap = pinned ? cap : 0;
    arena_used = 0;
}

void cu_forget_held(void) {
    for (int i = 0; i < CU_CTL_SLOTS; i++) held[i].len = 0;
}

int cu_record_prepare(void) {
    if (!rec_dummy && !CU_OK(cudaMalloc(&rec_dummy, 4096))) return 0;
    /* every slot's first upload inside is recorded, whatever it held before:
     * the same forward then always signs and records the same uploads */
    cu_forget_held();
    return 1;
}

void cu_record_started(bool sign) {
    recording = true;
    signing = sign;
    spoiled = false;
    if (sign) signature = REPLAY_SIGN_INIT;
}

const char *cu_record_stopped(void) {
    recording = false;
    signing = false;
    return spoiled ? spoil_why : NULL;
}

/* ---- teardown (cuda_shutdown, shutdown.cu) ----------------------------------- */
void cu_runtime_free(void) {
    for (int i = 0; i < CU_CTL_SLOTS; i++) {
        cudaFree(ctl[i].p);
        ctl[i] = Buf{NULL, 0};
        free(held[i].bytes);
        held[i].bytes = NULL;
        held[i].len = held[i].cap = 0;
    }
    for (int i = 0; i < WS_COUNT; i++) { cudaFree(ws[i].p); ws[i] = Buf{NULL, 0}; }
    if (stage) cudaFreeHost(stage);
    stage = NULL;
    if (fetch_buf) cudaFreeHost(fetch_buf);
    fetch_buf = NULL;
    fetch_cap = 0;
    stage_used = 0;
    pthread_mutex_lock(&state_lock);
    if (blas) cublasDestroy(blas);
    blas = NULL;
    cudaFree(blas_ws);
    blas_ws = NULL;
    pthread_mutex_unlock(&state_lock);
}

void cu_stream_free(void) {
    cudaFree(rec_dummy);
    rec_dummy = NULL;
    if (stream) cudaStreamDestroy(stream);
    stream = 0;
    stream_made = false;
}
