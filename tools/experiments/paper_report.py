#!/usr/bin/env python3
"""make paper's report (tools/experiments/paper.sh step 5): reads results/paper/
and writes report.md, table2.csv, tau_gamma.csv, equal_tau.csv, transfer.csv,
goal.txt and tau_gamma.png (gnuplot, when installed).  Python 3 standard
library only.

Usage: python3 tools/experiments/paper_report.py RESULTS_DIR
           [--bench-order "mt_bench ..."] [--categories "code math ..."]
           [--elapsed SECONDS]
"""
import argparse
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from equal_tau import bootstrap, question_stats  # noqa: E402

GOAL_REDUCTION = 0.20   # the goal: gamma 20% lower than EAGLE-2 at equal tau


def read_env(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k] = v.strip('"')
    return out


def load_runs(rdir, sub="eval"):
    """<sub>/<policy>_<param><value>.json -> {(policy, param, value): {bench: totals, 'all': totals}}"""
    runs = {}
    for path in sorted(glob.glob(os.path.join(rdir, sub, "*.json"))):
        name = os.path.basename(path)[:-5]
        with open(path) as f:
            d = json.load(f)
        per = {b["name"]: b["total"] for b in d["benchmarks"]}
        per["all"] = d["total"]
        if name == "ar":
            key = ("ar", "-", "-")
        elif name.startswith("eagle2_total"):
            key = ("eagle2", "total", name[len("eagle2_total"):])
        elif name.startswith("eagle2_d") and "_minp" in name:   # eagle2_d<depth>_minp<x>
            d, x = name[len("eagle2_d"):].split("_minp")
            key = ("eagle2_minp_d" + d, "min_p", x)
        elif name.startswith("c2t_beta"):
            key = ("c2t", "beta", name[len("c2t_beta"):])
        else:
            continue
        runs[key] = per
    return runs


def replay_check(rdir):
    """The EAGLE-2 totals both decoded (spec-eval) and replayed (spec-analyze
    replay on eval/positions.h5): how many questions agree in cycles,
    emitted tokens and γ.  None when nothing was replayed."""
    lines, all_same = [], True
    for rp in sorted(glob.glob(os.path.join(rdir, "eval", "replay", "eagle2_total*.json")),
                     key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0)):
        dec = os.path.join(rdir, "eval", os.path.basename(rp))
        if not os.path.exists(dec) or json.load(open(dec)).get("tool") != "spec-eval":
            continue
        a, b = question_stats(rp), question_stats(dec)
        same = sum(1 for k in b if k in a and all(abs(x - y) <= 1e-6 * max(1, y) for x, y in zip(a[k], b[k])))
        all_same &= same == len(b) and len(a) == len(b)
        lines.append("total %s: %d of %d questions" % (os.path.basename(rp)[len("eagle2_total"):-5], same, len(b)))
    n_replayed = len(glob.glob(os.path.join(rdir, "eval", "replay", "eagle2_total*.json")))
    if not n_replayed:
        return None
    return ("**Replay check.** EAGLE-2's %d totals were replayed from one trace of every position (`spec-collect "
            "--every-position`, `spec-analyze replay`: exact where the draft's products sum each row alone). "
            "Totals also decoded by spec-eval, replay against decoding, questions with the same cycles, "
            "emitted tokens and γ: %s%s." % (n_replayed, "; ".join(lines) or "none decoded",
                                              "" if all_same else " — **they differ: the replayed points are not "
                                              "trustworthy here**"))


def interp(points, x):
    """y at x on the polyline through points [(x, y)] sorted by x; None outside"""
    pts = sorted(points)
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1 and x1 > x0:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if pts and any(abs(p[0] - x) < 1e-12 for p in pts):
        return [p[1] for p in pts if abs(p[0] - x) < 1e-12][0]
    return None


def fmt(x, f="%.2f", none="–"):
    return none if x is None else f % x


def pct(x, none="–"):
    return none if x is None else "%.1f%%" % (100 * x)


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def calibration_row(path):
    """(overall ECE, ECE by depth 1-4) from calibration.py's CSV, or None"""
    err, nodes = {}, {}   # per depth: sum of nodes x |mean P - acceptance rate|, nodes
    for r in read_csv(path):
        n = int(r["nodes"])
        err[r["depth"]] = err.get(r["depth"], 0) + n * abs(float(r["mean_P"]) - float(r["acceptance_rate"]))
        nodes[r["depth"]] = nodes.get(r["depth"], 0) + n
    if not nodes.get("all"):
        return None
    ece = {d: "%.4f" % (err[d] / nodes[d]) for d in nodes if nodes[d]}
    return ece["all"], " / ".join(ece.get(str(d), "–") for d in range(1, 5))


