/* A/B speedups (infer/speculative/speedup.h). */
#include "infer/speculative/speedup.h"
#include "kernels/base/rng.h"
#include "kernels/base/util.h"
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
    for (int i = 0; i < n; i++)
        if (p[i].policy_s > 0 && p[i].ar_s > 0 && p[i].policy_tokens > 0 && p[i].ar_tokens > 0)
            ratio[s.n++] = (p[i].policy_tokens / p[i].policy_s) / (p[i].ar_tokens / p[i].ar_s);
    if (!s.n) { free(ratio); return s; }
    double *sample = xmalloc(sizeof(double) * s.n), *medians = xmalloc(sizeof(double) * SPEEDUP_BOOTSTRAP);
    Rng rng;
    rng_seed(&rng, SPEEDUP_SEED);
    for (int b = 0; b < SPEEDUP_BOOTSTRAP; b++) {
        for (int i = 0; i < s.n; i++) sample[i] = ratio[rng_next(&rng) % (uint64_t)s.n];
        medians[b] = median(sample, s.n);
    }
    s.median = median(ratio, s.n);
    qsort(medians, SPEEDUP_BOOTSTRAP, sizeof *medians, by_value);
    s.lo = medians[(int)(0.025 * SPEEDUP_BOOTSTRAP)];
    s.hi = medians[(int)(0.975 * SPEEDUP_BOOTSTRAP) - 1];
    free(ratio); free(sample); free(medians);
    return s;
}

int speedup_unstable(const Speedup *s) {
    return s->n > 0 && (s->lo < s->median * (1 - SPEEDUP_UNSTABLE) || s->hi > s->median * (1 + SPEEDUP_UNSTABLE));
}
