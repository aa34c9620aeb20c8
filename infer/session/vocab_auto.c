#include "infer/session/vocab_auto.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int vocab_auto_init(VocabAuto *va, Draft *d) {
    memset(va, 0, sizeof *va);
    va->chosen = -1;
    if (!d->ops->set_vocab) {
        err_set("--draft-vocab auto: a %s draft cannot score a reduced vocabulary", d->ops->kind);
        return -1;
    }
    int seen;
    va->V = d->V;
    va->rank = xmalloc(sizeof(int) * d->V);
    double *cov = draft_vocab_coverage(d, &seen, va->rank);
    if (!cov) { vocab_auto_free(va); return -1; }
    const int floor_n = d->V / 64 > 64 ? d->V / 64 : 64;
    int lo = 1;
    while (lo < floor_n) lo *= 2;
    /* powers of two, the count of ids seen in its place, the whole vocabulary */
    int seen_added = seen <= lo || seen >= d->V;
    for (int n = lo; n < d->V && va->n_cand < VOCAB_AUTO_MAX - 2; n *= 2) {
        if (!seen_added && seen < n) {
            va->cand[va->n_cand] = seen;
            va->coverage[va->n_cand++] = cov[seen];
        }
        seen_added |= seen <= n;
        va->cand[va->n_cand] = n;
        va->coverage[va->n_cand++] = cov[n];
    }
    if (!seen_added) {
        va->cand[va->n_cand] = seen;
        va->coverage[va->n_cand++] = cov[seen];
    }
    va->cand[va->n_cand] = d->V;
    va->coverage[va->n_cand++] = 1;
    free(cov);
    return draft_set_vocab(d, d->V);
}

void vocab_auto_free(VocabAuto *va) {
    free(va->rank);
    va->rank = NULL;
}

/* One draft step of `rows` (<= VOCAB_AUTO_ROWS) children of the root, timed;
 * the cycle's temporary entries are dropped after it. */
static int time_step(Draft *d, int token, int rows, double *seconds) {
    Tree t;
    tree_init(&t);
    tree_reset(&t, token);
    int nodes[VOCAB_AUTO_ROWS], ids[VOCAB_AUTO_ROWS * 4];
    float probs[VOCAB_AUTO_ROWS * 4];
    for (int i = 0; i < VOCAB_AUTO_ROWS; i++) nodes[i] = tree_add(&t, 0, token, 1, 0, i);
    const double t0 = now_seconds();
    const int rc = draft_expand(d, &t, nodes, rows, 4, 0, ids, probs, NULL);
    *seconds = now_seconds() - t0;
    draft_end_cycle(d);
    tree_free(&t);
    return rc;
}

static int calibrate(VocabAuto *va, Draft *d, int token) {
    const double t0 = now_seconds();
    const long long rows = d->rows_scored, steps = d->steps_scored;   /* timing steps are not the cycles' */
    for (int i = 0; i < va->n_cand; i++) {
        if (draft_set_vocab(d, va->cand[i])) return -1;
        for (int r = 0; r < 2; r++) {
            double best = 0;
            for (int rep = 0; rep < 4; rep++) {   /* the first warms the new head's rows */
                double s;
                if (time_step(d, token, r ? 1 : VOCAB_AUTO_ROWS, &s)) return -1;
                if (rep > 0 && (best == 0 || s < best)) best = s;
            }
            *(r ? &va->step1_s[i] : &va->step_s[i]) = best;
        }
    }
    d->rows_scored = rows;
    d->steps_scored = steps;
    vocab_auto_fit(va);
    va->calibrated = 1;
    va->calibration_s = now_seconds() - t0;
    return draft_set_vocab(d, va->cand[va->n_cand - 1]);
}

/* The least-squares line of ys on the candidates' sizes, its values at
 * them; its slope never negative (fewer columns never cost more). */
static void fit_line(const VocabAuto *va, const double *ys, double *fitted) {
    double mx = 0, my = 0;
    for (int i = 0; i < va->n_cand; i++) { mx += va->cand[i]; my += ys[i]; }
    mx /= va->n_cand;
    my /= va->n_cand;
    double sxy = 0, sxx = 0;
    for (int i = 0; i < va->n_cand; i++) {
        sxy += (va->cand[i] - mx) * (ys[i] - my);
        sxx += (va->cand[i] - mx) * (va->cand[i] - mx);
    }
    const double b = sxx > 0 && sxy > 0 ? sxy / sxx : 0;
    for (int i = 0; i < va->n_cand; i++) fitted[i] = my + b * (va->cand[i] - mx);
}

