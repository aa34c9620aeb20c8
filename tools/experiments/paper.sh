#!/bin/sh
# make paper: the C2T paper's experiments on SmolLM2-135M-Instruct
# (make smollm2) with its EAGLE head (data/smollm2/eagle) -> results/paper/.
#   1. spec-collect: full EAGLE-2 trees (topk 10, depth 7: 711 nodes, node
#      depths 1..8 = C2T's d_max) on the first turns of
#      data/smollm2/prompts/collect.jsonl (training prompts, none from a
#      benchmark), one trace file per prompt category (code, math, qa, ...:
#      results/paper/traces_<category>.h5) so that the transfer experiment can
#      train on one source and test on the others.  The six files together are
#      "the collect traces" (spec-train and spec-analyze add several files up;
#      spec-collect merge refuses files written from different question files).
#      A killed run is continued with --resume; changing COLLECT_Q or the
#      token count needs the old traces_*.h5 deleted (--resume says so).
#   2. spec-train: the classifier on all collect traces -> classifier.json,
#      and one per category -> transfer/classifier_<category>.json (flags as
#      make smollm2-eval: log P standardised, 2.5 negatives per positive,
#      chosen on the demo's training traces, never on a benchmark).
#   3. spec-analyze: the paper's trace tables on the collect traces with the
#      classifier (analyze/, analyze.txt), the same on the demo trace
#      (results/traces.h5 and results/classifier.json as make demo leaves
#      them; made here by tools/experiments/demo.sh --traces-only, ~3 min,
#      when absent; SKIP_DEMO=1 leaves the demo columns out); transfer: every
#      classifier (each category's, all categories', the demo's) on every
#      category's traces and the demo's -> transfer/<classifier>_on_<trace>/.
#   4. spec-eval on the six benchmarks (EVAL_Q questions each, every turn,
#      temperature 0): ar; EAGLE-2 at the paper defaults (topk 10, depth 6,
#      total 60, --check-lossless) and a total sweep; C2T at topk 10, d_max 8
#      with a beta sweep (beta 0.5 --check-lossless) -> eval/*.json.  The
#      beta values are fixed in advance (0.5 is the paper's default), nothing
#      is chosen on benchmark questions.  Finished runs are kept and skipped
#      when the script is run again with the same sizes.
#      EAGLE-2's sweep is replayed (E2_REPLAY=1): one spec-collect
#      --every-position run on the benchmark questions (eval/positions.h5,
#      a full tree at every position of the greedy answers, grown
#      POS_DEPTH=E2_EQ_DEPTH steps deep, so that depths 6 and E2_EQ_DEPTH
#      replay) gives
#      every total by spec-analyze replay (eval/replay/), exactly the
#      decoding run's τ and γ (train/replay.h; tested against spec-eval in
#      test_collect), for about 2.5 decoding runs' time however many
#      totals.  Totals that were decoded (60, the headline, always) keep
#      their decoded JSON; the report compares it with the replay of the
#      same total question by question.  E2_REPLAY=0 decodes every total.
#      The same trace also gives EAGLE-2 with one threshold on P instead of
#      a fixed total (--param min_p, E2_MIN_PS, total all) at depth 6
#      (EAGLE-2's pool) and E2_EQ_DEPTH: what sizing each tree by the
#      draft's own confidence saves without a classifier; and EAGLE-2's
#      totals at E2_EQ_DEPTH (eval/replay/eagle2_d<E2_EQ_DEPTH>_total*.json):
#      C2T against EAGLE-2 given the same tree depth.  E2_EQ_DEPTH is
#      C2T_DEPTH - 1: EAGLE-2's --depth counts expansion steps after the
#      root's, so its deepest nodes sit at depth + 1, while C2T's d_max is
#      the deepest node itself (Algorithm 1); EAGLE-2 --depth 7 and C2T
#      --depth 8 grow the same trees before pruning.
#   5. tools/experiments/paper_report.py -> report.md (Table 2, tau-gamma
#      curves with the gamma reduction at equal tau, transfer, analyses, goal
#      check) + CSVs and PNGs; tools/experiments/recall_bound.py on the traces
#      when the goal is missed.
# Benchmarks: ../shared/benchmarks/<name>/question.jsonl (PAPER_BENCH to
# override); without them step 4 is skipped with one line and the report has
# the trace parts only.
#
# Target work: spec-collect and the sweeps run with --verify walk (VERIFY):
# the target forwards only each cycle's accepted path, one token at a time,
# so a tree costs its drafting, not its verification (711-node trees cost
# ~1 s each to verify on a 2-core CPU); tokens, labels, tau and gamma are
# those of verifying the whole tree (docs/commands.md, --verify; tested in
# test_cycle).  Only the speed runs (step 4b) verify trees, as users decode.
# ARITH (tools/experiments/arith.sh): llama.cpp's arithmetic where the CPU
# has AVX512-BF16, under which a walk's trees equal the tree forward's bit
# for bit at every size; recorded in every JSON and trace.
#
# Sizes (env vars; docs/results.md has the wall time they take):
#   COLLECT_Q=30 prompts per category of data/smollm2/prompts/collect.jsonl
#   (~155 prompts: some categories have fewer), COLLECT_MAX_NEW=128 tokens,
#   COLLECT_DEPTH=7 (711-node trees), BATCH=8 sequences at once: ~6,000
#   trees and over 10,000 accepted nodes for the classifier.
#   EVAL_Q=40 questions per benchmark, EVAL_TURNS=1 (first turns; 0: every
#   turn), EVAL_MAX_NEW=128 tokens; C2T_BETAS below, one walk run each (~6
#   min at these sizes on 2 cores); E2_TOTALS below, replayed (seconds each)
#   after one collection of every position, or with E2_REPLAY=0 one walk run
#   each.
#   SPEED_Q=10 questions per benchmark for the speed runs: ar against
#   EAGLE-2's defaults and C2T beta 0.5, tree verification, A/B (0: none).
# Other knobs: E2_TOTALS (5, 10, ..., 150: dense, because EAGLE-2's curve
# is convex and is interpolated linearly between its points at C2T's τ,
# which overstates its γ between sparse points; 60 is the headline run,
# decoded), E2_REPLAY (1), E2_MIN_PS (replayed
# thresholds on P, total all, 0.3 down to 1e-5, about 8 per decade to 0.001
# and sparser below, where a flattened head (make paper-calibration) needs them; ""
# for none), C2T_BETAS ("0.2 0.3 0.4 0.45 0.5 0.55 0.6 0.7"; 0.5 is the headline
# run, the paper's default; fixed in advance, nothing chosen on benchmark
# questions), EPOCHS (200), FEATURES (the classifier's, spec-train
# --features: P,H,depth, the paper's), SELECT (spec-train --select: beta, the
# paper's rule; ranking where it exports an over-inclusive epoch, as it does
# for six features), SKIP_BOUND=1 (no recall_bound.py), SKIP_DEMO=1
# (no demo trace made when make demo has not left one), VERIFY (walk);
# PAPER_OUT (results/paper), HEAD (the EAGLE head, data/smollm2/eagle) and
# DRAFT_ARGS (e.g. "--draft-temperature 2") run the same experiments on
# another head (make paper-calibration); PAPER_TARGET (the target folder,
# models/smollm2-135m-instruct) with HEAD a draft of DRAFT_KIND (eagle; lm
# for a draft language model) and BENCHES (the six) on another pair (make
# qwen-paper: Qwen2.5-Coder 1.5B with its 0.5B sibling).
# $eagle, $qs, $traces and $args are word lists, split on purpose:
# shellcheck disable=SC2086
. "$(dirname "$0")/lib.sh"
T=${PAPER_TARGET:-models/smollm2-135m-instruct}
D=data/smollm2
R=${PAPER_OUT:-results/paper}
HEAD=${HEAD:-$D/eagle}
DRAFT_KIND=${DRAFT_KIND:-eagle}
DRAFT_ARGS=${DRAFT_ARGS:-}
B=${PAPER_BENCH:-../shared/benchmarks}
COLLECT_Q=${COLLECT_Q:-30}
COLLECT_MAX_NEW=${COLLECT_MAX_NEW:-128}
COLLECT_DEPTH=${COLLECT_DEPTH:-7}
BATCH=${BATCH:-8}
VERIFY=${VERIFY:-walk}
EPOCHS=${EPOCHS:-200}
FEATURES=${FEATURES:-P,H,depth}
SELECT=${SELECT:-beta}
EVAL_Q=${EVAL_Q:-40}
EVAL_TURNS=${EVAL_TURNS:-1}
EVAL_MAX_NEW=${EVAL_MAX_NEW:-128}
E2_TOTALS=${E2_TOTALS:-5 10 15 20 25 30 35 40 45 50 55 60 65 70 75 80 85 90 95 100 105 110 115 120 125 130 135 140 145 150}
E2_REPLAY=${E2_REPLAY:-1}
C2T_DEPTH=${C2T_DEPTH:-8}               # C2T's d_max: its deepest node's depth
E2_EQ_DEPTH=$((C2T_DEPTH - 1))         # EAGLE-2's --depth whose deepest nodes sit at C2T_DEPTH
POS_DEPTH=${POS_DEPTH:-$E2_EQ_DEPTH}   # the every-position trace's --depth (>= E2_EQ_DEPTH and 6)
E2_MIN_PS=${E2_MIN_PS-0.3 0.2 0.15 0.12 0.1 0.08 0.06 0.05 0.04 0.03 0.025 0.02 0.015 0.012 0.01 0.008 0.006 0.005 0.004 0.003 0.0025 0.002 0.0015 0.001 0.0008 0.0006 0.0004 0.0003 0.0002 0.00015 0.0001 0.00005 0.00002 0.00001}
C2T_BETAS=${C2T_BETAS:-0.2 0.3 0.4 0.45 0.5 0.55 0.6 0.7}
SPEED_Q=${SPEED_Q:-10}
. tools/experiments/arith.sh
BENCHES=${BENCHES:-mt_bench humaneval gsm8k alpaca sum qa}
DEMO_TRACE=results/traces.h5
DEMO_CLS=results/classifier.json

