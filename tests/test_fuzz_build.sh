#!/bin/sh
# make fuzz builds the parsers with clang-14, which the rest of the build
# never uses: code it rejects (a type it lacks, a warning gcc does not give)
# would only show at the next fuzzing campaign.  make fuzz-syntax reads
# every source make fuzz compiles with clang-14 (seconds); one PASS / FAIL
# line for tests/run.sh, SKIP where clang-14 with OpenMP is not installed
# (make fuzz-deps installs it; .ci/run does).
cd "$(dirname "$0")/.."
if ! echo '#include <omp.h>' | clang-14 -fopenmp -fsyntax-only -x c - > /dev/null 2>&1; then
    echo "SKIP test_fuzz_sources_compile: no clang-14 with OpenMP (make fuzz-deps installs them)"
    exit 0
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if make --no-print-directory fuzz-syntax > "$out" 2>&1; then
    echo "PASS test_fuzz_sources_compile"
else
    echo "FAIL test_fuzz_sources_compile: clang-14 rejects a source make fuzz compiles:"
    grep -m 5 "error:" "$out"
fi
exit 0
