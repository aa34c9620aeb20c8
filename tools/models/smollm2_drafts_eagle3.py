"""smollm2_drafts.py's EAGLE-3 head (not shipped): the target's layer inputs
(stage features3), the head trained with tools/drafts' modules (stage eagle3)
and its held-out figures."""
import os
import time
from pathlib import Path

import torch

from c2ttools.heads import (EAGLE3_KEYS, EVAL_STEPS, draft_vocab_maps, eagle3_config, save_head, saved_size,
                            target_keys)
from c2ttools.progress import Progress
from drafts.eval import Calibration
from drafts.heads import Eagle3Head, load_eagle3, unrolled_loss
from drafts.recipes import SMOLLM2_EAGLE3
from drafts.train import pad_batch, train_rows
from smollm2_drafts_common import ANSWERS, VOCAB, WORK, answer_counts, load_target


FEAT3 = WORK / "features3"
E3_DIR = Path("models/smollm2-eagle3")   # not shipped: see eagle3_section()
E3_LAYERS = [2, 15, 27]   # EAGLE-3's rule (2, L/2, L-3) on SmolLM2's 30 layers


@torch.no_grad()
def stage_features3(args, out, st):
    """The inputs of the E3_LAYERS target layers at every position of the answers
    (what the runtime captures for an EAGLE-3 head), FP32 compute on the BF16
    weights, stored BF16 side by side [n, 3h], one file per answers shard. Padding
    sits at the end of a batch, so the causal mask keeps it out of every real
    position. Resumable: a shard newer than its answers shard is kept."""
    target, _ = load_target()
    target.model.layers = target.model.layers[:max(E3_LAYERS) + 1]   # hidden_states[l] = layer l's input
    FEAT3.mkdir(parents=True, exist_ok=True)
    shards = sorted(ANSWERS.glob("t*_*.pt"))
    pr = Progress("features3", len(shards))
    tokens = 0
    for i, p in enumerate(shards):
        dst = FEAT3 / p.name
        if dst.exists() and dst.stat().st_mtime >= p.stat().st_mtime:
            continue
        rows = torch.load(p)
        feats = [None] * len(rows)
        batches, cur = [], []
        for j in sorted(range(len(rows)), key=lambda j: len(rows[j]["ids"])):
            if cur and (len(cur) + 1) * len(rows[j]["ids"]) > 4096:
                batches.append(cur)
                cur = []
            cur.append(j)
        for batch in batches + [cur]:
            hs = target.model(input_ids=pad_batch(rows, batch)[0], output_hidden_states=True).hidden_states
            f = torch.cat([hs[l] for l in E3_LAYERS], -1)
            for b, r in enumerate(batch):
                feats[r] = f[b, :len(rows[r]["ids"])].to(torch.bfloat16).clone()
                tokens += len(rows[r]["ids"])
        torch.save(feats, str(dst) + ".tmp")
        os.replace(str(dst) + ".tmp", dst)
        pr.show(i + 1, f"{tokens / (time.time() - pr.t0):.0f} tok/s")
    st["features3"] = dict(layers=E3_LAYERS, shards=len(shards))


def load_rows3(split):
    """c2ttools.rows.load_shards, with each row's feature the E3_LAYERS inputs (stage features3)."""
    rows = []
    for p in sorted(ANSWERS.glob("t*_*.pt")):
        shard = torch.load(p)
        if not any(r["split"] == split for r in shard):
            continue
        if not (FEAT3 / p.name).exists():
            raise SystemExit(f"smollm2_drafts: {FEAT3 / p.name} is missing: run --stages features3")
        for r, f in zip(shard, torch.load(FEAT3 / p.name)):
            if r["split"] == split:
                assert f.shape[0] == len(r["ids"]), f"{FEAT3 / p.name}: {r['qid']} length differs"
                r["feat"] = f
                rows.append(r)
    return rows


def e3_vocabulary(rows, n):
    """The n most frequent answer tokens of rows (ties to the lower id), ascending:
    the head's draft vocabulary (EAGLE-3's d2t)."""
    counts = answer_counts(rows).double()
    order = torch.argsort(-counts + torch.arange(VOCAB) * 1e-9, stable=True)
    return torch.sort(order[:n]).values


