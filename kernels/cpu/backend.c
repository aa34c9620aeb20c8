/* The CPU Backend: memory is plain host memory, weights stay where the
 * checkpoint was mapped. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <stdlib.h>

static float *cpu_alloc(size_t n) { return xcalloc(n ? n : 1, sizeof(float)); }
static void cpu_release(void *p) { free(p); }
/* to_host, to_device and copy; for n 0 the pointers may be NULL (as on CUDA) */
static void cpu_copy(float *dst, const float *src, size_t n) { if (n) memmove(dst, src, n * sizeof(float)); }

/* GGUF's block types stay as stored (no F32 copy): for matrices only
 * (products, embedding rows), since norms and biases read their vectors
 * element by element.  In the vector builds a matrix's first product
 * copies it once, rows interleaved, for every later one
 * (cpu_quant_make_pack): a matrix only ever read by rows (an untied
 * embedding) gets no copy, and a matrix's blocks must not change after
 * its first product.  Embedding rows and the scalar build read the blocks
 * in place. */
static int quant_weight(Weight *w, const void *host, DType dt, int64_t rows, int64_t cols) {
    if (rows < 2) {
        err_set("a %s weight must be a matrix (rows %lld): vectors must be F32, F16 or BF16", dtype_name(dt),
                (long long)rows);
        return -1;
    }
    if (quant_row_bytes(dt, cols) < 0) return -1;
    w->data = host; w->dtype = dt; w->rows = rows; w->cols = cols; w->mapped = 0;
    w->priv = xcalloc(1, sizeof(CpuWeightCopies));
    return 0;
}

static int cpu_weight(Weight *w, const void *host, DType dt, int64_t rows, int64_t cols) {
    if (dtype_is_quant(dt)) return quant_weight(w, host, dt, rows, cols);
    if (dt != DT_F32 && dt != DT_F16 && dt != DT_BF16) {
        err_set("weights must be F32, F16, BF16 or a GGUF block type, not %s", dtype_name(dt));
        return -1;
    }
    w->data = host; w->dtype = dt; w->rows = rows; w->cols = cols; w->priv = NULL; w->mapped = 0;
    if (dt == DT_F32) return 0;
    CpuWeightCopies *c = xcalloc(1, sizeof *c);
    w->priv = c;
    if (backend_settings()->cpu_fast_gemm == CPU_GEMM_AMX && rows > 1) c->tiles = cpu_amx_tiles(w);   /* vectors: at a first product */
    return 0;
}
static void cpu_weight_release(Weight *w) {
    CpuWeightCopies *c = w->priv;
    if (c) {
        cpu_weight_f32_release(w);
        free(c->tiles);
        free(c->kpack);
        free(c);
    }
    w->priv = NULL;
    w->data = NULL;
}

/* On a CPU that other processes share, a region still waits for a piece
 * that a descheduled worker has started (threads.c), and a decoding cycle
 * runs dozens of regions: two threads can then be slower than one (and are
 * faster when the cores are free).  So the backend measures instead of
 * guessing: each window of TUNE_WINDOW units
 * opens with TUNE_PROBE units on one thread and TUNE_PROBE on all of them,
 * alternating, and runs the rest with whichever took less time.  A window
 * whose probes confirm the last choice is followed by one twice as long,
 * up to TUNE_WINDOW_MAX units, so that where the answer holds (a busy
 * machine: one thread) the probes of the losing setting cost ever less; a
 * changed choice starts again at TUNE_WINDOW.  Per unit
 * (cycle), not per emitted token: how many tokens a cycle accepts does not
 * depend on the thread count, and dividing by it made the choice a coin
 * toss.  Where the caller knows what each unit should cost (t->work: a
 * cycle of 1 node and one of 30 differ tenfold), each setting's time is
 * divided by its units' summed work: else a one-thread probe that met
 * small cycles beat all threads on large ones, and the window ran on one
 * thread.  The thread count changes no result (matmul.c's splits do not
 * depend on it). */
#define TUNE_WINDOW 48
#define TUNE_WINDOW_MAX 768
#define TUNE_PROBE 2

static void cpu_unit_begin(BackendTuner *t) {
    if (cpu_threads_max() < 2) return;
    int u = t->unit;
    if (u == 0) t->secs[0] = t->secs[1] = t->works[0] = t->works[1] = 0;
    t->slot = u < 2 * TUNE_PROBE ? u % 2 : t->best;   /* 0: one thread, 1: all */
    t->probe = u < 2 * TUNE_PROBE && (!t->window || t->slot != t->best);
    cpu_threads_set(t->slot ? cpu_threads_max() : 1);
    t->t0 = now_seconds();
}

/* Every thread again after the unit: what runs between units (a prompt's
 * prefill, a calibration) is not the tuner's to slow. */
static void cpu_unit_end(BackendTuner *t) {
    if (cpu_threads_max() < 2) return;
    cpu_threads_set(cpu_threads_max());
    t->one_thread_units += t->slot == 0;
    int u = t->unit++;
    if (u < 2 * TUNE_PROBE) {
        t->secs[t->slot] += now_seconds() - t->t0;
        t->works[t->slot] += t->work > 0 ? t->work : 1;
        if (u == 2 * TUNE_PROBE - 1) {
            const int best = t->secs[1] * t->works[0] <= t->secs[0] * t->works[1];
            const int longer = t->window * 2 < TUNE_WINDOW_MAX ? t->window * 2 : TUNE_WINDOW_MAX;
            t->window = t->window && best == t->best ? longer : TUNE_WINDOW;
            t->best = best;
        }
    }
    if (t->unit >= (t->window ? t->window : TUNE_WINDOW)) t->unit = 0;
}

const Backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .to_host = cpu_copy,
    .to_device = cpu_copy,
    .copy = cpu_copy,
    .weight = cpu_weight,
    .weight_release = cpu_weight_release,
    .embed = cpu_embed,
    .matmul = cpu_matmul,
    .matmul_many = cpu_matmul_many,
    .add_bias = cpu_add_bias,
    .rmsnorm = cpu_rmsnorm,
    .add_rmsnorm = cpu_add_rmsnorm,
    .rope = cpu_rope,
    .add = cpu_add,
    .swiglu = cpu_swiglu,
    .geglu = cpu_geglu,
    .scale = cpu_scale,
    .concat = cpu_concat,
    .copy_rows = cpu_copy_rows,
    .kv_create = cpu_kv_create,
    .kv_free = cpu_kv_free,
    .kv_slots = cpu_kv_slots,
    .kv_write = cpu_kv_write,
    .rope_kv = cpu_rope_kv,
    .kv_keep = cpu_kv_keep,
    .attention = cpu_attention,
    .softmax_topk = cpu_softmax_topk,
    .argmax = cpu_argmax,
    .softmax_topk_dev = cpu_softmax_topk,   /* backend memory is host memory */
    .argmax_dev = cpu_argmax,
    .sample_dev = cpu_sample_dev,
    .tree_root = cpu_tree_root,
    .tree_grow = cpu_tree_grow,
    .tree_top = cpu_tree_top,
    .tree_classify = cpu_tree_classify,
    .tree_pass = cpu_tree_pass,
    .tree_compact = cpu_tree_compact,
    .tree_inputs = cpu_tree_inputs,
    .tree_accept = cpu_tree_accept,
    .unit_begin = cpu_unit_begin,
    .unit_end = cpu_unit_end,
};
