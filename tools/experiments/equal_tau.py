"""γ at equal τ: C2T's verified tokens against EAGLE-2's at the same acceptance
length, and its 95% bootstrap interval over questions (make paper's report).

A sweep is a list of runs of one policy (EAGLE-2 totals, C2T βs) over the same
questions; each run gives, per question, (cycle tokens, cycles, γ).  A run's
point is (τ, γ per cycle) = (Σ cycle tokens / Σ cycles, Σ γ / Σ cycles).  At
equal τ the same tokens take the same cycles, so comparing γ per cycle at
equal τ compares total γ.  EAGLE-2's curve is interpolated linearly in τ at
each C2T point inside its τ range; the reduction is 1 - γ_C2T / γ_EAGLE-2,
averaged over those points.  The interval resamples questions (the same draw
for every run) and recomputes the mean reduction."""
import json
import random


def question_stats(path):
    """{(benchmark, question id): (cycle tokens, cycles, γ)} of a spec-eval JSON report."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    out = {}
    for b in d["benchmarks"]:
        for q in b.get("questions", []):
            ct = cy = g = 0
            for t in q["turns"]:
                ct += t["tau"] * t["cycles"]
                cy += t["cycles"]
                g += t["gamma"]
            out[(b["name"], q["question_id"])] = (ct, cy, g)
    return out


def point(stats, keys):
    """(τ, γ per cycle) of one run over the questions keys (repeats count again)."""
    ct = cy = g = 0
    for k in keys:
        a, b, c = stats[k]
        ct, cy, g = ct + a, cy + b, g + c
    return (ct / cy, g / cy) if cy else None


def interp(curve, x):
    """curve [(τ, γ per cycle)] linearly at τ x; None outside its τ range."""
    pts = sorted(curve)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def mean_reduction(eagle2, c2t):
    """Mean of 1 - γ_C2T / γ_EAGLE-2(τ_C2T) over C2T points inside EAGLE-2's τ
    range; None when there is none (or EAGLE-2 has fewer than 2 points)."""
    if len([p for p in eagle2 if p]) < 2:
        return None
    red = []
    for p in c2t:
        ge = interp([q for q in eagle2 if q], p[0]) if p else None
        if ge:
            red.append(1 - p[1] / ge)
    return sum(red) / len(red) if red else None


def bootstrap(eagle2_runs, c2t_runs, n=2000, seed=0):
    """(mean reduction, lo, hi, draws used): runs are question_stats dicts;
    only questions every run has count.  Draws where no C2T point falls in
    EAGLE-2's range are left out of the interval."""
    keys = sorted(set.intersection(*(set(r) for r in eagle2_runs + c2t_runs)), key=str)
    if not keys:
        return None, None, None, 0

    def reduction(ks):
        return mean_reduction([point(r, ks) for r in eagle2_runs], [point(r, ks) for r in c2t_runs])

    est = reduction(keys)
    rng = random.Random(seed)
    draws = []
    for _ in range(n):
        r = reduction([keys[rng.randrange(len(keys))] for _ in keys])
        if r is not None:
            draws.append(r)
    if not draws:
        return est, None, None, 0
    draws.sort()
    return est, draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1], len(draws)
