/* Per-row distribution ops over logits: softmax, top-k, (top-M) entropy,
 * argmax, sampling. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/rng.h"
#include <math.h>
#include <stdlib.h>

/* k-th largest (0-based) of a[0..n) by quickselect; reorders a. */
static float kth_largest(float *a, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) { float t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return a[k];
    }
    return a[k];
}

/* Entropy over the topm largest probabilities of p (topm <= 0 or >= vocab:
 * the exact entropy).  z[j] are the shifted, scaled logits with
 * p[j] = exp(z[j]) / S, so -p log p = p (log S - z): no logarithm per token.
 * The M-th largest probability is found by a histogram of the top 11 bits
 * of the floats (order-preserving for p >= 0) that also sums each bucket's
 * entropy terms: buckets above the one holding the M-th value count whole,
 * and only that bucket's members are selected among (quickselect).  Two
 * passes over the row, where quickselect on a copy took several — the top-M
 * entropy of every expanded node was C2T's largest overhead.  scratch holds
 * 3 × vocab floats. */
static float entropy_topm(const float *p, const float *l, float mx, float invt, double logS, int vocab,
                          int topm, float *scratch) {
    double h = 0;
    if (topm <= 0 || topm >= vocab) {
        for (int j = 0; j < vocab; j++) h += p[j] * (logS - (l[j] - mx) * invt);
        return (float)h;
    }
    enum { BITS = 11, BINS = 1 << BITS };
    int hist[BINS] = {0};
    double hsum[BINS] = {0};
    uint32_t u;
    for (int j = 0; j < vocab; j++) {
        memcpy(&u, &p[j], 4);
        hist[u >> (32 - BITS)]++;
        hsum[u >> (32 - BITS)] += p[j] * (logS - (l[j] - mx) * invt);
    }
    int b = BINS - 1, above = 0;
    while (b > 0 && above + hist[b] <= topm - 1) { above += hist[b]; h += hsum[b]; b--; }
    /* the bucket's members: probability, entropy term, and a copy to select in */
    float *bp = scratch, *bt = scratch + vocab, *sel = scratch + 2 * (size_t)vocab;
    int m = 0;
    for (int j = 0; j < vocab; j++) {
        memcpy(&u, &p[j], 4);
        if ((int)(u >> (32 - BITS)) == b) { bp[m] = sel[m] = p[j]; bt[m++] = (float)(p[j] * (logS - (l[j] - mx) * invt)); }
    }
    /* the M-th largest overall is the (M - 1 - above)-th of this bucket */
    float thr = kth_largest(sel, m, topm - 1 - above);
    for (int i = 0; i < m; i++)
        if (bp[i] > thr) { h += bt[i]; above++; }
    if (thr > 0) h -= (topm - above) * (double)thr * log(thr);   /* ties at the threshold fill up to M */
    return (float)h;
}

/* Inserts (id, p) into the descending list of the k best so far. */
static void topk_insert(int *ids, float *ps, int *count, int k, int id, float p) {
    int c = *count;
    if (c == k && !(p > ps[k - 1])) return;   /* equal prob: lower id (seen first) wins */
    int pos = c < k ? c : k - 1;
    while (pos > 0 && p > ps[pos - 1]) {
        ps[pos] = ps[pos - 1]; ids[pos] = ids[pos - 1]; pos--;
    }
    ps[pos] = p; ids[pos] = id;
    if (c < k) *count = c + 1;
}

/* p[j] = exp((l[j] - max) * invt) over the row, *mx = its largest logit;
 * returns the sum in double (exp_shifted16 with AVX-512, exp_shifted8 with
 * AVX2). */
static double exp_shifted(const float *l, int vocab, float invt, float *p, float *mx) {
#ifdef __AVX512F__
    return exp_shifted16(l, vocab, invt, p, mx);
#elif defined(__AVX2__) && defined(__FMA__)
    return exp_shifted8(l, vocab, invt, p, mx);
#else
    float top = -INFINITY;
    for (int j = 0; j < vocab; j++) if (l[j] > top) top = l[j];
    *mx = top;
    double sum = 0;
    for (int j = 0; j < vocab; j++) { p[j] = expf((l[j] - top) * invt); sum += p[j]; }
    return sum;
#endif
}

