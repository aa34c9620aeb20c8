#!/usr/bin/env python3
"""How much recall can a classifier of (P, H, depth) reach on a trace file?

Evidence for the classifier targets (spec-train's recall at a positive rate
theta): the best ranking of nodes by (P, H, depth) is their acceptance
probability given those features.  This script estimates it with a flexible
model that is not ours (scikit-learn's HistGradientBoostingClassifier on
log P, H, depth), fitted on part of the trees and scored on the rest (split by
tree, as spec-train does), and prints, at several positive rates theta:

  - EAGLE-2: recall of each tree's top N by joint probability (what the paper
    simulates in App. D; N = 60 is EAGLE-2's default);
  - model, per tree: each tree's top N by the model's probability;
  - model, global threshold: nodes above one probability threshold chosen so
    that the overall positive rate is theta (what a classifier with a fixed
    beta does: big trees where the draft is sure, small where it is not).

Usage: python3 tools/recall_bound.py TRACE.h5 [TRACE.h5 ...] [--heldout 0.3]
Needs h5py, hdf5plugin (or HDF5_PLUGIN_PATH=build/plugins) and scikit-learn.
"""
import argparse

import numpy as np


def load(paths):
    import h5py
    try:
        import hdf5plugin  # noqa: F401  (zstd filter 32015)
    except ImportError:
        pass
    P, H, D, A, tree = [], [], [], [], []
    base = 0
    for p in paths:
        with h5py.File(p, "r") as f:
            n = f["/trees/n_nodes"][:]
            P.append(f["/nodes/P"][:]); H.append(f["/nodes/H"][:])
            D.append(f["/nodes/depth"][:]); A.append(f["/nodes/accepted"][:])
            tree.append(np.repeat(np.arange(len(n)) + base, n))
            base += len(n)
    return (np.concatenate(P).astype(np.float64), np.concatenate(H).astype(np.float64),
            np.concatenate(D).astype(np.int64), np.concatenate(A).astype(np.int64), np.concatenate(tree), base)


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
    a = ap.parse_args()
    P, H, D, A, tree, ntrees = load(a.traces)
    rng = np.random.default_rng(a.seed)
    test_trees = rng.random(ntrees) < a.heldout
    te = test_trees[tree]
    from sklearn.ensemble import HistGradientBoostingClassifier
    X = np.stack([np.log(np.maximum(P, 1e-30)), H, D], 1)
    model = HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, random_state=a.seed)
    model.fit(X[~te], A[~te])
    s_cell = model.predict_proba(X[te])[:, 1] + 1e-12 * P[te]   # ties by P
    Pt, At, tt = P[te], A[te], tree[te]
    npos = At.sum()
    sizes = np.bincount(tt)
    mean_nodes = sizes[sizes > 0].mean()
    print(f"{len(a.traces)} file(s): {ntrees} trees, {len(P)} nodes, {A.sum()} accepted "
          f"({A.sum() / ntrees:.2f} per tree); held out {test_trees.sum()} trees, {npos} accepted nodes")
    print(f"nodes per tree {mean_nodes:.0f}; acceptance by depth:",
          " ".join(f"d{d}:{A[D == d].mean():.3f}" for d in range(1, D.max() + 1)))
    print("theta   E2 top-N recall   model per-tree recall   model global-threshold recall")
    for k in (10, 20, 30, 40, 60, 100, 150):
        theta = k / mean_nodes
        e2 = At[per_tree_top(Pt, tt, k)].sum() / npos
        pt = At[per_tree_top(s_cell, tt, k)].sum() / npos
        thr = np.quantile(s_cell, 1 - theta)
        gl = At[s_cell > thr].sum() / npos
        print(f"{theta:.4f}  {e2:.3f} (N={k:3d})      {pt:.3f}                   {gl:.3f}")


if __name__ == "__main__":
    main()
