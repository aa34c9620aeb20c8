"""The SmolLM2 pipelines' answer rows on disk, their statistics, and batches of
rows of similar length.  A row is one turn of one question: its split ("train" or
"heldout"), qid (question_id), turn, and the target's greedy answer.  Two formats:

  shards  tools/models/smollm2_drafts.py: <answers>/t<turn>_<nnnn>.pt, each a torch
          list of rows with ids (int32, prompt + answer, cut to the positions that
          have a feature), feat ([len(ids), hidden] BF16), n_prompt, finished and
          answer (the answer's ids in full)
  flat    tools/gpu/smollm2_gpu.py: answers_t<turn>.pt, one file per turn of flat
          tensors (save_flat_rows); rows with prompt and answer as id lists"""
import torch

SPLITS = ("train", "heldout")


def load_shards(answers, split):
    """The rows of one split from every shard in the directory answers, in shard order."""
    rows = []
    for p in sorted(answers.glob("t*_*.pt")):
        rows += [r for r in torch.load(p) if r["split"] == split]
    return rows


def save_flat_rows(rows, path):
    """Rows as flat int32 tensors and offsets: quick to write and to read back."""
    flat = {}
    for f in ("prompt", "answer"):
        flat[f] = torch.tensor([i for r in rows for i in r[f]], dtype=torch.int32)
        flat[f + "_len"] = torch.tensor([len(r[f]) for r in rows], dtype=torch.int64)
    flat["qid"] = torch.tensor([r["qid"] for r in rows], dtype=torch.int64)
    flat["heldout"] = torch.tensor([r["split"] == "heldout" for r in rows])
    flat["turn"] = torch.tensor([r["turn"] for r in rows], dtype=torch.int64)
    torch.save(flat, path)


def load_flat_rows(path):
    flat = torch.load(path)
    cut = {f: torch.split(flat[f], flat[f + "_len"].tolist()) for f in ("prompt", "answer")}
    return [dict(split="heldout" if h else "train", qid=q, turn=t, prompt=p.tolist(), answer=a.tolist())
            for h, q, t, p, a in zip(flat["heldout"].tolist(), flat["qid"].tolist(), flat["turn"].tolist(),
                                     cut["prompt"], cut["answer"])]


def answer_stats(answer_lens, finished, total_lens=None, turns=None):
    """One split's answers in figures: sequences, answer_tokens, finished (how many
    ended with <|im_end|>), longest_answer; with total_lens (prompt + answer tokens of
    each row) also tokens, with turns (each row's turn) also second_turns.  The keys
    come in that order: tokens after sequences, second_turns last."""
    s = dict(sequences=len(answer_lens))
    if total_lens is not None:
        s["tokens"] = int(sum(total_lens))
    s.update(answer_tokens=int(sum(answer_lens)), finished=sum(finished), longest_answer=max(answer_lens, default=0))
    if turns is not None:
        s["second_turns"] = sum(t == 1 for t in turns)
    return s


def length_batches(indices, lengths, tokens_per_batch, gen=None):
    """indices in batches of similar length (lengths[i]), each closed once its size
    times its longest length reaches tokens_per_batch; shortest first, or in a random
    order drawn from the torch generator gen."""
    batches, cur = [], []
    for i in sorted(indices, key=lambda i: lengths[i]):
        cur.append(i)
        if len(cur) * lengths[i] >= tokens_per_batch:
            batches.append(cur)
            cur = []
    if cur:
        batches.append(cur)
    if gen is None:
        return batches
    return [batches[p] for p in torch.randperm(len(batches), generator=gen).tolist()]
