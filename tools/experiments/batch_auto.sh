#!/bin/sh
# make batch-auto (and make table3's step 3b): trees sized from measured
# costs against fixed sizes at batch sizes above 1, on SmolLM2 + the EAGLE
# head in data/smollm2, the first turns of Q (11) questions each of alpaca, sum
# and gsm8k from ../shared/benchmarks, MAX_NEW tokens each, continuous
# batching.  At each of BATCHES, every run its own spec-eval call with ar at
# the same batch size in the same call (REPEATS A/B pairs of whole runs; an
# interval needs two ABBA blocks, REPEATS=4: the default 2 is one block):
#   fixed: chain --draft-len 1, 2 and 4; eagle2 at the paper's sizes (topk
#          10, depth 6, total 60) and a small tree (topk 4, depth 2, total 8)
#   auto:  chain --draft-len auto; eagle2 --topk 10 --depth 6 --total auto;
#          c2t --total auto (beta BETA, topk 10, depth 8) with the classifier
#          CLS (default data/smollm2/classifier.json, trained on SmolLM2's
#          collection prompts)
# -> results/batch_auto/*.json and batch_auto.md (tools/experiments/
# batch_auto_report.py): each run's speedup with its interval, tau, the
# auto runs' chosen sizes and share of cycles without a draft, and auto's
# speedup over the best fixed one.  ARITH as every experiment's
# (tools/experiments/arith.sh); OUT the results directory.
. "$(dirname "$0")/lib.sh"
T=models/smollm2-135m-instruct
D=data/smollm2
B=${SMOLLM2_BENCH:-../shared/benchmarks}
R=${OUT:-results/batch_auto}
Q=${Q:-11}   # 33 questions: batch 32 full
MAX_NEW=${MAX_NEW:-128}
BATCHES=${BATCHES:-"8 32"}
REPEATS=${REPEATS:-2}
BETA=${BETA:-0.5}
MAX_CTX=${MAX_CTX:-2048}
. tools/experiments/arith.sh
need batch-auto "make smollm2" "$T/config.json"
need batch-auto "SMOLLM2_BENCH=DIR" "$B/alpaca/question.jsonl" "$B/sum/question.jsonl" "$B/gsm8k/question.jsonl"
CLS=${CLS:-$D/classifier.json}
[ -f "$CLS" ] || { echo "batch-auto: $CLS is missing (CLS=FILE)" >&2; exit 1; }
mkdir -p "$R"
eagle="--target $T --draft $D/eagle --draft-kind eagle --draft-vocab full $ARITH"
qs="--questions $B/alpaca/question.jsonl --questions $B/sum/question.jsonl --questions $B/gsm8k/question.jsonl"
echo "arithmetic: $(arith_name); $Q questions each of alpaca, sum, gsm8k; $MAX_NEW tokens; batch $BATCHES"
t0=$(date +%s)
run() {   # name batch policy-options...
    name=$1; b=$2; shift 2
    # shellcheck disable=SC2086
    bin/spec-eval $eagle "$@" $qs --max-questions "$Q" --max-turns 1 --max-new-tokens "$MAX_NEW" --max-ctx "$MAX_CTX" \
        --batch "$b" --check-lossless --repeats "$REPEATS" --cost-cache none --quiet --json "$R/${name}_b$b.json" \
        > "$R/${name}_b$b.txt" 2> "$R/${name}_b$b.log" || { echo "batch-auto: spec-eval failed ($name, batch $b): $(tail -1 "$R/${name}_b$b.log")" >&2; exit 1; }
    echo "   $name, batch $b: $(grep "^all " "$R/${name}_b$b.txt")   ($(( $(date +%s) - t0 )) s so far)"
}
for b in $BATCHES; do
    echo "== batch $b"
    for k in 1 2 4; do run "chain$k" "$b" --policy chain --draft-len "$k"; done
    run eagle2_total60 "$b" --policy eagle2 --topk 10 --depth 6 --total 60
    run eagle2_total8 "$b" --policy eagle2 --topk 4 --depth 2 --total 8
    run chain_auto "$b" --policy chain --draft-len auto
    run eagle2_auto "$b" --policy eagle2 --topk 10 --depth 6 --total auto
    run c2t_auto "$b" --policy c2t --classifier "$CLS" --beta "$BETA" --topk 10 --depth 8 --total auto
done
python3 tools/experiments/batch_auto_report.py "$R" $BATCHES
