#!/usr/bin/env python3
"""Golden references for the C runtime's tests, from the demo models that
tools/train_demo.py wrote into data/demo/. Run after training:

    python3 tools/demo_refs.py                 # --demo data/demo --golden tests/golden

Writes (all computed by Hugging Face transformers in float32 on the stored BF16
weights: from_pretrained(..., torch_dtype=torch.float32) upcasts BF16 exactly;
eager attention):

  tests/golden/demo_target_logits.safetensors
  tests/golden/demo_draft_logits.safetensors
      input_ids  I64 [T]       the first T (=24) tokens of the first prompt of
                               data/demo/prompts/code_test.jsonl, encoded by the
                               tokenizers library (bos first)
      logits     F32 [T, vocab]
      hidden     F32 [T, hidden] LlamaModel output, i.e. after the final RMSNorm
  tests/golden/demo_generate.json
      {"cases": [{"prompt_ids": [...], "generated_ids": [...]}, ...]}
      target model, generate(do_sample=False, max_new_tokens=32) for the first
      prompt of code_test.jsonl and of continue_test.jsonl; prompt_ids from the
      tokenizers library (bos first); generated_ids are the new tokens only
      (shorter than 32 only if eos was generated).
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM

ROOT = Path(__file__).resolve().parent.parent


def first_prompt(demo, name):
    with open(demo / "prompts" / name) as f:
        q = json.loads(f.readline())
    return q["question_id"], q["turns"][0]


def load(path):
    m = LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32,
                                         attn_implementation="eager")
    m.eval()
    return m


@torch.no_grad()
def logits_ref(model, ids, out_path, meta):
    x = torch.tensor([ids], dtype=torch.int64)
    out = model(input_ids=x, output_hidden_states=True)
    hidden = out.hidden_states[-1][0].float().contiguous()     # after the final norm
    logits = out.logits[0].float().contiguous()
    assert torch.allclose(model.lm_head(hidden), logits, atol=1e-5), "hidden is not the lm_head input"
    ref = {"input_ids": torch.tensor(ids, dtype=torch.int64), "logits": logits, "hidden": hidden}
    save_file(ref, str(out_path), metadata=meta)
    print(f"{out_path}: input_ids {list(ref['input_ids'].shape)} logits {list(logits.shape)} "
          f"hidden {list(hidden.shape)}, {out_path.stat().st_size} bytes; greedy next "
          f"{logits.argmax(-1).tolist()}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", default=str(ROOT / "data" / "demo"))
    ap.add_argument("--golden", default=str(ROOT / "tests" / "golden"))
    ap.add_argument("--tokens", type=int, default=24, help="T of the logits references")
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(2)
    demo, golden = Path(args.demo), Path(args.golden)
    golden.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(demo / "target" / "tokenizer.json"))
    bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|end_of_text|>")

    qid, text = first_prompt(demo, "code_test.jsonl")
    ids = tok.encode(text).ids
    assert ids[0] == bos and len(ids) >= args.tokens, (ids[:3], len(ids))
    ids = ids[:args.tokens]
    target, draft = load(demo / "target"), load(demo / "draft")
    for name, model in (("target", target), ("draft", draft)):
        meta = {"model": f"data/demo/{name}", "prompt": f"data/demo/prompts/code_test.jsonl question_id {qid}",
                "compute": "transformers float32 from BF16 weights, eager attention"}
        logits_ref(model, ids, golden / f"demo_{name}_logits.safetensors", meta)

    cases = []
    for fn in ("code_test.jsonl", "continue_test.jsonl"):
        _, text = first_prompt(demo, fn)
        p = tok.encode(text).ids
        assert p[0] == bos
        with torch.no_grad():
            x = torch.tensor([p], dtype=torch.int64)
            g = target.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                max_new_tokens=args.new_tokens, pad_token_id=eos)
        new = g[0, len(p):].tolist()
        cases.append({"prompt_ids": p, "generated_ids": new})
        print(f"generate {fn}: {len(p)} prompt tokens -> {new}\n  {tok.decode(new)!r}", file=sys.stderr)
    path = golden / "demo_generate.json"
    with open(path, "w") as f:
        json.dump({"cases": cases}, f)
        f.write("\n")
    print(f"{path}: {path.stat().st_size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
