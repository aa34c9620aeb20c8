/* A speedup measured A/B: the policy and ar decode the same prompt one
 * after the other in one process, in alternating order (ABBA: the odd pairs
 * run ar first), so that a machine that slows down or speeds up during the
 * run (another job, a frequency change, a descheduled vCPU) weighs on both
 * sides alike instead of on whichever ran later.  Each pair gives one ratio
 * of speeds, and each two consecutive pairs (one of each order: an ABBA
 * block) the geometric mean of their ratios, in which a drift of the
 * machine's speed and any advantage of running second cancel to first
 * order; the speedup is the median over blocks (an odd last pair is a
 * block alone), with the sign test's interval for a median: the k-th
 * smallest and k-th largest block, k the largest whose coverage
 * 1 - 2 P(Bin(blocks, 1/2) < k) is at least 95%.  That coverage holds for
 * any distribution of the blocks' ratios (independent, continuous), where
 * a percentile bootstrap of a median over a few blocks covers less than it
 * says.  A pair is a question's turns (or, batched, a whole run)
 * with each side's decode time: prefill is left out, and reported apart. */
#ifndef C2T_SPEEDUP_H
#define C2T_SPEEDUP_H
#include <stdint.h>

typedef struct {
    double policy_s, ar_s;              /* decode seconds of each side */
    int64_t policy_tokens, ar_tokens;   /* tokens each decoded */
} AbPair;

typedef struct {
    int n;                /* pairs with both sides timed; 0: no speedup */
    double median;        /* median over ABBA blocks of policy speed / ar speed */
    double lo, hi;        /* the interval: k-th smallest and k-th largest block */
    int blocks;           /* ABBA blocks the interval is drawn from */
    double level;         /* its coverage, 1 - 2 P(Bin(blocks, 1/2) < k): >= 0.95 from
                             SPEEDUP_MIN_BLOCKS blocks, below that the range's */
} Speedup;

/* The interval's target coverage. */
#define SPEEDUP_LEVEL 0.95
/* An interval wider than this share of the median either way is flagged
 * as unstable. */
#define SPEEDUP_UNSTABLE 0.10

/* Whether pair number i (counted over the whole run) decodes ar first. */
static inline int ab_ar_first(int64_t i) { return (int)(i & 1); }

/* The speedup of n pairs (pairs with a side of zero time or tokens are
 * skipped). */
Speedup speedup_estimate(const AbPair *p, int n);
/* Whether its interval reaches further than SPEEDUP_UNSTABLE from the median. */
int speedup_unstable(const Speedup *s);
/* Whether it has too few blocks for a 95% interval: any interval whose ends
 * are two of n blocks' ratios covers their median with at most
 * 1 - 2 * 0.5^n (the chance that not all n fall on one side), under 95%
 * below SPEEDUP_MIN_BLOCKS.  *most (may be NULL) gets the interval's
 * coverage, that bound where it has too few. */
#define SPEEDUP_MIN_BLOCKS 6
int speedup_few_blocks(const Speedup *s, double *most);
/* The sign test's interval rank for n values: the largest k <= (n + 1) / 2
 * whose coverage 1 - 2 P(Bin(n, 1/2) < k) reaches `level` (1 where none
 * does); *coverage gets that k's. */
int speedup_sign_rank(int n, double level, double *coverage);
#endif
