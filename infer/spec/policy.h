/* Tree policies: how the draft tree is built each cycle.  Each policy is a
 * small module registered in infer/spec/policy.c; the decoding loop only calls
 * build() and feedback(), so new methods plug in without touching it. */
#ifndef C2T_POLICY_H
#define C2T_POLICY_H
#include "infer/spec/draft.h"
#include "infer/spec/tree.h"
#include <stddef.h>

/* The options several policies share (their command-line flags); a
 * policy's own parameters come as --param text and live in its own struct. */
typedef struct {
    char name[32];
    int topk;            /* children per expanded node (eagle2, c2t) */
    int depth;           /* eagle2: expansion steps after the root's (max node depth depth+1);
                            c2t: d_max, the maximum node depth; chain: unused; -1 = the policy's default */
    int total;           /* eagle2: nodes kept by rerank (root excluded); -1 = all */
    int draft_len;       /* chain: draft tokens per cycle */
    int topm;            /* entropy over the top-M probabilities (0 = exact) */
    int want_entropy;    /* eagle2: record each node's entropy H (spec-collect) */
    char static_tree[4096];   /* static: paths of sibling ranks, e.g. "0;1;0,0;0,1" or a preset name */
    /* c2t and chain early stopping */
    char classifier[512];
    float beta;
    char early_stop[16];  /* chain: none | c2t | dymax | dyjoint */
    float threshold;
    /* --param KEY=VALUE pairs, one per line, for the policy's own
     * parameters (PolicyParamDef); policy_new checks them against its table */
    char own_params[2048];
} PolicyParams;

void policy_params_default(PolicyParams *p);
/* Records one --param KEY=VALUE (value NULL: key is "KEY=VALUE") for the
 * policy to check and read; a malformed pair: -1 with a one-line error. */
int policy_params_set(PolicyParams *p, const char *key, const char *value);

/* One parameter a policy owns: its key (also its --param name), type ('i'
 * int, 'f' float), offset in the policy's parameter struct, default and
 * range ([lo, hi], or (lo, hi] with lo_open). */
typedef struct {
    const char *key;
    char type;
    size_t off;
    double def, lo, hi;
    int lo_open;
} PolicyParamDef;
#define POLICY_INT(S, f, def, lo, hi) {#f, 'i', offsetof(S, f), def, lo, hi, 0}
#define POLICY_FLOAT(S, f, def, lo, hi, open) {#f, 'f', offsetof(S, f), def, lo, hi, open}

/* Time a policy spends, split as the reports show it (seconds): draft
 * forwards; the distribution step on the draft's logits (softmax, top-k and,
 * when asked for, top-M entropy: one fused kernel); feature assembly for a
 * classifier (joint probabilities, depths, second top-K); the classifier. */
typedef struct {
    double draft, dist, features, classifier;
} PolicyTimes;

typedef struct Policy Policy;
typedef struct PolicyClass PolicyClass;
struct Policy {
    const char *name;
    const PolicyClass *cls;
    PolicyParams prm;
    void *own;           /* the policy's parameter struct (cls->params), or NULL */
    void *state;
    int needs_draft;
    /* Builds the tree under t's root (set by the loop). */
    int (*build)(Policy *p, Draft *d, Tree *t, PolicyTimes *tm);
    /* After verification: how many nodes were accepted (SAGE keeps a history). */
    void (*feedback)(Policy *p, const Tree *t, int accepted);
    void (*destroy)(Policy *p);
};

/* What a policy module exports: one of these, listed in policy.c's registry.
 * init reads p->prm (shared flags) and p->own (its parameters, defaults
 * applied, --param values checked) and sets build / feedback / destroy /
 * state; max_nodes bounds the nodes its tree can hold (KV cache sizing). */
struct PolicyClass {
    const char *name;
    int (*init)(Policy *p);
    int (*max_nodes)(const Policy *p);
    const PolicyParamDef *params;
    int n_params;
    size_t params_size;
};

/* Unknown policy or an invalid parameter: NULL with a one-line error. */
Policy *policy_new(const PolicyParams *prm);
void policy_free(Policy *p);
/* Names of the registered policies, space separated (for --help). */
const char *policy_names(void);
/* Upper bound on the nodes a policy's tree can hold (KV cache sizing). */
int policy_max_nodes(const Policy *p);
/* The i-th parameter the policy owns: its key and value (for reports);
 * -1 past the last. */
int policy_param_get(const Policy *p, int i, const char **key, double *value);

/* Shared by the policies (policy_helpers.c): expand nodes through the
 * draft, timing it. */
int policy_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                  float *probs, float *ent, PolicyTimes *tm);

/* A candidate child: joint probability P, the row of its parent in an
 * expansion and its rank among that parent's top-k. */
typedef struct { float P; int row, rank; } PolicyCand;
/* Keeps the `keep` candidates with the largest P (ties: earlier row, then
 * rank), in (row, rank) order; returns the new count. */
int policy_keep_top_P(PolicyCand *c, int n, int keep);
/* round(x) with halves up, as the SAGE / WETAP papers' widths use */
int policy_round_half_up(double x);

/* The policy modules (infer/spec/policies/). */
extern const PolicyClass policy_ar, policy_chain, policy_static, policy_eagle2, policy_c2t, policy_sage,
    policy_wetap;
#endif
