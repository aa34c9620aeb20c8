#!/usr/bin/env python3
"""batch_auto.sh's report: from OUT/{name}_b{B}.json (spec-eval reports,
ar at the same batch size inside each) -> OUT/batch_auto.md: per batch
size, each run's speedup over ar with its 95% interval, tau and gamma; the
auto runs' mean chosen size and share of cycles without a draft; auto's
speedup over the best fixed run (the ratio of two A/B speedups, with the
widest interval their intervals allow).

    python3 tools/experiments/batch_auto_report.py results/batch_auto 8 32

Standard library only."""
import glob
import json
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    out, batches = sys.argv[1], [int(b) for b in sys.argv[2:]]
    st = None
    md = []
    for b in batches:
        runs = {}
        for path in sorted(glob.glob(os.path.join(out, f"*_b{b}.json"))):
            j = load(path)
            st = st or j["settings"]
            runs[os.path.basename(path)[: -len(f"_b{b}.json")]] = j
        if not runs:
            continue
        md += ["", f"Batch {b}:", "", "| run | speedup over ar [95%] | τ | γ | ar tok/s | auto: mean size, cycles without a draft |",
               "|---|---|---|---|---|---|"]
        sp = {}
        for name, j in runs.items():
            t = j["total"]
            ci = t.get("speedup_ci95") or [t["speedup"], t["speedup"]]
            sp[name] = (t["speedup"], ci[0], ci[1])
            extra = "-"
            cm = j.get("cost_model")
            if cm:
                sw = cm.get("draft_switch", {})
                n = sw.get("cycles_drafting", 0) + sw.get("cycles_not_drafting", 0)
                extra = (f"{cm['chosen_mean']:.1f}, {100 * sw.get('cycles_not_drafting', 0) / n:.0f}%" if n
                         else f"{cm['chosen_mean']:.1f}")
            ival = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci[0] < ci[1] else "(one ABBA block: no interval)"
            md.append(f"| {name} | {t['speedup']:.2f}x {ival} | {t['tau']:.2f} | {int(t['gamma'])} | "
                      f"{t['v_ar']:.1f} | {extra} |")
        fixed = {k: v for k, v in sp.items() if not k.endswith("_auto")}
        if fixed:
            best = max(fixed, key=lambda k: fixed[k][0])
            f = fixed[best]
            for name, a in sp.items():
                if name.endswith("_auto"):
                    ival = f" [{a[1] / f[2]:.2f}, {a[2] / f[1]:.2f}]" if a[1] < a[2] or f[1] < f[2] else ""
                    md.append(f"\n{name} / the best fixed ({best}): {a[0] / f[0]:.2f}x{ival} (aim: ≥ 1.0)")
    if st:
        md.insert(0, f"Auto sizes against fixed ones, batched; spec-eval's arithmetic `--cpu-fast-gemm "
                     f"{st.get('cpu_fast_gemm', 'off')} --kv-dtype {st.get('kv_dtype', 'f32')}`, "
                     f"{st.get('repeats', 1)} A/B pairs per speedup:")
    with open(os.path.join(out, "batch_auto.md"), "w", encoding="utf-8") as fo:
        fo.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
