/* Weight products of GGUF block types (kernels/cpu/matmul_quant.c) next to
 * the BF16 product of the same shape, at Qwen2.5-1.5B's shapes (rows x
 * cols: 1536 x 1536 q/o, 8960 x 1536 gate/up, 1536 x 8960 down, 151936 x
 * 1536 the LM head) for 1, 2, 4, 8 and 16 tokens: the best of a few runs in
 * ms, and the weight bytes read per second (GB/s: what bounds decode).
 * Also "F32act": the same Q8_0 and Q4_0 weights times F32 activations,
 * each block dequantised in registers and multiplied with FMA (AVX2; here
 * only, not a kernel of the backend), to weigh the Q8 activations against
 * F32 ones.  "dots (AMX tiles off)": where the build and CPU have AMX-INT8,
 * Q4_K, Q5_K and Q6_K again with the tile multiply turned off (cpu_quant_tiles),
 * the dot products beside the tiles (which take 8 tokens and more).
 * Random weights and activations; threads: the backend's (set
 * OMP_NUM_THREADS to choose).
 * First lines: the machine's 8-bit dot peak (int8_peak) and F32 FMA peak
 * (f32_peak), the bounds of a product of many tokens in block types and in
 * BF16 widened to F32.
 * Usage: build/tests/bench_quant [--quick] [--peak] [--shapes 0,1,2,3] [--ns 1,2,4,8,16] [--types Q4_K,Q6_K]
 *   --quick: one small shape, to check that it runs; --peak: the peak
 *   alone; --types: those types alone (dtype names as the report prints
 *   them), e.g. to profile one. */
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include "tests/bench_model.h"
#include <stdio.h>
#include <stdlib.h>

static const DType TYPES[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_NL, DT_IQ4_XS, DT_Q2_K, DT_Q3_K, DT_BF16};
#define NTYPES (int)(sizeof TYPES / sizeof *TYPES)

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* F32 activations times Q8_0 / Q4_0 weights dequantised in registers: per
 * row and token 8 F32 lanes, one FMA per 8 weights, rows one at a time and
 * tokens in fours (each block's floats made once per 4 tokens). */
typedef struct { const Weight *w; const float *x; float *out; int n; } FmaJob;

static inline void deq32(const uint8_t *p, DType t, __m256 v[4]) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(*(const uint16_t *)p));
    for (int k = 0; k < 4; k++) {
        __m256i q;
        if (t == DT_Q8_0) q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + 8 * k)));
        else {
            const __m128i raw = _mm_loadl_epi64((const __m128i *)(p + 2 + 8 * (k & 1)));
            const __m128i nib = _mm_and_si128(k < 2 ? raw : _mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F));
            q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(nib), _mm256_set1_epi32(8));
        }
        v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
    }
}

static void fma_part(void *v, int part, int parts) {
    const FmaJob *j = v;
    const Weight *w = j->w;
    const int64_t C = w->cols, rb = quant_row_bytes(w->dtype, C);
    int64_t r0, r1;
    part_range(w->rows, part, parts, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        for (int t0 = 0; t0 < j->n; t0 += 4) {
            const int k = j->n - t0 < 4 ? j->n - t0 : 4;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t b = 0; b < C / 32; b++) {
                __m256 wv[4];
                deq32((const uint8_t *)w->data + r * rb + b * (int64_t)quant_block_bytes(w->dtype), w->dtype, wv);
                for (int t = 0; t < k; t++)
                    for (int q = 0; q < 4; q++)
                        acc[t] = _mm256_fmadd_ps(wv[q], _mm256_loadu_ps(j->x + (t0 + t) * C + b * 32 + 8 * q), acc[t]);
            }
            for (int t = 0; t < k; t++) {
                float s[8];
                _mm256_storeu_ps(s, acc[t]);
                j->out[(t0 + t) * w->rows + r] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            }
        }
}

