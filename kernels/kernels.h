/* kernels/: compute behind one interface (this file); CPU in cpu/, CUDA in
 * cuda/ (each op with a CPU twin), basics in base/. */
/* The compute interface the runtime stands on.
 *
 * One Backend struct of function pointers per implementation (kernels/cpu/
 * now, kernels/cuda/).  Rules that keep the interface device-neutral:
 *  - activations ("float *" arguments called x, out, q, logits, ...) live in
 *    backend memory from be->alloc; the caller never dereferences them, it
 *    moves data with to_host / to_device;
 *  - a forward's own control arrays and counts, the token ids of embed, the
 *    positions of rope / rope_kv, rope_kv's first KV slot, attention's
 *    context lengths and masks and the row lists of copy_rows, are backend
 *    memory too (one upload per forward, llama.h's ForwardCtl; the device
 *    cycle makes them in place), so that a forward needs nothing from the
 *    host and its ops' arguments do not change with the context's length
 *    (what replaying a captured forward needs);
 *  - kv_keep's list (the accepted path: the device walk leaves it there) is
 *    backend memory too; the top-k outputs of the host-facing ops are host
 *    arrays;
 *  - weights are Weight handles made by be->weight(); their data is only
 *    touched inside kernels/;
 *  - the KV cache is an opaque backend object.
 * Every op has a CPU twin; tests/ checks each op against a naive reference. */
#ifndef C2T_KERNELS_H
#define C2T_KERNELS_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/base/dtype.h"
#include "kernels/base/node_net.h"


/* A weight matrix [rows][cols] (a vector is rows = 1), row-major, as stored
 * in the checkpoint: y = W x computes rows outputs from cols inputs. */
typedef struct {
    const void *data;  /* backend memory (CPU: points into the mmap'ed file) */
    DType dtype;       /* F32, F16, BF16, or (a matrix) a GGUF block type */
    int64_t rows, cols;
    void *priv;        /* backend's own (CPU: kernels/cpu/cpu.h's CpuWeightCopies, or NULL) */
    int mapped;        /* 1, set by the caller after be->weight (which sets 0): the host bytes
                        * lie in a read-only private file mapping, so a backend that keeps its
                        * own copy of every byte its products read may drop their pages from
                        * memory (a later read takes them from the file again); any other
                        * memory is never dropped */
} Weight;

typedef struct KVCache KVCache;

/* Sampling settings: the target's distribution at a position is
 * softmax(logits / temperature) after top-k and top-p (sample_dev). */
typedef struct {
    float temperature;    /* 0: greedy */
    int top_k;            /* 0: off */
    float top_p;          /* 1: off */
    uint64_t seed;        /* the decoder's random stream (infer/speculative/decode.c) */
} SampleParams;

/* A token tree in backend memory, what the tree ops below build and read
 * (the device cycle, infer/speculative/cycle.h): per node, cap of them, its
 * token, parent (-1 for the root; parents precede their children), depth
 * (root 0), rank among its siblings in the draft's top-k, KV slot of its
 * latest forward (-1: none), and the draft's local probability p, joint
 * probability P (product of p from the root) and entropy H: the host Tree's
 * fields (infer/speculative/tree.h).  The node count is the caller's: a
 * device program's shapes are fixed.  backend_tree_alloc makes one. */
typedef struct {
    int cap;
    int *token, *parent, *depth, *rank, *slot;
    float *p, *P, *H;
} DevTree;

/* One sequence of an attention call: its queries are rows [off, off+n) of
 * q and out; they attend slots [0, nctx) of cache kv, nctx = *past + n
 * (past in backend memory: the slots before the queries' own; ctx_max, a
 * host bound on nctx at most the cache's slots, sizes a launch and never
 * changes a result).  mask NULL: causal,
 * query i sees slots [0, nctx-n+i].  Else the mask (backend memory) covers
 * the window of the last mask_w slots, n <= mask_w <= nctx: query i sees
 * every slot before the window and window slot j (slot nctx - mask_w + j)
 * where mask[i*mask_w + j] != 0.  A tree verification's window is the
 * tree, a draft step's the cycle's draft entries: the committed context is
 * visible to every query, so a mask's shape does not depend on its length
 * (what replaying a captured forward needs).  window > 0 (a sliding-
 * window layer, Gemma 3's local ones): query i also sees only the slots
 * whose position (the one rope_kv wrote there) lies less than window before
 * its own, qpos[i] (backend memory; the sequence's rows' positions), as
 * transformers' sliding mask does by sequence index: a tree's node sees what
 * the same token decoded alone would. */
