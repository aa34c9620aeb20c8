/* Verification of a drafted tree against the target's logits
 * (infer/speculative/verify.c); the host cycle (decode.c) calls it once a cycle. */
#ifndef C2T_VERIFY_H
#define C2T_VERIFY_H
#include "infer/speculative/tree.h"
#include "kernels/base/rng.h"
#include "kernels/kernels.h"

/* The target's sampled choice at one position: an id drawn from
 * logits[V] (backend memory) by sample_dev's rule on the CPU (the reference:
 * the row is read to the host scratch row[V]) with the number
 * rng_uniform_at(key, node). */
int sample_row(const Backend *be, const float *logits, int V, const SampleParams *sp, uint64_t key, int node,
               float *row);

/* The target's logits of a tree node: of(ctx, node) returns V floats in
 * backend memory, valid until the next call, or NULL with err_set when
 * they could not be computed (verify_tree then returns -1).  It reads
 * them only along the path it walks, so the loop may compute them on
 * demand. */
typedef struct {
    const float *(*of)(void *ctx, int node);
    void *ctx;
} NodeLogits;

/* From the root, at each node the target's choice (its argmax, or where
 * sp->temperature > 0 sample_row's draw keyed by key and the node), then
 * the first child holding it, until none does: that choice is the bonus.
 * Writes the path (root first) to path and returns its length, -1 where
 * logits fail; row is a host scratch row of V floats.  Sampled, it emits
 * exactly the target's distribution (verify.c says why), and the device
 * cycle walks the same path from the same key (sample_dev, tree_accept). */
int verify_tree(const Tree *t, const Backend *be, int V, NodeLogits lg, const SampleParams *sp, uint64_t key,
                float *row, int *path, int *bonus);
/* Trees of up to lazy_logits_nodes(be) nodes get logits for every node
 * from the verify forward; bigger ones only for the path verification
 * walks (one one-token LM-head product per accepted node).  With the pair
 * dot an n-token LM-head product reads the head once but costs n times the
 * arithmetic (kernels/cpu/matmul.c): around LAZY_LOGITS_NODES nodes that
 * equals reading it once per accepted node.  Where a product of
 * backend_product_tokens(be) tokens costs about one token's (AMX tiles:
 * 16), two such groups of nodes cost less than the walk's two or three
 * one-token products: eagle2's plain command under --cpu-fast-gemm amx
 * decoded 1.10x faster with 32 than with 8 (16 and 64 alike; SmolLM2,
 * held-out prompts).  On a GPU (64 tokens) eagle2's trees are scored
 * whole, so the device cycle's walk needs no read on the way. */
#define LAZY_LOGITS_NODES 8
int lazy_logits_nodes(const Backend *be);
#endif
