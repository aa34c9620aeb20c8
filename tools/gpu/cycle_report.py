#!/usr/bin/env python3
"""The figures of tools/gpu/gpu_remote.sh's cycle and cycle-smollm2 steps, as
docs/cuda/latest.json.

Reads, from the steps' log folders (each file from the first folder that has
it): device.txt (the GPU's name), cycle_eagle2.json, cycle_c2t.json (spec-eval
with the ar baseline, --check-lossless), cycle_eagle2_graphs.json (eagle2 with
--cuda-graphs on: forwards signed and replayed), cycle_eagle2_t{4,8,16}.json
(eagle2 at fixed totals, against which --total auto is held), cycle_rc.txt (each run's exit status),
bench_cuda.log (tests/bench_cuda --7b), bench_cuda_block_types.log (its
--block-types products) and collect.log (spec-collect's last
progress line: questions done at a rate, records).  Writes the JSON to stdout; a figure whose input is missing is
null, never guessed.
usage: cycle_report.py LOG_DIR [LOG_DIR ...]
"""
import json
import os
import re
import sys
import time


def find(folders, name):
    for folder in folders:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return None


def load(folders, name):
    path = find(folders, name)
    try:
        with open(path) as f:
            return json.load(f)
    except (TypeError, OSError, ValueError):
        return None


def text(folders, name):
    path = find(folders, name)
    try:
        with open(path) as f:
            return f.read()
    except (TypeError, OSError):
        return ""


def fraction_of_bound(log, shape):
    """The 'decode 1 token' row's percentage after the shape's heading."""
    m = re.search(re.escape(shape) + r" shape.*?decode 1 token \(tokens/s\)\s+\S+\s+\S+\s+(\d+)%", log, re.S)
    return int(m.group(1)) / 100 if m else None


def block_type_products(log):
    """bench_cuda --block-types' rows: {shape: {type: microseconds and GB/s
    of 1 and of 16 tokens, and of 1 token as graph nodes where the row has
    them}}, or None where the log has none."""
    rows = {}
    for m in re.finditer(r"^(\S+ \d+x\d+)\s+(\S+)\s+\d+\s+([\d.]+) \(\s*(\d+)\s+\d+%\)\s+([\d.]+) \(\s*(\d+)\)"
                         r"(?:\s+([\d.]+) \(\s*(\d+)\s+\d+%\))?$", log, re.M):
        row = {"us_1": float(m.group(3)), "gb_s_1": int(m.group(4)), "us_16": float(m.group(5)), "gb_s_16": int(m.group(6))}
        if m.group(7):
            row.update({"graph_us_1": float(m.group(7)), "graph_gb_s_1": int(m.group(8))})
        rows.setdefault(m.group(1), {})[m.group(2)] = row
    return rows or None


def phases(rep):
    """Seconds per cycle of each phase of a spec-eval total."""
    t = rep["total"]
    c = t.get("cycles") or 0
    if not c:
        return None
    return {k: t[k] / c for k in ("draft_s", "distribution_s", "classifier_s", "verify_s") if k in t}


