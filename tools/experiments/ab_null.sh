#!/bin/sh
# A plain-decoding policy against its own ar (not part of make test): the
# speedup spec-eval reports for `--policy ar` (ar A/B against ar, so 1.0 is the
# truth) in RUNS runs on an idle machine and RUNS runs beside LOADED busy
# loops; for each run its speedup, its interval and that interval's coverage
# (JSON speedup_ci95, speedup_ci_level), then how many runs lie in
# [0.95, 1.05] and how many intervals cover 1.0.
#   RUNS=10, LOADS="0 1" (busy loops per condition), Q=20 mt_bench first
#   turns (10 ABBA blocks), MAX_NEW=64, ARITH="" (the plain command's own
#   arithmetic; e.g. "--cpu-fast-gemm on --kv-dtype bf16" to pin it)
# Needs ../shared/benchmarks (SMOLLM2_BENCH) and make smollm2's target.
. "$(dirname "$0")/lib.sh"
RUNS=${RUNS:-10}
Q=${Q:-20}
MAX_NEW=${MAX_NEW:-64}
ARITH=${ARITH:-}
T=models/smollm2-135m-instruct
B=${SMOLLM2_BENCH:-../shared/benchmarks}
[ -f $T/config.json ] || { echo "ab_null: $T is missing (make smollm2)" >&2; exit 1; }
[ -f "$B/mt_bench/question.jsonl" ] || { echo "ab_null: $B/mt_bench/question.jsonl is missing" >&2; exit 1; }
. tools/experiments/busy.sh
out=$(mktemp -d)
trap 'load 0; rm -rf "$out"' EXIT INT TERM
total=$(( RUNS * $(echo "${LOADS:-0 1}" | wc -w) ))
done_runs=0
start=$(date +%s)
printf '%-10s %4s %8s %18s %7s %8s %7s\n' condition run speedup interval level inside covers
for busy in ${LOADS:-0 1}; do
    load "$busy"
    sleep 1
    case $busy in 0) c=idle ;; *) c="loaded$busy" ;; esac
    r=1
    while [ $r -le "$RUNS" ]; do
        # shellcheck disable=SC2086
        bin/spec-eval --target $T $ARITH --policy ar --questions "$B/mt_bench/question.jsonl" --max-questions "$Q" \
            --max-turns 1 --max-new-tokens "$MAX_NEW" --quiet --json "$out/run.json" >/dev/null 2>"$out/err" ||
            { echo "ab_null: spec-eval failed: $(tail -1 "$out/err")" >&2; exit 1; }
        python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["total"]
s, (lo, hi), lv = t["speedup"], t["speedup_ci95"], t["speedup_ci_level"]
print("%-10s %4s %8.3f    [%.3f, %.3f] %7.3f %8s %7s" % (sys.argv[2], sys.argv[3], s, lo, hi, lv,
      "yes" if 0.95 <= s <= 1.05 else "NO", "yes" if lo <= 1 <= hi else "NO"))' "$out/run.json" "$c" "$r" |
            tee -a "$out/rows"
        done_runs=$((done_runs + 1))
        el=$(( $(date +%s) - start ))
        echo "ab_null: $done_runs/$total runs, $el s, ETA $(( el * (total - done_runs) / done_runs )) s" >&2
        r=$((r + 1))
    done
done
load 0
awk '{ n[$1]++; if ($7 == "yes") in_[$1]++; if ($8 == "yes") cov[$1]++ }
     END { for (c in n) printf "%s: %d of %d runs in [0.95, 1.05], %d of %d intervals cover 1.0\n", c, in_[c], n[c], cov[c], n[c] }' \
    "$out/rows" | sort
