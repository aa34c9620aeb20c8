#!/bin/sh
# The device cycle against the host cycle on this machine's CPU (spec-eval
# --cycle device | host), SmolLM2-135M-Instruct with the shipped head:
# each setting decoded REPS times per cycle in alternating order (host
# first in odd rounds, device first in even ones), separate processes, no
# baseline; per round the ratio of decode speeds device / host; the mean
# ratio with its 95% t interval.  Both cycles build the same trees (tests/
# test_cycle.c), so only speed may differ.  The c2t rows run its device
# program auto picks on a CPU (per layer) and the GPU's (fixed shapes).  Prompts: the held-out SmolLM2
# prompts (data/smollm2/prompts/heldout.jsonl, not a benchmark).
#   REPS (5), Q (8 questions), MAX_NEW (64), THREADS (2); ONLY (a word:
#   only the settings whose name holds it); BATCH (1: sequences decoded
#   together, --batch); ARITH as tools/experiments/arith.sh.  Rows to
#   results/bench/cycle_ab.csv.
. "$(dirname "$0")/lib.sh"
T=models/smollm2-135m-instruct
D=data/smollm2
REPS=${REPS:-5}
Q=${Q:-8}
MAX_NEW=${MAX_NEW:-64}
BATCH=${BATCH:-1}
export OMP_NUM_THREADS=${THREADS:-2}
. tools/experiments/arith.sh
[ -f "$T/config.json" ] || { echo "cycle_ab: $T is missing (make smollm2)" >&2; exit 1; }
OUT=results/bench
mkdir -p $OUT
CSV=$OUT/cycle_ab.csv
echo "setting,round,host_tok_s,device_tok_s,tau_host,tau_device,gamma_host,gamma_device" >$CSV
run() {   # cycle, args... -> "tok/s tau gamma"
    c=$1; shift
    bin/spec-eval --target $T --draft $D/eagle $ARITH --questions $D/prompts/heldout.jsonl --max-questions $Q \
        --max-new-tokens $MAX_NEW --no-baseline --quiet --draft-vocab full --batch $BATCH --cycle "$c" \
        --json $OUT/cycle_ab.json "$@" >/dev/null 2>&1
    python3 -c "import json; t=json.load(open('$OUT/cycle_ab.json'))['total']; print(t['v'], t['tau'], t['gamma'])"
}
echo "device / host cycle, SmolLM2 BF16 head, $Q held-out prompts x $MAX_NEW tokens, batch $BATCH, $REPS rounds, arithmetic: $(arith_name)"
for setting in "eagle2 k10 d6 total 60|--policy eagle2 --topk 10 --depth 6 --total 60 --draft-vocab full" "eagle2 k4 d5 total 8 v4096|--policy eagle2 --topk 4 --depth 5 --total 8 --draft-vocab 4096" \
               "c2t b0.5 k10 d8 total all|--policy c2t --classifier $D/classifier.json --total all" \
               "c2t b0.5 k10 d8 total all fixed|--policy c2t --classifier $D/classifier.json --total all --param program=fixed" \
               "c2t b0.5 k4 d5 total 8 v4096|--policy c2t --classifier $D/classifier.json --topk 4 --depth 5 --total 8 --draft-vocab 4096" \
               "static eagle1|--policy static" "ar|--policy ar"; do
    name=${setting%%|*}; args=${setting#*|}
    case $name in *"${ONLY:-}"*) ;; *) continue ;; esac
    r=1
    while [ $r -le "$REPS" ]; do
        if [ $((r % 2)) -eq 1 ]; then h=$(run host $args); d=$(run device $args)
        else d=$(run device $args); h=$(run host $args); fi
        set -- $h $d
        echo "$name,$r,$1,$4,$2,$5,$3,$6" >>$CSV
        r=$((r + 1))
    done
done
python3 - "$CSV" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 11: 2.20,
       12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11, 18: 2.10, 19: 2.09, 20: 2.09}   # t(0.975, df)
print(f"{'setting':28s} {'host tok/s':>10s} {'device tok/s':>12s} {'device/host':>11s} {'95% interval':>16s}  same tau/gamma")
for name in dict.fromkeys(r['setting'] for r in rows):
    rs = [r for r in rows if r['setting'] == name]
    q = [float(r['device_tok_s']) / float(r['host_tok_s']) for r in rs]
    m = sum(q) / len(q)
    sd = math.sqrt(sum((x - m) ** 2 for x in q) / (len(q) - 1)) if len(q) > 1 else 0
    h = T95.get(len(q) - 1, 2.06 if len(q) <= 31 else 1.96) * sd / math.sqrt(len(q)) if len(q) > 1 else float('nan')
    same = all(r['tau_host'] == r['tau_device'] and r['gamma_host'] == r['gamma_device'] for r in rs)
    hv = sum(float(r['host_tok_s']) for r in rs) / len(rs)
    dv = sum(float(r['device_tok_s']) for r in rs) / len(rs)
    print(f"{name:28s} {hv:10.1f} {dv:12.1f} {m:10.3f}x  [{m - h:.3f}, {m + h:.3f}]  {'yes' if same else 'NO'}")
PY