typedef struct {
    const KVCache *kv;
    int off, n;
    const int *past;
    int ctx_max;
    const uint8_t *mask;
    int mask_w;
    int window;
    const int *qpos;
} AttnSeq;

/* One call of a device-cycle op below (tree_root .. tree_accept,
 * argmax_dev or sample_dev) as data, for tree_batch: kind names the op, and the fields
 * named as that op's parameters hold its arguments (the rest are unused).
 * tree_compact's dst is t and its pad is pad; argmax_dev's and sample_dev's ids are out_ids,
 * sample_dev's node0 is n0; tree_pass's count is count_out; tree_classify's net is copied whole (its weights stay in
 * backend memory). */
typedef enum {
    TREE_OP_ROOT, TREE_OP_GROW, TREE_OP_TOP, TREE_OP_CLASSIFY, TREE_OP_PASS, TREE_OP_COMPACT, TREE_OP_INPUTS,
    TREE_OP_ACCEPT, TREE_OP_ARGMAX, TREE_OP_SAMPLE, TREE_OP_KINDS
} TreeOpKind;
typedef struct {
    TreeOpKind kind;
    DevTree t, src;
    int n0, from, n, m, k, count, steps, from_start, base, ones, pos0, nctx, vocab, pad;
    float beta;
    const int *root, *rows, *ids, *picks, *map, *keep, *want, *at;
    const float *probs, *ent, *score, *logits;
    SampleParams sp;
    const uint32_t *key;
    NodeNet net;
    float *conf, *path_conf;
    int *sel, *count_out, *out, *walk, *out_ids;
    uint8_t *mask;
} TreeOp;

/* What a backend keeps per caller to tune itself over a repeated unit of
 * work (a decoding cycle); zero-initialised by the caller. */
typedef struct {
    int unit, best, slot;
    int window;   /* units in the current window (0 before the first) */
    double secs[2], works[2], t0;
    double work;  /* set by the caller before unit_end: the unit's expected cost (a cost
                     model's predicted seconds) where units differ in size; 0: not known,
                     every unit counts as 1 */
    int64_t one_thread_units;   /* units run on one thread where the backend had more */
    int probe;    /* set by unit_begin: the unit runs a setting only to compare it (one not
                     chosen, or before any choice), so its time is not the run's */
} BackendTuner;

