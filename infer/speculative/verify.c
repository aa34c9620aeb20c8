/* Verification: which path of a drafted tree the target accepts, greedily
 * (the target's argmax at every node) or by sampling.  The cycle walks the
 * tree in backend memory (decode.c: sample_dev or argmax_dev at every row,
 * then tree_accept); this file holds the rule's reasons, the prefill's
 * one-row draw and the lazy-logits bound.
 *
 * Sampling.  The tree's tokens do not depend on the draft's randomness
 * (they are its top-k), and for such candidates EAGLE's rule — at a node
 * try the children in rank order, accept child x with the residual target
 * probability of x, else remove x's mass and renormalise; with none
 * accepted draw the bonus from the residual — reaches child x untaken with
 * probability 1 - S (S: the mass of the distinct tokens tried before it)
 * and takes it with p(x) / (1 - S): p(x) in all; with none taken the bonus
 * is drawn from p restricted to the ids no child holds.  One draw y ~ p
 * does exactly that: the child holding y if any, else y is the bonus.
 * So each path node draws one id from the target's distribution and the
 * walk is the greedy one with a draw in place of the argmax; every emitted
 * token is a draw from the target given its prefix.  The draw's number is
 * counter-based, rng_uniform_at(key, node) with one key a cycle from the
 * decoder's stream: no sequence of draws to replay (EAGLE's rule draws a
 * number per child tried, then one for the bonus: a count known only as
 * the walk goes), so the cycle draws every row at once (sample_dev) and
 * walks (tree_accept) to the path and bonus a walk drawing only along the
 * path would reach (the lazy-logits walk, one row at a time, does). */
#include "infer/speculative/verify.h"

int sample_row(const Backend *be, const float *logits, int V, const SampleParams *sp, uint64_t key, int node,
               float *row) {
    const uint32_t words[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    int id;
    be->to_host(row, logits, V);
    cpu_backend.sample_dev(row, 1, V, sp, words, node, &id);   /* the CPU's memory is the host's */
    return id;
}

int lazy_logits_nodes(const Backend *be) {
    const int group = backend_product_tokens(be);
    return 2 * group > LAZY_LOGITS_NODES ? 2 * group : LAZY_LOGITS_NODES;
}
