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
 *    keep, and one per padding node.  dst and src must not overlap (no
 *    compaction in place).
 *  - inputs: a kernel records every row's slot, then a block per row writes
 *    its mask row and walks its ancestors (reading the slots just recorded).
 *  - accept: one thread, the CPU loop as it is (a few steps over a small
 *    tree).
 *
 * Each kernel serves a batch of ops of its kind (tree_batch): op
 * blockIdx.y's arguments, read in place from the launch's parameters
 * (__grid_constant__), up to TREE_CHUNK ops a launch; a single op is a
 * batch of one. */
#include "kernels/cuda/common.cuh"
#include <cub/block/block_scan.cuh>
#include <string.h>

#define TREE_THREADS 256
#define TOP_THREADS 512
/* ops a launch: their arguments fit a launch's 32 KB of parameters */
#define TREE_CHUNK 48

template <int N> struct TreeOps {
    TreeOp op[N];
};
static_assert(sizeof(TreeOps<TREE_CHUNK>) <= 32000, "a chunk of tree ops exceeds a launch's parameters");

template <int N> __global__ void tree_root_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    t.token[0] = *a.root;
    t.parent[0] = -1;
    t.depth[0] = t.rank[0] = 0;
    t.slot[0] = -1;
    t.p[0] = t.P[0] = 1.0f;
    t.H[0] = 0.0f;
}

template <int N> __global__ void __launch_bounds__(TREE_THREADS) tree_grow_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    const int c = blockIdx.x * blockDim.x + threadIdx.x, k = a.k;
    if (c >= a.count) return;
    const int r = a.picks ? a.picks[2 * c] : c / k, j = a.picks ? a.picks[2 * c + 1] : c % k;
    const int v = a.n0 + c, par = a.rows[r], id = a.ids[r * k + j];
    const float p = a.probs[r * k + j];
    t.token[v] = id < 0 ? -1 : a.map ? a.map[id] : id;
    t.parent[v] = par;
    t.depth[v] = t.depth[par] + 1;
    t.rank[v] = j;
    t.slot[v] = -1;
    t.p[v] = p;
    t.P[v] = __fmul_rn(t.P[par], p);
    t.H[v] = a.ent ? a.ent[r] : 0.0f;
}

/* the order of by_score in kernels/cpu/tree.c: a before b when its score
 * is higher, then when it is shallower, then when its index is lower */
__device__ __forceinline__ bool top_before(float pa, int da, int a, float pb, int db, int b) {
    if (pa != pb) return pa > pb;
    if (da != db) return da < db;
    return a < b;
}

template <int N> __global__ void __launch_bounds__(TOP_THREADS) tree_top_kernel(const __grid_constant__ TreeOps<N> b) {
    typedef cub::BlockScan<int, TOP_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan;
    __shared__ float tile_p[TOP_THREADS];
    __shared__ int tile_d[TOP_THREADS];
    const TreeOp &a = b.op[blockIdx.y];
    const float *P = a.score ? a.score : a.t.P;
    const int *depth = a.t.depth, from = a.from, n = a.n, m = a.m;
    int *sel = a.sel;
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

/* node_net.h's arithmetic for one node, step by step as node_net.c's
 * vector lanes compute it: _rn intrinsics (nvcc would otherwise fuse a
 * product and a sum), log and exp in double. */
/* unit j after its ReLU (+0 unless z > 0) */
__device__ __forceinline__ float node_unit(const NodeNet *net, int j, const float *x) {
    float z = net->fc1_b[j];
    for (int k = 0; k < net->n_feat; k++) z = __fadd_rn(z, __fmul_rn(net->fc1_w[j * net->n_feat + k], x[k]));
    return z > 0.0f ? z : 0.0f;
}

template <int N>
__global__ void __launch_bounds__(TREE_THREADS) tree_classify_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    const NodeNet &net = a.net;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.n) return;
    const int v = a.from + i, par = t.parent[v];
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
    a.conf[v] = (float)(1.0 / (1.0 + exp(-(double)logit)));
}

/* One block: per chunk of nodes, every thread reads its node, a block scan
 * of the passing ones gives their places, then they are written (after the
 * reads: a node moves down to a place at or below its own); then the rest
 * of the layer is marked dead.  A parent lies below from: never written. */
template <int N> __global__ void __launch_bounds__(TOP_THREADS) tree_pass_kernel(const __grid_constant__ TreeOps<N> b) {
    typedef cub::BlockScan<int, TOP_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan;
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    const int from = a.from, n = a.n;
    const float beta = a.beta;
    float *conf = a.conf, *path_conf = a.path_conf;
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
    if (threadIdx.x == 0) *a.count_out = written;
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

template <int N>
__global__ void __launch_bounds__(TREE_THREADS) tree_compact_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &dst = a.t, &src = a.src;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= a.m) {   /* padding */
        if (j >= a.pad) return;
        dst.token[j] = -1;
        dst.parent[j] = 0;
        dst.depth[j] = 1;
        dst.rank[j] = 0;
        dst.slot[j] = -1;
        dst.p[j] = dst.P[j] = dst.H[j] = 0.0f;
        return;
    }
    const int i = a.keep[j], par = src.parent[i];
    dst.token[j] = src.token[i];
    dst.parent[j] = par < 0 ? -1 : index_in(a.keep, j, par);
    dst.depth[j] = src.depth[i];
    dst.rank[j] = src.rank[i];
    dst.slot[j] = src.slot[i];
    dst.p[j] = src.p[i];
    dst.P[j] = src.P[i];
    dst.H[j] = src.H[i];
}

