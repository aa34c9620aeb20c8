#!/usr/bin/env python3
"""Train the C2T demo model family on the CPU and write it to data/demo/.

Rerun (about 60 minutes on 2 idle cores; deterministic for a given seed, thread
count, Python stdlib and package versions, see tools/requirements.txt):

    python3 tools/models/train_demo.py --out data/demo --seed 0

Quick smoke test (tiny step counts, throw-away output directory):

    python3 tools/models/train_demo.py --out /tmp/demo_smoke --seed 0 --smoke

Stages (each stage reads what the earlier ones wrote into --out, so a failed
run can be resumed with e.g. --stages eagle,eval,readme):

  tok     byte-level BPE tokenizer (LLaMA-3 layout: Split(LLaMA-3 regex) +
          ByteLevel(use_regex=False), ByteLevel decoder, BOS-prepending
          TemplateProcessing), trained on the training files only;
          the held-out prompt sets (prompts/*.jsonl) are written here too
  target  LLaMA target (LlamaForCausalLM, GQA, untied lm_head), saved BF16
  draft   small LLaMA draft LM for vanilla speculative decoding, saved BF16
  eagle   EAGLE-1/2 draft head trained on the BF16 target's final features
  eval    held-out perplexities, EAGLE top-1 agreement, greedy samples
  readme  data/demo/README.md from data/demo/train_log.json

Corpus: the *.py files of this interpreter's standard library
(sysconfig.get_paths()["stdlib"]) minus tests, idlelib, site-packages,
encodings (codec tables), pydoc_data (doc text), the build-specific
_sysconfigdata module and config-* directories; split by file into train and
held-out with random.Random(seed). Nothing is downloaded.

All training runs with fixed step counts (measured to fit the budget), so a
rerun reproduces the same weights; --max-minutes is a safety cap per stage:
if a stage would overrun it (other processes on the cores), its step count and
LR schedule are cut to fit, which is logged and recorded in the README.
Progress (step/total, loss, tokens/s, ETA) goes to stderr.

This file is the command line; the stages are in sibling
modules: train_demo_data.py (corpus, tokenizer, prompts: tok), train_demo_lm.py
(target, draft, eagle), train_demo_eval.py (eval) and train_demo_readme.py
(readme).  The settings (drafts.recipes.demo_settings), the EAGLE head, its
loss, the LR schedule, time cap and held-out figures are the shared pipeline's
(tools/drafts); progress lines, the log file
and the head's files are tools/c2ttools'.
"""
import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tools/: the shared c2ttools package
import drafts  # noqa: E402,F401  (first: it sets OMP_WAIT_POLICY)
from drafts.recipes import demo_settings  # noqa: E402
from drafts.train import quiet_malloc  # noqa: E402
from c2ttools.files import read_log, write_json  # noqa: E402
from c2ttools.progress import T0, fmt_secs, log  # noqa: E402

import torch  # noqa: E402  (after drafts: OMP_WAIT_POLICY)
from train_demo_data import stage_tok  # noqa: E402
from train_demo_eval import stage_eval  # noqa: E402
from train_demo_lm import stage_eagle, stage_lm  # noqa: E402
from train_demo_readme import write_readme  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/demo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default="tok,target,draft,eagle,eval,readme")
    ap.add_argument("--smoke", action="store_true", help="tiny step counts, for testing the script")
    ap.add_argument("--max-minutes", default="target=60,draft=15,eagle=30",
                    help="safety cap per stage in minutes (0 = none)")
    args = ap.parse_args()
    args.max_minutes = {k: float(v) for k, v in (kv.split("=") for kv in args.max_minutes.split(",") if kv)}
    quiet_malloc()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    s = demo_settings(args.smoke)
    log_path = out / "train_log.json"
    st = read_log(log_path)
    import safetensors
    import tokenizers
    import transformers
    st.update(seed=args.seed, threads=args.threads, smoke=args.smoke, settings=s,
              versions=dict(torch=torch.__version__, transformers=transformers.__version__,
                            tokenizers=tokenizers.__version__, safetensors=safetensors.__version__,
                            python=sys.version.split()[0]))
    st.setdefault("started", time.strftime("%Y-%m-%d"))
    stages = args.stages.split(",")
    if "tok" in stages:
        st["total_seconds"] = 0.0
    for stage in stages:
        t0 = time.time()
        log(f"=== stage {stage}")
        if stage == "tok":
            st["tok"] = stage_tok(args, s, out, st)
        elif stage in ("target", "draft"):
            st[stage] = stage_lm(stage, args, s, out, st)
        elif stage == "eagle":
            st["eagle"] = stage_eagle(args, s, out, st)
        elif stage == "eval":
            st["eval"] = stage_eval(args, s, out, st)
        elif stage == "readme":
            write_readme(out, st)
        else:
            raise SystemExit(f"unknown stage {stage}")
        st["total_seconds"] = round(st.get("total_seconds", 0) + time.time() - t0, 1)
        write_json(log_path, st, end="")   # this log has always ended without a newline
        log(f"=== stage {stage} done in {fmt_secs(time.time() - t0)}")
    log(f"all done in {fmt_secs(time.time() - T0)}")


if __name__ == "__main__":
    main()
