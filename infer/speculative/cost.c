#include "infer/speculative/cost.h"
#include <stdio.h>
#include <string.h>

/* Weight of a new cycle in the running means: the plain mean over the first
 * 1/COST_EMA cycles, then an exponential mean that follows a change of load
 * within about that many cycles. */
#define COST_EMA 0.05

void cost_init(CostModel *m) {
    memset(m, 0, sizeof *m);
    m->scale = 1;
    for (int d = 0; d <= COST_DEPTHS; d++) m->accept_ratio[d] = 1;
    draft_switch_init(&m->sw, 1);
}

float cost_estimate(const CostModel *m, float P, int depth) {
    if (!m) return P;
    if (depth > COST_DEPTHS) depth = COST_DEPTHS;
    const double e = P * m->accept_ratio[depth > 0 ? depth : 0];
    return (float)(e < 1 ? e : 1);
}

void cost_observe_acceptance(CostModel *m, const float *P, const int *depth, int n, int accepted) {
    double p[COST_DEPTHS + 1] = {0};
    for (int i = 1; i < n; i++) p[depth[i] < COST_DEPTHS ? depth[i] : COST_DEPTHS] += P[i];
    for (int d = 1; d <= COST_DEPTHS; d++) {
        const double a = d < COST_DEPTHS ? (accepted >= d) : (accepted >= d ? accepted - d + 1 : 0);
        m->accept_p[d] = COST_ACCEPT_DECAY * m->accept_p[d] + p[d];
        m->accept_n[d] = COST_ACCEPT_DECAY * m->accept_n[d] + a;
        m->accept_p_total[d] += p[d];
        m->accept_n_total[d] += a;
        m->accept_ratio[d] = (m->accept_n[d] + COST_ACCEPT_PRIOR * m->accept_ratio[d - 1]) /
                             (m->accept_p[d] + COST_ACCEPT_PRIOR);
    }
    m->verified_cycles++;
    m->verified_tokens += 1 + accepted;
}

/* A window of n sequence-cycles in rounds of `sequences`. */
static int switch_window(int n, int sequences) {
    if (sequences <= 1) return n;
    const int rounds = (n + sequences - 1) / sequences;
    return rounds > SWITCH_MIN_ROUNDS ? rounds : SWITCH_MIN_ROUNDS;
}

void draft_switch_init(DraftSwitch *s, int sequences) {
    memset(s, 0, sizeof *s);
    s->period = SWITCH_PERIOD;
    s->ref_cycles = switch_window(SWITCH_REF, sequences);
    s->probe_cycles = switch_window(SWITCH_PROBE, sequences);
    s->left = s->ref_cycles;   /* the first probe early: where drafting cannot pay, it is seen soon */
}

void draft_switch_observe(DraftSwitch *s, int off, double tokens, double seconds) {
    off = off != 0;
    s->cycles[off]++;
    s->seen_tokens[off] += tokens;
    s->seen_seconds[off] += seconds;
    if (off != s->off) return;
    if (off == s->chosen_off) {   /* the chosen mode's stretch: its last cycles are the probe's reference */
        if (s->left <= s->ref_cycles) { s->ref_tokens += tokens; s->ref_seconds += seconds; }
        if (--s->left > 0) return;
        s->rate[off] = s->ref_seconds > 0 ? s->ref_tokens / s->ref_seconds : 0;
        s->off = !off;
        s->left = s->probe_cycles;
        s->probe_tokens = s->probe_seconds = 0;
        return;
    }
    s->probe_tokens += tokens;
    s->probe_seconds += seconds;
    if (--s->left > 0) return;
    s->rate[off] = s->probe_seconds > 0 ? s->probe_tokens / s->probe_seconds : 0;
    const double chosen = s->rate[s->chosen_off], probe = s->rate[off];
    if (probe > chosen && off && !s->confirming) {   /* drafting is given up on two probes in a row */
        s->confirming = 1;
        s->off = s->chosen_off;
        s->left = s->ref_cycles;
        s->ref_tokens = s->ref_seconds = 0;
        return;
    }
    s->confirming = 0;
    if (probe > chosen) {
        s->chosen_off = off;
        s->changes++;
        s->period = SWITCH_PERIOD;
    } else {
        if (chosen > SWITCH_MARGIN * probe) s->period *= 2;
        /* the probe's cost against the chosen mode's cycles (ref_cycles of them just before) */
        const double extra = s->probe_seconds - s->probe_tokens / chosen, cycle_s = s->ref_seconds / s->ref_cycles;
        const double budget = cycle_s > 0 ? extra / (SWITCH_PROBE_SHARE * cycle_s) : 0;   /* cycles */
        if (budget > s->period) s->period = budget < SWITCH_PERIOD_MAX ? (int)budget + 1 : SWITCH_PERIOD_MAX;
        if (s->period > SWITCH_PERIOD_MAX) s->period = SWITCH_PERIOD_MAX;
    }
    s->off = s->chosen_off;
    s->left = s->period;
    s->ref_tokens = s->ref_seconds = 0;
}

