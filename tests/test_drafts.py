#!/usr/bin/env python3
"""tools/drafts, the draft pipeline's shared steps: a training run on answer rows
interrupted after its checkpoint and resumed ends with the same weights as an
uninterrupted one (the checkpoint holds the generator that draws batches and
noise), and an EAGLE head unrolled one step is its plain forward.  SKIP without
torch (tools/requirements.txt).  PASS/FAIL lines for tests/run.sh."""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
try:
    import torch
except ImportError:
    print("SKIP test_drafts_resume_same_weights: no torch")
    print("SKIP test_drafts_unroll_one_step_is_forward: no torch")
    sys.exit(0)
from drafts.heads import EagleHead  # noqa: E402
from drafts.train import train_rows  # noqa: E402


class Interrupt(Exception):
    pass


def train(rows, ckpt, stop_at=None):
    """train_rows on a small linear map with input noise from the run's generator;
    stop_at: raise Interrupt at that loss call (a killed run)."""
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 8)
    calls = [0]

    def loss_fn(model, batch, gen):
        calls[0] += 1
        if calls[0] == stop_at:
            raise Interrupt
        _ids, feat, _answer = batch
        return ((model(feat + torch.rand(feat.shape, generator=gen)) - feat) ** 2).mean(), 0.5

    m = dict(epochs=6, tokens_per_batch=120, lr=1e-2, warmup=5)
    try:
        rec = train_rows("test", model, rows, m, loss_fn, 7, ckpt)
    except Interrupt:
        return None, None
    return model.state_dict(), rec


def check(name, ok, why):
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)))


def main():
    torch.manual_seed(0)
    rows = [dict(ids=torch.randint(0, 50, (n,), dtype=torch.int32), feat=torch.randn(n, 8).to(torch.bfloat16),
                 n_prompt=2) for n in torch.randint(5, 30, (200,)).tolist()]
    old_stderr = sys.stderr
    sys.stderr = open(os.devnull, "w")   # the runs' progress lines
    try:
        with tempfile.TemporaryDirectory() as tmp:   # the checkpoints, removed after
            d = Path(tmp)
            whole, rec = train(rows, d / "whole.pt")
            train(rows, d / "cut.pt", stop_at=56)   # the checkpoint of step 50 is on disk
            resumed, _ = train(rows, d / "cut.pt")
    finally:
        sys.stderr.close()
        sys.stderr = old_stderr
    same = all(torch.equal(whole[k], resumed[k]) for k in whole)
    check("test_drafts_resume_same_weights", rec["steps"] > 56 and same,
          "%d steps; weights %s" % (rec["steps"], "equal" if same else "differ"))
    c = dict(hidden_size=16, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
             rms_norm_eps=1e-5)
    head = EagleHead(c).eval()
    feat, emb = torch.randn(2, 9, 16), torch.randn(2, 9, 16)
    with torch.no_grad():
        one, plain = head.unroll(feat, emb, 1)[0], head(feat, emb)
    err = (one - plain).abs().max().item()
    check("test_drafts_unroll_one_step_is_forward", err < 1e-5, "max difference %g" % err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
