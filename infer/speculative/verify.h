/* Verification of a drafted tree against the target's logits
 * (infer/speculative/verify.c: why the sampled walk is exact); the walk
 * itself runs in backend memory (decode.c: sample_dev, tree_accept). */
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
 * whole, so the cycle's walk needs no read on the way. */
#define LAZY_LOGITS_NODES 8
int lazy_logits_nodes(const Backend *be);
#endif
