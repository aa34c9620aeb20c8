#!/bin/sh
# README's real-model walkthrough, line for line, on the demo family: the
# fenced block after the "walkthrough" marker, with its first line's models
# and question files swapped for the demo's (data/demo), run in a scratch
# folder.  A PASS/FAIL line for tests/run.sh.
cd "$(dirname "$0")/.."
root=$(pwd)
BIN=${C2T_BIN:-bin}
block=$(awk '/<!-- walkthrough/ {on = 1; next} on && /^```sh/ {inside = 1; next} inside && /^```/ {exit} inside' README.md)
if [ -z "$block" ]; then echo "FAIL test_readme_walkthrough: no walkthrough block in README.md"; exit 0; fi
cmds=$(printf '%s\n' "$block" | tail -n +2)
n=$(printf '%s\n' "$cmds" | grep -c '^bin/spec-')
[ "$n" -ge 3 ] || { echo "FAIL test_readme_walkthrough: expected spec-collect, spec-train, spec-eval lines, got $n"; exit 0; }
work=$(mktemp -d)
ln -s "$root/$BIN" "$work/bin"; ln -s "$root/data" "$work/data"
T=data/demo/target H=data/demo/eagle P=data/demo/prompts/code_train.jsonl Q=data/demo/prompts/code_test.jsonl
export T H P Q
if (cd "$work" && printf '%s\n' "$cmds" | sh -e) > "$work/out.txt" 2> "$work/err.txt" &&
   grep -q '^code_test ' "$work/out.txt" && [ -s "$work/results/walk/walk.h5" ] && [ -s "$work/results/walk/c2t.json" ]; then
    echo "PASS test_readme_walkthrough"
    echo "# $(grep '^code_test ' "$work/out.txt")"
else
    echo "FAIL test_readme_walkthrough: $(tail -3 "$work/err.txt" | tr '\n' ';') $(tail -2 "$work/out.txt" | tr '\n' ';')"
fi
rm -rf "$work"
exit 0
