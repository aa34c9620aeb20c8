"""smollm2_gpu.py's stages for this machine, on what a GPU run brought back:
heads compared on one footing (compare), the GPU's answers against our runtime's
(agree), τ with bin/spec-eval (tau), and the GPU-scale section of
data/smollm2/README.md with its PNG (readme)."""
import json
from pathlib import Path

import torch

from c2ttools.heads import EVAL_STEPS
from c2ttools.progress import log
from drafts.heads import load_eagle
from smollm2_gpu_common import sample_rows
from smollm2_gpu_train import Rows, eval_head


def stage_compare(args, target, tok, work, st):
    """Heads (--heads) on the same held-out answers and features: the GPU run's heads
    against the shipped one, on one footing (eval_head, FP32 features here)."""
    held = [r for r in sample_rows(work) if len(r["answer"]) > 1]
    rows = Rows(held, target, args.feature_tokens, "heldout")
    st["compare"] = {}
    for d in args.heads:
        d = Path(d)
        head = load_eagle(d).to(target.dev)
        st["compare"][str(d)] = eval_head(head, target, rows)
        log(f"compare {d}: {st['compare'][str(d)]}")


def stage_agree(args, target, tok, work, st):
    """The GPU's greedy answers against our runtime's (bin/spec-generate, BF16 weights,
    FP32 arithmetic, on this machine) for the first --agree-rows held-out first turns:
    answers identical, and how far each runs before the first differing token."""
    import subprocess
    rows = [r for r in sample_rows(work) if r["turn"] == 0][:args.agree_rows]
    same, runs, cmp_tokens, margins = 0, [], 0, []
    for r in rows:
        n = len(r["answer"])
        out = subprocess.run(["bin/spec-generate", "--target", args.target_dir, "--ids",
                              ",".join(map(str, r["prompt"])), "--max-new-tokens", str(n), "--device", "cpu",
                              "--kv-dtype", "f32", "--cpu-fast-gemm", "off"],
                             check=True, capture_output=True, text=True).stdout
        ours = json.loads(out[out.index("["):out.rindex("]") + 1])
        k = next((i for i, (a, b) in enumerate(zip(ours, r["answer"])) if a != b), min(len(ours), n))
        same += ours == r["answer"]
        runs.append(k)
        if k < min(len(ours), n):   # how near a tie the first difference is in F32
            ids = torch.tensor([r["prompt"] + r["answer"][:k]], device=target.dev)
            x = target.layers(target.emb[ids], torch.arange(ids.shape[1], device=target.dev)[None], None,
                              causal=True)
            lg = target.logits(x[0, -1])
            margins.append(abs(lg[ours[k]] - lg[r["answer"][k]]).item())
        cmp_tokens += n
        log(f"agree: {len(runs)}/{len(rows)}: {k} of {n} tokens before the first difference")
    st["agree"] = dict(answers=len(rows), identical=same, answer_tokens=cmp_tokens,
                       tokens_before_first_difference=sum(runs), first_difference_at=runs,
                       f32_margins=[round(m, 5) for m in margins])
    log(f"agree: {st['agree']}")


