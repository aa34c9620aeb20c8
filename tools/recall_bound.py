#!/usr/bin/env python3
"""How much recall can ANY classifier of (P, H, depth) reach on a trace file?

Evidence for the classifier targets (spec-train's recall at a positive rate
theta): the Bayes-optimal ranking of nodes by (P, H, depth) is the empirical
acceptance rate of their feature cell.  This script estimates it on a split of
the trees (fit cells on 95%, score the held-out 5%, split by tree as
spec-train does) and prints, at the positive rate of EAGLE-2's 60-of-1011
selection:

  - EAGLE-2: recall of each tree's top 60 by joint probability (what the paper
    simulates in App. D);
  - cells, per tree: each tree's top 60 by cell acceptance rate;
  - cells, global threshold: nodes above one rate threshold chosen so that the
    overall positive rate is 60/1011 (what a classifier with a fixed beta does:
    big trees where the draft is sure, small where it is not);
  - the recall at theta of the same rankings for a few other theta.

Usage: python3 tools/recall_bound.py TRACE.h5 [TRACE.h5 ...] [--seed 0]
Needs h5py and hdf5plugin (or HDF5_PLUGIN_PATH=build/plugins).
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


def cells(P, H, D):
    lp = np.clip(np.log10(np.maximum(P, 1e-30)), -12, 0)
    pb = np.minimum((-lp * 4).astype(np.int64), 48)          # quarter decades
    hb = np.minimum((H * 4).astype(np.int64), 31)             # 0.25 nats
    return (pb * 32 + hb) * 64 + np.minimum(D, 63)


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
    ap.add_argument("--heldout", type=float, default=0.05)
    a = ap.parse_args()
    P, H, D, A, tree, ntrees = load(a.traces)
    rng = np.random.default_rng(a.seed)
    test_trees = rng.random(ntrees) < a.heldout
    te = test_trees[tree]
    c = cells(P, H, D)
    pos = np.bincount(c[~te], weights=A[~te], minlength=c.max() + 1)
    cnt = np.bincount(c[~te], minlength=c.max() + 1)
    prior = A[~te].mean()
    rate = (pos + prior * 2) / (cnt + 2)            # smoothed cell acceptance rate
    s_cell = rate[c[te]] + 1e-9 * P[te]              # ties by P
    Pt, At, tt = P[te], A[te], tree[te]
    npos = At.sum()
    sizes = np.bincount(tt)
    mean_nodes = sizes[sizes > 0].mean()
    print(f"{len(a.traces)} file(s): {ntrees} trees, {len(P)} nodes, {A.sum()} accepted "
          f"({A.sum() / ntrees:.2f} per tree); held out {test_trees.sum()} trees, {npos} accepted nodes")
    print(f"nodes per tree {mean_nodes:.0f}; acceptance by depth:",
          " ".join(f"d{d}:{A[D == d].mean():.3f}" for d in range(1, D.max() + 1)))
    print("theta   E2 top-N recall   cells per-tree recall   cells global-threshold recall")
    for k in (10, 20, 30, 40, 60, 100, 150):
        theta = k / mean_nodes
        e2 = At[per_tree_top(Pt, tt, k)].sum() / npos
        pt = At[per_tree_top(s_cell, tt, k)].sum() / npos
        thr = np.quantile(s_cell, 1 - theta)
        gl = At[s_cell > thr].sum() / npos
        print(f"{theta:.4f}  {e2:.3f} (N={k:3d})      {pt:.3f}                   {gl:.3f}")


if __name__ == "__main__":
    main()