def transfer_cell(d):
    """recall and theta of C2T at beta 0.5 on all trees of one trace, and EAGLE-2's
    recall interpolated at the same theta on its top-N curve"""
    b = read_csv(os.path.join(d, "benchmarks.csv"))
    rt = read_csv(os.path.join(d, "recall_theta.csv"))
    if not b:
        return None
    row = [r for r in b if r["benchmark"] == "all"] or b[-1:]
    row = row[0]
    grp = row["benchmark"]
    rec, th = float(row["c2t_recall"]), float(row["c2t_theta"])
    e2 = [(float(r["theta"]), float(r["recall"])) for r in rt if r["benchmark"] == grp and r["method"] == "e2_topn"]
    e2_at = interp(e2 + [(0.0, 0.0)], th)
    return {"recall": rec, "theta": th, "e2_recall_at_theta": e2_at,
            "e2_top_recall": float(row["e2_recall"]), "e2_top_theta": float(row["e2_theta"]),
            "trees": int(row["trees"]), "accepted": int(row["accepted"]), "tau_full": float(row["tau"])}


def minp_series(eq):
    """(policy, title, point type) of the min_p curves: EAGLE-2's depth 6 and eq"""
    return [("eagle2_minp_d%d" % d, "EAGLE-2 min_p, depth %d" % d, pt) for d, pt in [(6, 9)] + [(eq, 11)] * (eq != 6)]


