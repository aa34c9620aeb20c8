#!/bin/sh
# The kernels with instruction-set paths, tested on every path this CPU can
# run whatever the build's own: tests/test_quant.c on each path of
# kernels/cpu/matmul_quant.c (QUANT_PATHS in the Makefile), and the tests of
# tests/test_kernels.c against the naive reference and of a tree's query
# against the token alone on each path of the 8- and 16-lane loops of
# kernels/cpu/attention.c, elementwise.c and distribution.c (VEC_PATHS,
# VEC_SRCS): the binaries the Makefile builds into $C2T_BUILD/tests/isa/,
# one per test binary and path, each with the kernel objects compiled for
# that -march.  Their PASS / FAIL / SKIP lines, with the path's name after the
# test's, for tests/run.sh; a path whose instructions the CPU lacks is one
# SKIP line naming the flag.
B=${C2T_BUILD:-build}/tests/isa
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# the binary's test (test_quant, test_kernels), the path's name, the tests
# to run (C2T_ONLY substrings, "" for all), then the /proc/cpuinfo flags its
# instructions need
run() {
    t=$1; n=$2; only=$3; shift 3
    for f in "$@"; do
        grep -q -w "$f" /proc/cpuinfo || { echo "SKIP $t[$n]: this CPU lacks $f"; return; }
    done
    if [ ! -x "$B/${t}_$n" ]; then echo "FAIL $t[$n]: no $B/${t}_$n (make all builds it)"; return; fi
    for o in ${only:-""}; do
        C2T_ONLY=$o "$B/${t}_$n" > "$out" 2>&1; rc=$?
        sed -E "s/^(PASS|FAIL|SKIP) ([^: ]*)/\1 \2[$n]/" "$out"
        [ $rc -eq 0 ] || grep -q '^FAIL' "$out" || echo "FAIL $t[$n]: exited with status $rc"
    done
}
AVX2="avx2 fma f16c bmi2 movbe"
AVX512="avx512f avx512bw avx512vl avx512dq avx512cd"
run test_quant x86-64 ""
run test_quant avx2 "" $AVX2
run test_quant avx2-vnni "" $AVX2 avx_vnni
run test_quant avx512 "" $AVX512
VEC="against_naive test_tree_query_sums_as_decode"
run test_kernels x86-64 "$VEC"
run test_kernels avx2 "$VEC" $AVX2
run test_kernels avx512 "$VEC" $AVX512
exit 0
