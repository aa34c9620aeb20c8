/* The token tree a policy builds and the target verifies.  Node 0 is the
 * root: the last token the target emitted, already part of the output but
 * not yet in the target's KV cache.  Parents precede their children.
 * Defined in cycle.c (the tree's functions, beside the ops that grow it on
 * the device) and draft.c (TreeInputs, which the forwards read). */
#ifndef C2T_TREE_H
#define C2T_TREE_H
#include "kernels/kernels.h"
#include <stdint.h>

typedef struct Gate Gate;   /* gate.h */

typedef struct {
    int n, cap;
    int *token;
    int *parent;    /* -1 for the root */
    int *depth;     /* root 0, its children 1 */
    int *rank;      /* rank among siblings in the draft's top-k (0 = most probable) */
    float *p;       /* the draft's local probability of the node's token */
    float *P;       /* joint probability: product of p from the root */
    float *H;       /* entropy (nats) of the draft distribution the node was drawn from */
} Tree;

void tree_init(Tree *t);
void tree_free(Tree *t);
/* Empties the tree and sets the root. */
void tree_reset(Tree *t, int root_token);
/* t holds n nodes whose fields the caller writes (a copy from elsewhere). */
void tree_set_size(Tree *t, int n);
/* Adds a child; returns its index. */
int tree_add(Tree *t, int parent, int token, float p, float H, int rank);
/* The verification inputs for a target whose committed context has n_past
 * tokens: positions n_past + depth, and the mask over the tree's window
 * (n × n, AttnSeq.mask_w n: the context before it is visible to all) where
 * node i sees its ancestors and itself. */
void tree_positions(const Tree *t, int n_past, int *pos);
void tree_mask(const Tree *t, uint8_t *mask);
/* Copies the nodes keep[0..m) (ascending, closed under parent) into out,
 * re-indexing parents. */
void tree_subset(const Tree *t, const int *keep, int m, Tree *out);
/* Root-to-node path (root first); returns its length. */
int tree_path(const Tree *t, int node, int *path);
int tree_max_depth(const Tree *t);

/* The inputs of a forward over rows of a tree, made in backend memory by
 * the tree op tree_inputs (kernels.h; base, ones, pos0 and nctx counted
 * from *at, NULL: from 0) through gate (gate_tree_op: a batched sequence
 * waits there; NULL: at once), where the forward reads them: dev[0..m)
 * tokens, [m..2m) positions, [2m..3m) parents, [3m..4m) nodes, dev[4m]
 * the first KV slot (SeqView.past), then the mask [m][nctx - ones] over the
 * window [ones, nctx) (dev_mask).  Zero-initialise; the buffer grows to the
 * largest call, or is reserved for it at once (tree_inputs_reserve), so
 * that it stays where every forward of the run reads it (a recorded
 * forward's signature holds its address). */
typedef struct {
    const Backend *be;
    int *dev;                 /* cap words: the ints, then the mask's bytes */
    const uint8_t *dev_mask;  /* into dev */
    size_t cap;
} TreeInputs;
void tree_inputs_make(TreeInputs *in, const Backend *be, Gate *gate, const DevTree *t, const int *rows, int m,
                      const int *at, int base, int ones, int pos0, int nctx);
/* Room for forwards over up to m rows with masks of up to w slots. */
void tree_inputs_reserve(TreeInputs *in, const Backend *be, int m, int w);
void tree_inputs_free(TreeInputs *in);
#endif
