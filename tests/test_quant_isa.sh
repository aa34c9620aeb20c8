#!/bin/sh
# tests/test_quant.c on every instruction-set path of kernels/cpu/matmul_quant.c
# that this CPU can run: the binaries the Makefile builds into
# $C2T_BUILD/tests/isa/ (QUANT_PATHS), one per path, each with the kernel
# object compiled for that -march.  Their PASS / FAIL / SKIP lines, with the
# path's name after the test's, for tests/run.sh; a path whose instructions
# the CPU lacks is one SKIP line naming the flag.
B=${C2T_BUILD:-build}/tests/isa
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# name, then the /proc/cpuinfo flags its instructions need
run() {
    n=$1; shift
    for f in "$@"; do
        grep -q -w "$f" /proc/cpuinfo || { echo "SKIP test_quant[$n]: this CPU lacks $f"; return; }
    done
    if [ ! -x "$B/test_quant_$n" ]; then echo "FAIL test_quant[$n]: no $B/test_quant_$n (make all builds it)"; return; fi
    "$B/test_quant_$n" > "$out" 2>&1; rc=$?
    sed -E "s/^(PASS|FAIL|SKIP) ([^: ]*)/\1 \2[$n]/" "$out"
    [ $rc -eq 0 ] || grep -q '^FAIL' "$out" || echo "FAIL test_quant[$n]: exited with status $rc"
}
run x86-64
run avx2 avx2 fma f16c bmi2 movbe
run avx2-vnni avx2 fma f16c bmi2 movbe avx_vnni
run avx512 avx512f avx512bw avx512vl avx512dq avx512cd
exit 0
