#!/bin/sh
# make table3: the C2T paper's Table 3 (its batch experiment, §5.4) on
# SmolLM2 + data/smollm2's EAGLE head, on this machine: a mix of alpaca, sum
# and gsm8k first turns from ../shared/benchmarks decoded at several batch
# sizes in chain mode with at most 4 draft tokens a cycle: EAGLE's static
# chain (--policy chain --draft-len 4) against C2T's early stop (--early-stop
# c2t, the classifier trained on SmolLM2's collection prompts), each with
# plain decoding (ar) at the same batch size in the same spec-eval run.
#   1. the classifier: results/smollm2/classifier.json when make smollm2-eval
#      made it, else spec-collect on COLLECT_Q collection prompts + spec-train
#   2. spec-eval --batch B --static-batches for B in BATCHES, both methods
#   3. tools/experiments/table3_report.py -> results/table3/table3.csv,
#      table3.md and table3.png (speedup against batch size)
# Sizes: Q questions of each benchmark (default 32), MAX_NEW tokens each
# (128), BATCHES ("1 8 32 64"), MAX_CTX KV slots per sequence (2048),
# BETA the C2T threshold (0.5), COLLECT_Q (20).
set -eu
cd "$(dirname "$0")/../.."
T=models/smollm2-135m-instruct
D=data/smollm2
R=results/table3
B=${SMOLLM2_BENCH:-../shared/benchmarks}
Q=${Q:-32}
MAX_NEW=${MAX_NEW:-128}
BATCHES=${BATCHES:-"1 8 32 64"}
MAX_CTX=${MAX_CTX:-2048}   # sum's articles run to ~1,200 tokens; SmolLM2 needs ~94 MB a slot at 2048
BETA=${BETA:-0.5}
COLLECT_Q=${COLLECT_Q:-20}
for f in "$T/config.json" "$D/eagle/config.json" "$D/prompts/collect.jsonl"; do
    [ -f "$f" ] || { echo "table3: $f is missing (make smollm2; data/smollm2/README.md)" >&2; exit 1; }
done
for b in alpaca sum gsm8k; do
    [ -f "$B/$b/question.jsonl" ] || { echo "table3: $B/$b/question.jsonl is missing (SMOLLM2_BENCH=DIR)" >&2; exit 1; }
done
mkdir -p "$R"
t0=$(date +%s)
stamp() { echo "   ($(( $(date +%s) - t0 )) s so far)"; }
eagle="--target $T --draft $D/eagle --draft-kind eagle"

CLS=results/smollm2/classifier.json
if [ ! -f "$CLS" ]; then
    CLS=$R/classifier.json
    echo "== 1/3 the classifier: full trees on $COLLECT_Q collection prompts, spec-train"
    resume=""; [ -f "$R/traces.h5" ] && resume=--resume
    bin/spec-collect $resume $eagle --questions "$D/prompts/collect.jsonl" --max-questions "$COLLECT_Q" --max-turns 1 \
        --max-new-tokens 48 --topk 10 --depth 7 --out "$R/traces.h5"
    bin/spec-train "$R/traces.h5" --out "$CLS" --report "$R/train_report.json" --quiet
else
    echo "== 1/3 the classifier: $CLS (make smollm2-eval's)"
fi
stamp

echo "== 2/3 spec-eval: $Q questions each of alpaca, sum, gsm8k; batch $BATCHES; chain of 4, static and C2T early stop"
qs="--questions $B/alpaca/question.jsonl --questions $B/sum/question.jsonl --questions $B/gsm8k/question.jsonl"
for b in $BATCHES; do
    for m in static c2t; do
        extra=""; [ "$m" = c2t ] && extra="--early-stop c2t --classifier $CLS --beta $BETA"
        static=""; [ "$b" -gt 1 ] && static=--static-batches
        echo "-- batch $b, $m"
        # shellcheck disable=SC2086
        bin/spec-eval $eagle --policy chain --draft-len 4 $extra $qs --max-questions "$Q" --max-turns 1 \
            --max-new-tokens "$MAX_NEW" --max-ctx "$MAX_CTX" --batch "$b" $static --check-lossless --quiet \
            --json "$R/eval_${m}_b$b.json" > "$R/eval_${m}_b$b.txt" || { echo "table3: spec-eval failed (batch $b, $m)" >&2; exit 1; }
        tail -2 "$R/eval_${m}_b$b.txt"
    done
    stamp
done

echo "== 3/3 the table"
python3 tools/experiments/table3_report.py "$R" $BATCHES
