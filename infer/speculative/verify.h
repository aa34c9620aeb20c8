/* Verification of a drafted tree against the target's logits
 * (infer/speculative/verify.c); the loop (decode.c) calls one of these per cycle. */
#ifndef C2T_VERIFY_H
#define C2T_VERIFY_H
#include "infer/speculative/tree.h"
#include "kernels/base/rng.h"
#include "kernels/kernels.h"

typedef struct {
    float temperature;    /* 0: greedy */
    int top_k;            /* 0: off */
    float top_p;          /* 1: off */
    uint64_t seed;
} SampleParams;

/* Target probabilities of one logits row after temperature, top-k and top-p
 * (as the reference's logits processors); host arrays. */
void sample_probs(const float *logits, int vocab, const SampleParams *sp, float *probs);

/* One id drawn from probabilities p[vocab] (host) by inverse CDF in id order. */
int sample_from(const float *p, int vocab, Rng *rng);

/* The target's logits of a tree node: of(ctx, node) returns V floats in
 * backend memory, valid until the next call, or NULL with err_set when
 * they could not be computed (both rules then return -1).  Both rules read
 * them only along the path they walk, so the loop may compute them on
 * demand. */
typedef struct {
    const float *(*of)(void *ctx, int node);
    void *ctx;
} NodeLogits;

/* Greedy: from the root follow the child whose token is the target's argmax.
 * Writes the path (root first) to path and returns its length; *bonus is the
 * target's token after the path. */
int verify_greedy(const Tree *t, const Backend *be, int V, NodeLogits lg, int *path, int *bonus);

/* Sampling, for deterministic candidates: at each node its children in rank
 * order, child x accepted with the residual target probability of x, else x's
 * mass removed and the rest renormalised; with none accepted the bonus is
 * drawn from the residual.  row is a host scratch row of V floats.  Emits
 * exactly the target's distribution. */
int verify_sample(const Tree *t, const Backend *be, int V, NodeLogits lg, const SampleParams *sp, Rng *rng,
                  float *row, int *path, int *bonus);
#endif
