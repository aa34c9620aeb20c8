#!/usr/bin/env python3
"""How much recall can a classifier of (P, H, depth) reach on a trace file?

Evidence for the classifier targets (spec-train's recall at a positive rate
theta): the best ranking of nodes by (P, H, depth) is their acceptance
probability given those features.  This script estimates it with two models
that are not ours, fitted on part of the trees and scored on the rest (split
by tree, as spec-train does):

  - gbm: scikit-learn's HistGradientBoostingClassifier on log P, H, depth,
    shallow, with large leaves and acceptance non-decreasing in P (accepted
    nodes are a few hundred among 10^5: left free, it fits noise and ranks
    worse than P alone);
  - logit: logistic regression on log P, H, depth and their pairwise products.

At several positive rates theta it prints:

  - EAGLE-2: recall of each tree's top N by joint probability (what the paper
    simulates in App. D; N = 60 is EAGLE-2's default);
  - model, per tree: each tree's top N by the model's probability;
  - model, global threshold: nodes above one probability threshold chosen so
    that the overall positive rate is theta (what a classifier with a fixed
    beta does: big trees where the draft is sure, small where it is not);
  - nodes at equal recall: the positive rate at which the model's global
    threshold first reaches EAGLE-2's recall, and how many fewer nodes that is
    (at equal recall of accepted nodes, about the gamma saved at equal tau).

Each model column is the better of the two models on the held-out trees, so
the figures lean optimistic: they bound what a (P, H, d) classifier can gain.
The last line sums it up (saving_max, saving_mean over the N values).

With --features P,H,depth,p,rank,parent_H the models also see the node's own
probability, its rank among its siblings and its parent's entropy: whether
features beyond the paper's three could rank nodes better.

Usage: python3 tools/experiments/recall_bound.py TRACE.h5 [TRACE.h5 ...] [--heldout 0.3]
       [--features P,H,depth[,p,rank,parent_H]]
Needs h5py, hdf5plugin (or HDF5_PLUGIN_PATH=build/plugins) and scikit-learn.
"""
import argparse

import numpy as np


# Features beyond (P, H, depth) that a trace holds or implies, by name:
# the node's own (local) probability p, its rank among its siblings, and
# the entropy of the distribution its parent was drawn from (a depth-1
# node's parent is the root: its own H).
EXTRA = ("p", "rank", "parent_H")


def load(paths, extra=False):
    """(P, H, depth, accepted, tree, number of trees), and with extra a dict
    of the EXTRA features per node."""
    import h5py
    try:
        import hdf5plugin  # noqa: F401  (zstd filter 32015)
    except ImportError:
        pass
    P, H, D, A, tree, X = [], [], [], [], [], {k: [] for k in EXTRA}
    base = 0
    for p in paths:
        with h5py.File(p, "r") as f:
            n = f["/trees/n_nodes"][:]
            h = f["/nodes/H"][:]
            P.append(f["/nodes/P"][:]); H.append(h)
            D.append(f["/nodes/depth"][:]); A.append(f["/nodes/accepted"][:])
            tree.append(np.repeat(np.arange(len(n)) + base, n))
            if extra:
                X["p"].append(f["/nodes/p"][:]); X["rank"].append(f["/nodes/rank"][:])
                first = np.repeat(f["/trees/first_node"][:] - f["/trees/first_node"][0], n)
                par = f["/nodes/parent"][:].astype(np.int64)
                X["parent_H"].append(np.where(par >= 0, h[first + np.maximum(par, 0)], h))
            base += len(n)
    out = (np.concatenate(P).astype(np.float64), np.concatenate(H).astype(np.float64),
           np.concatenate(D).astype(np.int64), np.concatenate(A).astype(np.int64), np.concatenate(tree), base)
    if extra:
        return out + ({k: np.concatenate(v).astype(np.float64) for k, v in X.items()},)
    return out


