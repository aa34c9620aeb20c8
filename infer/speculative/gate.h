/* Where a sequence's model products go.  Decoding one sequence runs each
 * product at once; decoding several together (infer/session/batch.c) hands
 * each to a gate, which suspends the sequence until the products of every
 * sequence waiting on the same kind of call have run as one batched
 * product, and then returns as if the call had run alone.  The decoding
 * loop, the policies and the drafts are the same code either way. */
#ifndef C2T_GATE_H
#define C2T_GATE_H
#include "infer/model/llama.h"

typedef struct DraftStep DraftStep;

typedef enum {
    GATE_PREFILL,   /* a prompt through the target (llama_forward) */
    GATE_VERIFY,    /* a drafted tree through the target (llama_forward) */
    GATE_ROW,       /* the target's logits of one row of its last forward (llama_row_logits) */
    GATE_DRAFT,     /* a draft forward (draft_run_steps) */
    GATE_DIST,      /* softmax, top-k and entropy of draft logits (draft_dists) */
    GATE_CALIBRATE, /* the decoder's cost curve (decoder_calibrate): state only */
    GATE_TREE,      /* a device cycle's tree op (Backend.tree_batch's TreeOp) */
    GATE_READ,      /* a device cycle's read of backend memory (Backend.to_host) */
    GATE_KINDS
} GateKind;

/* Backend.softmax_topk's arguments: rows [n][vocab] of backend memory in,
 * arrays out (any may be NULL): host arrays, or backend memory where
 * on_device (softmax_topk_dev: the device cycle's). */
typedef struct {
    const float *logits;
    int n, vocab, k, topm;
    float temperature;
    int *ids;
    float *probs, *entropy;
    int on_device;
} DistCall;

typedef struct {
    GateKind kind;
    /* GATE_PREFILL, GATE_VERIFY: llama_forward's arguments (the mask over
     * the n new tokens' window; on_device:
     * tokens, pos and mask in backend memory, llama_forward_dev's); GATE_ROW:
     * state, row */
    LlamaState *state;
    const int *tokens, *pos;
    int n, row;
    const uint8_t *mask;
    LogitsMode mode;
    int on_device;
    DraftStep *step;        /* GATE_DRAFT */
    DistCall *dist;         /* GATE_DIST */
    const TreeOp *tree;     /* GATE_TREE */
    float *host;            /* GATE_READ: to_host's arguments */
    const float *dev;
    size_t words;
    const float *logits;    /* GATE_ROW's result */
} GateCall;

/* Where a sequence waits: every call of pass.  The callers, one per kind:
 * GATE_PREFILL and GATE_VERIFY target_forward, GATE_ROW path_logits
 * (decode.c); GATE_DRAFT draft_step and GATE_DIST dist_pass (draft.c);
 * GATE_CALIBRATE decoder_calibrate (infer/session/observers.c); GATE_TREE and GATE_READ
 * gate_tree_op and gate_to_host below, which the device cycle's ops reach
 * through cycle_tree_op and cycle_to_host (cycle.c) and tree_inputs_make
 * (draft.c).  In what order the waiting kinds run: infer/session/batch.c's schedule. */
typedef struct Gate Gate;
struct Gate {
    /* Runs the call, alone or with others: 0.  Non-zero where it did not
     * run it as asked: for GATE_TREE and GATE_READ, that the caller runs
     * it alone (a batch unwinding after a failure still reads what its ops
     * write); for the other kinds a failure, -1 with err_set. */
    int (*pass)(Gate *g, GateCall *call);
};

/* A device cycle's tree op (GATE_TREE) on be: through g, batched with the
 * other sequences' ops of its kind, or at once by backend_tree_batch where
 * g is NULL (one sequence) or its pass did not run it. */
void gate_tree_op(Gate *g, const Backend *be, const TreeOp *op);
/* A device cycle's read of be's memory (GATE_READ): through g, in one
 * transfer with the other sequences' reads, or at once by be->to_host as
 * gate_tree_op runs an op. */
void gate_to_host(Gate *g, const Backend *be, float *host, const float *dev, size_t words);
#endif
