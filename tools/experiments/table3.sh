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
#   3. trees at batch TREE_BATCH, which the paper could not run: eagle2
#      (defaults) against c2t, c2t's beta the one of BETAS whose tau comes
#      closest to eagle2's on held-out training prompts (TUNE_Q of
#      data/smollm2/prompts/heldout.jsonl, not a benchmark), then both on
#      TREE_Q questions of each benchmark (every size given: a batched run
#      without one sizes its trees from costs)
#   3b. auto sizes against fixed ones at AUTO_BATCHES (tools/experiments/
#      batch_auto.sh, its 11 questions each) -> results/table3/auto/
#   4. the anchor: batched plain decoding, ours (build/tests/bench_forward
#      --batched: F32 products and KV cache, --kv-dtype bf16, and with
#      --cpu-fast-gemm on as well, llama.cpp's arithmetic) against
#      llama.cpp's llama-batched-bench (F16 KV cache) on the same BF16
#      weights, NPP-token prompts and NTG steps at each of BATCHES (skipped,
#      with a line, where llama.cpp cannot be built)
#   5. tools/experiments/table3_report.py -> results/table3/table3.csv,
#      table3.md and table3.png (speedup against batch size), copied to
#      docs/paper/
# Sizes: Q questions of each benchmark (default 32), MAX_NEW tokens each
# (128), BATCHES ("1 8 32 64"), MAX_CTX KV slots per sequence (2048),
# BETA the C2T threshold of the chain (0.5), COLLECT_Q (20), TREE_BATCH (8),
# TREE_Q (8), TUNE_Q (16), BETAS ("0.3 0.4 0.5 0.6"), NPP and NTG (128), REPEATS (3),
# AUTO_BATCHES ("8 32");
# ARITH, spec-eval's arithmetic options for every decoding run: by default
# llama.cpp's (--cpu-fast-gemm on --kv-dtype bf16) where the CPU has
# AVX512-BF16, else "" (F32 products and cache); each report records it;
# DEVICE (cpu; cuda runs every spec-collect and spec-eval there and leaves
# out step 4, the CPU anchor).
. "$(dirname "$0")/lib.sh"
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
TREE_BATCH=${TREE_BATCH:-8}
TREE_Q=${TREE_Q:-8}
AUTO_BATCHES=${AUTO_BATCHES:-"8 32"}
TUNE_Q=${TUNE_Q:-16}
REPEATS=${REPEATS:-3}   # A/B pairs of whole runs per speedup (spec-eval --repeats): the interval
BETAS=${BETAS:-"0.3 0.4 0.5 0.6"}
NPP=${NPP:-128}
NTG=${NTG:-128}
DEV=${DEVICE:-cpu}
. tools/experiments/arith.sh
need table3 "make smollm2; data/smollm2/README.md" "$T/config.json" "$D/eagle/config.json" "$D/prompts/collect.jsonl"
need table3 "SMOLLM2_BENCH=DIR" "$B/alpaca/question.jsonl" "$B/sum/question.jsonl" "$B/gsm8k/question.jsonl"
mkdir -p "$R"
eagle="--target $T --draft $D/eagle --draft-kind eagle --device $DEV --draft-vocab full"
echo "arithmetic: $(arith_name)"

CLS=results/smollm2/classifier.json
if [ ! -f "$CLS" ]; then
    CLS=$R/classifier.json
    echo "== 1/5 the classifier: full trees on $COLLECT_Q collection prompts, spec-train"
    collect "$R/traces.h5" $eagle --questions "$D/prompts/collect.jsonl" --max-questions "$COLLECT_Q" --max-turns 1 \
        --max-new-tokens 48 --topk 10 --depth 7
    bin/spec-train "$R/traces.h5" --out "$CLS" --report "$R/train_report.json" --quiet
else
    echo "== 1/5 the classifier: $CLS (make smollm2-eval's)"
fi
stamp

echo "== 2/5 spec-eval: $Q questions each of alpaca, sum, gsm8k; batch $BATCHES; chain of 4, static and C2T early stop"
qs="--questions $B/alpaca/question.jsonl --questions $B/sum/question.jsonl --questions $B/gsm8k/question.jsonl"
for b in $BATCHES; do
    for m in static c2t; do
        extra=""; [ "$m" = c2t ] && extra="--early-stop c2t --classifier $CLS --beta $BETA"
        static=""; [ "$b" -gt 1 ] && static=--static-batches
        echo "-- batch $b, $m"
        # shellcheck disable=SC2086
        bin/spec-eval $eagle $ARITH --policy chain --draft-len 4 $extra $qs --max-questions "$Q" --max-turns 1 \
            --max-new-tokens "$MAX_NEW" --max-ctx "$MAX_CTX" --batch "$b" $static --check-lossless --repeats "$REPEATS" --quiet \
            --json "$R/eval_${m}_b$b.json" > "$R/eval_${m}_b$b.txt" || { echo "table3: spec-eval failed (batch $b, $m)" >&2; exit 1; }
        tail -2 "$R/eval_${m}_b$b.txt"
    done
    stamp
done