/* row i's node takes slot *at + base + i, before any row's mask reads the
 * slots; the first thread writes out[4m] */
template <int N> __global__ void __launch_bounds__(TREE_THREADS) tree_slots_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const int i = blockIdx.x * blockDim.x + threadIdx.x, m = a.m;
    const int base = a.base + (a.at ? *a.at : 0);
    if (i < m) a.t.slot[a.rows ? a.rows[i] : i] = base + i;
    if (i == 0) a.out[4 * m] = base;
}

/* a block per row: its out[] entries, then its mask row over the window
 * [ones, nctx), all counted from *at */
template <int N> __global__ void __launch_bounds__(TREE_THREADS) tree_mask_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    const int i = blockIdx.x, m = a.m;
    if (i >= m) return;   /* the whole block: before any barrier */
    const int v = a.rows ? a.rows[i] : i, w = a.nctx - a.ones, o = a.at ? *a.at : 0;
    const int ones = a.ones + o, nctx = a.nctx + o;
    uint8_t *row = a.mask + (size_t)i * w;
    int *out = a.out;
    if (threadIdx.x == 0) {
        out[i] = t.token[v];
        out[m + i] = o + a.pos0 + t.depth[v];
        out[2 * m + i] = t.parent[v];
        out[3 * m + i] = v;
    }
    for (int j = threadIdx.x; j < w; j += blockDim.x) row[j] = 0;
    __syncthreads();   /* the ancestors' marks go over the zeros */
    if (threadIdx.x == 0)
        for (int x = v; x >= 0; x = t.parent[x])
            if (t.slot[x] >= ones && t.slot[x] < nctx) row[t.slot[x] - ones] = 1;
}

