/* CPU backend internals: OpenBLAS for products over many tokens, the
 * backend's own thread pool (threads.c) spreading the work over the cores. */
#ifndef C2T_CPU_H
#define C2T_CPU_H
#include "kernels/kernels.h"
#include <math.h>
#include <string.h>
#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef _Float16 v8h __attribute__((vector_size(16)));

static inline float bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float f16_to_f32(uint16_t v) {
    _Float16 h;
    memcpy(&h, &v, 2);
    return (float)h;
}
/* Eight consecutive weights as floats. */
static inline v8f load8(const void *base, DType dt, int64_t i) {
    v8f r;
    if (dt == DT_F32) {
        memcpy(&r, (const float *)base + i, 32);
    } else if (dt == DT_BF16) {
#ifdef __AVX2__
        /* one vpmovzxwd from memory and a shift: GCC 12 widens the generic
         * vector below in halves (two more vpmovzxwd, a byte shift and an
         * insert, on the vector pipes the multiply-adds use), which bound
         * one thread's one- and four-token BF16 products (1536 x 1536 from
         * memory on a Zen 4, AVX2 build: 0.183 -> 0.136 ms, 4 tokens 0.298
         * -> 0.256; AVX-512 build 0.189 -> 0.140).  The same floats. */
        r = (v8f)_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i))), 16);
#else
        v8u16 h;
        memcpy(&h, (const uint16_t *)base + i, 16);
        v8u32 u = __builtin_convertvector(h, v8u32) << 16;
        memcpy(&r, &u, 32);
#endif
    } else {
#ifdef __F16C__   /* GCC 12 widens a _Float16 vector one lane at a time: 4x slower decode */
        r = (v8f)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
#else
        v8h h;
        memcpy(&h, (const uint16_t *)base + i, 16);
        r = __builtin_convertvector(h, v8f);
#endif
    }
    return r;
}
static inline float load1(const void *base, DType dt, int64_t i) {
    if (dt == DT_F32) return ((const float *)base)[i];
    if (dt == DT_BF16) return bf16_to_f32(((const uint16_t *)base)[i]);
    return f16_to_f32(((const uint16_t *)base)[i]);
}
#ifdef __AVX512F__
/* glibc's libmvec (pulled in by -lm): expf on 16 lanes, under the x86_64
 * vector function ABI's name for the AVX-512 variant. */
__m512 _ZGVeN16v_expf(__m512);
#define exp16 _ZGVeN16v_expf

/* The lanes of a 16-float block of which left remain. */
static inline __mmask16 tail_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

/* out[j] = exp((x[j] - max) * scale) over x[0..m) (out may be x), *mx =
 * the max; returns the sum, in eight double lanes then a fixed tree.  Each
 * element is computed alike wherever it sits (the tail under a mask), and
 * -INFINITY entries give 0; a row of nothing else gives zeros and sum 0. */
static inline double exp_shifted16(const float *x, int64_t m, float scale, float *out, float *mx) {
    __m512 top = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < m; j += 16)
        top = _mm512_max_ps(top, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask16(m - j), x + j));
    *mx = _mm512_reduce_max_ps(top);
    if (*mx == -INFINITY) {
        memset(out, 0, sizeof(float) * m);
        return 0;
    }
    const __m512 tv = _mm512_set1_ps(*mx), sv = _mm512_set1_ps(scale);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t j = 0; j < m; j += 16) {
        const __mmask16 k = tail_mask16(m - j);
        const __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), tv), sv)));
        _mm512_mask_storeu_ps(out + j, k, e);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* glibc's libmvec (pulled in by -lm): expf on 8 lanes, under the x86_64
 * vector function ABI's name for the AVX2 variant. */
__m256 _ZGVdN8v_expf(__m256);
#define exp8 _ZGVdN8v_expf