echo "== 3/5 trees at batch $TREE_BATCH: eagle2 against c2t at equal tau"
tune="--questions $D/prompts/heldout.jsonl --max-questions $TUNE_Q --max-turns 1 --max-new-tokens $MAX_NEW --max-ctx $MAX_CTX --batch $TREE_BATCH --no-baseline --quiet"
# shellcheck disable=SC2086
bin/spec-eval $eagle $ARITH --policy eagle2 --total 60 $tune --json "$R/tune_eagle2.json" >/dev/null ||
    { echo "table3: spec-eval failed (tuning, eagle2)" >&2; exit 1; }
for beta in $BETAS; do
    # shellcheck disable=SC2086
    bin/spec-eval $eagle $ARITH --policy c2t --classifier "$CLS" --beta "$beta" --total all $tune --json "$R/tune_c2t_$beta.json" >/dev/null ||
        { echo "table3: spec-eval failed (tuning, c2t beta $beta)" >&2; exit 1; }
done
TREE_BETA=$(python3 -c '
import json, sys
tau = lambda f: json.load(open(f))["total"]["tau"]
ref = tau(sys.argv[1] + "/tune_eagle2.json")
print(min(sys.argv[2:], key=lambda b: abs(tau(sys.argv[1] + "/tune_c2t_" + b + ".json") - ref)))' "$R" $BETAS)
echo "   c2t beta $TREE_BETA: tau closest to eagle2's on $TUNE_Q held-out prompts"
for m in eagle2 c2t; do
    extra="--total 60"; [ "$m" = c2t ] && extra="--classifier $CLS --beta $TREE_BETA --total all"
    # shellcheck disable=SC2086
    bin/spec-eval $eagle $ARITH --policy $m $extra $qs --max-questions "$TREE_Q" --max-turns 1 --max-new-tokens "$MAX_NEW" \
        --max-ctx "$MAX_CTX" --batch "$TREE_BATCH" --static-batches --check-lossless --repeats "$REPEATS" --quiet \
        --json "$R/tree_${m}_b$TREE_BATCH.json" > "$R/tree_${m}_b$TREE_BATCH.txt" || { echo "table3: spec-eval failed (trees, $m)" >&2; exit 1; }
    tail -2 "$R/tree_${m}_b$TREE_BATCH.txt"
done
stamp

if [ "$DEV" != cpu ]; then
    echo "== 3b/5 auto sizes against fixed ones: left out (DEVICE=$DEV: auto sizes are the CPU's default)"
else
    echo "== 3b/5 auto sizes against fixed ones at batch $AUTO_BATCHES (tools/experiments/batch_auto.sh)"
    ARITH="$ARITH" CLS=$CLS OUT=$R/auto BATCHES=$AUTO_BATCHES MAX_NEW=$MAX_NEW REPEATS=$REPEATS MAX_CTX=$MAX_CTX tools/experiments/batch_auto.sh
    stamp
fi

if [ "$DEV" != cpu ]; then
    echo "== 4/5 the anchor: left out (DEVICE=$DEV; bench_forward and llama.cpp's anchor are CPU figures)"
else
echo "== 4/5 the anchor: batched plain decoding, ours against llama.cpp ($NPP-token prompts, $NTG steps)"
sizes=$(echo $BATCHES | tr ' ' ',')
rm -f "$R/anchor_ours.tsv" "$R/anchor_llamacpp.txt"
build/tests/bench_forward --tsv "$R/anchor_ours.tsv" --batched "$sizes" --npp "$NPP" --ntg "$NTG" $T
build/tests/bench_forward --tsv "$R/anchor_ours.tsv" --kv-dtype bf16 --batched "$sizes" --npp "$NPP" --ntg "$NTG" $T
# llama.cpp's arithmetic: BF16 products, a 16-bit cache (needs AVX512-BF16)
build/tests/bench_forward --tsv "$R/anchor_ours.tsv" --cpu-fast-gemm on --kv-dtype bf16 --batched "$sizes" \
    --npp "$NPP" --ntg "$NTG" $T || echo "table3: --cpu-fast-gemm is not available on this build; its anchor rows are left out"
if LB=$(tools/experiments/llamacpp.sh) && tools/experiments/llamacpp.sh gguf bf16 >/dev/null; then
    maxb=$(echo $BATCHES | tr ' ' '\n' | sort -n | tail -1)
    "$LB/llama-batched-bench" -m models/smollm2-135m-instruct.bf16.gguf -t 2 -c $((maxb * (NPP + NTG))) -b 2048 \
        -ub 512 -npp "$NPP" -ntg "$NTG" -npl "$sizes" > "$R/anchor_llamacpp.txt" 2> "$R/anchor_llamacpp.log" ||
        { echo "table3: llama-batched-bench failed, see $R/anchor_llamacpp.log" >&2; rm -f "$R/anchor_llamacpp.txt"; }
else
    echo "table3: llama.cpp is not available; the anchor has ours only"
fi
fi
stamp

echo "== 5/5 the table"
python3 tools/experiments/table3_report.py "$R" --trees "$TREE_BATCH" $BATCHES
mkdir -p docs/paper
for f in table3.csv table3.md table3.png; do [ -f "$R/$f" ] && cp "$R/$f" docs/paper/; done
echo "copied to docs/paper/: table3.csv, table3.md, table3.png"
