/* Synthetic trace files for tests and benchmarks, written through the
 * trace writer (collect/trace.h).  Trees are grown like EAGLE-2's complete
 * tree T1 (the paper's training data, App. C.1): topk children of the root,
 * then per layer the topk nodes of the previous layer by joint probability
 * get topk children each, until nodes_per_tree nodes.  A simulated target
 * model walks down the tree greedily; the nodes on its path are the
 * accepted ones.  Its choices follow the draft probabilities with the
 * paper's biases (over-confident top token at low entropy, under-confident
 * at high entropy, deeper = less likely), so P, H and d all carry signal.
 *
 * Only integer and IEEE basic arithmetic is used (own log), so a seed gives
 * the same trees, bit for bit, on every machine. */
#ifndef C2T_TRAIN_SYNTH_H
#define C2T_TRAIN_SYNTH_H
#include <stdint.h>

typedef struct {
    int64_t n_trees;
    int nodes_per_tree;      /* 1011 in the paper */
    int topk;                /* 10 in the paper */
    int trees_per_question;  /* trees between trace_finish_question calls */
    uint64_t seed;
    int compress;            /* TraceCompress */
    double nonfinite_rate;   /* share of trees with one NaN H (bad-input tests) */
    int no_positives;        /* label every node 0 (bad-input tests) */
    int progress;
    int fast;                /* trace_create_ex with durable = 0 (big bench files) */
} SynthOpts;

void synth_defaults(SynthOpts *o);
/* Creates path (must not exist); 0 or -1 + err_set. */
int synth_trace_write(const char *path, const SynthOpts *o);
/* ln(x) for x > 0 from basic arithmetic only (bit-reproducible). */
double synth_log(double x);
#endif
