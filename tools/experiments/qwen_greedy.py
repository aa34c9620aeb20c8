#!/usr/bin/env python3
"""Greedy tokens of our runtime against llama.cpp's on the same weights and dtype (make qwen first).

Ours: bin/spec-generate on the converted folder in F32 arithmetic (--kv-dtype f32 --cpu-fast-gemm off;
--print-gaps: each step's top-2 logit gap).
llama.cpp: tools/models/llama_greedy.c (one sequence at a time) on the Q4_K_M GGUF requantised by
llama-quantize to the same dtype (BF16: the values our --dtype bf16 conversion holds, except that
llama.cpp keeps norms and biases in F32; F32: the same values everywhere), or with --dtype keep on
the Q4_K_M GGUF itself (ours: make qwen QWEN_DTYPE=keep, the same blocks; both quantise activations
to 8 bits by llama.cpp's Q8_K rule). Both get the same prompt
ids: the first turns of N humaneval and N mt_bench questions in the model's chat template. A prompt
whose tokens differ is explained by our gap at the first difference (a near tie: both runtimes'
arithmetic legitimately picks either). --llama-kv: llama.cpp's KV cache type (f16, its default; f32,
as our default cache keeps K and V).

    python3 tools/experiments/qwen_greedy.py [--dtype bf16|f32|keep] [--per-bench 10] [--max-new 64]
                                             [--llama-kv f16|f32] [--gguf G --model DIR] [--template T]
      -> results/qwen_greedy/<dtype>[_kvf32].json and a summary on stdout
--gguf with --model: any GGUF against the folder spec-convert made of it (--dtype keep for a folder
of its blocks; the result is named after the GGUF). --template: the prompts' chat template (spec-tokenize's;
default auto, the model's own; none for a model without one). --reference transformers: the greedy
tokens of transformers' float32 forward over the --model folder (an F32 conversion; run with a
transformers that knows the architecture) instead of llama.cpp's, without a cache (each token from
a forward over the whole sequence); --concat K joins K questions' first turns into one prompt, so
that prompts reach past a sliding window.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from c2ttools.llamacpp import greedy_bin, requantize  # noqa: E402
from c2ttools.progress import log  # noqa: E402

GGUF = Path("models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
BENCH = Path("../shared/benchmarks")


def prompt_ids(model, bench, n, template):
    """The first turns of the first n questions of bench as token ids, in the given template."""
    lines = (BENCH / bench / "question.jsonl").read_text().splitlines()[:n]
    out = subprocess.run(["bin/spec-tokenize", "--tokenizer", model, "--template", template], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(x) for x in out.splitlines()]


def transformers_greedy(model, prompts, max_new):
    import torch
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32, attn_implementation="eager").eval()
    res = {}
    for k, (key, ids) in enumerate(prompts.items()):
        with torch.no_grad():
            out = m.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=max_new, use_cache=False, pad_token_id=0)
        res[key] = out[0, len(ids):].tolist()
        log(f"qwen_greedy: transformers {k + 1}/{len(prompts)} {key}")
    return res


def ours(model, ids, max_new, threads):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run(["bin/spec-generate", "--target", model, "--ids", ",".join(map(str, ids)), "--max-new-tokens",
                          str(max_new), "--print-gaps", "--device", "cpu", "--kv-dtype", "f32", "--cpu-fast-gemm", "off"], env=env,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return json.loads(out[0]), json.loads(out[1])


def theirs(gguf, prompts, max_new, threads, kv, work):
    inp, outp = work / "llama.in", work / "llama.out"
    inp.write_text("".join(f"{k} {len(ids)} {' '.join(map(str, ids))}\n" for k, ids in prompts.items()))
    outp.unlink(missing_ok=True)
    subprocess.run([str(greedy_bin()), str(gguf), str(inp), str(outp), "--parallel", "1", "--features", "0", "--max-new", str(max_new),
                    "--threads", str(threads), "--kv", kv], check=True, stderr=subprocess.DEVNULL)
    res = {}
    for line in outp.read_text().splitlines():
        f = line.split()
        res[f[0]] = [int(x) for x in f[5:5 + int(f[4])]]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", choices=["bf16", "f32", "keep"], default="bf16")
    ap.add_argument("--per-bench", type=int, default=10)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-kv", choices=["f16", "f32"], default="f16")
    ap.add_argument("--gguf", help="a GGUF of the same model (with --model: the folder converted from it)")
    ap.add_argument("--model")
    ap.add_argument("--template", default="auto")
    ap.add_argument("--reference", choices=["llama.cpp", "transformers"], default="llama.cpp")
    ap.add_argument("--concat", type=int, default=1)
    a = ap.parse_args()
    if (a.gguf is None) != (a.model is None):
        sys.exit("qwen_greedy: --gguf and --model go together")
    model = a.model or "models/qwen2.5-coder-1.5b-instruct" + ("" if a.dtype == "bf16" else "-" + a.dtype)
    if not Path(model, "model.safetensors").exists():
        sys.exit(f"qwen_greedy: {model} is missing (make qwen{'' if a.dtype == 'bf16' else ' QWEN_DTYPE=' + a.dtype})")
    work = Path("results/qwen_greedy")
    work.mkdir(parents=True, exist_ok=True)
    gguf = Path(a.gguf) if a.gguf else GGUF if a.dtype == "keep" else \
        requantize(GGUF, Path("models") / f"qwen2.5-coder-1.5b-instruct.{a.dtype}.gguf", a.dtype.upper())
    prompts = {}
    for bench in ("humaneval", "mt_bench"):
        ids = prompt_ids(model, bench, a.per_bench * a.concat, a.template)
        for i in range(a.per_bench):
            prompts[f"{bench}-{i}"] = [t for j in range(a.concat) for t in ids[i * a.concat + j]]
    if a.reference == "transformers":
        ref = transformers_greedy(model, prompts, a.max_new)
    else:
        log(f"qwen_greedy: llama.cpp on {len(prompts)} prompts x {a.max_new} tokens ({gguf})")
        ref = theirs(gguf, prompts, a.max_new, a.threads, a.llama_kv, work)
    rows, same = [], 0
    for k, (key, ids) in enumerate(prompts.items()):
        got, gaps = ours(model, ids, a.max_new, a.threads)
        want = ref[key]
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                     None if len(got) == len(want) else min(len(got), len(want)))
        same += first is None
        row = {"prompt": key, "n_prompt": len(ids), "ours": got, "reference": want, "first_difference": first,
               "gap_at_difference": None if first is None or first >= len(gaps) else gaps[first],
               "min_gap": min(gaps) if gaps else None}
        rows.append(row)
        log(f"qwen_greedy: {k + 1}/{len(prompts)} {key}: " + ("equal" if first is None else
            f"differs at token {first} (our top-2 gap there {row['gap_at_difference']:.4g})"))
    summary = {"dtype": a.dtype, "reference": a.reference, "concat": a.concat, "llama_kv": a.llama_kv, "prompts": len(rows), "equal": same, "max_new": a.max_new,
               "gguf": str(gguf), "model": model, "rows": rows}
    name = (Path(a.gguf).stem if a.gguf else a.dtype) + ("" if a.llama_kv == "f16" else "_kv" + a.llama_kv) + \
        ("_transformers" if a.reference == "transformers" else "") + ("" if a.concat == 1 else f"_concat{a.concat}")
    (work / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{a.dtype}: {same} of {len(rows)} prompts x {a.max_new} tokens equal to " +
          ("transformers' float32 forward" if a.reference == "transformers" else f"llama.cpp's (its KV cache {a.llama_kv})"))
    for r in rows:
        if r["first_difference"] is not None:
            print(f"  {r['prompt']}: first difference at token {r['first_difference']}, our top-2 logit gap there "
                  f"{r['gap_at_difference']:.4g} (smallest gap over the answer {r['min_gap']:.4g})")


if __name__ == "__main__":
    main()
