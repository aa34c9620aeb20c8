#!/usr/bin/env python3
"""SmolLM2's EAGLE head at GPU scale: on a lent GPU (tools/gpu/gpu_remote.sh head),
the target writes its own prompts, answers them greedily, and EAGLE heads are trained on
nested shares of those answers (the data-scaling curve in data/smollm2/README.md).

The pipeline needs only PyTorch, numpy, the gguf package (carried as a wheel) and
`tokenizers`: no transformers, no llama.cpp, none of our binaries.  Its inputs:

  --gguf      SmolLM2-135M-Instruct.Q4_1.gguf (make smollm2's file; the gguf package
              dequantizes it, the weights are rounded to BF16 as spec-convert does)
  --tokenizer SmolLM2's tokenizer.json
  --prompts   data/smollm2/prompts: train.jsonl, self.jsonl (trained on), heldout.jsonl
              (the held-out figures); collect.jsonl is left for the classifier

Stages (each one's result kept in --work, so a rerun skips what is done):

  selfask  the committed reference --prompts/gpu.jsonl.xz when it is there (unless
           --new-prompts); else the target lists topics within smollm2_prompts.SUBJECTS,
           then subtopics of each topic, then writes questions about them; prompts from
           its questions and from the templates (smollm2_prompts.self_prompts), a share
           with a second turn from FOLLOW_UPS; deduplicated, seeded -> prompts_gpu.jsonl
  answers  greedy answers (ties to the lowest token id, as our runtime breaks them) up
           to --max-new tokens: held-out prompts first, then the training prompts in a
           seeded order, so a run cut short by --gen-seconds still holds a fair sample;
           then the second turns of the answered prompts -> answers_t{0,1}.pt
  train    the target's final features (after the last RMSNorm) of every answer, then
           one EAGLE head (tools/models/smollm2_drafts.py's EAGLE recipe, unrolled) per
           point of --points (answer tokens; rows drawn in a seeded order, each point's rows a
           superset of the smaller's) -> head_<tokens>/ and its held-out top-1 at
           depths 1-4
  pack     what comes back: the prompts, the heads, a sample of the answers and the log

Stages for this machine, on what a GPU run brought back (--work holding its files):

  agree    its greedy answers against bin/spec-generate's (our runtime, F32 arithmetic)
  compare  held-out agreement of --heads on F32 features of the same answers
  tau      mt_bench τ of --heads with bin/spec-eval (eagle2 defaults, 20 x 128)
  readme   the GPU-scale section of data/smollm2/README.md, its PNG, gpu_log.json
  profile  (either machine) torch.profiler tables of a decode and a training step

Long work shows progress (done/total, rate, ETA) on stderr.

This file is the command line; the stages are in sibling modules:
smollm2_gpu_common.py (constants, the answer rows' figures, the log),
smollm2_gpu_target.py (the target's weights, forward and greedy generation),
smollm2_gpu_data.py (selfask, answers), smollm2_gpu_train.py (train, pack,
profile) and smollm2_gpu_report.py (agree, compare, tau, readme).  The chat
template, answer-row files, the head's recipe and files come from tools/c2ttools;
the EAGLE head, its loss, the LR schedule and the held-out figures from the shared
pipeline (tools/drafts); the prompt templates from tools/models/smollm2_prompts.py;
this file puts tools/ and tools/models on the path."""
import argparse
import sys
import time
from pathlib import Path

import torch

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS / "models"))   # tools/models: the prompt templates
sys.path.insert(0, str(TOOLS))   # tools/: the shared c2ttools and drafts packages
from c2ttools.files import read_log  # noqa: E402
from drafts.recipes import SMOLLM2_GPU, SMOLLM2_HEAD  # noqa: E402
from c2ttools.progress import fmt_secs, log  # noqa: E402
from smollm2_gpu_common import save_state  # noqa: E402
from smollm2_gpu_data import stage_answers, stage_selfask  # noqa: E402
from smollm2_gpu_report import stage_agree, stage_compare, stage_readme, stage_tau  # noqa: E402
from smollm2_gpu_target import Target, gguf_state, random_state  # noqa: E402
from smollm2_gpu_train import stage_pack, stage_profile, stage_train  # noqa: E402


