/* KV cache and masked attention over it.
 *
 * The cache keeps K and V per layer as [slot][kv_dim] float rows in device
 * memory (like the CPU twin).  kv_keep compacts the accepted path: the kept
 * rows of every layer are gathered into a temporary and written back to
 * slots [dst, dst+m) — a gather first, because a kept slot can be another
 * kept row's destination.
 *
 * attention: one kernel for prefill, decode and tree verification.  A block
 * owns QB queries × HB heads of one KV group (HB = gcd(group, 8), QB = 8 /
 * HB: one warp each) and walks the context in tiles of 32 slots staged in
 * shared memory, so the heads of a GQA group and neighbouring queries share
 * every K/V load.  Per warp: lane j scores slot j of the tile, the mask (or
 * causality, mask NULL: query i sees slots [0, nctx-n+i]) hides slots, and an
 * online softmax (running max and sum in F32) accumulates P·V with each lane
 * owning head_dim/32 output dimensions.  When the (query, head) blocks
 * cannot fill the GPU (decode, small trees) the context is split over
 * gridDim.z blocks whose partial (max, sum, unnormalised output) a second
 * kernel combines (flash-decoding).  A query that sees no slot gets zeros,
 * as on the CPU.  head_dim <= 256.
 *
 * Ragged: one launch serves every sequence of a batched forward, each with
 * its own cache, context, queries and mask.  The x blocks are the query
 * blocks of all sequences (a block never spans two), found through a block
 * table; the context splits are sized by the longest sequence, and a short
 * sequence's splits past its context write empty partials.
 *
 * The sequences' table is packed into one host buffer that is the same for
 * every layer of a forward pass (caches and masks by address, the layer an
 * argument): it is uploaded only when it differs from the last one
 * uploaded.  The masks are in device memory already (kernels.h). */
#include "kernels/cuda/common.cuh"
#include <stdlib.h>
#include <string.h>

struct KVCache {
    int layers, slots, kv_dim;
    float *k, *v;   /* device, [layers][slots][kv_dim] */
    int *pos;       /* device, [slots]: each slot's position (kernels.h) */
};

/* pos[s] = s for slots [from, from + n) */
__global__ void kv_pos_plain_kernel(int *__restrict__ pos, int from, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) pos[from + i] = from + i;
}

KVCache *cu_kv_create(int layers, int slots, int kv_dim) {
    if (layers <= 0 || slots <= 0 || kv_dim <= 0) {
        CU_FAIL("kv_create: %d layers x %d slots x %d", layers, slots, kv_dim);
        return NULL;
    }
    if (backend_settings()->kv_dtype != DT_F32) {
        CU_FAIL("kv_create: the CUDA KV cache is F32 (kv_dtype %s)", dtype_name(backend_settings()->kv_dtype));
        return NULL;
    }
    KVCache *c = (KVCache *)calloc(1, sizeof *c);
    if (!c) return NULL;
    c->layers = layers; c->slots = slots; c->kv_dim = kv_dim;
    const size_t bytes = (size_t)layers * slots * kv_dim * sizeof(float);
    if (!CU_OK(cudaMalloc((void **)&c->k, bytes)) || !CU_OK(cudaMalloc((void **)&c->v, bytes)) ||
        !CU_OK(cudaMalloc((void **)&c->pos, sizeof(int) * (size_t)slots)) ||
        !CU_OK(cudaMemset(c->k, 0, bytes)) || !CU_OK(cudaMemset(c->v, 0, bytes))) {
        cudaFree(c->k); cudaFree(c->v); cudaFree(c->pos); free(c);
        return NULL;
    }
    cu_launch(kv_pos_plain_kernel, cu_blocks((size_t)slots, 256), 256, 0, c->pos, 0, slots);
    CU_LAUNCHED_R(NULL);
    return c;
}

void cu_kv_free(KVCache *c) {
    if (!c) return;
    CU_OK(cudaFree(c->k));
    CU_OK(cudaFree(c->v));
    CU_OK(cudaFree(c->pos));
    free(c);
}

int cu_kv_slots(const KVCache *c) { return c->slots; }

static inline float *kv_row(const KVCache *c, float *base, int layer, int slot) {
    return base + ((size_t)layer * c->slots + slot) * c->kv_dim;
}

