#!/bin/sh
# Every tree policy on the demo test prompts, greedy, one markdown table:
#   policy | draft and settings | tau | gamma (k) | tokens/s | speedup over ar
# (ar measured once in the same run; the rows append to OUT.csv, spec-eval's
# policy,param,value,tau,gamma,v format).
# Usage: tools/policy_table.sh [OUT.csv]      (make first; about 5 minutes on 2 cores)
# Sizes: TABLE_Q questions per test file (default 12), TABLE_MAX_NEW (64).
set -eu
cd "$(dirname "$0")/.."
D=data/demo
Q=${TABLE_Q:-12}
MAX_NEW=${TABLE_MAX_NEW:-64}
CSV=${1:-results/policies.csv}
mkdir -p "$(dirname "$CSV")"
rm -f "$CSV"
qs="--questions $D/prompts/code_test.jsonl --questions $D/prompts/continue_test.jsonl --max-questions $Q"
base="--target $D/target --template none --max-new-tokens $MAX_NEW $qs --no-baseline --csv $CSV"
eagle="--draft $D/eagle --draft-kind eagle"
lm="--draft $D/draft --draft-kind lm"

run() {   # label args...
    label=$1; shift
    echo "  $label" >&2
    bin/spec-eval $base --label "$label" "$@" > /dev/null
}
run "draft=-"                    --policy ar
run "draft=lm/len4"              --policy chain $lm --draft-len 4
run "draft=eagle/len4"           --policy chain $eagle --draft-len 4
run "draft=eagle/len8/early-c2t" --policy chain $eagle --draft-len 8 --early-stop c2t
run "draft=eagle/eagle1-tree"    --policy static $eagle
run "draft=eagle/total25"        --policy eagle2 $eagle --total 25
run "draft=eagle/total60"        --policy eagle2 $eagle
run "draft=eagle/beta0.5"        --policy c2t $eagle
run "draft=eagle/defaults"       --policy sage $eagle
run "draft=eagle/w4-16"          --policy wetap $eagle --param wetap_wmin=4 --param wetap_wmax=16

awk -F, 'NR == 1 { next }
    { pol[NR] = $1; set[NR] = $3; tau[NR] = $4; g[NR] = $5; v[NR] = $6; if ($1 == "ar") var = $6 }
    END {
        print "| policy | draft / settings | tau | gamma (k) | tokens/s | speedup |"
        print "|---|---|---|---|---|---|"
        for (i = 2; i <= NR; i++)
            printf "| %s | %s | %.2f | %.2f | %.1f | %.2f |\n", pol[i], set[i], tau[i], g[i] / 1000, v[i],
                (var > 0 ? v[i] / var : 0)
    }' "$CSV"
