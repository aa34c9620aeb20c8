#!/usr/bin/env python3
"""Train the C2T demo model family on the CPU and write it to data/demo/.

Rerun (about 60 minutes on 2 idle cores; deterministic for a given seed, thread
count, Python stdlib and package versions, see tools/requirements.txt):

    python3 tools/models/train_demo.py --out data/demo --seed 0

Quick smoke test (tiny step counts, throw-away output directory):

    python3 tools/models/train_demo.py --out /tmp/demo_smoke --seed 0 --smoke

Stages (each stage reads what the earlier ones wrote into --out, so a failed
run can be resumed with e.g. --stages eagle,eval,readme):

  tok     byte-level BPE tokenizer (LLaMA-3 layout: Split(LLaMA-3 regex) +
          ByteLevel(use_regex=False), ByteLevel decoder, BOS-prepending
          TemplateProcessing), trained on the training files only;
          the held-out prompt sets (prompts/*.jsonl) are written here too
  target  LLaMA target (LlamaForCausalLM, GQA, untied lm_head), saved BF16
  draft   small LLaMA draft LM for vanilla speculative decoding, saved BF16
  eagle   EAGLE-1/2 draft head trained on the BF16 target's final features
  eval    held-out perplexities, EAGLE top-1 agreement, greedy samples
  readme  data/demo/README.md from data/demo/train_log.json

Corpus: the *.py files of this interpreter's standard library
(sysconfig.get_paths()["stdlib"]) minus tests, idlelib, site-packages,
encodings (codec tables), pydoc_data (doc text), the build-specific
_sysconfigdata module and config-* directories; split by file into train and
held-out with random.Random(seed). Nothing is downloaded.

All training runs with fixed step counts (measured to fit the budget), so a
rerun reproduces the same weights; --max-minutes is a safety cap per stage:
if a stage would overrun it (other processes on the cores), its step count and
LR schedule are cut to fit, which is logged and recorded in the README.
Progress (step/total, loss, tokens/s, ETA) goes to stderr.
"""
import argparse
import ast
import hashlib
import json
import math
import os
import random
import shutil
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

# The C build/tests share these 2 cores: with the default (spinning) OpenMP wait
# policy a 2-thread torch process slows down ~6x as soon as another process is
# runnable; sleeping waiters cost little when the machine is idle. Must be set
# before torch (libgomp) loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import torch.nn as nn
import torch.nn.functional as F

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
# The pre-tokenization regex of the LLaMA-3 tokenizer.json.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
EXCLUDED_DIRS = {"test", "tests", "idlelib", "site-packages", "encodings", "pydoc_data",
                 "__pycache__"}

T0 = time.time()


def log(msg):
    el = time.time() - T0
    print(f"[{int(el // 60):3d}:{int(el % 60):02d}] {msg}", file=sys.stderr, flush=True)


def fmt_secs(s):
    s = max(0, int(s))
    return f"{s // 3600}h{(s % 3600) // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# --------------------------------------------------------------------------- settings

def settings(args):
    """All sizes and step counts. The defaults were measured on 2 cores."""
    s = dict(
        vocab_size=8192,          # incl. the 2 special tokens
        heldout_frac=0.2,         # >= 80 held-out modules are needed for the `continue` prompts
        seq_len=512, long_seq_len=1024,
        target=dict(hidden_size=256, intermediate_size=688, num_hidden_layers=6,
                    num_attention_heads=8, num_key_value_heads=2,
                    steps=1200, batch=8, long_frac=0.2, lr=2e-3, warmup=100, wd=0.1),
        # The draft must be clearly weaker than the target: at equal tokens a 2-layer
        # model learns as fast as the 6-layer target early on (measured), so it gets a
        # narrower width and about a third of the target's training tokens.
        draft=dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2,
                   steps=500, batch=8, long_frac=0.2, lr=3e-3, warmup=50, wd=0.1),
        # p_labels "greedy": the head's token loss uses the target's greedy token, not its
        # distribution (the reference's soft labels). The demo decodes at temperature 0, where
        # a draft token is accepted iff it is the target's argmax; this 8M target is uncertain
        # (mean top-1 probability 0.33), so a head that copies its distribution states about
        # half the acceptance rate (a candidate of confidence 0.2-0.3 was accepted 59% of the
        # time) and EAGLE-2's premise, confidence ~ acceptance, fails. Trained on greedy
        # tokens, the head's probabilities estimate exactly that acceptance (eval: calibration);
        # p_w 1.0 (reference 0.1) so the token loss is not drowned by the feature loss.
        eagle=dict(feature_windows=4000, steps=1000, batch=8, lr=1.5e-3, warmup=60,
                   noise=0.2, v_w=1.0, p_w=1.0, grad_clip_value=0.5, p_labels="greedy"),
        eval_windows=1000, eagle_eval_windows=300,
    )
    if args.smoke:
        s["target"].update(steps=12, warmup=2)
        s["draft"].update(steps=8, warmup=2)
        s["eagle"].update(feature_windows=24, steps=10, warmup=2)
        s["eval_windows"] = 8
        s["eagle_eval_windows"] = 6
    return s


# --------------------------------------------------------------------------- corpus

def list_corpus():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        parts = rel.parts[:-1]
        if any(d in EXCLUDED_DIRS or d.startswith("config-") for d in parts):
            continue
        if rel.name.startswith("_sysconfigdata"):
            continue
        files.append(rel.as_posix())
    return root, files


def split_files(files, seed, frac):
    rng = random.Random(seed)
    order = list(files)
    rng.shuffle(order)
    n_held = int(round(len(order) * frac))
    return sorted(order[n_held:]), sorted(order[:n_held])


def sha256_list(names):
    return hashlib.sha256(("\n".join(sorted(names)) + "\n").encode()).hexdigest()


def read_text(root, rel):
    return (root / rel).read_bytes().decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- tokenizer

def train_tokenizer(texts, vocab_size):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers,
                            processors, trainers)
    tok = Tokenizer(models.BPE(ignore_merges=True))   # as in LLaMA-3's tokenizer.json
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 2, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens([AddedToken(BOS, special=True, normalized=False),
                            AddedToken(EOS, special=True, normalized=False)])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1",
                                      special_tokens=[(BOS, bos_id)]),
    ])
    return tok


def save_tokenizer(tok, out_dir):
    from transformers import PreTrainedTokenizerFast
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                   model_max_length=2048, clean_up_tokenization_spaces=True)
    fast.save_pretrained(str(out_dir))
    # tokenizers >= 0.20 writes merges as ["a", "b"] pairs; the published LLaMA-3
    # tokenizer.json (and every older reader) uses "a b" strings. Byte-level tokens
    # never contain a space, so the string form is unambiguous: write that.
    path = out_dir / "tokenizer.json"
    j = json.loads(path.read_text())
    j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    path.write_text(json.dumps(j, ensure_ascii=False, indent=2) + "\n")


def load_tokenizer(out):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(out / "target" / "tokenizer.json"))