[ -f "$T/config.json" ] || [ -n "${PAPER_TARGET:-}" ] || make --no-print-directory smollm2
[ -f build/plugins/libh5zstd.so ] || make --no-print-directory build/plugins/libh5zstd.so
need_bins spec-collect spec-train spec-analyze spec-eval
need paper "make smollm2 or make qwen; data/smollm2/README.md" "$T/config.json" "$HEAD/config.json" \
    "$D/prompts/collect.jsonl"
mkdir -p "$R/prompts" "$R/transfer" "$R/eval"
eagle="--target $T --draft $HEAD --draft-kind $DRAFT_KIND --draft-vocab full $DRAFT_ARGS"   # fixed sizes: never auto
run="$ARITH --batch $BATCH --max-ctx 2048"   # every decoding run's arithmetic and batch
# record the sizes for the report
cat > "$R/sizes.env" <<EOF
COLLECT_Q=$COLLECT_Q
COLLECT_MAX_NEW=$COLLECT_MAX_NEW
COLLECT_DEPTH=$COLLECT_DEPTH
EPOCHS=$EPOCHS
FEATURES=$FEATURES
SELECT=$SELECT
EVAL_Q=$EVAL_Q
EVAL_TURNS=$EVAL_TURNS
EVAL_MAX_NEW=$EVAL_MAX_NEW
E2_TOTALS="$E2_TOTALS"
E2_REPLAY=$E2_REPLAY
E2_MIN_PS="$E2_MIN_PS"
C2T_BETAS="$C2T_BETAS"
C2T_DEPTH=$C2T_DEPTH
E2_EQ_DEPTH=$E2_EQ_DEPTH
POS_DEPTH=$POS_DEPTH
SPEED_Q=$SPEED_Q
BATCH=$BATCH
VERIFY=$VERIFY
ARITH="$(arith_name)"
TARGET=$T
HEAD=$HEAD
DRAFT_KIND=$DRAFT_KIND
DRAFT_ARGS="$DRAFT_ARGS"
BENCH=$B
EOF

