#!/bin/sh
# Runs every test binary given as argument and adds up their PASS/FAIL/SKIP
# lines.  A binary that crashes or exits non-zero without a FAIL line counts
# as one failure named after the binary.  Prints each binary's time, the
# slowest first, and ends with "N passed, N failed".
pass=0; fail=0; skip=0; failed_names=""
out=$(mktemp)
for t in "$@"; do
    t0=$(date +%s.%N)
    "$t" > "$out" 2>"$out.err"; rc=$?
    echo "$(date +%s.%N) $t0 $(basename "$t")" >> "$out.times"
    cat "$out"
    p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out"); s=$(grep -c '^SKIP ' "$out")
    pass=$((pass + p)); skip=$((skip + s))
    nf=$(grep '^FAIL ' "$out" | cut -d: -f1 | sort -u | wc -l)
    fail=$((fail + nf))
    failed_names="$failed_names $(grep '^FAIL ' "$out" | cut -d: -f1 | sort -u | sed 's/^FAIL //' | tr '\n' ' ')"
    if [ $rc -ne 0 ] && [ "$nf" -eq 0 ]; then
        echo "FAIL $(basename "$t"): exited with status $rc"; sed 's/^/  stderr: /' "$out.err" | tail -5
        fail=$((fail + 1)); failed_names="$failed_names $(basename "$t")"
    fi
done
echo "time per test binary (wall seconds, slowest first):"
awk '{ printf "%8.1f  %s\n", $1 - $2, $3 }' "$out.times" | sort -rn
awk '{ total += $1 - $2 } END { printf "%8.1f  all of them\n", total }' "$out.times"
rm -f "$out" "$out.err" "$out.times"
[ $skip -gt 0 ] && echo "$skip skipped (not counted as passed)"
[ $fail -gt 0 ] && echo "failing:$failed_names"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
