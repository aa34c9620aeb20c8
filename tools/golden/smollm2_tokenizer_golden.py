#!/usr/bin/env python3
"""Token-id goldens for SmolLM2-135M-Instruct from llama.cpp itself, the
tokenizer a CPU user would run on the original GGUF (tests/test_tokenizer.c
compares our tokenizer on the spec-convert'ed tokenizer.json with them):

  tests/golden/tokenizer/smollm2_llamacpp_edge.json      edge cases: text, ids
  tests/golden/tokenizer/bench_smollm2_llamacpp.json.zst every turn of the six
      benchmarks in ../shared, keyed "bench/question_id/turn" (ids only)

llama.cpp is built from the llama-cpp-python==0.3.36 sdist (vendor/llama.cpp):
  pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36
  tar xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36/vendor/llama.cpp
  cmake -B build -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF && cmake --build build --target llama-tokenize -j2
then:  python3 tools/golden/smollm2_tokenizer_golden.py LLAMA_TOKENIZE GGUF
(each text goes through `llama-tokenize -f FILE --ids --no-escape`: special
tokens parsed, no BOS since the GGUF says add_bos_token false)."""
import ast, json, os, subprocess, sys, tempfile

EDGE = ["Hello world", "   2013", "a  2013\t\t99 1,234,567.89", "\n\n\nline\n  indented\n\ttab", " leading space",
        "trailing space ", "emoji \U0001F600\U0001F44D\U0001F3FD and CJK \u4e2d\u6587\u5b57\u7b26 \u65e5\u672c\u8a9e",
        "<|im_start|>user\nhi<|im_end|>", "text with <|endoftext|> inside", "can't won't I'm we'll", "x" * 300,
        "    \n    ", "\u00c0\u00c9\u00ce\u00d5\u00dc \u00f1 \u00df \ufb01", "1234567890", "a1b2c3", "   ",
        "<|im_start|>", "\u0120 not a byte", "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
        "trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"]
BENCH = ["alpaca", "gsm8k", "humaneval", "mt_bench", "qa", "sum"]


def tokenize(exe, gguf, text):
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", delete=False) as f:
        f.write(text)
    try:
        out = subprocess.run([exe, "-m", gguf, "-f", f.name, "--ids", "--log-disable", "--no-escape"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    return ast.literal_eval(out.strip().splitlines()[-1])


def main():
    exe, gguf = sys.argv[1], sys.argv[2]
    gold = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "tokenizer")
    lib = "llama.cpp llama-tokenize (llama-cpp-python 0.3.36 sdist) on SmolLM2-135M-Instruct.Q4_1.gguf"
    edge = [{"text": t, "ids": tokenize(exe, gguf, t)} for t in EDGE]
    json.dump({"library": lib, "edge": edge}, open(os.path.join(gold, "smollm2_llamacpp_edge.json"), "w"),
              ensure_ascii=False, indent=0)
    ids = {}
    shared = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "benchmarks")
    for b in BENCH:
        for line in open(os.path.join(shared, b, "question.jsonl"), encoding="utf-8"):
            q = json.loads(line)
            for k, t in enumerate(q["turns"]):
                ids[f"{b}/{q['question_id']}/{k}"] = tokenize(exe, gguf, t)
    raw = json.dumps({"library": lib, "ids": ids}, separators=(",", ":")).encode()
    path = os.path.join(gold, "bench_smollm2_llamacpp.json.zst")
    subprocess.run(["zstd", "-19", "-q", "-f", "-o", path], input=raw, check=True)
    print(len(edge), "edge texts,", len(ids), "benchmark turns")


if __name__ == "__main__":
    main()
