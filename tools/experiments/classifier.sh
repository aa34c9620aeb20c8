#!/bin/sh
# C2T's classifier for a target and its draft, from collection prompts only
# (never a benchmark); make smollm2-classifier and make qwen-classifier:
#   1. spec-collect --batch: full EAGLE-2 trees (topk 10, depth 7) of the
#      first turns of Q collection prompts, MAX_NEW tokens each
#      -> R/traces.h5 (resumable: a rerun continues it)
#   2. spec-train (log P standardised, 200 epochs, 2.5 negatives per
#      positive); the weights record the target and draft they belong to
#      (trained_for) -> OUT
# Settings (environment): NAME (for messages), T (target dir), DRAFT (draft
# dir), KIND (its --draft-kind), PROMPTS (question.jsonl of collection
# prompts), R (work folder), OUT; sizes Q, MAX_NEW, BATCH; COLLECT_ARGS, more
# spec-collect options (e.g. --verify walk, where the target's forward
# dominates).
set -eu
cd "$(dirname "$0")/../.."
: "${NAME:?}" "${T:?}" "${DRAFT:?}" "${KIND:?}" "${PROMPTS:?}" "${R:?}" "${OUT:?}" "${Q:?}" "${MAX_NEW:?}" "${BATCH:?}"
for f in "$T/config.json" "$DRAFT/config.json" "$PROMPTS"; do
    [ -f "$f" ] || { echo "$NAME: $f is missing" >&2; exit 1; }
done
mkdir -p "$R" "$(dirname "$OUT")"
resume=""; [ -f "$R/traces.h5" ] && resume=--resume
echo "== 1/2 spec-collect: full EAGLE-2 trees on $Q collection prompts (first turns, $MAX_NEW tokens, batch $BATCH)"
bin/spec-collect $resume --target "$T" --draft "$DRAFT" --draft-kind "$KIND" --questions "$PROMPTS" \
    --max-questions "$Q" --max-turns 1 --max-new-tokens "$MAX_NEW" --topk 10 --depth 7 --batch "$BATCH" \
    ${COLLECT_ARGS:-} --out "$R/traces.h5"
echo "== 2/2 spec-train -> $OUT"
bin/spec-train --traces "$R/traces.h5" --out "$OUT" --report "$R/train_report.json" \
    --transform P=log --standardize --epochs 200 --neg-ratio 2.5
