"""smollm2_drafts.py's held-out figures: the EAGLE head's agreement per depth
and calibration (tools/drafts/eval.py's), the draft LM's agreement, the EAGLE-3
head's where it was trained (stage eval)."""
import torch

from c2ttools.progress import log
from c2ttools.rows import load_shards
from drafts.eval import Calibration, eval_eagle
from drafts.heads import load_eagle
from drafts.train import pad_batch
from smollm2_drafts_common import ANSWERS, load_target
from smollm2_drafts_eagle3 import E3_DIR, eval_eagle3, load_rows3


def held_eagle(head, target, rows, cal=None):
    """drafts.eval.eval_eagle on answer rows (c2ttools.rows' shards) with the target's
    embedding and lm_head."""
    return eval_eagle(head, (pad_batch([r], [0]) for r in rows), target.model.embed_tokens, target.lm_head.weight,
                      cal)


@torch.no_grad()
def stage_eval(args, out, st):
    from transformers import LlamaForCausalLM
    target, _ = load_target()
    rows = load_shards(ANSWERS, "heldout")
    cal = Calibration(10)
    ev = held_eagle(load_eagle(out / "eagle"), target, rows, cal)
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
