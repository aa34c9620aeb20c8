# shellcheck shell=sh
# Sourced by the load experiments (noisy.sh, ab_null.sh): `load N` starts N
# busy loops, each holding one core, after stopping those of the previous
# call; `load 0` stops them all, and so does the script's exit.
hogs=""
load() {
    for p in $hogs; do kill "$p" 2>/dev/null || true; done
    hogs=""
    i=0
    while [ $i -lt "$1" ]; do
        sh -c 'while :; do :; done' & hogs="$hogs $!"
        i=$((i + 1))
    done
}
trap 'load 0' EXIT INT TERM
