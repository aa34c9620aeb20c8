/* Tree sizes from measured costs (--total auto).
 *
 * A cycle that verifies n tree tokens costs the draft's time D plus the
 * target's forward over n tokens V(n), and yields 1 + (expected accepted
 * nodes) tokens.  With nodes ranked as the policy ranks them and an
 * acceptance estimate e_i for each (the joint probability P for a
 * calibrated head), the policy keeps the prefix of k nodes that maximises
 *     (1 + e_0 + ... + e_{k-1}) / (D + V(k + 1)),
 * expected tokens per second (the root is verified too, hence k + 1).
 *
 * V comes from a calibration pass (the target's forward timed at a few
 * token counts on the turn's own context, interpolated between them, past
 * the last along the last segment but never below proportion to the last
 * point), and the cycles' own verification times correct it, so the
 * curve follows what they really cost (lazy logits, cache effects, load):
 *   - a running ratio of measured to calibrated times, the whole curve's;
 *   - each calibration point's own ratio, learnt from the cycles whose
 *     token count lies beside it (shared by interpolation weight), and
 *     trusted beside the whole curve's as its observations grow
 *     (COST_POINT_PRIOR).  A single calibration times each count once or
 *     twice, and its noise (±10% a point, measured) changed the shape of
 *     the curve, and with it the sizes chosen, from run to run; the points
 *     the cycles use are now measured hundreds of times.
 * Both follow a change of load (COST_EMA).  A forward over more tokens
 * never costs less, so the calibrated times are made non-increasing from
 * the right (their noise only adds time: a point above a later one was
 * slowed), and the corrected curve non-decreasing.  D is the running mean
 * of the cycles' draft times. */
#ifndef C2T_COST_H
#define C2T_COST_H
#include <stddef.h>
#include <stdint.h>

#define COST_MAX_POINTS 16
#define COST_POINT_PRIOR 8.0   /* observations at which a point's own ratio weighs as much as the curve's */
#define COST_HIST 257   /* chosen sizes 0..255, and 256 for larger ones */

/* Acceptance estimates.  A node's P is what the draft says its path's
 * chance is; the verified trees say how far that holds.  With a reduced
 * draft vocabulary (its softmax spread over fewer ids) and on text unlike
 * the head's training, P overstated the accepted nodes by 30-50% on SmolLM2,
 * which overvalues deep nodes and grows trees past their best size.  So
 * each depth keeps the verified nodes' summed P and the accepted nodes
 * (decayed by COST_ACCEPT_DECAY a cycle: about the last 100 cycles), and a
 * node's estimate is its P times its depth's ratio of the two; a depth with
 * little evidence leans on the ratio of the depth above it
 * (COST_ACCEPT_PRIOR of predicted acceptance weighs as much as its own),
 * and the root's children on 1.  The ranking stays the policy's (P or path
 * confidence): only the gains the sizes are chosen by change. */
#define COST_DEPTHS 16            /* depths tracked; deeper nodes share the last */
#define COST_ACCEPT_PRIOR 2.0
#define COST_ACCEPT_DECAY 0.99

/* Whether drafting pays at all.  A cycle that drafts nothing verifies its
 * root alone, as plain decoding does, and spares every draft forward (the
 * draft catches up on those tokens when drafting resumes).  Measured, not
 * modelled: cycles run in the mode chosen (drafting at first); after a
 * reference window, then every `period` cycles, a probe runs in the other
 * mode, and its tokens per second against those of the reference window
 * just before it (the neighbouring cycles: the same text, load and,
 * batched, the same sequences) decide the next choice.  The windows hold
 * SWITCH_REF and SWITCH_PROBE sequence-cycles (a drafting cycle's tokens
 * vary, so the reference is the longer): batched, where a cycle is a round
 * of every sequence, that many over its sequences, at least
 * SWITCH_MIN_ROUNDS rounds.  Drafting is given up only when a second
 * probe, after a reference window of its own, agrees with a first: one
 * window of 16 drafting cycles holds too few paths to rank two modes a
 * few tenths apart (Qwen2.5-Coder 1.5B + 0.5B on a 2-vCPU EPYC: single
 * probes turned drafting off in 5 of 26 runs, in one for 85% of its
 * cycles where drafting ran at 38 tokens/s and not drafting at 29), and a
 * wrong choice of not drafting is probed again only after its periods.  The period doubles, up to SWITCH_PERIOD_MAX,
 * while a probe confirms the choice by more than SWITCH_MARGIN, and returns
 * to SWITCH_PERIOD when the choice changes.  A probe that confirms the
 * choice also sets the period long enough that its own cost (its seconds
 * past what the chosen mode takes for its tokens) is at most
 * SWITCH_PROBE_SHARE of the period's time: a probe of a much slower mode
 * (a draft that must first catch up on hundreds of tokens, batched) comes
 * seldom, a near-tie's often.  Under --draft-vocab auto the
 * switch starts once the vocabulary is chosen (decode.c): its exploration
 * drafts from the largest vocabulary, and judging drafting by those cycles
 * turned it off where it paid. */
