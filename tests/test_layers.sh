#!/bin/sh
# The layers point one way: basics <- kernels <- model, text <- speculative <-
# session <- collect <- train <- commands.  Every #include "x" of a source may name a
# file of its own layer or of a lower one, never a higher one; model/ and
# text/ (side by side) may not include each other; and a command lives in
# the folder of what it runs, so nothing under collect/ includes train/
# (spec-analyze reads traces but is training's analysis: train/).  One
# PASS/FAIL line for tests/run.sh, with every offending include listed.
# Then, over the built objects, that no two source files call each other
# (below).
cd "$(dirname "$0")/.."
layer() {   # path -> "rank group"
    case $1 in
    kernels/base/*) echo "0 base" ;;
    kernels/*) echo "1 kernels" ;;
    infer/model/*) echo "2 model" ;;
    infer/text/*) echo "2 text" ;;
    infer/speculative/*) echo "3 speculative" ;;
    infer/session/*) echo "4 session" ;;
    infer/spec_*.c|collect/spec_*.c|train/spec_*.c|infer/cli.*|infer/eval.*|infer/speedup.*) echo "7 commands" ;;
    collect/*) echo "5 collect" ;;
    train/*) echo "6 train" ;;
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

# Objects call one way: no two object files each use a global the other
# defines, and no longer loop either.  nm gives each object's undefined
# references (U) and its defined globals (T, D, B, R, ...; weak and unique
# symbols, which C++ puts in many objects at once, are left out); an
# object using a global another defines depends on it, and these
# dependencies must form a DAG.  Over the objects of the build under test
# (C2T_BUILD, default build), test programs and objects whose source is
# gone left out.  Each pair that calls both ways is listed with the
# symbols each side uses, and up to 5 longer loops with theirs.
#
# Pairs that call both ways until their owners split them (paths in the
# build folder, either order).  A listed pair that was built and no longer
# calls both ways is noted, so that its line can go.  None is known.
KNOWN_PAIRS="
"
build=${C2T_BUILD:-build}
objs=$(find "$build" -name '*.o' ! -path "$build/tests/*" 2>/dev/null | sort | while read -r o; do
    src=${o#"$build"/}; src=${src%.o}   # an object whose source is gone is stale: left out
    if [ -e "$src.c" ] || [ -e "$src.cu" ]; then echo "$o"; fi
done)
if [ -z "$objs" ]; then
    echo "SKIP test_objects_call_one_way: no objects in $build/ (build first)"
elif ! command -v nm >/dev/null; then
    echo "SKIP test_objects_call_one_way: nm (binutils) is not installed"
else
    out=$(mktemp)
    # shellcheck disable=SC2086
    nm -A $objs | awk -v build="$build/" -v known="$KNOWN_PAIRS" '
    function sorted(list,    w, n, i, j, x, r) {   # a space-separated list, sorted
        n = split(list, w, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && w[j - 1] > w[j]; j--) { x = w[j]; w[j] = w[j - 1]; w[j - 1] = x }
        for (i = 1; i <= n; i++) r = r " " w[i]
        return r
    }
    function rel(f) { return substr(f, 1, length(build)) == build ? substr(f, length(build) + 1) : f }
    # depth-first search; a grey node met again closes a loop
    function dfs(u,    i, v, k, path) {
        color[u] = 1; stack[++depth] = u
        for (i = 1; i <= nout[u]; i++) {
            v = next_of[u, i]
            if (color[v] == 1) {
                loops++
                if (loops > 5) continue
                for (k = depth; stack[k] != v; k--) ;
                for (path = ""; k < depth; k++) path = path stack[k] " (uses" sorted(syms[stack[k], stack[k + 1]]) ") -> "
                print "# loop: " path u " (uses" sorted(syms[u, v]) ") -> " v
            } else if (!color[v]) dfs(v)
        }
        color[u] = 2; depth--
    }
    {
        split($0, a, ":"); f = rel(a[1]); t = $(NF - 1); s = $NF
        built[f] = 1
        if (t == "U") use[f, s] = 1
        else if (t ~ /^[TDBRGSC]$/) def[s] = def[s] " " f
    }
    END {
        n = split(known, kp, "\n")
        for (i = 1; i <= n; i++)
            if (split(kp[i], p, " ") == 2) { ok[p[1], p[2]] = ok[p[2], p[1]] = 1; listed[p[1] SUBSEP p[2]] = 1 }
        for (us in use) {
            split(us, q, SUBSEP)
            if (!(q[2] in def)) continue
            nd = split(def[q[2]], d, " ")
            for (j = 1; j <= nd; j++) if (d[j] != q[1]) {
                if (!((q[1], d[j]) in syms)) edge[++ne] = q[1] SUBSEP d[j]
                syms[q[1], d[j]] = syms[q[1], d[j]] " " q[2]
            }
        }
        for (e = 1; e <= ne; e++) {
            split(edge[e], q, SUBSEP)
            if (!((q[2], q[1]) in syms)) { next_of[q[1], ++nout[q[1]]] = q[2]; node[q[1]] = 1; continue }
            if (q[1] > q[2]) continue
            line = q[1] " <-> " q[2] ": " q[1] " uses" sorted(syms[q[1], q[2]]) "; " q[2] " uses" sorted(syms[q[2], q[1]])
            if ((q[1], q[2]) in ok) { print "# known pair " line; both[q[1], q[2]] = both[q[2], q[1]] = 1; continue }
            pairs++
            print "# " line
        }
        for (l in listed) {
            split(l, p, SUBSEP)
            if ((p[1] in built) && (p[2] in built) && !(l in both))
                print "# note: known pair " p[1] " <-> " p[2] " no longer calls both ways: drop it from KNOWN_PAIRS"
        }
        for (u in node) if (!color[u]) dfs(u)
        print "RESULT " pairs + 0 " " loops + 0
    }' > "$out"
    set -- $(sed -n 's/^RESULT //p' "$out")
    if [ "${1:-x}" = 0 ] && [ "${2:-x}" = 0 ]; then
        echo "PASS test_objects_call_one_way"
        echo "# $(echo "$objs" | wc -l) objects in $build/: the calls between them form a DAG, but for the known pairs"
    else
        echo "FAIL test_objects_call_one_way: ${1:-?} pairs of objects call each other, ${2:-?} longer loops"
        bad=1
    fi
    grep -v '^RESULT ' "$out" | sort | { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }
    rm -f "$out"
fi
exit $bad
