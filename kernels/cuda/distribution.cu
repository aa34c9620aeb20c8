/* Per-row distribution ops over device logits[n][vocab]: softmax at a
 * temperature, the top-k ids (descending probability, ties to the lower id)
 * with their probabilities, the entropy of the full distribution or of its
 * topm largest probabilities (C2T paper eq. 7; ties at the M-th value fill
 * up to M as in the CPU twin), and argmax.
 *
 * One block per row.  The probabilities are never stored: p_j = expf((l_j -
 * max)·(1/T)) · (1/Σ) is recomputed in each pass exactly as the CPU backend
 * computes it (Σ in double).  The k-th and the M-th largest probabilities
 * are found by a radix select over their bit patterns (non-negative floats
 * order like their bits): four passes of an 8-bit histogram with
 * warp-aggregated shared atomics.  The top-k set is then every p above the
 * k-th value plus the lowest ids equal to it (an ordered block scan), sorted
 * by (p desc, id asc).  vocab up to INT_MAX, k <= 1024.
 *
 * The kernels write device arrays: the _dev ops (the device cycle) hand them
 * the caller's, the host-output ops a workspace they fetch in one copy. */
#include "kernels/cuda/common.cuh"
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <string.h>

#define DIST_THREADS 512
#define TOPK_MAX 1024

struct RowP {
    const float *l;
    float mx, invt, inv;
    /* explicitly rounded operations: every call site must produce the same
     * bits (the selection compares p_j == threshold), so no contraction */
    __device__ __forceinline__ float operator()(int j) const {
        return __fmul_rn(expf(__fmul_rn(__fsub_rn(l[j], mx), invt)), inv);
    }
};

struct MaxOp {   /* cub::Max is gone in CUDA 13; cuda::maximum is not in CUDA 11 */
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct SelectShared {
    unsigned hist[256];
    unsigned digit, rest;
};

/* The bit pattern of the rank-th largest (0-based) of p_j over j < vocab. */
__device__ unsigned radix_select(const RowP &P, int vocab, unsigned rank, SelectShared &sh) {
    unsigned prefix = 0, mask = 0;
    const int lane = threadIdx.x & 31;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < 256; d += blockDim.x) sh.hist[d] = 0;
        __syncthreads();
        for (int base = 0; base < vocab; base += blockDim.x) {   /* uniform trip count: full-warp match */
            const int j = base + threadIdx.x;
            unsigned bin = 256;
            if (j < vocab) {
                const unsigned b = __float_as_uint(P(j));
                if ((b & mask) == prefix) bin = (b >> shift) & 255u;
            }
            const unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin < 256 && lane == __ffs(peers) - 1) atomicAdd(&sh.hist[bin], (unsigned)__popc(peers));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned above = 0, d = 0;
            for (int k = 255; k >= 0; k--) {
                if (above + sh.hist[k] > rank) { d = (unsigned)k; break; }
                above += sh.hist[k];
            }
            sh.digit = d;
            sh.rest = rank - above;
        }
        __syncthreads();
        prefix |= sh.digit << shift;
        mask |= 255u << shift;
        rank = sh.rest;
        __syncthreads();
    }
    return prefix;
}

__device__ __forceinline__ double plogp(double p) { return p > 0 ? p * log(p) : 0.0; }

/* (p, id) ordering of the output: higher p first, then lower id */
__device__ __forceinline__ bool before(float pa, int ia, float pb, int ib) { return pa > pb || (pa == pb && ia < ib); }

