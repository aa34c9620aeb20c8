/* SAGE (the SAGE paper, §3): entropy-guided depth and width, per-level width
 * decay, a depth-adaptive probability threshold, a node cap and a sliding
 * window of acceptance lengths that lowers or raises the maximum depth.
 *
 * One cycle (build):
 *   α      the confidence of the PREVIOUS cycle's draft output (sage_alpha0 =
 *          0.5 on a sequence's first cycle); α = 1 − H(p̃)/log k, p̃ the draft's
 *          top-k probabilities renormalised (eqs. 7–9);
 *   D(α)   = Dmin + α·(Dmax' − Dmin)            (eq. 10), Dmax' the history-
 *                                               adjusted maximum depth;
 *   W(α)   = Wmin + (1 − α)·(Wmax − Wmin)        (eq. 11);
 *   W_l    = W(α) at level 1, W(α)·(1/l)·(0.5 + p_parent) below (eq. 12);
 *   θ_l    = 0.1·l / D(α) (the 0.1 is sage_theta, a parameter here);
 *   a node at level l is in the tree iff its sibling rank < W_l (of its
 *   parent) and its joint probability P > θ_l (the paper's "formally"
 *   sentence), its level is ≤ D(α), and the node cap is not reached.
 * feedback: the accepted count goes into a window of the last `window`
 * cycles; once full, a mean < lower lowers Dmax' by 1 (not below Dmin), a
 * mean > upper raises it by 1 (not above sage_dceil); in between it stays.
 *
 * Where the paper is ambiguous, and what is chosen here:
 *  1. "the draft model's output at decoding step t" (eq. 7, Alg. 1 P_out):
 *     which of the cycle's distributions gives α.  We use the draft's
 *     distribution at the cycle's root (the prediction of the first new
 *     token, one vector o_t as eq. 7 has it), computed while building cycle
 *     t and used for cycle t+1 ("use the entropy computed at step t to
 *     optimize the tree structure for step t+1", §3.2; Alg. 1 lines 15–18).
 *     Using the current root's distribution directly would be possible but
 *     is not SAGE's lookahead.
 *  2. First cycle: Alg. 1 line 3 sets α = 0.5; App. A.1 says the first tree
 *     is SpecVLM's static tree (Figure 4, whose shape the text does not
 *     give).  We use α = sage_alpha0 = 0.5 with the same construction.  The
 *     history and Dmax' are also reset when a new sequence starts (see 9).
 *  3. "Update T using (P_out, D, W, N_max)" (Alg. 1 line 18) vs the
 *     recursive construction "select the top-W_l candidates from the draft
 *     model's output distribution" (§3.2): the tree's tokens come from the
 *     current cycle's draft outputs; only α (hence D, W) comes from the
 *     previous cycle.
 *  4. Rounding: D(α) and W_l are real numbers.  The depth limit is
 *     round(D(α)) (half up; so α = 0 gives Dmin and α = 1 gives Dmax'), θ_l
 *     uses the unrounded D(α); W_l is round(·) half up, at least 1 (eq. 12
 *     reaches 0 deep in the tree for small W(α), which would forbid the deep
 *     chains SAGE wants at high confidence) and at most the children fetched.
 *  5. Level 1: "beyond the first level, we apply a depth-dependent decay", so
 *     W_1 = W(α) (eq. 12 at l = 1 would give 1.5·W(α)).
 *  6. P_parent in eq. 12 is "the probability of the parent node": we take
 *     the parent's own (local) draft probability, since where the paper
 *     means the path product it says "cumulative probability" (θ test).
 *  7. θ_l: the prose says candidates whose probability exceeds θ_l are
 *     expanded; the formal sentence says a path is in the tree iff every
 *     prefix has rank < W_l and cumulative probability > θ_l.  We follow the
 *     formal one: a candidate under θ_l is not in the tree.  A node whose P ≤
 *     θ_{l+1} cannot have children (children's P ≤ P), so it is not sent to
 *     the draft — this saves draft work and changes no tree.  The 0.1 is
 *     sage_theta (default 0.1): with flat draft distributions (small or
 *     untrained models) 0.1·l/D admits almost no node.
 *  8. Order and the node cap: "recursive expansion" with one draft call per
 *     node would be depth-first; we expand level by level (one batched draft
 *     call per level, as tree-drafting implementations do).  Without the cap
 *     the tree is the same (membership is a per-path rule); when the cap
 *     binds inside a level, the candidates of highest joint probability are
 *     kept (ties: earlier parent, then lower rank).  N_max counts draft
 *     nodes, the root excluded (γ per cycle ≤ N_max, like eagle2's total).
 *  9. History: "acceptance length" = the accepted draft tokens of a cycle
 *     (feedback's count, the bonus token excluded); the window is evaluated
 *     after every cycle once it holds `window` cycles and is not cleared
 *     after a change; steps are ±1; "falls below" / "exceeds" are strict.
 *     "We increase the maximum depth" has no ceiling in the paper; ours is
 *     sage_dceil (default 12), the floor is Dmin.  "Initialize" (Alg. 1) is
 *     per input sequence: a new sequence is recognised from the draft's
 *     committed length (a cycle that accepted a nodes advances it by a + 1;
 *     anything else means decoder_run started a new prompt), which resets
 *     α, the history and Dmax'.  A scripted draft has no such length: its
 *     state runs on across calls.
 * 10. k and width: the draft is asked for max(k, Wmax) children per node; α
 *     uses the first k.  k = 1 gives α = 1 (log k = 0).
 */
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* SAGE's own parameters (--param KEY=VALUE; defaults from the paper's
 * §5.1: Dmax 8, Dmin 3, Wmax 10, Wmin 2, k 10, 64 nodes, history window 10
 * with thresholds 2 and 3; α starts at 0.5 (Alg. 1); docs/policies_sage_wetap.md) */
