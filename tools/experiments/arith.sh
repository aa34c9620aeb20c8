# Sourced by the experiment scripts: ARITH, spec-eval's arithmetic options
# for every decoding run.  Unset, it is llama.cpp's arithmetic
# (--cpu-fast-gemm on --kv-dtype bf16) where the CPU has AVX512-BF16, else ""
# (F32 products and KV cache); set (also to ""), it is kept.  arith_name
# says which, for the reports.
if [ -z "${ARITH+set}" ]; then
    ARITH=""
    grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && ARITH="--cpu-fast-gemm on --kv-dtype bf16"
fi
arith_name() { echo "${ARITH:-the defaults (F32 products and KV cache)}"; }
