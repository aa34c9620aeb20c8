#!/bin/sh
# The tile multiply against the pair dot product on this CPU (not part of
# make test): SmolLM2 BF16 with --cpu-fast-gemm amx against on (both with
# --kv-dtype bf16), REPS rounds in ABBA order (odd rounds run amx first),
# every figure the median over rounds:
#   bench_forward: tg128 (one sequence), forwards of n tokens (pp and tree
#   n = 4..128) and batched plain decoding at batch 1, 8 and 32 (S_TG);
#   spec-eval eagle2 with its plain sizes (--total auto) at --batch 1 and
#   --batch 8 on held-out training prompts (not a benchmark): tok/s of the
#   policy and of its own ar and the A/B speedup (a lossless failure stops
#   the script).
#   REPS=2 (default), Q=8 prompts, NEW=96 tokens each
# Needs a CPU with AMX-BF16 and a build for it (make ARCH=-march=native).
. "$(dirname "$0")/lib.sh"
REPS=${REPS:-2}
Q=${Q:-8}
NEW=${NEW:-96}
M=models/smollm2-135m-instruct
P=data/smollm2/prompts/heldout.jsonl
[ -f $M/model.safetensors ] || { echo "amx: $M is missing (make smollm2)" >&2; exit 1; }
[ -x build/tests/bench_forward ] && [ -x bin/spec-eval ] || { echo "amx: build it first (make)" >&2; exit 1; }
build/tests/bench_forward --cpu-fast-gemm amx --tg-only $M > /dev/null 2>&1 ||
    { echo "amx: --cpu-fast-gemm amx is refused here (no AMX-BF16 on this CPU or build)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

forward() {   # forward GEMM ROUND: bench_forward's rows as "name value" lines
    build/tests/bench_forward --cpu-fast-gemm "$1" --kv-dtype bf16 $M 2>/dev/null |
        awk '/tg128/ { print "tg128", $2 } /^  [0-9]+ / { print "pp" $1, $2; print "tree" $1, $5 }' > "$T/fw_$1_$2"
    build/tests/bench_forward --cpu-fast-gemm "$1" --kv-dtype bf16 --batched 1,8,32 --npp 64 --ntg 32 $M 2>/dev/null |
        awk '/batch / { print "batch" $2 "_tg", $7 }' >> "$T/fw_$1_$2"
}
spec() {   # spec GEMM BATCH ROUND: eagle2's and ar's tok/s
    bin/spec-eval --target $M --draft data/smollm2/eagle --policy eagle2 --questions $P --max-questions "$Q" \
        --max-turns 1 --max-new-tokens "$NEW" --batch "$2" --cpu-fast-gemm "$1" --kv-dtype bf16 --check-lossless \
        --quiet --json "$T/s.json" 2>"$T/s.err" || { echo "amx: spec-eval $1 batch $2 failed: $(tail -1 "$T/s.err")" >&2; exit 1; }
    python3 - "$T/s.json" "$2" >> "$T/fw_$1_$3" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["total"]
b = sys.argv[2]
print(f"eagle2_b{b}", t["v"])          # the policy's tok/s (its first turn calibrates the costs)
print(f"ar_b{b}", t["v_ar"])           # its own ar's, same process
print(f"speedup_b{b}", t["speedup"])   # the A/B figure (median over ABBA blocks)
EOF
}

r=1
while [ $r -le "$REPS" ]; do
    order="on amx"
    [ $((r % 2)) = 1 ] && order="amx on"
    for g in $order; do
        echo "amx: round $r/$REPS, $g" >&2
        forward $g $r
        spec $g 1 $r
        spec $g 8 $r
    done
    r=$((r + 1))
done

printf '%-12s %10s %10s %8s\n' "row" "on" "amx" "amx/on"
for name in $(awk '{ print $1 }' "$T/fw_on_1"); do
    on=$(cat "$T"/fw_on_* | awk -v n="$name" '$1 == n { print $2 }' | median)
    amx=$(cat "$T"/fw_amx_* | awk -v n="$name" '$1 == n { print $2 }' | median)
    awk -v n="$name" -v a="$on" -v b="$amx" 'BEGIN { printf "%-12s %10.2f %10.2f %8.2f\n", n, a, b, (a > 0 ? b / a : 0) }'
done
