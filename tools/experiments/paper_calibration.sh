#!/bin/sh
# make paper-calibration: the calibration hypothesis behind make paper's
# finding -> results/paper_calibration/ (report.md, calibration.{md,csv,png}).
# The hypothesis: C2T's classifier saves verified tokens over EAGLE-2's top-N
# by joint probability P only where P ranks nodes badly; a calibrated head
# leaves it little to gain.  Two parts:
#   1. Calibration of P per head: spec-collect full trees (topk 10, depth 7,
#      --verify walk, batch 8) on CAL_Q held-out prompts
#      (data/smollm2/prompts/heldout.jsonl: never a benchmark, never trained
#      on) for each head of HEADS, then tools/experiments/calibration.py:
#      reliability tables per depth, ECE, acceptance and recall of the top N
#      by P.  A head is NAME=SOURCE:T: SOURCE is "head" (the shipped
#      data/smollm2/eagle) or a commit whose data/smollm2/eagle is an earlier
#      head (git archive; skipped with one line where git history is
#      absent); T is --draft-temperature (the shipped head with its logits
#      divided by T: T > 1 flattens P, T < 1 sharpens it, both miscalibrate
#      it).  The demo head's own trace (results/traces.h5, make demo) is
#      added when present.
#   2. C2T against EAGLE-2 at equal tau on the heads of SWEEP_HEADS: make
#      paper's pipeline (tools/experiments/paper.sh: collect on training
#      prompts, train, sweep both policies on the benchmarks) at reduced
#      sizes, PAPER_OUT=results/paper_calibration/sweep_NAME; the report
#      sets each head's reduction [95% interval] beside its calibration and
#      beside make paper's (the shipped head, results/paper) when present.
# Knobs: HEADS, SWEEP_HEADS, CAL_Q (40), CAL_MAX_NEW (128); for the sweeps
# SWEEP_COLLECT_Q (30 prompts per category), SWEEP_EVAL_Q (40 questions per
# benchmark), SWEEP_E2_TOTALS, SWEEP_C2T_BETAS.  Finished parts are kept
# (a killed run continues); ARITH as tools/experiments/arith.sh.
# $run and $args are word lists, split on purpose:
# shellcheck disable=SC2086
. "$(dirname "$0")/lib.sh"
T=models/smollm2-135m-instruct
D=data/smollm2
R=${CAL_OUT:-results/paper_calibration}
HEADS=${HEADS:-shipped=head:1 shipped_T2=head:2 shipped_T0.5=head:0.5 gpu_first=619b842:1 cpu_fourth=6fcfb95:1}
SWEEP_HEADS=${SWEEP_HEADS:-shipped_T2}
CAL_Q=${CAL_Q:-40}
CAL_MAX_NEW=${CAL_MAX_NEW:-128}
. tools/experiments/arith.sh
run="$ARITH --batch 8 --max-ctx 2048 --verify walk"

[ -f "$T/config.json" ] || make --no-print-directory smollm2
[ -f build/plugins/libh5zstd.so ] || make --no-print-directory build/plugins/libh5zstd.so
need_bins spec-collect spec-train spec-analyze spec-eval
mkdir -p "$R/heads"

# head NAME SOURCE -> its directory on stdout ("" when it cannot be had)
head_dir() {
    if [ "$2" = head ]; then echo "$D/eagle"; return; fi
    dir="$R/heads/$1"
    if [ ! -f "$dir/config.json" ]; then
        rm -rf "$dir"; mkdir -p "$dir"
        if ! git archive "$2" "$D/eagle" 2>/dev/null | tar -x -C "$dir" --strip-components 3 2>/dev/null ||
            [ ! -f "$dir/config.json" ]; then
            rm -rf "$dir"; echo ""; return
        fi
    fi
    echo "$dir"
}