/* K and V rows in one launch (two copies were two nodes of every layer) */
__global__ void kv_write_kernel(float *__restrict__ K, float *__restrict__ V, const float *__restrict__ k,
                                const float *__restrict__ v, size_t count) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        K[i] = k[i];
        V[i] = v[i];
    }
}

void cu_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n) {
    if (n <= 0) return;
    if (layer < 0 || layer >= c->layers || slot < 0 || slot + n > c->slots) {
        CU_FAIL("kv_write: layer %d slots [%d, %d) outside %d x %d", layer, slot, slot + n, c->layers, c->slots);
        return;
    }
    const size_t count = (size_t)n * c->kv_dim;
    cu_launch(kv_write_kernel, cu_blocks(count, 256), 256, 0, kv_row(c, c->k, layer, slot),
              kv_row(c, c->v, layer, slot), k, v, count);
    CU_LAUNCHED();
    cu_launch(kv_pos_plain_kernel, cu_blocks((size_t)n, 256), 256, 0, c->pos, slot, n);
    CU_LAUNCHED();
}

/* One thread per (token, head, i < half) pair of rotated values, over the
 * heads of q and then those of k, with rope_kernel's arithmetic; a thread of
 * a k head also stores its two rotated values and the same two of v in the
 * cache rows *slot + t of the layer's K and V (slots rows; slot in device
 * memory: the cache writes of a slot range outside it are dropped, the
 * callers check it on the host). */
__global__ void rope_kv_kernel(float *__restrict__ q, float *__restrict__ k, const float *__restrict__ v,
                               const int *__restrict__ pos, const float *__restrict__ inv_freq, int n, int heads,
                               int kv_heads, int head_dim, float *__restrict__ Kl, float *__restrict__ Vl,
                               const int *__restrict__ slot, int slots, int *__restrict__ slot_pos) {
    const int half = head_dim / 2, all = heads + kv_heads, first = *slot;
    const bool store = first >= 0 && first + n <= slots;
    float *K = Kl + (size_t)(store ? first : 0) * kv_heads * head_dim;
    float *V = Vl + (size_t)(store ? first : 0) * kv_heads * head_dim;
    const size_t total = (size_t)n * all * half;
    for (size_t id = blockIdx.x * (size_t)blockDim.x + threadIdx.x; id < total; id += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(id % half);
        const size_t th = id / half;   /* token * all + head */
        const int t = (int)(th / all), h = (int)(th % all);
        const float ang = __fmul_rn((float)pos[t], inv_freq[i]);
        float s, c;
        sincosf(ang, &s, &c);
        const size_t row = h < heads ? ((size_t)t * heads + h) * head_dim
                                     : ((size_t)t * kv_heads + (h - heads)) * head_dim;
        float *x = (h < heads ? q : k) + row;
        const float a = x[i], b = x[i + half];
        const float ra = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)), rb = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
        x[i] = ra;
        x[i + half] = rb;
        if (h < heads || !store) continue;
        if (h == heads && i == 0) slot_pos[first + t] = pos[t];
        K[row + i] = ra;
        K[row + i + half] = rb;
        V[row + i] = v[row + i];
        V[row + i + half] = v[row + i + half];
    }
}

void cu_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int head_dim,
                const float *inv_freq, KVCache *c, int layer, const int *slot) {
    if (n <= 0) return;
    if (head_dim < 2 || head_dim % 2 || kv_heads * head_dim != c->kv_dim) {
        CU_FAIL("rope_kv: %d heads of %d do not fill the cache's rows of %d", kv_heads, head_dim, c->kv_dim);
        return;
    }
    if (layer < 0 || layer >= c->layers || n > c->slots) {
        CU_FAIL("rope_kv: layer %d, %d tokens outside %d x %d", layer, n, c->layers, c->slots);
        return;
    }
    const int half = head_dim / 2;
    const float *dinv = (const float *)cu_upload(inv_freq, sizeof(float) * half, 1);
    if (!dinv) return;
    const size_t total = (size_t)n * (heads + kv_heads) * half;
    cu_launch(rope_kv_kernel, cu_blocks(total, 256), 256, 0, q, k, v, pos, dinv, n, heads, kv_heads, head_dim,
              kv_row(c, c->k, layer, 0), kv_row(c, c->v, layer, 0), slot, c->slots, c->pos);   /* pos, slot: device */
    CU_LAUNCHED();
}