#define SWITCH_PERIOD 32
#define SWITCH_PERIOD_MAX 512
#define SWITCH_PROBE 8
#define SWITCH_REF 16
#define SWITCH_MIN_ROUNDS 3
#define SWITCH_MARGIN 1.1
#define SWITCH_PROBE_SHARE 0.02
typedef struct {
    int off;                        /* the next cycle drafts nothing */
    int chosen_off;                 /* the mode chosen (off differs from it during a probe) */
    int left;                       /* cycles of this stretch still to observe */
    int confirming;                 /* the last probe found not drafting faster: the next one decides */
    int period;
    int ref_cycles, probe_cycles;   /* the windows, in cycles */
    double ref_tokens, ref_seconds;     /* the chosen mode's last ref_cycles before a probe */
    double probe_tokens, probe_seconds; /* the probe's */
    double rate[2];                 /* tokens per second at each mode's last window: [0] drafting, [1] not */
    int64_t cycles[2];              /* cycles seen per mode */
    double seen_tokens[2], seen_seconds[2];   /* over every cycle seen per mode */
    int64_t changes;                /* times the choice changed */
    double round_tokens;            /* batched: the tokens of the round being accepted */
} DraftSwitch;

/* sequences: 1, or a batch's (its cycles are rounds). */
void draft_switch_init(DraftSwitch *s, int sequences);
/* One cycle seen: whether it drafted nothing, its tokens and seconds;
 * sets s->off for the next.  A cycle of the other mode than the stretch's
 * (batched, the round built before a change is observed after it) only
 * counts. */
void draft_switch_observe(DraftSwitch *s, int off, double tokens, double seconds);

typedef struct {
    int n_pts;                          /* 0 until calibrated */
    int n[COST_MAX_POINTS];             /* token counts timed, ascending */
    double verify_s[COST_MAX_POINTS];   /* seconds of the target's forward over them */
    double calibration_s;               /* what the calibration pass took */
    double scale;                       /* measured / calibrated verification time, running mean */
    double ratio[COST_MAX_POINTS];      /* the same, each point's own, from the cycles beside it */
    double weight[COST_MAX_POINTS];     /* the observations' weight each point has seen */
    double draft_s;                     /* a cycle's draft time, running mean */
    double expand_s;                    /* one expansion step (a draft forward), running mean */
    double expands;                     /* expansion steps a cycle, running mean */
    int64_t expand_cycles;              /* cycles whose expansions were observed */
    int64_t cycles;                     /* cycles observed */
    int64_t chosen, chosen_sum;         /* prefixes chosen and their total size */
    double predicted_tokens;            /* over the chosen prefixes, 1 + their estimates: the tokens the
                                         * estimates promised (÷ chosen = the predicted τ) */
    /* acceptance by depth (index 1..COST_DEPTHS) */
    double accept_p[COST_DEPTHS + 1];   /* verified nodes' P summed, decayed */
    double accept_n[COST_DEPTHS + 1];   /* accepted nodes, decayed */
    double accept_ratio[COST_DEPTHS + 1];   /* the estimates' factor at each depth ([0] = 1) */
    double accept_p_total[COST_DEPTHS + 1], accept_n_total[COST_DEPTHS + 1];   /* the same, not decayed (reported) */
    int64_t verified_cycles;            /* drafting cycles whose acceptance was observed */
    double verified_tokens;             /* their tokens (accepted nodes + 1): ÷ verified_cycles = their τ */
    int64_t hist[COST_HIST];            /* how often each size was chosen */
    int from_cache;                     /* the curve came from the calibration cache */
    char cache_key[1024];               /* its key there (decoder_cost_key), "" without a cache */
    /* Batched decoding (infer/session/batch.c): the round's other trees share the
     * target's forward, so the curve's token count is the whole round's;
     * the others' verified tokens (roots included) and expected tokens
     * count beside this tree's in every rate (cost_best_rate).  0 alone. */
    int load_tokens;
    double load_gain;
    /* Trees of more tokens than lazy_nodes are scored lazily (cycle.h's
     * lazy_logits_nodes): the curve times their forward without logits, and
     * the walk after it scores each path row alone, row_s seconds a row (an
     * LM-head product of one token, calibrated), 1 + accepted rows a cycle.
     * So such a tree's verification is priced V(n) + (expected tokens) *
     * row_s, and its observed time is net of its rows' before it corrects
     * the curve.  0 and 0 where nothing is scored lazily (and in a batch,
     * whose rounds score their rows together). */
    int lazy_nodes;
    double row_s;
    /* The latest choice: tokens verified (k + 1) and expected (1 + estimates). */
    int last_tokens;
    double last_gain;
    DraftSwitch sw;                     /* whether drafting pays (a batch's: the slots' shared one) */
    int hold;                           /* 1 while the cycle is not the run's kind (a thread tuner's
                                         * probe of a setting it has not chosen): its times are not
                                         * learnt, by the curve, the draft's costs or the switch */
} CostModel;

