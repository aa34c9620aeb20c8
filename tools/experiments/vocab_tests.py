#!/usr/bin/env python3
"""vocab_tests.sh's comparison: for each DIR/ggml-vocab-*.gguf that has .inp
and .out files (llama.cpp's test-tokenizer-0 cases: inputs separated by
"\\n__ggml_vocab_test__\\n", one line of ids per case), spec-convert
--tokenizer-only, then spec-tokenize --no-bos on every case; prints each
vocabulary's count of equal cases, each difference, and the refusals.  Where
spec-convert wrote a SentencePiece tokenizer.model (a "llama" vocabulary),
Google's sentencepiece library encodes every case with that file too, and
where it wrote a tokenizer.json, Hugging Face's tokenizers library."""
import json
import subprocess
import sys
from pathlib import Path

SEP = "\n__ggml_vocab_test__\n"


def cases(gguf):
    inp = Path(str(gguf) + ".inp").read_text(encoding="utf-8").split(SEP)
    out = Path(str(gguf) + ".out").read_text(encoding="utf-8").split("\n")
    if inp and inp[-1].endswith("\n__ggml_vocab_test__"):
        inp[-1] = inp[-1][: -len("\n__ggml_vocab_test__")]
    return inp, [[int(i) for i in line.split()] for line in out[: len(inp)]]


def main():
    d = Path(sys.argv[1])
    differ = compared = 0
    for gguf in sorted(d.glob("ggml-vocab-*.gguf")):
        if not Path(str(gguf) + ".out").exists():
            continue
        name = gguf.name[len("ggml-vocab-"):-len(".gguf")]
        tok = d / f"tok-{name}"
        r = subprocess.run(["bin/spec-convert", str(gguf), str(tok), "--tokenizer-only"], capture_output=True, text=True)
        if r.returncode:
            print(f"{name:18s} refused: {r.stderr.strip().splitlines()[-1]}")
            continue
        texts, want = cases(gguf)
        lines = "".join(json.dumps(t) + "\n" for t in texts)
        r = subprocess.run(["bin/spec-tokenize", "--tokenizer", str(tok), "--no-bos"], input=lines,
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name:18s} spec-tokenize failed: {r.stderr.strip()}")
            differ += 1
            continue
        got = [json.loads(line) for line in r.stdout.splitlines()]
        bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
        compared += 1
        print(f"{name:18s} {len(texts) - len(bad)} of {len(texts)} cases equal to llama.cpp's ids")
        for t, g, w in bad:
            print(f"    {json.dumps(t)[:60]}: ours {g[:12]} llama.cpp {w[:12]}")
        differ += len(bad) + (len(got) != len(texts))
        if (tok / "tokenizer.model").exists():
            import sentencepiece
            sp = sentencepiece.SentencePieceProcessor(model_file=str(tok / "tokenizer.model"))
            libbad = sum(sp.encode(t) != w for t, w in zip(texts, want))
            lib = "sentencepiece with our tokenizer.model"
        else:
            import tokenizers
            hf = tokenizers.Tokenizer.from_file(str(tok / "tokenizer.json"))
            libbad = sum(hf.encode(t, add_special_tokens=False).ids != w for t, w in zip(texts, want))
            lib = "tokenizers with our tokenizer.json"
        print(f"{'':18s} {lib}: {len(texts) - libbad} of {len(texts)} equal")
        differ += libbad
    if not compared:
        print(f"vocab_tests: no vocabulary with test cases in {d}", file=sys.stderr)
    sys.exit(1 if differ or not compared else 0)


if __name__ == "__main__":
    main()
