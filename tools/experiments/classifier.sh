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
. "$(dirname "$0")/lib.sh"
: "${NAME:?}" "${T:?}" "${DRAFT:?}" "${KIND:?}" "${PROMPTS:?}" "${R:?}" "${OUT:?}" "${Q:?}" "${MAX_NEW:?}" "${BATCH:?}"
need "$NAME" "" "$T/config.json" "$DRAFT/config.json" "$PROMPTS"
mkdir -p "$R" "$(dirname "$OUT")"
echo "== 1/2 spec-collect: full EAGLE-2 trees on $Q collection prompts (first turns, $MAX_NEW tokens, batch $BATCH)"
collect "$R/traces.h5" --target "$T" --draft "$DRAFT" --draft-kind "$KIND" --questions "$PROMPTS" \
    --max-questions "$Q" --max-turns 1 --max-new-tokens "$MAX_NEW" --topk 10 --depth 7 --batch "$BATCH" ${COLLECT_ARGS:-}
echo "== 2/2 spec-train -> $OUT"
train_classifier "$OUT" "$R/train_report.json" 200 --traces "$R/traces.h5"
