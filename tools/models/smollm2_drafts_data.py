"""smollm2_drafts.py's data: the prompt sets (stages prompts, selfask) and the
target's greedy answers with their features from llama.cpp (stage answers)."""
import json
import subprocess
from pathlib import Path

import torch

import smollm2_prompts
from c2ttools.files import read_jsonl, write_jsonl
from c2ttools.llamacpp import greedy_bin
from c2ttools.progress import log
from c2ttools.prompts import category_counts, chatml, q_key, reply_text, second_turns, turn_prompts, unique
from c2ttools.rows import load_shards
from smollm2_drafts_common import ANSWERS, SELF_FIRST_ID, TARGET, WORK, load_target, shard_stats


def stage_prompts(args, out, st):
    """The prompt files are the reference, not this stage: the generator reads this
    machine's apt lists and Python docs, so another machine (or the same one after an
    upgrade) builds other prompts from the same seed. Existing files are kept unless
    --new-prompts is given."""
    have = [out / "prompts" / f"{k}.jsonl" for k in ("train", "collect", "heldout")]
    if any(p.exists() for p in have) and not args.new_prompts:
        log(f"prompts: keeping {out / 'prompts'} (the committed reference; --new-prompts builds new ones)")
        return
    n = args.train_prompts + args.collect_prompts + args.heldout_prompts
    qs = smollm2_prompts.make_prompts(n, args.seed)
    parts = {"train": qs[:args.train_prompts],
             "collect": qs[args.train_prompts:args.train_prompts + args.collect_prompts],
             "heldout": qs[args.train_prompts + args.collect_prompts:]}
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    for k, v in parts.items():
        write_jsonl(out / "prompts" / f"{k}.jsonl", v)
    st["prompts"] = {k: dict(n=len(v), categories=category_counts(v), second_turns=second_turns(v))
                     for k, v in parts.items()}
    log(f"prompts: {st['prompts']}")


def run_greedy(name, requests, args, max_new):
    """The target's greedy answers (text) to requests, each a first turn with the chat
    template: llama_greedy into WORK/<name>.out under keys made from the request's
    text, so a rerun (or a changed request list) answers only what it has not."""
    import hashlib
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(TARGET))
    key = {r: hashlib.sha1(r.encode()).hexdigest()[:16] for r in requests}
    prompts = {k: tok(chatml([r], []), add_special_tokens=False).input_ids for r, k in key.items()}
    log(f"{name}: {len(key)} requests, llama.cpp, {args.gen_batch} sequences at a time")
    outp = greedy_answers(name, prompts, args, max_new)
    got = {}
    with open(outp) as f:
        for line in f:
            k, _fin, _nf, _off, _n, *ans = line.split()
            got[k] = reply_text(tok.decode([int(a) for a in ans]))
    return {r: got.get(k, "") for r, k in key.items()}