typedef struct Backend {
    const char *name;

    /* memory */
    float *(*alloc)(size_t nfloats);          /* zeroed */
    void (*release)(void *p);
    void (*to_host)(float *host, const float *dev, size_t n);
    void (*to_device)(float *dev, const float *host, size_t n);
    void (*copy)(float *dst, const float *src, size_t n);
    /* Makes a weight usable by this backend from host bytes (which outlive
     * it).  CPU: no copy.  Returns 0, or -1 with err_set. */
    int (*weight)(Weight *w, const void *host_data, DType dt, int64_t rows, int64_t cols);
    void (*weight_release)(Weight *w);

    /* dense ops; n = number of tokens (rows of x) */
    /* out[t] = table row tokens[t] (tokens in backend memory); an id
     * outside [0, rows) gives a row of zeros (callers validate host ids; a
     * device tree's token -1 is never accepted) */
    void (*embed)(float *out, const Weight *table, const int *tokens, int n);
    /* out[n][w.rows] = x[n][w.cols] · Wᵀ */
    void (*matmul)(float *out, const float *x, const Weight *w, int n);
    /* outs[i][n][ws[i].rows] = x[n][cols] · ws[i]ᵀ for count weights of the
     * same cols (q/k/v, gate/up): the sums of count matmuls, in one call so
     * a backend can share the work out once (CPU: one parallel region). */
    void (*matmul_many)(float *const *outs, const float *x, const Weight *const *ws, int count, int n);
    /* x[n][b.cols] += b (a bias vector) */
    void (*add_bias)(float *x, const Weight *b, int n);
    void (*rmsnorm)(float *out, const float *x, const Weight *w, int n, float eps);
    /* x[n][w.cols] += y, then out = rmsnorm(x): a residual add and the next
     * norm in one pass (one launch), each result what add then rmsnorm
     * give; out may be y. */
    void (*add_rmsnorm)(float *out, float *x, const float *y, const Weight *w, int n, float eps);
    /* Rotary embedding, rotate-half layout (HF LLaMA), in place on
     * x[n][nheads*head_dim]; pos[n] positions (backend memory),
     * inv_freq[head_dim/2] (host). */
    void (*rope)(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq);
    void (*add)(float *x, const float *y, size_t n);              /* x += y */
    void (*swiglu)(float *gate, const float *up, size_t n);       /* gate = silu(gate)*up */
    /* gate = gelu(gate)*up, GELU's tanh form (PyTorch's approximate="tanh",
     * Gemma's gelu_pytorch_tanh) */
    void (*geglu)(float *gate, const float *up, size_t n);
    void (*scale)(float *x, float s, size_t n);                    /* x *= s */
    /* out[n][da+db] = [a[n][da], b[n][db]] (EAGLE's fc input) */
    void (*concat)(float *out, const float *a, int da, const float *b, int db, int n);
    /* dst row dst_rows[i] = src row src_rows[i] for i < n, rows of width
     * floats; the index lists are backend memory, NULL meaning rows
     * 0..n-1.  Gathers and scatters in one op (tree features, accepted
     * paths), not n copies.  Rows must not overlap between dst and src. */
    void (*copy_rows)(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n, int width);

    /* KV cache: slots × kv_dim floats for K and for V, per layer, and one
     * position per slot (what sliding windows compare; slot s holds
     * position s until a write says otherwise). */
    KVCache *(*kv_create)(int layers, int slots, int kv_dim);
    void (*kv_free)(KVCache *c);
    int (*kv_slots)(const KVCache *c);
    /* Writes n rows of k and v into slots [slot, slot+n) of a layer, at
     * positions slot .. slot+n-1. */
    void (*kv_write)(KVCache *c, int layer, int slot, const float *k, const float *v, int n);
    /* rope of q[n][heads*head_dim] and of k[n][kv_heads*head_dim] in place,
     * then kv_write of the rotated k and of v into slots [*slot, *slot+n)
     * (slot in backend memory), at positions pos:
     * one launch for what a layer's attention does to its new tokens before
     * attending, each result what rope, rope and kv_write give. */
    void (*rope_kv)(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int head_dim,
                    const float *inv_freq, KVCache *c, int layer, const int *slot);
    /* For every layer: slot dst+keep[i] moves to slot dst+i (keep in
     * backend memory, ascending, keep[i] >= i; indices from dst, e.g. the
     * accepted path's nodes of a tree verified from slot dst), its
     * position with it; keep[i] past the cache's slots moves nothing. */
    void (*kv_keep)(KVCache *c, int dst, const int *keep, int m);
    /* Attention of the queries of sequences seqs[0..n_seq) (rows of
     * q[][nheads*head_dim], each sequence over its own cache, see AttnSeq)
     * at a layer, into the same rows of out.  nheads/nkv heads share a KV
     * head (GQA).  Each sequence's result is what a call with it alone
     * gives. */
    void (*attention)(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                      int head_dim);

    /* Distribution ops over logits[n][vocab]: per row, softmax at the given
     * temperature (1 = plain), the k most probable ids (descending; ties to
     * the lower id) with their probabilities, and the entropy in nats of the
     * full distribution (topm 0) or of its topm largest probabilities as in
     * the C2T paper's eq. 7.  Any output pointer may be NULL. */
    void (*softmax_topk)(const float *logits, int n, int vocab, float temperature, int k,
                         int *ids, float *probs, int topm, float *entropy);
    /* Per-row argmax (ties to the lower id). */
    void (*argmax)(const float *logits, int n, int vocab, int *ids);

    /* ---- The device cycle's ops: as softmax_topk / argmax, and the tree
     * ops, with every array (ids, probs, entropy, index lists, masks) in
     * backend memory; the host reads only what it asks for.  Each gives what
     * the host code of infer/speculative/ (cycle.c, the policies, decode.c)
     * computes for the same tree, bit for bit. */
    void (*softmax_topk_dev)(const float *logits, int n, int vocab, float temperature, int k, int *ids,
                             float *probs, int topm, float *entropy);
    void (*argmax_dev)(const float *logits, int n, int vocab, int *ids);
    /* Per row i of logits[n][vocab], an id drawn from the row's sampling
     * distribution (temperature > 0): w_j = expf((l_j - max) / temperature)
     * for the logits at least the top_k-th largest (top_k 0 or >= vocab:
     * all), the rest 0; then, where 0 < top_p < 1, w_j kept only where w_j
     * >= q, q the largest weight such that the weights >= q sum to at least
     * top_p of the total (ties at q all kept, as top-k keeps its ties).  The
     * id: the first j in id order with w_j > 0 whose running sum (double)
     * exceeds u · Σw, else the last j with w_j > 0, where u =
     * rng_uniform_at(key, node0 + i) and key = key[0] | key[1] << 32
     * (backend memory).  Sums in other orders than the CPU's (left to
     * right; top-p's by descending weight) are allowed: ids then agree but
     * within rounding of a boundary. */
    void (*sample_dev)(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                       int *ids);
    /* Node 0 of t becomes the root: token *root, parent -1, depth 0, rank 0,
     * slot -1, p = P = 1, H = 0. */
    void (*tree_root)(const DevTree *t, const int *root);
    /* Appends count nodes from index n0.  Node n0+c is child (row r, rank j)
     * = (picks[2c], picks[2c+1]), or (c / k, c % k) when picks is NULL, of
     * the distribution rows ids/probs[][k] and ent[] (NULL: H = 0) of the
     * expanded nodes rows[]: parent rows[r], token ids[r*k+j] (map[] of it
     * where map is not NULL: a reduced draft vocabulary's columns), p =
     * probs[r*k+j], P = P[parent]·p, H = ent[r], rank j, slot -1; a
     * negative id (a row with fewer than k tokens) gives token -1. */
    void (*tree_grow)(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs,
                      const float *ent, int k, const int *picks, int count, const int *map);
    /* The min(m, n) nodes of highest score among nodes [from, from+n), ties
     * to the shallower, then the lower index, into sel in ascending index
     * order; score[v] per node, NULL: its P (EAGLE-2's order). */
    void (*tree_top)(const DevTree *t, const float *score, int from, int n, int m, int *sel);
    /* conf[v] for nodes v in [from, from+n): the confidence of the node
     * classifier net (weights in backend memory) from the node's raw
     * features (node_net.h: P, H, depth, p, rank, and the parent's H, or
     * the node's own where the parent is the root), node_net.h's arithmetic
     * bit for bit. */
    void (*tree_classify)(const DevTree *t, int from, int n, const NodeNet *net, float *conf);
    /* C2T's threshold over the newest layer [from, from+n) (whose parents
     * lie below from): the nodes with a token (>= 0) whose parent has one
     * and with !(conf < beta) move down, in order, to [from, from+*count),
     * their conf with them, and each gets path_conf[v] = min(conf[v],
     * path_conf[parent]) (the parent's when equal); the rest of the layer
     * is left dead: token -1, conf and path_conf -1, below every
     * confidence, so a fixed-shape program ranks it last and its children
     * never pass.  *count is backend memory. */
    void (*tree_pass)(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count);
    /* dst's nodes 0..m) := src's nodes keep[0..m) (ascending, closed under
     * parent, keep[0] = 0), parents re-indexed (tree_subset); then nodes
     * [m, pad) are dead padding: token -1, parent 0, depth 1, rank 0, slot
     * -1, p = P = H = 0 (a forward over pad rows scores nothing more, and
     * no walk enters them); dst and src are different trees. */
    void (*tree_compact)(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad);
    /* The inputs of a forward over nodes rows[0..m) (NULL: 0..m) of t, with
     * base, ones, pos0 and nctx counted from *at (one int in backend memory;
     * NULL: from 0), so that a caller whose context moves every cycle
     * passes the same arguments each time: row i's node takes KV slot
     * base+i (recorded in t->slot); out[0..m) its token, out[m..2m) its
     * position pos0 + depth, out[2m..3m) its parent, out[3m..4m) the node,
     * out[4m] the first slot base (the forward's SeqView.past); mask[m][nctx
     * - ones], the window of slots [ones, nctx) (AttnSeq.mask_w = nctx -
     * ones: the slots before it are visible to all), row i marking the
     * slots of the node and of its ancestors that have one there. */
    void (*tree_inputs)(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0,
                        int nctx, int *out, uint8_t *mask);
    /* Greedy acceptance over a tree of n nodes whose target argmax at node v
     * is want[v]: walk = {done, len, bonus, path[n], tokens[n]}; from_start
     * starts it at the root (len 1), then up to `steps` steps each follow the
     * first child of the path's last node whose token is want[last], or end
     * the walk (done 1, bonus want[last]); only want[] of the path's nodes
     * is read. */
    void (*tree_accept)(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk);

    /* Optional (call it through backend_tree_batch, which runs the ops one
     * after another through their entries above where it is NULL): ops[0..n)
     * of one kind over different trees, each with its own arguments, whose
     * outputs overlap no other op's inputs or outputs, as one launch where
     * the backend can (CUDA: a grid over the ops).  Batched decoding issues
     * its sequences' tree ops so, a launch per op for all the trees. */
    void (*tree_batch)(const TreeOp *ops, int n);
    /* Optional (call it through backend_to_host_many, which reads them one
     * by one where it is NULL): count reads, dev[i]'s n[i] elements to
     * host[i], as one transfer where the backend can (CUDA: gathered on the
     * device, copied once, spread on the host).  Batched decoding reads its
     * sequences' walks and counts so, one wait for all. */
    void (*to_host_many)(float *const *host, const float *const *dev, const size_t *n, int count);

    /* Optional (NULL where a backend has nothing to gain; call them through
     * backend_recorded).  record_begin returns 1 when the ops that follow
     * are traced instead of run; record_end then returns 0 when it has run
     * them as one unit (CUDA: one graph launch instead of an API call per
     * op), 1 when it needs them issued once more (CUDA: signed first, then
     * recorded where the signature is new; kernels/base/replay.h), or -1
     * when they could not be recorded: then nothing ran.  No op in between
     * may return data to the host, and issuing the ops twice must issue the
     * same ops. */
    int (*record_begin)(void);
    int (*record_end)(void);
    /* Optional: bracket one unit of repeated work (a draft-verify cycle)
     * that the backend may tune itself over (CPU: its thread count, see
     * kernels/cpu/backend.c).  Call them through backend_unit_begin/end. */
    void (*unit_begin)(BackendTuner *t);
    void (*unit_end)(BackendTuner *t);
} Backend;

