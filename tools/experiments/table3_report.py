#!/usr/bin/env python3
"""table3.sh's report: results/table3/eval_{static,c2t}_b{B}.json (spec-eval
reports) -> table3.csv (one row per method and batch size, ar included),
table3.md and, with gnuplot, table3.png (speedup over ar against batch size).

    python3 tools/experiments/table3_report.py results/table3 1 8 32 64

Standard library only."""
import json
import os
import shutil
import subprocess
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    out, batches = sys.argv[1], [int(b) for b in sys.argv[2:]]
    rows = []
    for b in batches:
        ar_done = False
        for method, name in (("static", "EAGLE static chain"), ("c2t", "C2T early stop")):
            r = load(os.path.join(out, f"eval_{method}_b{b}.json"))
            t = r["total"]
            if not ar_done:   # ar at this batch size, from the first run's baseline
                v_ar = t["v_ar"]
                rows.append(dict(method="ar", batch=b, tau=1.0, gamma=0, new_tokens=t["new_tokens"],
                                 tokens_per_s=v_ar, speedup=1.0))
                ar_done = True
            rows.append(dict(method=name, batch=b, tau=t["tau"], gamma=int(t["gamma"]), new_tokens=int(t["new_tokens"]),
                             tokens_per_s=t["v"], speedup=t["speedup"]))
    cols = ["method", "batch", "tau", "gamma", "new_tokens", "tokens_per_s", "speedup"]
    with open(os.path.join(out, "table3.csv"), "w", encoding="utf-8") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join(f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n")
    lines = ["| method | " + " | ".join(f"batch {b}" for b in batches) + " |",
             "|---|" + "---|" * len(batches)]
    for name in ("EAGLE static chain", "C2T early stop"):
        cells = []
        for b in batches:
            r = next(x for x in rows if x["method"] == name and x["batch"] == b)
            cells.append(f"{r['speedup']:.2f}x (τ {r['tau']:.2f}, γ {r['gamma']})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "table3.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if shutil.which("gnuplot"):
        data = os.path.join(out, "table3.dat")
        with open(data, "w", encoding="utf-8") as f:
            for b in batches:
                s = [next(x for x in rows if x["method"] == n and x["batch"] == b)["speedup"]
                     for n in ("EAGLE static chain", "C2T early stop")]
                f.write(f"{b} {s[0]} {s[1]}\n")
        script = (f"set terminal png size 800,500; set output '{out}/table3.png'; set logscale x 2;"
                  "set xlabel 'batch size'; set ylabel 'speedup over ar at the same batch size'; set key top left;"
                  f"plot '{data}' using 1:2 with linespoints title 'EAGLE static chain (4)',"
                  f" '{data}' using 1:3 with linespoints title 'C2T early stop', 1 with lines dt 2 title 'ar'")
        subprocess.run(["gnuplot", "-e", script], check=True)
        print(f"plot: {out}/table3.png")
    print(f"csv: {out}/table3.csv")


if __name__ == "__main__":
    main()
