/* The tree ops of the device cycle (kernels.h: tree_root .. tree_accept) on
 * DevTree arrays in device memory, with the CPU twin's results bit for bit
 * (kernels/cpu/tree.c).  Every array argument is device memory, the counts
 * are host values; the ops only launch kernels on cu_stream() (no
 * allocation, copy or sync), so they can be recorded into a graph.
 *
 *  - root, grow: a thread per node; P = P[parent]·p as one rounded multiply
 *    (no contraction), as the CPU computes it.  grow's rows[] are nodes
 *    below n0 (the new nodes are written in parallel).
 *  - top: one block.  Node i's rank is the number of nodes of the range
 *    that come before it in EAGLE-2's order (the CPU comparator's, a total
 *    order), counted against tiles staged in shared memory; i is selected
 *    iff rank < m, and a block scan per chunk of nodes writes the selected
 *    in ascending index order.  O(n²) compares, for pools of a few thousand.
 *  - classify: a thread per node (node_net.h's arithmetic).
 *  - pass: one block, a scan per chunk of nodes compacts the passing ones
 *    in order.
 *  - compact: a thread per kept node, its parent found by binary search in
 *    keep.  dst and src must not overlap (no compaction in place).
 *  - inputs: a kernel records every row's slot, then a block per row writes
 *    its mask row and walks its ancestors (reading the slots just recorded).
 *  - accept: one thread, the CPU loop as it is (a few steps over a small
 *    tree). */
#include "kernels/cuda/common.cuh"
#include <cub/block/block_scan.cuh>

#define TREE_THREADS 256
#define TOP_THREADS 512

__global__ void tree_root_kernel(DevTree t, const int *root) {
    t.token[0] = *root;
    t.parent[0] = -1;
    t.depth[0] = t.rank[0] = 0;
    t.slot[0] = -1;
    t.p[0] = t.P[0] = 1.0f;
    t.H[0] = 0.0f;
}

void cu_tree_root(const DevTree *t, const int *root) {
    cu_launch(tree_root_kernel, 1, 1, 0, *t, root);
    CU_LAUNCHED();
}

__global__ void __launch_bounds__(TREE_THREADS)
tree_grow_kernel(DevTree t, int n0, const int *rows, const int *ids,
                 const float *probs, const float *ent, int k, const int *picks,
                 int count, const int *map) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= count) return;
    const int r = picks ? picks[2 * c] : c / k, j = picks ? picks[2 * c + 1] : c % k;
    const int v = n0 + c, par = rows[r], id = ids[r * k + j];
    const float p = probs[r * k + j];
    t.token[v] = id < 0 ? -1 : map ? map[id] : id;
    t.parent[v] = par;
    t.depth[v] = t.depth[par] + 1;
    t.rank[v] = j;
    t.slot[v] = -1;
    t.p[v] = p;
    t.P[v] = __fmul_rn(t.P[par], p);
    t.H[v] = ent ? ent[r] : 0.0f;
}

void cu_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                  int k, const int *picks, int count, const int *map) {
    if (count <= 0) return;
    cu_launch(tree_grow_kernel, cu_blocks((size_t)count, TREE_THREADS), TREE_THREADS, 0, *t, n0, rows, ids, probs, ent,
              k, picks, count, map);
    CU_LAUNCHED();
}

/* the order of by_score in kernels/cpu/tree.c: a before b when its score
 * is higher, then when it is shallower, then when its index is lower */
__device__ __forceinline__ bool top_before(float pa, int da, int a, float pb, int db, int b) {
    if (pa != pb) return pa > pb;
    if (da != db) return da < db;
    return a < b;
}

__global__ void __launch_bounds__(TOP_THREADS)
tree_top_kernel(const float *P, const int *depth, int from, int n, int m,
                int *sel) {
    typedef cub::BlockScan<int, TOP_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan;
    __shared__ float tile_p[TOP_THREADS];
    __shared__ int tile_d[TOP_THREADS];
    int written = 0;   /* selected nodes of the chunks before this one */
    for (int base = 0; base < n; base += TOP_THREADS) {   /* uniform trip counts: every thread syncs */
        const int i = base + threadIdx.x;   /* offsets in the range; they order as indices do */
        const bool mine = i < n;
        const float pi = mine ? P[from + i] : 0.0f;
        const int di = mine ? depth[from + i] : 0;
        int rank = 0;
        if (m < n)
            for (int t0 = 0; t0 < n; t0 += TOP_THREADS) {
                const int j = t0 + threadIdx.x;
                if (j < n) {
                    tile_p[threadIdx.x] = P[from + j];
                    tile_d[threadIdx.x] = depth[from + j];
                }
                __syncthreads();
                const int len = min(TOP_THREADS, n - t0);
                if (mine)
                    for (int c = 0; c < len; c++) rank += top_before(tile_p[c], tile_d[c], t0 + c, pi, di, i);
                __syncthreads();   /* the tile is reloaded next round */
            }
        const int take = mine && rank < m;
        int at, total;
        Scan(scan).ExclusiveSum(take, at, total);
        if (take && written + at < m) sel[written + at] = from + i;   /* the bound only matters for NaN P */
        written += total;
        __syncthreads();   /* scan storage is reused next chunk */
    }
}