/* The lanes of an 8-float block of which left remain, as a lane mask. */
static inline __m256i tail_mask8(int64_t left) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left >= 8 ? 8 : (int)left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* exp_shifted16 on 8 lanes: out[j] = exp((x[j] - max) * scale) over
 * x[0..m) (out may be x), *mx = the max; returns the sum, in four double
 * lanes twice then a fixed tree.  Each element is computed alike wherever
 * it sits (the tail under a mask), and -INFINITY entries give 0; a row of
 * nothing else gives zeros and sum 0. */
static inline double exp_shifted8(const float *x, int64_t m, float scale, float *out, float *mx) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 top = ninf;
    for (int64_t j = 0; j < m; j += 8) {
        const __m256i k = tail_mask8(m - j);
        top = _mm256_max_ps(top, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k)));
    }
    __m128 t = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    t = _mm_max_ps(t, _mm_movehl_ps(t, t));
    *mx = _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps(t, t, 1)));
    if (*mx == -INFINITY) {
        memset(out, 0, sizeof(float) * m);
        return 0;
    }
    const __m256 tv = _mm256_set1_ps(*mx), sv = _mm256_set1_ps(scale);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (int64_t j = 0; j < m; j += 8) {
        const __m256i k = tail_mask8(m - j);
        const __m256 e = _mm256_and_ps(_mm256_castsi256_ps(k),
                                       exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, k), tv), sv)));
        _mm256_maskstore_ps(out + j, k, e);
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const __m256d d = _mm256_add_pd(lo, hi);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}
#endif

/* dst[i] = src[i] rounded to BF16 as f32_to_bf16 rounds (nearest even,
 * NaN kept quiet), sixteen at a time. */
typedef uint32_t v16u32 __attribute__((vector_size(64)));
typedef uint16_t v16u16 __attribute__((vector_size(32)));
static inline void f32_to_bf16_row(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16u32 u;
        memcpy(&u, src + i, 64);
        const v16u32 nan = ((u & 0x7F800000u) == 0x7F800000u) & ((u & 0x7FFFFFu) != 0);
        const v16u32 r = (nan & ((u >> 16) | 0x40)) | (~nan & ((u + 0x7FFFu + ((u >> 16) & 1)) >> 16));
        const v16u16 h = __builtin_convertvector(r, v16u16);
        memcpy(dst + i, &h, 32);
    }
    for (; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}
/* Below this many multiply-adds a parallel region costs more than it
 * saves (thread wake-up is microseconds). */
#define PAR_MIN_WORK (1 << 18)

/* A parallel region (threads.c): fn(ctx, part, parts) for every part in
 * [0, parts), parts being the backend's thread count, each run by whichever
 * thread claims it first; all of them before cpu_parallel returns.  With
 * parallel 0 (too little work), inside another region, or on one thread:
 * fn(ctx, 0, 1) on the caller. */
typedef void (*PoolTask)(void *ctx, int part, int parts);
void cpu_parallel(PoolTask fn, void *ctx, int parallel);

