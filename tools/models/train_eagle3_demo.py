#!/usr/bin/env python3
"""Train an EAGLE-3 head for the demo target (data/demo/target) on the CPU, in
the published EAGLE-3 layout (SafeAILab/EAGLE eagle/model/cnets.py), and write
it to data/demo/eagle3/ (config.json + model.safetensors, BF16).

    python3 tools/models/train_eagle3_demo.py                # --steps 400, resumable
    python3 tools/models/train_eagle3_demo.py --export-only  # write the head from the last checkpoint

The recipe (EAGLE-3 paper; eagle/traineagle3/cnets.py + main.py):
  - features: the inputs of three target layers side by side, fc (3h -> h, no
    bias) maps them to h. EAGLE's rule (2, L/2, L-3) names only two distinct
    layers of this 6-layer target, so the head names its own in config.json:
    eagle_aux_hidden_state_layer_ids [1, 3, 5] (low, middle, high; vLLM's key);
  - one decoder layer whose attention reads [input_layernorm(embed(token));
    hidden_norm(feature)] (2h) with the feature as residual, then norm and an
    lm_head over a reduced draft vocabulary: the --draft-vocab most frequent
    tokens of the training corpus (d2t offsets, t2d mask, as EAGLE's scandata);
  - training-time test: the head is unrolled --length steps (EAGLE: 7); step 0
    reads the target's features, step k reads the head's own step k-1 output
    (before the norm) and the token k further on, at position j + k, attending
    to step 0's keys of positions <= j and to its own earlier steps at the same
    slot only (what a tree node sees at depth k); loss = sum_k 0.8^k CE_k, CE
    only where the target's token is in the draft vocabulary.
Deviations (all for a CPU budget on an 8M target, and stated in
data/demo/README.md): labels are the target's greedy tokens (not its soft
distribution; the demo's EAGLE-1 head made the same choice, for the reason
given there); lm_head starts from the target's rows of the draft vocabulary;
short training (--steps x --batch x --seq tokens, one pass over part of the
corpus); target features are computed on the fly (FP32, from the BF16 weights).

Seeded (--seed) and resumable: a checkpoint (head, optimizer, step, RNG state)
goes to --work every --save-every steps, and a rerun continues from it.  The
head, its unrolled loss and the training steps are the shared pipeline's
(tools/drafts).
"""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tools/: the shared c2ttools and drafts packages
import drafts  # noqa: E402,F401  (first: it sets OMP_WAIT_POLICY)
import torch  # noqa: E402
from c2ttools.files import write_json  # noqa: E402
from c2ttools.heads import EAGLE3_KEYS, draft_vocab_maps, eagle3_config, save_head, target_keys  # noqa: E402
from c2ttools.progress import fmt_secs, log  # noqa: E402
from drafts.heads import Eagle3Head, unrolled_loss  # noqa: E402
from drafts.recipes import DEMO_EAGLE3  # noqa: E402
from drafts.train import Checkpoint, lr_at, optimizer_step  # noqa: E402
# train_demo's corpus, tokenizer, target loader
from train_demo_data import Corpus, list_corpus, load_tokenizer  # noqa: E402
from train_demo_lm import load_lm  # noqa: E402

LAYERS = [1, 3, 5]


def draft_vocabulary(corpus, n):
    """The n most frequent corpus tokens (ties to the lower id), ascending."""
    counts = torch.bincount(corpus.ids, minlength=corpus.ids.max().item() + 1).double()
    order = torch.argsort(-counts + torch.arange(counts.numel()) * 1e-9, stable=True)
    used = torch.sort(order[:n]).values
    return used, counts