typedef struct {
    int sage_dmin, sage_dmax;     /* depth range of D(α) = dmin + α(dmax − dmin) */
    int sage_wmin, sage_wmax;     /* width range of W(α) = wmin + (1 − α)(wmax − wmin) */
    int sage_k;                   /* top-k of the confidence α = 1 − H(top-k renormalised)/log k */
    int sage_nmax;                /* node cap N_max, root excluded, or POLICY_SIZE_AUTO */
    int sage_window;              /* acceptance history: sliding window of cycles */
    float sage_lower, sage_upper; /* mean accepted count below lower: max depth − 1; above upper: + 1 */
    int sage_dceil;               /* highest max depth the history may raise to (our choice: the paper gives none) */
    float sage_alpha0;            /* α of a sequence's first cycle (Algorithm 1, line 3) */
    float sage_theta;             /* threshold coefficient: θ_l = sage_theta·l/D(α) (paper: 0.1) */
} SageParams;

static const PolicyParamDef sage_params[] = {
    POLICY_INT(SageParams, sage_dmin, 3, 1, 64), POLICY_INT(SageParams, sage_dmax, 8, 1, 64),
    POLICY_INT(SageParams, sage_wmin, 2, 1, 1000), POLICY_INT(SageParams, sage_wmax, 10, 1, 1000),
    POLICY_INT(SageParams, sage_k, 10, 1, 1000), POLICY_INT_OR_AUTO(SageParams, sage_nmax, 64, 1, 100000),
    POLICY_INT(SageParams, sage_window, 10, 1, 100000), POLICY_FLOAT(SageParams, sage_lower, 2, 0, 1000, 0),
    POLICY_FLOAT(SageParams, sage_upper, 3, 0, 1000, 0), POLICY_INT(SageParams, sage_dceil, 12, 1, 64),
    POLICY_FLOAT(SageParams, sage_alpha0, 0.5, 0, 1, 0), POLICY_FLOAT(SageParams, sage_theta, 0.1, 0, 1, 0),
};

/* sage_nmax auto (not in the paper): SAGE's tree under a cap of
 * SAGE_AUTO_MAX nodes, grown while a further level can pay for its draft
 * step under the decoder's measured costs (cost.h), then the prefix by
 * joint probability P that maximises expected tokens per second. */
#define SAGE_AUTO_MAX 128

typedef struct {
    Tree scratch;       /* for sage_nmax auto's rerank */
    Tree mirror;        /* the pool on the host (sage_grow) */
    float alpha;        /* confidence for the next build */
    int dmax;           /* history-adjusted maximum depth Dmax' */
    int *hist, n_hist, next;   /* ring of the last `window` accepted counts */
    long build_n_past;  /* draft's committed length when this cycle was built, -1 = unknown */
    long expect_n_past; /* where the next cycle of the same sequence starts, -1 = unknown */
} SageState;

