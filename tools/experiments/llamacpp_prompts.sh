# Sourced by the experiment scripts that run llama.cpp on the prompts our
# runs decode (smollm2_speed.sh, qwen_eval.sh).
#
# lc_prompts OUTDIR SYSTEM N FILE...: the first turns of the first N
#   questions of each question.jsonl in ChatML (our chatml rendering: system
#   SYSTEM, the user turn, the assistant's opening), one OUTDIR/NNN.txt each.
# lc_run ROWS LOG NAME PROMPTDIR MAX_NEW THREADS CMD...: CMD -f each prompt
#   file -n MAX_NEW -t THREADS --temp 0 --seed 0 (llama-speculative-simple's
#   options), output into LOG; appends "NAME,tokens,seconds,tok/s,accept%" to
#   ROWS, tokens and seconds summed from each "decoded N tokens in S seconds"
#   line, the acceptance from the n_drafted / n_accept lines (- without).
# lc_bench ROWS NAME GGUF MAX_NEW THREADS: llama.cpp's plain decoding,
#   llama-bench's tg MAX_NEW (3 repetitions; no tool of it decodes the
#   prompts plainly with a decode-only timing) -> "NAME,tokens,-,tok/s,-".
# LB, llama.cpp's bin folder, must be set (tools/experiments/llamacpp.sh).

lc_prompts() {
    out=$1 sys=$2 n=$3; shift 3
    rm -rf "$out" && mkdir -p "$out"
    python3 - "$out" "$sys" "$n" "$@" <<'EOF'
import json, sys
out, sysmsg, n, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
k = 0
for src in files:
    for i, line in enumerate(open(src)):
        if i >= n:
            break
        q = json.loads(line)["turns"][0]
        open(f"{out}/{k:03d}.txt", "w").write(
            f"<|im_start|>system\n{sysmsg}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n")
        k += 1
EOF
}

lc_sum() {   # lc_sum ROWS LOG NAME: the row from LOG's "decoded" lines
    awk -v n="$3" '/decoded +[0-9]+ tokens in/ { for (i = 1; i <= NF; i++) if ($i == "decoded") { t += $(i+1); s += $(i+4) } }
        /n_drafted *=/ { d += $NF } /n_accept *=/ { a += $NF }
        END { if (s > 0) printf "%s,%d,%.2f,%.1f,%s\n", n, t, s, t / s, (d > 0 ? sprintf("%.1f", 100 * a / d) : "-") }' "$2" >>"$1"
}

lc_run() {
    rows=$1 log=$2 name=$3 pdir=$4 maxnew=$5 thr=$6; shift 6
    : >"$log"
    for p in "$pdir"/*.txt; do
        "$@" -f "$p" -n "$maxnew" -t "$thr" --temp 0 --seed 0 >>"$log" 2>&1 || echo "llamacpp $name failed on $p" >>"$log"
    done
    lc_sum "$rows" "$log" "$name"
}

lc_bench() {
    "$LB/llama-bench" -m "$3" -t "$5" -p 0 -n "$4" -r 3 -o csv 2>/dev/null |
        awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); c[$i] = i } next }
            { gsub(/"/, ""); printf "%s,%d,-,%.1f,-\n", n, $c["n_gen"], $c["avg_ts"] }' >>"$1"
}