__global__ void __launch_bounds__(DIST_THREADS)
softmax_topk_kernel(const float *__restrict__ logits, int vocab, float invt, int k, int topm,
                    int *__restrict__ ids_out, float *__restrict__ probs_out, float *__restrict__ ent_out) {
    typedef cub::BlockReduce<float, DIST_THREADS> ReduceF;
    typedef cub::BlockReduce<double, DIST_THREADS> ReduceD;
    typedef cub::BlockReduce<int, DIST_THREADS> ReduceI;
    typedef cub::BlockScan<int, DIST_THREADS> ScanI;
    __shared__ union {
        typename ReduceF::TempStorage rf;
        typename ReduceD::TempStorage rd;
        typename ReduceI::TempStorage ri;
        typename ScanI::TempStorage si;
    } tmp;
    __shared__ SelectShared sel;
    __shared__ float cand_p[TOPK_MAX];
    __shared__ int cand_i[TOPK_MAX];
    __shared__ float s_f;
    __shared__ double s_d;
    __shared__ int s_n;

    const int row = blockIdx.x, tid = threadIdx.x;
    RowP P;
    P.l = logits + (size_t)row * vocab;
    P.invt = invt;

    /* max, then the normaliser in double as the CPU does */
    float mx = -INFINITY;
    for (int j = tid; j < vocab; j += blockDim.x) mx = fmaxf(mx, P.l[j]);
    mx = ReduceF(tmp.rf).Reduce(mx, MaxOp());
    if (tid == 0) s_f = mx;
    __syncthreads();
    P.mx = s_f;
    P.inv = 1.0f;
    double sum = 0;
    for (int j = tid; j < vocab; j += blockDim.x) sum += (double)P(j);
    sum = ReduceD(tmp.rd).Sum(sum);
    if (tid == 0) s_d = sum;
    __syncthreads();
    P.inv = (float)(1.0 / s_d);

    if (k > 0 && (ids_out || probs_out)) {
        const int kk = k < vocab ? k : vocab;
        const float thr = __uint_as_float(radix_select(P, vocab, (unsigned)(kk - 1), sel));
        /* everything strictly above the k-th value (fewer than kk ids) */
        if (tid == 0) s_n = 0;
        __syncthreads();
        for (int j = tid; j < vocab; j += blockDim.x) {
            const float p = P(j);
            if (p > thr) {
                const int at = atomicAdd(&s_n, 1);
                cand_p[at] = p;
                cand_i[at] = j;
            }
        }
        __syncthreads();
        const int above = s_n;
        /* then the lowest ids equal to it, in id order */
        int taken = 0;
        for (int base = 0; base < vocab && above + taken < kk; base += blockDim.x) {
            const int j = base + tid;
            const int eq = j < vocab && P(j) == thr;
            int off, total;
            ScanI(tmp.si).ExclusiveSum(eq, off, total);
            if (eq && above + taken + off < kk) {
                cand_p[above + taken + off] = thr;
                cand_i[above + taken + off] = j;
            }
            taken += total;
            __syncthreads();   /* tmp.si is reused next round */
        }
        __syncthreads();
        /* rank sort of the kk candidates */
        for (int c = tid; c < kk; c += blockDim.x) {
            const float p = cand_p[c];
            const int id = cand_i[c];
            int r = 0;
            for (int o = 0; o < kk; o++) r += before(cand_p[o], cand_i[o], p, id);
            if (ids_out) ids_out[(size_t)row * k + r] = id;
            if (probs_out) probs_out[(size_t)row * k + r] = p;
        }
        for (int c = kk + tid; c < k; c += blockDim.x) {
            if (ids_out) ids_out[(size_t)row * k + c] = -1;
            if (probs_out) probs_out[(size_t)row * k + c] = 0.0f;
        }
        __syncthreads();
    }

    if (ent_out) {
        double h = 0;
        if (topm <= 0 || topm >= vocab) {
            for (int j = tid; j < vocab; j += blockDim.x) h -= plogp((double)P(j));
            h = ReduceD(tmp.rd).Sum(h);
            if (tid == 0) ent_out[row] = (float)h;
        } else {
            const float thr = __uint_as_float(radix_select(P, vocab, (unsigned)(topm - 1), sel));
            int cnt = 0;
            for (int j = tid; j < vocab; j += blockDim.x) {
                const float p = P(j);
                if (p > thr) { h -= plogp((double)p); cnt++; }
            }
            h = ReduceD(tmp.rd).Sum(h);
            __syncthreads();
            cnt = ReduceI(tmp.ri).Sum(cnt);
            if (tid == 0) ent_out[row] = (float)(h - (double)(topm - cnt) * plogp((double)thr));
        }
    }
}

/* Launches the kernel on device outputs ids/probs[n][k], entropy[n] (any
 * may be NULL); false when there is nothing to compute or it failed. */
static bool softmax_topk_launch(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                                float *probs, int topm, float *entropy) {
    if (n <= 0 || vocab <= 0) return false;
    if (k <= 0 || (!ids && !probs)) {   /* no top-k asked for */
        k = 0;
        ids = NULL;
        probs = NULL;
    }
    if (!k && !entropy) return false;
    if (k > TOPK_MAX) {
        CU_FAIL("softmax_topk: k = %d above the CUDA backend's %d", k, TOPK_MAX);
        return false;
    }
    const float invt = temperature > 0 ? 1.0f / temperature : 1.0f;
    cu_launch(softmax_topk_kernel, n, DIST_THREADS, 0, logits, vocab, invt, k, topm, ids, probs, entropy);
    CU_LAUNCHED_R(false);
    return true;
}

void cu_softmax_topk_dev(const float *logits, int n, int vocab, float temperature, int k, int *ids, float *probs,
                         int topm, float *entropy) {
    softmax_topk_launch(logits, n, vocab, temperature, k, ids, probs, topm, entropy);
}

