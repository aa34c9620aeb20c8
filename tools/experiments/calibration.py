#!/usr/bin/env python3
"""How well a draft's joint probability P predicts acceptance, per depth.

EAGLE-2 ranks tree nodes by P and keeps the top N; C2T's classifier adds the
entropy H and the depth.  Where P is calibrated (a node of joint probability
P is accepted with probability P) and ranks nodes well, a classifier of
(P, H, depth) has little to add.  This script measures the first part on
spec-collect traces of one or more heads (full trees, every node labelled):

  - a reliability table per head: nodes binned by P, each bin's mean P and
    its acceptance rate, over all depths and per depth 1..4;
  - the expected calibration error (ECE: the node-weighted mean of
    |mean P - acceptance rate| over the bins), overall and per depth;
  - the acceptance rate of each tree's top 10 and top 60 nodes by P, and the
    recall of those top 60 (EAGLE-2's default total): how much of what is
    accepted P's ranking finds.

Writes OUT.md (tables), OUT.csv (one row per head, depth and bin) and, with
gnuplot, OUT.png (acceptance rate against mean P, one curve per head, all
depths).

Usage: calibration.py --out OUT NAME=TRACE.h5[,TRACE.h5...] [NAME=...]
Needs h5py and numpy (tools/requirements.txt) and the zstd filter
(HDF5_PLUGIN_PATH=build/plugins, or hdf5plugin).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recall_bound import load  # noqa: E402  (one trace reader for both scripts)

EDGES = [0.0, 1e-4, 1e-3, 1e-2, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0000001]


def reliability(P, A):
    """[(lo, hi, nodes, mean P, acceptance rate)] over EDGES, and the ECE."""
    rows, err = [], 0.0
    for lo, hi in zip(EDGES[:-1], EDGES[1:]):
        m = (P >= lo) & (P < hi)
        n = int(m.sum())
        if n == 0:
            continue
        mp, rate = float(P[m].mean()), float(A[m].mean())
        rows.append((lo, min(hi, 1.0), n, mp, rate))
        err += n * abs(mp - rate)
    return rows, err / max(len(P), 1)


def top_by_P(P, A, tree, n_trees, k):
    """(acceptance rate of each tree's top k by P, recall of accepted nodes)"""
    order = np.lexsort((-P, tree))
    rank = np.empty_like(order)
    starts = np.searchsorted(tree[order], np.arange(n_trees))
    pos = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
    rank[order] = pos
    keep = rank < k
    return float(A[keep].mean()), float(A[keep].sum() / max(A.sum(), 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("heads", nargs="+", help="NAME=TRACE.h5[,TRACE.h5...]")
    a = ap.parse_args()
    md, rows_csv, curves = [], [], {}
    w = md.append
    summary = []
    for spec in a.heads:
        if "=" not in spec:
            sys.exit("calibration.py: %s: expected NAME=TRACE.h5[,...]" % spec)
        name, files = spec.split("=", 1)
        paths = files.split(",")
        for p in paths:
            if not os.path.exists(p):
                sys.exit("calibration.py: %s: no such trace file" % p)
        P, H, D, A, tree, n_trees = load(paths)
        root = D > 0   # the root (depth 0) is always "accepted": not a prediction
        P, D, A, tree = P[root], D[root], A[root].astype(np.float64), tree[root]
        rel, ece = reliability(P, A)
        by_depth = {}
        for d in range(1, 5):
            m = D == d
            if m.any():
                by_depth[d] = reliability(P[m], A[m])
        acc10, _ = top_by_P(P, A, tree, n_trees, 10)
        acc60, rec60 = top_by_P(P, A, tree, n_trees, 60)
        summary.append((name, n_trees, len(P), int(A.sum()), ece, [by_depth.get(d, (None, None))[1] for d in range(1, 5)],
                        acc10, acc60, rec60))
        curves[name] = [(r[3], r[4]) for r in rel]
        w("### %s (%d trees, %d nodes, %d accepted)" % (name, n_trees, len(P), int(A.sum())))
        w("")
        w("| P bin | nodes | mean P | acceptance rate | depth 1 rate | depth 2 rate | depth 3 rate | depth 4 rate |")
        w("|---|---|---|---|---|---|---|---|")
        for lo, hi, n, mp, rate in rel:
            cells = []
            for d in range(1, 5):
                hit = [r for r in by_depth.get(d, ([], 0))[0] if r[0] == lo]
                cells.append("%.3f (%d)" % (hit[0][4], hit[0][2]) if hit else "–")
            w("| [%.4g, %.4g) | %d | %.4f | %.4f | %s |" % (lo, hi, n, mp, rate, " | ".join(cells)))
            rows_csv.append([name, "all", lo, hi, n, mp, rate])
        for d, (rr, _) in sorted(by_depth.items()):
            for lo, hi, n, mp, rate in rr:
                rows_csv.append([name, d, lo, hi, n, mp, rate])
        w("")
    head = ["| head | trees | nodes | accepted | ECE | ECE depth 1 | depth 2 | depth 3 | depth 4 | "
            "acceptance of top 10 by P | of top 60 | recall of top 60 |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, nt, nn, na, ece, ed, a10, a60, r60 in summary:
        head.append("| %s | %d | %d | %d | %.4f | %s | %.3f | %.3f | %.3f |" % (
            name, nt, nn, na, ece, " | ".join("–" if e is None else "%.4f" % e for e in ed), a10, a60, r60))
    md = ["## Calibration of P against acceptance", "",
          "ECE: node-weighted mean |mean P − acceptance rate| over the P bins (0 = calibrated). "
          "Reliability tables per head below; each depth cell is the bin's acceptance rate (nodes).", ""] + head + [""] + md
    with open(a.out + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")
    with open(a.out + ".csv", "w", newline="") as f:
        cw = csv.writer(f)
        cw.writerow(["head", "depth", "p_lo", "p_hi", "nodes", "mean_P", "acceptance_rate"])
        cw.writerows(rows_csv)
    note = plot(a.out, curves)
    print("\n".join(head))
    print("calibration: %s.md, %s.csv%s" % (a.out, a.out, note))


def plot(out, curves):
    """acceptance rate against mean P per head (gnuplot), or why not"""
    if not shutil.which("gnuplot"):
        return " (gnuplot not found: no PNG)"
    dat = out + ".dat"
    with open(dat, "w") as f:
        for name, pts in curves.items():
            f.write("# %s\n" % name)
            for mp, rate in pts:
                f.write("%g %g\n" % (mp, rate))
            f.write("\n\n")
    plots = ", ".join("'%s' index %d with linespoints title '%s'" % (dat, i, n.replace("_", " "))
                      for i, n in enumerate(curves))
    script = ("set terminal png size 800,600; set output '%s.png'; set logscale xy; set xrange [1e-5:1]; "
              "set yrange [1e-5:1]; set xlabel 'mean joint probability P of the bin'; "
              "set ylabel 'acceptance rate'; set key left top; set title 'Calibration of P (all depths)'; "
              "plot x with lines dt 2 title 'calibrated', %s\n" % (out, plots))
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    os.remove(dat)
    return ", %s.png" % out if r.returncode == 0 else " (gnuplot failed: %s)" % r.stderr.strip()[:200]


if __name__ == "__main__":
    main()
