/* Draft sources behind one interface: an EAGLE-1/2 head (drafts from the
 * target's final hidden states and the next token's embedding, reusing the
 * target's embedding and LM head) or a separate small draft LM.
 *
 * Both are causal models whose last committed entry is the tree's root:
 * a node at depth d sits at draft position (committed − 1 + d).  During a
 * cycle, expanded nodes get temporary KV slots after the committed ones
 * (each sees the context and its own ancestors); draft_end_cycle drops them
 * and draft_catch_up commits what the target accepted. */
#ifndef C2T_DRAFT_H
#define C2T_DRAFT_H
#include "infer/model/llama.h"
#include "infer/spec/tree.h"

typedef enum { DRAFT_EAGLE = 0, DRAFT_LM, DRAFT_SCRIPT } DraftKind;

/* A scripted draft (tests): the top-k children of one node and the entropy
 * of its distribution, from a fixed table. */
typedef int (*DraftScript)(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *entropy);

typedef struct {
    DraftKind kind;
    const LlamaModel *target;
    const Backend *be;
    int slots;               /* KV capacity */
    int n_past;              /* committed entries (the last one is the root) */
    int n_temp;              /* temporary tree entries of this cycle */
    int *slot_of;            /* per tree node: its temporary slot, -1 if none */
    int node_cap;
    int V, H;
    /* EAGLE head */
    ModelConfig cfg;
    char dir[512];
    char config_hash[17];
    SafeTensors *st;
    Weight fc_w, fc_b;
    int has_fc_bias;
    LlamaLayer layer;
    float *inv_freq;
    KVCache *kv;
    LayerScratch ls;
    int cap;                 /* token capacity of the buffers below */
    float *emb, *cat, *x, *logits, *feat;   /* device scratch (feat: EAGLE input features) */
    float *root_feat;        /* head output at the root (device, H) */
    float *node_feat;        /* head output per tree node (device, node_cap × H) */
    /* draft LM */
    LlamaModel *lm;
    LlamaState *lms;
    float *root_logits;      /* device, V: the distribution under the root */
    int lm_started;
    double t_dist;           /* seconds in softmax / top-k / entropy, cumulative */
    /* scripted */
    DraftScript script;
    void *script_ctx;
} Draft;

/* kind "eagle" or "lm"; checks the draft fits the target (vocabulary,
 * hidden size) and names the mismatch otherwise. */
Draft *draft_load(const char *kind, const char *dir, const LlamaModel *target, int slots);
Draft *draft_scripted(DraftScript fn, void *ctx);
void draft_free(Draft *d);
const char *draft_kind_name(const Draft *d);
/* Forget everything (a new prompt). */
void draft_reset(Draft *d);
/* The target committed m tokens (tokens[0] is the previous root) with final
 * hidden states hidden[m][H] (device) and emitted `next`, the new root. */
int draft_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next);
/* The draft distribution under each of nodes[0..n) of t: top-k children
 * (ids, probs; k per node) and the entropy over the topm largest
 * probabilities (0 = exact).  nodes is either {0} (the root) or non-root
 * nodes whose non-root ancestors were expanded earlier this cycle. */
int draft_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                 float *probs, float *entropy);
void draft_end_cycle(Draft *d);
#endif