void cu_softmax_topk(const float *logits, int n, int vocab, float temperature, int k, int *ids, float *probs,
                     int topm, float *entropy) {
    if (n <= 0 || vocab <= 0) return;
    const int kk = k > 0 && (ids || probs) ? k : 0;
    if (!kk && !entropy) return;
    /* outputs: ids[n][k], probs[n][k], entropy[n] in one device buffer */
    const size_t ids_bytes = (size_t)n * kk * sizeof(int), probs_bytes = (size_t)n * kk * sizeof(float);
    const size_t bytes = ids_bytes + probs_bytes + (size_t)n * sizeof(float);
    char *ws = (char *)cu_workspace(WS_DIST, bytes);
    if (!ws) return;
    int *d_ids = ids ? (int *)ws : NULL;
    float *d_probs = probs ? (float *)(ws + ids_bytes) : NULL;
    float *d_ent = entropy ? (float *)(ws + ids_bytes + probs_bytes) : NULL;
    if (!softmax_topk_launch(logits, n, vocab, temperature, kk, d_ids, d_probs, topm, d_ent)) return;
    const char *h = (const char *)cu_fetch(ws, bytes);   /* one round trip for all three */
    if (!h) return;
    if (ids) memcpy(ids, h, ids_bytes);
    if (probs) memcpy(probs, h + ids_bytes, probs_bytes);
    if (entropy) memcpy(entropy, h + ids_bytes + probs_bytes, (size_t)n * sizeof(float));
}

/* ---- argmax: ties to the lower id -------------------------------------------------- */
/* the argmax of row l[0..vocab) into *out by the block */
__device__ __forceinline__ void argmax_row(const float *__restrict__ l, int vocab, int *__restrict__ out) {
    __shared__ float bv[DIST_THREADS / 32];
    __shared__ int bi[DIST_THREADS / 32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* each thread scans ascending ids, so strict > keeps its lowest id */
    float v = -INFINITY;
    int id = vocab;
    for (int j = tid; j < vocab; j += blockDim.x)
        if (id == vocab || l[j] > v) { v = l[j]; id = j; }
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, id, o);
        if (oi < vocab && (id == vocab || ov > v || (ov == v && oi < id))) { v = ov; id = oi; }
    }
    if (lane == 0) { bv[warp] = v; bi[warp] = id; }
    __syncthreads();
    if (tid == 0) {
        for (int w = 1; w < (int)(blockDim.x >> 5); w++)
            if (bi[w] < vocab && (bi[0] == vocab || bv[w] > bv[0] || (bv[w] == bv[0] && bi[w] < bi[0]))) {
                bv[0] = bv[w]; bi[0] = bi[w];
            }
        *out = bi[0] < vocab ? bi[0] : 0;
    }
}

__global__ void __launch_bounds__(DIST_THREADS) argmax_kernel(const float *__restrict__ logits, int vocab,
                                                              int *__restrict__ out) {
    argmax_row(logits + (size_t)blockIdx.x * vocab, vocab, out + blockIdx.x);
}

/* tree_batch's argmax_dev ops: op blockIdx.y's row blockIdx.x */
#define ARGMAX_CHUNK 48
struct ArgmaxOps {
    const float *logits[ARGMAX_CHUNK];
    int *ids[ARGMAX_CHUNK];
    int n[ARGMAX_CHUNK], vocab[ARGMAX_CHUNK];
};

__global__ void __launch_bounds__(DIST_THREADS) argmax_batch_kernel(const __grid_constant__ ArgmaxOps b) {
    const int o = blockIdx.y, r = blockIdx.x;
    if (r >= b.n[o]) return;   /* the whole block */
    argmax_row(b.logits[o] + (size_t)r * b.vocab[o], b.vocab[o], b.ids[o] + r);
}

void cu_argmax_batch(const TreeOp *ops, int n) {
    for (int i0 = 0; i0 < n; i0 += ARGMAX_CHUNK) {
        const int c = min(ARGMAX_CHUNK, n - i0);
        ArgmaxOps b;
        memset(&b, 0, sizeof b);
        int rows = 0;
        for (int i = 0; i < c; i++) {
            const TreeOp &o = ops[i0 + i];
            b.logits[i] = o.logits; b.ids[i] = o.out_ids; b.n[i] = o.n; b.vocab[i] = o.vocab;
            rows = max(rows, o.n);
        }
        cu_launch(argmax_batch_kernel, dim3((unsigned)rows, (unsigned)c), DIST_THREADS, 0, b);
        CU_LAUNCHED();
    }
}

/* Launches the kernel on device output ids[n]; false when there is nothing
 * to compute or it failed. */
static bool argmax_launch(const float *logits, int n, int vocab, int *ids) {
    if (n <= 0 || vocab <= 0 || !ids) return false;
    cu_launch(argmax_kernel, n, DIST_THREADS, 0, logits, vocab, ids);
    CU_LAUNCHED_R(false);
    return true;
}

void cu_argmax_dev(const float *logits, int n, int vocab, int *ids) { argmax_launch(logits, n, vocab, ids); }

void cu_argmax(const float *logits, int n, int vocab, int *ids) {
    if (n <= 0 || vocab <= 0) return;
    int *d = (int *)cu_workspace(WS_DIST, (size_t)n * sizeof(int));
    if (!d || !argmax_launch(logits, n, vocab, d)) return;
    const void *h = cu_fetch(d, (size_t)n * sizeof(int));
    if (h) memcpy(ids, h, (size_t)n * sizeof(int));
}
