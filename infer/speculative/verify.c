/* Verification: which path of a drafted tree the target accepts, greedily
 * (the target's argmax at every node) or by sampling.
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
 * the walk goes), so the device cycle draws every row at once (sample_dev)
 * and walks (tree_accept) to the same path and bonus as this host walk,
 * which draws only along the path. */
#include "infer/speculative/verify.h"

int sample_row(const Backend *be, const float *logits, int V, const SampleParams *sp, uint64_t key, int node,
               float *row) {
    const uint32_t words[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    int id;
    be->to_host(row, logits, V);
    cpu_backend.sample_dev(row, 1, V, sp, words, node, &id);   /* the CPU's memory is the host's */
    return id;
}

int verify_tree(const Tree *t, const Backend *be, int V, NodeLogits lg, const SampleParams *sp, uint64_t key,
                float *row, int *path, int *bonus) {
    int len = 0, cur = 0, want;
    path[len++] = 0;
    for (;;) {
        int next = -1;
        const float *logits = lg.of(lg.ctx, cur);
        if (!logits) return -1;
        if (sp->temperature > 0) want = sample_row(be, logits, V, sp, key, cur, row);
        else be->argmax(logits, 1, V, &want);
        for (int c = cur + 1; c < t->n && next < 0; c++)
            if (t->parent[c] == cur && t->token[c] == want) next = c;
        if (next < 0) break;
        path[len++] = cur = next;
    }
    *bonus = want;
    return len;
}

int lazy_logits_nodes(const Backend *be) {
    const int group = backend_product_tokens(be);
    return 2 * group > LAZY_LOGITS_NODES ? 2 * group : LAZY_LOGITS_NODES;
}
