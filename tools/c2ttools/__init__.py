"""c2ttools: the helpers that the draft-training pipeline's call sites under tools/
share (files, prompts, rows, progress; the models, training and evaluation steps are
tools/drafts').

  tools/models/train_demo*.py, train_eagle3_demo.py   the demo family (data/demo/)
  tools/models/smollm2_drafts*.py                     SmolLM2's CPU drafts (data/smollm2/)
  tools/gpu/smollm2_gpu*.py                           SmolLM2's head at GPU scale

Each helper lives here once; a pipeline's own modules keep what only it uses.
Modules, one job each:

  progress  progress lines on stderr: log, fmt_secs, Progress, running averages
  files     JSON files as the pipelines write them: logs, configs, JSON lines
  prompts   SmolLM2's chat template and prompt-set bookkeeping (keys, turns,
            deduplication, category counts)
  rows      the SmolLM2 answer rows on disk (both pipelines' formats), their
            statistics, batches of similar length
  heads     EAGLE heads as files: config.json from the target's config, BF16
            safetensors, token counts; chain τ

Importing: an entry script puts tools/ on sys.path before it imports any of its
modules (sys.path.insert(0, str(Path(__file__).resolve().parents[1]))); its
sibling modules then import `from c2ttools.<module> import ...`.  Nothing here
changes what a pipeline writes: where the pipelines' copies had drifted, the
difference is a parameter and each caller passes what it wrote before.  Only rows
and heads use torch (heads imports it where it is needed)."""
