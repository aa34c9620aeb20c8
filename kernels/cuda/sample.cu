/* Device-side sampling with cuRAND (an extra beside the Backend struct; see
 * cuda_sample_rows in cuda_backend.h).
 *
 * One Philox4_32_10 uniform per row from the cuRAND host API (generator
 * reseeded and rewound on every call, so a seed always gives the same ids),
 * then per row one block: the max logit, e_j = expf((l_j - max) / T), and
 * inverse-CDF selection in id order — the first j whose running sum (double)
 * exceeds u · Σe, skipping e_j = 0, falling back to the last id with e_j > 0
 * when rounding leaves the target past the end (as sample_from in
 * infer/speculative/decode.c).  cuRAND's uniforms lie in (0, 1]; 1 - u in [0, 1) is used.
 * Each thread owns a contiguous chunk of ids so that a block scan of the
 * chunk sums orders them. */
#include "kernels/cuda/common.cuh"
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <pthread.h>

#define SAMPLE_THREADS 256

struct MaxIntOp {
    __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};
struct MaxF {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_kernel(const float *__restrict__ logits, int vocab, float temperature, const float *__restrict__ u,
              int *__restrict__ out) {
    typedef cub::BlockReduce<float, SAMPLE_THREADS> ReduceF;
    typedef cub::BlockReduce<int, SAMPLE_THREADS> ReduceI;
    typedef cub::BlockScan<double, SAMPLE_THREADS> ScanD;
    __shared__ union {
        typename ReduceF::TempStorage rf;
        typename ReduceI::TempStorage ri;
        typename ScanD::TempStorage sd;
    } tmp;
    __shared__ float s_mx;
    __shared__ int s_pick;
    const float *l = logits + (size_t)blockIdx.x * vocab;
    const int tid = threadIdx.x;
    const int chunk = (vocab + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int j0 = tid * chunk, j1 = min(vocab, j0 + chunk);

    float mx = -INFINITY;
    for (int j = j0; j < j1; j++) mx = fmaxf(mx, l[j]);
    mx = ReduceF(tmp.rf).Reduce(mx, MaxF());
    if (tid == 0) { s_mx = mx; s_pick = vocab; }
    __syncthreads();
    mx = s_mx;

    double csum = 0;
    int last = -1;
    for (int j = j0; j < j1; j++) {
        const float e = expf(__fdiv_rn(__fsub_rn(l[j], mx), temperature));
        csum += e;
        if (e > 0) last = j;
    }
    double before, total;
    ScanD(tmp.sd).ExclusiveSum(csum, before, total);
    const double target = (1.0 - (double)u[blockIdx.x]) * total;
    if (target >= before && target < before + csum) {
        double c = before;
        for (int j = j0; j < j1; j++) {
            const float e = expf(__fdiv_rn(__fsub_rn(l[j], mx), temperature));
            if (e <= 0) continue;
            c += e;
            if (target < c) { atomicMin(&s_pick, j); break; }
        }
        /* c summed in another order than the scan: a target within the
         * chunk's rounding goes to its last possible id */
        if (!(target < c) && last >= 0) atomicMin(&s_pick, last);
    }
    __syncthreads();
    last = ReduceI(tmp.ri).Reduce(last, MaxIntOp());
    if (tid == 0) out[blockIdx.x] = s_pick < vocab ? s_pick : (last >= 0 ? last : 0);
}

static pthread_mutex_t gen_lock = PTHREAD_MUTEX_INITIALIZER;
static curandGenerator_t gen;

static curandGenerator_t generator(void) {
    pthread_mutex_lock(&gen_lock);
    if (!gen) {
        curandGenerator_t g;
        if (CU_OK(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10))) {
            if (CU_OK(curandSetStream(g, cu_stream()))) gen = g;
            else curandDestroyGenerator(g);
        }
    }
    curandGenerator_t g = gen;
    pthread_mutex_unlock(&gen_lock);
    return g;
}

void cuda_sample_shutdown(void) {
    pthread_mutex_lock(&gen_lock);
    if (gen) curandDestroyGenerator(gen);
    gen = NULL;
    pthread_mutex_unlock(&gen_lock);
}

extern "C" int cuda_sample_rows(const float *logits_dev, int n, int vocab, float temperature, uint64_t seed,
                                int *ids_host) {
    if (n <= 0) return 0;
    if (vocab <= 0 || !logits_dev || !ids_host) {
        CU_FAIL("cuda_sample_rows: %d rows of vocabulary %d", n, vocab);
        return -1;
    }
    if (!(temperature > 0)) {   /* greedy */
        const int before = cuda_errors();
        cu_argmax(logits_dev, n, vocab, ids_host);
        return cuda_errors() == before ? 0 : -1;
    }
    curandGenerator_t g = generator();
    if (!g) return -1;
    /* uniforms (rounded up to a multiple of 4: one Philox draw) then ids */
    const size_t nu = ((size_t)n + 3) & ~(size_t)3;
    float *u = (float *)cu_workspace(WS_SAMPLE, nu * sizeof(float) + (size_t)n * sizeof(int));
    if (!u) return -1;
    int *ids = (int *)(u + nu);
    CU_CHECK_R(curandSetPseudoRandomGeneratorSeed(g, seed), -1);
    CU_CHECK_R(curandSetGeneratorOffset(g, 0), -1);
    CU_CHECK_R(curandGenerateUniform(g, u, nu), -1);
    cu_launch(sample_kernel, n, SAMPLE_THREADS, 0, logits_dev, vocab, temperature, u, ids);
    CU_LAUNCHED_R(-1);
    CU_CHECK_R(cudaMemcpy(ids_host, ids, (size_t)n * sizeof(int), cudaMemcpyDeviceToHost), -1);
    return 0;
}
