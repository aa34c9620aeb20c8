/* A policy's tree as the cycle builds it, for tests that check trees: its
 * program (Policy.build, and build_end where it has one) run on the CPU
 * backend from a root of token `root`, with draft d (a scripted draft, or a
 * model's), and the verified tree read back to the host (cycle_read_tree). */
#ifndef C2T_TESTS_BUILD_TREE_H
#define C2T_TESTS_BUILD_TREE_H
#include "infer/speculative/cycle.h"

/* 0, or -1 with err_set where the program failed; t is reset to the tree. */
static inline int build_tree_on_cpu(Policy *p, Draft *d, int root, Tree *t) {
    DevCycle *c = cycle_new(&cpu_backend, policy_max_nodes(p));
    if (p->program_for) p->program_for(p, c->be);
    backend_ints_to_device(c->be, c->start, (const int[]){0, root, 0, 0}, 4);
    StageTimes tm = {0};
    cycle_begin(c);
    int rc = p->build(p, d, c, &tm);
    if (!rc && p->build_end) rc = p->build_end(p, c, &tm);
    if (!rc) cycle_read_tree(c, t);
    cycle_free(c);
    return rc;
}
#endif
