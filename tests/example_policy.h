/* A tree method in one file, as docs/policies.md "Adding a tree method"
 * describes: "fan", the root's `width` most likely children, each followed
 * by its own most likely child (1 + 2·width nodes, the same shape every
 * cycle).  Made selectable by name it would be this file in
 * infer/speculative/policies/ and one line in policy.c's registry; the tests
 * build it with policy_new_with (test_policies.c checks its tree, read
 * back, against the draft's own choices, and its tokens against ar's). */
#ifndef C2T_EXAMPLE_POLICY_H
#define C2T_EXAMPLE_POLICY_H
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"

#define FAN_MAX 16
typedef struct { int width; } FanParams;
static const PolicyParamDef fan_params[] = {POLICY_INT(FanParams, width, 4, 1, FAN_MAX)};

/* The program: the root's expansion, then one of every child, as tree ops
 * in backend memory; nothing read back, so a GPU may record the draft
 * phase whole. */
static int fan_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    const int w = ((const FanParams *)p->own)->width, want = p->prm.want_entropy;
    if (cycle_expand(c, d, 1, NULL, 1, w, p->prm.topm, want, tm)) return -1;
    cycle_grow(c, d, c->iota, w, NULL, w, want);
    if (cycle_expand(c, d, 0, c->iota + 1, w, 1, p->prm.topm, want, tm)) return -1;
    cycle_grow(c, d, c->iota + 1, 1, NULL, w, want);
    return 0;
}

static int fan_init(Policy *p) {
    p->build = fan_build;
    p->build_unit = 1;
    return 0;
}

static int fan_max_nodes(const Policy *p) { return 1 + 2 * ((const FanParams *)p->own)->width; }

static const PolicyClass policy_fan = {"fan", fan_init, fan_max_nodes, POLICY_PARAMS(fan_params, FanParams)};
#endif