/* Every member of Backend, for checks that an implementation is complete. */
#define BACKEND_OPS(X) X(alloc) X(release) X(to_host) X(to_device) X(copy) X(weight) \
    X(weight_release) X(embed) X(matmul) X(matmul_many) X(add_bias) X(rmsnorm) X(add_rmsnorm) X(rope) X(add) X(swiglu) X(geglu) X(scale) X(concat) X(copy_rows) \
    X(kv_create) X(kv_free) X(kv_slots) X(kv_write) X(rope_kv) X(kv_keep) X(attention) X(softmax_topk) X(argmax) \
    X(softmax_topk_dev) X(argmax_dev) X(sample_dev) X(tree_root) X(tree_grow) X(tree_top) X(tree_classify) X(tree_pass) X(tree_compact) X(tree_inputs) X(tree_accept)

/* The backends' settings: process-wide, given before any model loads
 * (backend_configure), as command-line options; the commands record them in
 * their reports (spec-eval's JSON settings, trace attributes). */
typedef struct {
    /* CPU: F32 copies of 16-bit matrices for products over many tokens
     * (sgemm needs F32), up to this many MiB; past it, or at 0, each product
     * widens the rows it needs.  Same results, only speed differs. */
    int cpu_f32_cache_mb;
    /* CUDA: each forward replayed as a CUDA graph (1), and the reason said
     * on stderr whenever one could not be (2); 0 runs op by op. */
    int cuda_graphs;
    /* CUDA: products of 5..64 tokens with fewer multiply-adds than this take
     * the tiled kernel, larger ones cuBLAS (0: all cuBLAS).  Speed only. */
    long long cuda_tiled_max;
    /* CUDA: 1 rounds activations to the weights' 16-bit type in cuBLAS
     * products (as a native BF16 forward does): faster, and it changes the
     * arithmetic; 0 splits them in two halves, within 1e-5 of F32. */
    int cuda_fast_gemm;
    /* CPU: the KV cache's element type, DT_F32 or DT_BF16 (K and V rounded
     * to BF16 as they are written: half the bytes attention reads, and it
     * changes the arithmetic).  CUDA keeps F32 and refuses BF16. */
    DType kv_dtype;
    /* CPU (CpuGemm): CPU_GEMM_BF16 multiplies BF16 weights with activations
     * rounded to BF16 (the AVX512-BF16 pair dot product, as llama.cpp's
     * BF16 path does), in every product of any token count: faster, and it
     * changes the arithmetic; CPU_GEMM_AMX the same products on AMX's tile
     * multiply, summed in another order (another arithmetic again), whose
     * products of up to 16 tokens cost about one token's (each BF16 weight
     * is kept a second time, copied into tiles as it loads); CPU_GEMM_F32
     * widens the weights to F32.  Each needs a build and CPU with its
     * instructions. */
    int cpu_fast_gemm;
} BackendOptions;
typedef enum { CPU_GEMM_F32 = 0, CPU_GEMM_BF16 = 1, CPU_GEMM_AMX = 2 } CpuGemm;
/* Its option text: "off", "on", "amx". */
const char *cpu_gemm_name(int g);
/* The vector instructions this build's CPU kernels were compiled for, as
 * results name a machine: "avx512-bf16", "avx512", "avx2" or "x86-64",
 * with "+amx" where AMX tiles are ready (recorded in spec-eval's report). */
