#include "kernels/base/node_net.h"
#include <math.h>
#include <string.h>

float node_net_input(const NodeNet *net, int k, const float *raw) {
    const NodeNetInput *f = &net->in[k];
    const float x = raw[f->id];
    const float t = f->kind == NODE_T_LOG ? (float)log((double)(x + f->eps)) : x;
    return (t - f->mean) / f->std;
}

/* 8 nodes per vector: for each hidden unit, broadcast its weights and
 * update all 8 pre-activations at once (two accumulators, even and odd
 * units), the order node_net.h fixes. */
typedef float nn_v8 __attribute__((vector_size(32)));
typedef int nn_v8i __attribute__((vector_size(32)));
static inline nn_v8 nn_set1(float x) { return (nn_v8){x, x, x, x, x, x, x, x}; }

static inline nn_v8 nn_unit(const float *w, float b, const nn_v8 *X, int nf) {
    nn_v8 z = nn_set1(b);
    for (int k = 0; k < nf; k++) z = z + nn_set1(w[k]) * X[k];
    return z;
}

static inline nn_v8 nn_relu(nn_v8 z) { return (nn_v8)((nn_v8i)z & (z > nn_set1(0.0f))); }

void node_net_logits(const NodeNet *net, const float *raw, int stride, int n, float *logit) {
    const int h = net->hidden, nf = net->n_feat;
    const float *W = net->fc1_w, *B = net->fc1_b, *V = net->fc2_w;
    for (int i0 = 0; i0 < n; i0 += 8) {
        const int m = n - i0 < 8 ? n - i0 : 8;
        float xs[NODE_N_FEAT][8], out[8];
        memset(xs, 0, sizeof xs);
        for (int i = 0; i < m; i++)
            for (int k = 0; k < nf; k++) xs[k][i] = node_net_input(net, k, raw + (size_t)(i0 + i) * stride);
        nn_v8 X[NODE_N_FEAT], acc0 = nn_set1(0.0f), acc1 = nn_set1(0.0f);
        for (int k = 0; k < nf; k++) memcpy(&X[k], xs[k], sizeof X[k]);
        int j = 0;
        for (; j + 1 < h; j += 2) {
            acc0 += nn_set1(V[j]) * nn_relu(nn_unit(W + (size_t)nf * j, B[j], X, nf));
            acc1 += nn_set1(V[j + 1]) * nn_relu(nn_unit(W + (size_t)nf * (j + 1), B[j + 1], X, nf));
        }
        if (j < h) acc0 += nn_set1(V[j]) * nn_relu(nn_unit(W + (size_t)nf * j, B[j], X, nf));
        const nn_v8 r = (acc0 + acc1) + nn_set1(net->fc2_b);
        memcpy(out, &r, sizeof out);
        memcpy(logit + i0, out, sizeof(float) * m);
    }
}

float node_net_sigmoid(float z) { return (float)(1.0 / (1.0 + exp(-(double)z))); }