static void fma_matmul(float *out, const float *x, const Weight *w, int n) {
    FmaJob j = {w, x, out, n};
    cpu_parallel(fma_part, &j, 1);
}
#endif

/* best of a few runs (at least 3, and 0.3 s in all), in seconds */
static double best_time(void (*mm)(float *, const float *, const Weight *, int), float *out, const float *x,
                        const Weight *w, int n) {
    double best = 1e30, spent = 0;
    for (int rep = 0; rep < 3 || (spent < 0.3 && rep < 50); rep++) {
        const double t0 = now_seconds();
        mm(out, x, w, n);
        const double dt = now_seconds() - t0;
        spent += dt;
        if (dt < best) best = dt;
    }
    return best;
}

static volatile long peak_sink;

/* GMAC/s of loop(iters) run by every thread at once, macs multiply-adds an
 * iteration: the best of 3.  loop returns a value of its sums, which is
 * kept, so the compiler keeps the loop. */
#if defined(__AVX2__) || defined(__FMA__)
static double peak_rate(long (*loop)(long), long iters, double macs) {
    const int threads = cpu_threads_max();
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        long sink = 0;
        const double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += loop(iters);
        const double rate = macs * (double)iters * threads / (now_seconds() - t0) * 1e-9;
        peak_sink = sink;
        if (rate > best) best = rate;
    }
    return best;
}
#endif

/* The machine's 8-bit dot peak in the instructions the quantised products
 * use (matmul_quant.c): VNNI's dpbusd on 512-bit vectors (64 multiply-adds
 * each), else AVX2's maddubs and one madd to widen its int16 pair sums (32
 * multiply-adds per two multiplies, as the AVX2 tile spends them): 8
 * independent accumulators, no memory, every thread; GMAC/s, the best of 3.
 * A product of many tokens (a tree of 16 nodes) cannot run faster than its
 * multiply-adds at this rate; 0 where the build has neither. */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define INT8_MACS (64.0 * 8)
#elif defined(__AVX2__)
#define INT8_MACS (32.0 * 8)
#endif
#ifdef INT8_MACS
static long int8_loop(long iters) {
    /* eight named accumulators of different values: an array would live in
     * memory, equal ones would be computed once */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    __m512i u = _mm512_set1_epi8(3);
    const __m512i s = _mm512_set1_epi8(-2);
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3),
            a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7);
#define PEAK_STEP(a) a = _mm512_dpbusd_epi32(a, u, s)
#define PEAK_LANE(a) _mm_cvtsi128_si32(_mm512_castsi512_si128(a))
#else
    __m256i u = _mm256_set1_epi8(3);
    const __m256i s = _mm256_set1_epi8(-2), one = _mm256_set1_epi16(1);
    __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2), a3 = _mm256_set1_epi32(3),
            a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5), a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7);
/* the barrier makes each step's u a fresh value: without it the compiler
 * computes maddubs and madd once for all eight and times the adds alone */
#define PEAK_STEP(a)                                                                                                   \
    do {                                                                                                               \
        __asm__ volatile("" : "+x"(u));                                                                                \
        a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), one));                                  \
    } while (0)
#define PEAK_LANE(a) _mm256_extract_epi32(a, 0)
#endif
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(u));   /* a fresh product every time: nothing hoisted */
        PEAK_STEP(a0); PEAK_STEP(a1); PEAK_STEP(a2); PEAK_STEP(a3);
        PEAK_STEP(a4); PEAK_STEP(a5); PEAK_STEP(a6); PEAK_STEP(a7);
    }
    return PEAK_LANE(a0) + PEAK_LANE(a1) + PEAK_LANE(a2) + PEAK_LANE(a3) + PEAK_LANE(a4) + PEAK_LANE(a5) +
           PEAK_LANE(a6) + PEAK_LANE(a7);
#undef PEAK_STEP
#undef PEAK_LANE
}
#endif

