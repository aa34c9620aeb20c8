/* Tree policies: how the draft tree is built each cycle.  Each policy is a
 * small module registered in infer/policy.c; the decoding loop only calls
 * build() and feedback(), so new methods plug in without touching it. */
#ifndef C2T_POLICY_H
#define C2T_POLICY_H
#include "infer/draft.h"
#include "infer/tree.h"

/* Every policy parameter; each policy reads the ones it needs. */
typedef struct {
    char name[32];
    int topk;            /* children per expanded node (eagle2, c2t) */
    int depth;           /* eagle2: expansion steps after the root's (max node depth depth+1); c2t: d_max */
    int total;           /* eagle2: nodes kept by rerank (root excluded); -1 = all */
    int draft_len;       /* chain: draft tokens per cycle */
    int topm;            /* entropy over the top-M probabilities (0 = exact) */
    char static_tree[4096];   /* static: paths of sibling ranks, e.g. "0;1;0,0;0,1" or a preset name */
    /* c2t and chain early stopping */
    char classifier[512];
    float beta;
    char early_stop[16];  /* chain: none | c2t | dymax | dyjoint */
    float threshold;
    /* sage / wetap (seeds 002, 004) */
    float f[16];
} PolicyParams;

void policy_params_default(PolicyParams *p);

/* Time a policy spends, split as the reports show it (seconds). */
typedef struct {
    double draft, features, classifier;
} PolicyTimes;

typedef struct Policy Policy;
struct Policy {
    const char *name;
    PolicyParams prm;
    void *state;
    int needs_draft;
    /* Builds the tree under t's root (set by the loop). */
    int (*build)(Policy *p, Draft *d, Tree *t, PolicyTimes *tm);
    /* After verification: how many nodes were accepted (SAGE keeps a history). */
    void (*feedback)(Policy *p, const Tree *t, int accepted);
    void (*destroy)(Policy *p);
};

/* Unknown policy or an invalid parameter: NULL with a one-line error. */
Policy *policy_new(const PolicyParams *prm);
void policy_free(Policy *p);
/* Names of the registered policies, space separated (for --help). */
const char *policy_names(void);
/* Upper bound on the nodes a policy's tree can hold (KV cache sizing). */
int policy_max_nodes(const Policy *p);

/* Shared by the policies: expand nodes through the draft, timing it. */
int policy_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                  float *probs, float *ent, PolicyTimes *tm);

/* Registration: each policy module defines one constructor. */
int policy_ar_init(Policy *p);
int policy_chain_init(Policy *p);
int policy_static_init(Policy *p);
int policy_eagle2_init(Policy *p);
#endif
