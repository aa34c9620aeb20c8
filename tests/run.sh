#!/bin/sh
# Runs every test binary given as argument and adds up their PASS/FAIL/SKIP
# lines.  A binary that crashes or exits non-zero without a FAIL line counts
# as one failure named after the binary.
#
# On screen: one line per binary (its counts and wall time), every FAIL and
# SKIP line, and for a binary that failed the last lines of what it printed;
# then the five slowest binaries and the five slowest tests, and at the end
# "N passed, N failed".  Everything the binaries printed, stdout and stderr,
# goes to the log ($C2T_BUILD/test-output.txt, default build/), named on the
# last lines; every test's seconds to test-times.txt beside it.
log=${C2T_BUILD:-build}/test-output.txt
cases=${C2T_BUILD:-build}/test-times.txt
mkdir -p "$(dirname "$log")" && : > "$log" && : > "$cases" || { echo "tests/run.sh: cannot write $log"; exit 1; }
pass=0; fail=0; skip=0; failed_names=""
out=$(mktemp); times=$(mktemp)
trap 'rm -f "$out" "$out.err" "$times"' EXIT
export C2T_CASE_TIMES="$cases"
for t in "$@"; do
    name=$(basename "$t")
    t0=$(date +%s.%N)
    "$t" > "$out" 2>"$out.err"; rc=$?
    t1=$(date +%s.%N)
    echo "$t1 $t0 $name" >> "$times"
    { echo "== $name (exit $rc)"; cat "$out"; sed 's/^/  stderr: /' "$out.err"; } >> "$log"
    p=$(grep -c '^PASS ' "$out"); s=$(grep -c '^SKIP ' "$out")
    nf=$(grep '^FAIL ' "$out" | cut -d: -f1 | sort -u | wc -l)
    pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + nf))
    failed_names="$failed_names $(grep '^FAIL ' "$out" | cut -d: -f1 | sort -u | sed 's/^FAIL //' | tr '\n' ' ')"
    if [ $rc -ne 0 ] && [ "$nf" -eq 0 ]; then
        nf=1; fail=$((fail + 1)); failed_names="$failed_names $name"
        echo "FAIL $name: exited with status $rc" | tee -a "$log"
    fi
    awk -v a="$t1" -v b="$t0" -v n="$name" -v p="$p" -v f="$nf" -v s="$s" \
        'BEGIN { printf "%-28s %4d passed, %d failed, %d skipped  %6.1f s\n", n, p, f, s, a - b }'
    grep -E '^(FAIL|SKIP) ' "$out" | sed 's/^/  /'
    if [ "$nf" -gt 0 ]; then
        echo "  last lines it printed (all of them: $log):"
        grep -v -E '^(PASS|SKIP) ' "$out" | tail -8 | sed 's/^/    /'
        tail -5 "$out.err" | sed 's/^/    stderr: /'
    fi
done
echo "slowest test binaries (wall seconds):"
awk '{ printf "%8.1f  %s\n", $1 - $2, $3 }' "$times" | sort -rn | head -5
awk '{ total += $1 - $2 } END { printf "%8.1f  all %d of them\n", total, NR }' "$times"
if [ -s "$cases" ]; then
    echo "slowest tests (wall seconds):"
    sort -rn "$cases" | head -5 | awk '{ printf "%8.1f  %s\n", $1, $2 }'
fi
echo "every line the tests printed: $log; every test's time: $cases"
[ $skip -gt 0 ] && echo "$skip skipped (not counted as passed)"
[ $fail -gt 0 ] && echo "failing:$failed_names"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
