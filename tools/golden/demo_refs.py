#!/usr/bin/env python3
"""Golden references for the C runtime's tests on the demo models that
tools/models/train_demo.py wrote into data/demo/. Run after training:

    python3 tools/golden/demo_refs.py   # --demo data/demo --golden tests/golden

Everything is computed by Hugging Face code in float32 on the stored BF16
weights (from_pretrained(..., torch_dtype=torch.float32) upcasts BF16 exactly;
eager attention), never by this project's own model code:

  tests/golden/demo_target.safetensors, tests/golden/demo_draft.safetensors
      (the layout of tools/golden/make_test_checkpoints.py's goldens)
      input_ids  I64 [T]         the first T (16) tokens of the first prompt of
                                 prompts/code_test.jsonl, encoded by the
                                 tokenizers library (bos first)
      logits     F32 [T, vocab]  LlamaForCausalLM
      hidden     F32 [T, hidden] LlamaModel output (after the final RMSNorm)
      gen_prompt I64 [n], gen_ids I64 [32]
                                 generate(do_sample=False, max_new_tokens=32) on
                                 the first prompt of code_test.jsonl (new tokens
                                 only; shorter only if eos came)
      gen_prompt.1, gen_ids.1    (target only) the same for the first prompt of
                                 continue_test.jsonl
  tests/golden/demo_eagle.safetensors
      input_ids  I64 [T]         the same T prompt tokens
      next_id    I64 [1]         the target's greedy token after them
      root_logits F32 [vocab]    the EAGLE head's distribution for the token
                                 after next_id: slot j gets fc([embed(x_{j+1});
                                 f_j]) with x_T = next_id, then ONE transformers
                                 LlamaDecoderLayer (layer_idx 0, input_layernorm
                                 replaced by identity, as EAGLE's cnets1 does),
                                 causal, positions 0..T-1, then the target's
                                 lm_head on the last slot.
      chain_ids  I64 [D]         the head's greedy chain below the root: chain_ids[0]
                                 = argmax root_logits, chain_ids[i] = argmax
                                 chain_logits[i-1]
      chain_logits F32 [D, vocab] node i's distribution: the layer over the T slots
                                 and nodes 1..i (node i: fc([embed(chain_ids[i-1]);
                                 its parent's output]), position T-1+i), causal;
                                 EagleHead.unroll (the training's unrolled steps)
                                 is checked to give the same logits
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

ROOT = Path(__file__).resolve().parents[2]


def first_prompt(demo, name):
    with open(demo / "prompts" / name) as f:
        q = json.loads(f.readline())
    return q["question_id"], q["turns"][0]


def load(path):
    m = LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()
    return m


@torch.no_grad()
def forward_ref(model, ids):
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    hidden = out.hidden_states[-1][0].float().contiguous()     # after the final norm
    logits = out.logits[0].float().contiguous()
    assert torch.allclose(model.lm_head(hidden), logits, atol=1e-5), "hidden is not the lm_head input"
    return logits, hidden


@torch.no_grad()
def greedy(model, prompt, n, eos):
    x = torch.tensor([prompt])
    g = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, pad_token_id=eos)
    return g[0, len(prompt):].tolist()


@torch.no_grad()
def eagle_root_and_chain(demo, target, ids, depth):
    """The EAGLE-1 head of data/demo/eagle on top of the target, built from
    transformers' LlamaDecoderLayer the way EAGLE's cnets1.Model builds it: the
    root's logits, then `depth` nodes down the head's own greedy chain (node i:
    its token, its parent's output feature as input, causal over the context and
    its ancestors). Also checks that EagleHead.unroll
    (tools/drafts/heads.py), the training's view of depth, gives the
    same chain."""
    cfgd = json.load(open(demo / "eagle" / "config.json"))
    cfg = LlamaConfig(**{k: v for k, v in cfgd.items() if k != "bias"})
    cfg._attn_implementation = "eager"
    w = {k: v.float() for k, v in load_file(str(demo / "eagle" / "model.safetensors")).items()}
    H = cfg.hidden_size
    fc = nn.Linear(2 * H, H, bias=True)
    fc.load_state_dict({"weight": w["fc.weight"], "bias": w["fc.bias"]})
    layer = LlamaDecoderLayer(cfg, layer_idx=0)
    layer.input_layernorm = nn.Identity()
    layer.load_state_dict({k[len("layers.0."):]: v for k, v in w.items() if k.startswith("layers.0.")})
    layer.eval()
    rotary = LlamaRotaryEmbedding(config=cfg)

    def run(toks, feats):   # the head over slots 0..n-1, causal; the last slot's output
        n = len(toks)
        x = fc(torch.cat([target.model.embed_tokens(torch.tensor([toks])), feats[None]], dim=-1))
        pos = torch.arange(n)[None]
        mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
        return layer(x, attention_mask=mask, position_ids=pos, position_embeddings=rotary(x, pos))[0][0, -1]

    logits, hidden = forward_ref(target, ids)
    nxt = int(logits[-1].argmax())
    toks, feats = ids[1:] + [nxt], hidden
    out = run(toks, feats)
    root = target.lm_head(out).float().contiguous()
    chain_ids, chain_logits, z = [], [], root
    for _ in range(depth):
        chain_ids.append(int(z.argmax()))
        toks, feats = toks + [chain_ids[-1]], torch.cat([feats, out[None]])
        out = run(toks, feats)
        z = target.lm_head(out).float()
        chain_logits.append(z)

    sys.path.insert(0, str(ROOT / "tools"))   # the drafts and c2ttools packages
    from drafts.heads import EagleHead
    head = EagleHead(cfgd)
    head.load_state_dict(w)
    T = len(ids)
    pad = torch.cat([hidden, torch.zeros(depth, H)])[None]   # features past the context are never read
    preds = head.unroll(pad, target.model.embed_tokens(torch.tensor([toks])), depth + 1)
    mine = torch.stack([target.lm_head(preds[k][0, T - 1 + k]) for k in range(depth + 1)])
    ref = torch.stack([root] + chain_logits)
    err = (mine - ref).abs().max().item()
    assert err <= 1e-4 * ref.abs().max().item(), f"EagleHead.unroll differs from the chain by {err}"
    return nxt, root, torch.tensor(chain_ids, dtype=torch.int64), torch.stack(chain_logits).contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", default=str(ROOT / "data" / "demo"))
    ap.add_argument("--golden", default=str(ROOT / "tests" / "golden"))
    ap.add_argument("--tokens", type=int, default=16, help="T of the logits references")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--chain", type=int, default=3, help="nodes down the EAGLE head's greedy chain")
    args = ap.parse_args()
    torch.set_num_threads(2)
    demo, golden = Path(args.demo), Path(args.golden)
    golden.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer.from_file(str(demo / "target" / "tokenizer.json"))
    bos, eos = tok.token_to_id("<|begin_of_text|>"), tok.token_to_id("<|end_of_text|>")

    prompts = {}
    for fn in ("code_test.jsonl", "continue_test.jsonl"):
        qid, text = first_prompt(demo, fn)
        prompts[fn] = (qid, tok.encode(text).ids)
        assert prompts[fn][1][0] == bos
    qid, code = prompts["code_test.jsonl"]
    assert len(code) >= args.tokens, len(code)
    ids = code[:args.tokens]
    I64 = lambda v: torch.tensor(v, dtype=torch.int64)
    target, draft = load(demo / "target"), load(demo / "draft")
    for name, model in (("target", target), ("draft", draft)):
        logits, hidden = forward_ref(model, ids)
        ref = {"input_ids": I64(ids), "logits": logits, "hidden": hidden,
               "gen_prompt": I64(code), "gen_ids": I64(greedy(model, code, args.new_tokens, eos))}
        if name == "target":
            cont = prompts["continue_test.jsonl"][1]
            ref["gen_prompt.1"] = I64(cont)
            ref["gen_ids.1"] = I64(greedy(model, cont, args.new_tokens, eos))
        meta = {"model": f"data/demo/{name}", "prompts": "first of prompts/code_test.jsonl (and continue_test.jsonl)",
                "compute": "transformers 4.46.3 float32 from BF16 weights, eager attention"}
        path = golden / f"demo_{name}.safetensors"
        save_file(ref, str(path), metadata=meta)
        print(f"{path}: {path.stat().st_size} bytes; generated {ref['gen_ids'].tolist()}\n"
              f"  {tok.decode(ref['gen_ids'].tolist())!r}", file=sys.stderr)

    nxt, root, chain_ids, chain_logits = eagle_root_and_chain(demo, target, ids, args.chain)
    path = golden / "demo_eagle.safetensors"
    save_file({"input_ids": I64(ids), "next_id": I64([nxt]), "root_logits": root, "chain_ids": chain_ids,
               "chain_logits": chain_logits}, str(path),
              metadata={"model": "data/demo/eagle on data/demo/target",
                        "compute": "transformers LlamaDecoderLayer float32, EAGLE-1 layout"})
    p = root.softmax(-1)
    top = p.topk(5)
    print(f"{path}: next {nxt}, head top-5 {top.indices.tolist()} {[round(v, 4) for v in top.values.tolist()]}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