void vocab_auto_fit(VocabAuto *va) {
    fit_line(va, va->step1_s, va->step1_fit_s);
    fit_line(va, va->step_s, va->step_fit_s);
}

static void explore_again(VocabAuto *va) {
    va->cycles = va->accepted = va->rows = va->steps = 0;
    va->verify_s = va->draft_s = 0;
    memset(va->outside, 0, sizeof va->outside);
    memset(va->bonus_outside, 0, sizeof va->bonus_outside);
    va->watch_cycles = va->watch_cuts = 0;
}

int vocab_auto_step(VocabAuto *va, Draft *d, int token) {
    const int x = va->n_cand - 1;
    if (!va->calibrated) return calibrate(va, d, token);
    if (va->chosen < 0 && d->Vd != va->cand[x]) return draft_set_vocab(d, va->cand[x]);   /* the watch's return */
    if (va->cycles < VOCAB_AUTO_EXPLORE || (va->chosen >= 0 && va->chosen < x)) return 0;
    const int was = va->chosen;
    va->chosen = vocab_auto_choose(va);
    va->choices++;
    const long long o = va->outside[va->chosen], b = va->bonus_outside[va->chosen];
    va->cut_share = (double)(o + b + 1) / (double)(va->cycles + o + 2);
    explore_again(va);
    return va->chosen == was ? 0 : draft_set_vocab(d, va->cand[va->chosen]);
}

static int outside(const VocabAuto *va, int i, int token) {
    return token < 0 || token >= va->V || va->rank[token] >= va->cand[i];
}

void vocab_auto_observe(VocabAuto *va, const int *tokens, int accepted, int bonus, double verify_s, double draft_s,
                        long long rows_scored, long long steps_scored) {
    const int x = va->n_cand - 1;
    const long long rows = rows_scored - va->rows_mark, steps = steps_scored - va->steps_mark;
    va->rows_mark = rows_scored;
    va->steps_mark = steps_scored;
    if (!va->calibrated) return;
    if (va->chosen >= 0) va->drafted[va->chosen]++;
    else va->drafted[x]++;
    if (va->chosen >= 0 && va->chosen < x) {   /* the watch */
        va->watch_cycles++;
        va->watch_cuts += outside(va, va->chosen, bonus);
        const double k = (double)va->watch_cycles, q = va->cut_share;
        if (va->watch_cuts > k * q + 4 * sqrt(k * q * (1 - q)) + 2) {
            va->chosen = -1;
            va->reexplored++;
            explore_again(va);
        } else if (va->watch_cycles == VOCAB_AUTO_EXPLORE) {
            va->watch_cycles = va->watch_cuts = 0;
        }
        return;
    }
    va->cycles++;
    va->accepted += accepted;
    va->verify_s += verify_s;
    va->draft_s += draft_s;
    va->rows += rows;
    va->steps += steps;
    for (int i = 0; i < va->n_cand; i++) {
        for (int a = 0; a < accepted; a++) va->outside[i] += outside(va, i, tokens[a]);
        va->bonus_outside[i] += outside(va, i, bonus);
    }
}

int vocab_auto_choose(VocabAuto *va) {
    const int x = va->n_cand - 1;
    if (va->cycles <= 0) return x;
    const double c = (double)va->cycles, verify = va->verify_s / c, draft = va->draft_s / c, rows = (double)va->rows / c,
                 steps = (double)va->steps / c;
    /* the seconds a column adds to a one-row step and to each further row */
    const double b1 = (va->step1_fit_s[x] - va->step1_fit_s[0]) / (va->cand[x] - va->cand[0]);
    double b_row = (va->step_fit_s[x] - va->step_fit_s[0] - (va->step1_fit_s[x] - va->step1_fit_s[0])) /
                   ((double)(va->cand[x] - va->cand[0]) * (VOCAB_AUTO_ROWS - 1));
    if (b_row < 0) b_row = 0;
    for (int i = 0; i < va->n_cand; i++) {
        const double tokens = ((double)va->accepted + c) / (c + (double)va->outside[i]);
        const double fewer = (double)(va->cand[x] - va->cand[i]);
        double seconds = verify + draft - steps * b1 * fewer - (rows - steps) * b_row * fewer;
        if (seconds < 1e-9) seconds = 1e-9;
        va->rate[i] = tokens / seconds;
    }
    int best = x;   /* ties to the larger vocabulary */
    for (int i = x - 1; i >= 0; i--)
        if (va->rate[i] > va->rate[best]) best = i;
    return best;
}
