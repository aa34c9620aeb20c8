#!/bin/sh
# data/qwen/draft_token_counts.safetensors: how often each of the 151,936
# Qwen2 tokens is an answer token of the 0.5B draft's own greedy answers to
# training prompts (data/smollm2/prompts/train.jsonl, first turns; never a
# benchmark) -- what `--draft-vocab N|auto` ranks (a draft LM scores only
# the N most frequent; verification is unchanged, so decoding stays
# lossless).  The draft's answers rather than the target's: the reduced
# vocabulary limits what the draft proposes, and they cost a third of the
# target's to write.  make qwen copies the file beside the draft as
# token_counts.safetensors.
#
#   tools/models/qwen_counts.sh        (Q=384 MAX_NEW=128 BATCH=32)
set -eu
cd "$(dirname "$0")/../.."
Q=${Q:-384} MAX_NEW=${MAX_NEW:-128} BATCH=${BATCH:-32}
DRAFT=models/qwen2.5-coder-0.5b-instruct
OUT=${OUT:-data/qwen/draft_token_counts.safetensors}
R=results/qwen-counts
[ -f "$DRAFT/config.json" ] || { echo "qwen-counts: $DRAFT: missing (make qwen)" >&2; exit 1; }
mkdir -p "$R"
bin/spec-eval --target "$DRAFT" --policy ar --batch "$BATCH" --questions data/smollm2/prompts/train.jsonl \
    --max-questions "$Q" --max-turns 1 --max-new-tokens "$MAX_NEW" --no-baseline --json "$R/answers.json"
python3 - "$R/answers.json" "$OUT" "$DRAFT" "$Q" "$MAX_NEW" <<'EOF'
import json, sys
import numpy as np
from safetensors.numpy import save_file
src, out, draft, q, max_new = sys.argv[1:]
with open(src) as f:
    report = json.load(f)
vocab = json.load(open(f"{draft}/config.json"))["vocab_size"]
counts = np.zeros(vocab, dtype=np.int64)
answers = 0
for bench in report["benchmarks"]:
    for question in bench["questions"]:
        for turn in question["turns"]:
            ids = np.asarray(turn["output_ids"], dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= vocab):
                sys.exit(f"qwen-counts: {src}: a token id outside [0, {vocab})")
            counts += np.bincount(ids, minlength=vocab)
            answers += 1
if not answers or counts.sum() == 0:
    sys.exit(f"qwen-counts: {src}: no answer tokens")
save_file({"token_counts": counts}, out, metadata={
    "format": "np",
    "source": f"Qwen2.5-Coder-0.5B-Instruct's greedy answers to the first {q} prompts of "
              f"data/smollm2/prompts/train.jsonl (first turns, at most {max_new} tokens each)"})
order = np.sort(counts)[::-1]
total = counts.sum()
cover = ", ".join(f"{n:,}: {100 * order[:n].sum() / total:.1f}%" for n in (1024, 2048, 4096, 8192))
print(f"qwen-counts: {out}: {answers} answers, {total:,} tokens, {(counts > 0).sum():,} distinct ids; "
      f"the N most frequent cover {cover}", file=sys.stderr)
EOF
