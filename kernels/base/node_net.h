/* A node classifier's arithmetic: the C2T paper's confidence network (§4.1),
 * n_feat features of a draft-tree node -> per-feature transform ->
 * Linear(n_feat, hidden) -> ReLU -> Linear(hidden, 1) -> sigmoid.
 *
 * One definition for every place that scores nodes: the host classifier
 * (infer/speculative/classifier.c, which loads and validates the weights),
 * the CPU backend's tree_classify and the CUDA kernel of it, which repeats
 * these steps operation by operation.  So that a tree pruned on the device
 * is the tree pruned on the host, the arithmetic is fixed:
 *   - input k: t = raw, or for a log feature t = (float)ln((double)(raw + eps)),
 *     the sum in float; then x = (t - mean) / std, each step rounded to float;
 *   - unit j: z = b[j] + w[j][0]·x[0] + w[j][1]·x[1] + ..., left to right,
 *     every product and sum rounded to float (no fused multiply-add: this
 *     file compiles without contraction, the CUDA kernel uses _rn
 *     intrinsics); ReLU gives +0 unless z > 0;
 *   - the output sums v[j]·relu(z_j) over the even units and over the odd
 *     units separately (each in unit order), then (even + odd) + fc2_b;
 *   - confidence = (float)(1 / (1 + e^(-(double)z))), in double.
 * The two transcendental steps are computed in double and rounded to float
 * once: glibc's and CUDA's double log/exp are within an ulp of the exact
 * value, so their float results agree unless the exact value lies within
 * ~2^-29 (relative) of a float rounding boundary, where float logf/expf of
 * two libraries differ in the last place far more often. */
#ifndef C2T_NODE_NET_H
#define C2T_NODE_NET_H

/* The raw features of a node, in this order (a row of NODE_N_FEAT floats):
 * joint probability P, entropy H of the distribution the node was drawn
 * from, depth (root's children 1), own probability p, rank among its
 * siblings, and parent_H: the parent's H, or the node's own H when the
 * parent is the root. */
enum { NODE_F_P, NODE_F_H, NODE_F_DEPTH, NODE_F_LOCAL_P, NODE_F_RANK, NODE_F_PARENT_H, NODE_N_FEAT };
enum { NODE_T_RAW = 0, NODE_T_LOG = 1 };

typedef struct {
    int id;            /* which raw feature (NODE_F_*) */
    int kind;          /* NODE_T_RAW or NODE_T_LOG: ln(raw + eps) */
    float eps, mean, std;
} NodeNetInput;

/* The weights may live in host or backend memory (the caller's). */
typedef struct {
    int hidden, n_feat;
    NodeNetInput in[NODE_N_FEAT];   /* in input order */
    const float *fc1_w;   /* [hidden][n_feat] */
    const float *fc1_b;   /* [hidden] */
    const float *fc2_w;   /* [hidden] */
    float fc2_b;
} NodeNet;

/* Input k of a node whose raw features are raw[0..NODE_N_FEAT). */
float node_net_input(const NodeNet *net, int k, const float *raw);
/* Pre-sigmoid outputs of n nodes, node i's raw features at raw + i·stride;
 * net's weights in host memory. */
void node_net_logits(const NodeNet *net, const float *raw, int stride, int n, float *logit);
float node_net_sigmoid(float z);
#endif
