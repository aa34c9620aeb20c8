"""smollm2_drafts.py's shared pieces: paths, SmolLM2's chat template, the
target loader, progress lines, the answer rows (models/smollm2-work/answers)
and their statistics, the stage names."""
import json
import time
from pathlib import Path

import torch

from train_demo_common import fmt_secs, log


TARGET = Path("models/smollm2-135m-instruct")
WORK = Path("models/smollm2-work")
ANSWERS = WORK / "answers"
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
IM_END = 2
VOCAB = 49152     # SmolLM2 (config vocab_size)
SPLITS = ("train", "heldout")
SELF_FIRST_ID = 100000   # question ids of prompts/self.jsonl: apart from train.jsonl's

# every stage, in the order a run takes them (smollm2_drafts.py maps them to functions)
STAGE_NAMES = ["prompts", "selfask", "answers", "counts", "eagle", "features3", "eagle3", "draft", "eval",
               "readme", "recipes"]
# what a rerun builds by default: the shipped drafts (the EAGLE-3 head is not shipped, the
# recipe comparison is an experiment)
DEFAULT_STAGES = [s for s in STAGE_NAMES if s not in ("features3", "eagle3", "recipes")]
EVAL_STEPS = 4   # held-out agreement of the head's first EVAL_STEPS unrolled steps


def chatml(turns, answers):
    """SmolLM2's template (the default system prompt) up to the assistant header of
    the last user turn; answers holds the assistant replies of the earlier turns."""
    s = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    for i, t in enumerate(turns):
        s += f"<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n"
        if i < len(answers):
            s += answers[i] + "<|im_end|>\n"
    return s


def load_target():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    m = AutoModelForCausalLM.from_pretrained(str(TARGET), torch_dtype=torch.float32).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m, AutoTokenizer.from_pretrained(str(TARGET))


class Progress:
    def __init__(self, name, total):
        self.name, self.total, self.t0 = name, total, time.time()

    def show(self, done, extra=""):
        el = time.time() - self.t0
        eta = el / done * (self.total - done) if done else 0
        log(f"{self.name} {done}/{self.total} {extra} elapsed {fmt_secs(el)} ETA {fmt_secs(eta)}")


def read_jsonl(p):
    with open(p, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def q_key(split, q):
    return f"{split}/{q['question_id']}"


def load_rows(split):
    rows = []
    for p in sorted((ANSWERS).glob("t*_*.pt")):
        rows += [r for r in torch.load(p) if r["split"] == split]
    return rows


def answer_stats(wdir):
    s = {}
    for split in SPLITS:
        rows = load_rows(split)
        ans = [len(r["ids"]) - r["n_prompt"] for r in rows]
        s[split] = dict(sequences=len(rows), tokens=int(sum(len(r["ids"]) for r in rows)),
                        answer_tokens=int(sum(ans)), finished=sum(r["finished"] for r in rows),
                        longest_answer=max(ans, default=0), second_turns=sum(r["turn"] == 1 for r in rows))
    return s


def answer_counts(rows):
    """I64 [VOCAB]: how often each target token is an answer token of rows."""
    counts = torch.zeros(VOCAB, dtype=torch.int64)
    for r in rows:
        counts += torch.bincount(r["ids"][r["n_prompt"]:].long(), minlength=VOCAB)
    return counts
