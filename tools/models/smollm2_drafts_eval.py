"""smollm2_drafts.py's held-out figures: the EAGLE head's agreement per depth
and calibration, the draft LM's agreement, the EAGLE-3 head's where it was
trained (stage eval)."""
import torch
import torch.nn.functional as F

from c2ttools.heads import EVAL_STEPS
from c2ttools.progress import log
from c2ttools.rows import load_shards
from smollm2_drafts_common import ANSWERS, load_target
from smollm2_drafts_eagle3 import E3_DIR, eval_eagle3, load_rows3
from smollm2_drafts_train import pad_batch
from train_demo_eagle import load_eagle
from train_demo_eval import Calibration


@torch.no_grad()
def eval_eagle(head, target, rows, cal=None):
    """An EAGLE head on the held-out answers: one draft step at every answer position
    (target features of the prefix), then the head on its own predictions: step k's
    top-1 given the k-1 tokens before it were the target's (accepted), i.e. depth k's
    acceptance along a chain; step 1's top-1 and top-3; cal (a Calibration) gets
    step 1's logits."""
    W = target.lm_head.weight
    e1 = e3 = n = 0
    deep, deep_n = [0] * EVAL_STEPS, [0] * EVAL_STEPS
    for r in rows:
        ids, feat, answer = pad_batch([r], [0])
        preds = head.unroll(feat[:, :-1], target.model.embed_tokens(ids[:, 1:]), EVAL_STEPS)
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
    return dict(heldout_answer_positions=n, eagle_top1=round(e1 / n, 4), eagle_top3=round(e3 / n, 4),
                eagle_step_top1=[round(a / max(b, 1), 4) for a, b in zip(deep, deep_n)])


@torch.no_grad()
def stage_eval(args, out, st):
    from transformers import LlamaForCausalLM
    target, _ = load_target()
    rows = load_shards(ANSWERS, "heldout")
    cal = Calibration(10)
    ev = eval_eagle(load_eagle(out / "eagle"), target, rows, cal)
    # draft LM: next-token agreement at the same positions
    draft = LlamaForCausalLM.from_pretrained(str(out / "draft"), torch_dtype=torch.float32).eval()
    d1 = d3 = n = 0
    for r in rows:
        ids, _, answer = pad_batch([r], [0])
        keep = answer[:, 2:]
        want = ids[:, 2:][keep]
        zd = draft(input_ids=ids).logits[:, 1:-1][keep]
        d1 += (zd.argmax(-1) == want).sum().item()
        d3 += (zd.topk(3, -1).indices == want[:, None]).any(-1).sum().item()
        n += want.numel()
    st["eval"] = dict(heldout_sequences=len(rows), **ev, draft_top1=round(d1 / n, 4), draft_top3=round(d3 / n, 4),
                      eagle_calibration=cal.result())
    if (E3_DIR / "config.json").exists():
        st["eval"].update(eval_eagle3(target, load_rows3("heldout")))
    log(f"eval: {st['eval']}")
