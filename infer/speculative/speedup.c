/* A/B speedups (infer/speculative/speedup.h). */
#include "infer/speculative/speedup.h"
#include "kernels/base/rng.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of x[0..n) (sorted in place). */
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, by_value);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

Speedup speedup_estimate(const AbPair *p, int n) {
    Speedup s = {0};
    double *ratio = xmalloc(sizeof(double) * (n > 0 ? n : 1));
    /* ABBA blocks: pairs 2k and 2k+1 ran in opposite orders (a block with
     * one pair untimed is the other alone) */
    int nb = 0;
    for (int i = 0; i < n; i += 2) {
        double prod = 1;
        int m = 0;
        for (int j = i; j < n && j < i + 2; j++)
            if (p[j].policy_s > 0 && p[j].ar_s > 0 && p[j].policy_tokens > 0 && p[j].ar_tokens > 0) {
                prod *= (p[j].policy_tokens / p[j].policy_s) / (p[j].ar_tokens / p[j].ar_s);
                m++;
            }
        if (m) ratio[nb++] = m == 2 ? sqrt(prod) : prod;
        s.n += m;
    }
    if (!s.n) { free(ratio); return s; }
    double *sample = xmalloc(sizeof(double) * nb), *medians = xmalloc(sizeof(double) * SPEEDUP_BOOTSTRAP);
    Rng rng;
    rng_seed(&rng, SPEEDUP_SEED);
    for (int b = 0; b < SPEEDUP_BOOTSTRAP; b++) {
        for (int i = 0; i < nb; i++) sample[i] = ratio[rng_next(&rng) % (uint64_t)nb];
        medians[b] = median(sample, nb);
    }
    s.median = median(ratio, nb);
    s.blocks = nb;
    qsort(medians, SPEEDUP_BOOTSTRAP, sizeof *medians, by_value);
    s.lo = medians[(int)(0.025 * SPEEDUP_BOOTSTRAP)];
    s.hi = medians[(int)(0.975 * SPEEDUP_BOOTSTRAP) - 1];
    free(ratio); free(sample); free(medians);
    return s;
}

int speedup_unstable(const Speedup *s) {
    return s->n > 0 && (s->lo < s->median * (1 - SPEEDUP_UNSTABLE) || s->hi > s->median * (1 + SPEEDUP_UNSTABLE));
}

int speedup_few_blocks(const Speedup *s, double *most) {
    if (most) *most = 1 - 2 * pow(0.5, s->blocks);
    return s->n > 0 && s->blocks < SPEEDUP_MIN_BLOCKS;
}