# one question file per category (the "category" field of collect.jsonl)
cats=$(python3 - "$D/prompts/collect.jsonl" "$R/prompts" <<'EOF'
import json, sys
src, out = sys.argv[1], sys.argv[2]
by = {}
for line in open(src, encoding="utf-8"):
    if line.strip():
        by.setdefault(json.loads(line)["category"], []).append(line if line.endswith("\n") else line + "\n")
for c, lines in sorted(by.items()):
    with open(f"{out}/{c}.jsonl", "w", encoding="utf-8") as f:
        f.writelines(lines)
print(" ".join(sorted(by)))
EOF
)
traces=""
for c in $cats; do traces="$traces $R/traces_$c.h5"; done

echo "== 1/5 spec-collect: full EAGLE-2 trees (topk 10, depth $COLLECT_DEPTH) on $COLLECT_Q collect prompts per category ($cats), first turns, $COLLECT_MAX_NEW tokens, --verify $VERIFY, batch $BATCH"
collect_args="$eagle --max-questions $COLLECT_Q --max-turns 1 --max-new-tokens $COLLECT_MAX_NEW --topk 10 --depth $COLLECT_DEPTH $run --verify $VERIFY"
for c in $cats; do
    # a finished file made with these settings is kept (traces_C.h5.done holds
    # them); an unfinished one is continued (--resume refuses one written
    # with other settings)
    if [ -f "$R/traces_$c.h5" ] && [ "$(cat "$R/traces_$c.h5.done" 2>/dev/null)" = "$collect_args" ]; then
        echo "-- $c: kept from an earlier run"
        continue
    fi
    rm -f "$R/traces_$c.h5.done"
    echo "-- $c"
    collect "$R/traces_$c.h5" $collect_args --questions "$R/prompts/$c.jsonl" ||
        { echo "paper: spec-collect failed on $c (after changing sizes: rm $R/traces_*.h5)" >&2; exit 1; }
    echo "$collect_args" > "$R/traces_$c.h5.done"