/* tmp[2][layers][m][kv_dim] = K/V rows keep[i] of every layer */
__global__ void kv_gather_kernel(float *__restrict__ tmp, const float *__restrict__ K, const float *__restrict__ V,
                                 const int *__restrict__ keep, int dst, int m, int slots, int kv_dim) {
    const int i = blockIdx.x, l = blockIdx.y, layers = gridDim.y;
    const int from = dst + keep[i] < slots ? dst + keep[i] : dst + i;   /* outside the cache: the row stays */
    const float *ks = K + ((size_t)l * slots + from) * kv_dim;
    const float *vs = V + ((size_t)l * slots + from) * kv_dim;
    float *kt = tmp + ((size_t)l * m + i) * kv_dim;
    float *vt = tmp + ((size_t)(layers + l) * m + i) * kv_dim;
    for (int e = threadIdx.x; e < kv_dim; e += blockDim.x) { kt[e] = ks[e]; vt[e] = vs[e]; }
}

/* slot dst + i takes the position of slot dst + keep[i], in order (keep
 * ascending, keep[i] >= i: no position is read after it is overwritten) */
__global__ void kv_pos_keep_kernel(int *__restrict__ pos, const int *__restrict__ keep, int dst, int m, int slots) {
    for (int i = 0; i < m; i++)
        if (dst + keep[i] < slots) pos[dst + i] = pos[dst + keep[i]];
}

/* keep: device (kernels.h); the host cannot see whether anything moves, so
 * the rows are gathered and written back whatever keep holds (the callers
 * pass no list where the path is the tree's first m nodes). */
void cu_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    if (m <= 0) return;
    if (dst < 0 || dst + m > c->slots) {
        CU_FAIL("kv_keep: slots [%d, %d) outside the cache's %d", dst, dst + m, c->slots);
        return;
    }
    const size_t per = (size_t)c->layers * m * c->kv_dim;
    float *tmp = (float *)cu_workspace(WS_KV, 2 * per * sizeof(float));
    if (!tmp) return;
    dim3 grid(m, c->layers);
    cu_launch(kv_gather_kernel, grid, 128, 0, tmp, c->k, c->v, keep, dst, m, c->slots, c->kv_dim);
    CU_LAUNCHED();
    cu_launch(kv_pos_keep_kernel, 1, 1, 0, c->pos, keep, dst, m, c->slots);
    CU_LAUNCHED();
    const size_t width = (size_t)m * c->kv_dim * sizeof(float), dpitch = (size_t)c->slots * c->kv_dim * sizeof(float);
    if (cu_copy2d_async(kv_row(c, c->k, 0, dst), dpitch, tmp, width, width, c->layers))
        cu_copy2d_async(kv_row(c, c->v, 0, dst), dpitch, tmp + per, width, width, c->layers);
}

/* ---- attention ------------------------------------------------------------------- */
#define ATT_WARPS 8
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_TILE 32
#define ATT_MAX_HD 256
#define ATT_PER_LANE (ATT_MAX_HD / 32)

/* One sequence of a ragged launch: its cache (layer 0; a layer is
 * layer_stride floats further), its queries [q0, q0 + n) of the batch, the
 * slots before them (*past, device) and the bound ctx_max on its context
 * *past + n, and its mask (device; NULL: causal) over the window of its
 * last mask_w slots (AttnSeq).  Nothing here changes with the context's
 * length. */
struct AttSeqDev {
    const float *K, *V;
    const uint8_t *mask;
    const int *past;
    const int *slot_pos, *qpos;   /* the cache's positions, the queries' (AttnSeq.window) */
    long long layer_stride;
    int q0, n, ctx_max, mask_w, window;
};

/* x block b: queries [qstart, qstart + qb) of sequence seq */
struct AttBlock {
    int seq, qstart;
};

