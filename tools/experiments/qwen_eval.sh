#!/bin/sh
# make qwen-eval: Qwen2.5-Coder-1.5B-Instruct with its 0.5B sibling as draft
# LM (make qwen), end to end on this machine's CPU, next to llama.cpp on the
# same files, prompts, chat template and token budget.
#   1. ours (spec-eval, each run A/B against ar in the same process with its
#      95% interval, --check-lossless): chain, eagle2 at EAGLE-2's paper
#      sizes (topk 10, depth 6, total 60) and the plain commands of chain,
#      eagle2 and c2t (no size options: sized from measured costs; c2t with
#      CLS, skipped with a line while it does not exist) on the first turns
#      of EVAL_Q questions of each of humaneval, mt_bench, gsm8k x MAX_NEW
#      tokens -> results/qwen/<label>.json, eval.csv;
#   2. llama.cpp (tools/experiments/llamacpp.sh): plain decoding of the 1.5B
#      (llama-bench tg MAX_NEW) in BF16 (the Q4_K_M values rounded by
#      llama-quantize: the values of our BF16 conversion) and in the original
#      Q4_K_M; llama-speculative-simple with the 0.5B as draft in the same
#      weights as ours (make qwen's Q4_0: the original GGUF requantised by
#      llama-quantize, the blocks spec-convert --dtype q4_0 writes; with
#      QWEN_DRAFT=keep the original GGUF) (its defaults, --spec-type
#      draft-simple) on the same prompts (our ChatML rendering with Qwen's
#      default system prompt), with the BF16 target and with the original
#      one, with its acceptance -> llamacpp_rows.csv, llamacpp_*.txt;
#   3. the table -> results/qwen/eval.txt (the CPU's ISA flags on its first line).
# Sizes: EVAL_Q (5 a benchmark), MAX_NEW (128), THREADS (2).  ARITH: our
# arithmetic (tools/experiments/arith.sh).  QWEN_OUT: the results folder.
# QWEN_WEIGHTS=keep: ours with the target in the GGUF's own blocks (the
# -keep folder of `make qwen QWEN_DTYPE=keep`) against llama.cpp on the
# original files only, into results/qwen-keep; bf16 (default): the BF16
# target, as above; iq4_xs, iq4_nl, q2_k, ...: the 1.5B requantised by
# llama-quantize to that type (lib.sh's qwen_requant) and kept in its blocks,
# against llama.cpp on that file, into results/qwen-TYPE.  The draft is make qwen's in both, the 0.5B in Q4_0;
# QWEN_DRAFT=keep: the 0.5B's own blocks (make qwen QWEN_DRAFT_DTYPE=keep).
# QWEN_BIN: the folder of our commands (bin-avx2 for `make BIN=bin-avx2
# ARCH=-march=haswell`; llama.cpp then with LLAMACPP_ISA=avx2; OpenBLAS
# then runs its Haswell kernels, OPENBLAS_CORETYPE=Haswell, as on an AVX2-only CPU).  On a CPU
# with AMX, LLAMACPP_ISA=noamx (tools/experiments/llamacpp.sh says why).
# ONLY_LLAMACPP=1 reruns step 2 and the table; ONLY_OURS=1 skips step 2;
# ONLY_TABLE=1 prints the table again from the results folder's files.
# RUNS: the labels of step 1 to run (default all five: chain-len4
# eagle2-paper chain-plain eagle2-plain c2t-plain); the rows of the others
# are kept from eval.csv.
. "$(dirname "$0")/lib.sh"
QWEN_WEIGHTS=${QWEN_WEIGHTS:-bf16}
QWEN_DRAFT=${QWEN_DRAFT:-q4_0}
DL=models/download/qwen
case $QWEN_DRAFT in
q4_0) D=models/qwen2.5-coder-0.5b-instruct DQ=$DL/qwen2.5-coder-0.5b-instruct-q4_0.gguf ;;
keep) D=models/qwen2.5-coder-0.5b-instruct-keep DQ=$DL/qwen2.5-coder-0.5b-instruct.gguf ;;
*) echo "qwen-eval: QWEN_DRAFT is q4_0 or keep, not '$QWEN_DRAFT'" >&2; exit 2 ;;
esac
case $QWEN_WEIGHTS in
bf16) T=models/qwen2.5-coder-1.5b-instruct
      R=${QWEN_OUT:-results/qwen} BASE=plain-bf16 MAKE_PAIR="make qwen" ;;