def gnuplot_curves(rdir, benches, curves, eq):
    if not shutil.which("gnuplot"):
        return "gnuplot not found: no PNG (make deps installs gnuplot-nox)"
    panels = [b for b in benches + ["all"] if curves.get(b, {}).get("eagle2") or curves.get(b, {}).get("c2t")]
    if not panels:
        return "no sweep points: no PNG"
    cols = 4 if len(panels) > 4 else len(panels)
    rows = (len(panels) + cols - 1) // cols
    s = ["if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size %d,%d noenhanced font ',9' } "
         "else { set terminal png size %d,%d }" % (420 * cols, 360 * rows, 420 * cols, 360 * rows),
         "set output '%s'" % os.path.join(rdir, "tau_gamma.png"),
         "set multiplot layout %d,%d title 'tau vs gamma per cycle: EAGLE-2 total sweep vs C2T beta sweep (topk 10)'" % (rows, cols),
         "set grid", "set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.05", "set key top left", "set xlabel 'tau'", "set ylabel 'gamma per cycle'"]
    for b in panels:
        s.append("set title '%s'" % b)
        plots = []
        for pol, title, pt in [("eagle2", "EAGLE-2 total", 7)] + minp_series(eq) + [("c2t", "C2T beta", 5)]:
            pts = sorted(curves[b].get(pol, []))
            if not pts:
                continue
            data = "\n".join("%.6g %.6g %s" % (t, g, lab) for t, g, lab in pts)
            s.append("$%s_%s << EOD\n%s\nEOD" % (pol, b, data))
            plots.append("$%s_%s using 1:2 with linespoints pt %d title '%s'" % (pol, b, pt, title))
            if not pol.startswith("eagle2_minp"):   # their labels would crowd the others'
                plots.append("$%s_%s using 1:2:3 with labels offset 0,%d font ',7' notitle" % (pol, b, 1 if pol == "eagle2" else -1))
        s.append("plot " + ", ".join(plots))
    s.append("unset multiplot")
    # the same points as a ratio to EAGLE-2's total curve at their τ: a
    # saving of a few percent is invisible on the curves themselves
    s += ["set output '%s'" % os.path.join(rdir, "gamma_ratio.png"),
          "set multiplot layout %d,%d title 'gamma per cycle / EAGLE-2 total curve at the same tau (below 1: fewer verified tokens)'" % (rows, cols),
          "set ylabel 'gamma ratio to EAGLE-2'", "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05"]
    for b in panels:
        s.append("set title '%s'" % b)
        e2 = [(t, g) for t, g, _ in curves[b].get("eagle2", [])]
        plots = ["1 with lines lc rgb 'gray' notitle"]
        for pol, title, pt in minp_series(eq) + [("c2t", "C2T beta", 5)]:
            pts = sorted((t, g / interp(e2, t), lab) for t, g, lab in curves[b].get(pol, []) if interp(e2, t))
            if not pts:
                continue
            s.append("$r%s_%s << EOD\n%s\nEOD" % (pol, b, "\n".join("%.6g %.6g %s" % p for p in pts)))
            plots.append("$r%s_%s using 1:2 with linespoints pt %d title '%s'" % (pol, b, pt, title))
        s.append("plot " + ", ".join(plots))
    s.append("unset multiplot")
    r = subprocess.run(["gnuplot"], input="\n".join(s) + "\n", text=True, capture_output=True)
    if r.returncode:
        return "gnuplot failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rdir")
    ap.add_argument("--bench-order", default="mt_bench humaneval gsm8k alpaca sum qa")
    ap.add_argument("--categories", default="")
    ap.add_argument("--elapsed", type=int, default=None)
    a = ap.parse_args()
    R = a.rdir
    sizes = read_env(os.path.join(R, "sizes.env"))
    # EAGLE-2's --depth whose deepest nodes sit at C2T's d_max (paper.sh)
    eq = int(sizes.get("E2_EQ_DEPTH", int(sizes.get("C2T_DEPTH", 8)) - 1))
    runs = load_runs(R)
    speed_runs = load_runs(R, "speed")   # tree verification, A/B against ar (the sweeps walk)
    have_eval = bool(runs)
    benches = [b for b in a.bench_order.split() if any(b in per for per in runs.values())] if have_eval else []
    groups = benches + ["all"]
    md = []
    w = md.append

    target = sizes.get("TARGET", "models/smollm2-135m-instruct")
    lm_draft = sizes.get("DRAFT_KIND", "eagle") == "lm"
    w("# C2T paper experiments on %s (`make %s`)" % (target.split("/")[-1], "qwen-paper" if lm_draft else "paper"))
    w("")
    w("Written by `tools/experiments/paper_report.py` from `%s/` (tools/experiments/paper.sh)." % R +
      (" This invocation of the script took %d min %d s (steps kept from an earlier, interrupted invocation "
       "are not in that figure; every spec-eval run's own wall time is under Sizes)." % divmod(a.elapsed, 60)
       if a.elapsed is not None else ""))
    w("")
    w("**Setup.** Target `%s` (BF16), draft `%s`%s (%s). "
      % (target, sizes.get("HEAD", "data/smollm2/eagle"), " `%s`" % sizes["DRAFT_ARGS"] if sizes.get("DRAFT_ARGS") else "",
         "a language model of its own, `--draft-kind lm`" if lm_draft else "EAGLE-1 layout head") +
      "Collect traces: full EAGLE-2 trees (topk 10, depth %s) on the first turns of %s prompts per category of "
      "`data/smollm2/prompts/collect.jsonl` (training prompts, not from any benchmark), %s new tokens each. "
      "Classifier: `spec-train --transform P=log --standardize --epochs %s --neg-ratio 2.5 --features %s --select %s`. "
      "Benchmarks: %s questions of each of %s, %s, %s new tokens per turn, temperature 0. "
      "Sweeps: EAGLE-2 `--topk 10 --depth 6 --total` %s; C2T `--topk 10 --depth %s --beta` %s. "
      "Collection and sweeps: `--verify %s --batch %s` (with `walk` the target forwards only each cycle's accepted "
      "path: the same tokens, τ and γ as verifying the whole tree; docs/commands.md), arithmetic: %s. "
      "Nothing was chosen on benchmark questions: the β values are fixed in advance (0.5 is the paper's default) and "
      "the training flags come from the demo's training traces."
      % (sizes.get("COLLECT_DEPTH", "?"), sizes.get("COLLECT_Q", "?"), sizes.get("COLLECT_MAX_NEW", "?"),
         sizes.get("EPOCHS", "?"), sizes.get("FEATURES", "P,H,depth"), sizes.get("SELECT", "beta"), sizes.get("EVAL_Q", "?"),
         ", ".join(benches) or "(no benchmarks)",
         "every turn" if sizes.get("EVAL_TURNS", "0") == "0" else "first %s turn(s)" % sizes.get("EVAL_TURNS"),
         sizes.get("EVAL_MAX_NEW", "?"), sizes.get("E2_TOTALS", "?"), sizes.get("C2T_DEPTH", eq + 1), sizes.get("C2T_BETAS", "?"),
         sizes.get("VERIFY", "tree"), sizes.get("BATCH", "1"), sizes.get("ARITH", "?")))
    w("")
    # where the time went: spec-eval's own timers per run (wall, prefill,
    # draft, verification), measured, not estimated
    rows = []
    for key, per in sorted(runs.items()):
        t = per["all"]
        name = key[0] if key[0] == "ar" else "%s %s %s" % key
        if t.get("wall_s", 0) > 0:
            rows.append("%s %.1f min (prefill %.0f%%, draft %.0f%%, verify %.0f%%)"
                        % (name, t["wall_s"] / 60, 100 * t.get("prefill_s", 0) / t["wall_s"],
                           100 * t.get("draft_s", 0) / t["wall_s"], 100 * t.get("verify_s", 0) / t["wall_s"]))
        elif t.get("decode_s", 0) > 0:   # batched: one wall time; the stage times overlap across sequences
            rows.append("%s %.1f min%s" % (name, t["decode_s"] / 60, " (+ %.1f min of `ar` for the lossless check)"
                                           % (t["ar_decode_s"] / 60) if t.get("ar_decode_s") else ""))
    w("**Sizes.** COLLECT_Q=%s prompts per category × %s tokens, EVAL_Q=%s questions per benchmark × %s tokens per "
      "turn, EPOCHS=%s%s. The decoded spec-eval runs, as spec-eval timed them (wall time; at batch 1 also the "
      "shares of prefill, drafting and target forwards; replayed runs take seconds): %s. "
      "Each further C2T point (C2T_BETAS) costs about one such run; EAGLE-2's points (E2_TOTALS) are replayed "
      "from one collection of every position at no further decoding (E2_REPLAY=0: one run each); EVAL_Q and "
      "EVAL_MAX_NEW scale every run."
      % (sizes.get("COLLECT_Q", "?"), sizes.get("COLLECT_MAX_NEW", "?"), sizes.get("EVAL_Q", "?"),
         sizes.get("EVAL_MAX_NEW", "?"), sizes.get("EPOCHS", "?"),
         "" if sizes.get("EVAL_Q") == "40" and sizes.get("COLLECT_Q") == "30" and sizes.get("EVAL_MAX_NEW") == "128"
         and sizes.get("COLLECT_MAX_NEW") == "128" and sizes.get("EPOCHS") == "200"
         else " — **not the defaults** (a reduced run: figures are for checking the pipeline, not results)",
         "; ".join(rows) or "none yet"))
    w("")
    check = replay_check(R)
    if check:
        w(check)
        w("")
    w("γ = candidate tokens sent to the target for verification (root excluded), in thousands over the run; "
      "τ = tokens per draft–verify cycle (bonus token included); speedup = tokens/s over `ar`'s. Every policy "
      "decodes the same tokens (lossless, temperature 0), so γ totals are comparable within a benchmark.")
    w("")

    # ---------------- Table 2 ----------------
    e2d = runs.get(("eagle2", "total", "60"))
    c5 = runs.get(("c2t", "beta", "0.5"))
    ar = runs.get(("ar", "-", "-"))
    goal = {}
    if not have_eval:
        w("## Benchmarks\n\nNo spec-eval results (benchmarks absent: `PAPER_BENCH=DIR` points at them); "
          "only the trace experiments below.\n")
    else:
        w("## Table 2: τ, γ and speedup per benchmark (EAGLE-2 defaults vs C2T β 0.5)")
        w("")

        def speed(per, b):
            """(speedup, lo, hi): the A/B figure of the run's own ar, with its 95% interval."""
            if per is None or b not in per or per[b].get("speedup") is None:
                return None
            t = per[b]
            lo, hi = t.get("speedup_ci95") or (t["speedup"], t["speedup"])
            return (t["speedup"], lo, hi)

        def fmt_speed(x):
            return "–" if x is None else "%.2f [%.2f, %.2f]" % x

        w("| benchmark | ar tok/s | EAGLE-2 τ | EAGLE-2 γ (k) | EAGLE-2 speedup | C2T τ | C2T γ (k) | C2T speedup | γ C2T/EAGLE-2 |")
        w("|---|---|---|---|---|---|---|---|---|")
        rows = []
        for b in groups:
            e = e2d.get(b) if e2d else None
            c = c5.get(b) if c5 else None
            var = (e or {}).get("v_ar") or (c or {}).get("v_ar") or (ar.get(b, {}).get("v") if ar else None)
            ratio = c["gamma"] / e["gamma"] if e and c and e["gamma"] else None
            se, sc = speed_runs.get(("eagle2", "total", "60")), speed_runs.get(("c2t", "beta", "0.5"))
            var = ((se or {}).get(b) or {}).get("v_ar") or ((sc or {}).get(b) or {}).get("v_ar") or var
            row = [b, var, e and e["tau"], e and e["gamma"] / 1000, speed(se or e2d, b), c and c["tau"],
                   c and c["gamma"] / 1000, speed(sc or c5, b), ratio]
            rows.append(row)
            name = "**overall**" if b == "all" else b
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(var, "%.1f"), fmt(row[2]), fmt(row[3], "%.2f"), fmt_speed(row[4]), fmt(row[5]),
                fmt(row[6], "%.2f"), fmt_speed(row[7]), fmt(ratio)))
        with open(os.path.join(R, "table2.csv"), "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["benchmark", "ar_v", "eagle2_tau", "eagle2_gamma_k", "eagle2_speedup", "eagle2_speedup_lo",
                         "eagle2_speedup_hi", "c2t_tau", "c2t_gamma_k", "c2t_speedup", "c2t_speedup_lo",
                         "c2t_speedup_hi", "gamma_ratio"])
            for r in rows:
                flat = r[:4] + list(r[4] or (None,) * 3) + r[5:7] + list(r[7] or (None,) * 3) + r[8:]
                cw.writerow(["" if x is None else (round(x, 6) if isinstance(x, float) else x) for x in flat])
        w("")
        w("Speedups of the two headline settings come from their speed runs (`speed/`: SPEED_Q=%s questions per "
          "benchmark, one sequence at a time, the whole tree verified in one forward as users decode; τ and γ "
          "in the table are the sweep runs') against `ar` decoding the same questions inside the same run "
          "(`--check-lossless`), alternated question by question (ABBA): the median over ABBA blocks (each two " % sizes.get("SPEED_Q", "?") +
          "consecutive questions, one of each order) and its 95% sign-test interval; ar tok/s is that in-run figure. On this 2-core CPU, tree verification costs "
          "far more than it does on a GPU, so speedups below 1 are expected; τ and γ are the figures that carry over.")
        ll = os.path.join(R, "eval", "lossless.txt")
        if os.path.exists(ll):
            w("")
            w("Lossless checks: " + "; ".join(l.strip() for l in open(ll) if l.strip()) + ".")
        w("")

        # ---------------- tau-gamma ----------------
        w("## τ–γ curves and γ at equal τ")
        w("")
        curves = {b: {} for b in groups}
        with open(os.path.join(R, "tau_gamma.csv"), "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["benchmark", "policy", "param", "value", "tau", "gamma", "cycles", "gamma_per_cycle", "v"])
            for (pol, param, val), per in sorted(runs.items(), key=lambda kv: (kv[0][0], float(kv[0][2]) if kv[0][2] != "-" else 0)):
                for b in groups:
                    t = per.get(b)
                    if not t:
                        continue
                    gpc = t["gamma"] / t["cycles"] if t["cycles"] else 0
                    cw.writerow([b, pol, param, val, "%.4f" % t["tau"], t["gamma"], t["cycles"], "%.3f" % gpc, "%.3f" % t["v"] if "v" in t else ""])
                    if pol in ["eagle2", "c2t"] + [m[0] for m in minp_series(eq)]:
                        curves[b].setdefault(pol, []).append((t["tau"], gpc, val))
        w("γ per cycle against τ, one curve per policy (`tau_gamma.csv`, ![τ–γ](tau_gamma.png); the same points as "
          "a ratio to EAGLE-2's total curve at their τ: ![γ ratio](gamma_ratio.png)). "
          "At equal τ the comparison uses γ per cycle: at equal τ the same tokens take the same number of cycles, "
          "so the ratio equals the ratio of total γ. EAGLE-2's γ is linearly interpolated in τ between its sweep "
          "points at each C2T point's τ (points outside EAGLE-2's τ range are left out); "
          "\"at EAGLE-2 defaults' τ\" interpolates C2T's curve instead.")
        w("")
        w("| benchmark | EAGLE-2 τ range | C2T β 0.5: τ | γ/cycle C2T vs EAGLE-2 at that τ | reduction | "
          "reduction at EAGLE-2 defaults' τ (that τ) | C2T points in range | mean reduction |")
        w("|---|---|---|---|---|---|---|---|")
        eq_rows = []
        means = []
        for b in groups:
            e2 = [(t, g) for t, g, _ in curves[b].get("eagle2", [])]
            c2 = curves[b].get("c2t", [])
            if len(e2) < 2 or not c2:
                w("| %s | (too few points) | | | | | | |" % b)
                continue
            red = []
            r05 = None
            line05 = "–"
            for t, g, beta in sorted(c2, key=lambda p: float(p[2])):
                ge = interp(e2, t)
                r = None if ge is None or ge <= 0 else 1 - g / ge
                eq_rows.append([b, beta, "%.4f" % t, "%.3f" % g, "" if ge is None else "%.3f" % ge,
                                "" if r is None else "%.4f" % r])
                if r is not None:
                    red.append(r)
                if beta == "0.5":
                    r05 = r
                    line05 = "%.2f vs %s" % (g, fmt(ge))
            c05 = [p for p in c2 if p[2] == "0.5"]
            # the reverse reading: C2T's gamma at EAGLE-2 defaults' tau
            d60 = [p for p in curves[b].get("eagle2", []) if p[2] == "60"]
            rdef = None
            if d60:
                gc = interp([(t, g) for t, g, _ in c2], d60[0][0])
                rdef = None if gc is None else 1 - gc / d60[0][1]
            m = sum(red) / len(red) if red else None
            if b != "all" and m is not None:
                means.append(m)
            goal.setdefault("per_bench", {})[b] = (r05, m, rdef)
            w("| %s | %.2f–%.2f | %s | %s | %s | %s (%s) | %d of %d | %s |" % (
                "**overall**" if b == "all" else b, min(e2)[0], max(e2)[0], fmt(c05[0][0] if c05 else None),
                line05, pct(r05), pct(rdef), fmt(d60[0][0] if d60 else None), len(red), len(c2), pct(m)))
        with open(os.path.join(R, "equal_tau.csv"), "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["benchmark", "beta", "c2t_tau", "c2t_gamma_per_cycle", "eagle2_gamma_per_cycle_interp", "reduction"])
            cw.writerows(eq_rows)
        w("")
        # the overall mean reduction's uncertainty: questions resampled (tools/experiments/equal_tau.py)
        sweeps = {pol: [question_stats(p) for p in sorted(glob.glob(os.path.join(R, "eval", pat)))]
                  for pol, pat in (("eagle2", "eagle2_total*.json"), ("c2t", "c2t_beta*.json"))}
        if all(sweeps.values()):
            est, lo, hi, nd = bootstrap(sweeps["eagle2"], sweeps["c2t"])
            if lo is not None:
                w("Overall (all questions pooled), the mean reduction over C2T's points in EAGLE-2's τ range is "
                  "**%s [%s, %s]** (95%% bootstrap over questions, %d draws); the paper's 25%% lies %s it." % (
                      pct(est), pct(lo), pct(hi), nd, "inside" if lo <= 0.25 <= hi else "outside"))
                w("")
                goal["interval"] = (est, lo, hi)
        # where a saving comes from: one threshold on P (EAGLE-2's pool, --param
        # min_p) sizes each tree by the draft's confidence without a classifier
        parts, minp_at = [], {}
        for d in sorted({6, eq}):
            minp = minp_at[d] = [question_stats(p) for p in
                                 sorted(glob.glob(os.path.join(R, "eval", "eagle2_d%d_minp*.json" % d)))]
            if not (minp and all(sweeps.values())):
                continue
            e_t, lo_t, hi_t, _ = bootstrap(sweeps["eagle2"], minp)
            e_c, lo_c, hi_c, nd_c = bootstrap(minp, sweeps["c2t"])
            parts.append("at depth %d (%d thresholds) it verifies %s [%s, %s] fewer tokens than EAGLE-2's fixed "
                         "totals (depth 6) at equal τ, and C2T verifies %s [%s, %s] fewer than it" % (
                             d, len(minp), pct(e_t), pct(lo_t), pct(hi_t), pct(e_c), pct(lo_c), pct(hi_c)))
            goal["min_p_d%d" % d] = (e_t, lo_t, hi_t, e_c, lo_c, hi_c)
            if d == eq:
                goal["min_p_eqdepth"] = goal["min_p_d%d" % d]
        # EAGLE-2's fixed totals replayed as deep as C2T's trees (paper.sh:
        # eval/replay/eagle2_d<eq>_total*.json)
        eqd = [question_stats(p) for p in sorted(glob.glob(os.path.join(R, "eval", "replay", "eagle2_d%d_total*.json" % eq)))]
        if eqd and minp_at[eq] and eq != 6:
            e, lo, hi, _ = bootstrap(eqd, minp_at[eq])
            parts.append("at depth %d the threshold verifies %s [%s, %s] fewer tokens than EAGLE-2's fixed totals at "
                         "the same depth" % (eq, pct(e), pct(lo), pct(hi)))
            goal["min_p_vs_total_eqdepth"] = (e, lo, hi)
        if eqd and sweeps["c2t"]:
            per = []
            for b in benches + ["all"]:
                sel = (lambda runs: runs) if b == "all" else \
                    (lambda runs, b=b: [{k: v for k, v in r.items() if k[0] == b} for r in runs])
                e, lo, hi, _ = bootstrap(sel(eqd), sel(sweeps["c2t"]))
                per.append("%s %s [%s, %s]" % ("overall" if b == "all" else b, pct(e), pct(lo), pct(hi)))
                if b == "all":
                    goal["total_eqdepth"] = (e, lo, hi)
            parts.append("against EAGLE-2's fixed totals at depth %d (nodes to depth %d, C2T's d_max; %d totals, "
                         "replayed), C2T verifies %s fewer tokens at equal τ" % (eq, eq + 1, len(eqd), ", ".join(per)))
        if parts:
            w("**Where the saving comes from.** EAGLE-2's pool cut by one threshold on P instead of a fixed total "
              "(`--param min_p`, total all, replayed) sizes each tree by the draft's own confidence without a "
              "classifier: %s (95%% bootstrap over questions). What C2T saves beyond the threshold at its own "
              "depth is what its classifier's features add." % "; ".join(parts))
            w("")
        msg = gnuplot_curves(R, benches, curves, eq)
        if msg:
            w("(%s)" % msg)
            w("")
        # ---------------- goal ----------------
        w("## Goal check")
        w("")
        avg = sum(means) / len(means) if means else None
        tau_ok = None
        if e2d and c5:
            tau_ok = c5["all"]["tau"] >= e2d["all"]["tau"]
            n_tau = sum(1 for b in benches if b in e2d and b in c5 and c5[b]["tau"] >= e2d[b]["tau"])
        red_ok = avg is not None and avg >= GOAL_REDUCTION
        met = bool(red_ok and tau_ok)
        w("- γ reduction at equal τ, averaged over the %d benchmarks with C2T points inside EAGLE-2's τ range "
          "(each benchmark: mean over its C2T sweep points): **%s** (goal ≥ %d%%): %s." % (
              len(means), pct(avg), GOAL_REDUCTION * 100, "met" if red_ok else "not met"))
        r05s = [v[0] for k, v in goal.get("per_bench", {}).items() if k != "all" and v[0] is not None]
        if r05s:
            w("- The same read at C2T β 0.5's τ only: %s averaged over %d benchmarks." % (pct(sum(r05s) / len(r05s)), len(r05s)))
        if tau_ok is not None:
            w("- τ at β 0.5 against EAGLE-2 defaults, overall: %.3f vs %.3f: %s (per benchmark: %d of %d at least as high)." % (
                c5["all"]["tau"], e2d["all"]["tau"], "met" if tau_ok else "not met", n_tau, len(benches)))
        else:
            w("- τ at β 0.5 against EAGLE-2 defaults: a headline run is missing.")
        w("- **Goal %s.**" % ("met" if met else "not met"))
        with open(os.path.join(R, "goal.txt"), "w") as f:
            f.write("goal_met=%s\nmean_reduction=%s\ntau_ok=%s\n" % ("yes" if met else "no", avg, tau_ok))
            if goal.get("interval"):
                f.write("pooled_reduction=%s\npooled_lo=%s\npooled_hi=%s\n" % goal["interval"])
            f.write("e2_eq_depth=%d\n" % eq)
            if goal.get("min_p_vs_total_eqdepth"):
                f.write("min_p_vs_total_eqdepth=%s\nmin_p_vs_total_eqdepth_lo=%s\nmin_p_vs_total_eqdepth_hi=%s\n"
                        % goal["min_p_vs_total_eqdepth"])
            if goal.get("total_eqdepth"):
                f.write("c2t_vs_total_eqdepth=%s\nc2t_vs_total_eqdepth_lo=%s\nc2t_vs_total_eqdepth_hi=%s\n"
                        % goal["total_eqdepth"])
            for d in ("d6", "eqdepth"):
                if "min_p_" + d in goal:
                    f.write(("min_p_{0}_vs_total=%s\nmin_p_{0}_vs_total_lo=%s\nmin_p_{0}_vs_total_hi=%s\n"
                             "c2t_vs_min_p_{0}=%s\nc2t_vs_min_p_{0}_lo=%s\nc2t_vs_min_p_{0}_hi=%s\n").format(d)
                            % goal["min_p_" + d])
        rb = os.path.join(R, "recall_bound.txt")
        if not met:
            w("")
            if os.path.exists(rb):
                w("Since the goal is missed, `tools/experiments/recall_bound.py` on the collect traces estimates what any "
                  "classifier of (P, H, d) could gain (two models, not ours: monotone gradient boosting and a "
                  "logistic regression with pairwise products, fitted on 70% of the trees and scored on the rest, "
                  "the better of the two in each column; recall = share of accepted nodes kept at a positive rate θ):")
                w("")
                w("```")
                w(open(rb).read().rstrip())
                w("```")
                w("")
                best, saving = None, None
                for line in open(rb):
                    if line.startswith("saving_max="):
                        saving = [float(x.split("=")[1].rstrip("%")) for x in line.split()[:2]]
                        continue
                    f = line.replace("(N=", " ").replace(")", " ").split()
                    try:
                        theta, e2r, n, mpt, mgl = float(f[0]), float(f[1]), int(f[2]), float(f[3]), float(f[4])
                    except (ValueError, IndexError):
                        continue
                    gain = max(mpt, mgl) - e2r
                    if best is None or gain > best[0]:
                        best = (gain, theta, n, e2r, max(mpt, mgl))
                if best:
                    w("**Bound:** at equal θ the best (P, H, d) model's recall differs from EAGLE-2's top-N by at most "
                      "**%+.1f points** (θ %.4f, N = %d: %.3f vs %.3f)%s. The held-out trees hold about a hundred "
                      "accepted nodes, so each recall figure moves by a point or more with the split." % (
                          100 * best[0], best[1], best[2], best[4], best[3],
                          "; at EAGLE-2's recall, its one threshold keeps **%.1f%% fewer nodes on average over N = "
                          "10–150** (at most %.1f%%), which is about what a classifier can save in γ at equal τ on "
                          "these drafts" % (saving[1], saving[0]) if saving else ""))
                    w("")
                w("Where the model's per-tree recall is close to EAGLE-2's top-N at the same θ, ranking by P already "
                  "captures what (P, H, d) can tell, and no C2T classifier can save much γ on these drafts; "
                  "the global-threshold column is what a fixed β can reach by varying the tree size.")
            else:
                w("(`tools/experiments/recall_bound.py` has not run yet or failed: it needs h5py, numpy and scikit-learn, "
                  "see tools/requirements.txt; `make paper` runs it when the goal is missed.)")
            cal = calibration_row(os.path.join(R, "calibration.csv"))
            if cal:
                w("")
                w("**Calibration of P** on the collect traces (`tools/experiments/calibration.py`, `calibration.md`): "
                  "ECE %s overall, by depth 1–4 %s (0 = a node of joint probability P is accepted with probability "
                  "P). Where P is calibrated and its acceptance rate does not move with depth, (P, H, d) has little "
                  "to tell beyond P, and a threshold on P is what a classifier can at best reproduce." % cal)
        w("")

    # ---------------- transfer ----------------
    cats = a.categories.split()
    tdir = os.path.join(R, "transfer")
    cls_names = cats + ["all", "demo"]
    tr_names = cats + ["demo"]
    cells = {}
    for cl in cls_names:
        for tr in tr_names:
            d = os.path.join(tdir, "%s_on_%s" % (cl, tr))
            if os.path.isdir(d):
                c = transfer_cell(d)
                if c:
                    cells[(cl, tr)] = c
    if cells:
        cls_names = [c for c in cls_names if any((c, t) in cells for t in tr_names)]
        tr_names = [t for t in tr_names if any((c, t) in cells for c in cls_names)]
        w("## Transfer: a classifier trained on one prompt source, evaluated on the others")
        w("")
        w("Rows: the classifier (trained on that category's collect traces; `all` = the classifier above, on every "
          "category; `demo` = `make demo`'s, trained on the demo family's traces). Columns: the traces it is "
          "evaluated on (`spec-analyze --classifier W.json --beta 0.5`, every tree). Each cell: C2T's recall "
          "(share of accepted nodes kept) / θ (share of nodes kept) at β 0.5, and in brackets the recall gain "
          "over EAGLE-2's top-N at the same θ (its top-N curve interpolated; + = C2T keeps more accepted nodes "
          "for the same tree size). Diagonal cells and the `all` row are in-sample (the classifier saw 95% of "
          "those trees); off-diagonal cells are transfer.")
        w("")
        w("| trained on \\ evaluated on | " + " | ".join(tr_names) + " |")
        w("|---|" + "---|" * len(tr_names))
        with open(os.path.join(R, "transfer.csv"), "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["trained_on", "evaluated_on", "c2t_recall", "c2t_theta", "e2_recall_at_theta", "gain",
                         "e2_top60_recall", "e2_top60_theta", "trees", "accepted"])
            for cl in cls_names:
                out = []
                for tr in tr_names:
                    c = cells.get((cl, tr))
                    if not c:
                        out.append("")
                        continue
                    gain = None if c["e2_recall_at_theta"] is None else c["recall"] - c["e2_recall_at_theta"]
                    cell = "%.3f / %.3f (%s)" % (c["recall"], c["theta"], fmt(gain, "%+.3f"))
                    out.append("*%s*" % cell if cl == tr else cell)
                    cw.writerow([cl, tr, c["recall"], c["theta"], c["e2_recall_at_theta"], gain,
                                 c["e2_top_recall"], c["e2_top_theta"], c["trees"], c["accepted"]])
                w("| %s | %s |" % (cl, " | ".join(out)))
            ref = [cells.get((cls_names[0], t)) for t in tr_names]
            w("| *EAGLE-2 top-60* | " + " | ".join("%.3f / %.3f" % (c["e2_top_recall"], c["e2_top_theta"]) if c else ""
                                                for c in ref) + " |")
            w("| *trees, accepted nodes* | " + " | ".join("%d, %d" % (c["trees"], c["accepted"]) if c else "" for c in ref) + " |")
        w("")
        w("Per-category traces are small (the accepted-node count is the number of positives a classifier is "
          "trained and judged on), so differences of a few recall points are within noise.")
        if "demo" not in tr_names:
            w("The demo family's trace is absent (`make demo` writes results/traces.h5): no demo row or column.")
        w("")

    # ---------------- analyses ----------------
    w("## spec-analyze on the collect traces")
    w("")
    at = os.path.join(R, "analyze.txt")
    if os.path.exists(at):
        w("`spec-analyze results/paper/traces_*.h5 --classifier results/paper/classifier.json --beta 0.5 --out "
          "results/paper/analyze` (CSVs and PNGs in `analyze/`; each category is a \"benchmark\" row):")
        w("")
        w("```")
        w(open(at).read().rstrip())
        w("```")
    else:
        w("(not run)")
    w("")
    ad = os.path.join(R, "analyze_demo.txt")
    w("## spec-analyze on the demo trace, for comparison")
    w("")
    if os.path.exists(ad):
        w("`spec-analyze results/traces.h5 --classifier results/classifier.json --beta 0.5` (make demo's trace and "
          "classifier; CSVs and PNGs in `analyze_demo/`):")
        w("")
        w("```")
        w(open(ad).read().rstrip())
        w("```")
    else:
        w("The demo trace is absent (`make demo` writes results/traces.h5 and results/classifier.json).")
    w("")
    tr = os.path.join(R, "train_report.json")
    if os.path.exists(tr):
        d = json.load(open(tr))
        m, dd = d.get("metrics", {}), d.get("data", {})
        ct, e2 = m.get("c2t_tree", {}), m.get("eagle2", {})
        w("Classifier (`classifier.json`): %s trees (%s training positives), selected epoch %s; on its %s held-out "
          "trees (%s accepted nodes) at β %s: recall %s at θ %s (C2T's tree, dropped parents drop their children), "
          "EAGLE-2 top-%s: recall %s at θ %s; AUC %s." % (
              dd.get("trees"), dd.get("train_positives"), d.get("selected_epoch"), dd.get("eval_trees"),
              dd.get("eval_positives"), m.get("beta"), fmt(ct.get("recall"), "%.3f"), fmt(ct.get("theta"), "%.4f"),
              e2.get("topn", 60), fmt(e2.get("recall"), "%.3f"), fmt(e2.get("theta"), "%.4f"), fmt(m.get("auc"), "%.3f")))
        if m.get("c2t_tree_recall_at_eagle2_theta") is not None:
            at = m["c2t_tree_recall_at_eagle2_theta"]
            w("Cut to EAGLE-2's θ, C2T's tree keeps %s of the accepted held-out nodes against EAGLE-2's %s: the "
              "classifier ranks %s than P alone (epoch chosen by `--select %s`)." % (
                  fmt(at, "%.3f"), fmt(e2.get("recall"), "%.3f"),
                  "better" if at > e2.get("recall", 0) else "no better",
                  d.get("settings", {}).get("selection", {}).get("rule", "beta")))
        w("")

    with open(os.path.join(R, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("report: %s" % os.path.join(R, "report.md"))


if __name__ == "__main__":
    main()