/* An empty model (scale 1, no points). */
void cost_init(CostModel *m);
/* Adds a calibration point (n ascending); -1 when the model is full. */
int cost_add_point(CostModel *m, int n, double seconds);
/* After a calibration pass: each point's time lowered to the least of its
 * own and the later points' (see above). */
void cost_settle_calibration(CostModel *m);
/* Predicted seconds of a forward over n tokens: the corrected points
 * (each point's time times its ratio, weighed with the whole curve's;
 * non-decreasing) interpolated linearly, extended by the last segment
 * beyond the largest point. */
double cost_verify_s(const CostModel *m, int n);
/* The corrected curve as calibration points, for the cache (cost_cache_put):
 * the next run starts from what this one learnt. */
void cost_corrected_curve(const CostModel *m, CostModel *out);
/* The largest (1 + extra_gain + est[0] + ... + est[k-1]) /
 * (draft_s + cost_verify_s(k + 1 + extra_tokens), plus the walk's rows
 * where that many tokens are scored lazily) over k in [0, n], and that
 * k in *k_best; est in the policy's rank order (negative values count 0).
 * The batch's load adds to extra_gain and extra_tokens. */
double cost_best_rate(const CostModel *m, const float *est, int n, double draft_s, double extra_gain, int extra_tokens,
                      int *k_best);
/* cost_best_rate's k with no extra: the prefix to keep; records the choice
 * in the model's histogram, its expected tokens in predicted_tokens and
 * both in last_tokens / last_gain. */
int cost_best_prefix(CostModel *m, const float *est, int n, double draft_s);
/* A cycle's drafting time with `expands` expansion steps: the measured
 * per-step time times expands, plus the rest of a cycle's drafting (catch-up,
 * the root's step's overhead) as the running means give it. */
double cost_draft_s(const CostModel *m, int expands);
/* Whether one more expansion layer can pay: nodes ranked est[0..n) after
 * `expands` steps, the new layer's children carrying at most `gain_bound`
 * of acceptance in all (their parents' estimates: a node's children's
 * probabilities sum to at most 1).  An upper bound: 0 means no tree the next
 * layer allows beats the best one now, counting the step's time. */
int cost_layer_pays(const CostModel *m, const float *est, int n, int expands, double gain_bound);
/* The least estimate a node must carry to be worth verifying beside the
 * best prefix of est[0..n) (cycle drafting draft_s): j more nodes can raise
 * the best rate r only if their estimates sum to more than
 * r * (V(k + 1 + j) - V(k + 1)), so no node below r times the cheapest
 * average cost of j more tokens, over j in [1, max_new], can help.  A node
 * whose estimate is below this price has no children worth drafting (their
 * P is at most its own).  Batched, V's arguments start after the load's
 * tokens. */
double cost_node_price(const CostModel *m, const float *est, int n, double draft_s, int max_new);
/* A node's acceptance estimate: P times its depth's ratio (above), at most
 * 1; P itself without a model (m NULL). */
float cost_estimate(const CostModel *m, float P, int depth);
/* One verified tree: n nodes' P and depths (node 0, the root, skipped) and
 * how many of them were accepted (a path, one a depth from 1). */
void cost_observe_acceptance(CostModel *m, const float *P, const int *depth, int n, int accepted);
/* One cycle's expansions: `expands` steps that took `seconds` in all. */
void cost_observe_expand(CostModel *m, int expands, double seconds);
/* One cycle seen: n tokens verified in verify_s seconds after draft_s
 * seconds of drafting, walked_rows of them scored one at a time after the
 * forward (lazy logits; their row_s each is taken out of verify_s);
 * updates the running ratio and draft time. */
void cost_observe(CostModel *m, int n, double verify_s, double draft_s, int walked_rows);
/* Adds x's choices (counts, histogram, predicted tokens, acceptance
 * totals) to sum's: the slots of a batch reported as one. */
void cost_add_choices(CostModel *sum, const CostModel *x);
/* Zeroes what cost_add_choices adds. */
void cost_clear_choices(CostModel *m);
/* The chosen sizes' p-quantile (0..1) from the histogram; -1 with none. */
int cost_chosen_quantile(const CostModel *m, double q);
/* Why the model keeps trees small, in words for one stderr line: what
 * verifying 1 + k tokens costs against one token's forward (k = 8), what a
 * cycle's drafting adds, the tau such a tree needs to beat plain decoding
 * ((D + V(k + 1)) / V(1)) against the tau its drafting cycles measured. */
void cost_explain(const CostModel *m, char *buf, size_t size);
#endif
