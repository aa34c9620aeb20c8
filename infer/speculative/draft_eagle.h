/* What the EAGLE-1/2 head (draft_eagle.c) and the EAGLE-3 head
 * (draft_eagle3.c) share: one decoder layer over a feature and the next
 * token's embedding, the KV cache of the committed pairs, and the features
 * of a cycle's tree nodes (a node's input is its parent's output).  They
 * differ in how a pair becomes the layer's input and how the output
 * becomes logits: EagleHead.forward. */
#ifndef C2T_DRAFT_EAGLE_H
#define C2T_DRAFT_EAGLE_H
#include "infer/speculative/draft.h"

typedef struct EagleHead EagleHead;
/* The head on n (token, feature) pairs at the given positions, the pairs of
 * the sequences seqs[0..n_seq) (each its own draft's cache and mask; one
 * for a draft alone), over the weights and scratch of d/e: output features
 * in e->x, the logits of rows logit_rows[0..n_logit) (NULL: all n) in
 * e->logits.  from_target: the features are the target's (catch-up,
 * Draft.feat_width floats each), else the head's own outputs (tree nodes,
 * h floats each). */
typedef void (*EagleForward)(Draft *d, EagleHead *e, const int *tokens, const float *feat, int from_target,
                             const int *pos, int n, const SeqView *seqs, int n_seq, const int *logit_rows,
                             int n_logit);

struct EagleHead {
    SafeTensors *st;
    EagleForward forward;
    int h;                   /* the head's hidden size */
    Weight fc_w, fc_b;
    int has_fc_bias;
    LlamaLayer layer;
    float *inv_freq;
    KVCache *kv;
    LayerScratch ls;
    ForwardCtl ctl;      /* a step's tokens, positions and masks, uploaded */
    int cap;                 /* token capacity of the buffers below */
    float *emb, *cat, *x, *logits, *feat;   /* device scratch (feat: input features) */
    float *tfeat;            /* device scratch, cap × Draft.feat_width: several catch-ups' target features */
    int shared;              /* a clone: the weights, norms and tensors are another head's */
    float *normed;           /* device scratch, cap × h (EAGLE-3's normed feature and output) */
    float *node_feat;        /* head output per tree node (device, node_cap × h); row 0 is the
                                root's, written at catch-up (the root is never expanded here) */
    int node_cap;
    const Weight *embed;     /* the target's, or own_embed */
    const Weight *lm_head;   /* the target's, own_lm_head, or vocab_head (a reduced draft vocabulary) */
    Weight vocab_head;
    void *vocab_host;        /* vocab_head's bytes */
    /* EAGLE-3 only */
    Weight hidden_norm, norm, own_lm_head, own_embed;
};

/* Reads dir's config.json into d->cfg and opens its tensors; allocates the
 * head, its KV cache and the rotary frequencies. */
EagleHead *eagle_head_open(Draft *d, const char *dir);
void eagle_head_free(Draft *d);
int eagle_clone(Draft *dst, const Draft *src);
/* DraftOps.run of both heads: the steps' pairs in one forward. */
int eagle_run(DraftStep *const *steps, int n);
/* e->logits <- the LM head over rows[0..n) of out (rows: backend memory; NULL: out's first n). */
void eagle_logits(Draft *d, EagleHead *e, const float *out, const int *rows, int n);
#endif
