"""smollm2_gpu.py's target: SmolLM2's weights from the GGUF (or random ones of
its shape), its forward in plain PyTorch with a KV cache, and batched greedy
generation."""
import time

import numpy as np
import torch
import torch.nn.functional as F

from c2ttools.progress import Progress, log
from c2ttools.prompts import IM_END
from c2ttools.rows import length_batches
from smollm2_gpu_common import PROGRESS_EVERY


def gguf_state(path):
    """The GGUF's tensors as transformers-named FP32 tensors, q/k rows put back in
    transformers' order (the GGUF converter interleaves each head's rotary halves)."""
    import gguf
    r = gguf.GGUFReader(str(path))
    f = {k: r.fields[k] for k in r.fields}

    def num(k):
        return f[k].parts[f[k].data[0]][0].item()

    cfg = dict(hidden_size=num("llama.embedding_length"), intermediate_size=num("llama.feed_forward_length"),
               num_hidden_layers=num("llama.block_count"), num_attention_heads=num("llama.attention.head_count"),
               num_key_value_heads=num("llama.attention.head_count_kv"), rope_theta=num("llama.rope.freq_base"),
               rms_norm_eps=num("llama.attention.layer_norm_rms_epsilon"), vocab_size=num("llama.vocab_size"))
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
    sd = {}
    for t in r.tensors:
        w = torch.from_numpy(np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type)).astype(np.float32))
        w = w.reshape([int(d) for d in reversed(t.shape.tolist())])
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            sd["model.embed_tokens.weight"] = w
        elif t.name == "output_norm.weight":
            sd["model.norm.weight"] = w
        elif t.name == "output.weight":
            sd["lm_head.weight"] = w
        else:
            kind = names[parts[2]]
            if parts[2] in ("attn_q", "attn_k"):
                heads = cfg["num_attention_heads"] if parts[2] == "attn_q" else cfg["num_key_value_heads"]
                hd = w.shape[0] // heads
                w = w.reshape(heads, hd // 2, 2, -1).transpose(1, 2).reshape(w.shape)
            sd[f"model.layers.{parts[1]}.{kind}.weight"] = w
    return sd, cfg


def random_state(seed):
    """Random weights of SmolLM2-135M's shape: --gguf random, a smoke test of the GPU
    paths and their speed (its answers never end, the worst case for a batch)."""
    cfg = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5, vocab_size=49152)
    g = torch.Generator().manual_seed(seed)
    h, i, kv = 576, 1536, 192
    sd = {"model.embed_tokens.weight": torch.randn(49152, h, generator=g) * 0.02,
          "model.norm.weight": torch.ones(h)}
    for layer in range(30):
        p = f"model.layers.{layer}."
        for n, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (kv, h)), ("self_attn.v_proj", (kv, h)),
                         ("self_attn.o_proj", (h, h)), ("mlp.gate_proj", (i, h)), ("mlp.up_proj", (i, h)),
                         ("mlp.down_proj", (h, i))):
            sd[p + n + ".weight"] = torch.randn(*shape, generator=g) * 0.02
        sd[p + "input_layernorm.weight"] = torch.ones(h)
        sd[p + "post_attention_layernorm.weight"] = torch.ones(h)
    return sd, cfg


