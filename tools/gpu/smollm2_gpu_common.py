"""smollm2_gpu.py's shared pieces: its constants, where the held-out answer rows
are, the run's log.  The chat template, progress lines, answer-row files, the
head's recipe and JSON files are tools/c2ttools'; the EAGLE head, its loss and the
LR schedule come from tools/drafts."""
import json

from c2ttools.files import write_json
from c2ttools.prompts import IM_END
from c2ttools.rows import SPLITS, answer_stats, load_flat_rows


SELF_GPU_FIRST_ID = 200000   # question ids of prompts_gpu.jsonl: apart from train/self's
REPLAN = 40   # train_head measures its step time over steps REPLAN/2..REPLAN
PROGRESS_EVERY = 10   # seconds between two progress lines of one loop


def split_stats(rows):
    """The figures of rows (one turn's answers) per split: c2ttools.rows.answer_stats."""
    stats = {}
    for split in SPLITS:
        answers = [r["answer"] for r in rows if r["split"] == split]
        stats[split] = answer_stats([len(a) for a in answers], [a[-1:] == [IM_END] for a in answers])
    return stats


def sample_rows(work):
    """The held-out rows of the answers: answers_t*.pt where the run was here, else
    the answers_sample.json.xz a GPU run brought back."""
    import lzma
    if (work / "answers_t0.pt").exists():
        return [r for t in (0, 1) for r in load_flat_rows(work / f"answers_t{t}.pt") if r["split"] == "heldout"]
    with lzma.open(work / "answers_sample.json.xz", "rt") as f:
        return [r for r in json.load(f) if r["split"] == "heldout"]


def save_state(work, st):
    write_json(work / "log.json", st)