int cost_add_point(CostModel *m, int n, double seconds) {
    if (m->n_pts == COST_MAX_POINTS || (m->n_pts && n <= m->n[m->n_pts - 1])) return -1;
    m->n[m->n_pts] = n;
    m->ratio[m->n_pts] = 1;
    m->weight[m->n_pts] = 0;
    m->verify_s[m->n_pts++] = seconds;
    return 0;
}

void cost_settle_calibration(CostModel *m) {
    for (int i = m->n_pts - 2; i >= 0; i--)
        if (m->verify_s[i] > m->verify_s[i + 1]) m->verify_s[i] = m->verify_s[i + 1];
}

/* The segment of points [*lo, *lo + 1] that n falls in (the first or the
 * last beyond the ends) and n's weight on its right end. */
static void segment(const CostModel *m, int n, int *lo, double *right) {
    int i = 1;
    while (i < m->n_pts - 1 && m->n[i] < n) i++;
    *lo = i - 1;
    *right = (double)(n - m->n[i - 1]) / (double)(m->n[i] - m->n[i - 1]);
}

/* ys at the points interpolated at n; past the last point along the last
 * segment's line, but never below the line through the origin and the
 * last point (with one point, that line): a calibration cut short by its
 * time budget can end in a flat segment a few tokens apart, which made a
 * forward over hundreds of tree nodes look as cheap as one over 4 (trees
 * of ~470 nodes, 11 s a cycle, on an AVX2-only EPYC).  Never negative. */
static double interpolate(const CostModel *m, const double *ys, int n) {
    if (m->n_pts == 0) return 0;
    const int last = m->n_pts - 1;
    const double along = ys[last] * n / m->n[last];
    if (m->n_pts == 1) return along;
    int lo;
    double right;
    segment(m, n, &lo, &right);
    double y = ys[lo] + (ys[lo + 1] - ys[lo]) * right;
    if (n > m->n[last] && y < along) y = along;
    return y > 0 ? y : 0;
}

/* The corrected points: each one's ratio weighed against the curve's by its
 * observations, then made non-decreasing. */
static void corrected(const CostModel *m, double *ys) {
    for (int i = 0; i < m->n_pts; i++) {
        const double w = m->weight[i];
        ys[i] = m->verify_s[i] * (w * m->ratio[i] + COST_POINT_PRIOR * m->scale) / (w + COST_POINT_PRIOR);
        if (i > 0 && ys[i] < ys[i - 1]) ys[i] = ys[i - 1];
    }
}

double cost_verify_s(const CostModel *m, int n) {
    double ys[COST_MAX_POINTS];
    corrected(m, ys);
    return interpolate(m, ys, n);
}

void cost_corrected_curve(const CostModel *m, CostModel *out) {
    double ys[COST_MAX_POINTS];
    corrected(m, ys);
    cost_init(out);
    for (int i = 0; i < m->n_pts; i++) cost_add_point(out, m->n[i], ys[i]);
    out->calibration_s = m->calibration_s;
    out->lazy_nodes = m->lazy_nodes;
    out->row_s = m->row_s;
}

/* A verification of `tokens` that yields `gain` tokens: the corrected
 * curve's time, and the walk's rows (one per token yielded) where that many
 * are scored lazily. */
static double verify_cost(const CostModel *m, const double *ys, int tokens, double gain) {
    const double forward = interpolate(m, ys, tokens);
    return m->lazy_nodes > 0 && tokens > m->lazy_nodes ? forward + gain * m->row_s : forward;
}

double cost_best_rate(const CostModel *m, const float *est, int n, double draft_s, double extra_gain, int extra_tokens,
                      int *k_best) {
    extra_gain += m->load_gain;
    extra_tokens += m->load_tokens;
    double ys[COST_MAX_POINTS];   /* the corrected curve, once for every k */
    corrected(m, ys);
    double gain = 1 + extra_gain, best = gain / (draft_s + verify_cost(m, ys, 1 + extra_tokens, gain));
    *k_best = 0;
    for (int k = 1; k <= n; k++) {
        gain += est[k - 1] > 0 ? est[k - 1] : 0;
        double rate = gain / (draft_s + verify_cost(m, ys, k + 1 + extra_tokens, gain));
        if (rate > best) { best = rate; *k_best = k; }
    }
    return best;
}

int cost_best_prefix(CostModel *m, const float *est, int n, double draft_s) {
    int k_best;
    cost_best_rate(m, est, n, draft_s, 0, 0, &k_best);
    m->chosen++;
    m->chosen_sum += k_best;
    m->hist[k_best < COST_HIST - 1 ? k_best : COST_HIST - 1]++;
    double tokens = 1;
    for (int i = 0; i < k_best; i++) tokens += est[i] > 0 ? est[i] : 0;
    m->predicted_tokens += tokens;
    m->last_tokens = k_best + 1;
    m->last_gain = tokens;
    return k_best;
}

void cost_clear_choices(CostModel *m) {
    m->chosen = m->chosen_sum = 0;
    m->predicted_tokens = 0;
    memset(m->hist, 0, sizeof m->hist);
    memset(m->accept_p_total, 0, sizeof m->accept_p_total);
    memset(m->accept_n_total, 0, sizeof m->accept_n_total);
    m->verified_cycles = 0;
    m->verified_tokens = 0;
}

