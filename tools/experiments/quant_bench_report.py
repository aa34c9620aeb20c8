#!/usr/bin/env python3
"""quant_bench.sh's report: per model folder of results/quant_bench/, ours (bench_forward's TSV rows)
against llama.cpp (llama-bench CSVs, llama-batched-bench's table) on the same GGUF -> report.md and
stdout: tg128 at 1 and 2 threads, pp512, batched S_TG at 8 and 32, each with ours / llama.cpp and the
aim of make bench-quant (docs/results.md), and the tree-verification curve.

    python3 tools/experiments/quant_bench_report.py results/quant_bench smollm2 qwen
"""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from c2ttools.llamacpp import batched_stg, bench_csv  # noqa: E402

AIMS = {"tg": 1.0, "pp": 0.8, "batched": 1.0}


def tsv_rows(path):
    """[(test, n, value)] of bench_forward --tsv rows."""
    out = []
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 4:
                out.append((f[1], int(f[2]), float(f[3])))
    return out


def cpu_flags():
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    have = [f for f in ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]
    return " ".join(have) or "no AVX2"


def model_rows(d):
    """[(figure, ours, llama.cpp, aim)] and the tree curve [(n, ms)] of one model's folder."""
    rows = []
    for t in (1, 2):
        ours = [v for test, n, v in tsv_rows(os.path.join(d, f"ours_tg{t}.tsv")) if test == "tg"]
        lc = bench_csv(os.path.join(d, f"llama_tg{t}.csv")) if os.path.exists(os.path.join(d, f"llama_tg{t}.csv")) else {}
        rows.append((f"tg128, {t} thread{'s' if t > 1 else ''}", statistics.mean(ours) if ours else None,
                     lc.get(("tg", 128, t)), AIMS["tg"]))
    main = tsv_rows(os.path.join(d, "ours.tsv"))
    pp = os.path.join(d, "llama_pp.csv")
    lc = bench_csv(pp) if os.path.exists(pp) else {}
    rows.append(("pp512, 2 threads", next((v for test, n, v in main if test == "pp" and n == 512), None),
                 lc.get(("pp", 512, 2)), AIMS["pp"]))
    bt = os.path.join(d, "llama_batched.txt")
    lcb = batched_stg(bt) if os.path.exists(bt) else {}
    for b in (8, 32):
        rows.append((f"batched S_TG, batch {b}", next((v for test, n, v in main if test.startswith("batched_tg") and n == b), None),
                     lcb.get(b), AIMS["batched"]))
    tree = [(n, v) for test, n, v in main if test == "tree_ms"]
    return rows, tree


def fmt(v):
    return "-" if v is None else f"{v:.1f}"


def main():
    root, models = sys.argv[1], sys.argv[2:] or sorted(os.path.basename(p) for p in glob.glob(sys.argv[1] + "/*/"))
    builds = {"avx2": "both built for AVX2 only (ours `make ARCH=-march=haswell`, llama.cpp `GGML_NATIVE=OFF`, "
                      "AVX2/FMA/F16C on).",
              "avx2-vnni": "both built for AVX2 with AVX-VNNI, no AVX-512 (ours `make ARCH=\"-march=haswell -mavxvnni\"`, "
                           "llama.cpp `GGML_NATIVE=OFF`, AVX2/FMA/F16C and `GGML_AVX_VNNI` on)."}
    native = ("ours as built (`cpu_isa` of the build), llama.cpp with its native detection"
              + (" and its AMX off (`LLAMACPP_ISA=noamx`)." if os.environ.get("LLAMACPP_ISA") == "noamx" else "."))
    md = ["# GGUF block types in place against llama.cpp on the same file (`make bench-quant`)", "",
          f"CPU flags: {cpu_flags()}; " + builds.get(os.environ.get("QUANT_ISA", "native"), native),
          f"Our arithmetic: {os.environ.get('QUANT_ARITH', 'not recorded')}.", ""]
    for m in models:
        d = os.path.join(root, m)
        if not os.path.isdir(d):
            continue
        rows, tree = model_rows(d)
        md += [f"## {m}", "", "| figure | ours tok/s | llama.cpp tok/s | ours / llama.cpp | aim |", "|---|---|---|---|---|"]
        for name, ours, lc, aim in rows:
            ratio = f"{ours / lc:.2f}x" if ours and lc else "-"
            met = "" if not (ours and lc) else (" met" if ours / lc >= aim else " not met")
            md.append(f"| {name} | {fmt(ours)} | {fmt(lc)} | {ratio} | >= {aim:.1f}x{met} |")
        if tree:
            one = tree[0][1]
            md += ["", "Tree verification, ms per forward and over one token's: " +
                   ", ".join(f"{n}: {ms:.1f} ms ({ms / one:.2f}x)" for n, ms in tree)]
        md.append("")
    text = "\n".join(md)
    with open(os.path.join(root, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