done
stamp

echo "== 2/5 spec-train: all categories, then each category alone ($EPOCHS epochs)"
train() {   # out report trace...
    o=$1; rep=$2; shift 2
    args=""; for t in "$@"; do args="$args --traces $t"; done
    train_classifier "$o" "$rep" "$EPOCHS" $args --quiet --features "$FEATURES" --select "$SELECT"
}
train "$R/classifier.json" "$R/train_report.json" $traces
for c in $cats; do
    train "$R/transfer/classifier_$c.json" "$R/transfer/train_report_$c.json" "$R/traces_$c.h5"
done
stamp

echo "== 3/5 spec-analyze: tables on the collect traces (and the demo's), transfer matrix"
bin/spec-analyze $traces --classifier "$R/classifier.json" --beta 0.5 --out "$R/analyze" --quiet > "$R/analyze.txt"
echo "analyze: $R/analyze.txt, $R/analyze/"
rm -rf "$R/analyze_demo" "$R/analyze_demo.txt"
if [ -z "${SKIP_DEMO:-}" ] && ! { [ -f "$DEMO_TRACE" ] && [ -f "$DEMO_CLS" ]; }; then
    echo "-- the demo trace and classifier (tools/experiments/demo.sh --traces-only)"
    tools/experiments/demo.sh --traces-only
