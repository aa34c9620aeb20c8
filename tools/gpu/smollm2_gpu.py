#!/usr/bin/env python3
"""SmolLM2's EAGLE head at GPU scale: on a lent GPU (tools/gpu/gpu_remote.sh head),
the target writes its own prompts, answers them greedily, and EAGLE heads are trained on
nested shares of those answers (the data-scaling curve in data/smollm2/README.md).

The pipeline needs only PyTorch, numpy, the gguf package (carried as a wheel) and
`tokenizers`: no transformers, no llama.cpp, none of our binaries.  Its inputs:

  --gguf      SmolLM2-135M-Instruct.Q4_1.gguf (make smollm2's file; the gguf package
              dequantizes it, the weights are rounded to BF16 as spec-convert does)
  --tokenizer SmolLM2's tokenizer.json
  --prompts   data/smollm2/prompts: train.jsonl, self.jsonl (trained on), heldout.jsonl
              (the held-out figures); collect.jsonl is left for the classifier

Stages (each one's result kept in --work, so a rerun skips what is done):

  selfask  the committed reference --prompts/gpu.jsonl.xz when it is there (unless
           --new-prompts); else the target lists topics within smollm2_prompts.SUBJECTS,
           then subtopics of each topic, then writes questions about them; prompts from
           its questions and from the templates (smollm2_prompts.self_prompts), a share
           with a second turn from FOLLOW_UPS; deduplicated, seeded -> prompts_gpu.jsonl
  answers  greedy answers (ties to the lowest token id, as our runtime breaks them) up
           to --max-new tokens: held-out prompts first, then the training prompts in a
           seeded order, so a run cut short by --gen-seconds still holds a fair sample;
           then the second turns of the answered prompts -> answers_t{0,1}.pt
  train    the target's final features (after the last RMSNorm) of every answer, then
           one EAGLE head (tools/models/smollm2_drafts.py's EAGLE recipe, unrolled) per
           point of --points (answer tokens; rows drawn in a seeded order, each point's rows a
           superset of the smaller's) -> head_<tokens>/ and its held-out top-1 at
           depths 1-4
  pack     what comes back: the prompts, the heads, a sample of the answers and the log

Stages for this machine, on what a GPU run brought back (--work holding its files):

  agree    its greedy answers against bin/spec-generate's (our runtime, F32 arithmetic)
  compare  held-out agreement of --heads on F32 features of the same answers
  tau      mt_bench τ of --heads with bin/spec-eval (eagle2 defaults, 20 x 128)
  readme   the GPU-scale section of data/smollm2/README.md, its PNG, gpu_log.json
  profile  (either machine) torch.profiler tables of a decode and a training step

Long work shows progress (done/total, rate, ETA) on stderr."""
import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
import smollm2_prompts  # noqa: E402
from smollm2_drafts import IM_END, chatml  # noqa: E402  (the template spec-eval applies)
from train_demo import EagleHead, eagle_batch_loss, fmt_secs, log, lr_at  # noqa: E402

SELF_GPU_FIRST_ID = 200000   # question ids of prompts_gpu.jsonl: apart from train/self's
# the head's recipe: tools/models/smollm2_drafts.py EAGLE (noise, weights, greedy labels, value
# clipping, 3 unrolled steps); batch and step count per point below
RECIPE = dict(lr=1e-3, warmup=50, noise=0.2, v_w=1.0, p_w=1.0, p_labels="greedy", clip_value=0.5, unroll=3)
EVAL_STEPS = 4
REPLAN = 40   # train_head measures its step time over steps REPLAN/2..REPLAN


class Progress:
    def __init__(self, name, total):
        self.name, self.total, self.t0, self.last = name, total, time.time(), 0.0

    def show(self, done, extra="", force=False):
        now = time.time()
        if not force and now - self.last < 10:
            return
        self.last = now
        el = now - self.t0
        eta = el / done * (self.total - done) if done else 0
        log(f"{self.name} {done}/{self.total} {extra} elapsed {fmt_secs(el)} ETA {fmt_secs(eta)}")


# --------------------------------------------------------------------------- the target

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
    order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
    batches, cur = [], []
    for i in order:
        cur.append(i)
        if len(cur) * (len(enc[i]) + max_new) >= batch_tokens:
            batches.append(cur)
            cur = []
    if cur:
        batches.append(cur)
    pr = Progress(name, len(enc))
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


# --------------------------------------------------------------------------- stages

