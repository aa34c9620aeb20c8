"""The held-out figures every draft pipeline reports (tools/drafts/__init__.py):
a language model's perplexity, an EAGLE head's agreement with the target's greedy
token at depths 1..EVAL_STEPS, and calibration (is a head's confidence an
acceptance rate?)."""
import math

import torch
import torch.nn.functional as F

from c2ttools.heads import EVAL_STEPS


@torch.no_grad()
def perplexity(model, windows, bs=8):
    """exp(mean next-token NLL) of a transformers LM over token windows, and the count."""
    nll, n = 0.0, 0
    for i in range(0, len(windows), bs):
        x = torch.stack(windows[i:i + bs])
        logits = model(input_ids=x).logits.float()
        nll += F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum").item()
        n += x[:, 1:].numel()
    return math.exp(nll / n), n


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
def eval_eagle(head, batches, embed, W, cal=None):
    """An EAGLE head on held-out greedy answers, batches of (ids, feat, answer) as
    drafts.train.pad_batch gives them: one draft step at every answer position (target
    features of the prefix), then the head on its own predictions: step k's top-1
    given the k-1 tokens before it were the target's (accepted), i.e. depth k's
    acceptance along a chain; step 1's top-1 and top-3.  embed(ids): the target's
    embedding (FP32); W: its lm_head weight; cal (a Calibration) gets step 1's logits."""
    e1 = e3 = n = 0
    deep, deep_n = [0] * EVAL_STEPS, [0] * EVAL_STEPS
    for ids, feat, answer in batches:
        preds = head.unroll(feat[:, :-1], embed(ids[:, 1:]), EVAL_STEPS)
        keep = answer[:, 2:]
        z = F.linear(preds[0][:, :-1][keep], W)
        want = ids[:, 2:][keep]
        e1 += (z.argmax(-1) == want).sum().item()
        e3 += (z.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        if cal is not None:
            cal.add(z, want)
        for k, pred in enumerate(preds):
            kk = keep.clone()
            kk[:, :k] = False
            deep[k] += (F.linear(pred[:, :-1][kk], W).argmax(-1) == ids[:, 2:][kk]).sum().item()
            deep_n[k] += kk.sum().item()
        n += want.numel()
    return dict(heldout_answer_positions=n, eagle_top1=round(e1 / max(n, 1), 4), eagle_top3=round(e3 / max(n, 1), 4),
                eagle_step_top1=[round(a / max(b, 1), 4) for a, b in zip(deep, deep_n)])


def calibration_table(cal):
    """Calibration.result() cal as a markdown table, one row per bin of q."""
    return "\n".join(["| q bin | candidates | mean q | accepted |", "|---|---|---|---|"] +
                     [f"| {b['lo']:.2f}-{b['hi']:.2f} | {b['count']:,} | {b['mean_q']:.3f} | {b['accepted']:.3f} |"
                      for b in cal["bins"]])
