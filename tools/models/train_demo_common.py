"""train_demo.py's shared pieces: the settings (every size and step count), the
learning-rate schedule, the per-stage time cap and malloc tuning.  No torch here:
train_demo.py imports this module first, so that it sets OMP_WAIT_POLICY before
any torch (libgomp) loads.  Progress lines are c2ttools.progress'."""
import math
import os
import time

from c2ttools.progress import log

# The C build/tests share these 2 cores: with the default (spinning) OpenMP wait
# policy a 2-thread torch process slows down ~6x as soon as another process is
# runnable; sleeping waiters cost little when the machine is idle. Must be set
# before torch (libgomp) loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, total - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


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