static double int8_peak(void) {
#ifdef INT8_MACS
    return peak_rate(int8_loop, 40000000, INT8_MACS);
#else
    return 0;
#endif
}

/* The machine's F32 multiply-add peak, the bound of the BF16 rows' products
 * of several tokens where they are widened to F32 (kernels/cpu/matmul.c:
 * AVX2, and AVX-512 without BF16 dots): FMA on the build's widest vectors
 * (8 lanes, 16 with AVX-512), 12 independent accumulators (two FMA units
 * of 4 cycles' latency need 8 in flight), no memory, every thread;
 * GMAC/s, the best of 3; 0 where the build has no FMA. */
#ifdef __FMA__
#ifdef __AVX512F__
typedef __m512 vpeak;
#define FP_SET(x) _mm512_set1_ps(x)
#define FP_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FP_LANE(a) _mm512_cvtss_f32(a)
#define FP_LANES 16
#else
typedef __m256 vpeak;
#define FP_SET(x) _mm256_set1_ps(x)
#define FP_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FP_LANE(a) _mm256_cvtss_f32(a)
#define FP_LANES 8
#endif
static long f32_loop(long iters) {
    vpeak w = FP_SET(0.999f);
    const vpeak x = FP_SET(1e-3f);
    vpeak a0 = FP_SET(0), a1 = FP_SET(1), a2 = FP_SET(2), a3 = FP_SET(3), a4 = FP_SET(4), a5 = FP_SET(5),
          a6 = FP_SET(6), a7 = FP_SET(7), a8 = FP_SET(8), a9 = FP_SET(9), a10 = FP_SET(10), a11 = FP_SET(11);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(w));   /* a fresh operand every time: nothing hoisted */
        a0 = FP_FMA(a0, w, x); a1 = FP_FMA(a1, w, x); a2 = FP_FMA(a2, w, x); a3 = FP_FMA(a3, w, x);
        a4 = FP_FMA(a4, w, x); a5 = FP_FMA(a5, w, x); a6 = FP_FMA(a6, w, x); a7 = FP_FMA(a7, w, x);
        a8 = FP_FMA(a8, w, x); a9 = FP_FMA(a9, w, x); a10 = FP_FMA(a10, w, x); a11 = FP_FMA(a11, w, x);
    }
    return (long)(FP_LANE(a0) + FP_LANE(a1) + FP_LANE(a2) + FP_LANE(a3) + FP_LANE(a4) + FP_LANE(a5) + FP_LANE(a6) +
                  FP_LANE(a7) + FP_LANE(a8) + FP_LANE(a9) + FP_LANE(a10) + FP_LANE(a11));
}
#undef FP_SET
#undef FP_FMA
#undef FP_LANE
#endif

static double f32_peak(void) {
#ifdef __FMA__
    return peak_rate(f32_loop, 20000000, 12.0 * FP_LANES);
#else
    return 0;
#endif
}

static double max_rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fabs((double)a[i] - b[i]) > d ? fabs((double)a[i] - b[i]) : d;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return m > 0 ? d / m : d;
}

static int parse_list(const char *s, int *v, int max) {
    int k = 0;
    for (char *e; *s && k < max; s = *e ? e + 1 : e) v[k++] = (int)strtol(s, &e, 10);
    return k;
}

