"""Progress lines on stderr, shared by every pipeline under tools/.

Contract: log() starts each line with the minutes and seconds since this module was
first imported (T0), so an entry script imports it before its slow work.  Nothing
here writes a file or imports torch."""
import sys
import time

T0 = time.time()


def log(msg):
    """msg on stderr after the time since T0, as [mmm:ss]."""
    el = time.time() - T0
    print(f"[{int(el // 60):3d}:{int(el % 60):02d}] {msg}", file=sys.stderr, flush=True)


def fmt_secs(s):
    """Seconds as 2m03s, or 1h02m03s from an hour on; below 0 counts as 0."""
    s = max(0, int(s))
    return f"{s // 3600}h{(s % 3600) // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """done/total lines of one long loop, with the elapsed time and an ETA.  every:
    at most one line per that many seconds (0: a line at every call) unless show()
    is forced.  t0 is when the loop started."""

    def __init__(self, name, total, every=0.0):
        self.name, self.total, self.every = name, total, every
        self.t0, self.last = time.time(), 0.0

    def show(self, done, extra="", force=False):
        now = time.time()
        if not force and now - self.last < self.every:
            return
        self.last = now
        el = now - self.t0
        eta = el / done * (self.total - done) if done else 0
        log(f"{self.name} {done}/{self.total} {extra} elapsed {fmt_secs(el)} ETA {fmt_secs(eta)}")


def smooth(ema, loss, top1):
    """The running averages (loss, [top-1 of each unrolled step]) of a training loop
    after one more step, 0.9 of the old and 0.1 of the new; None before the first
    step.  A step's top-1 of nan (no label in its batch) leaves that average as it was."""
    if ema is None:
        return loss, top1
    return 0.9 * ema[0] + 0.1 * loss, [e if a != a else 0.9 * e + 0.1 * a for e, a in zip(ema[1], top1)]


def train_status(ema, lr):
    """A training loop's progress text: the averaged loss and top-1s, and the LR."""
    return f"loss {ema[0]:.4f} top1 {'/'.join(f'{a:.3f}' for a in ema[1])} lr {lr:.2e}"