/* Part `part` of `parts` of the range [0, n): contiguous, in order. */
static inline void part_range(int64_t n, int part, int parts, int64_t *lo, int64_t *hi) {
    const int64_t per = (n + parts - 1) / parts;
    *lo = per * part < n ? per * part : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* Products of up to this many tokens use the fused loop of matmul.c, which
 * sums every token exactly as a one-token product does (so a batch of up
 * to this many tokens decodes each sequence exactly as alone).  The bound
 * is where the fused loop stops beating sgemm over the F32 copy: 64 tokens
 * with AVX-512 (its 16-lane tiles from WIDE_MIN_TOKENS on; 113 against
 * 137 ms for a 64-token SmolLM2 forward on an EPYC), 32 with AVX2, whose
 * tiles beat OpenBLAS's Haswell sgemm by 1.03-1.5x at 20-32 tokens on
 * SmolLM2's and Qwen2.5-1.5B's BF16 and F32 shapes (all but the 1.5B's
 * 256-row k/v at 32, a small share of a forward), are within 5% at 40-48
 * and behind at 64 (weights read from memory, Zen 4); 16 in a build
 * without AVX2 (make bench measures both paths). */
#ifdef __AVX512VL__
#define FEW_TOKENS 64
#elif defined(__AVX2__) && defined(__FMA__)
#define FEW_TOKENS 32
#else
#define FEW_TOKENS 16
#endif
/* A 16-bit matrix without an F32 copy (past BackendOptions.cpu_f32_cache_mb)
 * keeps the fused loop up to this many tokens: sgemm would widen it on
 * every call, the loop reads its 16-bit bytes once (AVX2 build, 1.5B BF16,
 * about 2 of whose 6 GB of copies fall past the default budget: 24-64-token
 * prompts 6-24% and batch-32 steps 4-13% faster). */
#define FEW_TOKENS_UNCACHED 64

/* Row r of a weight converted to floats. */
void cpu_weight_row(const Weight *w, int64_t r, float *out);
/* Rows [r0, r0 + n) as F32 into out[n][cols], in parallel. */
void cpu_weight_rows(const Weight *w, int64_t r0, int64_t n, float *out);

/* matmul_quant.c: products of weights in GGUF's block types (DT_Q8_0 ..
 * DT_Q3_K; of equal cols), every token count through the same integer
 * tiles, each (row, token) summed alike whatever the count, tile or
 * thread split; and row r of such a weight dequantised. */
void cpu_quant_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n);
void cpu_quant_row(const Weight *w, int64_t r, float *out);
/* Makes the copy of a block-type matrix that the vector builds multiply
 * (rows interleaved, matmul_quant.c) where it has none: at its first
 * product, before any parallel region; nothing for other types and in the
 * scalar build. */
void cpu_quant_make_pack(const Weight *w);
/* Whether Q4_K / Q5_K products of several tokens may take the AMX-INT8
 * tile multiply (matmul_quant.c; the same bits as the dot products, so
 * only their speed changes): allowed by default where the build and the
 * CPU have it; returns whether they now take it (0 where either lacks it).
 * For benchmarks and tests comparing the two paths. */
int cpu_quant_tiles(int allow);
/* How far one token's products fetch the weights ahead of their reads
 * (matmul_quant.c says why it is measured): FETCH_MEASURE starts the
 * measuring again, FETCH_GROUP / FETCH_NEAR fix a distance, FETCH_KEEP
 * changes nothing; returns the distance now in use, FETCH_MEASURE while
 * measuring.  The measuring ends after FETCH_PAIRS pairs of a matrix's
 * one-token products (the first of each matrix not counted).  A kernel
 * built without AVX2 fetches nothing: there it returns FETCH_NONE,
 * whatever it is given.  For benchmarks and tests: the sums do not depend
 * on it. */
enum { FETCH_NONE = -3, FETCH_KEEP = -2, FETCH_MEASURE = -1, FETCH_GROUP = 0, FETCH_NEAR = 1, FETCH_PAIRS = 512 };
int cpu_quant_fetch_arm(int arm);

/* matmul_amx.c (builds with AMX-BF16; cpu_amx_ready and cpu_amx_tiles
 * everywhere): whether the process may use the tiles (asked of the kernel
 * once); a BF16 weight's rows copied into the tile multiply's B tiles
 * (NULL for other types or fewer than 32 columns; exits naming the
 * allocation when memory runs out); rows [r0, r1) of out[t][r] = W[r]·x[t]
 * for x rounded to BF16 ([n][cols]). */
int cpu_amx_ready(void);
uint16_t *cpu_amx_tiles(const Weight *w);
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define CPU_AMX 1
/* loads the calling thread's tile configuration: tile i (0..7) rows[i] rows
 * of colsb[i] bytes */
void cpu_amx_configure(const int rows[8], const int colsb[8]);
void cpu_amx_rows(const Weight *w, const uint16_t *tiles, const uint16_t *xb, float *out, int64_t r0, int64_t r1, int n);
#endif

