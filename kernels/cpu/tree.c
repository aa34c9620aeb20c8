/* The tree ops of the device cycle on the CPU (kernels.h): the same
 * arithmetic and orders as the host tree code (infer/speculative/cycle.c:
 * tree_add, tree_subset; the policies' rankings, policy_by_joint_prob's
 * ties), over DevTree arrays. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

void cpu_tree_root(const DevTree *t, const int *root) {
    t->token[0] = *root;
    t->parent[0] = -1;
    t->depth[0] = t->rank[0] = 0;
    t->slot[0] = -1;
    t->p[0] = t->P[0] = 1.0f;
    t->H[0] = 0.0f;
}

void cpu_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                   int k, const int *picks, int count, const int *map) {
    for (int c = 0; c < count; c++) {
        const int r = picks ? picks[2 * c] : c / k, j = picks ? picks[2 * c + 1] : c % k;
        const int v = n0 + c, par = rows[r], id = ids[r * k + j];
        t->token[v] = id < 0 ? -1 : map ? map[id] : id;
        t->parent[v] = par;
        t->depth[v] = t->depth[par] + 1;
        t->rank[v] = j;
        t->slot[v] = -1;
        t->p[v] = probs[r * k + j];
        t->P[v] = t->P[par] * t->p[v];
        t->H[v] = ent ? ent[r] : 0.0f;
    }
}

/* higher score first, then shallower, then lower index */
typedef struct { const DevTree *t; const float *score; } TopOrder;
static int by_score(const void *a, const void *b, void *order) {
    const int x = *(const int *)a, y = *(const int *)b;
    const TopOrder *o = order;
    if (o->score[x] != o->score[y]) return o->score[x] > o->score[y] ? -1 : 1;
    if (o->t->depth[x] != o->t->depth[y]) return o->t->depth[x] - o->t->depth[y];
    return x - y;
}
static int ascending(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void cpu_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    if (m >= n) {
        for (int i = 0; i < n; i++) sel[i] = from + i;
        return;
    }
    int *order = xmalloc(sizeof(int) * (n ? n : 1));
    for (int i = 0; i < n; i++) order[i] = from + i;
    qsort_r(order, n, sizeof(int), by_score, &(TopOrder){t, score ? score : t->P});
    memcpy(sel, order, sizeof(int) * m);
    qsort(sel, m, sizeof(int), ascending);
    free(order);
}

/* a node's raw classifier features (node_net.h's order) */
static void node_features(const DevTree *t, int v, float *raw) {
    const int par = t->parent[v];
    raw[NODE_F_P] = t->P[v];
    raw[NODE_F_H] = t->H[v];
    raw[NODE_F_DEPTH] = (float)t->depth[v];
    raw[NODE_F_LOCAL_P] = t->p[v];
    raw[NODE_F_RANK] = (float)t->rank[v];
    raw[NODE_F_PARENT_H] = par <= 0 ? t->H[v] : t->H[par];
}

void cpu_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    if (n <= 0) return;
    float *raw = xmalloc(sizeof(float) * NODE_N_FEAT * n);
    for (int i = 0; i < n; i++) node_features(t, from + i, raw + (size_t)NODE_N_FEAT * i);
    node_net_logits(net, raw, NODE_N_FEAT, n, conf + from);
    for (int i = 0; i < n; i++) conf[from + i] = node_net_sigmoid(conf[from + i]);
    free(raw);
}

/* dst's node j := src's node i, its parent given */
static void copy_node(const DevTree *dst, int j, const DevTree *src, int i, int parent) {
    dst->token[j] = src->token[i];
    dst->parent[j] = parent;
    dst->depth[j] = src->depth[i];
    dst->rank[j] = src->rank[i];
    dst->slot[j] = src->slot[i];
    dst->p[j] = src->p[i];
    dst->P[j] = src->P[i];
    dst->H[j] = src->H[i];
}

void cpu_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    int kept = 0;
    for (int i = 0; i < n; i++) {
        const int v = from + i, w = from + kept;
        if (t->token[v] < 0 || t->token[t->parent[v]] < 0 || conf[v] < beta) continue;
        const float up = path_conf[t->parent[v]], c = conf[v];
        copy_node(t, w, t, v, t->parent[v]);
        conf[w] = c;
        path_conf[w] = c < up ? c : up;
        kept++;
    }
    for (int v = from + kept; v < from + n; v++) t->token[v] = -1, conf[v] = path_conf[v] = -1;
    *count = kept;
}

/* the position of node v in keep[0..m) (ascending), which holds it */
static int index_in(const int *keep, int m, int v) {
    int lo = 0, hi = m - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (keep[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void cpu_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    for (int j = 0; j < m; j++) {
        const int i = keep[j];
        copy_node(dst, j, src, i, src->parent[i] < 0 ? -1 : index_in(keep, j, src->parent[i]));
    }
    for (int j = m; j < pad; j++) {
        dst->token[j] = -1;
        dst->parent[j] = 0;
        dst->depth[j] = 1;
        dst->rank[j] = 0;
        dst->slot[j] = -1;
        dst->p[j] = dst->P[j] = dst->H[j] = 0.0f;
    }
}

void cpu_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0, int nctx,
                     int *out, uint8_t *mask) {
    const int o = at ? *at : 0;
    base += o;
    ones += o;
    pos0 += o;
    nctx += o;
    out[4 * m] = base;
    for (int i = 0; i < m; i++) t->slot[rows ? rows[i] : i] = base + i;   /* before any row reads them */
    for (int i = 0; i < m; i++) {
        const int v = rows ? rows[i] : i;
        out[i] = t->token[v];
        out[m + i] = pos0 + t->depth[v];
        out[2 * m + i] = t->parent[v];
        out[3 * m + i] = v;
        uint8_t *row = mask + (size_t)i * (nctx - ones);
        memset(row, 0, nctx - ones);
        for (int a = v; a >= 0; a = t->parent[a])
            if (t->slot[a] >= ones && t->slot[a] < nctx) row[t->slot[a] - ones] = 1;
    }
}

void cpu_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    int *path = walk + 3, *tokens = walk + 3 + n;
    if (from_start) {
        walk[0] = 0;
        walk[1] = 1;
        walk[2] = 0;
        path[0] = 0;
        tokens[0] = t->token[0];
    }
    for (int s = 0; s < steps && !walk[0]; s++) {
        const int cur = path[walk[1] - 1], w = want[cur];
        int next = -1;
        for (int c = cur + 1; c < n && next < 0; c++)
            if (t->parent[c] == cur && t->token[c] == w) next = c;
        if (next < 0) {
            walk[0] = 1;
            walk[2] = w;
        } else {
            path[walk[1]] = next;
            tokens[walk[1]++] = t->token[next];
        }
    }
}