typedef struct {
    const float *logits;
    int n, vocab, k, topm;
    float invt;
    int *ids;
    float *probs, *entropy;
} DistJob;

/* A contiguous share of the rows. */
static void dist_part(void *v, int part, int parts) {
    const DistJob *d = v;
    const int vocab = d->vocab, k = d->k;
    int64_t lo, hi;
    part_range(d->n, part, parts, &lo, &hi);
    if (lo >= hi) return;
    float *p = malloc(sizeof(float) * vocab);
    float *scratch = d->entropy ? malloc(sizeof(float) * 3 * (size_t)vocab) : NULL;
    int *tid = malloc(sizeof(int) * (k > 0 ? k : 1));
    float *tp = malloc(sizeof(float) * (k > 0 ? k : 1));
    for (int r = (int)lo; r < (int)hi; r++) {
        const float *l = d->logits + (size_t)r * vocab;
        float mx;
        const double sum = exp_shifted(l, vocab, d->invt, p, &mx);
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < vocab; j++) p[j] *= inv;
        if (k > 0 && (d->ids || d->probs)) {
            int cnt = 0;
            for (int j = 0; j < vocab; j++) topk_insert(tid, tp, &cnt, k, j, p[j]);
            for (int i = 0; i < k; i++) {
                if (d->ids) d->ids[(size_t)r * k + i] = i < cnt ? tid[i] : -1;
                if (d->probs) d->probs[(size_t)r * k + i] = i < cnt ? tp[i] : 0.0f;
            }
        }
        if (d->entropy) d->entropy[r] = entropy_topm(p, l, mx, d->invt, log(sum), vocab, d->topm, scratch);
    }
    free(p); free(scratch); free(tid); free(tp);
}

void cpu_softmax_topk(const float *logits, int n, int vocab, float temperature, int k,
                      int *ids, float *probs, int topm, float *entropy) {
    DistJob d = {logits, n, vocab, k, topm, temperature > 0 ? 1.0f / temperature : 1.0f, ids, probs, entropy};
    cpu_parallel(dist_part, &d, n > 1 && (int64_t)n * vocab > PAR_MIN_WORK);
}

/* The first index of the row's largest value, comparing with > as a
 * scalar scan from index 0 does (NaNs never win; a NaN at 0 keeps 0). */
static int argmax_row(const float *l, int vocab) {
    int j = 0, best = 0;
#ifdef __AVX512F__
    if (vocab >= 32 && !isnan(l[0])) {
        /* per lane: the largest value so far and its first index (-1: none
         * above -inf yet), then the lowest index among the lanes holding
         * the overall largest */
        __m512 top = _mm512_set1_ps(-INFINITY);
        __m512i at = _mm512_set1_epi32(-1), idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m512i step = _mm512_set1_epi32(16);
        for (; j + 16 <= vocab; j += 16, idx = _mm512_add_epi32(idx, step)) {
            const __m512 x = _mm512_loadu_ps(l + j);
            const __mmask16 gt = _mm512_cmp_ps_mask(x, top, _CMP_GT_OQ);
            top = _mm512_mask_mov_ps(top, gt, x);
            at = _mm512_mask_mov_epi32(at, gt, idx);
        }
        const float m = _mm512_reduce_max_ps(top);
        const __mmask16 hold = _mm512_cmp_ps_mask(top, _mm512_set1_ps(m), _CMP_EQ_OQ) &
                               _mm512_cmp_epi32_mask(at, _mm512_setzero_si512(), _MM_CMPINT_NLT);
        if (hold) best = _mm512_mask_reduce_min_epi32(hold, at);
    }
#elif defined(__AVX2__)
    if (vocab >= 16 && !isnan(l[0])) {   /* the same in 8 lanes */
        __m256 top = _mm256_set1_ps(-INFINITY);
        __m256i at = _mm256_set1_epi32(-1), idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i step = _mm256_set1_epi32(8);
        for (; j + 8 <= vocab; j += 8, idx = _mm256_add_epi32(idx, step)) {
            const __m256 x = _mm256_loadu_ps(l + j);
            const __m256 gt = _mm256_cmp_ps(x, top, _CMP_GT_OQ);
            top = _mm256_blendv_ps(top, x, gt);
            at = _mm256_blendv_epi8(at, idx, _mm256_castps_si256(gt));
        }
        float tv[8];
        int ta[8];
        _mm256_storeu_ps(tv, top);
        _mm256_storeu_si256((__m256i *)ta, at);
        float m = tv[0];
        for (int i = 1; i < 8; i++) m = tv[i] > m ? tv[i] : m;
        best = -1;
        for (int i = 0; i < 8; i++)
            if (ta[i] >= 0 && tv[i] == m && (best < 0 || ta[i] < best)) best = ta[i];
        if (best < 0) best = 0;
    }
#endif
    for (; j < vocab; j++) if (l[j] > l[best]) best = j;
    return best;
}

