/* Tree policies: how the draft tree is built each cycle.  Each policy is a
 * small module registered in infer/speculative/policy.c; the decoding loop only calls
 * build() (and build_end(), program_for(), feedback() where set), so new
 * methods plug in without touching it. */
#ifndef C2T_POLICY_H
#define C2T_POLICY_H
#include "infer/speculative/cost.h"
#include "infer/speculative/draft.h"
#include "infer/speculative/tree.h"
#include <stddef.h>

/* What the decoding loop needs of every policy, and the policy's own
 * settings as KEY=VALUE text.  Each policy owns its settings in a table
 * (PolicyParamDef, in its module): key, type, default and range; policy_new
 * checks every pair against that table, so a setting the policy does not
 * have is an error, not silently ignored. */
typedef struct {
    char name[32];
    int topm;            /* entropy over the top-M probabilities (0 = exact) */
    int want_entropy;    /* record each node's entropy H (spec-collect) */
    /* one pair per line, "KEY=VALUE" (--param) or "--flag=VALUE" (a
     * command's named option, e.g. --topk for key topk); later pairs win */
    char settings[8192];
} PolicyParams;

void policy_params_default(PolicyParams *p);
/* Records one setting: key "topk" or "--topk" (a command-line flag: its
 * name with '-' for '_'), value NULL when key is "KEY=VALUE".  Malformed:
 * -1 with a one-line error. */
int policy_params_set(PolicyParams *p, const char *key, const char *value);
/* Whether a setting of key (a table key, e.g. "draft_len") was recorded,
 * as KEY=VALUE or as its command-line flag (--draft-len). */
int policy_params_given(const PolicyParams *p, const char *key);

/* One setting a policy owns: its key (the --param name; --flag spelling
 * with '-' for '_'), type ('i' int, 'a' int or "all" (= -1, as reported), 'u' int, 'f'
 * float, 's' text), offset and size in the policy's struct, default and range ([lo,
 * hi], or (lo, hi] with lo_open).  Types 'a' and 'u' also take "auto" (stored as
 * POLICY_SIZE_AUTO, reported as the text "auto"): the size chosen each cycle
 * from measured costs (cost.h). */
#define POLICY_SIZE_AUTO (-2)
typedef struct {
    const char *key;
    char type;
    size_t off, size;
    double def, lo, hi;
    int lo_open;
    const char *text_def;
} PolicyParamDef;
#define POLICY_INT(S, f, def, lo, hi) {#f, 'i', offsetof(S, f), sizeof(int), def, lo, hi, 0, NULL}
#define POLICY_INT_OR_ALL(S, f, def, lo, hi) {#f, 'a', offsetof(S, f), sizeof(int), def, lo, hi, 0, NULL}
#define POLICY_INT_OR_AUTO(S, f, def, lo, hi) {#f, 'u', offsetof(S, f), sizeof(int), def, lo, hi, 0, NULL}
#define POLICY_FLOAT(S, f, def, lo, hi, open) {#f, 'f', offsetof(S, f), sizeof(float), def, lo, hi, open, NULL}
#define POLICY_TEXT(S, f, def) {#f, 's', offsetof(S, f), sizeof(((S *)0)->f), 0, 0, 0, 0, def}
#define POLICY_PARAMS(table, S) table, (int)(sizeof table / sizeof *table), sizeof(S)

/* Seconds of decoding per stage, as the reports split them: the prompt's
 * prefill; draft forwards; the distribution step on the draft's logits
 * (softmax, top-k and, when asked for, top-M entropy: one fused kernel);
 * feature assembly for a classifier (joint probabilities, depths, second
 * top-K); the classifier; the target's verification; calibration (the
 * cost curve's, a run's first turn unless the curve was cached, and
 * --draft-vocab auto's timed steps, once a run); and the
 * whole run.  A policy's build adds to draft, dist, features and classifier. */
typedef struct {
    double prefill, draft, dist, features, classifier, verify, calibrate, total;
} StageTimes;

/* The decode time speeds are measured by: the whole run less its prefill
 * and calibration (one-time costs, reported apart). */
static inline double stage_decode_s(const StageTimes *t) { return t->total - t->prefill - t->calibrate; }

typedef struct Policy Policy;
typedef struct DevCycle DevCycle;   /* cycle.h */
typedef struct PolicyClass PolicyClass;
struct Policy {
    const char *name;
    const PolicyClass *cls;
    PolicyParams prm;
    void *own;           /* the policy's settings struct (cls->params), or NULL */
    void *state;
    int needs_draft;
    /* Set by init when a size is "auto"; the decoder's cost observer
     * (infer/session/observers.h) then lends its model (calibrated, refined
     * each cycle) in `cost` before the first build. */
    int wants_cost;
    CostModel *cost;
    /* Builds the cycle's tree in backend memory by the cycle's tree ops
     * into c (cycle.h: from cycle_begin's root; sets c->verified and
     * c->n_verified).  Its host-side work depends on the tree's values
     * only through what it reads, counted (cycle.h: pass counts, keys, the
     * distributions SAGE's and WETAP's choices need). */
    int (*build)(Policy *p, Draft *d, DevCycle *c, StageTimes *tm);
    /* Set where build reads nothing back to the host (no pass count) and
     * its host-side state after a build does not depend on how often it
     * ran: then the decoder may issue the whole draft phase as one
     * recorded unit (backend_recorded: one graph on a GPU). */
    int build_unit;
    /* Optional: the rest of a program that reads once after drafting
     * (C2T's fixed shapes: the tree's size), run by the decoder after the
     * draft phase and before the verification; sets c->verified and
     * c->n_verified. */
    int (*build_end)(Policy *p, DevCycle *c, StageTimes *tm);
    /* Optional: told the backend before the first build, where a policy
     * has more than one program (C2T: a read per layer, or fixed shapes
     * and one read); it sets build and the above. */
    void (*program_for)(Policy *p, const Backend *be);
    /* Optional, after verification: how many nodes were accepted (SAGE
     * keeps a history). */
    void (*feedback)(Policy *p, int accepted);
    void (*destroy)(Policy *p);
};