/* walk = {done, len, bonus, path[n], tokens[n]}: the CPU twin's loop */
template <int N> __global__ void tree_accept_kernel(const __grid_constant__ TreeOps<N> b) {
    const TreeOp &a = b.op[blockIdx.y];
    const DevTree &t = a.t;
    const int n = a.n, *want = a.want;
    int *walk = a.walk, *path = walk + 3, *tokens = walk + 3 + n;
    if (a.from_start) {
        walk[0] = 0;
        walk[1] = 1;
        walk[2] = 0;
        path[0] = 0;
        tokens[0] = t.token[0];
    }
    for (int s = 0; s < a.steps && !walk[0]; s++) {
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

/* per-node ops: blocks of threads over the largest range of the chunk */
static unsigned most_blocks(const TreeOp *ops, int n, int TreeOp::*count, unsigned threads) {
    int most = 0;
    for (int i = 0; i < n; i++) most = max(most, ops[i].*count);
    return cu_blocks((size_t)most, threads);
}

/* ops[0..n), n <= N, all of one kind and each with work to do: the
 * kernel of their kind over a grid of n ops */
template <int N> static void tree_launch(const TreeOp *ops, int n) {
    TreeOps<N> b;
    memset(&b, 0, sizeof b);   /* a signed launch reads every byte */
    memcpy(b.op, ops, sizeof(TreeOp) * n);
    const unsigned y = (unsigned)n;
    switch (ops[0].kind) {
    case TREE_OP_ROOT: cu_launch(tree_root_kernel<N>, dim3(1, y), 1, 0, b); break;
    case TREE_OP_GROW:
        cu_launch(tree_grow_kernel<N>, dim3(most_blocks(ops, n, &TreeOp::count, TREE_THREADS), y), TREE_THREADS, 0, b);
        break;
    case TREE_OP_TOP: cu_launch(tree_top_kernel<N>, dim3(1, y), TOP_THREADS, 0, b); break;
    case TREE_OP_CLASSIFY:
        cu_launch(tree_classify_kernel<N>, dim3(most_blocks(ops, n, &TreeOp::n, TREE_THREADS), y), TREE_THREADS, 0, b);
        break;
    case TREE_OP_PASS: cu_launch(tree_pass_kernel<N>, dim3(1, y), TOP_THREADS, 0, b); break;
    case TREE_OP_COMPACT: {   /* kept nodes and padding */
        const unsigned x = max(most_blocks(ops, n, &TreeOp::m, TREE_THREADS), most_blocks(ops, n, &TreeOp::pad, TREE_THREADS));
        cu_launch(tree_compact_kernel<N>, dim3(x, y), TREE_THREADS, 0, b);
        break;
    }
    case TREE_OP_INPUTS:
        cu_launch(tree_slots_kernel<N>, dim3(most_blocks(ops, n, &TreeOp::m, TREE_THREADS), y), TREE_THREADS, 0, b);
        CU_LAUNCHED();
        cu_launch(tree_mask_kernel<N>, dim3(most_blocks(ops, n, &TreeOp::m, 1), y), TREE_THREADS, 0, b);
        break;
    case TREE_OP_ACCEPT: cu_launch(tree_accept_kernel<N>, dim3(1, y), 1, 0, b); break;
    default: CU_FAIL("tree op kind %d has no tree kernel", (int)ops[0].kind); return;
    }
    CU_LAUNCHED();
}

/* whether op o has work: the single ops' early returns */
static bool tree_op_works(const TreeOp *o) {
    switch (o->kind) {
    case TREE_OP_GROW: return o->count > 0;
    case TREE_OP_TOP: return o->n > 0 && o->m > 0;
    case TREE_OP_CLASSIFY: return o->n > 0;
    case TREE_OP_COMPACT: return o->m > 0 || o->pad > 0;
    case TREE_OP_INPUTS: return o->m > 0;
    case TREE_OP_ARGMAX:
    case TREE_OP_SAMPLE: return o->n > 0 && o->vocab > 0 && o->out_ids;
    default: return true;
    }
}

void cu_tree_batch(const TreeOp *ops, int n) {
    TreeOp *work = (TreeOp *)malloc(sizeof(TreeOp) * (n > 0 ? n : 1));
    if (!work) { CU_FAIL("out of host memory for %d tree ops", n); return; }
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && ops[i].kind != ops[0].kind) {
            CU_FAIL("a tree batch mixes op kinds %d and %d", (int)ops[0].kind, (int)ops[i].kind);
            free(work);
            return;
        }
        if (tree_op_works(&ops[i])) work[w++] = ops[i];
    }
    for (int i = 0; i < w; i += TREE_CHUNK) {
        const int c = min(TREE_CHUNK, w - i);
        if (work[0].kind == TREE_OP_ARGMAX) cu_argmax_batch(work + i, c);
        else if (work[0].kind == TREE_OP_SAMPLE)   /* a launch each: sampled batches are rare */
            for (int j = i; j < i + c; j++)
                cu_sample_dev(work[j].logits, work[j].n, work[j].vocab, &work[j].sp, work[j].key, work[j].n0, work[j].out_ids);
        else if (c == 1) tree_launch<1>(work + i, 1);
        else tree_launch<TREE_CHUNK>(work + i, c);
    }
    free(work);
}

/* The single ops: a batch of one. */
static void tree_one(const TreeOp &o) {
    if (tree_op_works(&o)) tree_launch<1>(&o, 1);
}

void cu_tree_root(const DevTree *t, const int *root) {
    TreeOp o = {};
    o.kind = TREE_OP_ROOT; o.t = *t; o.root = root;
    tree_one(o);
}

void cu_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                  int k, const int *picks, int count, const int *map) {
    TreeOp o = {};
    o.kind = TREE_OP_GROW; o.t = *t; o.n0 = n0; o.rows = rows; o.ids = ids; o.probs = probs; o.ent = ent; o.k = k;
    o.picks = picks; o.count = count; o.map = map;
    tree_one(o);
}

void cu_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    TreeOp o = {};
    o.kind = TREE_OP_TOP; o.t = *t; o.score = score; o.from = from; o.n = n; o.m = m; o.sel = sel;
    tree_one(o);
}

void cu_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    TreeOp o = {};
    o.kind = TREE_OP_CLASSIFY; o.t = *t; o.from = from; o.n = n; o.net = *net; o.conf = conf;
    tree_one(o);
}

void cu_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    TreeOp o = {};
    o.kind = TREE_OP_PASS; o.t = *t; o.from = from; o.n = n; o.conf = conf; o.beta = beta; o.path_conf = path_conf;
    o.count_out = count;
    tree_one(o);
}

void cu_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    TreeOp o = {};
    o.kind = TREE_OP_COMPACT; o.t = *dst; o.src = *src; o.keep = keep; o.m = m; o.pad = pad;
    tree_one(o);
}

void cu_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0, int nctx,
                    int *out, uint8_t *mask) {
    TreeOp o = {};
    o.kind = TREE_OP_INPUTS; o.t = *t; o.rows = rows; o.m = m; o.at = at; o.base = base; o.ones = ones;
    o.pos0 = pos0; o.nctx = nctx; o.out = out; o.mask = mask;
    tree_one(o);
}

void cu_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    TreeOp o = {};
    o.kind = TREE_OP_ACCEPT; o.t = *t; o.n = n; o.want = want; o.from_start = from_start; o.steps = steps;
    o.walk = walk;
    tree_one(o);
}
