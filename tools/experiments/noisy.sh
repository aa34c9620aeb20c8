#!/bin/sh
# Decode speed on a shared CPU (not part of make test): SmolLM2 BF16 tg128
# (build/tests/bench_forward --tg-only, one run as llama-bench -r 1 times;
# llama.cpp's arithmetic: --cpu-fast-gemm on) at 1 and 2 threads and at the
# commands' default (auto: the backend's thread tuner), on an idle machine, beside one busy loop (one core held)
# and beside two (a competing 2-thread job); llama.cpp's llama-bench tg128 at
# -t 1 and -t 2 on the same weights in the same conditions when it is built
# (tools/experiments/llamacpp.sh; make bench builds it).  Each figure is the
# median of REPS runs, the runs of the two thread counts alternating.
#   REPS=3 (default)
#   LOADS="0 1 2" (default): the conditions, by busy loops (make bench: 0)
#   OTHER=path/to/bench_forward  also another build's, in the same rounds
#                                (e.g. a worktree of an earlier commit)
. "$(dirname "$0")/lib.sh"
REPS=${REPS:-3}
M=models/smollm2-135m-instruct
[ -f $M/model.safetensors ] || { echo "noisy: $M is missing (make smollm2)" >&2; exit 1; }
[ -x build/tests/bench_forward ] || { echo "noisy: build/tests/bench_forward is missing (make)" >&2; exit 1; }
LB=build/llama.cpp/bin
GGUF=models/smollm2-135m-instruct.bf16.gguf
have_llama=0
[ -x $LB/llama-bench ] && [ -f $GGUF ] && have_llama=1
[ $have_llama = 1 ] || echo "noisy: llama.cpp or $GGUF absent (make bench builds both): its rows are skipped" >&2

OTHER=${OTHER:-}
ours() { ${2:-build/tests/bench_forward} --threads "$1" --cpu-fast-gemm on --tg-only $M 2>/dev/null | awk '/tg128/ { print $3; exit }'; }
theirs() {
    $LB/llama-bench -m $GGUF -t "$1" -p 0 -n 128 -r 1 -o csv 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i; next } { gsub(/"/, "", $c); print $c }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

. tools/experiments/busy.sh

# aims (#51): auto >= 0.95x our -t 1 (auto/1), and >= 0.9x llama.cpp's better
# thread count (auto/llama)
printf '%-28s %9s %9s %9s %10s %10s %8s %10s %10s %10s\n' "condition" "ours -t 1" "ours -t 2" "ours auto" "llama -t 1" \
    "llama -t 2" "auto/1" "auto/llama" "other -t 1" "other -t 2"
for busy in ${LOADS:-0 1 2}; do
    load "$busy"
    sleep 1
    : > /tmp/noisy_$$
    r=0
    while [ $r -lt "$REPS" ]; do
        for t in 1 2 auto; do echo "ours$t $(ours $t)" >> /tmp/noisy_$$; done
        if [ $have_llama = 1 ]; then for t in 1 2; do echo "llama$t $(theirs $t)" >> /tmp/noisy_$$; done; fi
        if [ -n "$OTHER" ]; then for t in 1 2; do echo "other$t $(ours $t "$OTHER")" >> /tmp/noisy_$$; done; fi
        r=$((r + 1))
    done
    row() { v=$(awk -v k="$1" '$1 == k && $2 != "" { print $2 }' /tmp/noisy_$$ | median); [ -n "$v" ] && printf '%.1f' "$v" || echo -; }
    case $busy in 0) c="idle" ;; 1) c="one core held (1 busy loop)" ;; 2) c="both held (2 busy loops)" ;; esac
    ratio() { awk -v a="$1" -v b="$2" -v c="${3:--}" 'BEGIN { if (c != "-" && c + 0 > b + 0) b = c;
        if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
    o1=$(row ours1) oa=$(row oursauto) l1=$(row llama1) l2=$(row llama2)
    printf '%-28s %9s %9s %9s %10s %10s %8s %10s %10s %10s\n' "$c" "$o1" "$(row ours2)" "$oa" "$l1" "$l2" \
        "$(ratio "$oa" "$o1")" "$(ratio "$oa" "$l1" "$l2")" "$(row other1)" "$(row other2)"
done
rm -f /tmp/noisy_$$