struct AttArgs {
    float *out;
    const float *q;
    const AttSeqDev *seqs;
    const AttBlock *blocks;
    int layer, nheads, hd, kv_dim, group, hb, qb, tiles_per_split, splits;
    float scale;
    float *part_o, *part_ml;  /* splits > 1: [queries][nheads][splits][hd], [..][2] */
};

__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(AttArgs a) {
    extern __shared__ float sm[];
    const int pitch = a.hd + 1;   /* odd pitch: lanes reading different rows hit different banks */
    float *Ks = sm, *Vs = Ks + ATT_TILE * pitch, *Qs = Vs + ATT_TILE * pitch;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int ql = warp / a.hb, hl = warp % a.hb;
    const AttBlock blk = a.blocks[blockIdx.x];
    const AttSeqDev sq = a.seqs[blk.seq];
    const int n = sq.n, nctx = min(*sq.past + n, sq.ctx_max);
    const uint8_t *mask = sq.mask;
    const int i = blk.qstart + ql;                 /* the query within its sequence */
    const size_t qi = (size_t)sq.q0 + i;            /* and within the batch */
    const int h = blockIdx.y * a.hb + hl;
    const int g = (blockIdx.y * a.hb) / a.group;   /* one KV head per block */
    const bool active = i < n;
    const int qdim = a.nheads * a.hd;
    float *qs = Qs + warp * a.hd;
    if (active)
        for (int e = lane; e < a.hd; e += 32) qs[e] = a.q[qi * qdim + (size_t)h * a.hd + e];

    /* slots any query of this block may see */
    int last = nctx - 1;
    if (!mask) {
        int ilast = min(blk.qstart + a.qb, n) - 1;
        last = nctx - n + ilast;
    }
    const int ntiles = last >= 0 ? last / ATT_TILE + 1 : 0;
    const int t0 = blockIdx.z * a.tiles_per_split, t1 = min(ntiles, t0 + a.tiles_per_split);

    float m = -INFINITY, l = 0.0f, o[ATT_PER_LANE];
#pragma unroll
    for (int u = 0; u < ATT_PER_LANE; u++) o[u] = 0.0f;
    const float *Kg = sq.K + (size_t)a.layer * sq.layer_stride + (size_t)g * a.hd;
    const float *Vg = sq.V + (size_t)a.layer * sq.layer_stride + (size_t)g * a.hd;

    for (int t = t0; t < t1; t++) {
        const int j0 = t * ATT_TILE;
        __syncthreads();   /* the previous tile (and qs) are ready / consumed */
        for (int idx = threadIdx.x; idx < ATT_TILE * a.hd; idx += blockDim.x) {
            const int r = idx / a.hd, e = idx - r * a.hd, j = j0 + r;
            const bool in = j < nctx;
            Ks[r * pitch + e] = in ? Kg[(size_t)j * a.kv_dim + e] : 0.0f;
            Vs[r * pitch + e] = in ? Vg[(size_t)j * a.kv_dim + e] : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        const int j = j0 + lane;
        const int w0 = nctx - sq.mask_w;   /* the mask's window: slots [w0, nctx) */
        const bool vis = j < nctx && (mask ? j < w0 || mask[(size_t)i * sq.mask_w + (j - w0)] != 0 : j <= nctx - n + i) &&
                         (!sq.window || sq.qpos[i] - sq.slot_pos[j] < sq.window);
        float s = -INFINITY;
        if (vis) {
            float d = 0.0f;
            const float *kr = Ks + lane * pitch;
            for (int e = 0; e < a.hd; e++) d += qs[e] * kr[e];
            s = d * a.scale;
        }
        float tmax = s;
        for (int k = 16; k > 0; k >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, k));
        const float mnew = fmaxf(m, tmax);
        if (mnew == -INFINITY) continue;   /* nothing visible yet (warp-uniform) */
        const float alpha = expf(m - mnew);   /* 0 while m is -inf */
        const float p = vis ? expf(s - mnew) : 0.0f;
        float psum = p;
        for (int k = 16; k > 0; k >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, k);
        l = l * alpha + psum;
#pragma unroll
        for (int u = 0; u < ATT_PER_LANE; u++) o[u] *= alpha;
        for (int jj = 0; jj < ATT_TILE; jj++) {
            const float pj = __shfl_sync(0xffffffffu, p, jj);
            if (pj == 0.0f) continue;   /* warp-uniform */
            const float *vr = Vs + jj * pitch;
#pragma unroll
            for (int u = 0; u < ATT_PER_LANE; u++) {
                const int e = lane + 32 * u;
                if (e < a.hd) o[u] += pj * vr[e];
            }
        }
        m = mnew;
    }
    if (!active) return;
    if (a.splits == 1) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *dst = a.out + qi * qdim + (size_t)h * a.hd;
#pragma unroll
        for (int u = 0; u < ATT_PER_LANE; u++) {
            const int e = lane + 32 * u;
            if (e < a.hd) dst[e] = o[u] * inv;
        }
    } else {
        const size_t part = (qi * a.nheads + h) * a.splits + blockIdx.z;
        float *dst = a.part_o + part * a.hd;
#pragma unroll
        for (int u = 0; u < ATT_PER_LANE; u++) {
            const int e = lane + 32 * u;
            if (e < a.hd) dst[e] = o[u];
        }
        if (lane == 0) { a.part_ml[2 * part] = m; a.part_ml[2 * part + 1] = l; }
    }
}