keep) T=models/qwen2.5-coder-1.5b-instruct-keep
      R=${QWEN_OUT:-results/qwen-keep} BASE=plain-q4_k_m MAKE_PAIR="make qwen QWEN_DTYPE=keep" ;;
*)    qwen_requant "$QWEN_WEIGHTS"
      T=models/qwen2.5-coder-1.5b-instruct-$QWEN_WEIGHTS
      R=${QWEN_OUT:-results/qwen-$QWEN_WEIGHTS} BASE=plain-$QWEN_WEIGHTS MAKE_PAIR="make qwen" ;;
esac
[ "$QWEN_DRAFT" = keep ] && MAKE_PAIR="$MAKE_PAIR QWEN_DRAFT_DTYPE=keep"
B=${QWEN_BENCH:-../shared/benchmarks}
case ${QWEN_BIN:-bin} in *avx2*) export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} ;; esac
EVAL_Q=${EVAL_Q:-5}
MAX_NEW=${MAX_NEW:-128}
THREADS=${THREADS:-2}
CLS=${CLS:-data/qwen/classifier.json}
BENCHES="humaneval mt_bench gsm8k"
QWEN_SYSTEM="You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
export OMP_NUM_THREADS=$THREADS
. tools/experiments/arith.sh
. tools/experiments/llamacpp_prompts.sh
need qwen-eval "$MAKE_PAIR" "$T/config.json" "$D/config.json"
files=""
for b in $BENCHES; do
    need qwen-eval "" "$B/$b/question.jsonl"
    files="$files $B/$b/question.jsonl"
done
mkdir -p "$R"
isa=$(grep -owE 'avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')

if [ -z "${ONLY_LLAMACPP:-}${ONLY_TABLE:-}" ]; then
    echo "== 1/3 ours: $EVAL_Q first turns of each of $BENCHES, $MAX_NEW tokens, $THREADS threads"
    RUNS=${RUNS:-chain-len4 eagle2-paper chain-plain eagle2-plain c2t-plain}
    # the rows of this step's runs are replaced, the others kept
    if [ -f "$R/eval.csv" ]; then
        awk -F, -v runs=" $RUNS " '{ split($3, v, ";") } FNR == 1 || index(runs, " " v[1] " ") == 0' "$R/eval.csv" >"$R/eval.csv.new"
        mv "$R/eval.csv.new" "$R/eval.csv"
    fi
    qs=""
    for f in $files; do qs="$qs --questions $f"; done
    # run LABEL POLICY ARGS...: one spec-eval run, A/B against ar, into LABEL.json and a row of eval.csv
    run() {
        label=$1 policy=$2; shift 2
        case " $RUNS " in *" $label "*) ;; *) return 0 ;; esac
        echo "-- $label"
        ${QWEN_BIN:-bin}/spec-eval --target $T --draft $D --draft-kind lm --policy "$policy" $qs --max-questions "$EVAL_Q" \
            --max-turns 1 --max-new-tokens "$MAX_NEW" --check-lossless --json "$R/$label.json" --csv "$R/eval.csv" \
            --label "setting=$label" "$@" || echo "qwen-eval: $label failed or was not lossless" >&2
    }
    run chain-len4 chain --draft-len 4 $ARITH
    run eagle2-paper eagle2 --topk 10 --depth 6 --total 60 $ARITH
    run chain-plain chain
    run eagle2-plain eagle2
    # the shipped classifier was trained on the traces of make qwen's pair:
    # the kept target's values rounded to BF16 and the Q4_0 draft; another
    # dtype of either applies it as is (--force: spec-eval otherwise refuses
    # a classifier of another pair)
    force=""; [ "$QWEN_WEIGHTS$QWEN_DRAFT" = bf16q4_0 ] || force=--force
    if [ -f "$CLS" ]; then run c2t-plain c2t --classifier "$CLS" $force
    else echo "qwen-eval: $CLS is missing; c2t's row is left out" >&2; fi
fi

