# Sourced by the experiment scripts: ARITH, spec-eval's and spec-collect's
# arithmetic options for every decoding run, always spelled out (a plain
# spec-eval run picks its own arithmetic, docs/policies.md "Defaults", and
# spec-collect does not: an experiment pins it for both).  Unset, it is
# llama.cpp's arithmetic (--cpu-fast-gemm on --kv-dtype bf16) where the CPU
# has AVX512-BF16, else F32 products and KV cache; set to "", F32; set to
# anything else, it is kept.  arith_name says which, for the reports.
F32_ARITH="--cpu-fast-gemm off --kv-dtype f32"
if [ -z "${ARITH+set}" ]; then
    ARITH="$F32_ARITH"
    grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && ARITH="--cpu-fast-gemm on --kv-dtype bf16"
elif [ -z "$ARITH" ]; then
    ARITH="$F32_ARITH"
fi
arith_name() {
    if [ "$ARITH" = "$F32_ARITH" ]; then echo "F32 products and KV cache ($ARITH)"; else echo "$ARITH"; fi
}