void cu_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    if (n <= 0 || m <= 0) return;
    cu_launch(tree_top_kernel, 1, TOP_THREADS, 0, score ? score : t->P, t->depth, from, n, m, sel);
    CU_LAUNCHED();
}

/* node_net.h's arithmetic for one node, step by step as node_net.c's
 * vector lanes compute it: _rn intrinsics (nvcc would otherwise fuse a
 * product and a sum), log and exp in double. */
/* unit j after its ReLU (+0 unless z > 0) */
__device__ __forceinline__ float node_unit(const NodeNet *net, int j, const float *x) {
    float z = net->fc1_b[j];
    for (int k = 0; k < net->n_feat; k++) z = __fadd_rn(z, __fmul_rn(net->fc1_w[j * net->n_feat + k], x[k]));
    return z > 0.0f ? z : 0.0f;
}

__global__ void __launch_bounds__(TREE_THREADS)
tree_classify_kernel(DevTree t, int from, int n, NodeNet net, float *conf) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int v = from + i, par = t.parent[v];
    float raw[NODE_N_FEAT], x[NODE_N_FEAT];
    raw[NODE_F_P] = t.P[v];
    raw[NODE_F_H] = t.H[v];
    raw[NODE_F_DEPTH] = (float)t.depth[v];
    raw[NODE_F_LOCAL_P] = t.p[v];
    raw[NODE_F_RANK] = (float)t.rank[v];
    raw[NODE_F_PARENT_H] = par <= 0 ? t.H[v] : t.H[par];
    for (int k = 0; k < net.n_feat; k++) {
        const NodeNetInput f = net.in[k];
        const float u = f.kind == NODE_T_LOG ? (float)log((double)__fadd_rn(raw[f.id], f.eps)) : raw[f.id];
        x[k] = __fdiv_rn(__fsub_rn(u, f.mean), f.std);
    }
    float acc0 = 0.0f, acc1 = 0.0f;   /* the even units' and the odd units' */
    int j = 0;
    for (; j + 1 < net.hidden; j += 2) {
        acc0 = __fadd_rn(acc0, __fmul_rn(net.fc2_w[j], node_unit(&net, j, x)));
        acc1 = __fadd_rn(acc1, __fmul_rn(net.fc2_w[j + 1], node_unit(&net, j + 1, x)));
    }
    if (j < net.hidden) acc0 = __fadd_rn(acc0, __fmul_rn(net.fc2_w[j], node_unit(&net, j, x)));
    const float logit = __fadd_rn(__fadd_rn(acc0, acc1), net.fc2_b);
    conf[v] = (float)(1.0 / (1.0 + exp(-(double)logit)));
}

void cu_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    if (n <= 0) return;
    cu_launch(tree_classify_kernel, cu_blocks((size_t)n, TREE_THREADS), TREE_THREADS, 0, *t, from, n, *net, conf);
    CU_LAUNCHED();
}

/* One block: per chunk of nodes, every thread reads its node, a block scan
 * of the passing ones gives their places, then they are written (after the
 * reads: a node moves down to a place at or below its own); then the rest
 * of the layer is marked dead.  A parent lies below from: never written. */
__global__ void __launch_bounds__(TOP_THREADS)
tree_pass_kernel(DevTree t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    typedef cub::BlockScan<int, TOP_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan;
    int written = 0;
    for (int base = 0; base < n; base += TOP_THREADS) {
        const int i = base + threadIdx.x, v = from + i;
        int token = -1, parent = 0, depth = 0, rank = 0, slot = -1;
        float p = 0, P = 0, H = 0, c = 0, up = 0;
        if (i < n) {
            token = t.token[v]; parent = t.parent[v]; depth = t.depth[v]; rank = t.rank[v]; slot = t.slot[v];
            p = t.p[v]; P = t.P[v]; H = t.H[v]; c = conf[v]; up = path_conf[parent];
        }
        const int take = i < n && token >= 0 && t.token[parent] >= 0 && !(c < beta);
        int at, total;
        Scan(scan).ExclusiveSum(take, at, total);
        __syncthreads();   /* every read of the chunk before any write */
        if (take) {
            const int w = from + written + at;
            t.token[w] = token; t.parent[w] = parent; t.depth[w] = depth; t.rank[w] = rank; t.slot[w] = slot;
            t.p[w] = p; t.P[w] = P; t.H[w] = H;
            conf[w] = c;
            path_conf[w] = c < up ? c : up;
        }
        written += total;
        __syncthreads();   /* scan storage is reused next chunk */
    }
    for (int v = from + written + threadIdx.x; v < from + n; v += TOP_THREADS) {
        t.token[v] = -1;
        conf[v] = -1;
        path_conf[v] = -1;
    }
    if (threadIdx.x == 0) *count = written;
}