static void sage_reset(SageState *s, const SageParams *q) {
    s->alpha = q->sage_alpha0;
    s->dmax = q->sage_dmax;
    s->n_hist = s->next = 0;
    s->build_n_past = s->expect_n_past = -1;
}

/* α = 1 − H(renormalised top-k)/log k (eqs. 7–9), clamped to [0, 1]. */
static float sage_confidence(const float *probs, int k) {
    if (k <= 1) return 1.0f;
    double sum = 0, h = 0;
    for (int i = 0; i < k; i++) if (probs[i] > 0) sum += probs[i];
    if (sum <= 0) return 0.0f;
    for (int i = 0; i < k; i++)
        if (probs[i] > 0) { double q = probs[i] / sum; h -= q * log(q); }
    double a = 1.0 - h / log((double)k);
    return (float)(a < 0 ? 0 : a > 1 ? 1 : a);
}

/* The cycle's tree grown in c's pool layer by layer from the host's
 * choices on t, which mirrors it node for node (cycle_expand_read). */
static int sage_grow(Policy *p, Draft *d, Tree *t, DevCycle *c, StageTimes *tm) {
    SageState *s = p->state;
    const SageParams *q = p->own;
    if (d->n_past > 0) {   /* a draft without a context (a scripted test draft) cannot tell sequences apart */
        if (s->expect_n_past >= 0 && d->n_past != s->expect_n_past) sage_reset(s, q);
        s->build_n_past = d->n_past;
        s->expect_n_past = -1;
    }
    const double alpha = s->alpha;
    const double D = q->sage_dmin + alpha * (s->dmax - q->sage_dmin);
    const double W = q->sage_wmin + (1.0 - alpha) * (q->sage_wmax - q->sage_wmin);
    int dcap = policy_round_half_up(D);
    if (dcap < 1) dcap = 1;
    const int K = q->sage_k > q->sage_wmax ? q->sage_k : q->sage_wmax;
    CostModel *cost = q->sage_nmax == POLICY_SIZE_AUTO ? p->cost : NULL;
    const int cap = cost ? SAGE_AUTO_MAX : q->sage_nmax;
    const double t_start = now_seconds();
    int expands = 0;

    int fcap = 16, nf = 1, added = 0, rc = 0;
    int *front = xmalloc(sizeof(int) * fcap);
    int *ids = xmalloc(sizeof(int) * fcap * K);
    float *probs = xmalloc(sizeof(float) * fcap * K), *ent = xmalloc(sizeof(float) * fcap);
    PolicyCand *cand = xmalloc(sizeof(PolicyCand) * fcap * K);
    front[0] = 0;
    for (int l = 1; l <= dcap && nf > 0 && added < cap; l++) {
        const double theta = q->sage_theta * l / D;
        /* nodes whose P cannot leave a child above θ_l are not expanded */
        int m = 0;
        for (int i = 0; i < nf; i++) if ((double)t->P[front[i]] > theta) front[m++] = front[i];
        nf = m;
        if (!nf) break;
        /* auto: the first level always (α for the next cycle comes from it) */
        if (cost && l > 1 && !policy_layer_pays(t, front, nf, cost, expands)) break;
        rc = cycle_expand_read(c, d, front, nf, K, p->prm.topm, ids, probs, ent, tm);
        if (rc) break;
        expands++;
        if (l == 1) s->alpha = sage_confidence(probs, q->sage_k < K ? q->sage_k : K);   /* for the next cycle */
        int nc = 0;
        for (int i = 0; i < nf; i++) {
            const int v = front[i];
            double wl = l == 1 ? W : W * (1.0 / l) * (0.5 + t->p[v]);
            int w = policy_round_half_up(wl);
            if (w < 1) w = 1;
            if (w > K) w = K;
            for (int r = 0; r < w; r++) {
                const int j = i * K + r;
                if (ids[j] < 0 || probs[j] <= 0) continue;
                float P = t->P[v] * probs[j];
                if ((double)P > theta) cand[nc++] = (PolicyCand){P, i, r};
            }
        }
        nc = policy_keep_top_P(cand, nc, cap - added);
        if (nc > fcap) {
            while (fcap < nc) fcap *= 2;
            ids = xrealloc(ids, sizeof(int) * fcap * K);
            probs = xrealloc(probs, sizeof(float) * fcap * K);
            ent = xrealloc(ent, sizeof(float) * fcap);
            cand = xrealloc(cand, sizeof(PolicyCand) * fcap * K);
        }
        /* front[] still names the parents: add first, then make the new front */
        int *next = xmalloc(sizeof(int) * (nc ? nc : 1));
        for (int i = 0; i < nc; i++) {
            const int j = cand[i].row * K + cand[i].rank;
            next[i] = tree_add(t, front[cand[i].row], ids[j], probs[j], ent[cand[i].row], cand[i].rank);
        }
        cycle_grow_cands(c, d, cand, nc, K);
        added += nc;
        free(front);
        front = next;
        nf = nc;
    }
    free(front); free(ids); free(probs); free(ent); free(cand);
    if (cost && !rc) {
        cost_observe_expand(cost, expands, now_seconds() - t_start);
        policy_rerank_by_P(t, POLICY_SIZE_AUTO, 0, &s->scratch, cost, cost_draft_s(cost, expands), c);
        cycle_keys_from(c, t);
    }
    return rc;
}

