"""smollm2_gpu.py's data: the target's own prompts (stage selfask) and its greedy
answers to every prompt (stage answers)."""
import random
from pathlib import Path

import smollm2_prompts
from c2ttools.files import read_jsonl, write_jsonl
from c2ttools.progress import log
from c2ttools.prompts import (category_counts, chatml, q_key, reply_text, second_turns, turn_prompts,
                              unique)
from c2ttools.rows import load_flat_rows, save_flat_rows
from smollm2_gpu_common import SELF_GPU_FIRST_ID, split_stats
from smollm2_gpu_target import run_greedy


def reply(tok, ids):
    """The text of an answer's ids (special tokens kept) without its <|im_end|>."""
    return reply_text(tok.decode(ids, skip_special_tokens=False))


def stage_selfask(args, target, tok, work, st):
    path = work / "prompts_gpu.jsonl"
    if path.exists():
        log(f"selfask: keeping {path}")
        return
    ref = Path(args.prompts) / "gpu.jsonl.xz"
    if ref.exists() and not args.new_prompts:   # the committed reference (the run that wrote it: its log)
        import lzma
        with lzma.open(ref, "rb") as f:
            path.write_bytes(f.read())
        log(f"selfask: the reference {ref} ({sum(1 for _ in open(path))} prompts; --new-prompts writes new ones)")
        return
    rng = random.Random(args.seed + 11)
    subjects = smollm2_prompts.SUBJECTS[:args.subjects] if args.subjects else smollm2_prompts.SUBJECTS
    reqs = [a.format(s=s) for s in subjects for a in smollm2_prompts.TOPIC_ASKS]
    got, _ = run_greedy(target, tok, [chatml([r], []) for r in reqs], 160, args.batch_tokens, "selfask topics")
    topics = unique(t for i in range(len(reqs)) for t in smollm2_prompts.parse_list(reply(tok, got[i])))
    n_topics = len(topics)
    # subtopics: the same list request about each topic found
    sreqs = [smollm2_prompts.SUBTOPIC_ASK.format(t=t) for t in topics]
    got, _ = run_greedy(target, tok, [chatml([r], []) for r in sreqs], 160, args.batch_tokens, "selfask subtopics")
    topics = unique(topics + [t for i in range(len(sreqs)) for t in smollm2_prompts.parse_list(reply(tok, got[i]))])
    log(f"selfask: {n_topics} topics, {len(topics)} with the subtopics")
    # every question request about every topic (the CPU stage asks one per topic)
    qreq = [(c, a.format(t=t)) for t in topics for c, a in smollm2_prompts.QUESTION_ASKS]
    got, _ = run_greedy(target, tok, [chatml([r], []) for _, r in qreq], 60, args.batch_tokens, "selfask questions")
    questions = [(c, q) for i, (c, r) in enumerate(qreq)
                 if (q := smollm2_prompts.parse_question(reply(tok, got[i])))]
    qs = unique(questions, key=lambda cq: cq[1].lower())
    prompts = smollm2_prompts.self_prompts(topics, qs, args.gpu_prompts, rng, SELF_GPU_FIRST_ID,
                                           second_turns=args.second_turns)
    write_jsonl(path, prompts)
    st["selfask"] = dict(subjects=len(subjects), topic_requests=len(reqs), topics=n_topics,
                         topics_with_subtopics=len(topics), question_requests=len(qreq), questions=len(qs),
                         prompts=len(prompts), second_turns=second_turns(prompts),
                         categories=category_counts(prompts))
    log(f"selfask: {st['selfask']}")


def prompt_jobs(args, work):
    """(split, question) of every prompt answered: held-out first, then the training
    prompts (ours, self.jsonl, prompts_gpu.jsonl) in a seeded order."""
    pdir = Path(args.prompts)
    held = [("heldout", q) for q in read_jsonl(pdir / "heldout.jsonl")]
    train = [q for f in ("train.jsonl", "self.jsonl") for q in read_jsonl(pdir / f)]
    if (work / "prompts_gpu.jsonl").exists():
        train += read_jsonl(work / "prompts_gpu.jsonl")
    random.Random(args.seed + 13).shuffle(train)
    if args.limit:
        held, train = held[:args.limit], train[:args.limit]
    return held + [("train", q) for q in train]


def stage_answers(args, target, tok, work, st):
    jobs = prompt_jobs(args, work)
    deadline = st["t_start"] + args.gen_seconds
    first = {}
    for turn in (0, 1):
        path = work / f"answers_t{turn}.pt"
        if path.exists():
            rows = load_flat_rows(path)
        else:
            todo, texts = turn_prompts(jobs, turn, first)
            got, enc = run_greedy(target, tok, texts, args.max_new, args.batch_tokens, f"answers turn {turn + 1}",
                                  deadline)
            rows = [dict(split=s, qid=q["question_id"], turn=turn, prompt=enc[i], answer=got[i])
                    for i, (s, q) in enumerate(todo) if i in got]
            save_flat_rows(rows, path)
        if turn == 0:
            first = {q_key(r["split"], r["qid"]): reply(tok, r["answer"]) for r in rows}
        st.setdefault("answers", {})[f"turn{turn + 1}"] = split_stats(rows)
    log(f"answers: {st['answers']}")
