#!/usr/bin/env python3
"""Oracle for the EAGLE-3 head tests (tests/test_eagle3.c): a tiny target
deep enough for EAGLE-3's layer choice, two random EAGLE-3 heads in the
published layout (SafeAILab/EAGLE eagle/model/cnets.py), and the head's
distributions computed by a reference assembled from transformers' modules
(LlamaAttention, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding), never by this
project's code.

    python3 tools/golden/eagle3_golden.py             # torch 2.x + transformers 4.46; CPU, seconds
    python3 tools/golden/eagle3_golden.py --demo      # tests/golden/demo_eagle3.safetensors for the
                                                      # trained demo head data/demo/eagle3 (same layout
                                                      # as below, prompt: the first 16 tokens of the
                                                      # first code_test prompt)
    python3 tools/golden/eagle3_golden.py --smollm2   # models/smollm2-eagle3/golden.safetensors for
                                                      # the SmolLM2 EAGLE-3 head that
                                                      # tools/models/smollm2_drafts.py --stages
                                                      # features3,eagle3 trains (not shipped)

Checkpoints (tests/ckpt/):
  tiny_chat_l8     LlamaForCausalLM, 8 layers, hidden 32, GQA 4/2, F32, with
                   tiny_chat's tokenizer (vocab 384, bos 0, eos 1) so the
                   commands run on it: EAGLE-3's rule reads the inputs of
                   layers 2, L/2 = 4, L-3 = 5
  eagle3_tiny      model.safetensors: fc [32, 96], midlayer.* (q/k/v read 64 =
                   2 x hidden), midlayer.hidden_norm, norm, lm_head [64, 32]
                   over a draft vocabulary of 64 (draft_vocab_size), d2t
                   (offsets: target id = draft id + d2t[draft id]), t2d; the
                   target's embeddings; default layers
  eagle3_tiny_bin  pytorch_model.bin (torch.save): a full-size draft vocabulary
                   (draft_vocab_size 384, d2t all zero, ignored as EAGLE does),
                   its own embed_tokens.weight, and
                   eagle_aux_hidden_state_layer_ids [6, 1, 3] (read in layer
                   order 1, 3, 6)
References (tests/golden/<head>.safetensors), float32:
  input_ids I64 [T]      prompt; next_id I64 [1] the target's greedy token after it
  root_ids I64 [K], root_probs F32 [K], root_entropy F32 [1]
                         the head's top-K target ids (mapped through d2t),
                         probabilities and entropy (nats, whole draft vocabulary)
                         under the root after the prompt's catch-up
  tree_token I64 [N], tree_parent I64 [N]
                         tree nodes 1..N (parent 0 = the root): the root's top 3;
                         the top 2 children of the first and the top child of
                         the second; the top child of each of those
  exp_nodes I64 [E], exp_call I64 [E]
                         nodes expanded, by draft call (the 3 of depth 1, then
                         the 3 of depth 2, then the 3 of depth 3)
  exp_ids I64 [E, K], exp_probs F32 [E, K], exp_entropy F32 [E]
  cont_ids I64 [3]       the target's greedy tokens next, c1, c2 committed in a
                         second catch-up; next2_id I64 [1] the one after c2
  root2_ids, root2_probs, root2_entropy
                         the root's distribution after that catch-up
Tree nodes feed back their parent's layer output before the norm, without
fc (cnets.py topK_genrate); a node at depth d sits at position T - 1 + d and
sees the prompt's entries, its ancestors and itself.
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import (LlamaAttention, LlamaMLP, LlamaRMSNorm,
                                                      LlamaRotaryEmbedding)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CKPT = os.path.join(ROOT, "tests", "ckpt")
GOLD = os.path.join(ROOT, "tests", "golden")
V, H, FF, L = 384, 32, 64, 8
K = 8


def target_config():
    return LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=FF, num_hidden_layers=L,
                       num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                       max_position_embeddings=2048, rms_norm_eps=1e-5, bos_token_id=0, eos_token_id=1,
                       tie_word_embeddings=False, initializer_range=0.2)


def head_config(draft_vocab, aux=None):
    """config.json keys of the published EAGLE3-* heads (LlamaConfig keys with
    num_hidden_layers 1, plus draft_vocab_size)"""
    t = target_config()
    c = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_act": "silu",
         "hidden_size": H, "intermediate_size": FF, "num_hidden_layers": 1,
         "num_attention_heads": t.num_attention_heads, "num_key_value_heads": t.num_key_value_heads,
         "max_position_embeddings": 2048, "rms_norm_eps": t.rms_norm_eps, "rope_theta": t.rope_theta,
         "rope_scaling": None, "vocab_size": V, "draft_vocab_size": draft_vocab, "bos_token_id": 0,
         "eos_token_id": 1, "pad_token_id": 0, "tie_word_embeddings": False, "torch_dtype": "float32"}
    if aux is not None:
        c["eagle_aux_hidden_state_layer_ids"] = aux
    return c


def random_head(seed, draft_vocab, own_embed):
    """A state dict in the published EAGLE-3 layout, random values."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, scale=0.15: (torch.randn(*s, generator=g) * scale).contiguous()
    qd, kvd = H, 2 * (H // 4)
    sd = {
        "fc.weight": r(H, 3 * H, scale=0.1),
        "midlayer.hidden_norm.weight": 1 + r(H, scale=0.1),
        "midlayer.input_layernorm.weight": 1 + r(H, scale=0.1),
        "midlayer.post_attention_layernorm.weight": 1 + r(H, scale=0.1),
        "midlayer.self_attn.q_proj.weight": r(qd, 2 * H, scale=0.3),
        "midlayer.self_attn.k_proj.weight": r(kvd, 2 * H, scale=0.3),
        "midlayer.self_attn.v_proj.weight": r(kvd, 2 * H),
        "midlayer.self_attn.o_proj.weight": r(H, qd),
        "midlayer.mlp.gate_proj.weight": r(FF, H),
        "midlayer.mlp.up_proj.weight": r(FF, H),
        "midlayer.mlp.down_proj.weight": r(H, FF),
        "norm.weight": 1 + r(H, scale=0.1),
        "lm_head.weight": r(draft_vocab, H, scale=0.6),
    }
    if draft_vocab < V:
        used = torch.sort(torch.randperm(V, generator=g)[:draft_vocab]).values
        sd["d2t"] = (used - torch.arange(draft_vocab)).to(torch.int64)
        t2d = torch.zeros(V, dtype=torch.bool)
        t2d[used] = True
        sd["t2d"] = t2d
    else:
        sd["d2t"] = torch.zeros(draft_vocab, dtype=torch.int64)
        sd["t2d"] = torch.ones(V, dtype=torch.bool)
    if own_embed:
        sd["embed_tokens.weight"] = r(V, H, scale=1.0)
    return sd


class Reference:
    """The head from transformers' modules: attention whose q/k/v read
    [input_layernorm(embed); hidden_norm(feature)], residual = feature."""

    def __init__(self, cfg, sd, target):
        H = cfg["hidden_size"]
        self.V = cfg["vocab_size"]
        lc = LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("draft_vocab_size", "eagle_aux_hidden_state_layer_ids")})
        lc._attn_implementation = "eager"
        self.attn = LlamaAttention(lc, layer_idx=0)
        for name in ("q_proj", "k_proj", "v_proj"):
            old = getattr(self.attn, name)
            setattr(self.attn, name, torch.nn.Linear(2 * H, old.out_features, bias=False))
        self.mlp = LlamaMLP(lc)
        self.norms = {n: LlamaRMSNorm(H, eps=lc.rms_norm_eps) for n in ("input_layernorm", "hidden_norm",
                                                                         "post_attention_layernorm", "norm")}
        self.rope = LlamaRotaryEmbedding(config=lc)
        with torch.no_grad():
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                getattr(self.attn, n).weight.copy_(sd[f"midlayer.self_attn.{n}.weight"])
            for n in ("gate_proj", "up_proj", "down_proj"):
                getattr(self.mlp, n).weight.copy_(sd[f"midlayer.mlp.{n}.weight"])
            for n, m in self.norms.items():
                m.weight.copy_(sd["norm.weight" if n == "norm" else f"midlayer.{n}.weight"])
        self.fc = sd["fc.weight"]
        self.lm_head = sd["lm_head.weight"]
        self.embed = sd.get("embed_tokens.weight", target.model.embed_tokens.weight.detach())
        dv = cfg["draft_vocab_size"]
        self.d2t = sd["d2t"] if dv < self.V else torch.zeros(dv, dtype=torch.int64)

    @torch.no_grad()
    def forward(self, x, tokens, pos, allowed):
        """x [N, H] the layer's residual inputs; returns outputs (before the
        norm) and draft logits for every entry."""
        emb = self.embed[torch.tensor(tokens)]
        cat = torch.cat([self.norms["input_layernorm"](emb), self.norms["hidden_norm"](x)], -1)[None]
        mask = torch.zeros(len(tokens), len(tokens))
        mask[~allowed] = torch.finfo(torch.float32).min
        p = torch.tensor(pos)[None]
        cos_sin = self.rope(cat, p)
        a = self.attn(cat, attention_mask=mask[None, None], position_ids=p, position_embeddings=cos_sin)[0][0]
        h = x + a
        h = h + self.mlp(self.norms["post_attention_layernorm"](h))
        return h, self.norms["norm"](h) @ self.lm_head.T

    def top(self, logits):
        """top-K target ids, probabilities and the entropy of one row"""
        p = torch.softmax(logits.double(), -1)
        v, i = torch.topk(p, K)
        ent = -(p * torch.log(p.clamp_min(1e-300))).sum()
        return (i + self.d2t[i]).to(torch.int64), v.float(), ent.float()