/* name is one of the comma-separated names of list */
static int name_listed(const char *list, const char *name) {
    const size_t len = strlen(name);
    for (const char *s = list; *s; s += strcspn(s, ",") + (s[strcspn(s, ",")] == ','))
        if (strcspn(s, ",") == len && !strncmp(s, name, len)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    static const int64_t SHAPES[4][2] = {{1536, 1536}, {8960, 1536}, {1536, 8960}, {151936, 1536}};
    int shapes[4] = {0, 1, 2, 3}, nshapes = 4, ns[8] = {1, 2, 4, 8, 16}, nns = 5, quick = 0, peak_only = 0;
    const char *types = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--peak")) peak_only = 1;
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) nshapes = parse_list(argv[++i], shapes, 4);
        else if (!strcmp(argv[i], "--ns") && i + 1 < argc) nns = parse_list(argv[++i], ns, 8);
        else { fprintf(stderr, "usage: %s [--quick] [--peak] [--shapes 0,1,2,3] [--ns 1,2,4,8,16] [--types Q4_K,...]\n", argv[0]); return 2; }
    }
    BackendOptions o;
    backend_options_default(&o);
    o.cpu_f32_cache_mb = 0;   /* few-token BF16 products read the BF16 weights; no F32 copies */
    if (backend_configure(&o)) die_err("bench_quant");
    printf("# ISA %s, OpenBLAS %s, %d threads; ms = best of >= 3 runs; GB/s = weight bytes / time\n",
           backend_cpu_isa(), backend_cpu_blas(), cpu_threads_max());
    printf("# 8-bit dot peak (the quantised products' instructions, every thread): %.1f GMAC/s\n", int8_peak());
    printf("# F32 FMA peak (the BF16 rows' widened products, every thread): %.1f GMAC/s\n", f32_peak());
    if (peak_only) return 0;
    printf("%-14s %-7s %3s %10s %8s\n", "shape", "type", "n", "ms", "GB/s");
    for (int si = 0; si < (quick ? 1 : nshapes); si++) {
        const int64_t rows = quick ? 256 : SHAPES[shapes[si] & 3][0], cols = quick ? 512 : SHAPES[shapes[si] & 3][1];
        float *x = xmalloc(sizeof(float) * 16 * (size_t)cols), *out = xmalloc(sizeof(float) * 16 * (size_t)rows);
        for (int64_t i = 0; i < 16 * cols; i++) x[i] = bench_rand_act();
        for (int ti = 0; ti < NTYPES; ti++)
            for (int variant = 0; variant < 3; variant++) {
                const DType t = TYPES[ti];
                if (types && !name_listed(types, dtype_name(t))) continue;
                void (*mm)(float *, const float *, const Weight *, int) = cpu_backend.matmul;
                /* variant 2: the dot products, for the types the tile multiply takes where it has it */
                if (variant == 2) {
                    if ((t != DT_Q4_K && t != DT_Q5_K && t != DT_Q6_K) || !cpu_quant_tiles(1)) continue;
                    cpu_quant_tiles(0);
                }
                if (variant == 1) {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
                    if (t != DT_Q8_0 && t != DT_Q4_0) continue;
                    mm = fma_matmul;
#else
                    continue;
#endif
                }
                size_t bytes;
                uint8_t *wd = bench_blocks(t, rows, cols, &bytes);
                Weight w;
                if (cpu_backend.weight(&w, wd, t, rows, cols)) die_err("bench_quant");
                for (int k = 0; k < nns; k++) {
                    const int n = ns[k] < 1 ? 1 : ns[k] > 16 ? 16 : ns[k];
                    const double s = best_time(mm, out, x, &w, n);
                    char shape[32];
                    snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
                    printf("%-14s %-7s %3d %10.3f %8.2f", shape, dtype_name(t), n, s * 1e3, bytes / s * 1e-9);
                    if (variant == 2) printf("  dots (AMX tiles off)");
                    if (variant == 1) {   /* a sanity check of the bench's own loop: its distance from the kernel */
                        float *ref = xmalloc(sizeof(float) * (size_t)n * (size_t)rows);
                        cpu_backend.matmul(ref, x, &w, n);
                        printf("  F32act (max |diff| / max |y| against the kernel: %.1e)",
                               max_rel(out, ref, (size_t)n * (size_t)rows));
                        free(ref);
                    }
                    printf("\n");
                    fflush(stdout);
                }
                cpu_backend.weight_release(&w);
                free(wd);
                cpu_quant_tiles(1);
            }
        free(x); free(out);
    }
    return 0;
}