const char *backend_cpu_isa(void);
/* The kernel set OpenBLAS runs on this CPU ("Haswell", "Zen", "SkylakeX",
 * "Cooperlake", ...; OPENBLAS_CORETYPE overrides its choice): the order its
 * sgemm sums in, which products of more than FEW_TOKENS tokens and prefill
 * attention take, and which an AVX2 build of ours does not choose (recorded
 * beside backend_cpu_isa). */
const char *backend_cpu_blas(void);

void backend_options_default(BackendOptions *o);
/* Sets the backends' settings; call before loading weights.  -1 with
 * err_set when a value is out of range. */
int backend_configure(const BackendOptions *o);
/* Whether this build and CPU can run cpu_fast_gemm `gemm` (CPU_GEMM_BF16:
 * compiled with AVX512-BF16; CPU_GEMM_AMX: with AMX-BF16, and the kernel
 * lends the tiles). */
int backend_cpu_gemm_runs(int gemm);
/* How many tokens one weight product of be takes for about the price of
 * one: 16 (a tile's tokens) on the CPU under CPU_GEMM_AMX; 64 on a GPU,
 * where a product is bound by reading its weights until the tokens' work
 * per weight outgrows the bandwidth (an H100's 989 BF16 TFLOP/s against
 * 3.35 TB/s: ~300 tokens a BF16 weight, ~150 with matmul.cu's split
 * activations; the figure is argued, not measured);
 * 1 elsewhere (the CPU's other arithmetics pay every token's arithmetic). */
