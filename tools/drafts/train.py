"""The training steps every draft pipeline shares (tools/drafts/__init__.py): the
LR schedule, the per-stage time cap, one optimizer step, resumable checkpoints,
batches of answer rows and the epoch loop over them; malloc tuning."""
import math
import os
import time
from pathlib import Path

import torch

from c2ttools.progress import Progress, log, smooth, train_status
from c2ttools.prompts import IM_END
from c2ttools.rows import length_batches


def lr_at(step, total, peak, warmup, floor=0.1):
    """Linear warmup over `warmup` steps, then cosine decay to floor * peak at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def optimizer_step(opt, params, loss, lr, clip_value=None):
    """One optimizer step on loss at learning rate lr; gradients clipped elementwise
    to clip_value (EAGLE's recipe) when given, else to norm 1."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip_value:
        torch.nn.utils.clip_grad_value_(params, clip_value)
    else:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()


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


class Checkpoint:
    """Resumable training: model, optimizer, step and RNG state (and what more the
    caller keeps) in one file, written atomically every `every` steps and at the end."""

    def __init__(self, path, every):
        self.path, self.every = Path(path), every

    def load(self, model, opt, gen):
        """The saved step (0 without a file) and the caller's extra entries."""
        if not self.path.exists():
            return 0, {}
        c = torch.load(self.path, weights_only=False)
        model.load_state_dict(c.pop("model"))
        opt.load_state_dict(c.pop("opt"))
        gen.set_state(c.pop("gen"))
        log(f"resuming {self.path} at step {c['step']}")
        return c.pop("step"), c

    def save(self, model, opt, gen, step, force=False, **more):
        if force or step % self.every == 0:
            tmp = self.path.with_suffix(".tmp")
            torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), gen=gen.get_state(), step=step, **more),
                       tmp)
            os.replace(tmp, self.path)


def pad_batch(rows, sel):
    """ids [B, T] (long), feat [B, T, h] FP32, answer [B, T] bool of the answer rows
    sel (c2ttools.rows' shards): position t holds an answer token (the prompt and the
    padding do not)."""
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


def train_loop(name, model, rows, m, loss_fn, seed, ckpt):
    """Epochs over answer rows in length-sorted batches of m["tokens_per_batch"]
    tokens: AdamW, warmup + cosine, one progress line every 10 steps, a checkpoint
    (resumable) at ckpt every 50 steps.  loss_fn(model, pad_batch(...), gen) returns
    the loss and the top-1 of each unrolled step."""
    gen = torch.Generator().manual_seed(seed)
    lengths = [len(r["ids"]) for r in rows]
    epochs = [length_batches(range(len(rows)), lengths, m["tokens_per_batch"], gen) for _ in range(m["epochs"])]
    plan = [b for e in epochs for b in e]
    steps = len(plan)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=m["lr"],
                            betas=(0.9, 0.95), weight_decay=m.get("wd", 0.0))
    ck = Checkpoint(ckpt, 50)
    start, _ = ck.load(model, opt, gen)
    pr = Progress(name, steps)
    ema = None
    model.train()
    for step in range(start, steps):
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        loss, acc = loss_fn(model, pad_batch(rows, plan[step]), gen)
        optimizer_step(opt, model.parameters(), loss, lr, m.get("clip_value"))
        acc = [acc] if isinstance(acc, float) else acc   # one top-1 per unrolled step
        ema = smooth(ema, loss.item(), acc)
        if (step + 1) % 10 == 0 or step + 1 == steps:
            pr.show(step + 1, train_status(ema, lr))
        ck.save(model, opt, gen, step + 1, force=step + 1 == steps)
    model.eval()
    top1 = [round(a, 4) for a in ema[1]] if ema else None
    return dict(steps=steps, final_loss_ema=round(ema[0], 4) if ema else None,
                final_top1_ema=top1[0] if top1 else None, final_step_top1_ema=top1, **m)
