/* A/B speedups (infer/speedup.h). */
#include "infer/speedup.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* P(Bin(n, 1/2) = j), in logs so that no n underflows. */
static double half_binomial(int n, int j) {
    return exp(lgamma(n + 1.0) - lgamma(j + 1.0) - lgamma(n - j + 1.0) - n * log(2.0));
}

int speedup_sign_rank(int n, double level, double *coverage) {
    int k = 1;
    double below = half_binomial(n, 0);   /* P(Bin < k) */
    double cover = 1 - 2 * below;
    while (k + 1 <= (n + 1) / 2) {
        const double next = below + half_binomial(n, k);
        if (1 - 2 * next < level) break;
        below = next;
        cover = 1 - 2 * below;
        k++;
    }
    if (coverage) *coverage = cover > 0 ? cover : 0;
    return k;
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
    if (s.n) {
        qsort(ratio, (size_t)nb, sizeof *ratio, by_value);
        s.median = nb % 2 ? ratio[nb / 2] : 0.5 * (ratio[nb / 2 - 1] + ratio[nb / 2]);
        const int k = speedup_sign_rank(nb, SPEEDUP_LEVEL, &s.level);
        s.lo = ratio[k - 1];
        s.hi = ratio[nb - k];
        s.blocks = nb;
    }
    free(ratio);
    return s;
}

int speedup_unstable(const Speedup *s) {
    return s->n > 0 && (s->lo < s->median * (1 - SPEEDUP_UNSTABLE) || s->hi > s->median * (1 + SPEEDUP_UNSTABLE));
}

int speedup_few_blocks(const Speedup *s, double *most) {
    if (most) *most = s->level;
    return s->n > 0 && s->level < SPEEDUP_LEVEL;
}