fi
if [ -f "$DEMO_TRACE" ] && [ -f "$DEMO_CLS" ]; then
    bin/spec-analyze "$DEMO_TRACE" --classifier "$DEMO_CLS" --beta 0.5 --out "$R/analyze_demo" --quiet > "$R/analyze_demo.txt"
    echo "analyze (demo): $R/analyze_demo.txt"
else
    echo "paper: no demo trace ($DEMO_TRACE and $DEMO_CLS; SKIP_DEMO is set): demo columns left out"
fi
# transfer: classifier X (trained on X's traces) on the traces of Y; "all" =
# the classifier of step 2, "demo" = make demo's.  Results are recall and
# theta at beta 0.5 next to EAGLE-2's top-N curve on the same trees.
rm -rf "$R"/transfer/*_on_*
cls_list=""; for c in $cats; do cls_list="$cls_list $c:$R/transfer/classifier_$c.json"; done
cls_list="$cls_list all:$R/classifier.json"
tr_list=""; for c in $cats; do tr_list="$tr_list $c:$R/traces_$c.h5"; done
if [ -f "$DEMO_TRACE" ] && [ -f "$DEMO_CLS" ]; then
    cls_list="$cls_list demo:$DEMO_CLS"; tr_list="$tr_list demo:$DEMO_TRACE"
fi
for cl in $cls_list; do
    for tr in $tr_list; do
        bin/spec-analyze "${tr#*:}" --classifier "${cl#*:}" --beta 0.5 --out "$R/transfer/${cl%%:*}_on_${tr%%:*}" \
            --quiet > /dev/null
    done
done
echo "transfer: $R/transfer/"
stamp

turns=""; [ "$EVAL_TURNS" = 0 ] || turns="--max-turns $EVAL_TURNS"
echo "== 4/5 spec-eval on $EVAL_Q questions of each benchmark, ${turns:-every turn}, $EVAL_MAX_NEW tokens"
if [ ! -f "$B/mt_bench/question.jsonl" ]; then
    echo "paper: $B/mt_bench/question.jsonl absent: spec-eval steps skipped (PAPER_BENCH=DIR to point at the benchmarks)"
else
    qs=""
    for b in $BENCHES; do
        [ -f "$B/$b/question.jsonl" ] || { echo "paper: $B/$b/question.jsonl is missing" >&2; exit 1; }
        qs="$qs --questions $B/$b/question.jsonl"
    done
    # runs done with the same sizes are kept (a killed run continues with
    # the next unfinished one); other sizes start afresh
    want="q=$EVAL_Q turns=$EVAL_TURNS new=$EVAL_MAX_NEW speed_q=$SPEED_Q run=$run verify=$VERIFY bench=$B"
    if [ "$(cat "$R/eval/sizes" 2>/dev/null)" != "$want" ]; then
        rm -rf "$R"/eval/*.json "$R/eval/lossless.txt" "$R/speed" "$R/eval/replay" "$R"/eval/positions.h5*
        echo "$want" > "$R/eval/sizes"
    fi
    # C2T's runs also depend on the classifier: other weights start them
    # afresh (the file's training record, e.g. its thread count, does not)
    cls=$(python3 -c 'import hashlib, json, sys; d = json.load(open(sys.argv[1]))
print(hashlib.sha256(json.dumps([d[k] for k in ("features", "hidden", "weights")], sort_keys=True).encode()).hexdigest())' \
        "$R/classifier.json")
    if [ "$(cat "$R/eval/classifier.cksum" 2>/dev/null)" != "$cls" ]; then
        rm -f "$R"/eval/c2t_*.json "$R"/speed/c2t_*.json
        echo "$cls" > "$R/eval/classifier.cksum"
    fi
    mkdir -p "$R/speed"
    ev() {   # dir name lossless(0/1) spec-eval args...
        dir=$1; name=$2; ll=$3; shift 3
        out="$R/$dir/$name.json"
        if [ -f "$out" ]; then echo "-- $dir/$name: kept from an earlier run"; return 0; fi
        if [ "$ll" = 1 ]; then chk=--check-lossless; else chk=--no-baseline; fi
        echo "-- $dir/$name"
        if bin/spec-eval "$@" $chk --temperature 0 --json "$out.tmp" > "$R/$dir/$name.txt"; then
            mv "$out.tmp" "$out"
            [ "$ll" = 1 ] && echo "$dir/$name: lossless (every token equal to ar)" >> "$R/eval/lossless.txt"
            tail -1 "$R/$dir/$name.txt"
        else
            rm -f "$out.tmp"
            echo "$dir/$name: FAILED (NOT LOSSLESS or error; $R/$dir/$name.txt)" >> "$R/eval/lossless.txt"
            echo "paper: $dir/$name failed: $R/$dir/$name.txt" >&2
        fi
        stamp
    }
    sweep="$qs --max-questions $EVAL_Q $turns --max-new-tokens $EVAL_MAX_NEW $run --verify $VERIFY"
    e2() { ev eval "eagle2_total$1" "$2" $eagle --policy eagle2 --topk 10 --depth 6 --total "$1" $sweep; }
    c2t() { ev eval "c2t_beta$1" "$2" $eagle --policy c2t --classifier "$R/classifier.json" --beta "$1" --total all --topk 10 \
        --depth $C2T_DEPTH $sweep; }
    # the headline pair first, then each sweep in an order that spreads its
    # points (the value farthest, in the sorted list, from those already
    # run), the two sweeps interleaved: a run cut short leaves both curves
    # covered end to end, to be filled in when it is continued
    spread() {   # first value list...
        python3 - "$@" <<'PY'
import sys
first, vals = sys.argv[1], sorted(set(sys.argv[2:]), key=float)
done = [vals.index(first)] if first in vals else []
out = []
while len(done) < len(vals):
    far = max((i for i in range(len(vals)) if i not in done),
              key=lambda i: (min((abs(i - j) for j in done), default=len(vals)), float(vals[i])))
    done.append(far)
    out.append(vals[far])
print(" ".join(out))
PY
    }
    e2 60 1
    c2t 0.5 1
    if [ "$E2_REPLAY" = 1 ]; then
        # EAGLE-2's totals from one trace of every position (step 4's note)
        pos="$R/eval/positions.h5"
        if [ "$POS_DEPTH" -lt "$E2_EQ_DEPTH" ] || [ "$POS_DEPTH" -lt 6 ]; then
            echo "paper: POS_DEPTH $POS_DEPTH: the every-position trace must reach depth 6 and E2_EQ_DEPTH $E2_EQ_DEPTH" >&2
            exit 2
        fi
        pos_args="$eagle $qs --max-questions $EVAL_Q $turns --max-new-tokens $EVAL_MAX_NEW --topk 10 --depth $POS_DEPTH $run --every-position"
        if ! { [ -f "$pos" ] && [ "$(cat "$pos.done" 2>/dev/null)" = "$pos_args" ]; }; then
            rm -f "$pos.done"
            resume=""; [ -f "$pos" ] && resume=--resume
            echo "-- eval/positions.h5: a full EAGLE-2 tree (topk 10, depth $POS_DEPTH) at every position of the answers"
            bin/spec-collect $resume $pos_args --out "$pos" ||
                { echo "paper: spec-collect --every-position failed (after changing sizes: rm $pos)" >&2; exit 1; }
            echo "$pos_args" > "$pos.done"
            stamp
        fi
        mkdir -p "$R/eval/replay"
        for t in $E2_TOTALS; do
            bin/spec-analyze replay "$pos" --depth 6 --total "$t" --json "$R/eval/replay/eagle2_total$t.json" |
                sed 's/^/   replay: /'
            # a total decoded by spec-eval keeps its own report
            dec="$R/eval/eagle2_total$t.json"
            if [ ! -f "$dec" ] || grep -q '"tool":[[:space:]]*"spec-analyze replay"' "$dec"; then
                cp "$R/eval/replay/eagle2_total$t.json" "$dec"
            fi
        done
        # the same totals at E2_EQ_DEPTH: EAGLE-2's trees as deep as C2T's,
        # the comparison at equal depth (the report's "where the saving
        # comes from"; kept out of eval/, so not one of the curves)
        rm -f "$R"/eval/replay/eagle2_d*_total*.json
        if [ "$E2_EQ_DEPTH" != 6 ]; then
            for t in $E2_TOTALS; do
                bin/spec-analyze replay "$pos" --depth "$E2_EQ_DEPTH" --total "$t" \
                    --json "$R/eval/replay/eagle2_d${E2_EQ_DEPTH}_total$t.json" > /dev/null
            done
        fi
        rm -f "$R"/eval/eagle2_d*_minp*.json "$R"/eval/replay/eagle2_d*_minp*.json
        for d in $(printf '%s\n' 6 "$E2_EQ_DEPTH" | sort -nu); do
            for x in $E2_MIN_PS; do
                f="eagle2_d${d}_minp$x.json"
                bin/spec-analyze replay "$pos" --depth "$d" --total all --min-p "$x" --json "$R/eval/replay/$f" |
                    sed 's/^/   replay: /'
                cp "$R/eval/replay/$f" "$R/eval/$f"
            done
        done
        for b in $(spread 0.5 $C2T_BETAS); do c2t "$b" 0; done
    else
        set -- $(spread 60 $E2_TOTALS)
        for b in $(spread 0.5 $C2T_BETAS); do
            if [ $# -gt 0 ]; then e2 "$1" 0; shift; fi
            c2t "$b" 0
        done
        for t in "$@"; do e2 "$t" 0; done
    fi
    if [ "$SPEED_Q" -gt 0 ]; then
        # speed as users decode: one sequence, tree verification, A/B against ar
        speed="$qs --max-questions $SPEED_Q $turns --max-new-tokens $EVAL_MAX_NEW $ARITH"
        ev speed eagle2_total60 1 $eagle --policy eagle2 --topk 10 --depth 6 --total 60 $speed
        ev speed c2t_beta0.5 1 $eagle --policy c2t --classifier "$R/classifier.json" --beta 0.5 --total all --topk 10 --depth $C2T_DEPTH $speed
    fi
fi
stamp

echo "== 5/5 report"
python3 tools/experiments/paper_report.py "$R" --bench-order "$BENCHES" --categories "$cats" --elapsed "$(( $(date +%s) - t0 ))"
if [ -z "${SKIP_BOUND:-}" ] && grep -q '^goal_met=no' "$R/goal.txt" 2>/dev/null; then
    echo "-- goal not met: tools/experiments/recall_bound.py on the collect traces (what any (P, H, d) classifier could gain)"
    if HDF5_PLUGIN_PATH=build/plugins python3 tools/experiments/recall_bound.py $traces > "$R/recall_bound.txt" 2> "$R/recall_bound.err"; then
        cat "$R/recall_bound.txt"
    else
        echo "paper: tools/experiments/recall_bound.py failed ($(tail -1 "$R/recall_bound.err"); it needs h5py, numpy, scikit-learn: tools/requirements.txt)"
        rm -f "$R/recall_bound.txt"
    fi
    echo "-- and tools/experiments/calibration.py on them (is the draft's P calibrated?)"
    HDF5_PLUGIN_PATH=build/plugins python3 tools/experiments/calibration.py --out "$R/calibration" \
        "draft=$(echo $traces | tr ' ' ',')" > /dev/null 2> "$R/calibration.err" ||
        echo "paper: tools/experiments/calibration.py failed ($(tail -1 "$R/calibration.err"))"
    python3 tools/experiments/paper_report.py "$R" --bench-order "$BENCHES" --categories "$cats" --elapsed "$(( $(date +%s) - t0 ))" > /dev/null
fi
echo "report: $R/report.md   make paper took $(( $(date +%s) - t0 )) s"