def token_bytes_table(tok):
    """id -> raw bytes of the token (byte-level BPE alphabet inverted)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}
    table = {}
    for t, i in tok.get_vocab(with_added_tokens=True).items():
        table[i] = bytes(inv[ch] for ch in t) if all(ch in inv for ch in t) else t.encode()
    return table


class Corpus:
    """Token stream of a file list: per file [bos] tokens [eos], and the stream
    positions at which a source line starts (training windows start there)."""

    def __init__(self, tok, root, files):
        bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
        texts = [read_text(root, f) for f in files]
        encs = tok.encode_batch(texts, add_special_tokens=False)
        table = token_bytes_table(tok)
        ends_nl = torch.zeros(tok.get_vocab_size(with_added_tokens=True), dtype=torch.bool)
        for i, b in table.items():
            ends_nl[i] = b.endswith(b"\n")
        ids = []
        self.file_spans = []
        for f, e in zip(files, encs):
            start = len(ids)
            ids.append(bos)
            ids.extend(e.ids)
            ids.append(eos)
            self.file_spans.append((f, start, len(ids)))
        self.ids = torch.tensor(ids, dtype=torch.int64)
        self.bos, self.eos = bos, eos
        prev_nl = torch.zeros_like(self.ids, dtype=torch.bool)
        prev_nl[1:] = ends_nl[self.ids[:-1]]
        is_start = (prev_nl | (self.ids == bos)) & (self.ids != eos)
        is_start[0] = True
        self.starts = torch.nonzero(is_start).flatten()
        self.n_bytes = sum(len(t.encode()) for t in texts)

    def __len__(self):
        return self.ids.numel()

    def window(self, p, T):
        """T tokens starting with bos: [bos] + stream[p:p+T-1] (no double bos)."""
        if self.ids[p] == self.bos:
            return self.ids[p:p + T]
        return torch.cat([self.ids.new_tensor([self.bos]), self.ids[p:p + T - 1]])

    def epoch_windows(self, T, gen):
        """Window starts for one pass: a grid of stride T-1 with a random offset,
        each point snapped forward to the next line start; shuffled."""
        off = int(torch.randint(0, T - 1, (1,), generator=gen))
        grid = torch.arange(off, len(self) - T, T - 1)
        idx = torch.searchsorted(self.starts, grid).clamp(max=self.starts.numel() - 1)
        pos = torch.unique(self.starts[idx])
        pos = pos[pos + T <= len(self)]
        return pos[torch.randperm(pos.numel(), generator=gen)]

    def eval_windows(self, T, n):
        """Deterministic, non-overlapping evaluation windows (evenly spaced subset)."""
        pos = torch.arange(0, len(self) - T, T - 1)
        if pos.numel() > n:
            pos = pos[torch.linspace(0, pos.numel() - 1, n).round().long()]
        return [self.window(int(p), T) for p in pos]


# --------------------------------------------------------------------------- prompts

def make_prompts(tok, root, held_files, seed, out_dir, max_tokens=300):
    """question.jsonl prompt sets from held-out files only; train/test share no file."""
    rng = random.Random(seed + 1)
    files = list(held_files)
    rng.shuffle(files)
    half = len(files) // 2
    groups = {"train": sorted(files[:half]), "test": sorted(files[half:])}
    ntok = lambda s: len(tok.encode(s, add_special_tokens=False).ids)
    stats = {}
    qid = 0
    for split, group in groups.items():
        code, cont = [], []
        for rel in group:
            text = read_text(root, rel)
            lines = text.splitlines(keepends=True)
            # continue: the opening lines of the module, cut at a line boundary
            acc, n = "", 0
            for ln in lines:
                if ntok(acc + ln) > 200:
                    break
                acc += ln
                n += 1
            if n >= 5 and ntok(acc) >= 40:
                cont.append((rel, acc))
            # code: signature + docstring of a function with a real body
            try:
                mod = ast.parse(text)
            except SyntaxError:
                continue
            cands = []
            for node in ast.walk(mod):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if ast.get_docstring(node) is None or len(node.body) < 2:
                    continue
                body_lines = node.end_lineno - node.body[0].end_lineno
                if body_lines < 3 or body_lines > 40:
                    continue
                head = "".join(lines[node.lineno - 1:node.body[0].end_lineno])
                head = textwrap.dedent(head)
                if not head.lstrip().startswith(("def ", "async def ")):
                    continue   # multi-line decorators etc.
                if not 20 <= ntok(head) <= max_tokens:
                    continue
                cands.append((node.lineno, rel, head))
            cands.sort()
            rng.shuffle(cands)
            code.extend(cands[:4])
        rng.shuffle(code)
        code = code[:120]
        for cat, items in (("code", code), ("continue", cont)):
            path = out_dir / f"{cat}_{split}.jsonl"
            with open(path, "w") as f:
                for item in items:
                    rel, text = item[-2], item[-1]
                    f.write(json.dumps({"question_id": qid, "category": cat, "turns": [text]}) + "\n")
                    qid += 1
            stats[f"{cat}_{split}"] = dict(prompts=len(items), files=len({i[-2] for i in items}))
    with open(out_dir / "sources.json", "w") as f:
        json.dump({"seed": seed, "files": groups}, f, indent=1)
    return stats


# --------------------------------------------------------------------------- LM training

def llama_config(s, kind, vocab, bos_id, eos_id):
    from transformers import LlamaConfig
    m = s[kind]
    return LlamaConfig(vocab_size=vocab, hidden_size=m["hidden_size"],
                       intermediate_size=m["intermediate_size"],
                       num_hidden_layers=m["num_hidden_layers"],
                       num_attention_heads=m["num_attention_heads"],
                       num_key_value_heads=m["num_key_value_heads"],
                       max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                       hidden_act="silu", tie_word_embeddings=False, attention_bias=False,
                       mlp_bias=False, initializer_range=0.02, bos_token_id=bos_id,
                       eos_token_id=eos_id, torch_dtype="bfloat16", use_cache=True)


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def batches(corpus, T, B, gen):
    """Endless deterministic stream of [B, T] training batches."""
    while True:
        pos = corpus.epoch_windows(T, gen)
        for i in range(0, pos.numel() - B + 1, B):
            yield torch.stack([corpus.window(int(p), T) for p in pos[i:i + B]])


class StepBudget:
    """A fixed step count (so a rerun is deterministic) plus a wall-clock cap per
    stage: when the projected time would exceed the cap (e.g. other processes take
    the cores), the step count is cut so that the LR schedule (warmup, cosine
    decay, long-sequence phase) still completes inside the cap. Cuts are logged and
    recorded; a run that needed none is reproducible."""

    def __init__(self, steps, max_minutes, name):
        self.total = self.planned = steps
        self.cap = max_minutes * 60 if max_minutes else None
        self.t0 = time.time()
        self.name = name
        self.cuts = 0

    def update(self, done):
        if not self.cap or done < 20 or done % 10:
            return
        el = time.time() - self.t0
        fit = done + int(0.98 * (self.cap - el) / (el / done))
        if fit < self.total:
            new = max(done + 1, fit)
            log(f"{self.name}: at this speed {self.total} steps would exceed --max-minutes "
                f"{self.cap / 60:g}; cutting the schedule to {new} steps")
            self.total = new
            self.cuts += 1

    def record(self):
        return dict(planned_steps=self.planned, schedule_cuts=self.cuts, stopped_early=self.cuts > 0)


def train_lm(model, corpus, m, s, seed, max_minutes, name):
    """Pretrain a LlamaForCausalLM; BF16 autocast, FP32 master weights, AdamW."""
    B = m["batch"]
    budget = StepBudget(m["steps"], max_minutes, name)
    T1, T2 = s["seq_len"], s["long_seq_len"]
    gen = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": m["wd"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=m["lr"], betas=(0.9, 0.95), eps=1e-8)
    it_short = batches(corpus, T1, B, gen)
    it_long = None
    model.train()
    t_start = time.time()
    tokens, ema, done, long_steps = 0, None, 0, 0
    step = 0
    while step < budget.total:
        steps = budget.total
        if step < steps - int(round(steps * m["long_frac"])):
            x = next(it_short)
        else:
            if it_long is None:
                it_long = batches(corpus, T2, max(1, B * T1 // T2), gen)
                log(f"{name}: switching to sequence length {T2}")
            x = next(it_long)
            long_steps += 1
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                               x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += x.numel()
        step = done = step + 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        el = time.time() - t_start
        if done % 10 == 1 or done == steps:
            log(f"{name} step {done}/{steps} loss {loss.item():.3f} (ema {ema:.3f}) lr {lr:.2e} "
                f"T {x.shape[1]} {tokens / el:.0f} tok/s ETA {fmt_secs(el / done * (steps - done))}")
        budget.update(done)
    return dict(steps=done, tokens=tokens, seconds=round(time.time() - t_start, 1),
                final_loss_ema=round(ema, 4), batch=B, seq_len=T1, long_seq_len=T2,
                long_steps=long_steps, lr=m["lr"], warmup=m["warmup"], weight_decay=m["wd"],
                **budget.record())


def save_lm(model, out_dir, tok_src):
    out_dir.mkdir(parents=True, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if tok_src is not None and tok_src.resolve() != out_dir.resolve():
        for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copyfile(tok_src / fn, out_dir / fn)


def load_lm(path):
    from transformers import LlamaForCausalLM
    m = LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32)
    m.eval()
    return m


def stage_lm(kind, args, s, out, st):
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    train = Corpus(tok, root, st["split"]["train_files"])
    from transformers import LlamaForCausalLM
    torch.manual_seed(args.seed + (0 if kind == "target" else 1))
    cfg = llama_config(s, kind, tok.get_vocab_size(with_added_tokens=True),
                       tok.token_to_id(BOS), tok.token_to_id(EOS))
    model = LlamaForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{kind}: {n_params / 1e6:.2f}M parameters, {len(train)} training tokens in the stream")
    res = train_lm(model, train, s[kind], s, args.seed + (0 if kind == "target" else 1),
                   args.max_minutes.get(kind), kind)
    res["parameters"] = n_params
    save_lm(model, out / kind, out / "target")
    log(f"{kind}: saved to {out / kind}")
    return res


# --------------------------------------------------------------------------- EAGLE head

class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope(x, pos, theta):
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    f = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class EagleAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd, self.theta = h // self.nh, c["rope_theta"]
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def qkv(self, x):
        """Queries, keys and values [B, heads, T, hd] of slots 0..T-1 (RoPE at the slot
        index; keys and values repeated to the query heads)."""
        B, T, _ = x.shape
        pos = torch.arange(T, device=x.device)
        q = rope(self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2), pos, self.theta)
        k = rope(self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2), pos, self.theta)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        rep = self.nh // self.nkv
        return q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)

    def out(self, o):
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class EagleMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class EagleLayer(nn.Module):
    """EAGLE-1 decoder layer with index 0: no input_layernorm before attention."""

    def __init__(self, c):
        super().__init__()
        self.self_attn = EagleAttention(c)
        self.mlp = EagleMLP(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x):
        x = x + self.self_attn(x)
        return x + self.mlp(self.post_attention_layernorm(x))


class EagleHead(nn.Module):
    """out = layer0(fc([embed(token_{t+1}) ; feature_t])); tokens = target lm_head(out).
    Parameter names are those of EAGLE's cnets1.Model without embed_tokens."""

    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(2 * c["hidden_size"], c["hidden_size"], bias=True)
        self.layers = nn.ModuleList([EagleLayer(c)])

    def forward(self, feat, emb):
        x = self.fc(torch.cat([emb, feat], dim=-1))
        for layer in self.layers:
            x = layer(x)
        return x

    def unroll(self, feat, emb, steps):
        """The head run `steps` times on its own predictions, as the decoding loop runs it
        down a draft tree ("training-time test" of EAGLE-3 and HASS, on the EAGLE-1
        layout). Slot t, step 1: input (emb_t, feat_t), the target's feature. Step k > 1:
        input (emb_t, step k-1's prediction at slot t-1), and attention over what the
        drafting cache holds at that point: step 1's keys at slots <= t-k+1 (the context,
        computed from target features) and step i's key at slot t-(k-i) for i = 2..k (the
        node's ancestors in the tree, itself last). Returns the k predictions [B, T, h];
        step k's slots t < k-1 have no ancestors in the sequence and are meaningless."""
        assert len(self.layers) == 1, "unroll: one decoder layer (EAGLE-1 layout)"
        layer = self.layers[0]
        att = layer.self_attn
        T = feat.shape[1]
        t = torch.arange(T, device=feat.device)
        keys, vals, preds = [], [], []
        inp = feat
        for k in range(1, steps + 1):
            x = self.fc(torch.cat([emb, inp], dim=-1))
            q, kk, vv = att.qkv(x)
            keys.append(kk)
            vals.append(vv)
            # allowed[t, i*T + s]: step (i+1)'s key at slot s is visible to slot t at step k
            allowed = [t[None, :] <= (t[:, None] - k + 1)]
            for i in range(2, k + 1):
                allowed.append(t[None, :] == (t[:, None] - (k - i)))
            mask = torch.cat(allowed, 1)
            o = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(vals, 2), attn_mask=mask)
            x = x + att.out(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            preds.append(x)
            # the next step's input at slot t is this step's prediction at slot t-1
            inp = torch.cat([feat[:, :1], x[:, :-1]], 1)
        return preds


def eagle_config(tcfg):
    """EAGLE checkpoint config.json: the base LlamaConfig with one layer + "bias"."""
    d = tcfg.to_dict()
    keep = ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
            "num_key_value_heads", "hidden_act", "max_position_embeddings", "rms_norm_eps",
            "rope_theta", "rope_scaling", "initializer_range", "bos_token_id", "eos_token_id",
            "tie_word_embeddings", "pretraining_tp", "attention_bias", "mlp_bias"]
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    c.update({k: d[k] for k in keep if k in d})
    c.update(num_hidden_layers=1, bias=True, pad_token_id=0, torch_dtype="bfloat16", use_cache=True,
             transformers_version=d.get("transformers_version"))
    return c


