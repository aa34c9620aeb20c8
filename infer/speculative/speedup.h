/* A speedup measured A/B: the policy and ar decode the same prompt one
 * after the other in one process, in alternating order (ABBA: the odd pairs
 * run ar first), so that a machine that slows down or speeds up during the
 * run (another job, a frequency change, a descheduled vCPU) weighs on both
 * sides alike instead of on whichever ran later.  Each pair gives one ratio
 * of speeds, and each two consecutive pairs (one of each order: an ABBA
 * block) the geometric mean of their ratios, in which a drift of the
 * machine's speed and any advantage of running second cancel to first
 * order; the speedup is the median over blocks, with a 95%
 * percentile-bootstrap interval over the blocks (an odd last pair is a
 * block alone).  A pair is a question's turns (or, batched, a whole run)
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
    double lo, hi;        /* 95% interval (percentile bootstrap over blocks) */
    int blocks;           /* ABBA blocks the interval is drawn from */
} Speedup;

/* The bootstrap's resamples and seed (fixed: the same pairs give the same
 * interval in every run). */
#define SPEEDUP_BOOTSTRAP 2000
#define SPEEDUP_SEED 0x5eedab5eedull
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
 * below SPEEDUP_MIN_BLOCKS.  *most (may be NULL) gets that bound. */
#define SPEEDUP_MIN_BLOCKS 6
int speedup_few_blocks(const Speedup *s, double *most);
#endif
