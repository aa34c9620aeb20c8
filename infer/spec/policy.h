/* Tree policies: how the draft tree is built each cycle.  Each policy is a
 * small module registered in infer/spec/policy.c; the decoding loop only calls
 * build() and feedback(), so new methods plug in without touching it. */
#ifndef C2T_POLICY_H
#define C2T_POLICY_H
#include "infer/spec/draft.h"
#include "infer/spec/tree.h"

/* Every policy parameter; each policy reads the ones it needs. */
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
    /* sage (the SAGE paper §3; defaults from its §5.1; docs/policies_sage_wetap.md) */
    int sage_dmin, sage_dmax;     /* depth range of D(α) = dmin + α(dmax − dmin) */
    int sage_wmin, sage_wmax;     /* width range of W(α) = wmin + (1 − α)(wmax − wmin) */
    int sage_k;                   /* top-k of the confidence α = 1 − H(top-k renormalised)/log k */
    int sage_nmax;                /* node cap N_max, root excluded */
    int sage_window;              /* acceptance history: sliding window of cycles */
    float sage_lower, sage_upper; /* mean accepted count below lower: max depth − 1; above upper: + 1 */
    int sage_dceil;               /* highest max depth the history may raise to (not in the paper) */
    float sage_alpha0;            /* α of a sequence's first cycle (Algorithm 1, line 3) */
    float sage_theta;             /* threshold coefficient: θ_l = sage_theta·l/D(α) (paper: 0.1) */
    /* wetap (the WETAP paper §3.2) */
    int wetap_depth;              /* layers L of the tree before pruning */
    int wetap_wmin, wetap_wmax;   /* width range; layer 1 has wmin nodes */
    float wetap_gamma;            /* W_{t+1} = wmin + (wmax − wmin)·H_norm(t)^γ */
    float wetap_alpha;            /* pruning score α·p_norm + (1 − α)·d/L */
    int wetap_budget;             /* draft nodes kept by pruning, root excluded */
} PolicyParams;

void policy_params_default(PolicyParams *p);
/* Sets one sage_* / wetap_* parameter from text (spec-eval --param KEY=VALUE).
 * value NULL: key is "KEY=VALUE".  Unknown key or a bad value: -1 with a
 * one-line error naming it. */
int policy_params_set(PolicyParams *p, const char *key, const char *value);
/* The i-th parameter policy_params_set knows: its key and current value
 * (for --help and reports); -1 past the last. */
int policy_param_get(const PolicyParams *p, int i, const char **key, double *value);

/* Time a policy spends, split as the reports show it (seconds): draft
 * forwards; the distribution step on the draft's logits (softmax, top-k and,
 * when asked for, top-M entropy: one fused kernel); feature assembly for a
 * classifier (joint probabilities, depths, second top-K); the classifier. */
typedef struct {
    double draft, dist, features, classifier;
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

/* A candidate child: joint probability P, the row of its parent in an
 * expansion and its rank among that parent's top-k. */
typedef struct { float P; int row, rank; } PolicyCand;
/* Keeps the `keep` candidates with the largest P (ties: earlier row, then
 * rank), in (row, rank) order; returns the new count. */
int policy_keep_top_P(PolicyCand *c, int n, int keep);
/* round(x) with halves up, as the SAGE / WETAP papers' widths use */
int policy_round_half_up(double x);

/* Registration: each policy module defines one constructor. */
int policy_ar_init(Policy *p);
int policy_chain_init(Policy *p);
int policy_static_init(Policy *p);
int policy_eagle2_init(Policy *p);
int policy_c2t_init(Policy *p);
int policy_sage_init(Policy *p);
int policy_wetap_init(Policy *p);
#endif