@torch.no_grad()
def target_features(target, windows, bs=8, name="features"):
    """Final features (LlamaModel output, after the final RMSNorm), FP32 compute."""
    feats = []
    t0 = time.time()
    for i in range(0, len(windows), bs):
        x = torch.stack(windows[i:i + bs])
        feats.append(target.model(input_ids=x).last_hidden_state)
        if (i // bs) % 25 == 0:
            n = i + x.shape[0]
            el = time.time() - t0
            log(f"{name}: {n}/{len(windows)} windows, {n * x.shape[1] / el:.0f} tok/s, "
                f"ETA {fmt_secs(el / n * (len(windows) - n))}")
    return torch.cat(feats)


class SoftCrossEntropy(torch.autograd.Function):
    """mean_n( -sum_v p_nv log_softmax(z_n)_v ) = mean_n( logsumexp(z_n) - <p_n, z_n> ),
    with a fused backward (softmax(z) - p) / N: the [N, vocab] passes dominate the
    head's training cost on the CPU."""

    @staticmethod
    def forward(ctx, z, p):
        lse = torch.logsumexp(z, -1)
        loss = (lse - torch.linalg.vecdot(p, z)).mean()
        ctx.save_for_backward(z, p, lse)
        return loss

    @staticmethod
    def backward(ctx, g):
        z, p, lse = ctx.saved_tensors
        dz = z - lse[:, None]
        dz.exp_().sub_(p).mul_(g / z.shape[0])
        return dz, None


def eagle_batch_loss(head, embed, lm_head, ids, feat, m, gen=None, mask=None, labels=None, step_top1=None,
                     deep_vocab=None):
    """EAGLE-1 objective, FP32. Slot j: input (embed(x_{j+1}), f_j) -> predict f_{j+1}.
    Loss = v_w * SmoothL1(pred, f_{j+1}) + p_w * CE(labels, lm_head pred), where the labels
    are the target's distribution softmax(lm_head f_{j+1}) (p_labels "soft", the reference)
    or its greedy token argmax(lm_head f_{j+1}) (p_labels "greedy", see settings()).
    gen given = training (uniform noise on the input features). mask [B, T-1] (optional)
    picks the slots that count (EAGLE's loss_mask: the assistant's tokens); labels [B, T-1]
    (optional) are the target's greedy tokens where already known (answers the target
    generated greedily), which saves the target's lm_head pass.
    m["unroll"] = K > 1 adds the head's own k-th prediction for k = 2..K (EagleHead.unroll:
    what a draft tree's depth k sees), each with the same targets and weight 0.8^(k-1)
    (EAGLE-3's step weights); step_top1, a list, receives each step's top-1 agreement.
    deep_vocab (sorted token ids holding every label; greedy labels only) restricts the
    cross-entropy of steps k > 1 to those tokens, as EAGLE-3's reduced draft vocabulary
    does: the full-vocabulary lm_head pass dominates the cost on a CPU, and step 1
    still pushes every other token down through the shared weights.
    Returns the total loss and step 1's SmoothL1, CE, logits and labels."""
    h = feat.shape[-1]
    inp = feat[:, :-1]
    tgt_all = feat[:, 1:].reshape(-1, h)
    if gen is not None and m["noise"] > 0:   # EAGLE "data_noise": uniform, std 0.2 (width at len 512)
        inp = inp + (torch.rand(inp.shape, generator=gen, device=gen.device) - 0.5) * m["noise"]
    emb = embed(ids[:, 1:])
    steps = m.get("unroll", 1)
    preds = head.unroll(inp, emb, steps) if steps > 1 else [head(inp, emb)]
    if mask is None and steps > 1:
        mask = torch.ones(inp.shape[:2], dtype=torch.bool, device=inp.device)
    total, first = 0.0, None
    for k, pred in enumerate(preds):
        pred, tgt = pred.reshape(-1, h), tgt_all
        if mask is not None:
            # step k+1's slots j < k have no ancestors in the sequence
            keep = (mask & (torch.arange(mask.shape[1], device=mask.device) >= k)).reshape(-1)
            pred, tgt = pred[keep], tgt[keep]
        t_logits = None
        if labels is not None and m["p_labels"] == "greedy":
            t_greedy = labels.reshape(-1)[keep] if mask is not None else labels.reshape(-1)
        else:
            with torch.no_grad():
                t_logits = F.linear(tgt, lm_head.weight)
                t_greedy = t_logits.argmax(-1)
        if k > 0 and deep_vocab is not None:
            assert t_logits is None, "deep_vocab needs greedy labels"
            logits = F.linear(pred, lm_head.weight[deep_vocab])
            t_greedy = torch.searchsorted(deep_vocab, t_greedy)
        else:
            logits = F.linear(pred, lm_head.weight)
        vloss = F.smooth_l1_loss(pred, tgt, reduction="mean")
        if m["p_labels"] == "greedy":
            ploss = F.cross_entropy(logits, t_greedy)
        else:
            ploss = SoftCrossEntropy.apply(logits, t_logits.softmax(-1))
        loss = m["v_w"] * vloss + m["p_w"] * ploss
        total = loss if k == 0 else total + 0.8 ** k * loss
        if step_top1 is not None:
            step_top1.append((logits.argmax(-1) == t_greedy).float().mean().item())
        if k == 0:
            first = (vloss, ploss, logits, t_greedy)
    return (total, *first)


def stage_eagle(args, s, out, st):
    m = s["eagle"]
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    train = Corpus(tok, root, st["split"]["train_files"])
    target = load_lm(out / "target")            # the saved BF16 weights, FP32 compute
    for p in target.parameters():
        p.requires_grad_(False)
    T = s["seq_len"]
    gen = torch.Generator().manual_seed(args.seed + 2)
    pos = train.epoch_windows(T, gen)[:m["feature_windows"]]
    windows = [train.window(int(p), T) for p in pos]
    t0 = time.time()
    feats = target_features(target, windows, name="eagle features")
    ids = torch.stack(windows)
    feat_secs = time.time() - t0
    log(f"eagle: {ids.numel()} feature tokens in {fmt_secs(feat_secs)}")
    c = eagle_config(target.config)
    torch.manual_seed(args.seed + 3)
    head = EagleHead(c)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    opt = torch.optim.AdamW(head.parameters(), lr=m["lr"], betas=(0.9, 0.95), weight_decay=0.0)
    B = m["batch"]
    budget = StepBudget(m["steps"], args.max_minutes.get("eagle"), "eagle")
    n = ids.shape[0]
    order = torch.randperm(n, generator=gen)
    cursor, ema, tokens = 0, None, 0
    t1 = time.time()
    done = step = 0
    head.train()
    while step < budget.total:
        steps = budget.total
        if cursor + B > n:
            order, cursor = torch.randperm(n, generator=gen), 0
        sel = order[cursor:cursor + B]
        cursor += B
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        loss, vloss, ploss, logits, t_greedy = eagle_batch_loss(head, embed, lm_head, ids[sel],
                                                           feats[sel], m, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(head.parameters(), m["grad_clip_value"])
        opt.step()
        tokens += sel.numel() * (T - 1)
        step = done = step + 1
        el = time.time() - t1
        if done % 20 == 1 or done == steps:
            acc = (logits.argmax(-1) == t_greedy).float().mean().item()
            ema = (loss.item(), acc) if ema is None else (0.8 * ema[0] + 0.2 * loss.item(),
                                                          0.8 * ema[1] + 0.2 * acc)
            log(f"eagle step {done}/{steps} loss {loss.item():.4f} (v {vloss.item():.4f} "
                f"p {ploss.item():.3f}) top1 {acc:.3f} (ema {ema[1]:.3f}) lr {lr:.2e} "
                f"{tokens / el:.0f} tok/s ETA {fmt_secs(el / done * (steps - done))}")
        budget.update(done)
    (out / "eagle").mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    save_file(sd, str(out / "eagle" / "model.safetensors"), metadata={"format": "pt"})
    with open(out / "eagle" / "config.json", "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    log(f"eagle: saved {sorted(sd)}")
    return dict(steps=done, tokens=tokens, feature_tokens=ids.numel(), **budget.record(),
                feature_windows=len(windows), feature_seconds=round(feat_secs, 1),
                seconds=round(time.time() - t1, 1),
                final_top1_ema=round(ema[1], 4), parameters=sum(v.numel() for v in sd.values()),
                lr=m["lr"], batch=B, seq_len=T, noise=m["noise"], v_w=m["v_w"], p_w=m["p_w"],
                p_labels=m["p_labels"],
                grad_clip_value=m["grad_clip_value"],
                tensors={k: list(v.shape) for k, v in sorted(sd.items())})


def load_eagle(out):
    from safetensors.torch import load_file
    c = json.load(open(out / "eagle" / "config.json"))
    head = EagleHead(c)
    head.load_state_dict({k: v.float() for k, v in load_file(str(out / "eagle" / "model.safetensors")).items()})
    head.eval()
    return head


# --------------------------------------------------------------------------- evaluation

@torch.no_grad()
def perplexity(model, windows, bs=8):
    nll, n = 0.0, 0
    for i in range(0, len(windows), bs):
        x = torch.stack(windows[i:i + bs])
        logits = model(input_ids=x).logits.float()
        nll += F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum").item()
        n += x[:, 1:].numel()
    return math.exp(nll / n), n


def eagle_one_step(head, target, windows, bs=8):
    """Per batch of windows: the head's logits for every position (one draft step, given
    the target's features of the prefix and the next token), flattened to [N, vocab], and
    the target's greedy token there [N]."""
    for i in range(0, len(windows), bs):
        ids = torch.stack(windows[i:i + bs])
        feat = target.model(input_ids=ids).last_hidden_state
        pred = head(feat[:, :-1], target.model.embed_tokens(ids[:, 1:]))
        logits = target.lm_head(pred)
        yield logits.reshape(-1, logits.shape[-1]), target.lm_head(feat[:, 1:]).argmax(-1).reshape(-1)


@torch.no_grad()
def eagle_agreement(head, target, windows):
    """Top-1 / top-3 agreement of the head with the target's greedy next token."""
    top1 = top3 = n = 0
    for logits, want in eagle_one_step(head, target, windows):
        top1 += (logits.argmax(-1) == want).sum().item()
        top3 += (logits.topk(3, dim=-1).indices == want[:, None]).any(-1).sum().item()
        n += want.numel()
    return top1 / n, top3 / n, n


class Calibration:
    """Is the head's confidence an acceptance rate (EAGLE-2's premise)? For each of the
    head's top-k candidates at a position: its probability q, and whether it is the
    target's greedy token (accepted at temperature 0). result(): bins of q with mean q and
    acceptance, and the expected calibration error over all candidates."""
    edges = torch.tensor([0, .05, .1, .2, .3, .4, .5, .6, .7, .8, .9, 1.0001])

    def __init__(self, k=10):
        self.k, nb = k, len(self.edges) - 1
        self.q_sum, self.acc_sum, self.cnt = torch.zeros(nb), torch.zeros(nb), torch.zeros(nb)

    def add(self, logits, want):
        nb = len(self.edges) - 1
        val, idx = logits.softmax(-1).topk(self.k, -1)
        acc = (idx == want[:, None]).float().reshape(-1)
        val = val.reshape(-1)
        b = (torch.bucketize(val, self.edges, right=True) - 1).clamp(0, nb - 1)
        self.q_sum.index_add_(0, b, val)
        self.acc_sum.index_add_(0, b, acc)
        self.cnt.index_add_(0, b, torch.ones_like(val))

    def result(self):
        e, q, a, c = self.edges, self.q_sum, self.acc_sum, self.cnt
        bins = [dict(lo=round(e[j].item(), 2), hi=round(min(e[j + 1].item(), 1.0), 2), count=int(c[j]),
                     mean_q=round((q[j] / c[j]).item(), 4), accepted=round((a[j] / c[j]).item(), 4))
                for j in range(len(e) - 1) if c[j] > 0]
        return dict(topk=self.k, ece=round(((q - a).abs().sum() / c.sum()).item(), 4), bins=bins)


@torch.no_grad()
def eagle_calibration(head, target, windows, k=10):
    """Calibration (above) of the head's one-step candidates on held-out windows."""
    cal = Calibration(k)
    for logits, want in eagle_one_step(head, target, windows):
        cal.add(logits, want)
    return cal.result()


@torch.no_grad()
def greedy(model, tok, text, n_new=64):
    ids = tok.encode(text).ids
    outp = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n_new,
                          pad_token_id=tok.token_to_id(EOS))
    return tok.decode(outp[0, len(ids):].tolist(), skip_special_tokens=False)


def stage_eval(args, s, out, st):
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    held = Corpus(tok, root, st["split"]["heldout_files"])
    train = Corpus(tok, root, st["split"]["train_files"])
    T = s["seq_len"]
    wins = held.eval_windows(T, s["eval_windows"])
    res = {}
    target, draft = load_lm(out / "target"), load_lm(out / "draft")
    t0 = time.time()
    for name, model in (("target", target), ("draft", draft)):
        ppl, n = perplexity(model, wins)
        res[f"{name}_heldout_ppl"] = round(ppl, 3)
        log(f"eval: {name} held-out perplexity {ppl:.3f} over {n} tokens")
        res["ppl_tokens"] = n
    tw = train.eval_windows(T, s["eval_windows"] // 2)
    for name, model in (("target", target), ("draft", draft)):
        ppl, _ = perplexity(model, tw)
        res[f"{name}_train_ppl"] = round(ppl, 3)
    if res["target_heldout_ppl"] >= 0.85 * res["draft_heldout_ppl"]:
        log("WARNING: the target's held-out perplexity is not clearly below the draft LM's")
    log(f"eval: train-sample perplexity target {res['target_train_ppl']} draft {res['draft_train_ppl']}")
    if (out / "eagle" / "model.safetensors").exists():
        head = load_eagle(out)
        ew = held.eval_windows(T, s["eagle_eval_windows"])
        a1, a3, n = eagle_agreement(head, target, ew)
        res.update(eagle_heldout_top1=round(a1, 4), eagle_heldout_top3=round(a3, 4), eagle_eval_tokens=n)
        b1, b3, _ = eagle_agreement(head, target, train.eval_windows(T, s["eagle_eval_windows"] // 2))
        res.update(eagle_train_top1=round(b1, 4), eagle_train_top3=round(b3, 4))
        log(f"eval: EAGLE held-out top-1 {a1:.4f} top-3 {a3:.4f} ({n} tokens); train sample top-1 {b1:.4f}")
        res["eagle_calibration"] = eagle_calibration(head, target, ew[:60])
        log(f"eval: EAGLE calibration error (top-10 candidates vs greedy acceptance) "
            f"{res['eagle_calibration']['ece']:.4f}")
    samples = []
    for fn in ("code_test.jsonl", "continue_test.jsonl"):
        q = json.loads(open(out / "prompts" / fn).readline())
        samples.append(dict(prompt_file=fn, question_id=q["question_id"], prompt=q["turns"][0],
                            target=greedy(target, tok, q["turns"][0]),
                            draft=greedy(draft, tok, q["turns"][0])))
    res["samples"] = samples
    res["seconds"] = round(time.time() - t0, 1)
    return res


# --------------------------------------------------------------------------- README

def dir_sizes(out):
    rows = []
    for p in sorted(out.rglob("*")):
        if p.is_file():
            rows.append((p.relative_to(out).as_posix(), p.stat().st_size))
    return rows


def write_readme(out, st):
    sp, tg, dr, eg, ev = (st.get(k, {}) for k in ("split", "target", "draft", "eagle", "eval"))
    tcfg = json.load(open(out / "target" / "config.json"))
    dcfg = json.load(open(out / "draft" / "config.json"))
    ecfg = json.load(open(out / "eagle" / "config.json")) if (out / "eagle" / "config.json").exists() else {}
    L = []
    a = L.append
    a("# C2T demo model family\n")
    a("Small LLaMA-architecture models trained on the CPU by `tools/models/train_demo.py`; they exist "
      "so that the C runtime, the trace collector and the tree builder can be exercised end to "
      "end on real (if tiny) checkpoints in the exact on-disk layouts of the real ones.\n")
    a("Rerun (deterministic for a seed, given the same Python stdlib and the package versions "
      "pinned in `tools/requirements.txt`):\n")
    a("    python3 tools/models/train_demo.py --out data/demo --seed 0\n    python3 tools/golden/demo_refs.py\n")
    a(f"Trained {st.get('started', '?')} with seed {st.get('seed')}; torch {st.get('versions', {}).get('torch')}, "
      f"transformers {st.get('versions', {}).get('transformers')}, tokenizers "
      f"{st.get('versions', {}).get('tokenizers')}, safetensors {st.get('versions', {}).get('safetensors')}; "
      f"{st.get('threads')} threads.\n")
    a("## Corpus\n")
    a(f"- Python {sp.get('python_version')} standard library (`{sp.get('stdlib')}`), `*.py` files, "
      "excluding directories `test`, `tests`, `idlelib`, `site-packages`, `encodings` (codec tables), "
      "`pydoc_data` (documentation text), `__pycache__`, `config-*` and the build-specific "
      "`_sysconfigdata*` module.")
    a(f"- Split by file with `random.Random({st.get('seed')})`: {len(sp.get('train_files', []))} train "
      f"files ({sp.get('train_tokens')} tokens, {sp.get('train_bytes')} bytes), "
      f"{len(sp.get('heldout_files', []))} held-out files ({sp.get('heldout_tokens')} tokens, "
      f"{sp.get('heldout_bytes')} bytes). Held-out fraction {sp.get('heldout_frac')}: large enough to "
      "give >= 80 held-out modules for the `continue` prompts.")
    a(f"- sha256 of the sorted train file list: `{sp.get('train_sha256')}`")
    a(f"- sha256 of the sorted held-out file list: `{sp.get('heldout_sha256')}`")
    a("  (paths relative to the stdlib directory, `/`-separated, sorted, each followed by `\\n`, "
      "UTF-8; both lists are in `train_log.json`).")
    a("- Token stream: per file `<|begin_of_text|>` + tokens + `<|end_of_text|>`, files concatenated. "
      "Training windows start at a source line start, are prefixed with `<|begin_of_text|>` and may "
      "run across file boundaries.\n")
    a("## Tokenizer (`target/tokenizer.json`, copied to `draft/`)\n")
    a(f"Byte-level BPE trained with `tokenizers` on the train files only: vocabulary "
      f"{tcfg['vocab_size']} = {tcfg['vocab_size'] - 2} BPE tokens + `<|begin_of_text|>` "
      f"(id {tcfg['bos_token_id']}, bos) + `<|end_of_text|>` (id {tcfg['eos_token_id']}, eos). "
      "Same layout as LLaMA-3's `tokenizer.json`: no normalizer; pre-tokenizer `Sequence[Split(LLaMA-3 "
      "regex, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)]`; model `BPE` with "
      "`ignore_merges: true`; decoder `ByteLevel`; post-processor `Sequence[ByteLevel, "
      "TemplateProcessing(single: bos $A)]`, so `encode(text)` prepends bos. "
      "`tokenizer_config.json` names bos/eos. Prompts are fed raw: bos + text.\n")
    a("## Models\n")
    a("| dir | architecture | layers | hidden | heads / KV heads | intermediate | vocab | params | file |")
    a("|---|---|---|---|---|---|---|---|---|")
    sizes = dict(dir_sizes(out))
    for name, c, r in (("target", tcfg, tg), ("draft", dcfg, dr)):
        a(f"| `{name}/` | LlamaForCausalLM, untied lm_head, RoPE theta {c['rope_theta']:g}, "
          f"max pos {c['max_position_embeddings']} | {c['num_hidden_layers']} | {c['hidden_size']} | "
          f"{c['num_attention_heads']} / {c['num_key_value_heads']} | {c['intermediate_size']} | "
          f"{c['vocab_size']} | {r.get('parameters', 0) / 1e6:.2f}M | "
          f"{sizes.get(name + '/model.safetensors', 0) / 1e6:.2f} MB BF16 |")
    if ecfg:
        a(f"| `eagle/` | EAGLE-1 head: fc 2h->h + 1 decoder layer | 1 | {ecfg['hidden_size']} | "
          f"{ecfg['num_attention_heads']} / {ecfg['num_key_value_heads']} | {ecfg['intermediate_size']} | "
          f"(target's) | {eg.get('parameters', 0) / 1e6:.3f}M | "
          f"{sizes.get('eagle/model.safetensors', 0) / 1e6:.2f} MB BF16 |")
    a("")
    a("`eagle3/` (when present) is an EAGLE-3 head for the same target, trained separately by "
      "`tools/models/train_eagle3_demo.py`: see `eagle3/README.md`.\n")
    a("`target/` and `draft/` are `save_pretrained(..., safe_serialization=True)` outputs in BF16 "
      "(`config.json`, `generation_config.json`, `model.safetensors`) and load with "
      "`LlamaForCausalLM.from_pretrained`. RMSNorm eps 1e-5, SiLU MLP, no biases.\n")
    a("### EAGLE head (`eagle/`)\n")
    a("Follows EAGLE-1 (`eagle/model/cnets1.py`, `eagle/train/main.py` of SafeAILab/EAGLE):")
    a("- slot j gets the target's final feature f_j (LlamaModel output, i.e. AFTER the final RMSNorm) "
      "and the token x_{j+1}: `x = fc(concat(embed(x_{j+1}), f_j))` (embedding first, then the "
      "feature; `fc` has a bias); embed = the target's frozen `model.embed_tokens`;")
    a("- then ONE LLaMA decoder layer whose `input_layernorm` is absent (EAGLE layer index 0): "
      "`x = x + attn(x); x = x + mlp(post_attention_layernorm(x))`; causal attention, RoPE with the "
      "target's theta at positions 0,1,2,... of the slots (slot j has position j);")
    a("- the output is the predicted feature f_{j+1}; it goes straight into the target's frozen "
      "`lm_head` (no extra norm) to give the draft distribution for x_{j+2};")
    greedy_labels = eg.get("p_labels", "soft") == "greedy"
    a(f"- loss = {eg.get('v_w')} * SmoothL1(pred, f_{{j+1}}) + {eg.get('p_w')} * cross-entropy between "
      + ("the target's greedy token argmax(lm_head(f_{j+1}))" if greedy_labels else
         "softmax(lm_head(f_{j+1})) (the target's distribution)")
      + " and log_softmax(lm_head(pred)) (the reference: v_w=1.0, p_w=0.1); uniform noise of width "
      f"{eg.get('noise')} on the input features (the reference's `data_noise`, std 0.2); gradient "
      f"value clipping {eg.get('grad_clip_value')}; AdamW betas (0.9, 0.95). Deviations: lr "
      f"{eg.get('lr')} with warmup + cosine decay (the reference's 3e-5 is for 7B models and 20 epochs)"
      + ("; and `p_labels: greedy` with p_w 1.0: the target's greedy token instead of its "
         "distribution as the token label, weighted like the feature loss. The demo decodes at "
         "temperature 0, where a draft token is accepted iff it is the target's argmax. This 8M-parameter target is uncertain (mean top-1 probability 0.33 on "
         "held-out code), so a head trained on its soft distribution understated greedy acceptance "
         "about twofold (candidates of probability 0.2-0.3 were accepted 59% of the time, 0.05-0.1: "
         "17%; calibration error 0.044) - the premise of EAGLE-2 (and of C2T's P feature) that the "
         "draft's confidence approximates the acceptance rate failed, and with it the EAGLE-2 paper's "
         "ordering of dynamic vs static trees. The EAGLE-2 paper measured the premise on Vicuna 7B's "
         "soft-label head (its Fig. 6: confidence below 0.05 accepted about 4% of the time, above 0.95 "
         "about 98%); for this target, greedy labels give such a head (calibration table below; with "
         "p_w 0.1 the feature loss still dominated and the head stayed under-confident: error 0.026)."
         if greedy_labels else ".")
      )
    a("- `eagle/config.json` is the base LlamaConfig with `num_hidden_layers: 1` plus `\"bias\": true` "
      "(the layout of the public EAGLE checkpoints). Public heads ship `pytorch_model.bin`; this one "
      "ships `model.safetensors` with the same tensor names, without `embed_tokens.weight` (the head "
      "reuses the target's).\n")
    if eg.get("tensors"):
        a("Tensors in `eagle/model.safetensors` (all BF16):\n")
        a("| name | shape |")
        a("|---|---|")
        for k, v in eg["tensors"].items():
            a(f"| `{k}` | {v} |")
        a("")
    a("## Training\n")
    a("| stage | steps | batch x seq | tokens | wall time | notes |")
    a("|---|---|---|---|---|---|")
    if st.get("tok"):
        a(f"| tokenizer + data + prompts | - | - | - | {fmt_secs(st['tok'].get('seconds', 0))} | |")
    for name, r in (("target", tg), ("draft", dr)):
        if r:
            a(f"| {name} | {r['steps']}/{r['planned_steps']} | {r['batch']} x {r['seq_len']}, last "
              f"{r['long_steps']} steps {max(1, r['batch'] * r['seq_len'] // r['long_seq_len'])} x "
              f"{r['long_seq_len']} | {r['tokens']:,} | {fmt_secs(r['seconds'])} | AdamW lr {r['lr']} "
              f"warmup {r['warmup']} cosine to 10%, wd {r['weight_decay']}, BF16 autocast, final loss "
              f"(EMA) {r['final_loss_ema']}{' SCHEDULE CUT (time cap)' if r['stopped_early'] else ''} |")
    if eg:
        a(f"| eagle features | - | {eg['feature_windows']} x {eg['seq_len']} | {eg['feature_tokens']:,} | "
          f"{fmt_secs(eg['feature_seconds'])} | target forward in FP32 on the saved BF16 weights |")
        a(f"| eagle | {eg['steps']}/{eg['planned_steps']} | {eg['batch']} x {eg['seq_len']} | "
          f"{eg['tokens']:,} | {fmt_secs(eg['seconds'])} | final train top-1 (EMA) {eg['final_top1_ema']}"
          f"{' SCHEDULE CUT (time cap)' if eg['stopped_early'] else ''} |")
    if ev:
        a(f"| eval | - | - | - | {fmt_secs(ev.get('seconds', 0))} | |")
    a(f"\nTotal wall time of the run(s): {fmt_secs(st.get('total_seconds', 0))} on {st.get('threads')} "
      "threads (OMP_WAIT_POLICY=PASSIVE), sharing the 2 cores with other work at times. Step counts "
      "are fixed, so a rerun reproduces the weights, unless a stage's `--max-minutes` cap cut its "
      "schedule (marked SCHEDULE CUT above; then planned/actual steps are given). "
      "All figures are also in `train_log.json`.\n")
    if ev:
        a("## Results (FP32 compute on the saved BF16 weights)\n")
        a(f"- held-out perplexity ({ev.get('ppl_tokens')} tokens, windows of 512 with bos): "
          f"**target {ev.get('target_heldout_ppl')}**, **draft LM {ev.get('draft_heldout_ppl')}** "
          f"(train-sample: target {ev.get('target_train_ppl')}, draft {ev.get('draft_train_ppl')})")
        if "eagle_heldout_top1" in ev:
            a(f"- EAGLE head held-out top-1 agreement with the target's greedy next token "
              f"(one draft step, target features of the prefix): **{ev['eagle_heldout_top1'] * 100:.2f}%** "
              f"(top-3: {ev['eagle_heldout_top3'] * 100:.2f}%, {ev['eagle_eval_tokens']} tokens; "
              f"train sample top-1 {ev['eagle_train_top1'] * 100:.2f}%)")
        cal = ev.get("eagle_calibration")
        if cal:
            a(f"- EAGLE head calibration (one draft step, its top-{cal['topk']} candidates at every "
              f"position of 60 held-out windows): a candidate's probability q vs how often it is the "
              f"target's greedy token, i.e. accepted at temperature 0. Expected calibration error "
              f"**{cal['ece']:.4f}**. EAGLE-2 ranks candidates by q on the premise that q tracks "
              "acceptance; see `p_labels` under Training for why this head is trained on greedy tokens.\n")
            a("| q bin | candidates | mean q | accepted |")
            a("|---|---|---|---|")
            for b in cal["bins"]:
                a(f"| {b['lo']:.2f}-{b['hi']:.2f} | {b['count']:,} | {b['mean_q']:.3f} | {b['accepted']:.3f} |")
        a("")
    a("## Prompt sets (`prompts/`)\n")
    a("question.jsonl format (`question_id`, `category`, `turns` with one turn), held-out files only; "
      "the held-out files are split in two halves (`prompts/sources.json`) so `*_train` and `*_test` "
      "share no source file. Use `*_train` for trace collection and `*_test` for evaluation.\n")
    a("- `code_*`: a function's signature and docstring (dedented; the model completes the body), at "
      "most 4 per file, 20-300 tokens;")
    a("- `continue_*`: the opening lines of a held-out module (whole lines, <= 200 tokens).\n")
    a("| file | prompts | source files |")
    a("|---|---|---|")
    for k, v in sorted(st.get("tok", {}).get("prompts", {}).items()):
        a(f"| `prompts/{k}.jsonl` | {v['prompts']} | {v['files']} |")
    a("")
    if ev.get("samples"):
        a("## Greedy samples (64 new tokens, FP32)\n")
        for smp in ev["samples"]:
            a(f"Prompt `{smp['prompt_file']}` #{smp['question_id']}:\n")
            a("````python\n" + smp["prompt"].rstrip("\n") + "\n````\n")
            a("Target continuation:\n")
            a("````python\n" + smp["target"].rstrip("\n") + "\n````\n")
            a("Draft LM continuation:\n")
            a("````python\n" + smp["draft"].rstrip("\n") + "\n````\n")
    a("## Default classifier (`classifier.json`, `classifier.safetensors`)\n")
    a("The demo family's classifier: `spec-eval --policy c2t --classifier data/demo/classifier.json` (c2t needs one named; a classifier belongs to the target and head whose traces trained it). Not made by this script but "
      "by the toolkit itself from the models above (make first; about 10 minutes on 2 cores):\n")
    a("    bin/spec-collect --target data/demo/target --draft data/demo/eagle --template none \\")
    a("        --max-new-tokens 64 --topk 10 --depth 10 --out traces.h5 \\")
    a("        --questions data/demo/prompts/code_train.jsonl --questions data/demo/prompts/continue_train.jsonl")
    a("    bin/spec-train --traces traces.h5 --out data/demo/classifier.json \\")
    a("        --safetensors data/demo/classifier.safetensors --transform P=log --standardize \\")
    a("        --epochs 150 --neg-ratio 2.5 --select-last\n")
    a("All 163 train prompts give 1,670 full trees (1,011 nodes each, 8,714 accepted nodes in the "
      "training part). log P standardised and 150 epochs (~4,500 Adam steps) because the classifier, "
      "left under-trained, ranks a layer's candidates worse than P alone; `--select-last` because the "
      "paper's selection rule (highest recall at beta) picks the early, over-inclusive epochs; 2.5 "
      "negatives per positive put beta 0.5 at EAGLE-2's default recall on held-out trees (recall 0.830 "
      "at 5.7% of the nodes vs EAGLE-2's top 60: 0.830 at 5.9%; 2.0 negatives: 0.839 at 6.1%). "
      "The weights file records the trace's hash and the held-out metrics.\n")
    rows = dir_sizes(out)
    rows = [r for r in rows if r[0] != "README.md"]
    a("## Files and sizes\n")
    a("| file | bytes |")
    a("|---|---|")
    for name, n in rows:
        a(f"| `{name}` | {n:,} |")
    a(f"\nTotal (without this README): {sum(n for _, n in rows) / 1e6:.2f} MB.\n")
    a("Golden references for the C tests (`tests/golden/demo_*`) are written by `tools/golden/demo_refs.py`.")
    (out / "README.md").write_text("\n".join(L) + "\n")


# --------------------------------------------------------------------------- main

def stage_tok(args, s, out, st):
    t0 = time.time()
    root, files = list_corpus()
    train_files, held_files = split_files(files, args.seed, s["heldout_frac"])
    log(f"corpus: {len(files)} files under {root}: {len(train_files)} train, {len(held_files)} held-out")
    tok = train_tokenizer([read_text(root, f) for f in train_files], s["vocab_size"])
    (out / "target").mkdir(parents=True, exist_ok=True)
    save_tokenizer(tok, out / "target")
    mem, tok = tok, load_tokenizer(out)
    for f in train_files[:20]:     # the file on disk must encode exactly like the trained object
        text = read_text(root, f)
        ids = tok.encode(text).ids
        assert ids == mem.encode(text).ids and ids[0] == tok.token_to_id(BOS), f
        assert tok.decode(ids, skip_special_tokens=True) == text, f
    log(f"tokenizer: vocab {tok.get_vocab_size(with_added_tokens=True)}, bos {tok.token_to_id(BOS)}, "
        f"eos {tok.token_to_id(EOS)}")
    tr, he = Corpus(tok, root, train_files), Corpus(tok, root, held_files)
    st["split"] = dict(python_version=sys.version.split()[0], python_full=sys.version, stdlib=str(root),
                       heldout_frac=s["heldout_frac"], train_files=train_files, heldout_files=held_files,
                       train_sha256=sha256_list(train_files), heldout_sha256=sha256_list(held_files),
                       train_tokens=len(tr), heldout_tokens=len(he), train_bytes=tr.n_bytes,
                       heldout_bytes=he.n_bytes)
    log(f"tokens: train {len(tr)} ({tr.n_bytes / len(tr):.2f} bytes/token), held-out {len(he)}")
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    stats = make_prompts(tok, root, held_files, args.seed, out / "prompts")
    log(f"prompts: {stats}")
    for k, v in stats.items():
        if v["prompts"] < 40:
            log(f"WARNING: only {v['prompts']} prompts in {k}")
    return dict(seconds=round(time.time() - t0, 1), prompts=stats)


def quiet_malloc():
    """glibc serves the large [tokens, vocab] temporaries with mmap and returns them
    at once, so every step page-faults ~1 GB afresh; keep them on the heap instead."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-4, 0)            # M_MMAP_MAX = 0
        libc.mallopt(-1, 1 << 30)      # M_TRIM_THRESHOLD = 1 GiB
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/demo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default="tok,target,draft,eagle,eval,readme")
    ap.add_argument("--smoke", action="store_true", help="tiny step counts, for testing the script")
    ap.add_argument("--max-minutes", default="target=60,draft=15,eagle=30",
                    help="safety cap per stage in minutes (0 = none)")
    args = ap.parse_args()
    args.max_minutes = {k: float(v) for k, v in (kv.split("=") for kv in args.max_minutes.split(",") if kv)}
    quiet_malloc()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    s = settings(args)
    log_path = out / "train_log.json"
    st = json.load(open(log_path)) if log_path.exists() else {}
    import safetensors
    import tokenizers
    import transformers
    st.update(seed=args.seed, threads=args.threads, smoke=args.smoke, settings=s,
              versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                            tokenizers=tokenizers.__version__, safetensors=safetensors.__version__,
                            python=sys.version.split()[0]))
    st.setdefault("started", time.strftime("%Y-%m-%d"))
    stages = args.stages.split(",")
    if "tok" in stages:
        st["total_seconds"] = 0.0
    for stage in stages:
        t0 = time.time()
        log(f"=== stage {stage}")
        if stage == "tok":
            st["tok"] = stage_tok(args, s, out, st)
        elif stage in ("target", "draft"):
            st[stage] = stage_lm(stage, args, s, out, st)
        elif stage == "eagle":
            st["eagle"] = stage_eagle(args, s, out, st)
        elif stage == "eval":
            st["eval"] = stage_eval(args, s, out, st)
        elif stage == "readme":
            write_readme(out, st)
        else:
            raise SystemExit(f"unknown stage {stage}")
        st["total_seconds"] = round(st.get("total_seconds", 0) + time.time() - t0, 1)
        with open(log_path, "w") as f:
            json.dump(st, f, indent=1)
        log(f"=== stage {stage} done in {fmt_secs(time.time() - t0)}")
    log(f"all done in {fmt_secs(time.time() - T0)}")


if __name__ == "__main__":
    main()
