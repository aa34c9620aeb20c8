"""smollm2_drafts.py's recipe comparison (stage recipes): EAGLE heads trained by
different recipes on the same answers (whatever the answers stage left in
models/smollm2-work: a CPU-sized set, e.g. --answer-prompts 600), the same
epochs and batches, each measured on the held-out answers as stage eval
measures the shipped head: top-1 agreement at depths 1-4 on its own earlier
predictions, and the τ of a greedy chain of that many steps.  The heads go to
models/smollm2-work/recipes/<name>/ (the EAGLE-3 head to models/smollm2-eagle3/),
the table to <out>/recipes.md and train_log.json."""
import argparse
import time

from c2ttools.heads import chain_tau
from c2ttools.progress import fmt_secs, log
from c2ttools.rows import load_shards
from smollm2_drafts_common import ANSWERS, WORK, load_target
from smollm2_drafts_eagle3 import eval_eagle3, load_rows3, stage_eagle3, stage_features3
from smollm2_drafts_eval import held_eagle
from drafts.recipes import SMOLLM2_EAGLE
from smollm2_drafts_train import eagle_rows, save_eagle, train_eagle

# name: (what it is, the EAGLE keys it changes); eagle3 is the EAGLE-3 stages'
RECIPES = {
    "eagle1": ("EAGLE-1: features + tokens, one step, greedy labels", dict(unroll=1, p_labels="greedy")),
    "eagle1-soft": ("EAGLE-1 with soft labels (the target's whole distribution, the EAGLE reference's)",
                    dict(unroll=1, p_labels="soft")),
    "unroll3": ("3 steps on its own predictions, greedy labels (the shipped head's recipe)",
                dict(unroll=3, p_labels="greedy")),
    "unroll3-soft": ("3 steps, soft labels", dict(unroll=3, p_labels="soft")),
    "unroll5": ("5 steps on its own predictions, greedy labels", dict(unroll=5, p_labels="greedy")),
    "eagle3": ("EAGLE-3: layers 2, 15, 27 as features, training-time test, draft vocabulary 8,192", None),
}
DEFAULT_RECIPES = "eagle1,eagle1-soft,unroll3,unroll5,eagle3"


def stage_recipes(args, out, st):
    names = [n for n in args.recipes.split(",") if n]
    for n in names:
        if n not in RECIPES:
            raise SystemExit(f"smollm2_drafts: --recipes: unknown recipe {n!r} (known: {', '.join(RECIPES)})")
    if "eagle3" in names and args.eagle_rows_frac < 1:
        raise SystemExit("smollm2_drafts: --recipes eagle3 trains on every answer: not with --eagle-rows-frac")
    target, _ = load_target()
    rows = eagle_rows(args)
    held = load_shards(ANSWERS, "heldout")
    res = st.setdefault("recipes", {})
    for n in names:
        if n in res and res[n].get("rows") == len(rows) and res[n].get("epochs") == args.eagle_epochs:
            log(f"recipes: {n} already measured")
            continue
        t0 = time.time()
        if RECIPES[n][1] is None:
            # the EAGLE-3 stages at the same epochs; its features first
            a3 = argparse.Namespace(**vars(args))
            a3.eagle3_epochs = args.eagle_epochs
            stage_features3(a3, out, st)   # keeps the shards already there
            stage_eagle3(a3, out, st)
            ev = eval_eagle3(target, load_rows3("heldout"))
            rec = dict(steps=st["eagle3"]["steps"], parameters=st["eagle3"]["parameters"],
                       step_top1=ev["eagle3_step_top1"], top3=ev["eagle3_top3"])
        else:
            m = dict(SMOLLM2_EAGLE, epochs=args.eagle_epochs, **RECIPES[n][1])
            head, tr = train_eagle(args, target, rows, m, f"recipe_{n}_{len(rows)}rows_{args.eagle_epochs}ep")
            size = save_eagle(head, tr["config"], WORK / "recipes" / n)
            ev = held_eagle(head, target, held)
            rec = dict(steps=tr["steps"], parameters=size["parameters"], step_top1=ev["eagle_step_top1"],
                       top3=ev["eagle_top3"])
        rec.update(recipe=RECIPES[n][0], rows=len(rows), epochs=args.eagle_epochs,
                   answer_tokens=sum(len(r["ids"]) - r["n_prompt"] for r in rows),
                   chain_tau=round(chain_tau(rec["step_top1"]), 3), seconds=round(time.time() - t0, 1))
        res[n] = rec
        log(f"recipes: {n}: top-1 by depth {rec['step_top1']}, chain τ {rec['chain_tau']}, "
            f"{fmt_secs(rec['seconds'])}")
    write_table(out, res, names, len(held))


def write_table(out, res, names, held):
    lines = ["| recipe | what | steps | top-1 d1 / d2 / d3 / d4 | top-3 d1 | chain τ (4 steps) | time (training, evaluation; eagle3 also its features) |",
             "|---|---|---|---|---|---|---|"]
    for n in names:
        r = res[n]
        lines.append(f"| `{n}` | {r['recipe']} | {r['steps']} | "
                     + " / ".join(f"{100 * a:.1f}" for a in r["step_top1"])
                     + f" | {100 * r['top3']:.1f} | {r['chain_tau']:.2f} | {fmt_secs(r['seconds'])} |")
    r0 = res[names[0]]
    head = (f"EAGLE-head recipes on equal data: {r0['rows']:,} training answers ({r0['answer_tokens']:,} answer "
            f"tokens), {r0['epochs']} epochs each; held-out top-1 agreement (%) on {held} held-out answers, "
            f"each depth on the head's own earlier predictions (`python3 tools/models/smollm2_drafts.py "
            f"--stages recipes`).")
    text = head + "\n\n" + "\n".join(lines) + "\n"
    (out / "recipes.md").write_text(text)
    log("recipes:\n" + text)
