"""llama.cpp as the experiments use it: the tools that tools/experiments/llamacpp.sh builds from the
PyPI sdist (bin_dir), a GGUF requantised by llama-quantize (requantize: e.g. a Q4_K_M file's values
dequantised and rounded to BF16, the same values as spec-convert --dtype bf16 writes), and
tools/models/llama_greedy.c compiled against that build's libllama (greedy_bin); and the figures
its benches print (bench_csv: llama-bench -o csv; batched_stg: llama-batched-bench's table)."""
import subprocess
from pathlib import Path

GREEDY_SRC = Path(__file__).resolve().parent.parent / "models" / "llama_greedy.c"
GREEDY_BIN = Path("build/llama_greedy")


def bin_dir():
    """build/llama.cpp/bin, built once (a few minutes)."""
    out = subprocess.run(["sh", "tools/experiments/llamacpp.sh"], check=True, capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def requantize(src, out, qtype, *options):
    """out = src requantised to qtype (BF16, F16, F32, Q8_0, ...) by llama-quantize, once; options go
    before the files (e.g. --output-tensor-type q4_0)."""
    out = Path(out)
    if out.exists():
        return out
    tmp = out.with_name(out.name + ".tmp")
    log = out.with_name(out.name + ".log")
    with open(log, "w") as f:
        subprocess.run([str(bin_dir() / "llama-quantize"), "--allow-requantize", *options, str(src), str(tmp), qtype, "2"],
                       check=True, stdout=f, stderr=subprocess.STDOUT)
    tmp.rename(out)
    return out


def greedy_bin():
    """build/llama_greedy (tools/models/llama_greedy.c against the built libllama), rebuilt when older
    than its source."""
    lib = bin_dir()
    src = Path("build/llama.cpp-src")
    if not GREEDY_BIN.exists() or GREEDY_BIN.stat().st_mtime < GREEDY_SRC.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(GREEDY_BIN), str(GREEDY_SRC), f"-I{src}/include",
                        f"-I{src}/ggml/include", f"-L{lib}", "-lllama", f"-Wl,-rpath,{lib.resolve()}"], check=True)
    return GREEDY_BIN


def bench_csv(path):
    """{(test, n, threads): tok/s} of a llama-bench -o csv file: test "tg" (n = n_gen) or "pp" (n =
    n_prompt); columns found by name in its header."""
    import csv
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            gen = int(r["n_gen"])
            test, n = ("tg", gen) if gen > 0 else ("pp", int(r["n_prompt"]))
            out[(test, n, int(r["n_threads"]))] = float(r["avg_ts"])
    return out


def batched_stg(path):
    """{B: S_TG tok/s} of llama-batched-bench's table (the rows under the header naming "S_TG t/s")."""
    out, head = {}, None
    for line in open(path, encoding="utf-8"):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "S_TG t/s" in cells:
            head = cells
        elif head and cells and not cells[0].startswith("-"):
            try:
                out[int(cells[head.index("B")])] = float(cells[head.index("S_TG t/s")])
            except (ValueError, IndexError):
                pass
    return out