/* What a policy module exports: one of these, listed in policy.c's registry.
 * init reads p->prm (what the loop needs) and p->own (its settings, defaults
 * applied, values checked) and sets build / feedback / destroy / state;
 * max_nodes bounds the nodes its tree can hold (KV cache sizing). */
struct PolicyClass {
    const char *name;
    int (*init)(Policy *p);
    int (*max_nodes)(const Policy *p);
    const PolicyParamDef *params;
    int n_params;
    size_t params_size;
};

/* Whether the named policy has the setting key ("topk" or "--topk"). */
int policy_has_setting(const char *policy, const char *key);
/* Records key=value (an int) only where the policy has that setting: for
 * callers that describe many policies' runs by one set of numbers. */
void policy_params_set_int_if_owned(PolicyParams *p, const char *key, int value);

/* Unknown policy or an invalid parameter: NULL with a one-line error. */
Policy *policy_new(const PolicyParams *prm);
/* The policy of class cls (one not in the registry: a module being
 * written, a test's), its settings checked as policy_new checks them. */
Policy *policy_new_with(const PolicyClass *cls, const PolicyParams *prm);
void policy_free(Policy *p);
/* Names of the registered policies, space separated (for --help). */
const char *policy_names(void);
/* Upper bound on the nodes a policy's tree can hold (KV cache sizing). */
int policy_max_nodes(const Policy *p);
/* The i-th setting the policy owns, for reports: its key and either a
 * number (*text = NULL) or a text; -1 past the last. */
int policy_param_get(const Policy *p, int i, const char **key, double *num, const char **text);
/* The value of the setting `key` as a number; -1 with an error when the
 * policy has no such numeric setting. */
int policy_param_num(const Policy *p, const char *key, double *num);

/* The choices the policy modules share (defined in cycle.c, below them).
 * A candidate child: joint probability P, the row of its parent in an
 * expansion and its rank among that parent's top-k. */
typedef struct { float P; int row, rank; } PolicyCand;
/* Keeps the `keep` candidates with the largest P (ties: earlier row, then
 * rank), in (row, rank) order; returns the new count. */
int policy_keep_top_P(PolicyCand *c, int n, int keep);
/* round(x) with halves up, as the SAGE / WETAP papers' widths use */
int policy_round_half_up(double x);

/* EAGLE-2's rerank order over a tree's nodes (qsort_r, the tree as
 * context): higher joint probability P first, then the shallower, then the
 * earlier node.  P never grows along a path, so every prefix of this order
 * is closed under parents. */
int policy_by_joint_prob(const void *a, const void *b, void *tree);
/* Keeps the root and the `total` nodes first in that order (-1: all), of
 * them those with P >= min_p; with total POLICY_SIZE_AUTO the prefix
 * cost_best_prefix picks (each node's acceptance estimated by its P) for a
 * cycle whose drafting took draft_s.  t is the host mirror of c's pool:
 * the same nodes are kept there (cycle_keep_nodes).  scratch: a tree to
 * build into. */
void policy_rerank_by_P(Tree *t, int total, float min_p, Tree *scratch, CostModel *cost, double draft_s, DevCycle *c);
/* Every node of t but the root in policy_by_joint_prob's order into order,
 * their acceptance estimates (cost_estimate; t's P and depths alone are
 * read) into est; returns how many. */
int policy_pool_estimates(const Tree *t, const CostModel *cost, int *order, float *est);
/* Whether expanding the nf nodes front can pay under cost after `expands`
 * steps (cost_layer_pays over the tree ranked by P; the children's P sum
 * to at most their parents'). */
int policy_layer_pays(const Tree *t, const int *front, int nf, const CostModel *cost, int expands);
/* Keeps, in order, the nodes of front[0..nf) whose P reaches
 * cost_node_price over the tree ranked by P (drafting as after one more
 * step, up to k children each): the others' children cannot pay for their
 * verification.  Returns how many are kept; with pays, also whether
 * expanding the kept ones can pay (policy_layer_pays, from the same
 * ranking). */
int policy_front_worth(const Tree *t, int *front, int nf, int k, const CostModel *cost, int expands, int *pays);

/* A thresholded device program's choice (the `program` setting of c2t and
 * of a chain with an early stop): "layers" reads each layer's pass count,
 * "fixed" runs every layer at fixed shapes and reads once, "auto" is fixed
 * where the backend records units (a GPU, whose reads are waits), else
 * layers (a CPU, which pays for the dead rows).  policy_program_valid:
 * whether program is one of the three (else -1 with a one-line error
 * naming policy); policy_program_fixed: auto resolved in place for be (the
 * report then says which ran), 1 for fixed. */
int policy_program_valid(const char *policy, const char *program);
int policy_program_fixed(char *program, size_t size, const Backend *be);

/* The policy modules (infer/speculative/policies/). */
extern const PolicyClass policy_ar, policy_chain, policy_static, policy_eagle2, policy_c2t, policy_sage,
    policy_wetap;
#endif