def main():
    folder = sys.argv[1:]
    device = text(folder, "device.txt").strip() or None
    e2, c2t, graphs, c2t_layers, e2_auto, e2_batch = (
        load(folder, n) for n in ("cycle_eagle2.json", "cycle_c2t.json", "cycle_eagle2_graphs.json",
                                  "cycle_c2t_layers.json", "cycle_eagle2_auto.json", "cycle_eagle2_batch.json"))
    fixed = {n: load(folder, "cycle_eagle2_t%d.json" % n) for n in (4, 8, 16)}
    fixed = {n: r for n, r in fixed.items() if r}
    if e2:
        fixed[60] = e2
    rcs = dict(line.split() for line in text(folder, "cycle_rc.txt").splitlines() if len(line.split()) == 2)
    bench = text(folder, "bench_cuda.log")
    m = re.search(r"(\d+)/\d+\s+([\d.]+) \S+/s.*records (\d+)", text(folder, "collect.log"))
    collect_s = int(m.group(3)) * float(m.group(2)) / int(m.group(1)) if m and float(m.group(2)) > 0 else None
    out = {
        "device": device,
        "date": time.strftime("%Y-%m-%d"),
        "smollm2_ar_tok_s": e2["total"].get("v_ar") if e2 else None,
        "smollm2_eagle2_speedup": e2["total"].get("speedup") if e2 else None,
        "smollm2_eagle2_speedup_ci95": e2["total"].get("speedup_ci95") if e2 else None,
        "smollm2_c2t_speedup": c2t["total"].get("speedup") if c2t else None,
        "smollm2_c2t_speedup_ci95": c2t["total"].get("speedup_ci95") if c2t else None,
        "smollm2_lossless": (rcs.get("eagle2") == "0" and rcs.get("c2t") == "0") if e2 and c2t else None,
        "smollm2_eagle2_tok_s": e2["total"].get("v") if e2 else None,
        "smollm2_eagle2_phase_s_per_cycle": phases(e2) if e2 else None,
        # host reads a cycle and cycles recorded as units (spec-eval's device_cycle)
        "smollm2_eagle2_device_cycle": e2.get("device_cycle") if e2 else None,
        "smollm2_eagle2_graphs_device_cycle": graphs.get("device_cycle") if graphs else None,
        "smollm2_c2t_device_cycle": c2t.get("device_cycle") if c2t else None,
        "smollm2_c2t_program": c2t["settings"].get("program") if c2t else None,
        "smollm2_c2t_phase_s_per_cycle": phases(c2t) if c2t else None,
        # the per-layer program against it: same tau and gamma, its speed and reads
        "smollm2_c2t_layers": {"tok_s": c2t_layers["total"].get("v"), "fixed_tok_s": c2t["total"].get("v"),
                               "same_tau_gamma": (c2t_layers["total"]["tau"] == c2t["total"]["tau"] and
                                                  c2t_layers["total"]["gamma"] == c2t["total"]["gamma"]),
                               "device_cycle": c2t_layers.get("device_cycle")} if c2t_layers and c2t else None,
        "smollm2_eagle2_graphs": {"speedup": graphs["total"].get("speedup"),
                                  "speedup_ci95": graphs["total"].get("speedup_ci95"),
                                  "tok_s": graphs["total"].get("v"),
                                  "lossless": rcs.get("eagle2_graphs") == "0"} if graphs else None,
        # eagle2 --total auto against the fixed total 60 (issue: auto >= the best fixed size)
        "smollm2_eagle2_auto": {"speedup": e2_auto["total"].get("speedup"),
                                "speedup_ci95": e2_auto["total"].get("speedup_ci95"),
                                "tau": e2_auto["total"].get("tau"),
                                "lossless": rcs.get("eagle2_auto") == "0",
                                "cost_model": {k: e2_auto.get("cost_model", {}).get(k)
                                               for k in ("chosen_mean", "chosen_p10", "chosen_p90", "draft_switch")},
                                "device_cycle": e2_auto.get("device_cycle")} if e2_auto else None,
        # eagle2 at fixed totals (60: the paper's, cycle_eagle2.json) and auto's speedup over the best of theirs
        # (each against the ar of its own run)
        "smollm2_eagle2_fixed": {str(n): {"speedup": r["total"].get("speedup"),
                                          "speedup_ci95": r["total"].get("speedup_ci95"),
                                          "tau": r["total"].get("tau"), "tok_s": r["total"].get("v")}
                                 for n, r in sorted(fixed.items())} or None,
        "smollm2_eagle2_auto_over_best_fixed": (
            e2_auto["total"]["speedup"] / max(r["total"]["speedup"] for r in fixed.values()))
        if e2_auto and fixed and all(r["total"].get("speedup") for r in list(fixed.values()) + [e2_auto]) else None,
        # eagle2 at --batch 8: the tree ops batched over the slots, against ar
        "smollm2_eagle2_batch8": {"speedup": e2_batch["total"].get("speedup"),
                                  "speedup_ci95": e2_batch["total"].get("speedup_ci95"),
                                  "tok_s": e2_batch["total"].get("v"),
                                  "lossless": rcs.get("eagle2_batch") == "0",
                                  "device_cycle": e2_batch.get("device_cycle")} if e2_batch else None,
        "decode_1b_fraction_of_bound": fraction_of_bound(bench, "1B"),
        "decode_7b_fraction_of_bound": fraction_of_bound(bench, "LLaMA-2-7B"),
        "collect_records_s": collect_s,
        "block_type_products": block_type_products(text(folder, "bench_cuda_block_types.log")),
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