if [ -z "${ONLY_OURS:-}${ONLY_TABLE:-}" ]; then
    echo "== 2/3 llama.cpp on the same prompts"
    : >"$R/llamacpp_rows.csv"
    if LB=$(tools/experiments/llamacpp.sh); then
        TQ=$DL/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf TQN=q4_k_m
        case $QWEN_WEIGHTS in bf16|keep) ;; *) TQ=models/qwen2.5-coder-1.5b-instruct.$QWEN_WEIGHTS.gguf TQN=$QWEN_WEIGHTS ;; esac
        TB=models/qwen2.5-coder-1.5b-instruct.bf16.gguf
        [ "$QWEN_DRAFT" = q4_0 ] && python3 -c "import sys; sys.path.insert(0, 'tools'); from c2ttools.llamacpp import requantize
requantize('$DL/qwen2.5-coder-0.5b-instruct.gguf', '$DQ', 'Q4_0', '--output-tensor-type', 'q4_0', '--token-embedding-type', 'q4_0')"
        lc_prompts "$R/prompts" "$QWEN_SYSTEM" "$EVAL_Q" $files
        if [ "$QWEN_WEIGHTS" = bf16 ]; then
            python3 -c "import sys; sys.path.insert(0, 'tools'); from c2ttools.llamacpp import requantize
requantize('$TQ', '$TB', 'BF16')"
            lc_bench "$R/llamacpp_rows.csv" plain-bf16 $TB "$MAX_NEW" "$THREADS"
        fi
        lc_bench "$R/llamacpp_rows.csv" plain-$TQN $TQ "$MAX_NEW" "$THREADS"
        if [ "$QWEN_WEIGHTS" = bf16 ]; then
            lc_run "$R/llamacpp_rows.csv" "$R/llamacpp_spec_bf16.txt" speculative-bf16 "$R/prompts" "$MAX_NEW" "$THREADS" \
                "$LB/llama-speculative-simple" -m $TB -md $DQ --spec-type draft-simple
        fi
        lc_run "$R/llamacpp_rows.csv" "$R/llamacpp_spec_$TQN.txt" speculative-$TQN "$R/prompts" "$MAX_NEW" "$THREADS" \
            "$LB/llama-speculative-simple" -m $TQ -md $DQ --spec-type draft-simple
    else
        echo "qwen-eval: llama.cpp could not be built; its rows are left out" >&2
    fi
fi

echo "== 3/3 the table"
[ -f "$R/llamacpp_rows.csv" ] || : >"$R/llamacpp_rows.csv"   # ONLY_OURS on a new folder: no llama.cpp rows
{ echo "CPU flags: $isa; $THREADS threads; weights: $QWEN_WEIGHTS, draft $QWEN_DRAFT; arithmetic of ours: $(arith_name) (plain rows: their own, see the JSON); llama.cpp build: ${LLAMACPP_ISA:-native}"
# ours: the A/B speedup against ar in the same process with its 95% interval;
# llama.cpp's rows and "vs lc bf16" (or q4_k_m) divide tok/s of different processes
awk -F, -v base="$BASE" 'FILENAME ~ /eval.csv/ && FNR > 1 { n++; p[n] = $1; s[n] = $3; t[n] = $4; g[n] = $5; v[n] = $6
                                            sp[n] = ($7 == "" ? "-" : sprintf("%.2fx [%.2f, %.2f]", $7, $8, $9)) }
    FILENAME ~ /llamacpp_rows/ { m++; ln[m] = $1; lv[m] = $4; la[m] = $5; if ($1 == base) lp = $4 }
    END {
        printf "%-26s %-14s %9s %6s %8s %-20s %8s %9s\n", "runtime/policy", "setting", "gamma(k)", "tau", "tok/s",
               "vs our ar (A/B)", "accept%", "vs lc " substr(base, 7)
        for (i = 1; i <= n; i++)
            printf "%-26s %-14s %9.2f %6.2f %8.2f %-20s %8s %9s\n", "ours/" p[i], s[i], g[i] / 1000, t[i], v[i], sp[i], "-",
                   (lp > 0 ? sprintf("%.2fx", v[i] / lp) : "-")
        for (i = 1; i <= m; i++)
            printf "%-26s %-14s %9s %6s %8.2f %-20s %8s %9s\n", "llama.cpp/" ln[i], "-", "-", "-", lv[i], "-", la[i],
                   (lp > 0 ? sprintf("%.2fx", lv[i] / lp) : "-")
    }' "$R/eval.csv" "$R/llamacpp_rows.csv"; } | tee "$R/eval.txt"
