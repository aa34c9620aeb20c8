"""smollm2_gpu.py's training: the answer rows and their features on the device,
one EAGLE head per point of the data-scaling curve with its held-out figures
(stage train), what comes back (stage pack) and a profile of both loops
(stage profile)."""
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from c2ttools.heads import EAGLE1_KEYS, eagle1_config, read_head, save_head, save_token_counts
from c2ttools.progress import Progress, log
from c2ttools.prompts import IM_END
from c2ttools.rows import length_batches, load_flat_rows
from drafts.eval import eval_eagle
from drafts.heads import EagleHead, answer_loss
from drafts.recipes import SMOLLM2_HEAD
from drafts.train import train_loop
from smollm2_gpu_common import PROGRESS_EVERY, REPLAN, save_state


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
        pr = Progress(f"features {name}", len(seqs), PROGRESS_EVERY)
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


# SmolLM2-135M-Instruct's config.json values of the keys its GGUF (cfg) does not hold
SMOLLM2_CONFIG = dict(hidden_act="silu", max_position_embeddings=8192, rope_scaling=None, initializer_range=0.02,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=True, pretraining_tp=1,
                      attention_bias=False, mlp_bias=False)


def head_config(cfg):
    """EAGLE checkpoint config.json (c2ttools.heads.eagle1_config) from the target's
    GGUF config cfg and SMOLLM2_CONFIG."""
    return eagle1_config({k: cfg[k] if k in cfg else SMOLLM2_CONFIG[k] for k in EAGLE1_KEYS})


def train_head(args, target, rows, sel, steps, tokens_per_batch, seed, name, deadline=None, max_steps=None):
    """One head on rows sel: RECIPE, `steps` steps of about tokens_per_batch tokens
    (warmup + cosine), from random weights or from --init-head's (continued training:
    the schedule starts anew).  With a deadline, the step count is measured against it after
    REPLAN steps (the first steps load kernels and run slow) and fit to it, the
    schedule with it: cut, or extended up to max_steps (the plan's rate comes from
    a short timing run, which once ran 2.7x slow and left 60% of the time unused)."""
    dev = target.dev
    torch.manual_seed(seed)
    head = EagleHead(head_config(target.cfg)).to(dev)
    if args.init_head:
        head.load_state_dict(read_head(Path(args.init_head))[1])
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ngen = torch.Generator(device=dev).manual_seed(seed)
    # batches for as many steps as the replan below may extend to
    plan = []
    while len(plan) < max(steps, max_steps or 0):
        plan += length_batches(sel, rows.len, tokens_per_batch, gen)
    m = dict(SMOLLM2_HEAD, unroll=args.unroll, p_labels=args.labels)
    # greedy labels: the deeper steps' cross-entropy over the answer tokens; soft labels
    # (the target's distribution) need the whole vocabulary
    deep_vocab = (torch.unique(torch.cat([rows.ids[rows.off[i] + rows.n_prompt[i]:rows.off[i + 1]] for i in sel]))
                  if m["p_labels"] == "greedy" else None)
    # the target's embedding and lm_head, frozen (FP32, as the CPU recipe trains)
    emb = torch.nn.Embedding.from_pretrained(target.emb.float())
    lm = torch.nn.Linear(target.h, target.emb.shape[0], bias=False, device=dev)
    lm.weight = torch.nn.Parameter(target.head.float(), requires_grad=False)

    def loss_fn(head, batch, _gen):
        top1 = []
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss = answer_loss(head, emb, lm, rows.batch(batch), m, ngen, deep_vocab, top1)
        return loss, top1

    refit = fit_deadline(deadline, max_steps, name) if deadline else None
    rec, times = train_loop(f"train {name}", head, plan, m, loss_fn, gen, steps, every=(1, PROGRESS_EVERY),
                            refit=refit)
    late = times[len(times) // 2:]
    rec.update(planned_steps=steps, seconds_per_step=round((late[-1] - late[0]) / max(len(late) - 1, 1), 4),
               tokens_per_batch=tokens_per_batch, deep_vocab=len(deep_vocab) if deep_vocab is not None else "full")
    return head, rec


def fit_deadline(deadline, max_steps, name):
    """train_loop's refit for a deadline: after REPLAN steps (the first steps load
    kernels and run slow) the step count is fit to the time left, up to max_steps."""
    def refit(step, times, steps):
        if step != REPLAN:
            return steps
        rate = (times[-1] - times[REPLAN // 2]) / (REPLAN - 1 - REPLAN // 2)
        # the plan's rate came from a short timing run and can be far off either way:
        # fit the steps to the time left, up to max_steps (the recipe's epochs)
        fit = max(REPLAN + 1, min(REPLAN + int((deadline - time.time()) / rate), max(steps, max_steps or 0)))
        if fit != steps:
            log(f"train {name}: {fit} steps (planned {steps}) fit the time left ({rate:.3f} s a step)")
        return fit
    return refit


def eval_head(head, target, rows):
    """drafts.eval.eval_eagle on Rows (held-out answers), with the target's embedding
    and lm_head in FP32."""
    return eval_eagle(head, (rows.batch([i]) for i in range(len(rows.len))), lambda ids: target.emb[ids].float(),
                      target.head.float())


def stage_train(args, target, tok, work, st):
    rows = [r for t in (0, 1) for r in load_flat_rows(work / f"answers_t{t}.pt")]
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
        full_steps = steps
        steps = max(50, int(steps * scale))
        if time.time() + steps * tpb * per_token > deadline + 30:
            log(f"{name}: skipped, {steps} steps do not fit the time left")
            continue
        t0 = time.time()
        # a safety net: the steps planned above should already fit
        head, rec = train_head(args, target, t_rows, list(range(n)), steps, tpb, args.seed + 1, name,
                               deadline - 10 * len(plan), full_steps)
        rec.update(answer_tokens=cum[n - 1], rows=n, sequence_tokens=tokens, epochs=round(rec["steps"] * tpb / tokens, 2),
                   seconds=round(time.time() - t0, 1), init_head=args.init_head)
        rec.update(eval_head(head, target, h_rows))
        answers = torch.cat([t_rows.ids[t_rows.off[i] + t_rows.n_prompt[i]:t_rows.off[i + 1]] for i in range(n)])
        # the head in the public layout, and how often each target token is an answer token of its
        # rows (spec-eval --draft-vocab N keeps the N most frequent)
        save_head(work / name, head, head_config(target.cfg))
        save_token_counts(work / name, torch.bincount(answers, minlength=target.cfg["vocab_size"]),
                          "SmolLM2 answer tokens of the rows this head trained on (tools/gpu/smollm2_gpu.py)")
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
            rows = load_flat_rows(p)
            sample += [r for r in rows if r["split"] == "heldout"] + rows[-200:]
    with lzma.open(out / "answers_sample.json.xz", "wt") as f:
        json.dump(sample, f)
    shutil.copy(work / "log.json", out / "log.json")


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
