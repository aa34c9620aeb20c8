/* The device cycle's two gated calls (gate.h): a tree op and a read. */
#include "infer/speculative/gate.h"

void gate_tree_op(Gate *g, const Backend *be, const TreeOp *op) {
    GateCall call = {.kind = GATE_TREE, .tree = op};
    if (!g || g->pass(g, &call)) backend_tree_batch(be, op, 1);
}

void gate_to_host(Gate *g, const Backend *be, float *host, const float *dev, size_t words) {
    GateCall call = {.kind = GATE_READ, .host = host, .dev = dev, .words = words};
    if (!g || g->pass(g, &call)) be->to_host(host, dev, words);
}
