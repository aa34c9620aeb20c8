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

This file is the command line and the settings; the stages are in sibling
modules: train_demo_data.py (corpus, tokenizer, prompts: tok), train_demo_lm.py
(target, draft, eagle), train_demo_eval.py (eval) and train_demo_readme.py
(readme).  The EAGLE head, its loss, the LR schedule, time cap and held-out
figures are the shared pipeline's (tools/drafts); progress lines, the log file
and the head's files are tools/c2ttools'.
"""
import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tools/: the shared c2ttools package
import drafts  # noqa: E402,F401  (first: it sets OMP_WAIT_POLICY)
from drafts.train import quiet_malloc  # noqa: E402
from c2ttools.files import read_log, write_json  # noqa: E402
from c2ttools.progress import T0, fmt_secs, log  # noqa: E402

import torch  # noqa: E402  (after drafts: OMP_WAIT_POLICY)
from train_demo_data import stage_tok  # noqa: E402
from train_demo_eval import stage_eval  # noqa: E402
from train_demo_lm import stage_eagle, stage_lm  # noqa: E402
from train_demo_readme import write_readme  # noqa: E402


def settings(args):
    """All sizes and step counts. The defaults were measured on 2 cores."""
    s = dict(
        vocab_size=8192,          # incl. the 2 special tokens
        heldout_frac=0.2,         # >= 80 held-out modules are needed for the `continue` prompts
        seq_len=512, long_seq_len=1024,
        target=dict(hidden_size=256, intermediate_size=688, num_hidden_layers=6,
                    num_attention_heads=8, num_key_value_heads=2,
                    steps=1200, batch=8, long_frac=0.2, lr=2e-3, warmup=100, wd=0.1),
        # The draft must be clearly weaker than the target: at equal tokens a 2-layer
        # model learns as fast as the 6-layer target early on (measured), so it gets a
        # narrower width and about a third of the target's training tokens.
        draft=dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2,
                   steps=500, batch=8, long_frac=0.2, lr=3e-3, warmup=50, wd=0.1),
        # p_labels "greedy": the head's token loss uses the target's greedy token, not its
        # distribution (the reference's soft labels). The demo decodes at temperature 0, where
        # a draft token is accepted iff it is the target's argmax; this 8M target is uncertain
        # (mean top-1 probability 0.33), so a head that copies its distribution states about
        # half the acceptance rate (a candidate of confidence 0.2-0.3 was accepted 59% of the
        # time) and EAGLE-2's premise, confidence ~ acceptance, fails. Trained on greedy
        # tokens, the head's probabilities estimate exactly that acceptance (eval: calibration);
        # p_w 1.0 (reference 0.1) so the token loss is not drowned by the feature loss.
        eagle=dict(feature_windows=4000, steps=1000, batch=8, lr=1.5e-3, warmup=60,
                   noise=0.2, v_w=1.0, p_w=1.0, grad_clip_value=0.5, p_labels="greedy"),
        eval_windows=1000, eagle_eval_windows=300,
    )
    if args.smoke:
        s["target"].update(steps=12, warmup=2)
        s["draft"].update(steps=8, warmup=2)
        s["eagle"].update(feature_windows=24, steps=10, warmup=2)
        s["eval_windows"] = 8
        s["eagle_eval_windows"] = 6
    return s


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
    s = settings(args)
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