STAGES = dict(profile=stage_profile, readme=stage_readme, tau=stage_tau, compare=stage_compare, agree=stage_agree, selfask=stage_selfask, answers=stage_answers, train=stage_train, pack=stage_pack)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True, help="the target's GGUF, or 'random' (a smoke test)")
    ap.add_argument("--tokenizer", required=True, help="SmolLM2's tokenizer.json")
    ap.add_argument("--prompts", default="data/smollm2/prompts")
    ap.add_argument("--work", default="/tmp/c2t-head")
    ap.add_argument("--out", default="/tmp/c2t-head-out")
    ap.add_argument("--stages", default="selfask,answers,train,pack")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new-prompts", action="store_true",
                    help="selfask writes new prompts even where --prompts holds gpu.jsonl.xz")
    ap.add_argument("--subjects", type=int, default=0, help="only the first N subjects (a small run)")
    ap.add_argument("--limit", type=int, default=0, help="only N held-out and N training prompts (a small run)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"], help="the target's compute type")
    ap.add_argument("--gpu-prompts", type=int, default=80000, help="prompts written from the target's topics")
    ap.add_argument("--second-turns", type=float, default=0.25, help="share of them with a follow-up turn")
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--batch-tokens", type=int, default=1 << 21, help="KV slots of one generation batch")
    ap.add_argument("--feature-tokens", type=int, default=1 << 18, help="tokens of one feature forward")
    ap.add_argument("--gen-seconds", type=float, default=380, help="answers stop starting batches after this")
    ap.add_argument("--total-seconds", type=float, default=660, help="the heads' training ends by this")
    ap.add_argument("--points", type=lambda s: [int(x) for x in s.split(",")], default=[736656, 3000000, 10000000,
                                                                                       10 ** 9])
    ap.add_argument("--epochs", type=float, default=SMOLLM2_GPU["epochs"])
    ap.add_argument("--min-steps", type=int, default=SMOLLM2_GPU["min_steps"])
    ap.add_argument("--init-head", default="", help="train: every head starts from this head's weights (a "
                                                    "directory as data/smollm2/eagle; continued training, recorded)")
    ap.add_argument("--unroll", type=int, default=SMOLLM2_HEAD["unroll"],
                    help="train: steps on the head's own predictions (1: EAGLE-1's recipe)")
    ap.add_argument("--labels", default=SMOLLM2_HEAD["p_labels"], choices=["greedy", "soft"],
                    help="train: the token loss against the target's greedy token or its whole distribution")
    ap.add_argument("--max-batch-tokens", type=int, default=SMOLLM2_GPU["max_batch_tokens"])
    ap.add_argument("--heads", nargs="*", default=[], help="compare: head directories")
    ap.add_argument("--cpu-head", default="cpu_head", help="readme: the compare/tau name of the CPU-trained head")
    ap.add_argument("--readme-dir", default="data/smollm2", help="readme: where README.md and the PNG go")
    ap.add_argument("--bench", default="../shared/benchmarks/mt_bench/question.jsonl", help="tau: questions")
    ap.add_argument("--agree-rows", type=int, default=12, help="agree: held-out answers checked")
    ap.add_argument("--target-dir", default="models/smollm2-135m-instruct", help="agree: our checkpoint")
    ap.add_argument("--profile-rows", type=int, default=1024, help="synthetic rows of the profile stage")
    args = ap.parse_args()
    t_start = time.time()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    st = read_log(work / "log.json")
    st["t_start"] = t_start
    if "args" not in st or {"selfask", "answers", "train"} & set(args.stages.split(",")):
        st["args"] = {k: v for k, v in vars(args).items()}   # the run that made the data and heads
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    dev = torch.device(args.device)
    sd, cfg = random_state(args.seed) if args.gguf == "random" else gguf_state(args.gguf)
    target = Target(sd, cfg, dev, torch.bfloat16 if args.dtype == "bf16" else torch.float32)
    del sd
    device = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    if {"selfask", "answers", "train"} & set(args.stages.split(",")):
        st["device"] = device   # where the data and heads were made
    log(f"target loaded on {device} in {time.time() - t_start:.1f} s")
    if dev.type == "cuda":
        # FP32 products (the logits) on TF32 tensor cores: the BF16 model's own rounding
        # is larger than TF32's
        torch.backends.cuda.matmul.allow_tf32 = True
        st["tf32_logits"] = True
    for name in args.stages.split(","):
        t0 = time.time()
        try:
            STAGES[name](args, target, tok, work, st)
        except Exception as e:   # what is done is kept: the pack stage still runs
            import traceback
            traceback.print_exc()
            st.setdefault("errors", {})[name] = repr(e)
            if name == "pack":
                raise
        st.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        save_state(work, st)
        log(f"stage {name} done in {fmt_secs(time.time() - t0)}")


if __name__ == "__main__":
    main()