/* one block per (query, head), x as the attention kernel's query blocks
 * times qb and y the head: merge the splits' partial softmaxes */
__global__ void attention_combine_kernel(AttArgs a) {
    const AttBlock blk = a.blocks[blockIdx.x / a.qb];
    const AttSeqDev sq = a.seqs[blk.seq];
    const int i = blk.qstart + (int)(blockIdx.x % a.qb);
    if (i >= sq.n) return;
    const size_t qh = ((size_t)sq.q0 + i) * a.nheads + blockIdx.y;
    const int splits = a.splits, hd = a.hd;
    const float *ml = a.part_ml + qh * splits * 2;
    float M = -INFINITY;
    for (int s = 0; s < splits; s++) M = fmaxf(M, ml[2 * s]);
    float L = 0.0f;
    if (M != -INFINITY)
        for (int s = 0; s < splits; s++) L += ml[2 * s + 1] * expf(ml[2 * s] - M);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        float acc = 0.0f;
        if (M != -INFINITY)
            for (int s = 0; s < splits; s++) {
                const float w = expf(ml[2 * s] - M);
                if (w != 0.0f) acc += w * a.part_o[(qh * splits + s) * hd + e];
            }
        a.out[qh * hd + e] = acc * inv;
    }
}

static int gcd(int a, int b) { while (b) { int t = a % b; a = b; b = t; } return a; }

/* Every sequence's queries over its own cache in one launch (see the top of
 * this file).  Sequences of no queries are skipped; out and q hold the
 * batch's queries at each sequence's off. */