def stage_tau(args, target, tok, work, st):
    """τ of each head (--heads) on mt_bench (--bench: 20 first turns x 128 tokens, eagle2
    defaults, T = 0) with bin/spec-eval on this machine; a head's report is kept in
    work/tau_<head>.json and reused."""
    import subprocess
    st["tau"] = {}
    for d in args.heads:
        rep = work / f"tau_{Path(d).name}.json"
        if not rep.exists():
            log(f"tau: spec-eval with {d}")
            subprocess.run(["bin/spec-eval", "--target", args.target_dir, "--draft", d, "--policy", "eagle2",
                            "--questions", args.bench, "--max-questions", "20", "--max-turns", "1",
                            "--max-new-tokens", "128", "--no-baseline", "--json", str(rep)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(rep))
        t = r["total"]
        st["tau"][str(d)] = dict(tau=round(t["tau"], 3), gamma=t.get("gamma"))
        log(f"tau {d}: {st['tau'][str(d)]}")


def plot_curve(rows, png):
    """Held-out top-1 at depths 1-4 against answer tokens (log scale), gnuplot; None,
    or why there is no PNG."""
    import shutil
    import subprocess
    if not shutil.which("gnuplot"):
        return "gnuplot not found: no PNG (make deps installs gnuplot-nox)"
    plots = ", ".join(f"'-' using 1:2 with linespoints title 'depth {k + 1}'" for k in range(EVAL_STEPS))
    script = f"""set terminal png size 640,420
set output '{png}'
set logscale x
set xlabel 'answer tokens trained on'
set ylabel 'held-out top-1 agreement (%)'
set key left top
set grid
plot {plots}
"""
    for k in range(EVAL_STEPS):
        script += "".join(f"{r['answer_tokens']} {100 * r['eagle_step_top1'][k]:.2f}\n" for r in rows) + "e\n"
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return None if r.returncode == 0 else "gnuplot failed: " + r.stderr.strip()[-200:]


def continued_record(st):
    """What gpu_log.json keeps of a continued-training run (its heads start from
    --init-head): the run's settings, answers, timings, heads and the figures the
    stages here added (each head's compare/tau and those of the head it started from)."""
    a = st["args"]
    return dict(device=st["device"], seed=a["seed"], gen_seconds=a["gen_seconds"], total_seconds=a["total_seconds"],
                init_head=a["init_head"], answers=st["answers"], seconds=st["seconds"],
                train_plan=st["train_plan"], points=st["points"], compare=st.get("compare", {}),
                tau=st.get("tau", {}))


def continued_section(runs, by_name, pct, first_answered):
    """README text of the continued-training runs: one row per head, with the head it
    started from measured on the same held-out answers."""
    rows = []
    for i, c in enumerate(runs):
        for name, r in c["points"].items():
            cm, t = by_name(c["compare"], name), by_name(c["tau"], name)
            start = next((k for k in c["compare"] if Path(k).name != name), None)
            cs, ts = (c["compare"].get(start), c["tau"].get(start)) if start else (None, None)
            rows.append(f"| {i + 1} | {name} | {r['answer_tokens'] / 1e6:.2f}M | {r['steps']} x {r['tokens_per_batch']:,} | "
                        f"{r['epochs']} | {r['seconds']:.0f} s | {pct(r['eagle_step_top1'])} | "
                        f"{pct(cm['eagle_step_top1']) if cm else '-'} | {pct(cs['eagle_step_top1']) if cs else '-'} | "
                        + (f"{t['tau']:.2f} | {ts['tau']:.2f} |" if t and ts else "- | - |"))
    last = runs[-1]
    lp = list(last["points"].values())[-1]
    real = 1000 * lp["seconds_per_step"] / lp["tokens_per_batch"]
    return f"""
**Continued training** (`--init-head`: every head starts from the shipped one's weights, the schedule
anew). The answers are regenerated in another seeded order (seed {last['seed']}), so they include
prompts the first run did not reach (it answered {first_answered:,}). Top-1 d1-d4 on this run's
held-out answers, for the head and for the one it started from on the same answers (F32 features on
this CPU); τ as above:

| run | head | answer tokens | steps x tokens | epochs | training | top-1 (GPU) | top-1 (F32, CPU) | from: top-1 (F32, CPU) | τ mt_bench | from: τ |
|---|---|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

The last run answered for {last['seconds']['answers']:.0f} s and trained for {last['seconds']['train']:.0f} s (features
included). Its plan, timed on {last['train_plan']['seconds_per_1k_tokens']} s per 1k tokens where the steps then took
{real:.4f} s, had {last['train_plan']['left_s']} s for {last['train_plan']['needed_s']} s of the recipe's 3 epochs
(scale {last['train_plan']['scale']}), so the head got {lp['epochs']} of an epoch and {lp['seconds']:.0f} s of training.
"""


def stage_readme(args, target, tok, work, st):
    """The GPU-scale section of data/smollm2/README.md (from this run's log: data,
    agreement, the scaling curve and its PNG); the rest of that README is
    tools/models/smollm2_drafts.py's.  A continued-training run (its heads start from
    --init-head) is added to the committed gpu_log.json's "continued" runs, and the
    section is written from that log."""
    out = Path(args.readme_dir)
    if st["args"].get("init_head"):
        rec = continued_record(st)
        st = json.load(open(out / "gpu_log.json"))
        st["continued"] = [c for c in st.get("continued", []) if c["points"].keys() != rec["points"].keys()] + [rec]
    A, G = st["answers"], st.get("agree", {})
    # a run on the reference prompts keeps the figures of the run that wrote them
    if "selfask" not in st and (out / "gpu_log.json").exists():
        st["selfask"] = json.load(open(out / "gpu_log.json")).get("selfask")
    S = st["selfask"]
    a = st["args"]
    pts = sorted(st["points"].values(), key=lambda r: r["answer_tokens"])
    png = out / "gpu_scaling.png"
    note = plot_curve(pts, png)
    tau, cmp_ = st.get("tau", {}), st.get("compare", {})
    tot = sum(A[t][sp]["answer_tokens"] for t in ("turn1", "turn2") for sp in ("train", "heldout"))
    pct = lambda xs: " / ".join(f"{100 * x:.1f}" for x in xs)   # noqa: E731
    by_name = lambda m, n: next((v for k, v in m.items() if Path(k).name == n), None)   # noqa: E731
    rows = []
    for name, r in sorted(st["points"].items(), key=lambda kv: kv[1]["answer_tokens"]):
        c, t = by_name(cmp_, name), by_name(tau, name)
        rows.append(f"| {r['answer_tokens'] / 1e6:.2f}M | {r['rows']:,} | {r['steps']} x {r['tokens_per_batch']:,} | "
                    f"{r['epochs']} | {pct(r['eagle_step_top1'])} | {pct(c['eagle_step_top1']) if c else '-'} | "
                    + (f"{t['tau']:.2f} |" if t else "- |"))
    c0, t0 = by_name(cmp_, args.cpu_head), by_name(tau, args.cpu_head)
    cpu = json.load(open(out / "train_log.json"))
    E = cpu["eagle"]
    rows.append(f"| CPU head ({cpu['answers']['train']['answer_tokens'] / 1e6:.2f}M, `tools/models/smollm2_drafts.py`) | "
                f"{cpu['answers']['train']['sequences']:,} | {E['steps']} x {E['tokens_per_batch']:,} | {E['epochs']} | - | "
                f"{pct(c0['eagle_step_top1']) if c0 else '-'} | " + (f"{t0['tau']:.2f} |" if t0 else "- |"))
    margins = [round(m, 4) for m in G.get("f32_margins", [])]
    big = pts[-1]
    tau_big = by_name(tau, f"head_{big['answer_tokens']}")
    c_big = by_name(cmp_, f"head_{big['answer_tokens']}")
    runs = st.get("continued", [])
    shipped = f"head_{big['answer_tokens']}"
    if runs:   # the shipped head is the last continued one
        shipped, r_last = list(runs[-1]["points"].items())[-1]
        tau_big, c_big = by_name(runs[-1]["tau"], shipped), None
    ep = sorted({r["epochs"] for r in pts})
    epochs_text = f"{ep[0]}" if len(ep) == 1 else f"{ep[0]} to {ep[-1]}"
    if c_big and c0:
        d1 = 100 * (c_big["eagle_step_top1"][0] - c0["eagle_step_top1"][0])
        agree_vs_cpu = (f"its held-out depth-1 agreement (F32) is {100 * c_big['eagle_step_top1'][0]:.1f}%, "
                        f"{abs(d1):.1f} points {'above' if d1 >= 0 else 'below'} the CPU head's, although the "
                        f"held-out prompts are of the CPU head's kinds (software, arithmetic)")
    else:
        agree_vs_cpu = "its held-out agreement is in the table"
    text = f"""<!-- gpu-scale: written by tools/gpu/smollm2_gpu.py --stages readme; everything above is tools/models/smollm2_drafts.py's -->
## GPU-scale data (tools/gpu/smollm2_gpu.py)

On a lent {st['device']} (`tools/gpu/gpu_remote.sh pack-head`, then the three calls its header lists), the
target wrote its own prompts, answered them and EAGLE heads were trained on nested shares of the answers,
all in one detached run of {st['seconds'].get('selfask', 0) + st['seconds'].get('answers', 0) + st['seconds'].get('train', 0):.0f} s. Nothing comes from the benchmarks.

- **Prompts** (`prompts/gpu.jsonl.xz`, {S['prompts']:,}, the reference; `--new-prompts` writes new ones):
  the target listed topics within the {S['subjects']} subjects of `tools/models/smollm2_prompts.py`
  ({S['topics']:,} distinct), then subtopics of each ({S['topics_with_subtopics']:,} in all), then was asked
  each of the four question requests about every one of them ({S['question_requests']:,} requests,
  {S['questions']:,} distinct usable questions); the prompts are its questions and writing, roleplay and
  explanation templates about its topics, deduplicated, seeded ({a['seed']}); {S['second_turns']:,} have a
  follow-up turn. Categories: {", ".join(f"{k} {v:,}" for k, v in sorted(S['categories'].items()))}.
- **Answers**: the prompts of `heldout.jsonl`, then of `train.jsonl`, `self.jsonl` and `gpu.jsonl.xz` in a
  seeded order, answered greedily up to {a['max_new']} tokens until `--gen-seconds` ({a['gen_seconds']:.0f} s), then
  the follow-ups of the answered ones with one: {tot / 1e6:.1f}M answer
  tokens ({A['turn1']['train']['sequences']:,} first and {A['turn2']['train']['sequences']:,} second turns for
  training; {A['turn1']['train']['finished']:,} first turns ended before the limit) in
  {st['seconds']['answers']:.0f} s. The GPU computes in BF16 (weights as `make smollm2` rounds them); the
  answers are regenerable from the committed prompts with the same script and seed, and not committed.
- **Agreement with our runtime** (`--stages agree`: `bin/spec-generate` on this CPU, F32 arithmetic):
  {G.get('identical', '?')} of {G.get('answers', '?')} held-out answers identical; {G.get('tokens_before_first_difference', 0):,} of
  {G.get('answer_tokens', 0):,} tokens come before the first difference. Both break ties to the lowest id; every
  first difference is a near-tie in F32 (the two tokens' F32 logits differ by {", ".join(map(str, margins)) or "-"})
  that BF16 arithmetic orders the other way.

Heads at {len(pts)} points of the curve (the EAGLE recipe of `tools/models/smollm2_drafts.py`, 3 unrolled steps;
rows drawn in a seeded order, each point's a superset of the smaller's; equal epochs at every point, fit
by one factor into the run's time). Held-out top-1 agreement at depths 1-4 (each depth on the head's own
earlier predictions) on the held-out prompts' answers, once with the GPU's BF16 features and once
(`--stages compare`) with F32 features on this CPU, where the CPU-trained head is measured the same way; τ is
`spec-eval --policy eagle2` (defaults) on 20 mt_bench first turns x 128 tokens (`--stages tau`):

| answer tokens | rows | steps x tokens | epochs | top-1 d1-d4 (GPU) | top-1 d1-d4 (F32, CPU) | τ mt_bench |
|---|---|---|---|---|---|---|
""" + "\n".join(rows) + f"""

![held-out top-1 against answer tokens](gpu_scaling.png){'' if not note else f" ({note})"}
All figures of this section: `gpu_log.json`.

{continued_section(runs, by_name, pct, A['turn1']['train']['sequences']) if runs else ""}
**Which head is shipped.** `eagle/` holds {"the last continued head" if runs else "the largest head"}, `{shipped}`:
{f"mt_bench τ {tau_big['tau']:.2f} against the CPU head's {t0['tau']:.2f}" if tau_big and t0 else "its τ above"},
{f"with {100 * (1 - tau_big['gamma'] / t0['gamma']):.0f}% fewer verified tokens" if tau_big and t0 and t0.get('gamma') else ""};
{agree_vs_cpu}. Its `token_counts.safetensors` (what `--draft-vocab` ranks) counts the answer tokens
it trained on (the "Token counts" section above describes the CPU answer set's, which `draft/` keeps).

**What bounds {"the curve's run" if runs else "this run"}.** {tot / 1e6:.0f}M answer tokens took {st['seconds']['answers'] / 60:.1f} minutes
({'the deadline stopped generation before the second turns' if not A['turn2']['train']['sequences'] else 'second turns included'}).
Training had {st['train_plan']['left_s']} s left for {st['train_plan']['needed_s']} s of planned steps
({st['train_plan']['scale']} of the plan), so the points got {epochs_text} of an epoch: the curve is
not at convergence. {big['seconds_per_step']:.2f} s a step of {big['tokens_per_batch']:,} tokens means about
{round(2 * big['sequence_tokens'] / big['tokens_per_batch'] * big['seconds_per_step'] / 60)} minutes for two epochs of this data.
"""
    with open(out / "gpu_log.json", "w") as f:   # the figures above, as the run and the stages here left them
        json.dump({k: v for k, v in st.items() if k != "t_start"}, f, indent=1)
        f.write("\n")
    readme = out / "README.md"
    old = readme.read_text()
    cut = old.find("<!-- gpu-scale")
    readme.write_text((old[:cut] if cut >= 0 else old.rstrip() + "\n\n") + text)
    log(f"readme: {readme} ({len(text.splitlines())} lines of the GPU-scale section), {png}")
