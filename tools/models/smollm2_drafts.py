#!/usr/bin/env python3
"""Train the drafts for SmolLM2-135M-Instruct (make smollm2) on the CPU and write
them to data/smollm2/:

  eagle/   an EAGLE-1 head in the public layout (fc over [embedding; feature] +
           one decoder layer; the target's embedding and lm_head frozen, not shipped)
  draft/   a small LlamaForCausalLM with SmolLM2's vocabulary, distilled from the
           target on its own answers (for the chain policy and llama.cpp's draft
           speculative decoding)
  prompts/ the instruction prompts, in question.jsonl form: train.jsonl (the
           target's answers to these are the training data), collect.jsonl (for
           spec-collect traces: the classifier's training data) and heldout.jsonl
           (the held-out figures below), self.jsonl (prompts the target wrote
           itself, --self-prompts, trained on with train.jsonl's); none comes
           from the six benchmarks, see tools/models/smollm2_prompts.py for the sources

Stages (each resumable; intermediates in models/smollm2-work/, ignored by git):

  prompts  build the prompt sets (seeded; keeps existing files, which are the
           reference: the sources are this machine's apt lists and Python docs)
  selfask  with --self-prompts N: the target lists topics within broad subjects
           and writes questions about them (llama.cpp, greedy); N prompts from
           its questions and from templates about its topics -> prompts/self.jsonl
           (kept when it exists, like the other prompt files)
  answers  the target answers every train/heldout prompt (and the first N
           self-written ones) greedily with llama.cpp
           (tools/models/llama_greedy.c, built against the libllama of
           tools/experiments/llamacpp.sh: continuous batching of --gen-batch sequences on the BF16 GGUF of the
           same weights; SmolLM2's chat template with its default system prompt,
           up to --max-new tokens); the final features (after the final RMSNorm)
           of every position come from the same forward passes; a second turn,
           where a prompt has one, is answered after the first
  features3  the inputs of target layers 2, 15, 27 at every answers position
           (transformers, FP32): an EAGLE-3 head's features
  eagle3   an EAGLE-3 head (the published layout, tools/drafts/heads.py's
           training-time test) -> models/smollm2-eagle3/, not shipped (see
           data/smollm2/README.md); eval reports it when it is there
  eagle    EAGLE head training (the EAGLE-1 recipe, see
           tools/drafts/heads.py: feature SmoothL1 + CE with the
           target's greedy token, input noise, AdamW, value clipping), unrolled --eagle-unroll steps on the head's
           own predictions (EagleHead.unroll, as EAGLE-3 trains); checkpoints
           every 50 steps, resumes
  draft    draft LM: its embedding initialised from the target's by PCA, then
           trained on the target's answers (greedy answers, so the next token is
           the target's own greedy choice: greedy-label distillation)
  eval     held-out top-1/top-3 agreement and calibration of the head, its
           agreement at depths 1-4 on its own predictions, agreement of the
           draft LM; writes train_log.json
  readme   data/smollm2/README.md from train_log.json
  recipes  (not in a default run) EAGLE heads trained by the --recipes on the
           same answers and epochs, compared on the held-out answers
           (smollm2_drafts_recipes.py) -> <out>/recipes.md; run it on a
           CPU-sized answer set, e.g. --stages answers,recipes --answer-prompts 600

    python3 tools/models/smollm2_drafts.py    # every stage but features3, eagle3
    python3 tools/models/smollm2_drafts.py --stages eagle,eval,readme

Progress (done/total, rate, ETA) goes to stderr.

This file is the command line; the stages are in sibling modules:
smollm2_drafts_common.py (paths, target loader, answer statistics),
smollm2_drafts_data.py (prompts, selfask, answers), smollm2_drafts_train.py
(eagle, draft, counts), smollm2_drafts_eagle3.py (features3,
eagle3), smollm2_drafts_eval.py (eval), smollm2_drafts_readme.py (readme) and
smollm2_drafts_recipes.py (recipes).
The heads, their losses, the training loop and the held-out figures are the
shared pipeline's (tools/drafts); the chat template, answer rows,
head files, progress lines and JSON files are tools/c2ttools'."""
import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tools/: the shared c2ttools package
from c2ttools.files import read_log, write_json  # noqa: E402
from c2ttools.progress import fmt_secs, log  # noqa: E402
from smollm2_drafts_common import DEFAULT_STAGES, STAGE_NAMES  # noqa: E402
from smollm2_drafts_data import stage_answers, stage_prompts, stage_selfask  # noqa: E402
from smollm2_drafts_eagle3 import stage_eagle3, stage_features3  # noqa: E402
from smollm2_drafts_eval import stage_eval  # noqa: E402
from smollm2_drafts_readme import stage_readme  # noqa: E402
from smollm2_drafts_recipes import DEFAULT_RECIPES, RECIPES, stage_recipes  # noqa: E402
from smollm2_drafts_train import stage_counts, stage_draft, stage_eagle  # noqa: E402
from drafts.recipes import SMOLLM2_DRAFT, SMOLLM2_EAGLE, SMOLLM2_EAGLE3  # noqa: E402
from drafts.train import quiet_malloc  # noqa: E402