/* What the CPU backend keeps beside a weight (Weight.priv, made by its
 * weight op): for a 16-bit one an F32 copy for sgemm (matmul.c says when;
 * f32_refused: the budget had no room at its first many-token product),
 * and under --cpu-fast-gemm amx the tile copy of a BF16 one; for a matrix
 * of a GGUF block type in a vector build the row-interleaved copy that
 * matmul_quant.c's products read, made by the first (cpu_quant_make_pack). */
typedef struct {
    float *f32;
    int f32_refused;
    uint16_t *tiles;
    uint8_t *kpack;
    int fetch_calls, fetch_first;   /* matmul_quant.c's measuring of the fetch distance */
    double fetch_secs;
} CpuWeightCopies;
/* The F32 copy of 16-bit matrix w for sgemm: made at the first call while
 * the copies fit BackendOptions.cpu_f32_cache_mb, else NULL from then on.
 * Called by a product of more than FEW_TOKENS tokens, before any parallel
 * region (matmul.c: why then, not at load). */
const float *cpu_weight_f32_make(const Weight *w);
/* Frees w's F32 copy, if any, returning its bytes to the budget. */
void cpu_weight_f32_release(const Weight *w);
static inline const float *cpu_weight_f32(const Weight *w) {
    return w->priv ? ((CpuWeightCopies *)w->priv)->f32 : NULL;
}
static inline const uint16_t *cpu_weight_tiles(const Weight *w) {
    return w->priv ? ((CpuWeightCopies *)w->priv)->tiles : NULL;
}
/* Makes the tile copy of a BF16 weight that has none (one made under
 * another setting); the kernel calls it before any parallel region. */
static inline void cpu_weight_make_tiles(const Weight *w) {
    CpuWeightCopies *c = w->priv;
    if (c && !c->tiles) c->tiles = cpu_amx_tiles(w);
}

void cpu_embed(float *out, const Weight *table, const int *tokens, int n);
void cpu_matmul(float *out, const float *x, const Weight *w, int n);
void cpu_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n);
void cpu_add_bias(float *x, const Weight *b, int n);
void cpu_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps);
void cpu_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq);
void cpu_add(float *x, const float *y, size_t n);
void cpu_add_rmsnorm(float *out, float *x, const float *y, const Weight *w, int n, float eps);
void cpu_swiglu(float *gate, const float *up, size_t n);
void cpu_geglu(float *gate, const float *up, size_t n);
void cpu_scale(float *x, float s, size_t n);
void cpu_concat(float *out, const float *a, int da, const float *b, int db, int n);
void cpu_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n, int width);
KVCache *cpu_kv_create(int layers, int slots, int kv_dim);
void cpu_kv_free(KVCache *c);
int cpu_kv_slots(const KVCache *c);
void cpu_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n);
void cpu_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int head_dim,
                 const float *inv_freq, KVCache *c, int layer, const int *slot);
void cpu_kv_keep(KVCache *c, int dst, const int *keep, int m);
void cpu_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                   int head_dim);
void cpu_softmax_topk(const float *logits, int n, int vocab, float temperature, int k,
                      int *ids, float *probs, int topm, float *entropy);
void cpu_argmax(const float *logits, int n, int vocab, int *ids);
void cpu_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                    int *ids);
/* The sampling weights w[vocab] of one row of logits (sample_dev's, before
 * the draw) and their sum; scratch holds vocab floats.  w / sum is the
 * target's distribution (the tests' expectation). */
double cpu_sample_weights(const float *logits, int vocab, const SampleParams *sp, float *w, float *scratch);
/* tree.c: the device cycle's tree ops (kernels.h) */
void cpu_tree_root(const DevTree *t, const int *root);
void cpu_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                   int k, const int *picks, int count, const int *map);
void cpu_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel);
void cpu_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf);
void cpu_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count);
void cpu_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad);
void cpu_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0, int nctx,
                      int *out, uint8_t *mask);
void cpu_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk);
#endif
