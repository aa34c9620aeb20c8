#!/usr/bin/env python3
"""tools/experiments/calibration.py and recall_bound.py's trace reader on
synthetic trace files (the datasets they read, written with h5py): nodes
accepted with probability P give an ECE near 0, nodes accepted with
probability sqrt(P) a large one; the top-N acceptance and recall are those
counted by hand; the parent-entropy feature is the parent's H (the node's
own for depth 1).  PASS/FAIL/SKIP lines for tests/run.sh."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "tools", "experiments")


def check(name, ok, why):
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))
    return ok


def write_trace(path, trees, rng, accept_prob):
    """trees of 40 nodes: 10 at depth 1 (parent -1), 30 at depth 2 under
    the first three; P uniform on (0, 1); accepted ~ Bernoulli(accept_prob(P))."""
    import h5py
    import numpy as np
    n_per = 40
    depth = np.r_[np.ones(10), np.full(30, 2)].astype(np.uint8)
    parent = np.r_[np.full(10, -1), np.repeat([0, 1, 2], 10)].astype(np.int32)
    P = rng.random(trees * n_per).astype(np.float32)
    H = rng.random(trees * n_per).astype(np.float32) * 3
    acc = (rng.random(trees * n_per) < accept_prob(P)).astype(np.uint8)
    with h5py.File(path, "w") as f:
        f["/nodes/P"] = P
        f["/nodes/H"] = H
        f["/nodes/depth"] = np.tile(depth, trees)
        f["/nodes/accepted"] = acc
        f["/nodes/parent"] = np.tile(parent, trees)
        f["/nodes/p"] = P
        f["/nodes/rank"] = np.tile(np.arange(n_per) % 10, trees).astype(np.uint8)
        f["/trees/n_nodes"] = np.full(trees, n_per, np.int32)
        f["/trees/first_node"] = np.arange(trees, dtype=np.int64) * n_per
    return P, H, acc


def main():
    try:
        import numpy as np
        import h5py  # noqa: F401
    except ImportError:
        print("SKIP test_calibration: h5py or numpy absent (tools/requirements.txt)")
        return 0
    sys.path.insert(0, TOOLS)
    from recall_bound import load  # noqa: E402
    good = True
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as d:
        cal, mis = os.path.join(d, "cal.h5"), os.path.join(d, "mis.h5")
        P, H, acc = write_trace(cal, 400, rng, lambda p: p)
        write_trace(mis, 400, rng, lambda p: np.sqrt(p))
        Pl, Hl, Dl, Al, tree, n, extra = load([cal], extra=True)
        par = np.tile(np.r_[np.full(10, -1), np.repeat([0, 1, 2], 10)], 400)
        base = np.repeat(np.arange(400) * 40, 40)
        want = np.where(par >= 0, H[base + np.maximum(par, 0)], H)
        good &= check("test_trace_reader_features", n == 400 and len(Pl) == 16000 and
                      np.allclose(extra["parent_H"], want) and np.array_equal(Al, acc),
                      "trees %d, nodes %d, parent_H or labels wrong" % (n, len(Pl)))
        out = os.path.join(d, "out")
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "calibration.py"), "--out", out,
                            "calibrated=" + cal, "sqrt=" + mis], capture_output=True, text=True)
        good &= check("test_calibration_runs", r.returncode == 0 and os.path.exists(out + ".md"),
                      "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
        if r.returncode == 0:
            rows = {}
            for line in open(out + ".md"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if cells and cells[0] in ("calibrated", "sqrt"):
                    rows[cells[0]] = cells
            ece_c, ece_m = float(rows["calibrated"][4]), float(rows["sqrt"][4])
            good &= check("test_calibration_ece", ece_c < 0.03 and ece_m > 0.1,
                          "ECE %.4f (accepted with probability P) and %.4f (sqrt P)" % (ece_c, ece_m))
            # top 10 by P of each tree, counted here
            top = np.zeros(len(P), bool)
            for t in range(400):
                s = slice(40 * t, 40 * t + 40)
                top[40 * t + np.argsort(-P[s], kind="stable")[:10]] = True
            want10 = acc[top].mean()
            good &= check("test_calibration_top_n", abs(float(rows["calibrated"][9]) - want10) < 0.0006 and
                          float(rows["calibrated"][11]) == 1.0,
                          "top-10 acceptance %s (want %.3f), top-60 recall %s (want 1.000: trees have 40 nodes)"
                          % (rows["calibrated"][9], want10, rows["calibrated"][11]))
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "calibration.py"), "--out", out, "x=" + d + "/none.h5"],
                           capture_output=True, text=True)
        good &= check("test_calibration_missing_file", r.returncode != 0 and "none.h5" in r.stderr and
                      len(r.stderr.strip().splitlines()) == 1, "exit %d: %s" % (r.returncode, r.stderr))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