@torch.no_grad()
def target_pass(target, ids):
    """inputs of LAYERS side by side [B, T, 3h], and greedy next tokens [B, T]"""
    out = target(input_ids=ids, output_hidden_states=True)
    feats = torch.cat([out.hidden_states[l] for l in LAYERS], -1)
    return feats, out.logits.argmax(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", default="data/demo")
    ap.add_argument("--out", default="data/demo/eagle3")
    ap.add_argument("--work", default="build/eagle3_train", help="checkpoints (resumed from)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=DEMO_EAGLE3["steps"])
    ap.add_argument("--batch", type=int, default=DEMO_EAGLE3["batch"])
    ap.add_argument("--seq", type=int, default=DEMO_EAGLE3["seq"])
    ap.add_argument("--length", type=int, default=DEMO_EAGLE3["length"], help="unrolled steps (EAGLE-3: 7)")
    ap.add_argument("--draft-vocab", type=int, default=DEMO_EAGLE3["draft_vocab"])
    ap.add_argument("--lr", type=float, default=DEMO_EAGLE3["lr"])
    ap.add_argument("--warmup", type=int, default=DEMO_EAGLE3["warmup"])
    ap.add_argument("--save-every", type=int, default=20)
    ap.add_argument("--export-only", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    demo, out, work = Path(args.demo), Path(args.out), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    demo_log = json.load(open(demo / "train_log.json"))
    tok = load_tokenizer(demo)
    root, _ = list_corpus()
    train = Corpus(tok, root, demo_log["split"]["train_files"])
    target = load_lm(demo / "target")
    for p in target.parameters():
        p.requires_grad_(False)
    used, counts = draft_vocabulary(train, args.draft_vocab)
    V = target.config.vocab_size
    col = torch.full((V,), -100, dtype=torch.int64)
    col[used] = torch.arange(used.numel())
    c = eagle3_config(target_keys(target.config, EAGLE3_KEYS), args.draft_vocab, LAYERS)
    torch.manual_seed(args.seed)
    head = Eagle3Head(c)
    with torch.no_grad():
        head.lm_head.weight.copy_(target.lm_head.weight[used])
    embed = target.model.embed_tokens
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed + 1)
    ck = Checkpoint(work / "checkpoint.pt", args.save_every)
    step, more = ck.load(head, opt, gen)
    tokens, seconds, hist = more.get("tokens", 0), more.get("seconds", 0.0), more.get("hist", [])
    covered = counts[used].sum().item() / counts.sum().item()
    log(f"draft vocabulary {args.draft_vocab} of {V}: {covered:.1%} of the corpus tokens; "
        f"{sum(p.numel() for p in head.parameters())} parameters")
    pos = train.epoch_windows(args.seq, torch.Generator().manual_seed(args.seed + 2))
    t0 = time.time() - seconds
    while step < args.steps and not args.export_only:
        sel = pos[(step * args.batch) % pos.numel():][:args.batch]
        ids = torch.stack([train.window(int(p), args.seq) for p in sel])
        feats, greedy = target_pass(target, ids)
        lr = lr_at(step, args.steps, args.lr, args.warmup)
        loss, losses, accs = unrolled_loss(head, embed, ids, feats, greedy, col, args.length)
        optimizer_step(opt, head.parameters(), loss, lr, 0.5)
        step += 1
        tokens += ids.numel()
        hist.append([step, loss.item()] + accs)
        if step % 10 == 0 or step == args.steps:
            el = time.time() - t0
            log(f"step {step}/{args.steps} loss {loss.item():.3f} top-1 by step "
                + " ".join(f"{a:.2f}" for a in accs) + f" lr {lr:.1e} {tokens / el:.0f} tok/s "
                f"ETA {fmt_secs(el / step * (args.steps - step))}")
        ck.save(head, opt, gen, step, force=step == args.steps, tokens=tokens, seconds=time.time() - t0, hist=hist)
    sd = save_head(out, head, c, draft_vocab_maps(used, V))   # BF16 weights, then d2t and t2d
    last = hist[-1] if hist else []
    record = dict(steps=step, tokens=tokens, seconds=round(time.time() - t0 if not args.export_only else 0, 1),
                  batch=args.batch, seq=args.seq, length=args.length, lr=args.lr, warmup=args.warmup,
                  seed=args.seed, threads=args.threads, draft_vocab=args.draft_vocab,
                  corpus_coverage=round(covered, 4), layers=LAYERS, final_loss=last[1] if last else None,
                  final_top1_by_step=[round(a, 4) for a in last[2:]],
                  versions=dict(torch=torch.__version__), tensors={k: list(v.shape) for k, v in sorted(sd.items())})
    write_json(out / "train_log.json", record)
    log(f"wrote {out}: {sorted(sd)}")


if __name__ == "__main__":
    main()
