#!/bin/sh
# make smollm2-classifier: data/smollm2/classifier.json, C2T's classifier for
# the shipped SmolLM2 EAGLE head (data/smollm2/eagle), from collection prompts
# only (data/smollm2/prompts/collect.jsonl, never a benchmark):
#   1. spec-collect --batch: full EAGLE-2 trees (topk 10, depth 7) of the
#      first turns of Q collection prompts, MAX_NEW tokens each
#      -> results/smollm2-classifier/traces.h5 (resumable: rerun continues it)
#   2. spec-train as make smollm2-eval trains (log P standardised, 200 epochs,
#      2.5 negatives per positive); the weights record the target and head
#      they belong to (trained_for) -> OUT (data/smollm2/classifier.json)
# Sizes: Q (60), MAX_NEW (64), BATCH (8).  About 26 min on 2 cores.
set -eu
cd "$(dirname "$0")/../.."
T=models/smollm2-135m-instruct
D=data/smollm2
R=results/smollm2-classifier
Q=${Q:-60}
MAX_NEW=${MAX_NEW:-64}
BATCH=${BATCH:-8}
OUT=${OUT:-$D/classifier.json}
for f in "$T/config.json" "$D/eagle/config.json" "$D/prompts/collect.jsonl"; do
    [ -f "$f" ] || { echo "smollm2-classifier: $f is missing (make smollm2)" >&2; exit 1; }
done
mkdir -p "$R"
resume=""; [ -f "$R/traces.h5" ] && resume=--resume
echo "== 1/2 spec-collect: full EAGLE-2 trees on $Q collection prompts (first turns, $MAX_NEW tokens, batch $BATCH)"
bin/spec-collect $resume --target $T --draft $D/eagle --draft-kind eagle --questions $D/prompts/collect.jsonl \
    --max-questions "$Q" --max-turns 1 --max-new-tokens "$MAX_NEW" --topk 10 --depth 7 --batch "$BATCH" \
    --out "$R/traces.h5"
echo "== 2/2 spec-train -> $OUT"
bin/spec-train --traces "$R/traces.h5" --out "$OUT" --report "$R/train_report.json" \
    --transform P=log --standardize --epochs 200 --neg-ratio 2.5
