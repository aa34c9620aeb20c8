#!/usr/bin/env python3
"""Where a GPU run's time goes, kernel by kernel: reads the CSV that
`ncu --csv --print-units base --metrics gpu__time_duration.sum` prints
(tools/gpu/gpu_remote.sh profile) and prints, per kernel name (template
arguments kept: they name the path), the launches, total and mean
microseconds and the share of the profiled time, largest first.

    tools/gpu/ncu_summary.py OUT/profile_ar.csv [--top 25]
"""
import argparse
import csv
import sys

UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def rows(path):
    """The CSV's rows from its header on (ncu's ==PROF== lines and the
    program's own output may come first)."""
    with open(path, newline="") as f:
        lines = f.readlines()
    head = next((i for i, line in enumerate(lines) if '"Kernel Name"' in line), len(lines))
    return csv.DictReader(line for line in lines[head:] if not line.startswith("=="))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    per = {}
    try:
        for r in rows(a.csv):
            if r.get("Metric Name") != "gpu__time_duration.sum":
                continue
            unit = UNIT_US.get(r.get("Metric Unit", ""))
            if unit is None:
                sys.exit("%s: unknown time unit %r" % (a.csv, r.get("Metric Unit")))
            us = float(r["Metric Value"].replace(",", "")) * unit
            n, t = per.get(r["Kernel Name"], (0, 0.0))
            per[r["Kernel Name"]] = (n + 1, t + us)
    except (OSError, KeyError, ValueError, csv.Error) as e:
        sys.exit("%s: not an ncu gpu__time_duration CSV (%s)" % (a.csv, e))
    if not per:
        sys.exit("%s: no gpu__time_duration.sum rows" % a.csv)
    total = sum(t for _, t in per.values())
    launches = sum(n for n, _ in per.values())
    print("%d launches, %.1f us of kernel time, %.2f us a launch" % (launches, total, total / launches))
    print("%8s %10s %8s %6s  %s" % ("launches", "total us", "mean us", "share", "kernel"))
    for name, (n, t) in sorted(per.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print("%8d %10.1f %8.2f %5.1f%%  %s" % (n, t, t / n, 100 * t / total, name[:110]))


if __name__ == "__main__":
    main()
