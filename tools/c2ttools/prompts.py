"""SmolLM2's chat template and the bookkeeping of question.jsonl prompt sets that
both SmolLM2 pipelines share (tools/models/smollm2_drafts*.py, tools/gpu/smollm2_gpu*.py).
The prompts' text itself comes from tools/models/smollm2_prompts.py.

A question is a dict with question_id, category and turns (user texts); a job is
(split, question); q_key(split, question_id) names a question's answers across
turns and files."""
from collections import Counter

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
IM_END = 2                 # token id of <|im_end|>: the end of a turn, also the padding
IM_END_TEXT = "<|im_end|>"


def chatml(turns, answers):
    """SmolLM2's template (the default system prompt) up to the assistant header of
    the last user turn; answers holds the assistant replies of the earlier turns."""
    s = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
    for i, t in enumerate(turns):
        s += f"<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n"
        if i < len(answers):
            s += answers[i] + "<|im_end|>\n"
    return s


def reply_text(decoded):
    """An answer's decoded text without the <|im_end|> that ended it."""
    return decoded.removesuffix(IM_END_TEXT)


def q_key(split, question_id):
    return f"{split}/{question_id}"


def turn_prompts(jobs, turn, first):
    """The jobs that have a turn number `turn` (0: the first) and, past the first,
    whose first turn was answered (first: q_key -> the first reply's text), with
    each one's prompt text: the chat template up to that turn's assistant header,
    the first reply in place.  Returns (jobs, texts)."""
    todo = [(s, q) for s, q in jobs
            if len(q["turns"]) > turn and (turn == 0 or q_key(s, q["question_id"]) in first)]
    texts = [chatml(q["turns"][:turn + 1], [first[q_key(s, q["question_id"])]] if turn else []) for s, q in todo]
    return todo, texts


def unique(items, key=str.lower):
    """items without the repeats, first occurrence kept; key(item) is what repeats
    (by default the text, case-insensitively)."""
    out, seen = [], set()
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def category_counts(questions):
    """{category: number of questions}, in order of first appearance."""
    return dict(Counter(q["category"] for q in questions))


def second_turns(questions):
    """How many of the questions have a second turn."""
    return sum(len(q["turns"]) > 1 for q in questions)