def features(target, ids, layers):
    with torch.no_grad():
        hs = target(torch.tensor([ids]), output_hidden_states=True).hidden_states
    return torch.cat([hs[l][0] for l in sorted(layers)], -1)


def greedy_after(target, ids):
    with torch.no_grad():
        return int(target(torch.tensor([ids])).logits[0, -1].argmax())


def golden(name, cfg, sd, target, prompt, gold=GOLD):
    ref = Reference(cfg, sd, target)
    nl = target.config.num_hidden_layers
    layers = cfg.get("eagle_aux_hidden_state_layer_ids") or [2, nl // 2, nl - 3]
    T = len(prompt)
    nxt = greedy_after(target, prompt)
    out = {"input_ids": torch.tensor(prompt), "next_id": torch.tensor([nxt])}
    # prefill: pair j = (target features at j, token j+1), the last token next
    x0 = features(target, prompt, layers) @ ref.fc.T
    toks0 = prompt[1:] + [nxt]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    h, lg = ref.forward(x0, toks0, list(range(T)), causal)
    out["root_ids"], out["root_probs"], e = ref.top(lg[-1])
    out["root_entropy"] = e[None]
    # the tree: node tokens, parents, their inputs (the parent's output)
    tok, par, depth, node_h = [nxt], [-1], [0], [h[-1]]
    def add(p, t):
        tok.append(t); par.append(p); depth.append(depth[p] + 1)
        return len(tok) - 1
    tops = {0: out["root_ids"].tolist()}
    calls = [[add(0, t) for t in tops[0][:3]]]
    exp_nodes, exp_call, exp_ids, exp_probs, exp_ent = [], [], [], [], []
    expanded = []
    for c in range(3):
        expanded += calls[c]
        n = len(expanded)
        x = torch.cat([x0, torch.stack([node_h[par[v]] for v in expanded])])
        toks = toks0 + [tok[v] for v in expanded]
        pos = list(range(T)) + [T - 1 + depth[v] for v in expanded]
        allowed = torch.zeros(T + n, T + n, dtype=torch.bool)
        allowed[:T, :T] = causal
        for i, v in enumerate(expanded):
            allowed[T + i, :T] = True
            a = v
            while a > 0:
                allowed[T + i, T + expanded.index(a)] = True
                a = par[a]
        hh, ll = ref.forward(x, toks, pos, allowed)
        for v in calls[c]:
            i = T + expanded.index(v)
            while len(node_h) <= v: node_h.append(None)
            node_h[v] = hh[i]
            ids, probs, ent = ref.top(ll[i])
            tops[v] = ids.tolist()
            exp_nodes.append(v); exp_call.append(c); exp_ids.append(ids); exp_probs.append(probs); exp_ent.append(ent)
        if c == 0:
            a, b = calls[0][0], calls[0][1]
            calls.append([add(a, tops[a][0]), add(a, tops[a][1]), add(b, tops[b][0])])
        elif c == 1:
            calls.append([add(v, tops[v][0]) for v in calls[1]])
    out["tree_token"] = torch.tensor(tok[1:], dtype=torch.int64)
    out["tree_parent"] = torch.tensor(par[1:], dtype=torch.int64)
    out["exp_nodes"] = torch.tensor(exp_nodes, dtype=torch.int64)
    out["exp_call"] = torch.tensor(exp_call, dtype=torch.int64)
    out["exp_ids"] = torch.stack(exp_ids)
    out["exp_probs"] = torch.stack(exp_probs)
    out["exp_entropy"] = torch.stack(exp_ent)
    # a second catch-up: the target commits next, c1, c2 and emits next2
    seq = prompt + [nxt]
    for _ in range(2): seq.append(greedy_after(target, seq))
    nxt2 = greedy_after(target, seq)
    out["cont_ids"] = torch.tensor(seq[T:], dtype=torch.int64)
    out["next2_id"] = torch.tensor([nxt2])
    N = len(seq)
    x2 = features(target, seq, layers) @ ref.fc.T
    _, lg2 = ref.forward(x2, seq[1:] + [nxt2], list(range(N)), torch.tril(torch.ones(N, N, dtype=torch.bool)))
    out["root2_ids"], out["root2_probs"], e2 = ref.top(lg2[-1])
    out["root2_entropy"] = e2[None]
    out = {k: v.contiguous() for k, v in out.items()}
    save_file(out, os.path.join(gold, name + ".safetensors"))
    print(f"{name}: next {nxt}, root top-1 {out['root_ids'][0].item()} p {out['root_probs'][0]:.4f}, "
          f"tree {len(tok) - 1} nodes, next2 {nxt2}", file=sys.stderr)


def write_head(name, cfg, sd, as_bin):
    d = os.path.join(CKPT, name)
    os.makedirs(d, exist_ok=True)
    if as_bin:
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    else:
        save_file(sd, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)


def demo(head_dir, target_dir):
    """The same references for a trained head (tools/models/train_eagle3_demo.py) on
    the demo target: the first 16 tokens of the first code_test prompt."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    target = LlamaForCausalLM.from_pretrained(target_dir, torch_dtype=torch.float32,
                                              attn_implementation="eager").eval()
    tok = Tokenizer.from_file(os.path.join(target_dir, "tokenizer.json"))
    with open(os.path.join(ROOT, "data", "demo", "prompts", "code_test.jsonl")) as f:
        text = json.loads(f.readline())["turns"][0]
    prompt = tok.encode(text).ids[:16]
    cfg = json.load(open(os.path.join(head_dir, "config.json")))
    sd = {k: (v.float() if v.is_floating_point() else v) for k, v in
          load_file(os.path.join(head_dir, "model.safetensors")).items()}
    golden("demo_eagle3", cfg, sd, target, prompt)


def smollm2(head_dir, target_dir):
    """The same references for the SmolLM2 EAGLE-3 head (tools/models/smollm2_drafts.py
    --stages features3,eagle3, not shipped) on make smollm2's BF16 checkpoint (FP32
    compute, as the runtime): the first 24 tokens of SmolLM2's chat prompt for the
    first held-out prompt. Written beside the head, whose weights it depends on."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer
    target = LlamaForCausalLM.from_pretrained(target_dir, torch_dtype=torch.float32,
                                              attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(target_dir)
    with open(os.path.join(ROOT, "data", "smollm2", "prompts", "heldout.jsonl")) as f:
        text = json.loads(f.readline())["turns"][0]
    prompt = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                     add_generation_prompt=True)[:24]
    cfg = json.load(open(os.path.join(head_dir, "config.json")))
    sd = {k: (v.float() if v.is_floating_point() else v) for k, v in
          load_file(os.path.join(head_dir, "model.safetensors")).items()}
    golden("golden", cfg, sd, target, prompt, gold=head_dir)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--demo":
        demo(os.path.join(ROOT, "data", "demo", "eagle3"), os.path.join(ROOT, "data", "demo", "target"))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--smollm2":
        smollm2(os.path.join(ROOT, "models", "smollm2-eagle3"), os.path.join(ROOT, "models", "smollm2-135m-instruct"))
        return
    torch.manual_seed(41)
    target = LlamaForCausalLM(target_config()).float().eval()
    td = os.path.join(CKPT, "tiny_chat_l8")
    target.save_pretrained(td, safe_serialization=True)
    gc = os.path.join(td, "generation_config.json")
    if os.path.exists(gc): os.remove(gc)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(CKPT, "tiny_chat", f), os.path.join(td, f))
    target = LlamaForCausalLM.from_pretrained(td, torch_dtype=torch.float32, attn_implementation="eager").eval()
    g = torch.Generator().manual_seed(42)
    prompt = [0] + torch.randint(3, V, (11,), generator=g).tolist()
    heads = (("eagle3_tiny", head_config(64), random_head(43, 64, False), False),
             ("eagle3_tiny_bin", head_config(V, [6, 1, 3]), random_head(44, V, True), True))
    for name, cfg, sd, as_bin in heads:
        write_head(name, cfg, sd, as_bin)
        golden(name, cfg, sd, target, prompt)
    print("versions: torch", torch.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