def read_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def stage_selfask(args, target, tok, work, st):
    path = work / "prompts_gpu.jsonl"
    if path.exists():
        log(f"selfask: keeping {path}")
        return
    ref = Path(args.prompts) / "gpu.jsonl.xz"
    if ref.exists() and not args.new_prompts:   # the committed reference (the run that wrote it: its log)
        import lzma
        with lzma.open(ref, "rb") as f:
            path.write_bytes(f.read())
        log(f"selfask: the reference {ref} ({sum(1 for _ in open(path))} prompts; --new-prompts writes new ones)")
        return
    rng = random.Random(args.seed + 11)
    dec = lambda a: tok.decode(a, skip_special_tokens=False).removesuffix("<|im_end|>")   # noqa: E731
    subjects = smollm2_prompts.SUBJECTS[:args.subjects] if args.subjects else smollm2_prompts.SUBJECTS
    reqs = [a.format(s=s) for s in subjects for a in smollm2_prompts.TOPIC_ASKS]
    got, _ = run_greedy(target, tok, [chatml([r], []) for r in reqs], 160, args.batch_tokens, "selfask topics")
    topics, seen = [], set()

    def add(ts):
        for t in ts:
            if t.lower() not in seen:
                seen.add(t.lower())
                topics.append(t)
    for i in range(len(reqs)):
        add(smollm2_prompts.parse_list(dec(got[i])))
    n_topics = len(topics)
    # subtopics: the same list request about each topic found
    sreqs = [smollm2_prompts.SUBTOPIC_ASK.format(t=t) for t in topics]
    got, _ = run_greedy(target, tok, [chatml([r], []) for r in sreqs], 160, args.batch_tokens, "selfask subtopics")
    for i in range(len(sreqs)):
        add(smollm2_prompts.parse_list(dec(got[i])))
    log(f"selfask: {n_topics} topics, {len(topics)} with the subtopics")
    # every question request about every topic (the CPU stage asks one per topic)
    qreq = [(c, a.format(t=t)) for t in topics for c, a in smollm2_prompts.QUESTION_ASKS]
    got, _ = run_greedy(target, tok, [chatml([r], []) for _, r in qreq], 60, args.batch_tokens, "selfask questions")
    questions = [(c, q) for i, (c, r) in enumerate(qreq) if (q := smollm2_prompts.parse_question(dec(got[i])))]
    qs, seenq = [], set()
    for c, q in questions:
        if q.lower() not in seenq:
            seenq.add(q.lower())
            qs.append((c, q))
    prompts = smollm2_prompts.self_prompts(topics, qs, args.gpu_prompts, rng, SELF_GPU_FIRST_ID,
                                           second_turns=args.second_turns)
    with open(path, "w", encoding="utf-8") as f:
        for q in prompts:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    from collections import Counter
    st["selfask"] = dict(subjects=len(subjects), topic_requests=len(reqs), topics=n_topics,
                         topics_with_subtopics=len(topics), question_requests=len(qreq), questions=len(qs),
                         prompts=len(prompts), second_turns=sum(len(q["turns"]) > 1 for q in prompts),
                         categories=dict(Counter(q["category"] for q in prompts)))
    log(f"selfask: {st['selfask']}")


def prompt_jobs(args, work):
    """(split, question) of every prompt answered: held-out first, then the training
    prompts (ours, self.jsonl, prompts_gpu.jsonl) in a seeded order."""
    pdir = Path(args.prompts)
    held = [("heldout", q) for q in read_jsonl(pdir / "heldout.jsonl")]
    train = [q for f in ("train.jsonl", "self.jsonl") for q in read_jsonl(pdir / f)]
    if (work / "prompts_gpu.jsonl").exists():
        train += read_jsonl(work / "prompts_gpu.jsonl")
    random.Random(args.seed + 13).shuffle(train)
    if args.limit:
        held, train = held[:args.limit], train[:args.limit]
    return held + [("train", q) for q in train]


def stage_answers(args, target, tok, work, st):
    jobs = prompt_jobs(args, work)
    deadline = st["t_start"] + args.gen_seconds
    first = {}
    for turn in (0, 1):
        path = work / f"answers_t{turn}.pt"
        if path.exists():
            rows = load_rows(path)
        else:
            todo = [(s, q) for s, q in jobs if len(q["turns"]) > turn and (turn == 0 or key(s, q) in first)]
            texts = [chatml(q["turns"][:turn + 1], [first[key(s, q)]] if turn else []) for s, q in todo]
            got, enc = run_greedy(target, tok, texts, args.max_new, args.batch_tokens, f"answers turn {turn + 1}",
                                  deadline)
            rows = [dict(split=s, qid=q["question_id"], turn=turn, prompt=enc[i], answer=got[i])
                    for i, (s, q) in enumerate(todo) if i in got]
            save_rows(rows, path)
        if turn == 0:
            first = {f"{r['split']}/{r['qid']}": tok.decode(r["answer"], skip_special_tokens=False)
                     .removesuffix("<|im_end|>") for r in rows}
        st.setdefault("answers", {})[f"turn{turn + 1}"] = answer_stats(rows)
    log(f"answers: {st['answers']}")


def save_rows(rows, path):
    """Rows as flat int32 tensors and offsets: quick to write and to read back."""
    flat = {}
    for f in ("prompt", "answer"):
        flat[f] = torch.tensor([i for r in rows for i in r[f]], dtype=torch.int32)
        flat[f + "_len"] = torch.tensor([len(r[f]) for r in rows], dtype=torch.int64)
    flat["qid"] = torch.tensor([r["qid"] for r in rows], dtype=torch.int64)
    flat["heldout"] = torch.tensor([r["split"] == "heldout" for r in rows])
    flat["turn"] = torch.tensor([r["turn"] for r in rows], dtype=torch.int64)
    torch.save(flat, path)


def load_rows(path):
    flat = torch.load(path)
    cut = {f: torch.split(flat[f], flat[f + "_len"].tolist()) for f in ("prompt", "answer")}
    return [dict(split="heldout" if h else "train", qid=q, turn=t, prompt=p.tolist(), answer=a.tolist())
            for h, q, t, p, a in zip(flat["heldout"].tolist(), flat["qid"].tolist(), flat["turn"].tolist(),
                                     cut["prompt"], cut["answer"])]


def key(s, q):
    return f"{s}/{q['question_id']}"


