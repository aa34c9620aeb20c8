"""smollm2_gpu.py's shared pieces: the recipe's constants, progress lines, the
answer rows as files (answers_t*.pt) and their statistics, the run's log.
Also puts tools/models on the path: the chat template (smollm2_drafts_common),
the EAGLE head, its loss and the LR schedule (train_demo_*) come from there."""
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
from smollm2_drafts_common import IM_END, chatml, read_jsonl  # noqa: E402,F401  (the template spec-eval applies)
from train_demo_common import fmt_secs, log, lr_at  # noqa: E402,F401


SELF_GPU_FIRST_ID = 200000   # question ids of prompts_gpu.jsonl: apart from train/self's
# the head's recipe: tools/models/smollm2_drafts.py EAGLE (noise, weights, greedy labels, value
# clipping, 3 unrolled steps); batch and step count per point below
RECIPE = dict(lr=1e-3, warmup=50, noise=0.2, v_w=1.0, p_w=1.0, p_labels="greedy", clip_value=0.5, unroll=3)
EVAL_STEPS = 4
REPLAN = 40   # train_head measures its step time over steps REPLAN/2..REPLAN


class Progress:
    def __init__(self, name, total):
        self.name, self.total, self.t0, self.last = name, total, time.time(), 0.0

    def show(self, done, extra="", force=False):
        now = time.time()
        if not force and now - self.last < 10:
            return
        self.last = now
        el = now - self.t0
        eta = el / done * (self.total - done) if done else 0
        log(f"{self.name} {done}/{self.total} {extra} elapsed {fmt_secs(el)} ETA {fmt_secs(eta)}")


def save_rows(rows, path):
    """Rows as flat int32 tensors and offsets: quick to write and to read back."""
    flat = {}
    for f in ("prompt", "answer"):
        flat[f] = torch.tensor([i for r in rows for i in r[f]], dtype=torch.int32)
        flat[f + "_len"] = torch.tensor([len(r[f]) for r in rows], dtype=torch.int64)
    flat["qid"] = torch.tensor([r["qid"] for r in rows], dtype=torch.int64)
    flat["heldout"] = torch.tensor([r["split"] == "heldout" for r in rows])
    flat["turn"] = torch.tensor([r["turn"] for r in rows], dtype=torch.int64)
    torch.save(flat, path)


def load_rows(path):
    flat = torch.load(path)
    cut = {f: torch.split(flat[f], flat[f + "_len"].tolist()) for f in ("prompt", "answer")}
    return [dict(split="heldout" if h else "train", qid=q, turn=t, prompt=p.tolist(), answer=a.tolist())
            for h, q, t, p, a in zip(flat["heldout"].tolist(), flat["qid"].tolist(), flat["turn"].tolist(),
                                     cut["prompt"], cut["answer"])]


def key(s, q):
    return f"{s}/{q['question_id']}"


def answer_stats(rows):
    s = {}
    for split in ("train", "heldout"):
        a = [len(r["answer"]) for r in rows if r["split"] == split]
        s[split] = dict(sequences=len(a), answer_tokens=sum(a), finished=sum(r["answer"][-1:] == [IM_END]
                                                                             for r in rows if r["split"] == split),
                        longest_answer=max(a, default=0))
    return s


def sample_rows(work):
    """The held-out rows of the answers: answers_t*.pt where the run was here, else
    the answers_sample.json.xz a GPU run brought back."""
    import lzma
    if (work / "answers_t0.pt").exists():
        return [r for t in (0, 1) for r in load_rows(work / f"answers_t{t}.pt") if r["split"] == "heldout"]
    with lzma.open(work / "answers_sample.json.xz", "rt") as f:
        return [r for r in json.load(f) if r["split"] == "heldout"]


def save_state(work, st):
    with open(work / "log.json", "w") as f:
        json.dump(st, f, indent=1)
        f.write("\n")