void cost_add_choices(CostModel *sum, const CostModel *x) {
    sum->chosen += x->chosen;
    sum->chosen_sum += x->chosen_sum;
    sum->predicted_tokens += x->predicted_tokens;
    for (int d = 0; d <= COST_DEPTHS; d++) {
        sum->accept_p_total[d] += x->accept_p_total[d];
        sum->accept_n_total[d] += x->accept_n_total[d];
    }
    sum->verified_cycles += x->verified_cycles;
    sum->verified_tokens += x->verified_tokens;
    for (int k = 0; k < COST_HIST; k++) sum->hist[k] += x->hist[k];
}

/* A running mean's step: the plain mean's 1/count, at least COST_EMA. */
static double mean_step(double count) {
    const double w = count > 0 ? 1.0 / count : 1;
    return w > COST_EMA ? w : COST_EMA;
}

void cost_observe(CostModel *m, int n, double verify_s, double draft_s, int walked_rows) {
    if (m->hold) return;
    if (walked_rows > 0) {   /* the forward's share (a row costing more than row_s leaves at least a tenth) */
        const double forward = verify_s - walked_rows * m->row_s;
        verify_s = forward > 0.1 * verify_s ? forward : 0.1 * verify_s;
    }
    const double calibrated = interpolate(m, m->verify_s, n);
    m->cycles++;
    const double w = mean_step((double)m->cycles);
    m->draft_s += w * (draft_s - m->draft_s);
    if (!(calibrated > 0)) return;
    const double ratio = verify_s / calibrated;
    m->scale += w * (ratio - m->scale);
    if (m->n_pts < 2) return;
    int lo;
    double right;
    segment(m, n, &lo, &right);
    if (right < 0) right = 0;   /* beyond an end: that end's */
    if (right > 1) right = 1;
    for (int k = 0; k < 2; k++) {   /* the segment's two ends, by their weights */
        const int i = lo + k;
        const double share = k ? right : 1 - right;
        if (share <= 0) continue;
        m->weight[i] += share;
        m->ratio[i] += share * mean_step(m->weight[i]) * (ratio - m->ratio[i]);
    }
}

int cost_chosen_quantile(const CostModel *m, double q) {
    if (!m->chosen) return -1;
    int64_t want = (int64_t)(q * (double)(m->chosen - 1)), seen = 0;
    for (int k = 0; k < COST_HIST; k++) {
        seen += m->hist[k];
        if (seen > want) return k;
    }
    return COST_HIST - 1;
}

void cost_explain(const CostModel *m, char *buf, size_t size) {
    const int k = 8;
    const double one = cost_verify_s(m, 1), many = cost_verify_s(m, k + 1);
    if (!m->n_pts || one <= 0) {
        snprintf(buf, size, "no verification cost was measured");
        return;
    }
    snprintf(buf, size, "verifying 1 + %d tokens costs %.2fx one token's forward and a cycle's drafting %.2fx more, "
             "so a tree of %d pays only at tau >= %.2f; its drafting cycles measured tau %.2f", k, many / one,
             m->draft_s / one, k, (m->draft_s + many) / one,
             m->verified_cycles ? m->verified_tokens / (double)m->verified_cycles : 0.0);
}

double cost_draft_s(const CostModel *m, int expands) {
    double rest = m->draft_s - m->expands * m->expand_s;
    return (rest > 0 ? rest : 0) + expands * m->expand_s;
}

int cost_layer_pays(const CostModel *m, const float *est, int n, int expands, double gain_bound) {
    int k;
    const double now = cost_best_rate(m, est, n, cost_draft_s(m, expands), 0, 0, &k);
    /* at best the whole gain in one more verified node, ranked first */
    return cost_best_rate(m, est, n, cost_draft_s(m, expands + 1), gain_bound, 1, &k) > now;
}

double cost_node_price(const CostModel *m, const float *est, int n, double draft_s, int max_new) {
    int k;
    const double rate = cost_best_rate(m, est, n, draft_s, 0, 0, &k);
    const int verified = k + 1 + m->load_tokens;
    double ys[COST_MAX_POINTS], gain = 1 + m->load_gain;
    for (int i = 0; i < k; i++) gain += est[i] > 0 ? est[i] : 0;
    corrected(m, ys);
    const double base = verify_cost(m, ys, verified, gain);
    double cheapest = -1;
    for (int j = 1; j <= max_new; j++) {
        const double per = (verify_cost(m, ys, verified + j, gain) - base) / j;
        if (cheapest < 0 || per < cheapest) cheapest = per;
    }
    return cheapest > 0 ? rate * cheapest : 0;
}

void cost_observe_expand(CostModel *m, int expands, double seconds) {
    if (expands <= 0 || m->hold) return;
    m->expand_cycles++;
    double w = 1.0 / (double)m->expand_cycles;
    if (w < COST_EMA) w = COST_EMA;
    m->expand_s += w * (seconds / expands - m->expand_s);
    m->expands += w * (expands - m->expands);
}