def answer_stats(rows):
    s = {}
    for split in ("train", "heldout"):
        a = [len(r["answer"]) for r in rows if r["split"] == split]
        s[split] = dict(sequences=len(a), answer_tokens=sum(a), finished=sum(r["answer"][-1:] == [IM_END]
                                                                             for r in rows if r["split"] == split),
                        longest_answer=max(a, default=0))
    return s


class Rows:
    """Training rows on the device: ids of prompt + answer without the last answer id
    (it is never fed back, so it has no feature), their features, and where each
    answer starts."""

    def __init__(self, rows, target, batch_tokens, name):
        seqs = [r["prompt"] + r["answer"][:-1] for r in rows]
        self.n_prompt = [len(r["prompt"]) for r in rows]
        self.len = [len(s) for s in seqs]
        self.off = np.concatenate([[0], np.cumsum(self.len)]).tolist()
        self.ids = torch.tensor([i for s in seqs for i in s], dtype=torch.long, device=target.dev)
        self.feat = torch.empty((self.off[-1], target.h), dtype=torch.bfloat16, device=target.dev)
        order = sorted(range(len(seqs)), key=lambda i: self.len[i])
        pr = Progress(f"features {name}", len(seqs))
        i = done = 0
        while i < len(order):
            j = i
            while j < len(order) and (j - i + 1) * self.len[order[j]] <= batch_tokens:
                j += 1
            j = max(j, i + 1)
            sel = order[i:j]
            ids, _ = self.pad(sel)
            f = target.features(ids)
            for b, r in enumerate(sel):
                self.feat[self.off[r]:self.off[r + 1]] = f[b, :self.len[r]]
            done += len(sel)
            i = j
            pr.show(done, force=i == len(order))

    def pad(self, sel):
        T = max(self.len[i] for i in sel)
        ids = torch.full((len(sel), T), IM_END, dtype=torch.long, device=self.ids.device)
        answer = torch.zeros((len(sel), T), dtype=torch.bool, device=self.ids.device)
        for b, i in enumerate(sel):
            ids[b, :self.len[i]] = self.ids[self.off[i]:self.off[i + 1]]
            answer[b, self.n_prompt[i]:self.len[i]] = True
        return ids, answer

    def batch(self, sel):
        ids, answer = self.pad(sel)
        feat = torch.zeros((*ids.shape, self.feat.shape[1]), dtype=torch.float32, device=ids.device)
        for b, i in enumerate(sel):
            feat[b, :self.len[i]] = self.feat[self.off[i]:self.off[i + 1]].float()
        return ids, feat, answer

    def batches(self, sel, tokens_per_batch, gen):
        """Batches of row indices of similar length, about tokens_per_batch (padded)
        tokens each, in an order drawn from gen."""
        order = sorted(sel, key=lambda i: self.len[i])
        out, cur = [], []
        for i in order:
            cur.append(i)
            if len(cur) * self.len[i] >= tokens_per_batch:
                out.append(cur)
                cur = []
        if cur:
            out.append(cur)
        return [out[p] for p in torch.randperm(len(out), generator=gen).tolist()]


def eagle_loss(head, frozen, batch, m, gen, deep_vocab, top1):
    ids, feat, answer = batch
    # slot j predicts f_{j+1}, whose greedy token is x_{j+2} (tools/models/smollm2_drafts.py)
    mask = torch.cat([answer[:, 2:], torch.zeros((answer.shape[0], 1), dtype=torch.bool, device=ids.device)], 1)
    labels = torch.cat([ids[:, 2:], torch.full((ids.shape[0], 1), IM_END, device=ids.device)], 1)
    loss, *_ = eagle_batch_loss(head, *frozen, ids, feat, m, gen, mask, labels, top1, deep_vocab)
    return loss


def head_config(cfg):
    """EAGLE checkpoint config.json (train_demo.eagle_config's keys) from the target's."""
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    c.update(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
             intermediate_size=cfg["intermediate_size"], num_attention_heads=cfg["num_attention_heads"],
             num_key_value_heads=cfg["num_key_value_heads"], hidden_act="silu", max_position_embeddings=8192,
             rms_norm_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"], rope_scaling=None,
             initializer_range=0.02, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True, pretraining_tp=1,
             attention_bias=False, mlp_bias=False)
    c.update(num_hidden_layers=1, bias=True, pad_token_id=0, torch_dtype="bfloat16", use_cache=True)
    return c


