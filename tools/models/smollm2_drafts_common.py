"""smollm2_drafts.py's shared pieces: paths, the target loader, the answer shards'
statistics and token counts, the stage names.  The chat template, progress lines,
the answer rows' files and the JSON files are tools/c2ttools'."""
from pathlib import Path

import torch

from c2ttools.rows import SPLITS, answer_stats, load_shards


TARGET = Path("models/smollm2-135m-instruct")
WORK = Path("models/smollm2-work")
ANSWERS = WORK / "answers"   # the answer shards (c2ttools.rows)
VOCAB = 49152     # SmolLM2 (config vocab_size)
SELF_FIRST_ID = 100000   # question ids of prompts/self.jsonl: apart from train.jsonl's

# every stage, in the order a run takes them (smollm2_drafts.py maps them to functions)
STAGE_NAMES = ["prompts", "selfask", "answers", "counts", "eagle", "features3", "eagle3", "draft", "eval",
               "readme", "recipes"]
# what a rerun builds by default: the shipped drafts (the EAGLE-3 head is not shipped, the
# recipe comparison is an experiment)
DEFAULT_STAGES = [s for s in STAGE_NAMES if s not in ("features3", "eagle3", "recipes")]


def load_target():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    m = AutoModelForCausalLM.from_pretrained(str(TARGET), torch_dtype=torch.float32).eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m, AutoTokenizer.from_pretrained(str(TARGET))


def shard_stats():
    """The answer shards' figures per split (c2ttools.rows.answer_stats with tokens and
    second turns)."""
    stats = {}
    for split in SPLITS:
        rows = load_shards(ANSWERS, split)
        stats[split] = answer_stats([len(r["ids"]) - r["n_prompt"] for r in rows], [r["finished"] for r in rows],
                                    total_lens=[len(r["ids"]) for r in rows], turns=[r["turn"] for r in rows])
    return stats


def answer_counts(rows):
    """I64 [VOCAB]: how often each target token is an answer token of rows."""
    counts = torch.zeros(VOCAB, dtype=torch.int64)
    for r in rows:
        counts += torch.bincount(r["ids"][r["n_prompt"]:].long(), minlength=VOCAB)
    return counts
