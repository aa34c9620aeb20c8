#include "infer/speculative/tree.h"
#include "infer/speculative/gate.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

void tree_init(Tree *t) { memset(t, 0, sizeof *t); }

void tree_free(Tree *t) {
    free(t->token); free(t->parent); free(t->depth); free(t->rank);
    free(t->p); free(t->P); free(t->H);
    memset(t, 0, sizeof *t);
}

static void tree_grow(Tree *t, int cap) {
    if (cap <= t->cap) return;
    t->cap = cap;
    t->token = xrealloc(t->token, sizeof(int) * cap);
    t->parent = xrealloc(t->parent, sizeof(int) * cap);
    t->depth = xrealloc(t->depth, sizeof(int) * cap);
    t->rank = xrealloc(t->rank, sizeof(int) * cap);
    t->p = xrealloc(t->p, sizeof(float) * cap);
    t->P = xrealloc(t->P, sizeof(float) * cap);
    t->H = xrealloc(t->H, sizeof(float) * cap);
}

void tree_set_size(Tree *t, int n) {
    tree_grow(t, n);
    t->n = n;
}

void tree_reset(Tree *t, int root_token) {
    tree_grow(t, 64);
    t->n = 1;
    t->token[0] = root_token;
    t->parent[0] = -1;
    t->depth[0] = 0;
    t->rank[0] = 0;
    t->p[0] = t->P[0] = 1.0f;
    t->H[0] = 0.0f;
}

int tree_add(Tree *t, int parent, int token, float p, float H, int rank) {
    if (t->n == t->cap) tree_grow(t, t->cap * 2);
    int i = t->n++;
    t->token[i] = token;
    t->parent[i] = parent;
    t->depth[i] = t->depth[parent] + 1;
    t->rank[i] = rank;
    t->p[i] = p;
    t->P[i] = t->P[parent] * p;
    t->H[i] = H;
    return i;
}

void tree_positions(const Tree *t, int n_past, int *pos) {
    for (int i = 0; i < t->n; i++) pos[i] = n_past + t->depth[i];
}

void tree_mask(const Tree *t, uint8_t *mask) {
    memset(mask, 0, (size_t)t->n * t->n);
    for (int i = 0; i < t->n; i++)
        for (int a = i; a >= 0; a = t->parent[a]) mask[(size_t)i * t->n + a] = 1;
}

void tree_subset(const Tree *t, const int *keep, int m, Tree *out) {
    int *new_index = xmalloc(sizeof(int) * t->n);
    for (int i = 0; i < t->n; i++) new_index[i] = -1;
    tree_grow(out, m > 64 ? m : 64);
    out->n = m;
    for (int j = 0; j < m; j++) {
        int i = keep[j];
        new_index[i] = j;
        out->token[j] = t->token[i];
        out->parent[j] = t->parent[i] < 0 ? -1 : new_index[t->parent[i]];
        out->depth[j] = t->depth[i];
        out->rank[j] = t->rank[i];
        out->p[j] = t->p[i];
        out->P[j] = t->P[i];
        out->H[j] = t->H[i];
    }
    free(new_index);
}

int tree_path(const Tree *t, int node, int *path) {
    int len = t->depth[node] + 1;
    for (int v = node, k = len - 1; v >= 0; v = t->parent[v], k--) path[k] = v;
    return len;
}

int tree_max_depth(const Tree *t) {
    int d = 0;
    for (int i = 0; i < t->n; i++) if (t->depth[i] > d) d = t->depth[i];
    return d;
}

/* words of an input buffer of m rows with masks of w slots */
static size_t input_words(int m, int w) { return 4 * (size_t)m + 1 + ((size_t)m * w + 3) / 4; }

/* at least `words` words in in's buffer (twice that where it grows) */
static void inputs_room(TreeInputs *in, const Backend *be, size_t words, size_t grow_to) {
    if (in->be != be) { tree_inputs_free(in); in->be = be; }
    if (words <= in->cap) return;
    if (in->dev) be->release(in->dev);
    in->cap = grow_to;
    in->dev = backend_alloc_ints(be, in->cap);
}

void tree_inputs_reserve(TreeInputs *in, const Backend *be, int m, int w) {
    inputs_room(in, be, input_words(m, w), input_words(m, w));
}

void tree_inputs_make(TreeInputs *in, const Backend *be, Gate *gate, const DevTree *t, const int *rows, int m,
                      const int *at, int base, int ones, int pos0, int nctx) {
    const size_t ints = 4 * (size_t)m + 1, words = input_words(m, nctx - ones);
    inputs_room(in, be, words, 2 * words);
    in->dev_mask = (const uint8_t *)(const void *)(in->dev + ints);
    gate_tree_op(gate, be, &(TreeOp){.kind = TREE_OP_INPUTS, .t = *t, .rows = rows, .m = m, .at = at, .base = base,
                                     .ones = ones, .pos0 = pos0, .nctx = nctx, .out = in->dev,
                                     .mask = (uint8_t *)(void *)(in->dev + ints)});
}

void tree_inputs_free(TreeInputs *in) {
    if (in->dev) in->be->release(in->dev);
    memset(in, 0, sizeof *in);
}