echo "== 1/3 calibration traces: $CAL_Q held-out prompts x $CAL_MAX_NEW tokens per head"
cal_args=""
for h in $HEADS; do
    name=${h%%=*}; src=${h#*=}; temp=${src##*:}; src=${src%:*}
    dir=$(head_dir "$name" "$src")
    if [ -z "$dir" ]; then echo "-- $name: $src's data/smollm2/eagle is not in this clone's git history: left out"; continue; fi
    out="$R/traces_$name.h5"
    if [ ! -f "$out.done" ]; then
        echo "-- $name ($dir, --draft-temperature $temp)"
        rm -f "$out"
        bin/spec-collect --target $T --draft "$dir" --draft-kind eagle --draft-temperature "$temp" \
            --questions $D/prompts/heldout.jsonl --max-questions "$CAL_Q" --max-turns 1 --max-new-tokens "$CAL_MAX_NEW" \
            --topk 10 --depth 7 $run --quiet --out "$out"
        touch "$out.done"
    fi
    cal_args="$cal_args $name=$out"
done
[ -f results/traces.h5 ] && cal_args="$cal_args demo=results/traces.h5"
stamp

echo "== 2/3 calibration tables"
HDF5_PLUGIN_PATH=build/plugins python3 tools/experiments/calibration.py --out "$R/calibration" $cal_args

echo "== 3/3 C2T against EAGLE-2 at equal tau: $SWEEP_HEADS"
for name in $SWEEP_HEADS; do
    h=""; for x in $HEADS; do [ "${x%%=*}" = "$name" ] && h=$x; done
    [ -n "$h" ] || { echo "paper-calibration: SWEEP_HEADS names $name, which HEADS does not" >&2; exit 1; }
    src=${h#*=}; temp=${src##*:}; src=${src%:*}
    dir=$(head_dir "$name" "$src")
    [ -n "$dir" ] || { echo "-- $name: no head (git history absent): left out"; continue; }
    echo "-- $name"
    PAPER_OUT="$R/sweep_$name" HEAD="$dir" DRAFT_ARGS="--draft-temperature $temp" \
        COLLECT_Q="${SWEEP_COLLECT_Q:-30}" EVAL_Q="${SWEEP_EVAL_Q:-40}" SPEED_Q=0 SKIP_DEMO=1 SKIP_BOUND=1 \
        E2_TOTALS="${SWEEP_E2_TOTALS:-5 10 15 20 25 30 35 40 45 50 55 60 65 70 75 80 85 90 95 100 105 110 115 120 125 130 135 140 145 150}" C2T_BETAS="${SWEEP_C2T_BETAS:-0.3 0.4 0.5 0.6 0.7}" \
        tools/experiments/paper.sh > "$R/sweep_$name.log" 2>&1 ||
        { echo "paper-calibration: the sweep of $name failed: $R/sweep_$name.log" >&2; exit 1; }
    grep -A1 "mean reduction over C2T" "$R/sweep_$name/report.md" | head -1 || true
done

python3 - "$R" "$SWEEP_HEADS" <<'EOF'
import os, sys
R, sweep = sys.argv[1], sys.argv[2].split()
def goal(path):
    try:
        return dict(l.strip().split("=", 1) for l in open(path) if "=" in l)
    except OSError:
        return None
def pct(x):
    return "–" if x in (None, "None") else "%.1f%%" % (100 * float(x))
rows = [("shipped (make paper)", goal("results/paper/goal.txt"))] + [(n, goal(os.path.join(R, "sweep_%s" % n, "goal.txt"))) for n in sweep]
md = ["# The calibration hypothesis (`make paper-calibration`)", "",
      "Written by tools/experiments/paper_calibration.sh. Part 1: how well each head's joint probability P predicts "
      "acceptance (held-out prompts, full trees). Part 2: C2T's γ reduction against EAGLE-2 at equal τ, pooled over "
      "questions with its 95% bootstrap interval, for the shipped head (make paper, results/paper) and the heads "
      "swept here (each sweep's report.md gives its sizes).", "",
      "The last two columns split the saving: EAGLE-2's pool cut by one threshold on P, its trees as deep as C2T's "
      "(`--param min_p`, replayed) against EAGLE-2's fixed totals, and C2T against that threshold: what the "
      "classifier's features add beyond sizing each tree by P.", "",
      "| head | γ reduction at equal τ, pooled [95%] | mean over benchmarks | threshold on P vs totals [95%] | "
      "C2T vs threshold [95%] | report |", "|---|---|---|---|---|---|"]
def interval(g, key):
    return "%s [%s, %s]" % (pct(g.get(key)), pct(g.get(key + "_lo")), pct(g.get(key + "_hi")))
for name, g in rows:
    if not g:
        md.append("| %s | not run | – | – | – | – |" % name)
        continue
    rep = "results/paper/report.md" if name.startswith("shipped (") else os.path.join(R, "sweep_%s" % name, "report.md")
    md.append("| %s | %s [%s, %s] | %s | %s | %s | %s |" % (name, pct(g.get("pooled_reduction")), pct(g.get("pooled_lo")),
                                                            pct(g.get("pooled_hi")), pct(g.get("mean_reduction")),
                                                            interval(g, "min_p_eqdepth_vs_total"), interval(g, "c2t_vs_min_p_eqdepth"), rep))
md += ["", open(os.path.join(R, "calibration.md")).read()]
open(os.path.join(R, "report.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md[8:8 + len(rows)]))
EOF
echo "report: $R/report.md   make paper-calibration took $(( $(date +%s) - t0 )) s"
