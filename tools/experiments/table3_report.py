#!/usr/bin/env python3
"""table3.sh's report: from results/table3/
  eval_{static,c2t}_b{B}.json   the chain runs (spec-eval reports, ar inside),
  tree_{eagle2,c2t}_b{T}.json   the trees at batch T (with --trees T),
  anchor_ours.tsv               bench_forward --batched rows,
  anchor_llamacpp.txt           llama-batched-bench's table (optional)
-> table3.csv (one row per method and batch size), table3.md (the tables
and the aims) and, with gnuplot, table3.png (speedup over ar against batch
size).

    python3 tools/experiments/table3_report.py results/table3 [--trees 8] 1 8 32 64

Standard library only (and tools/c2ttools)."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from c2ttools.llamacpp import batched_stg  # noqa: E402

CHAIN = (("static", "EAGLE static chain"), ("c2t", "C2T early stop"))
TREES = (("eagle2", "EAGLE-2 tree"), ("c2t", "C2T tree"))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_rows(path, name, batch, with_ar):
    """The rows of one spec-eval report: ar from its baseline, then the policy."""
    t = load(path)["total"]
    rows = []
    if with_ar:
        rows.append(dict(method="ar", batch=batch, tau=1.0, gamma=0, new_tokens=int(t["new_tokens"]),
                         tokens_per_s=t["v_ar"], speedup=1.0))
    ci = t.get("speedup_ci95") or [t["speedup"], t["speedup"]]
    rows.append(dict(method=name, batch=batch, tau=t["tau"], gamma=int(t["gamma"]), new_tokens=int(t["new_tokens"]),
                     tokens_per_s=t["v"], speedup=t["speedup"], speedup_lo=ci[0], speedup_hi=ci[1],
                     pairs=int(t.get("speedup_pairs", 1))))
    return rows


def with_ci(r):
    """A speedup with its 95% interval over the A/B pairs (spec-eval --repeats)."""
    return f"{r['speedup']:.2f}x [{r['speedup_lo']:.2f}, {r['speedup_hi']:.2f}]"


def ratio_ci(a, b):
    """a's speedup over b's, with the interval their intervals allow at most
    (the two come from separate A/B runs)."""
    return (f"{a['speedup'] / b['speedup']:.2f}x [{a['speedup_lo'] / b['speedup_hi']:.2f}, "
            f"{a['speedup_hi'] / b['speedup_lo']:.2f}]")


VARIANTS = {"": "ours", "_kv_bf16": "ours, BF16 KV", "_fast_gemm": "ours, fast GEMM",
            "_fast_gemm_kv_bf16": "ours, fast GEMM + BF16 KV"}


def anchor(out):
    """({variant: {batch: S_TG}} of bench_forward's rows, the variant its row name's
    suffix (VARIANTS), and {batch: S_TG} of llama.cpp) from the anchor files."""
    ours, theirs = {}, {}
    path = os.path.join(out, "anchor_ours.tsv")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 4 and f[1].startswith("batched_tg") and f[1][len("batched_tg"):] in VARIANTS:
                ours.setdefault(f[1][len("batched_tg"):], {})[int(f[2])] = float(f[3])
    path = os.path.join(out, "anchor_llamacpp.txt")
    if os.path.exists(path):
        theirs = batched_stg(path)
    return ours, theirs


def outputs(path):
    """{(benchmark, question id, turn): output ids} of a spec-eval report."""
    return {(b["name"], q["question_id"], t["turn"]): t.get("output_ids")
            for b in load(path)["benchmarks"] for q in b["questions"] for t in q["turns"]}


def invariance(out, batches):
    """Per chain method: (sequences identical to the first batch size's at every other size, sequences)."""
    res = {}
    for m, name in CHAIN:
        runs = [outputs(os.path.join(out, f"eval_{m}_b{b}.json")) for b in batches]
        same = sum(all(r.get(k) == v for r in runs[1:]) for k, v in runs[0].items())
        res[name] = (same, len(runs[0]))
    return res


def main():
    args = sys.argv[1:]
    out = args.pop(0)
    trees = None
    if args and args[0] == "--trees":
        trees = int(args[1])
        args = args[2:]
    batches = [int(b) for b in args]
    rows = []
    for b in batches:
        for i, (m, name) in enumerate(CHAIN):
            rows += run_rows(os.path.join(out, f"eval_{m}_b{b}.json"), name, b, i == 0)
    tree_rows = []
    if trees:
        for m, name in TREES:
            tree_rows += run_rows(os.path.join(out, f"tree_{m}_b{trees}.json"), name, trees, False)
    ours, theirs = anchor(out)
    base = ours.get("", {})
    b1 = base[min(base)] if base else None
    for v, name in VARIANTS.items():
        for b, o in sorted(ours.get(v, {}).items()):
            rows.append(dict(method=f"ar decode, {name} (bench_forward --batched)", batch=b, tau=1.0, gamma=0,
                             new_tokens=0, tokens_per_s=o, speedup=o / b1 if b1 else 0.0))
    for b, t in sorted(theirs.items()):
        if b in base:
            rows.append(dict(method="ar decode, llama.cpp (llama-batched-bench)", batch=b, tau=1.0, gamma=0,
                             new_tokens=0, tokens_per_s=t, speedup=t / b1))
    cols = ["method", "batch", "tau", "gamma", "new_tokens", "tokens_per_s", "speedup", "speedup_lo", "speedup_hi"]
    with open(os.path.join(out, "table3.csv"), "w", encoding="utf-8") as f:
        f.write(",".join(cols) + "\n")
        for r in rows + tree_rows:
            f.write(",".join("" if c not in r else f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c])
                             for c in cols) + "\n")

    get = lambda name, b: next(x for x in rows + tree_rows if x["method"] == name and x["batch"] == b)
    st = load(os.path.join(out, f"eval_static_b{batches[0]}.json"))["settings"]
    arith = (f"--device {st.get('device', 'cpu')} --cpu-fast-gemm {st.get('cpu_fast_gemm', 'off')} "
             f"--kv-dtype {st.get('kv_dtype', 'f32')}")
    pairs = get(CHAIN[0][1], batches[0])["pairs"]
    md = [f"Chain mode, at most 4 draft tokens a cycle; speedup over ar at the same batch size, measured in the "
          f"same spec-eval run as {pairs} A/B pairs of whole runs (the median ratio and its sign-test "
          f"interval, of the coverage spec-eval reports as speedup_ci_level; τ, γ verified tokens); spec-eval's device and arithmetic: `{arith}`:", "",
          "| method | " + " | ".join(f"batch {b}" for b in batches) + " |", "|---|" + "---|" * len(batches)]
    md.append("| ar (tok/s) | " + " | ".join(f"{get('ar', b)['tokens_per_s']:.1f}" for b in batches) + " |")
    for _, name in CHAIN:
        md.append(f"| {name} | " + " | ".join(
            f"{with_ci(get(name, b))} (τ {get(name, b)['tau']:.2f}, γ {get(name, b)['gamma']})" for b in batches)
            + " |")
    # each method's speedup is against the ar run of its own spec-eval call, so their ratio leaves
    # out how fast the machine was between the two calls; its interval is the widest the two allow
    md.append("| C2T / static chain (speedups' ratio) | " + " | ".join(
        ratio_ci(get(CHAIN[1][1], b), get(CHAIN[0][1], b)) for b in batches) + " |")
    if len(batches) > 1:
        inv = invariance(out, batches)
        md += ["", "Batch invariance: sequences whose tokens at every batch size equal batch "
               f"{batches[0]}'s: " + ", ".join(f"{name} {a} of {n}" for name, (a, n) in inv.items()) + "."]
    if trees:
        e, c = get(TREES[0][1], trees), get(TREES[1][1], trees)
        md += ["", f"Trees at batch {trees}:", "", "| method | tok/s | speedup over ar | τ | γ |", "|---|---|---|---|---|"]
        for r in (e, c):
            md.append(f"| {r['method']} | {r['tokens_per_s']:.1f} | {with_ci(r)} | {r['tau']:.2f} | {r['gamma']} |")
        md.append(f"\nC2T / EAGLE-2: {ratio_ci(c, e)} (speedups' ratio) at τ "
                  f"{100 * (c['tau'] / e['tau'] - 1):+.1f}% (aim: ≥ 1.1x at τ within 2%)")
    if base:
        vs = [v for v in VARIANTS if v and v in ours]
        md += ["", "Batched plain decoding (prompts and steps as llama-batched-bench's; S_TG tok/s). llama.cpp keeps "
               "an F16 KV cache and multiplies BF16 weights with BF16-rounded activations; ours by default an F32 "
               "cache and F32 products (fast GEMM: `--cpu-fast-gemm on`, BF16 KV: `--kv-dtype bf16`):", "",
               "| batch | ours | × its batch 1 | " + "".join(f"{VARIANTS[v]} | × its batch 1 | " for v in vs)
               + "llama.cpp | ours / llama.cpp | " + "".join(f"{VARIANTS[v]} / llama.cpp | " for v in vs),
               "|---|---|---|" + "---|" * (3 * len(vs) + 2)]
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"   # noqa: E731
        first = lambda v: ours[v][min(ours[v])]   # noqa: E731
        for b, o in sorted(base.items()):
            t = theirs.get(b)
            md.append(f"| {b} | {o:.1f} | {o / b1:.2f}x | "
                      + "".join((f"{ours[v][b]:.1f} | {ratio(ours[v][b], first(v))}" if b in ours[v] else "- | -") + " | "
                                for v in vs)
                      + (f"{t:.1f}" if t else "-") + f" | {ratio(o, t)} | "
                      + "".join(f"{ratio(ours[v].get(b), t)} | " for v in vs))
    with open(os.path.join(out, "table3.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    if shutil.which("gnuplot"):
        data = os.path.join(out, "table3.dat")
        with open(data, "w", encoding="utf-8") as f:
            for b in batches:
                f.write(f"{b} {get(CHAIN[0][1], b)['speedup']} {get(CHAIN[1][1], b)['speedup']}\n")
        script = (f"set terminal png size 800,500; set output '{out}/table3.png'; set logscale x 2;"
                  "set xlabel 'batch size'; set ylabel 'speedup over ar at the same batch size'; set key top left;"
                  f"plot '{data}' using 1:2 with linespoints title 'EAGLE static chain (4)',"
                  f" '{data}' using 1:3 with linespoints title 'C2T early stop', 1 with lines dt 2 title 'ar'")
        subprocess.run(["gnuplot", "-e", script], check=True)
        print(f"plot: {out}/table3.png")
    print(f"csv: {out}/table3.csv")


if __name__ == "__main__":
    main()
