/* sample_dev (kernels.h) on the GPU; its CPU twin is cpu_sample_dev
 * (kernels/cpu/distribution.c).
 *
 * One block per row.  The weights w_j are never stored: each pass
 * recomputes them from the logits as the CPU does (expf of the rounded
 * difference over the temperature).  The top_k-th largest logit and
 * top-p's cut q come from bisections over ordered bit patterns, 32 block
 * reductions each where the CPU selects and sorts: the largest key t with
 * count(l >= t) >= top_k (a float's order as an unsigned key), and the
 * largest weight q with Σ(w >= q) >= top_p · Σw (weights lie in [0, 1],
 * the largest logit's is 1, and non-negative floats order like their
 * bits).  The draw: u = rng_uniform_at (kernels/base/rng.h: the CPU's
 * bits), target u · Σw, and the inverse CDF in id order over contiguous
 * chunks, one per thread, a block scan of the chunks' sums ordering them.
 * Sums are in double in another order than the CPU's: ids agree with the
 * CPU's unless a boundary lies within their rounding. */
#include "kernels/cuda/common.cuh"
#include "kernels/base/rng.h"
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#define SAMPLE_THREADS 512

typedef cub::BlockReduce<float, SAMPLE_THREADS> ReduceF;
typedef cub::BlockReduce<int, SAMPLE_THREADS> ReduceI;
typedef cub::BlockReduce<double, SAMPLE_THREADS> ReduceD;
typedef cub::BlockScan<double, SAMPLE_THREADS> ScanD;
union SampleTemp {
    typename ReduceF::TempStorage rf;
    typename ReduceI::TempStorage ri;
    typename ReduceD::TempStorage rd;
    typename ScanD::TempStorage sd;
};

struct MaxF {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MaxI {
    __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

/* a float's order as an unsigned key (NaNs aside) */
__device__ __forceinline__ uint32_t order_key(float x) {
    const uint32_t u = __float_as_uint(x);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float key_float(uint32_t k) {
    return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k);
}

/* w_j of a row: 0 below the top-k cut kth or top-p's cut q (0: none yet) */
struct Weights {
    const float *l;
    float mx, kth, temperature, q;
    __device__ __forceinline__ float operator()(int j) const {
        if (!(l[j] >= kth) || mx == -INFINITY) return 0.0f;
        const float w = expf(__fdiv_rn(__fsub_rn(l[j], mx), temperature));
        return w >= q ? w : 0.0f;
    }
};

/* Σ f(j) over the row in double, to every thread. */
template <class F> __device__ double row_sum(const F &f, int vocab, SampleTemp &tmp, double &shared) {
    double s = 0;
    for (int j = threadIdx.x; j < vocab; j += SAMPLE_THREADS) s += f(j);
    s = ReduceD(tmp.rd).Sum(s);
    if (threadIdx.x == 0) shared = s;
    __syncthreads();
    s = shared;
    __syncthreads();
    return s;
}

/* the weights at least q, for top-p's bisection */
struct AtLeast {
    Weights w;
    float q;
    __device__ __forceinline__ float operator()(int j) const {
        const float x = w(j);
        return x >= q ? x : 0.0f;
    }
};

__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_kernel(const float *__restrict__ logits, int vocab, float temperature, int top_k, float top_p,
              const uint32_t *__restrict__ key, int node0, int *__restrict__ ids) {
    __shared__ SampleTemp tmp;
    __shared__ float s_f;
    __shared__ double s_d;
    __shared__ int s_i;
    const int tid = threadIdx.x;
    Weights w = {logits + (size_t)blockIdx.x * vocab, -INFINITY, -INFINITY, temperature, 0.0f};

    float mx = -INFINITY;
    for (int j = tid; j < vocab; j += SAMPLE_THREADS) mx = fmaxf(mx, w.l[j]);
    mx = ReduceF(tmp.rf).Reduce(mx, MaxF());
    if (tid == 0) s_f = mx;
    __syncthreads();
    w.mx = s_f;
    __syncthreads();

    if (top_k > 0 && top_k < vocab) {   /* the largest key t with count(l >= t) >= top_k */
        uint32_t lo = 0, hi = 0xFFFFFFFFu;
        while (lo < hi) {
            const uint32_t mid = lo + (uint32_t)(((uint64_t)hi - lo + 1) / 2);
            int c = 0;
            for (int j = tid; j < vocab; j += SAMPLE_THREADS) c += order_key(w.l[j]) >= mid;
            c = ReduceI(tmp.ri).Sum(c);
            if (tid == 0) s_i = c;
            __syncthreads();
            if (s_i >= top_k) lo = mid;
            else hi = mid - 1;
            __syncthreads();
        }
        w.kth = key_float(lo);
    }
    double total = row_sum(w, vocab, tmp, s_d);
    if (top_p > 0 && top_p < 1) {   /* the largest q with Σ(w >= q) >= top_p · Σw */
        const double need = (double)top_p * total;
        uint32_t lo = 0, hi = 0x3f800000u;   /* the bits of 0 and of 1 */
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo + 1) / 2;
            if (row_sum(AtLeast{w, __uint_as_float(mid)}, vocab, tmp, s_d) >= need) lo = mid;
            else hi = mid - 1;
        }
        w.q = __uint_as_float(lo);
        total = row_sum(w, vocab, tmp, s_d);
    }

    const double target = rng_uniform_at(key[0] | (uint64_t)key[1] << 32, (uint64_t)(node0 + (int)blockIdx.x)) * total;
    const int chunk = (vocab + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int j0 = min(vocab, tid * chunk), j1 = min(vocab, j0 + chunk);
    double csum = 0, before;
    int last = -1;
    for (int j = j0; j < j1; j++) {
        const float x = w(j);
        if (x > 0) { csum += x; last = j; }
    }
    if (tid == 0) s_i = vocab;
    ScanD(tmp.sd).ExclusiveSum(csum, before);
    __syncthreads();
    if (csum > 0 && target >= before && target < before + csum) {
        double c = before;
        int pick = last;   /* c summed in another order than the scan: past the chunk, its last */
        for (int j = j0; j < j1; j++) {
            const float x = w(j);
            if (!(x > 0)) continue;
            c += x;
            if (target < c) { pick = j; break; }
        }
        atomicMin(&s_i, pick);
    }
    __syncthreads();
    last = ReduceI(tmp.ri).Reduce(last, MaxI());
    if (tid == 0) ids[blockIdx.x] = s_i < vocab ? s_i : last >= 0 ? last : 0;
}

void cu_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                   int *ids) {
    if (n <= 0 || vocab <= 0 || !ids) return;
    /* the settings as scalars: a struct's padding would enter a recording's signature */
    cu_launch(sample_kernel, n, SAMPLE_THREADS, 0, logits, vocab, sp->temperature, sp->top_k, sp->top_p, key, node0, ids);
    CU_LAUNCHED();
}