int backend_product_tokens(const Backend *be);
/* The most rows a tree verification on be may be padded to (replay's
 * buckets, verify_rows_bound) without summing its other rows another way:
 * FEW_TOKENS on the CPU (each row summed as a one-token product; past it
 * sgemm's sums follow the count); 64 on a GPU (the GEMV's and the tiled
 * kernel's reach; --cuda-tiled-max hands a large weight's products of
 * fewer tokens to cuBLAS, padded or not). */
int backend_pad_rows(const Backend *be);
/* The settings in force (the defaults until backend_configure). */
const BackendOptions *backend_settings(void);
/* For reports and trace attributes: the i-th setting of o as a key and its
 * value's text ("on", "4096"); -1 past the last. */
int backend_setting_text(const BackendOptions *o, int i, const char **key, char *value, size_t size);

extern const Backend cpu_backend;
/* Threads of the CPU backend's loops and OpenBLAS: the most it may use
 * (OMP_NUM_THREADS, else the cores) and the count for what follows. */
int cpu_threads_max(void);
void cpu_threads_set(int n);

/* --device: "cpu", "cuda" or "auto" (cuda when this build has it and a GPU is
 * visible, else cpu); NULL means cpu.  NULL with err_set when the name is
 * unknown or cuda is asked for but unavailable. */
