#!/usr/bin/env python3
"""tools/experiments/equal_tau.py on synthetic sweeps with a known gap: C2T's
γ per cycle is (1 - gap) times EAGLE-2's at every τ, question by question with
noise; the estimate lands near the gap and its 95% interval covers it, with no
gap the interval covers 0, and questions missing from a run are left out.
PASS/FAIL lines for tests/run.sh."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools", "experiments"))
from equal_tau import bootstrap, interp, mean_reduction  # noqa: E402


def sweep(taus, gap, n_q, seed):
    """Runs at these τ, γ per cycle = 20 (τ - 1) (1 - gap), per question noisy."""
    rng = random.Random(seed)
    runs = []
    for tau in taus:
        r = {}
        for q in range(n_q):
            cycles = rng.randint(30, 60)
            t = tau * rng.uniform(0.85, 1.15)
            g = 20 * (t - 1) * (1 - gap) * rng.uniform(0.9, 1.1) * cycles
            r[("b", str(q))] = (t * cycles, cycles, g)
        runs.append(r)
    return runs


def check(name, ok, why):
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    return ok


def main():
    good = True
    good &= check("test_interp_and_range", interp([(1, 10), (3, 30)], 2) == 20 and interp([(1, 10), (3, 30)], 4) is None
                  and mean_reduction([(1, 10), (3, 30)], [(2, 15), (5, 1)]) == 0.25
                  and mean_reduction([(1, 10)], [(1, 5)]) is None, "interpolation or range rule")
    e2 = sweep([1.8, 2.2, 2.6, 3.0, 3.4], 0.0, 40, 1)
    c2 = sweep([2.0, 2.4, 2.8, 3.2], 0.25, 40, 2)
    est, lo, hi, n = bootstrap(e2, c2, n=500)
    good &= check("test_known_gap_inside_interval", lo is not None and lo <= 0.25 <= hi and abs(est - 0.25) < 0.05
                  and hi - lo < 0.15 and n > 400, "estimate %s, interval [%s, %s], %d draws" % (est, lo, hi, n))
    c0 = sweep([2.0, 2.4, 2.8, 3.2], 0.0, 40, 3)
    est0, lo0, hi0, _ = bootstrap(e2, c0, n=500)
    good &= check("test_no_gap_covers_zero", lo0 is not None and lo0 <= 0 <= hi0 and abs(est0) < 0.05,
                  "estimate %s, interval [%s, %s]" % (est0, lo0, hi0))
    del c2[0][("b", "0")]   # a question one run lacks is left out of all
    est1, _, _, _ = bootstrap(e2, c2, n=50)
    good &= check("test_common_questions_only", est1 is not None and abs(est1 - 0.25) < 0.05, "estimate %s" % est1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
