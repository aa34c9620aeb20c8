#!/usr/bin/env python3
"""Runtime goldens for SmolLM2-135M-Instruct from transformers (tests/test_smollm2.c):

  tests/golden/smollm2_hf.safetensors   transformers' float32 forward on the F32
      conversion (make smollm2-f32, i.e. the GGUF's dequantised weights exactly) of
      one chat prompt that is not from a benchmark: input_ids, and the logits and
      final hidden state of its last ROWS positions
  tests/golden/smollm2_hf_greedy.json   transformers' greedy generate, NEW tokens:
      "local/<k>": {prompt, ids} for the LOCAL prompts below (ids of the prompt
      included, so CI checks them without ../shared), and "<bench>/<question_id>":
      ids for the first turn of the first PER_BENCH questions of each benchmark in
      ../shared (the prompt ids are rebuilt by the test with our tokenizer and
      chatml template, both checked against llama.cpp / transformers elsewhere)

Prompt ids come from bin/spec-tokenize --chat chatml (SmolLM2's default system prompt).
    make smollm2-f32 && python3 tools/golden/smollm2_runtime_golden.py"""
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import save_file

CKPT = "models/smollm2-135m-instruct-f32"
TOK = "models/smollm2-135m-instruct"
BENCH = ["mt_bench", "humaneval", "gsm8k", "alpaca", "sum", "qa"]
PER_BENCH, NEW, ROWS = 4, 64, 8
LOCAL = ["Explain why the sky is blue in two sentences.",
         "Write a Python function that returns the n-th Fibonacci number.",
         "Tom has 3 boxes with 12 pencils each. He gives away 7 pencils. How many are left?"]


def chat_ids(questions):
    lines = "".join(json.dumps(q) + "\n" for q in questions)
    r = subprocess.run(["bin/spec-tokenize", "--tokenizer", TOK, "--chat", "chatml"], input=lines,
                       capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines()]


def main():
    from transformers import LlamaForCausalLM
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    m = LlamaForCausalLM.from_pretrained(CKPT, torch_dtype=torch.float32, attn_implementation="eager").eval()
    local = chat_ids([{"question_id": i, "turns": [t]} for i, t in enumerate(LOCAL)])
    bench = []
    for b in BENCH:
        with open(f"../shared/benchmarks/{b}/question.jsonl", encoding="utf-8") as f:
            qs = [json.loads(line) for line in f if line.strip()][:PER_BENCH]
        for q, ids in zip(qs, chat_ids([{"question_id": q["question_id"], "turns": q["turns"][:1]} for q in qs])):
            bench.append((f"{b}/{q['question_id']}", ids))

    @torch.no_grad()
    def greedy(ids):
        x = torch.tensor([ids])
        out = m.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=NEW,
                         pad_token_id=2)
        return out[0, len(ids):].tolist()

    gold = {}
    for k, ids in enumerate(local):
        gold[f"local/{k}"] = {"prompt": ids, "ids": greedy(ids)}
    for key, ids in bench:
        gold[key] = greedy(ids)
        print(key, file=sys.stderr)
    with open("tests/golden/smollm2_hf_greedy.json", "w") as f:
        json.dump({"model": CKPT, "compute": "transformers float32, eager attention, greedy, "
                   f"up to {NEW} new tokens, stops after <|im_end|>", "generate": gold}, f)
        f.write("\n")
    ids = local[0]
    with torch.no_grad():
        o = m(input_ids=torch.tensor([ids]), output_hidden_states=True)
    save_file({"input_ids": torch.tensor(ids, dtype=torch.int64),
               "logits": o.logits[0, -ROWS:].contiguous(), "hidden": o.hidden_states[-1][0, -ROWS:].contiguous()},
              "tests/golden/smollm2_hf.safetensors",
              metadata={"format": "pt", "model": CKPT, "rows": f"last {ROWS} positions",
                        "compute": "transformers float32, eager attention"})


if __name__ == "__main__":
    main()