void cpu_argmax(const float *logits, int n, int vocab, int *ids) {
    for (int r = 0; r < n; r++) ids[r] = argmax_row(logits + (size_t)r * vocab, vocab);
}

static int descending(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

double cpu_sample_weights(const float *l, int vocab, const SampleParams *sp, float *w, float *scratch) {
    float mx = -INFINITY, kth = -INFINITY;
    for (int j = 0; j < vocab; j++) if (l[j] > mx) mx = l[j];
    if (sp->top_k > 0 && sp->top_k < vocab) {
        memcpy(scratch, l, sizeof(float) * vocab);
        kth = kth_largest(scratch, vocab, sp->top_k - 1);
    }
    double total = 0;
    for (int j = 0; j < vocab; j++) {
        w[j] = l[j] >= kth && mx > -INFINITY ? expf((l[j] - mx) / sp->temperature) : 0.0f;
        total += w[j];
    }
    if (sp->top_p > 0 && sp->top_p < 1) {
        int m = 0;
        for (int j = 0; j < vocab; j++) if (w[j] > 0) scratch[m++] = w[j];
        qsort(scratch, m, sizeof(float), descending);
        const double need = sp->top_p * total;
        double cum = 0;
        float q = 0;
        for (int i = 0; i < m && q == 0; i++) if ((cum += scratch[i]) >= need) q = scratch[i];
        total = 0;
        for (int j = 0; j < vocab; j++) {
            if (w[j] < q) w[j] = 0;
            total += w[j];
        }
    }
    return total;
}

/* The first id whose running sum of w passes target, else the last with w > 0. */
static int pick(const float *w, int vocab, double target) {
    double c = 0;
    int last = 0;
    for (int j = 0; j < vocab; j++) {
        if (!(w[j] > 0)) continue;
        c += w[j];
        last = j;
        if (target < c) return j;
    }
    return last;
}

typedef struct {
    const float *logits;
    int n, vocab;
    const SampleParams *sp;
    uint64_t key;
    int node0;
    int *ids;
} SampleJob;

static void sample_part(void *v, int part, int parts) {
    const SampleJob *d = v;
    int64_t lo, hi;
    part_range(d->n, part, parts, &lo, &hi);
    if (lo >= hi) return;
    float *w = malloc(sizeof(float) * 2 * (size_t)d->vocab);
    for (int r = (int)lo; r < (int)hi; r++) {
        const double total = cpu_sample_weights(d->logits + (size_t)r * d->vocab, d->vocab, d->sp, w, w + d->vocab);
        d->ids[r] = pick(w, d->vocab, rng_uniform_at(d->key, (uint64_t)(d->node0 + r)) * total);
    }
    free(w);
}

void cpu_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                    int *ids) {
    SampleJob d = {logits, n, vocab, sp, key[0] | (uint64_t)key[1] << 32, node0, ids};
    cpu_parallel(sample_part, &d, n > 1 && (int64_t)n * vocab > PAR_MIN_WORK);
}
