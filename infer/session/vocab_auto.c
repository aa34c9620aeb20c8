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
    va->calibrated = 1;
    va->calibration_s = now_seconds() - t0;
    return draft_set_vocab(d, va->cand[va->n_cand - 1]);
}

int vocab_auto_step(VocabAuto *va, Draft *d, int token) {
    if (va->chosen >= 0) return 0;
    if (!va->calibrated) return calibrate(va, d, token);
    if (va->cycles < VOCAB_AUTO_EXPLORE) return 0;
    va->chosen = vocab_auto_choose(va);
    return draft_set_vocab(d, va->cand[va->chosen]);
}

void vocab_auto_observe(VocabAuto *va, const int *tokens, int accepted, double verify_s, double draft_s,
                        long long rows_scored, long long steps_scored) {
    const long long rows = rows_scored - va->rows_mark, steps = steps_scored - va->steps_mark;
    va->rows_mark = rows_scored;
    va->steps_mark = steps_scored;
    if (va->chosen >= 0 || !va->calibrated) return;
    va->cycles++;
    va->verify_s += verify_s;
    va->draft_s += draft_s;
    va->rows += rows;
    va->steps += steps;
    if (accepted > VOCAB_AUTO_DEPTH) accepted = VOCAB_AUTO_DEPTH;
    for (int i = 0; i < va->n_cand; i++) {
        int inside = 0;   /* the path's first tokens inside candidate i's vocabulary */
        while (inside < accepted && tokens[inside] >= 0 && tokens[inside] < va->V && va->rank[tokens[inside]] < va->cand[i])
            inside++;
        for (int dd = 0; dd <= inside; dd++) va->reach[i][dd]++;
    }
}

/* A calibration step's seconds per row past the first at candidate i. */
static double row_s(const VocabAuto *va, int i) { return (va->step_s[i] - va->step1_s[i]) / (VOCAB_AUTO_ROWS - 1); }

int vocab_auto_choose(VocabAuto *va) {
    const int x = va->n_cand - 1;
    if (va->cycles <= 0) return x;
    const double c = (double)va->cycles, verify = va->verify_s / c, draft = va->draft_s / c, rows = (double)va->rows / c,
                 steps = (double)va->steps / c;
    for (int i = 0; i < va->n_cand; i++) {
        double tokens = 1;
        for (int dd = 1; dd <= VOCAB_AUTO_DEPTH && va->reach[i][dd]; dd++) tokens += (double)va->reach[i][dd] / c;
        double seconds = verify + draft - steps * (va->step1_s[x] - va->step1_s[i]) -
                         (rows - steps) * (row_s(va, x) - row_s(va, i));
        if (seconds < 1e-9) seconds = 1e-9;
        va->rate[i] = tokens / seconds;
    }
    int best = x;   /* ties to the larger vocabulary */
    for (int i = x - 1; i >= 0; i--)
        if (va->rate[i] > va->rate[best]) best = i;
    return best;
}