void cu_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    cu_launch(tree_pass_kernel, 1, TOP_THREADS, 0, *t, from, n, conf, beta, path_conf, count);
    CU_LAUNCHED();
}

/* the position of node v in keep[0..m) (ascending), which holds it: the
 * CPU twin's index_in */
__device__ __forceinline__ int index_in(const int *keep, int m, int v) {
    int lo = 0, hi = m - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (keep[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__global__ void __launch_bounds__(TREE_THREADS)
tree_compact_kernel(DevTree dst, DevTree src, const int *keep, int m) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const int i = keep[j], par = src.parent[i];
    dst.token[j] = src.token[i];
    dst.parent[j] = par < 0 ? -1 : index_in(keep, j, par);
    dst.depth[j] = src.depth[i];
    dst.rank[j] = src.rank[i];
    dst.slot[j] = src.slot[i];
    dst.p[j] = src.p[i];
    dst.P[j] = src.P[i];
    dst.H[j] = src.H[i];
}

void cu_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m) {
    if (m <= 0) return;
    cu_launch(tree_compact_kernel, cu_blocks((size_t)m, TREE_THREADS), TREE_THREADS, 0, *dst, *src, keep, m);
    CU_LAUNCHED();
}

/* row i's node takes slot *at + base + i, before any row's mask reads the
 * slots; the first thread writes out[4m] */
__global__ void __launch_bounds__(TREE_THREADS)
tree_slots_kernel(DevTree t, const int *rows, int m, const int *at, int base, int *out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    base += at ? *at : 0;
    if (i < m) t.slot[rows ? rows[i] : i] = base + i;
    if (i == 0) out[4 * m] = base;
}

/* a block per row: its out[] entries, then its mask row over the window
 * [ones, nctx), all counted from *at */
__global__ void __launch_bounds__(TREE_THREADS)
tree_mask_kernel(DevTree t, const int *rows, int m, const int *at, int ones, int pos0, int nctx, int *out,
                 uint8_t *mask) {
    const int i = blockIdx.x, v = rows ? rows[i] : i, w = nctx - ones, o = at ? *at : 0;
    uint8_t *row = mask + (size_t)i * w;
    ones += o;
    nctx += o;
    if (threadIdx.x == 0) {
        out[i] = t.token[v];
        out[m + i] = o + pos0 + t.depth[v];
        out[2 * m + i] = t.parent[v];
        out[3 * m + i] = v;
    }
    for (int j = threadIdx.x; j < w; j += blockDim.x) row[j] = 0;
    __syncthreads();   /* the ancestors' marks go over the zeros */
    if (threadIdx.x == 0)
        for (int a = v; a >= 0; a = t.parent[a])
            if (t.slot[a] >= ones && t.slot[a] < nctx) row[t.slot[a] - ones] = 1;
}

void cu_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0, int nctx,
                    int *out, uint8_t *mask) {
    if (m <= 0) return;
    cu_launch(tree_slots_kernel, cu_blocks((size_t)m, TREE_THREADS), TREE_THREADS, 0, *t, rows, m, at, base, out);
    CU_LAUNCHED();
    cu_launch(tree_mask_kernel, m, TREE_THREADS, 0, *t, rows, m, at, ones, pos0, nctx, out, mask);
    CU_LAUNCHED();
}

/* walk = {done, len, bonus, path[n], tokens[n]}: the CPU twin's loop */
__global__ void tree_accept_kernel(DevTree t, int n, const int *want, int from_start, int steps,
                                   int *walk) {
    int *path = walk + 3, *tokens = walk + 3 + n;
    if (from_start) {
        walk[0] = 0;
        walk[1] = 1;
        walk[2] = 0;
        path[0] = 0;
        tokens[0] = t.token[0];
    }
    for (int s = 0; s < steps && !walk[0]; s++) {
        const int cur = path[walk[1] - 1], w = want[cur];
        int next = -1;
        for (int c = cur + 1; c < n && next < 0; c++)
            if (t.parent[c] == cur && t.token[c] == w) next = c;
        if (next < 0) {
            walk[0] = 1;
            walk[2] = w;
        } else {
            path[walk[1]] = next;
            tokens[walk[1]++] = t.token[next];
        }
    }
}

void cu_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    cu_launch(tree_accept_kernel, 1, 1, 0, *t, n, want, from_start, steps, walk);
    CU_LAUNCHED();
}
