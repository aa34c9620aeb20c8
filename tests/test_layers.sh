#!/bin/sh
# The layers point one way: basics <- kernels <- model, text <- spec <-
# collect <- train <- commands.  Every #include "x" of a source may name a
# file of its own layer or of a lower one, never a higher one; model/ and
# text/ (side by side) may not include each other; and a command lives in
# the folder of what it runs, so nothing under collect/ includes train/
# (spec-analyze reads traces but is training's analysis: train/).  One
# PASS/FAIL line for tests/run.sh, with every offending include listed.
cd "$(dirname "$0")/.."
layer() {   # path -> "rank group"
    case $1 in
    kernels/base/*) echo "0 base" ;;
    kernels/*) echo "1 kernels" ;;
    infer/model/*) echo "2 model" ;;
    infer/text/*) echo "2 text" ;;
    infer/spec/*) echo "3 spec" ;;
    infer/spec_*.c|collect/spec_*.c|train/spec_*.c|infer/cli.*) echo "6 commands" ;;
    collect/*) echo "4 collect" ;;
    train/*) echo "5 train" ;;
    *) echo "" ;;
    esac
}
bad=0; checked=0; out=$(mktemp)
for f in $(find kernels infer collect train -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort); do
    set -- $(layer "$f"); fr=$1; fg=$2
    grep -o '^#include "[^"]*"' "$f" | sed 's/#include "\(.*\)"/\1/' | while read -r inc; do
        [ -e "$inc" ] || { echo "$f includes $inc, which does not exist"; continue; }
        set -- $(layer "$inc")
        [ -n "${1:-}" ] || continue
        case $f:$inc in collect/*:train/*) echo "$f (collect) includes $inc (train)"; continue ;; esac
        if [ "$1" -gt "$fr" ] || { [ "$1" -eq "$fr" ] && [ "$2" != "$fg" ] && [ "$fr" -eq 2 ]; }; then
            echo "$f ($fg) includes $inc ($2)"
        fi
    done >> "$out"
    checked=$((checked + 1))
done
if [ -s "$out" ]; then
    echo "FAIL test_layers_point_down: $(wc -l < "$out") includes point up: $(head -5 "$out" | tr '\n' ';')"
    bad=1
else
    echo "PASS test_layers_point_down"
    echo "# $checked sources: every include points to its own layer or a lower one"
fi
rm -f "$out"
exit $bad