STAGES = {"prompts": stage_prompts, "selfask": stage_selfask, "answers": stage_answers, "counts": stage_counts,
          "eagle": stage_eagle, "features3": stage_features3, "eagle3": stage_eagle3, "draft": stage_draft,
          "eval": stage_eval, "readme": stage_readme, "recipes": stage_recipes}
assert list(STAGES) == STAGE_NAMES


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/smollm2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default=",".join(DEFAULT_STAGES))
    ap.add_argument("--train-prompts", type=int, default=1800)
    ap.add_argument("--collect-prompts", type=int, default=300)
    ap.add_argument("--heldout-prompts", type=int, default=100)
    ap.add_argument("--new-prompts", action="store_true",
                    help="let the prompts stage replace existing prompt files (they differ from machine to machine)")
    ap.add_argument("--answer-prompts", type=int, default=600, help="answer the first N train prompts")
    ap.add_argument("--self-prompts", type=int, default=0,
                    help="prompts the target writes itself (stage selfask), answered and trained on with the rest")
    ap.add_argument("--turns", type=int, default=1, help="answer up to this many turns of a prompt")
    ap.add_argument("--gen-batch", type=int, default=32, help="sequences llama.cpp decodes together")
    ap.add_argument("--max-new", type=int, default=192)
    ap.add_argument("--eagle-epochs", type=int, default=SMOLLM2_EAGLE["epochs"])
    ap.add_argument("--eagle-unroll", type=int, default=SMOLLM2_EAGLE["unroll"],
                    help="train the head on its own predictions up to this depth (1: EAGLE-1's recipe)")
    ap.add_argument("--eagle-labels", default=SMOLLM2_EAGLE["p_labels"], choices=["greedy", "soft"],
                    help="the head's token loss: the target's greedy token, or its whole distribution (soft)")
    ap.add_argument("--recipes", default=DEFAULT_RECIPES,
                    help=f"stage recipes: the recipes compared, of {', '.join(RECIPES)}")
    ap.add_argument("--eagle-rows-frac", type=float, default=1.0,
                    help="train the head on this share of the answers (a data-scaling point; write it to another --out)")
    ap.add_argument("--draft-epochs", type=int, default=SMOLLM2_DRAFT["epochs"])
    ap.add_argument("--eagle3-epochs", type=int, default=SMOLLM2_EAGLE3["epochs"])
    ap.add_argument("--eagle3-length", type=int, default=SMOLLM2_EAGLE3["length"],
                    help="EAGLE-3 training-time test: unrolled steps (EAGLE-3: 7)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    quiet_malloc()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logp = out / "train_log.json"
    st = read_log(logp)
    for name in args.stages.split(","):
        t0 = time.time()
        STAGES[name](args, out, st)
        st.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
        write_json(logp, st)
        log(f"stage {name} done in {fmt_secs(time.time() - t0)}")


if __name__ == "__main__":
    main()
