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


def train_loop(name, model, plan, m, loss_fn, gen, steps=None, ckpt=None, every=(10, 0.0), refit=None):
    """steps (default len(plan)) optimizer steps, step i on the batch plan[i]: AdamW
    over the trainable parameters (betas 0.9/0.95, m's lr and wd), warmup + cosine,
    m's clipping (optimizer_step); running averages of the loss and each unrolled
    step's top-1.  loss_fn(model, batch, gen) gives the loss and the top-1 (a float,
    or one per unrolled step).  ckpt: a resumable checkpoint file, written every 50
    steps and at the end.  every: a progress line every every[0] steps, at most one
    per every[1] seconds.  refit(step, times, steps): the step count from step on (a
    time budget); times holds when each step so far ended.  Returns the record and
    times."""
    steps = steps or len(plan)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=m["lr"],
                            betas=(0.9, 0.95), weight_decay=m.get("wd", 0.0))
    ck = Checkpoint(ckpt, 50) if ckpt else None
    step, _ = ck.load(model, opt, gen) if ck else (0, {})
    pr = Progress(name, steps, every[1])
    ema, times = None, []
    model.train()
    while step < steps:
        steps = pr.total = refit(step, times, steps) if refit else steps
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        loss, acc = loss_fn(model, plan[step], gen)
        optimizer_step(opt, model.parameters(), loss, lr, m.get("clip_value"))
        ema = smooth(ema, loss.item(), [acc] if isinstance(acc, float) else acc)
        step += 1
        if step % every[0] == 0 or step == steps:
            pr.show(step, train_status(ema, lr), force=step == steps)
        if ck:
            ck.save(model, opt, gen, step, force=step == steps)
        times.append(time.time())
    model.eval()
    top1 = [round(a, 4) for a in ema[1]] if ema else None
    return dict(steps=steps, final_loss_ema=round(ema[0], 4) if ema else None,
                final_top1_ema=top1[0] if top1 else None, final_step_top1_ema=top1, **m), times


def train_rows(name, model, rows, m, loss_fn, seed, ckpt):
    """train_loop over m["epochs"] epochs of answer rows (c2ttools.rows' shards) in
    length-sorted batches of about m["tokens_per_batch"] tokens, drawn with a
    generator seeded by seed (also loss_fn's); loss_fn gets pad_batch's tensors."""
    gen = torch.Generator().manual_seed(seed)
    lengths = [len(r["ids"]) for r in rows]
    plan = [b for _ in range(m["epochs"]) for b in length_batches(range(len(rows)), lengths, m["tokens_per_batch"], gen)]
    rec, _ = train_loop(name, model, plan, m, lambda model, b, g: loss_fn(model, pad_batch(rows, b), g), gen, ckpt=ckpt)
    return rec