/* The program: the host's choices on a mirror of the pool, whose root's
 * token stays on the device (no choice reads it). */
static int sage_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    SageState *s = p->state;
    tree_reset(&s->mirror, -1);
    return sage_grow(p, d, &s->mirror, c, tm);
}

static void sage_feedback(Policy *p, int accepted) {
    SageState *s = p->state;
    const SageParams *q = p->own;
    if (s->build_n_past >= 0) s->expect_n_past = s->build_n_past + accepted + 1;
    s->hist[s->next] = accepted;
    s->next = (s->next + 1) % q->sage_window;
    if (s->n_hist < q->sage_window) s->n_hist++;
    if (s->n_hist < q->sage_window) return;
    double mean = 0;
    for (int i = 0; i < q->sage_window; i++) mean += s->hist[i];
    mean /= q->sage_window;
    if (mean < q->sage_lower && s->dmax > q->sage_dmin) s->dmax--;
    else if (mean > q->sage_upper && s->dmax < q->sage_dceil) s->dmax++;
}

static void sage_destroy(Policy *p) {
    SageState *s = p->state;
    free(s->hist);
    tree_free(&s->scratch);
    tree_free(&s->mirror);
    free(s);
}

static int sage_init(Policy *p) {
    const SageParams *q = p->own;
    if (q->sage_dmin < 1 || q->sage_dmin > q->sage_dmax || q->sage_dmax > q->sage_dceil) {
        err_set("sage: need 1 <= sage_dmin <= sage_dmax <= sage_dceil (got %d, %d, %d)", q->sage_dmin,
                q->sage_dmax, q->sage_dceil);
        return -1;
    }
    if (q->sage_wmin < 1 || q->sage_wmin > q->sage_wmax) {
        err_set("sage: need 1 <= sage_wmin <= sage_wmax (got %d, %d)", q->sage_wmin, q->sage_wmax);
        return -1;
    }
    if (q->sage_k < 1 || (q->sage_nmax < 1 && q->sage_nmax != POLICY_SIZE_AUTO) || q->sage_window < 1) {
        err_set("sage: sage_k, sage_nmax and sage_window must be at least 1");
        return -1;
    }
    if (q->sage_lower > q->sage_upper) {
        err_set("sage: sage_lower %g exceeds sage_upper %g", q->sage_lower, q->sage_upper);
        return -1;
    }
    if (!(q->sage_alpha0 >= 0 && q->sage_alpha0 <= 1) || !(q->sage_theta >= 0 && q->sage_theta <= 1)) {
        err_set("sage: sage_alpha0 and sage_theta must be in [0, 1]");
        return -1;
    }
    SageState *s = xcalloc(1, sizeof *s);
    s->hist = xcalloc(q->sage_window, sizeof(int));
    tree_init(&s->scratch);
    tree_init(&s->mirror);
    sage_reset(s, q);
    p->state = s;
    p->wants_cost = q->sage_nmax == POLICY_SIZE_AUTO;
    p->build = sage_build;
    p->feedback = sage_feedback;
    p->destroy = sage_destroy;
    return 0;
}

static int sage_max_nodes(const Policy *p) {
    const int nmax = ((const SageParams *)p->own)->sage_nmax;
    return 1 + (nmax == POLICY_SIZE_AUTO ? SAGE_AUTO_MAX : nmax);
}

const PolicyClass policy_sage = {"sage", sage_init, sage_max_nodes, POLICY_PARAMS(sage_params, SageParams)};
