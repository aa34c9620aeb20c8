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
    tree_root_kernel<<<1, 1, 0, cu_stream()>>>(*t, root);
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
    t.token[v] = map ? map[id] : id;
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
    tree_grow_kernel<<<cu_blocks((size_t)count, TREE_THREADS), TREE_THREADS, 0, cu_stream()>>>(
        *t, n0, rows, ids, probs, ent, k, picks, count, map);
    CU_LAUNCHED();
}

/* EAGLE-2's order, as by_P in kernels/cpu/tree.c: a before b when its P is
 * higher, then when it is shallower, then when its index is lower */
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

void cu_tree_top(const DevTree *t, int from, int n, int m, int *sel) {
    if (n <= 0 || m <= 0) return;
    tree_top_kernel<<<1, TOP_THREADS, 0, cu_stream()>>>(t->P, t->depth, from, n, m, sel);
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
    tree_compact_kernel<<<cu_blocks((size_t)m, TREE_THREADS), TREE_THREADS, 0, cu_stream()>>>(*dst, *src, keep, m);
    CU_LAUNCHED();
}

/* row i's node takes slot base+i, before any row's mask reads the slots */
__global__ void __launch_bounds__(TREE_THREADS)
tree_slots_kernel(DevTree t, const int *rows, int m, int base) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) t.slot[rows ? rows[i] : i] = base + i;
}

/* a block per row: its out[] entries, then its mask row */
__global__ void __launch_bounds__(TREE_THREADS)
tree_mask_kernel(DevTree t, const int *rows, int m, int ones, int pos0, int nctx, int *out,
                 uint8_t *mask) {
    const int i = blockIdx.x, v = rows ? rows[i] : i;
    uint8_t *row = mask + (size_t)i * nctx;
    if (threadIdx.x == 0) {
        out[i] = t.token[v];
        out[m + i] = pos0 + t.depth[v];
        out[2 * m + i] = t.parent[v];
        out[3 * m + i] = v;
    }
    for (int j = threadIdx.x; j < nctx; j += blockDim.x) row[j] = j < ones;
    __syncthreads();   /* the ancestors' marks go over the zeros */
    if (threadIdx.x == 0)
        for (int a = v; a >= 0; a = t.parent[a])
            if (t.slot[a] >= 0) row[t.slot[a]] = 1;
}

void cu_tree_inputs(const DevTree *t, const int *rows, int m, int base, int ones, int pos0, int nctx, int *out,
                    uint8_t *mask) {
    if (m <= 0) return;
    tree_slots_kernel<<<cu_blocks((size_t)m, TREE_THREADS), TREE_THREADS, 0, cu_stream()>>>(*t, rows, m, base);
    CU_LAUNCHED();
    tree_mask_kernel<<<m, TREE_THREADS, 0, cu_stream()>>>(*t, rows, m, ones, pos0, nctx, out, mask);
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
    tree_accept_kernel<<<1, 1, 0, cu_stream()>>>(*t, n, want, from_start, steps, walk);
    CU_LAUNCHED();
}
