#include "infer/speculative/cost.h"
#include <string.h>

/* Weight of a new cycle in the running means: the plain mean over the first
 * 1/COST_EMA cycles, then an exponential mean that follows a change of load
 * within about that many cycles. */
#define COST_EMA 0.05

void cost_init(CostModel *m) {
    memset(m, 0, sizeof *m);
    m->scale = 1;
}

int cost_add_point(CostModel *m, int n, double seconds) {
    if (m->n_pts == COST_MAX_POINTS || (m->n_pts && n <= m->n[m->n_pts - 1])) return -1;
    m->n[m->n_pts] = n;
    m->verify_s[m->n_pts++] = seconds;
    return 0;
}

static double curve_at(const CostModel *m, int n) {
    if (m->n_pts == 0) return 0;
    if (m->n_pts == 1) return m->verify_s[0] * n / m->n[0];
    int i = 1;
    while (i < m->n_pts - 1 && m->n[i] < n) i++;
    double x0 = m->n[i - 1], x1 = m->n[i], y0 = m->verify_s[i - 1], y1 = m->verify_s[i];
    double y = y0 + (y1 - y0) * (n - x0) / (x1 - x0);
    return y > 0 ? y : 0;
}

double cost_verify_s(const CostModel *m, int n) { return m->scale * curve_at(m, n); }

int cost_best_prefix(CostModel *m, const float *est, int n) {
    double gain = 1, best = gain / (m->draft_s + cost_verify_s(m, 1));
    int k_best = 0;
    for (int k = 1; k <= n; k++) {
        gain += est[k - 1] > 0 ? est[k - 1] : 0;
        double rate = gain / (m->draft_s + cost_verify_s(m, k + 1));
        if (rate > best) { best = rate; k_best = k; }
    }
    m->chosen++;
    m->chosen_sum += k_best;
    m->hist[k_best < COST_HIST - 1 ? k_best : COST_HIST - 1]++;
    return k_best;
}

void cost_observe(CostModel *m, int n, double verify_s, double draft_s) {
    double predicted = curve_at(m, n);
    m->cycles++;
    double w = 1.0 / (double)m->cycles;
    if (w < COST_EMA) w = COST_EMA;
    if (predicted > 0) m->scale += w * (verify_s / predicted - m->scale);
    m->draft_s += w * (draft_s - m->draft_s);
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
