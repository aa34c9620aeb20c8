# tools/experiments/lib.sh: the steps the experiment scripts share, sourced as
# their first command (`. "$(dirname "$0")/lib.sh"`): strict mode, the
# repository root as working directory, input checks, and C2T's collect ->
# train steps (spec-collect's full EAGLE-2 trees, spec-train's classifier
# recipe); each script keeps its own evaluation.
set -eu
cd "$(dirname "$0")/../.."
t0=$(date +%s)

# stamp: the seconds since the script started, after a step
stamp() { echo "   ($(( $(date +%s) - t0 )) s so far)"; }

# need NAME HINT FILE...: each FILE exists, else one line naming it (and HINT,
# where not empty) on stderr and exit 1
need() {
    _n=$1; _h=$2; shift 2
    for _f; do
        [ -f "$_f" ] || { echo "$_n: $_f is missing${_h:+ ($_h)}" >&2; exit 1; }
    done
}

# need_bins BIN...: bin/BIN built where it is not
need_bins() {
    for _b; do [ -x "bin/$_b" ] || make --no-print-directory "bin/$_b"; done
}

# collect OUT ARGS...: spec-collect ARGS (target, draft, questions, tree sizes)
# into OUT; an existing OUT is continued (--resume refuses one written with
# other settings)
collect() {
    _o=$1; shift
    _r=""; [ -f "$_o" ] && _r=--resume
    bin/spec-collect $_r "$@" --out "$_o"
}

# train_classifier OUT REPORT EPOCHS ARGS...: C2T's classifier from traces
# (ARGS: --traces FILE... and more spec-train options): log P standardised
# (raw P, 1e-12..1, trains poorly), 2.5 negatives per positive
train_classifier() {
    _o=$1; _rep=$2; _ep=$3; shift 3
    bin/spec-train "$@" --out "$_o" --report "$_rep" --transform P=log --standardize --epochs "$_ep" --neg-ratio 2.5
}

# llamacpp_sdist: the PyPI sdist llama-cpp-python==$LLAMACPP_VER (llama.cpp's
# source and its test vocabularies) in models/download, fetched with pip once;
# its path on stdout, or one line on stderr and exit 3 when pip cannot fetch it
LLAMACPP_VER=0.3.36
llamacpp_sdist() {
    _s=models/download/llama_cpp_python-$LLAMACPP_VER.tar.gz
    if [ ! -f "$_s" ]; then
        mkdir -p models/download
        python3 -m pip download -q --no-deps --no-binary :all: -d models/download "llama-cpp-python==$LLAMACPP_VER" \
            >/dev/null 2>&1 || { echo "llamacpp: pip could not fetch llama-cpp-python==$LLAMACPP_VER (no network?)" >&2; exit 3; }
    fi
    echo "$_s"
}

# qwen_requant TYPE: Qwen2.5-Coder-1.5B in another GGUF type, made from the
# Q4_K_M file of make qwen: its values in a BF16 GGUF, requantised by
# llama-quantize to TYPE (iq4_xs, iq4_nl, q2_k, ...) into
# models/qwen2.5-coder-1.5b-instruct.TYPE.gguf and kept in its blocks by
# spec-convert --dtype keep into models/qwen2.5-coder-1.5b-instruct-TYPE;
# each made once.  Exit 1 with a line where make qwen has not run.
qwen_requant() {
    _q=models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    need qwen_requant "make qwen" "$_q"
    _b=models/qwen2.5-coder-1.5b-instruct.bf16.gguf
    _g=models/qwen2.5-coder-1.5b-instruct.$1.gguf
    _d=models/qwen2.5-coder-1.5b-instruct-$1
    python3 -c "import sys; sys.path.insert(0, 'tools'); from c2ttools.llamacpp import requantize
requantize('$_q', '$_b', 'BF16'); requantize('$_b', '$_g', '$(echo "$1" | tr a-z A-Z)')"
    need_bins spec-convert
    [ -f "$_d/model.safetensors" ] || bin/spec-convert "$_g" "$_d" --dtype keep >/dev/null
}