def stage_selfask(args, out, st):
    """Prompts the target writes itself (tools/models/smollm2_prompts.py, "self-written
    prompts"): topics within broad subjects, then questions about them, then
    prompts/self.jsonl. Kept when it exists unless --new-prompts is given."""
    path = out / "prompts" / "self.jsonl"
    if not args.self_prompts:
        return
    if path.exists() and not args.new_prompts:
        log(f"selfask: keeping {path} (--new-prompts writes new ones)")
        return
    import random
    rng = random.Random(args.seed + 7)
    reqs = smollm2_prompts.topic_requests()
    lists = run_greedy("selfask_topics", reqs, args, 160)
    topics = unique(t for r in reqs for t in smollm2_prompts.parse_list(lists[r]))
    qreq = smollm2_prompts.question_requests(topics, args.self_prompts // 2 + args.self_prompts // 4, rng)
    asked = run_greedy("selfask_questions", [r for _, r in qreq], args, 60)
    questions = [(c, q) for c, r in qreq if (q := smollm2_prompts.parse_question(asked[r]))]
    prompts = smollm2_prompts.self_prompts(topics, questions, args.self_prompts, rng, SELF_FIRST_ID)
    write_jsonl(path, prompts)
    st["selfask"] = dict(subjects=len(smollm2_prompts.SUBJECTS), topic_requests=len(reqs), topics=len(topics),
                         question_requests=len(qreq), questions=len(questions), prompts=len(prompts),
                         categories=category_counts(prompts))
    log(f"selfask: {st['selfask']}")


SHARD_ROWS = 64


def llama_greedy():
    """llama.cpp (tools/experiments/llamacpp.sh: built from the PyPI sdist) and the BF16 GGUF of the
    same weights as our checkpoint; tools/models/llama_greedy.c compiled against its libllama."""
    subprocess.run(["sh", "tools/experiments/llamacpp.sh", "gguf", "bf16"], check=True, capture_output=True)
    return greedy_bin(), Path("models/smollm2-135m-instruct.bf16.gguf")


def greedy_answers(name, prompts, args, max_new):
    """llama_greedy on prompts ({key: token ids}, written to WORK/<name>.in): --gen-batch
    sequences at a time, up to max_new tokens each, answers and features into
    WORK/<name>.out (returned), which a rerun extends with the keys it lacks."""
    exe, gguf = llama_greedy()
    inp, outp = WORK / f"{name}.in", WORK / f"{name}.out"
    with open(inp, "w") as f:
        for k, ids in prompts.items():
            f.write(f"{k} {len(ids)} {' '.join(map(str, ids))}\n")
    subprocess.run([str(exe), str(gguf), str(inp), str(outp), "--parallel", str(args.gen_batch),
                    "--max-new", str(max_new), "--threads", str(args.threads)], check=True)
    return outp


def read_greedy(prompts, out_path, hidden):
    """llama_greedy's answers and features as rows: ids (prompt + answer, cut to the
    positions that have a feature: the last answer token was never fed back), feat
    [len, hidden] BF16, n_prompt, finished."""
    import numpy as np
    feat = np.memmap(str(out_path) + ".feat", dtype=np.uint16, mode="r")
    rows = {}
    with open(out_path) as f:
        for line in f:
            key, fin, n_feat, off, n_ans, *ans = line.split()
            n_feat, off = int(n_feat), int(off) // 2
            ids = prompts[key] + [int(a) for a in ans]
            fe = torch.from_numpy(np.array(feat[off:off + n_feat * hidden]).view(np.int16).reshape(n_feat, hidden))
            rows[key] = dict(ids=torch.tensor(ids[:n_feat], dtype=torch.int32), feat=fe.view(torch.bfloat16),
                             n_prompt=len(prompts[key]), finished=fin == "1", answer=[int(a) for a in ans])
    return rows


def stage_answers(args, out, st):
    """Greedy answers with llama.cpp (tools/models/llama_greedy.c: continuous batching of
    --gen-batch sequences, the target's features from the same forward passes), then
    shards of rows in models/smollm2-work/answers. Resumable: llama_greedy skips the
    prompts its output already holds."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(TARGET))
    hidden = json.loads((TARGET / "config.json").read_text())["hidden_size"]
    wdir = ANSWERS
    wdir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for split in ("heldout", "train"):   # held-out first: its figures need only it
        qs = read_jsonl(out / "prompts" / f"{split}.jsonl")
        jobs += [(split, q) for q in (qs[:args.answer_prompts] if split == "train" else qs)]
    if args.self_prompts:   # the target's own prompts train with the rest (split "train")
        jobs += [("train", q) for q in read_jsonl(out / "prompts" / "self.jsonl")[:args.self_prompts]]
    first = {}
    for turn in range(args.turns):
        # every first turn is answered (no deadline here), so every later turn has its first reply
        todo, texts = turn_prompts(jobs, turn, first)
        prompts = {q_key(s, q["question_id"]): tok(text, add_special_tokens=False).input_ids
                   for (s, q), text in zip(todo, texts)}
        log(f"answers turn {turn + 1}: {len(prompts)} prompts, llama.cpp, {args.gen_batch} sequences at a time")
        outp = greedy_answers(f"greedy_t{turn}", prompts, args, args.max_new)
        rows = read_greedy(prompts, outp, hidden)
        for p in wdir.glob(f"t{turn}_*.pt"):
            p.unlink()
        keyed = [(s, q, rows[q_key(s, q["question_id"])]) for s, q in todo]
        for i in range(0, len(keyed), SHARD_ROWS):
            shard = []
            for s, q, r in keyed[i:i + SHARD_ROWS]:
                r.update(split=s, qid=q["question_id"], turn=turn)
                shard.append(r)
            torch.save(shard, wdir / f"t{turn}_{i // SHARD_ROWS:04d}.pt")
        if turn == 0:   # first answers as text, for the second turns
            for s, q, r in keyed:
                first[q_key(s, q["question_id"])] = reply_text(tok.decode(r["answer"]))
    st["answers"] = shard_stats()
    st["answers"]["check"] = check_answers(args.seed)
    if "draft" in st:   # the draft LM shipped was trained on other answers until the draft stage reruns
        st["draft"]["data_note"] = st["draft"].get("data_note") or "It was trained on an earlier answer set, not the one above."
    log(f"answers: {st['answers']}")


@torch.no_grad()
def check_answers(seed, n=8):
    """llama.cpp's greedy tokens and features against transformers (FP32 compute on the
    same BF16 weights) on n held-out answers drawn with the seed: the share of answer
    tokens that are transformers' argmax too, and the features' relative L2 error."""
    model, _ = load_target()
    rows = load_shards(ANSWERS, "heldout")
    pick = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))[:n].tolist()
    same = total = 0
    errs = []
    for i in pick:
        r = rows[i]
        o = model(r["ids"][None].long(), output_hidden_states=True)
        h = o.hidden_states[-1][0]
        errs.append(((h - r["feat"].float()).norm(dim=-1) / h.norm(dim=-1)))
        want = o.logits[0, r["n_prompt"] - 1:-1].argmax(-1)
        same += (want == r["ids"][r["n_prompt"]:].long()).sum().item()
        total += want.numel()
    e = torch.cat(errs)
    return dict(answers=len(pick), tokens=total, same_argmax=same, feature_rel_err_mean=round(e.mean().item(), 4),
                feature_rel_err_max=round(e.max().item(), 4))