def train_head(args, target, rows, sel, steps, tokens_per_batch, seed, name, deadline=None):
    """One head on rows sel: RECIPE, `steps` steps of about tokens_per_batch tokens
    (warmup + cosine).  With a deadline, the step count is measured against it after
    REPLAN steps (the first steps load kernels and run slow) and cut to fit, the
    schedule with it."""
    dev = target.dev
    torch.manual_seed(seed)
    head = EagleHead(head_config(target.cfg)).to(dev)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ngen = torch.Generator(device=dev).manual_seed(seed)
    plan = []
    while len(plan) < steps:
        plan += rows.batches(sel, tokens_per_batch, gen)
    plan = plan[:steps]
    deep_vocab = torch.unique(torch.cat([rows.ids[rows.off[i] + rows.n_prompt[i]:rows.off[i + 1]] for i in sel]))
    m = dict(RECIPE)
    opt = torch.optim.AdamW(head.parameters(), lr=m["lr"], betas=(0.9, 0.95), weight_decay=0.0)
    # the target's embedding and lm_head, frozen (FP32, as the CPU recipe trains)
    emb = torch.nn.Embedding.from_pretrained(target.emb.float())
    lm = torch.nn.Linear(target.h, target.emb.shape[0], bias=False, device=dev)
    lm.weight = torch.nn.Parameter(target.head.float(), requires_grad=False)
    pr = Progress(f"train {name}", steps)
    ema = None
    head.train()
    times = []
    planned = steps
    step = 0
    while step < steps:
        if deadline and step == REPLAN:
            rate = (times[-1] - times[REPLAN // 2]) / (REPLAN - 1 - REPLAN // 2)
            fit = REPLAN + int((deadline - time.time()) / rate)
            if fit < steps:
                steps = max(REPLAN + 1, fit)
                log(f"train {name}: {steps} of {planned} steps fit the time left ({rate:.3f} s a step)")
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        top1 = []
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss = eagle_loss(head, (emb, lm), rows.batch(plan[step]), m, ngen, deep_vocab, top1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(head.parameters(), m["clip_value"])
        opt.step()
        ema = (loss.item(), top1) if ema is None else (0.9 * ema[0] + 0.1 * loss.item(),
                                                       [e if a != a else 0.9 * e + 0.1 * a
                                                        for e, a in zip(ema[1], top1)])
        pr.show(step + 1, f"loss {ema[0]:.4f} top1 {'/'.join(f'{a:.3f}' for a in ema[1])} lr {lr:.2e}",
                force=step + 1 == steps)
        times.append(time.time())
        step += 1
    head.eval()
    late = times[len(times) // 2:]
    per_step = (late[-1] - late[0]) / max(len(late) - 1, 1)
    return head, dict(steps=steps, planned_steps=planned, seconds_per_step=round(per_step, 4), tokens_per_batch=tokens_per_batch, final_loss_ema=round(ema[0], 4),
                      final_step_top1_ema=[round(a, 4) for a in ema[1]], deep_vocab=len(deep_vocab), **m)


@torch.no_grad()
def eval_head(head, target, rows):
    """Held-out agreement (tools/models/smollm2_drafts.py stage eval): at every answer position
    the head's step-k top-1 on its own k-1 predictions against the target's greedy
    token, k = 1..EVAL_STEPS; and step 1's top-3."""
    deep, deep_n, t3 = [0] * EVAL_STEPS, [0] * EVAL_STEPS, 0
    for i in range(len(rows.len)):
        ids, feat, answer = rows.batch([i])
        emb = target.emb[ids[:, 1:]].float()
        preds = head.unroll(feat[:, :-1], emb, EVAL_STEPS)
        keep = answer[:, 2:]
        want = ids[:, 2:]
        for k, pred in enumerate(preds):
            kk = keep.clone()
            kk[:, :k] = False
            z = pred[:, :-1][kk] @ target.head.float().T
            deep[k] += (z.argmax(-1) == want[kk]).sum().item()
            deep_n[k] += kk.sum().item()
            if k == 0:
                t3 += (z.topk(3, -1).indices == want[kk][:, None]).any(-1).sum().item()
    return dict(heldout_answer_positions=deep_n[0], eagle_step_top1=[round(a / max(b, 1), 4)
                                                                     for a, b in zip(deep, deep_n)],
                eagle_top3=round(t3 / max(deep_n[0], 1), 4))


def save_head(head, cfg, d, counts):
    """The head in the public layout, and token_counts.safetensors: how often each
    target token is an answer token of the rows it trained on (spec-eval
    --draft-vocab N keeps the N most frequent; tools/models/smollm2_drafts.py stage counts)."""
    from safetensors.torch import save_file
    d.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in head.state_dict().items()}
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    save_file({"token_counts": counts.cpu()}, str(d / "token_counts.safetensors"),
              metadata={"format": "pt", "source": "SmolLM2 answer tokens of the rows this head trained on "
                                                  "(tools/gpu/smollm2_gpu.py)"})
    with open(d / "config.json", "w") as f:
        json.dump(head_config(cfg), f, indent=2)
        f.write("\n")


def stage_train(args, target, tok, work, st):
    rows = [r for t in (0, 1) for r in load_rows(work / f"answers_t{t}.pt")]
    train = [r for r in rows if r["split"] == "train" and len(r["answer"]) > 1]
    held = [r for r in rows if r["split"] == "heldout" and len(r["answer"]) > 1]
    random.Random(args.seed + 17).shuffle(train)
    t_rows = Rows(train, target, args.feature_tokens, "train")
    h_rows = Rows(held, target, args.feature_tokens, "heldout")
    cum = np.cumsum([len(r["answer"]) for r in train]).tolist()
    points = sorted({min(p, cum[-1]) for p in args.points}, reverse=True)
    deadline = st["t_start"] + args.total_seconds
    st.setdefault("points", {})
    plan = []
    for p in points:
        n = next(i + 1 for i, c in enumerate(cum) if c >= p)
        tokens = sum(t_rows.len[i] for i in range(n))
        # the recipe's epochs, at a batch that gives at least --min-steps steps
        tpb = int(min(max(tokens * args.epochs / args.min_steps, 4096), args.max_batch_tokens))
        plan.append((p, n, tokens, tpb, max(1, round(tokens * args.epochs / tpb))))
    # a step's time grows with its batch: measured on the largest, then every point's
    # steps scaled by one factor (equal epochs for all) to end by the deadline
    _, rec = train_head(args, target, t_rows, list(range(plan[0][1])), 24, plan[0][3], args.seed, "timing")
    per_token = rec["seconds_per_step"] / plan[0][3]
    need = sum(steps * tpb * per_token + 10 for _, _, _, tpb, steps in plan if f"head_{_}" not in st["points"])
    left = deadline - time.time()
    scale = max(0.0, min(1.0, left / need)) if need > 0 else 1.0
    st["train_plan"] = dict(seconds_per_1k_tokens=round(per_token * 1000, 4), needed_s=round(need), left_s=round(left),
                            scale=round(scale, 3))
    log(f"train plan: {st['train_plan']}")
    for p, n, tokens, tpb, steps in plan:
        name = f"head_{p}"
        if name in st["points"]:
            continue
        steps = max(50, int(steps * scale))
        if time.time() + steps * tpb * per_token > deadline + 30:
            log(f"{name}: skipped, {steps} steps do not fit the time left")
            continue
        t0 = time.time()
        # a safety net: the steps planned above should already fit
        head, rec = train_head(args, target, t_rows, list(range(n)), steps, tpb, args.seed + 1, name,
                               deadline - 10 * len(plan))
        rec.update(answer_tokens=cum[n - 1], rows=n, sequence_tokens=tokens, epochs=round(steps * tpb / tokens, 2),
                   seconds=round(time.time() - t0, 1))
        rec.update(eval_head(head, target, h_rows))
        answers = torch.cat([t_rows.ids[t_rows.off[i] + t_rows.n_prompt[i]:t_rows.off[i + 1]] for i in range(n)])
        save_head(head, target.cfg, work / name, torch.bincount(answers, minlength=target.cfg["vocab_size"]))
        st["points"][name] = rec
        log(f"{name}: {rec}")
        save_state(work, st)


def stage_pack(args, target, tok, work, st):
    """$OUT (at most 8 files): the prompts, every head (safetensors + config in one
    tar), a sample of the answers (ids) for the agreement check, the log."""
    import lzma
    import shutil
    import tarfile
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if (work / "prompts_gpu.jsonl").exists():
        shutil.copy(work / "prompts_gpu.jsonl", out / "prompts_gpu.jsonl")
    for d in sorted(work.glob("head_*")):
        with tarfile.open(out / f"{d.name}.tar", "w") as t:
            t.add(d, arcname=d.name)
    sample = []
    for t in (0, 1):
        p = work / f"answers_t{t}.pt"
        if p.exists():
            rows = load_rows(p)
            sample += [r for r in rows if r["split"] == "heldout"] + rows[-200:]
    with lzma.open(out / "answers_sample.json.xz", "wt") as f:
        json.dump(sample, f)
    shutil.copy(work / "log.json", out / "log.json")


def save_state(work, st):
    with open(work / "log.json", "w") as f:
        json.dump(st, f, indent=1)
        f.write("\n")


def stage_profile(args, target, tok, work, st):
    """Where a decode step and a training step spend their time (torch.profiler, the
    top ops by device and host time), on synthetic rows: for tuning, no results."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if target.dev.type == "cuda" else [])
    g = torch.Generator().manual_seed(args.seed)
    prompts = [torch.randint(3, 49152, (200,), generator=g).tolist() for _ in range(args.profile_rows)]
    sync = torch.cuda.synchronize if target.dev.type == "cuda" else (lambda: None)
    target.greedy(prompts[:64], 4)
    for n_new in (2, 34):
        sync()
        t0 = time.time()
        target.greedy(prompts, n_new)
        sync()
        log(f"profile: greedy {len(prompts)} x 200-token prompts, {n_new} new: {time.time() - t0:.3f} s")
    with profile(activities=acts) as prof:
        target.greedy(prompts, 8)
        sync()
    log("profile: greedy\n" + prof.key_averages().table(sort_by="self_device_time_total" if len(acts) > 1
                                                         else "self_cpu_time_total", row_limit=14))
    rows = [dict(prompt=p[:100], answer=p[100:] * 2, split="train") for p in prompts]
    r = Rows(rows, target, args.feature_tokens, "profile")
    sel = list(range(len(rows)))
    train_head(args, target, r, sel, 3, args.max_batch_tokens, 0, "profile warm-up")
    sync()
    t0 = time.time()
    train_head(args, target, r, sel, 5, args.max_batch_tokens, 0, "profile timed")
    sync()
    log(f"profile: 5 training steps of {args.max_batch_tokens} tokens (with setup): {time.time() - t0:.3f} s")
    with profile(activities=acts) as prof:
        train_head(args, target, r, sel, 2, args.max_batch_tokens, 0, "profile")
        sync()
    log("profile: training\n" + prof.key_averages().table(sort_by="self_device_time_total" if len(acts) > 1
                                                           else "self_cpu_time_total", row_limit=18))
    log("profile: training by host time\n" + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


def sample_rows(work):
    """The held-out rows of the answers: answers_t*.pt where the run was here, else
    the answers_sample.json.xz a GPU run brought back."""
    import lzma
    if (work / "answers_t0.pt").exists():
        return [r for t in (0, 1) for r in load_rows(work / f"answers_t{t}.pt") if r["split"] == "heldout"]
    with lzma.open(work / "answers_sample.json.xz", "rt") as f:
        return [r for r in json.load(f) if r["split"] == "heldout"]


def stage_compare(args, target, tok, work, st):
    """Heads (--heads) on the same held-out answers and features: the GPU run's heads
    against the shipped one, on one footing (eval_head, FP32 features here)."""
    from safetensors.torch import load_file
    held = [r for r in sample_rows(work) if len(r["answer"]) > 1]
    rows = Rows(held, target, args.feature_tokens, "heldout")
    st["compare"] = {}
    for d in args.heads:
        d = Path(d)
        head = EagleHead(json.load(open(d / "config.json")))
        head.load_state_dict({k: v.float() for k, v in load_file(str(d / "model.safetensors")).items()})
        head = head.to(target.dev).eval()
        st["compare"][str(d)] = eval_head(head, target, rows)
        log(f"compare {d}: {st['compare'][str(d)]}")


def stage_agree(args, target, tok, work, st):
    """The GPU's greedy answers against our runtime's (bin/spec-generate, BF16 weights,
    FP32 arithmetic, on this machine) for the first --agree-rows held-out first turns:
    answers identical, and how far each runs before the first differing token."""
    import subprocess
    rows = [r for r in sample_rows(work) if r["turn"] == 0][:args.agree_rows]
    same, runs, cmp_tokens, margins = 0, [], 0, []
    for r in rows:
        n = len(r["answer"])
        out = subprocess.run(["bin/spec-generate", "--target", args.target_dir, "--ids",
                              ",".join(map(str, r["prompt"])), "--max-new-tokens", str(n), "--device", "cpu"],
                             check=True, capture_output=True, text=True).stdout
        ours = json.loads(out[out.index("["):out.rindex("]") + 1])
        k = next((i for i, (a, b) in enumerate(zip(ours, r["answer"])) if a != b), min(len(ours), n))
        same += ours == r["answer"]
        runs.append(k)
        if k < min(len(ours), n):   # how near a tie the first difference is in F32
            ids = torch.tensor([r["prompt"] + r["answer"][:k]], device=target.dev)
            x = target.layers(target.emb[ids], torch.arange(ids.shape[1], device=target.dev)[None], None,
                              causal=True)
            lg = target.logits(x[0, -1])
            margins.append(abs(lg[ours[k]] - lg[r["answer"][k]]).item())
        cmp_tokens += n
        log(f"agree: {len(runs)}/{len(rows)}: {k} of {n} tokens before the first difference")
    st["agree"] = dict(answers=len(rows), identical=same, answer_tokens=cmp_tokens,
                       tokens_before_first_difference=sum(runs), first_difference_at=runs,
                       f32_margins=[round(m, 5) for m in margins])
    log(f"agree: {st['agree']}")


def stage_tau(args, target, tok, work, st):
    """τ of each head (--heads) on mt_bench (--bench: 20 first turns x 128 tokens, eagle2
    defaults, T = 0) with bin/spec-eval on this machine; a head's report is kept in
    work/tau_<head>.json and reused."""
    import subprocess
    st["tau"] = {}
    for d in args.heads:
        rep = work / f"tau_{Path(d).name}.json"
        if not rep.exists():
            log(f"tau: spec-eval with {d}")
            subprocess.run(["bin/spec-eval", "--target", args.target_dir, "--draft", d, "--policy", "eagle2",
                            "--questions", args.bench, "--max-questions", "20", "--max-turns", "1",
                            "--max-new-tokens", "128", "--no-baseline", "--json", str(rep)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(rep))
        t = r["total"]
        st["tau"][str(d)] = dict(tau=round(t["tau"], 3), gamma=t.get("gamma"))
        log(f"tau {d}: {st['tau'][str(d)]}")


def plot_curve(rows, png):
    """Held-out top-1 at depths 1-4 against answer tokens (log scale), gnuplot; None,
    or why there is no PNG."""
    import shutil
    import subprocess
    if not shutil.which("gnuplot"):
        return "gnuplot not found: no PNG (make deps installs gnuplot-nox)"
    plots = ", ".join(f"'-' using 1:2 with linespoints title 'depth {k + 1}'" for k in range(EVAL_STEPS))
    script = f"""set terminal png size 640,420
set output '{png}'
set logscale x
set xlabel 'answer tokens trained on'
set ylabel 'held-out top-1 agreement (%)'
set key left top
set grid
plot {plots}
"""
    for k in range(EVAL_STEPS):
        script += "".join(f"{r['answer_tokens']} {100 * r['eagle_step_top1'][k]:.2f}\n" for r in rows) + "e\n"
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return None if r.returncode == 0 else "gnuplot failed: " + r.stderr.strip()[-200:]


def stage_readme(args, target, tok, work, st):
    """The GPU-scale section of data/smollm2/README.md (from this run's log: data,
    agreement, the scaling curve and its PNG); the rest of that README is
    tools/models/smollm2_drafts.py's."""
    out = Path(args.readme_dir)
    A, S, G = st["answers"], st["selfask"], st.get("agree", {})
    a = st["args"]
    pts = sorted(st["points"].values(), key=lambda r: r["answer_tokens"])
    png = out / "gpu_scaling.png"
    note = plot_curve(pts, png)
    tau, cmp_ = st.get("tau", {}), st.get("compare", {})
    tot = sum(A[t][sp]["answer_tokens"] for t in ("turn1", "turn2") for sp in ("train", "heldout"))
    pct = lambda xs: " / ".join(f"{100 * x:.1f}" for x in xs)   # noqa: E731
    by_name = lambda m, n: next((v for k, v in m.items() if Path(k).name == n), None)   # noqa: E731
    rows = []
    for name, r in sorted(st["points"].items(), key=lambda kv: kv[1]["answer_tokens"]):
        c, t = by_name(cmp_, name), by_name(tau, name)
        rows.append(f"| {r['answer_tokens'] / 1e6:.2f}M | {r['rows']:,} | {r['steps']} x {r['tokens_per_batch']:,} | "
                    f"{r['epochs']} | {pct(r['eagle_step_top1'])} | {pct(c['eagle_step_top1']) if c else '-'} | "
                    + (f"{t['tau']:.2f} |" if t else "- |"))
    c0, t0 = by_name(cmp_, args.cpu_head), by_name(tau, args.cpu_head)
    cpu = json.load(open(out / "train_log.json"))
    E = cpu["eagle"]
    rows.append(f"| CPU head ({cpu['answers']['train']['answer_tokens'] / 1e6:.2f}M, `tools/models/smollm2_drafts.py`) | "
                f"{cpu['answers']['train']['sequences']:,} | {E['steps']} x {E['tokens_per_batch']:,} | {E['epochs']} | - | "
                f"{pct(c0['eagle_step_top1']) if c0 else '-'} | " + (f"{t0['tau']:.2f} |" if t0 else "- |"))
    margins = [round(m, 4) for m in G.get("f32_margins", [])]
    big = pts[-1]
    tau_big = by_name(tau, f"head_{big['answer_tokens']}")
    text = f"""<!-- gpu-scale: written by tools/gpu/smollm2_gpu.py --stages readme; everything above is tools/models/smollm2_drafts.py's -->
## GPU-scale data (tools/gpu/smollm2_gpu.py)

On a lent {st['device']} (`tools/gpu/gpu_remote.sh pack-head`, then the three calls its header lists), the
target wrote its own prompts, answered them and EAGLE heads were trained on nested shares of the answers,
all in one detached run of {st['seconds'].get('selfask', 0) + st['seconds'].get('answers', 0) + st['seconds'].get('train', 0):.0f} s. Nothing comes from the benchmarks.

- **Prompts** (`prompts/gpu.jsonl.xz`, {S['prompts']:,}, the reference; `--new-prompts` writes new ones):
  the target listed topics within the {S['subjects']} subjects of `tools/models/smollm2_prompts.py`
  ({S['topics']:,} distinct), then subtopics of each ({S['topics_with_subtopics']:,} in all), then was asked
  each of the four question requests about every one of them ({S['question_requests']:,} requests,
  {S['questions']:,} distinct usable questions); the prompts are its questions and writing, roleplay and
  explanation templates about its topics, deduplicated, seeded ({a['seed']}); {S['second_turns']:,} have a
  follow-up turn. Categories: {", ".join(f"{k} {v:,}" for k, v in sorted(S['categories'].items()))}.
- **Answers**: every prompt of `train.jsonl`, `self.jsonl`, `gpu.jsonl.xz` and `heldout.jsonl` answered
  greedily up to {a['max_new']} tokens, then the follow-ups of those with one: {tot / 1e6:.1f}M answer
  tokens ({A['turn1']['train']['sequences']:,} first and {A['turn2']['train']['sequences']:,} second turns for
  training; {A['turn1']['train']['finished']:,} first turns ended before the limit) in
  {st['seconds']['answers']:.0f} s. The GPU computes in BF16 (weights as `make smollm2` rounds them); the
  answers are regenerable from the committed prompts with the same script and seed, and not committed.
- **Agreement with our runtime** (`--stages agree`: `bin/spec-generate` on this CPU, F32 arithmetic):
  {G.get('identical', '?')} of {G.get('answers', '?')} held-out answers identical; {G.get('tokens_before_first_difference', 0):,} of
  {G.get('answer_tokens', 0):,} tokens come before the first difference. Both break ties to the lowest id; every
  first difference is a near-tie in F32 (the two tokens' F32 logits differ by {", ".join(map(str, margins)) or "-"})
  that BF16 arithmetic orders the other way.

Heads at {len(pts)} points of the curve (the EAGLE recipe of `tools/models/smollm2_drafts.py`, 3 unrolled steps;
rows drawn in a seeded order, each point's a superset of the smaller's; equal epochs at every point, fit
by one factor into the run's time). Held-out top-1 agreement at depths 1-4 (each depth on the head's own
earlier predictions) on the held-out prompts' answers, once with the GPU's BF16 features and once
(`--stages compare`) with F32 features on this CPU, where the CPU-trained head is measured the same way; τ is
`spec-eval --policy eagle2` (defaults) on 20 mt_bench first turns x 128 tokens (`--stages tau`):

| answer tokens | rows | steps x tokens | epochs | top-1 d1-d4 (GPU) | top-1 d1-d4 (F32, CPU) | τ mt_bench |
|---|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

![held-out top-1 against answer tokens](gpu_scaling.png){'' if not note else f" ({note})"}
All figures of this section: `gpu_log.json`.

**Which head is shipped.** `eagle/` holds the largest head, `head_{big['answer_tokens']}`:
{f"mt_bench τ {tau_big['tau']:.2f} against the CPU head's {t0['tau']:.2f}" if tau_big and t0 else "its τ above"},
with {f"{100 * (1 - tau_big['gamma'] / t0['gamma']):.0f}% fewer verified tokens" if tau_big and t0 and t0.get('gamma') else "fewer verified tokens"}, although its
held-out agreement is no higher: the held-out prompts are of the CPU head's kinds (software, arithmetic),
while most of this run's prompts are about the subjects people ask an assistant about, as mt_bench's are.
Its `token_counts.safetensors` (what `--draft-vocab` ranks) is the CPU answer set's: this run's answers
stayed on the GPU machine (a head trained by a later run brings its own).

**What this run shows, and why the aims are not met.** Generating the data is no longer the limit:
{tot / 1e6:.0f}M tokens took {st['seconds']['answers'] / 60:.0f} minutes. Training was: the run had {st['train_plan']['left_s']} s left
for {st['train_plan']['needed_s']} s of planned steps, so every point got {big['epochs']} of an epoch
({st['train_plan']['scale']} of the plan). At that budget the curve mixes data with steps (the largest
point also took the most steps). The next GPU session should generate and train in one run with the
training given the larger share: {big['seconds_per_step']:.2f} s a step of {big['tokens_per_batch']:,} tokens means about
{round(2 * big['sequence_tokens'] / big['tokens_per_batch'] * big['seconds_per_step'] / 60)} minutes for two epochs of this data.
"""
    with open(out / "gpu_log.json", "w") as f:   # the figures above, as the run and the stages here left them
        json.dump({k: v for k, v in st.items() if k != "t_start"}, f, indent=1)
        f.write("\n")
    readme = out / "README.md"
    old = readme.read_text()
    cut = old.find("<!-- gpu-scale")
    readme.write_text((old[:cut] if cut >= 0 else old.rstrip() + "\n\n") + text)
    log(f"readme: {readme} ({len(text.splitlines())} lines of the GPU-scale section), {png}")


STAGES = dict(profile=stage_profile, readme=stage_readme, tau=stage_tau, compare=stage_compare, agree=stage_agree, selfask=stage_selfask, answers=stage_answers, train=stage_train, pack=stage_pack)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True, help="the target's GGUF, or 'random' (a smoke test)")
    ap.add_argument("--tokenizer", required=True, help="SmolLM2's tokenizer.json")
    ap.add_argument("--prompts", default="data/smollm2/prompts")
    ap.add_argument("--work", default="/tmp/c2t-head")
    ap.add_argument("--out", default="/tmp/c2t-head-out")
    ap.add_argument("--stages", default="selfask,answers,train,pack")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new-prompts", action="store_true",
                    help="selfask writes new prompts even where --prompts holds gpu.jsonl.xz")
    ap.add_argument("--subjects", type=int, default=0, help="only the first N subjects (a small run)")
    ap.add_argument("--limit", type=int, default=0, help="only N held-out and N training prompts (a small run)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"], help="the target's compute type")
    ap.add_argument("--gpu-prompts", type=int, default=80000, help="prompts written from the target's topics")
    ap.add_argument("--second-turns", type=float, default=0.25, help="share of them with a follow-up turn")
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--batch-tokens", type=int, default=1 << 21, help="KV slots of one generation batch")
    ap.add_argument("--feature-tokens", type=int, default=1 << 18, help="tokens of one feature forward")
    ap.add_argument("--gen-seconds", type=float, default=380, help="answers stop starting batches after this")
    ap.add_argument("--total-seconds", type=float, default=660, help="the heads' training ends by this")
    ap.add_argument("--points", type=lambda s: [int(x) for x in s.split(",")], default=[736656, 3000000, 10000000,
                                                                                       10 ** 9])
    ap.add_argument("--epochs", type=float, default=3)
    ap.add_argument("--min-steps", type=int, default=600)
    ap.add_argument("--max-batch-tokens", type=int, default=32768)
    ap.add_argument("--heads", nargs="*", default=[], help="compare: head directories")
    ap.add_argument("--cpu-head", default="cpu_head", help="readme: the compare/tau name of the CPU-trained head")
    ap.add_argument("--readme-dir", default="data/smollm2", help="readme: where README.md and the PNG go")
    ap.add_argument("--bench", default="../shared/benchmarks/mt_bench/question.jsonl", help="tau: questions")
    ap.add_argument("--agree-rows", type=int, default=12, help="agree: held-out answers checked")
    ap.add_argument("--target-dir", default="models/smollm2-135m-instruct", help="agree: our checkpoint")
    ap.add_argument("--profile-rows", type=int, default=1024, help="synthetic rows of the profile stage")
    args = ap.parse_args()
    t_start = time.time()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    st = json.load(open(work / "log.json")) if (work / "log.json").exists() else {}
    st["t_start"] = t_start
    if "args" not in st or {"selfask", "answers", "train"} & set(args.stages.split(",")):
        st["args"] = {k: v for k, v in vars(args).items()}   # the run that made the data and heads
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    dev = torch.device(args.device)
    sd, cfg = random_state(args.seed) if args.gguf == "random" else gguf_state(args.gguf)
    target = Target(sd, cfg, dev, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    del sd
    device = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    if {"selfask", "answers", "train"} & set(args.stages.split(",")):
        st["device"] = device   # where the data and heads were made
    log(f"target loaded on {device} in {time.time() - t_start:.1f} s")
    if dev.type == "cuda":
        # FP32 products (the logits) on TF32 tensor cores: the BF16 model's own rounding
        # is larger than TF32's
        torch.backends.cuda.matmul.allow_tf32 = True
        st["tf32_logits"] = True
    for name in args.stages.split(","):
        t0 = time.time()
        try:
            STAGES[name](args, target, tok, work, st)
        except Exception as e:   # what is done is kept: the pack stage still runs
            import traceback
            traceback.print_exc()
            st.setdefault("errors", {})[name] = repr(e)
            if name == "pack":
                raise
        st.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        save_state(work, st)
        log(f"stage {name} done in {fmt_secs(time.time() - t0)}")


if __name__ == "__main__":
    main()