class Target:
    """SmolLM2 (Llama) forward in PyTorch, BF16 weights: left-padded batches with a KV
    cache for greedy generation, and whole sequences for features."""

    PREFILL_TOKENS = 1 << 16

    def __init__(self, sd, cfg, device, dtype=torch.bfloat16):
        self.cfg, self.dev, self.dt = cfg, device, dtype
        self.L, self.nh, self.nkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.h = cfg["hidden_size"]
        self.hd = self.h // self.nh
        # BF16 as spec-convert rounds (to nearest even), then the compute dtype
        self.w = {k: v.to(torch.bfloat16).to(device=device, dtype=dtype) for k, v in sd.items()}
        self.emb = self.w["model.embed_tokens.weight"]
        self.head = self.w.get("lm_head.weight", self.emb)
        self.inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, self.hd, 2, dtype=torch.float32, device=device)
                                                / self.hd))

    def norm(self, x, w):
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.cfg["rms_norm_eps"])).to(x.dtype)

    def rope(self, x, cos, sin):
        d = self.hd // 2
        return x * cos + torch.cat([-x[..., d:], x[..., :d]], -1) * sin

    def layers(self, x, pos, mask, cache=None, t0=0, causal=False):
        """x [B, T, h] at positions pos [B, T]; mask [B, 1, T, S] (or causal over T);
        cache (k, v lists of [B, nkv, Tmax, hd]) written at slots t0..t0+T-1."""
        B, T, _ = x.shape
        f = pos.float()[..., None] * self.inv
        emb = torch.cat([f, f], -1)[:, None]
        cos, sin = emb.cos().to(self.dt), emb.sin().to(self.dt)
        for i in range(self.L):
            p = f"model.layers.{i}."
            hn = self.norm(x, self.w[p + "input_layernorm.weight"])
            q = (hn @ self.w[p + "self_attn.q_proj.weight"].T).view(B, T, self.nh, self.hd).transpose(1, 2)
            k = (hn @ self.w[p + "self_attn.k_proj.weight"].T).view(B, T, self.nkv, self.hd).transpose(1, 2)
            v = (hn @ self.w[p + "self_attn.v_proj.weight"].T).view(B, T, self.nkv, self.hd).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if cache is not None:
                cache[0][i][:, :, t0:t0 + T] = k
                cache[1][i][:, :, t0:t0 + T] = v
                k, v = cache[0][i][:, :, :t0 + T], cache[1][i][:, :, :t0 + T]
            if T == 1 and mask is not None:
                # one query per sequence: each KV head's query heads as rows of one
                # product, so the cache is read once (no copy per query head)
                qg = q.reshape(B, self.nkv, self.nh // self.nkv, self.hd)
                sc = (qg @ k.transpose(-1, -2)).float() * self.hd ** -0.5
                sc = sc.masked_fill(~mask, float("-inf"))
                o = (sc.softmax(-1).to(self.dt) @ v).reshape(B, self.nh, 1, self.hd)
            elif mask is None:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            else:   # a masked prefill: keys repeated so a memory-efficient kernel takes the mask
                rep = self.nh // self.nkv
                o = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                                   attn_mask=mask)
            x = x + o.transpose(1, 2).reshape(B, T, self.h) @ self.w[p + "self_attn.o_proj.weight"].T
            hn = self.norm(x, self.w[p + "post_attention_layernorm.weight"])
            g = hn @ self.w[p + "mlp.gate_proj.weight"].T
            u = hn @ self.w[p + "mlp.up_proj.weight"].T
            x = x + (F.silu(g) * u) @ self.w[p + "mlp.down_proj.weight"].T
        return x

    def logits(self, x):
        """FP32 logits of last-layer outputs x [B, h]: the final RMSNorm and the product
        in FP32 (BF16 logits would tie where FP32 ones differ)."""
        w = self.w["model.norm.weight"].float()
        x32 = x.float()
        f = w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.cfg["rms_norm_eps"]))
        return f @ self.head.float().T

    @torch.no_grad()
    def features(self, ids):
        """Final features [B, T, h] of right-padded sequences ids [B, T] (causal, so the
        padding after a sequence does not change its positions)."""
        B, T = ids.shape
        pos = torch.arange(T, device=self.dev).expand(B, T)
        return self.norm(self.layers(self.emb[ids], pos, None, causal=True), self.w["model.norm.weight"])

    @torch.no_grad()
    def greedy(self, prompts, max_new):
        """Greedy answers of a batch of prompts (lists of ids), left-padded: each answer's
        ids up to and with <|im_end|>, or max_new ids; ties go to the lowest id
        (torch.argmax's first maximum)."""
        B, P = len(prompts), max(len(p) for p in prompts)
        ids = torch.zeros((B, P), dtype=torch.long)
        pad = torch.tensor([P - len(p) for p in prompts])
        for b, p in enumerate(prompts):
            ids[b, P - len(p):] = torch.tensor(p)
        ids, pad = ids.to(self.dev), pad.to(self.dev)
        S = P + max_new
        cache = ([torch.empty((B, self.nkv, S, self.hd), dtype=self.dt, device=self.dev) for _ in range(self.L)],
                 [torch.empty((B, self.nkv, S, self.hd), dtype=self.dt, device=self.dev) for _ in range(self.L)])
        slots = torch.arange(S, device=self.dev)
        valid = slots[None, :] >= pad[:, None]                      # key slot holds a token
        pos = (slots[None, :P] - pad[:, None]).clamp(min=0)
        causal = slots[None, :P, None] >= slots[None, None, :P]
        eye = torch.eye(P, dtype=torch.bool, device=self.dev)[None]  # pad rows see themselves
        mask = ((causal & valid[:, None, :P]) | eye)[:, None]
        rows = max(1, self.PREFILL_TOKENS // P)   # the prefill in slices of rows: bounded memory
        tok = torch.empty(B, dtype=torch.long, device=self.dev)
        for r in range(0, B, rows):
            sl = slice(r, r + rows)
            part = ([c[sl] for c in cache[0]], [c[sl] for c in cache[1]])
            x = self.layers(self.emb[ids[sl]], pos[sl], mask[sl], part, 0)
            tok[sl] = self.logits(x[:, -1]).argmax(-1)
        out = [tok]
        done = tok == IM_END
        for s in range(1, max_new):
            if s % 16 == 0 and bool(done.all()):
                break
            t = P + s - 1
            x = self.layers(self.emb[tok][:, None], (t - pad)[:, None], valid[:, None, None, :t + 1], cache, t)
            tok = self.logits(x[:, 0]).argmax(-1)
            tok = torch.where(done, IM_END, tok)
            out.append(tok)
            done = done | (tok == IM_END)
        gen = torch.stack(out, 1).cpu().tolist()
        res = []
        for g in gen:
            n = g.index(IM_END) + 1 if IM_END in g else len(g)
            res.append(g[:n])
        return res


def run_greedy(target, tok, texts, max_new, batch_tokens, name, deadline=None):
    """Greedy answers (ids) to prompt texts, in batches of similar prompt length; a
    batch holds about batch_tokens of KV slots.  Returns {index: answer ids} for the
    prompts done before the deadline."""
    enc = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    batches = length_batches(range(len(enc)), [len(e) + max_new for e in enc], batch_tokens)
    pr = Progress(name, len(enc), PROGRESS_EVERY)
    got, ntok = {}, 0
    for bi, b in enumerate(batches):
        if deadline and time.time() > deadline:
            log(f"{name}: deadline reached after {len(got)}/{len(enc)} prompts")
            break
        for i, a in zip(b, target.greedy([enc[i] for i in b], max_new)):
            got[i] = a
            ntok += len(a)
        pr.show(len(got), f"{ntok / (time.time() - pr.t0):.0f} answer tok/s", force=bi + 1 == len(batches))
    return got, enc
