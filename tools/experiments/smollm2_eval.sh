#!/bin/sh
# make smollm2-eval: the C2T pipeline on SmolLM2-135M-Instruct (make smollm2)
# with the drafts trained for it (data/smollm2, tools/models/smollm2_drafts.py):
#   1. spec-collect: full EAGLE-2 trees (topk 10, depth 7) on the first turns
#      of data/smollm2/prompts/collect.jsonl (not from any benchmark)
#      -> results/smollm2/traces.h5
#   2. spec-train: the classifier on those traces -> results/smollm2/classifier.json
#   3. spec-eval on mt_bench first turns at temperature 0: ar, EAGLE-2 at its
#      defaults, C2T at beta 0.5 (both checked lossless against ar) and chain
#      with the draft LM -> results/smollm2/table.txt (speedups against the
#      ar row; each lossless-checked run also measures ar in its JSON)
#   4. --check-lossless for every policy on LOSSLESS_Q questions of each of the
#      six benchmarks, every turn -> results/smollm2/lossless.txt
# Benchmarks are read from ../shared/benchmarks (SMOLLM2_BENCH to override);
# without them steps 3-4 are skipped with a line saying so.  Sizes: COLLECT_Q,
# COLLECT_MAX_NEW, EVAL_Q, EVAL_MAX_NEW, LOSSLESS_Q, LOSSLESS_MAX_NEW;
# SKIP_EVAL=1 leaves step 3 out (its results stay), LOSSLESS_Q=0 step 4.
# DEVICE=cpu|cuda passes --device to spec-collect and spec-eval (their default
# is auto: the GPU when one is visible).  HEAD=eagle3 runs it all with the
# EAGLE-3 head models/smollm2-eagle3 (tools/models/smollm2_drafts.py --stages
# features3,eagle3; not shipped) instead of the EAGLE head data/smollm2/eagle,
# into results/smollm2-eagle3.  Without data/smollm2/draft (the GPU
# machine's carried tree leaves it out) the chain rows are skipped.
. "$(dirname "$0")/lib.sh"
T=models/smollm2-135m-instruct
D=data/smollm2
HEAD=${HEAD:-eagle}
case $HEAD in
eagle) H=$D/eagle R=results/smollm2 ;;
eagle3) H=models/smollm2-eagle3 R=results/smollm2-eagle3 ;;
*) echo "smollm2-eval: HEAD=$HEAD: eagle or eagle3" >&2; exit 1 ;;
esac
B=${SMOLLM2_BENCH:-../shared/benchmarks}
COLLECT_Q=${COLLECT_Q:-20}
COLLECT_MAX_NEW=${COLLECT_MAX_NEW:-48}
EVAL_Q=${EVAL_Q:-40}
EVAL_MAX_NEW=${EVAL_MAX_NEW:-128}
LOSSLESS_Q=${LOSSLESS_Q:-10}
LOSSLESS_MAX_NEW=${LOSSLESS_MAX_NEW:-32}
need smollm2-eval "make smollm2; data/smollm2/README.md" "$T/config.json" "$H/config.json" "$D/prompts/collect.jsonl"
mkdir -p "$R"
dev=${DEVICE:+--device $DEVICE}
eagle="$dev --target $T --draft $H --draft-kind $HEAD"
lm=""; [ -f "$D/draft/config.json" ] && lm="$dev --target $T --draft $D/draft --draft-kind lm"
[ -n "$lm" ] || echo "smollm2-eval: $D/draft is missing: the chain rows are skipped" >&2

echo "== 1/4 spec-collect: full EAGLE-2 trees on $COLLECT_Q collect prompts (first turns)"
collect "$R/traces.h5" $eagle --questions "$D/prompts/collect.jsonl" --max-questions "$COLLECT_Q" --max-turns 1 \
    --max-new-tokens "$COLLECT_MAX_NEW" --topk 10 --depth 7
stamp

echo "== 2/4 spec-train"
train_classifier "$R/classifier.json" "$R/train_report.json" 200 --traces "$R/traces.h5"
stamp

if [ ! -f "$B/mt_bench/question.jsonl" ]; then
    echo "smollm2-eval: $B/mt_bench/question.jsonl absent: spec-eval steps skipped" >&2
    exit 0
fi
if [ -z "${SKIP_EVAL:-}" ]; then
echo "== 3/4 spec-eval on $EVAL_Q mt_bench first turns, $EVAL_MAX_NEW tokens: ar, eagle2, c2t, chain"
rm -f "$R/policies.csv"
ev() { bin/spec-eval $dev --target $T --questions "$B/mt_bench/question.jsonl" --max-questions "$EVAL_Q" --max-turns 1 \
    --max-new-tokens "$EVAL_MAX_NEW" --csv "$R/policies.csv" --draft-vocab full "$@" > /dev/null; }
ev --policy ar --no-baseline --label settings=-
# the paper's fixed sizes (a plain command's sizes come from measured costs on a CPU)
ev --policy eagle2 $eagle --topk 10 --depth 6 --total 60 --check-lossless --label settings=k10d6t60 \
    --json "$R/eval_eagle2.json"
ev --policy c2t $eagle --classifier "$R/classifier.json" --beta 0.5 --total all --check-lossless \
    --label settings=beta0.5 --json "$R/eval_c2t.json"
[ -z "$lm" ] || ev --policy chain $lm --draft-len 4 --check-lossless --label settings=lm/len4
stamp
fi
awk -F, 'NR > 1 { p[NR] = $1; s[NR] = $3; t[NR] = $4; g[NR] = $5; v[NR] = $6
                  sp[NR] = ($7 == "" ? "-" : sprintf("%.2f [%.2f, %.2f]", $7, $8, $9)) }
    END {
        printf "%-8s %-10s %9s %7s %9s  %s\n", "policy", "settings", "gamma(k)", "tau", "v", "speedup A/B [95%]"
        for (i = 2; i <= NR; i++)
            printf "%-8s %-10s %9.2f %7.2f %9.1f  %s\n", p[i], s[i], g[i] / 1000, t[i], v[i], (p[i] == "ar" ? "(the baseline)" : sp[i])
    }' "$R/policies.csv" | tee "$R/table.txt"

if [ "$LOSSLESS_Q" -eq 0 ]; then
    echo "== 4/4 lossless: skipped (LOSSLESS_Q=0)"
    exit 0
fi
echo "== 4/4 lossless: every policy, $LOSSLESS_Q questions of each benchmark, every turn, $LOSSLESS_MAX_NEW tokens"
qs=""
for b in mt_bench humaneval gsm8k alpaca sum qa; do qs="$qs --questions $B/$b/question.jsonl"; done
: > "$R/lossless.txt"
for pol in ${lm:+chain} static eagle2 c2t sage wetap; do
    case $pol in
    chain) args="$lm" ;;
    c2t) args="$eagle --classifier $R/classifier.json" ;;
    *) args="$eagle" ;;
    esac
    if bin/spec-eval $args --policy $pol $qs --max-questions "$LOSSLESS_Q" --max-new-tokens "$LOSSLESS_MAX_NEW" \
        --check-lossless > /dev/null; then
        echo "$pol: lossless" | tee -a "$R/lossless.txt"
    else
        echo "$pol: NOT LOSSLESS" | tee -a "$R/lossless.txt"
    fi
done
stamp