def e3_labels(ids, answer):
    """greedy[:, t]: the target's greedy token after x_t where the answers give it
    (x_(t+1) is an answer token), else VOCAB (no label)."""
    g = torch.full_like(ids, VOCAB)
    g[:, :-1] = torch.where(answer[:, 1:], ids[:, 1:], VOCAB)
    return g


def stage_eagle3(args, out, st):
    """An EAGLE-3 head (tools/drafts/heads.py's Eagle3Head and unrolled loss: the
    published layout, training-time test over --eagle3-length steps, 0.8^k step
    weights) on the inputs of target layers 2, 15, 27; greedy labels where the answer
    gives them; lm_head over the draft vocabulary, started from the target's rows."""
    target, _ = load_target()
    rows = load_rows3("train")
    m = dict(SMOLLM2_EAGLE3, epochs=args.eagle3_epochs, length=args.eagle3_length)
    used = e3_vocabulary(rows, m["draft_vocab"])
    col = torch.full((VOCAB + 1,), -100, dtype=torch.long)   # target id -> draft column; VOCAB: no label
    col[used] = torch.arange(len(used))
    c = eagle3_config(target_keys(target.config, EAGLE3_KEYS), m["draft_vocab"], E3_LAYERS)
    c["tie_word_embeddings"] = False
    torch.manual_seed(args.seed + 3)
    head = Eagle3Head(c)
    with torch.no_grad():
        head.lm_head.weight.copy_(target.lm_head.weight[used])
    embed = target.model.embed_tokens

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        loss, _, accs = unrolled_loss(model, embed, ids, feat, e3_labels(ids, answer), col, m["length"])
        return loss, accs + [float("nan")] * (m["length"] - len(accs))

    name = f"eagle3_{len(rows)}rows"
    rec = train_rows(name, head, rows, m, loss_fn, args.seed + 3, WORK / f"{name}_ckpt.pt")
    d = E3_DIR
    maps = draft_vocab_maps(used, VOCAB)
    sd = save_head(d, head, c, maps)
    rec.update(saved_size(d, {k: v for k, v in sd.items() if k not in maps}))
    rec.update(train_tokens=sum(len(r["ids"]) for r in rows), layers=E3_LAYERS)
    st["eagle3"] = rec


@torch.no_grad()
def eval_eagle3(target, rows):
    """The EAGLE-3 head on the held-out answers, unrolled as it drafts a chain:
    step k's top-1 agreement where the k-1 tokens before it were the target's (a
    target token outside the draft vocabulary counts as a miss), step 1's top-3
    and calibration."""
    head, used = load_eagle3(E3_DIR)
    embed = target.model.embed_tokens
    cal = Calibration(10)
    hit, cnt, top3 = [0] * EVAL_STEPS, [0] * EVAL_STEPS, 0
    for r in rows:
        ids, feat, answer = pad_batch([r], [0])
        greedy = e3_labels(ids, answer)
        h, cache, T = head.fc(feat), [], ids.shape[1]
        for k in range(min(EVAL_STEPS, T - 1)):
            n = T - 1 - k
            tok = torch.zeros_like(ids)
            tok[:, :n] = ids[:, 1 + k:]
            h = head.midlayer(embed(tok), h, k, cache)
            want = greedy[:, 1 + k:]
            keep = want != VOCAB
            z, want = head.lm_head(head.norm(h[:, :n]))[keep], want[keep]
            hit[k] += (used[z.argmax(-1)] == want).sum().item()
            cnt[k] += want.numel()
            if k == 0:
                top3 += (used[z.topk(3, -1).indices] == want[:, None]).any(-1).sum().item()
                col = torch.searchsorted(used, want).clamp(max=len(used) - 1)
                cal.add(z, torch.where(used[col] == want, col, -1))
    return dict(eagle3_top1=round(hit[0] / cnt[0], 4), eagle3_top3=round(top3 / cnt[0], 4),
                eagle3_step_top1=[round(a / max(b, 1), 4) for a, b in zip(hit, cnt)],
                eagle3_calibration=cal.result())