void cu_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                  int head_dim) {
    if (head_dim > ATT_MAX_HD || head_dim <= 0 || nkv <= 0 || nheads % nkv) {
        CU_FAIL("attention: unsupported heads %d/%d, head_dim %d <= %d", nheads, nkv, head_dim, ATT_MAX_HD);
        return;
    }
    const int group = nheads / nkv, hb = gcd(group, ATT_WARPS), qb = ATT_WARPS / hb;
    /* the packed buffer: the sequences, then the block table */
    int live = 0, qblocks = 0, total_q = 0, max_tiles = 0, kv_dim = 0;
    for (int i = 0; i < n_seq; i++) {
        const AttnSeq *a = &seqs[i];
        if (a->n <= 0) continue;
        const KVCache *c = a->kv;
        if (!kv_dim) kv_dim = c->kv_dim;
        if (nkv * head_dim > c->kv_dim || c->kv_dim != kv_dim || a->ctx_max > c->slots || a->ctx_max < a->n ||
            layer < 0 || layer >= c->layers || (a->mask && (a->mask_w < a->n || a->mask_w > a->ctx_max))) {
            CU_FAIL("attention: unsupported shape (sequence %d: n %d, context at most %d of %d slots, mask window %d, "
                    "kv_dim %d, layer %d)", i, a->n, a->ctx_max, c->slots, a->mask ? a->mask_w : 0, c->kv_dim, layer);
            return;
        }
        live++;
        qblocks += (a->n + qb - 1) / qb;
        if (a->off + a->n > total_q) total_q = a->off + a->n;
        const int tiles = (a->ctx_max + ATT_TILE - 1) / ATT_TILE;
        if (tiles > max_tiles) max_tiles = tiles;
    }
    if (!live) return;
    const size_t seq_bytes = sizeof(AttSeqDev) * live, blk_bytes = sizeof(AttBlock) * qblocks;
    const size_t blk_at = (seq_bytes + 15) & ~(size_t)15, bytes = blk_at + blk_bytes;
    char *host = (char *)malloc(bytes ? bytes : 1);
    if (!host) { CU_FAIL("attention: no host memory for %zu bytes of sequence tables", bytes); return; }
    memset(host, 0, bytes);
    AttSeqDev *sd = (AttSeqDev *)host;
    AttBlock *bd = (AttBlock *)(host + blk_at);
    for (int i = 0, s = 0, b = 0; i < n_seq; i++) {
        const AttnSeq *a = &seqs[i];
        if (a->n <= 0) continue;
        const KVCache *c = a->kv;
        sd[s].K = c->k;
        sd[s].V = c->v;
        sd[s].layer_stride = (long long)c->slots * c->kv_dim;
        sd[s].q0 = a->off;
        sd[s].n = a->n;
        sd[s].ctx_max = a->ctx_max;
        sd[s].past = a->past;
        sd[s].mask = a->mask;
        sd[s].mask_w = a->mask_w;
        sd[s].window = a->window;
        sd[s].qpos = a->qpos;
        sd[s].slot_pos = c->pos;
        for (int q0 = 0; q0 < a->n; q0 += qb) bd[b++] = AttBlock{s, q0};
        s++;
    }
    /* cu_upload skips bytes its slot already holds: layers 2..L of the same
     * forward compare instead of copying */
    const char *dev = (const char *)cu_upload(host, bytes, 3);
    free(host);
    if (!dev) return;
    AttArgs a;
    memset(&a, 0, sizeof a);
    a.out = out; a.q = q;
    a.seqs = (const AttSeqDev *)dev;
    a.blocks = (const AttBlock *)(dev + blk_at);
    a.layer = layer; a.nheads = nheads; a.hd = head_dim; a.kv_dim = kv_dim;
    a.group = group; a.hb = hb; a.qb = qb;
    a.scale = 1.0f / sqrtf((float)head_dim);

    const int hblocks = nheads / hb;
    /* split the context until there are about two blocks per SM, down to
     * one tile per split: a decode step has only nkv blocks of work per
     * sequence, and a block walks its tiles one after another (with 4 tiles
     * per split, the H100 took 23 us over 140 slots) */
    const long base = (long)qblocks * hblocks, want = 2L * cu_sm_count();
    int splits = 1;
    if (base < want) {
        long s = (want + base - 1) / base, maxs = max_tiles;
        splits = (int)(s < maxs ? s : maxs);
        if (splits < 1) splits = 1;
    }
    a.tiles_per_split = (max_tiles + splits - 1) / splits;
    splits = (max_tiles + a.tiles_per_split - 1) / a.tiles_per_split;
    if (splits < 1) splits = 1;
    a.splits = splits;
    if (splits > 1) {
        const size_t parts = (size_t)total_q * nheads * splits;
        float *ws = (float *)cu_workspace(WS_ATTN, parts * (head_dim + 2) * sizeof(float));
        if (!ws) return;
        a.part_o = ws;
        a.part_ml = ws + parts * head_dim;
    }
    const size_t smem = (size_t)(2 * ATT_TILE * (head_dim + 1) + ATT_WARPS * head_dim) * sizeof(float);
    if (smem > 48 * 1024) {
        static size_t opted;
        if (smem > opted) {
            CU_CHECK(cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            opted = smem;
        }
    }
    dim3 grid(qblocks, hblocks, splits);
    cu_launch(attention_kernel, grid, ATT_THREADS, smem, a);
    CU_LAUNCHED();
    if (splits > 1) {
        const unsigned threads = head_dim < 128 ? 32 : 128;
        cu_launch(attention_combine_kernel, dim3(qblocks * qb, nheads), threads, 0, a);
        CU_LAUNCHED();
    }
}