const Backend *backend_by_name(const char *device);
/* What the backend runs on, for reports and caches: the CPU's model name
 * (/proc/cpuinfo) or the GPU's. */
const char *backend_device_name(const Backend *be);
/* The message of a failure inside a void op (CUDA errors are recorded, not
 * returned), or NULL when there was none.  Check after each forward batch. */
const char *backend_failure(const Backend *be);
/* Runs ops(arg) — a sequence of ops that returns nothing to the host, such
 * as a forward pass — recorded as one unit where the backend can, else (or
 * when recording fails) directly. */
void backend_recorded(const Backend *be, void (*ops)(void *arg), void *arg);
/* Brackets one unit of repeated work for a backend that tunes itself over
 * it (no-ops elsewhere); t is the caller's, zeroed before its first unit. */
void backend_unit_begin(const Backend *be, BackendTuner *t);
void backend_unit_end(const Backend *be, BackendTuner *t);
/* Index arrays in backend memory: a buffer of n floats from alloc holds n
 * int32 as well (to_host / to_device / copy move 4-byte elements, whatever
 * they hold). */
int *backend_alloc_ints(const Backend *be, size_t n);
void backend_ints_to_host(const Backend *be, int *host, const int *dev, size_t n);
void backend_ints_to_device(const Backend *be, int *dev, const int *host, size_t n);
/* ops[0..n) (tree_batch's contract) by be->tree_batch, or each through its
 * own entry of be where the backend has none or n is 1 (one op launches
 * its own kernel, not a grid of one). */
void backend_tree_batch(const Backend *be, const TreeOp *ops, int n);
/* The count reads of to_host_many by it, or one by one where be has none. */
void backend_to_host_many(const Backend *be, float *const *host, const float *const *dev, const size_t *n, int count);
/* A DevTree of cap nodes in one allocation of be's, its arrays cap words
 * apart in the struct's order (token, parent, depth, rank, slot, p, P, H:
 * a caller may read neighbours at once); backend_tree_release frees it. */
DevTree backend_tree_alloc(const Backend *be, int cap);
void backend_tree_release(const Backend *be, DevTree *t);
/* Frees what a backend keeps between calls (CUDA: scratch, staging, library
 * handles); for the end of a program, after its models are freed. */
void backend_shutdown(const Backend *be);

#endif
