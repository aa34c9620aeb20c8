#!/bin/sh
# Two make smollm2-speed runs side by side: is each policy's speedup
# repeatable?
#   tools/experiments/speed_repeat.sh DIR_A DIR_B [TOL]
# DIR_A and DIR_B hold a run's speed.csv each (SPEED_OUT=DIR make
# smollm2-speed).  Rows are matched by policy and kind: the plain and auto rows
# by their label, a swept row as "chosen" (plus its /vocabN), since the sweep
# on held-out prompts may pick another size in each run.  Each row prints both
# A/B speedups (against ar in the same process) and B / A; the last line
# counts the rows whose B / A lies within 1 +- TOL (default 0.05), all of
# them and those whose setting was the same in both runs (the others'
# choices differed: speed_choices.txt says which were near-ties).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 DIR_A DIR_B [TOL]" >&2; exit 2; }
A=$1/speed.csv B=$2/speed.csv TOL=${3:-0.05}
for f in "$A" "$B"; do
    [ -s "$f" ] || { echo "speed_repeat: $f is missing or empty (SPEED_OUT=DIR make smollm2-speed)" >&2; exit 1; }
done
awk -F, -v tol="$TOL" '
    function kind(label,   rest) {
        if (label ~ /^(plain|auto)/) return label
        rest = label; sub(/^[^\/]*/, "", rest)
        return "chosen" rest
    }
    FNR == 1 { run++; next }
    $7 == "" { next }                                   # no ar in its process (the ar row)
    { k = $1 " " kind($3); sp[run, k] = $7; lo[run, k] = $8; hi[run, k] = $9; lab[run, k] = $3
      if (run == 1) order[++n] = k }
    END {
        printf "%-8s %-18s %-36s %-22s %-22s %7s\n", "policy", "row", "setting A / B", "A: speedup [95%]", "B: speedup [95%]", "B / A"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (!((2, k) in sp)) { printf "%-8s %-18s only in A\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1); continue }
            r = sp[2, k] / sp[1, k]; m++
            inside = r >= 1 - tol && r <= 1 + tol
            same = lab[1, k] == lab[2, k]
            ok += inside; m_same += same; ok_same += same && inside
            printf "%-8s %-18s %-36s %-22s %-22s %6.3f%s%s\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1),
                   lab[1, k] " / " lab[2, k], sprintf("%.2fx [%.2f, %.2f]", sp[1, k], lo[1, k], hi[1, k]),
                   sprintf("%.2fx [%.2f, %.2f]", sp[2, k], lo[2, k], hi[2, k]), r, inside ? "" : "  outside",
                   same ? "" : "  (settings differ)"
        }
        printf "%d of %d rows within +-%g%%; %d of the %d that ran the same setting in both\n", ok, m, tol * 100,
               ok_same, m_same
    }' "$A" "$B"