def per_tree_top(score, tree, k):
    """mask of each tree's k highest scores"""
    order = np.lexsort((-score, tree))
    t = tree[order]
    start = np.r_[0, np.flatnonzero(np.diff(t)) + 1]
    rank = np.arange(len(t)) - np.repeat(start, np.diff(np.r_[start, len(t)]))
    m = np.zeros(len(score), bool)
    m[order[rank < k]] = True
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--heldout", type=float, default=0.3)
    ap.add_argument("--features", default="P,H,depth",
                    help="P,H,depth plus any of %s (comma-separated; default P,H,depth)" % ",".join(EXTRA))
    a = ap.parse_args()
    feats = a.features.split(",")
    bad = [f for f in feats if f not in ("P", "H", "depth") + EXTRA]
    if bad or feats[:3] != ["P", "H", "depth"]:
        ap.error("--features: P,H,depth first, then any of %s (got %s)" % (", ".join(EXTRA), a.features))
    P, H, D, A, tree, ntrees, X = load(a.traces, extra=True)
    X = {k: X[k] for k in feats[3:]}
    rng = np.random.default_rng(a.seed)
    test_trees = rng.random(ntrees) < a.heldout
    te = test_trees[tree]
    Pt, At, tt = P[te], A[te], tree[te]
    scores = [s + 1e-12 * Pt for s in fit_models(P, H, D, A, te, a.seed, X)]   # ties by P
    print("features: " + ", ".join(feats))
    npos = At.sum()
    sizes = np.bincount(tt)
    mean_nodes = sizes[sizes > 0].mean()
    print(f"{len(a.traces)} file(s): {ntrees} trees, {len(P)} nodes, {A.sum()} accepted "
          f"({A.sum() / ntrees:.2f} per tree); held out {test_trees.sum()} trees, {npos} accepted nodes")
    print(f"nodes per tree {mean_nodes:.0f}; acceptance by depth:",
          " ".join(f"d{d}:{A[D == d].mean():.3f}" for d in range(1, D.max() + 1)))
    def global_recall(theta):
        return max(At[sc > np.quantile(sc, 1 - theta)].sum() / npos for sc in scores)

    grid = np.linspace(0.5, 200, 400) / mean_nodes   # positive rates for the equal-recall search
    curve = np.array([global_recall(g) for g in grid])
    print("theta   E2 top-N recall   model per-tree recall   model global-threshold recall   nodes at equal recall")
    savings = []
    for k in (10, 20, 30, 40, 60, 100, 150):
        theta = k / mean_nodes
        e2 = At[per_tree_top(Pt, tt, k)].sum() / npos
        pt = max(At[per_tree_top(sc, tt, k)].sum() / npos for sc in scores)
        gl = global_recall(theta)
        reach = np.flatnonzero(curve >= e2)
        if len(reach):
            t_eq = grid[reach[0]]
            savings.append(1 - t_eq / theta)
            eq = f"{t_eq:.4f} ({100 * savings[-1]:+.1f}%)"
        else:
            eq = "not reached"
        print(f"{theta:.4f}  {e2:.3f} (N={k:3d})      {pt:.3f}                   {gl:.3f}                           {eq}")
    if savings:
        print(f"saving_max={100 * max(savings):.1f}% saving_mean={100 * np.mean(savings):.1f}% "
              "(fewer nodes than EAGLE-2's top-N at its recall, best of the models on held-out trees)")


def fit_models(P, H, D, A, te, seed, extra=None):
    """acceptance probabilities of the held-out nodes from each model; extra:
    further feature columns by name (p enters as log p)"""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    lp = np.log(np.maximum(P, 1e-30))
    more = [np.log(np.maximum(v, 1e-30)) if k == "p" else v for k, v in (extra or {}).items()]
    X = np.stack([lp, H, D] + more, 1)
    gbm = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_depth=3, min_samples_leaf=200,
                                         l2_regularization=1.0, monotonic_cst=[1, 0, 0] + [0] * len(more),
                                         random_state=seed)
    gbm.fit(X[~te], A[~te])
    Xl = np.stack([lp, H, D, lp * D, H * D, lp * H, lp * lp] + more + [m * D for m in more], 1)
    mu, sd = Xl[~te].mean(0), Xl[~te].std(0) + 1e-12
    logit = LogisticRegression(C=1.0, max_iter=2000)
    logit.fit((Xl[~te] - mu) / sd, A[~te])
    return [gbm.predict_proba(X[te])[:, 1], logit.predict_proba((Xl[te] - mu) / sd)[:, 1]]

if __name__ == "__main__":
    main()
