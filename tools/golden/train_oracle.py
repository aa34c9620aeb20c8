#!/usr/bin/env python3
"""PyTorch oracle and reference for spec-train (the C classifier trainer).

Subcommands

  train DUMP_DIR OUT_DIR
      Replays spec-train's training in PyTorch from the files
      `spec-train --dump-init DUMP_DIR --dump-epochs N` wrote: the same
      initial weights (init.safetensors) and the same batches
      (epoch_NNN.safetensors: x [N,n] model inputs of the n features, y [N] labels, consumed
      in order in slices of `batch`), with nn.Linear/ReLU/nn.Linear,
      nn.BCEWithLogitsLoss (mean) and torch.optim.Adam.  After every epoch it
      saves the weights (OUT_DIR/torch_weights_epoch_NNN.safetensors) and
      evaluates on the held-out trees (eval.safetensors) with its own
      implementation of the metrics (recall, theta, precision, F1, accuracy,
      AUC; C2T tree filter; EAGLE-2 top-N; beta sweep; entropy buckets).
      Writes OUT_DIR/oracle.json.

  forward WEIGHTS.safetensors INPUTS.safetensors OUT.safetensors
      Loads spec-train's safetensors export into an equivalent torch module
      (load_state_dict strict; input transforms from the file's metadata)
      and writes conf = sigmoid(module(transform(features))) for the
      inputs' vectors named as the file's features (P, H, depth by default;
      also p, rank, parent_H).

  reference --traces FILE [--traces FILE ...] [options]
      The whole pipeline in plain PyTorch, as a researcher would write it
      (h5py + hdf5plugin to read the trace files, numpy sampling, a torch
      training loop over shuffled index batches, one tree per evaluation
      batch).  Used by tests/bench_train.c for the wall-time comparison;
      prints one JSON object with timings and metrics.

Package versions: tools/requirements.txt (torch, numpy, safetensors, h5py,
hdf5plugin).
"""
import argparse
import json
import math
import os
import sys
import time


def load_torch():
    import torch
    return torch


def make_module(torch, hidden, n_in=3):
    class C2TClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(n_in, hidden)
            self.fc2 = torch.nn.Linear(hidden, 1)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))).squeeze(-1)   # logits

    return C2TClassifier()


# ---------------------------------------------------------------- metrics

def rates(pred, y):
    import numpy as np
    pred = pred.astype(bool)
    y = y.astype(bool)
    tp = int(np.sum(pred & y)); fp = int(np.sum(pred & ~y))
    fn = int(np.sum(~pred & y)); tn = int(np.sum(~pred & ~y))
    n = tp + fp + fn + tn
    recall = tp / (tp + fn) if tp + fn else 0.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"recall": recall, "theta": (tp + fp) / n if n else 0.0, "precision": precision, "f1": f1,
            "accuracy": (tp + tn) / n if n else 0.0, "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def auc(scores, y):
    import numpy as np
    y = y.astype(bool)
    npos = int(y.sum()); nneg = len(y) - npos
    if npos == 0 or nneg == 0:
        return 0.5
    uniq, inv, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)                     # 1-based rank of each group's last member
    mid = ends - (counts - 1) / 2.0              # average rank of the group
    rank = mid[inv]
    return float((rank[y].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def tree_select(conf, parent, beta):
    """C2T pre-pruning of one tree: conf >= beta and the parent selected."""
    import numpy as np
    n = len(conf)
    state = np.zeros(n, dtype=np.int8)   # 0 unknown, 1 selected, 2 filtered
    for i in range(n):
        chain = []
        j = i
        while j >= 0 and state[j] == 0:
            chain.append(j)
            j = parent[j]
        for k in reversed(chain):
            p = parent[k]
            ok = conf[k] >= beta and (p < 0 or state[p] == 1)
            state[k] = 1 if ok else 2
    return state == 1


def e2_select(P, topn):
    import numpy as np
    n = len(P)
    sel = np.zeros(n, dtype=bool)
    if n <= topn:
        sel[:] = True
        return sel
    order = np.lexsort((np.arange(n), -P.astype(np.float64)))   # P descending, then index
    sel[order[:topn]] = True
    return sel


def path_min(conf, parent):
    """Per node, the smallest confidence on its path from the root."""
    import numpy as np
    out = np.empty(len(conf))
    for i in range(len(conf)):
        m, j = np.inf, i
        while j >= 0:
            m = min(m, float(conf[j]))
            j = parent[j]
        out[i] = m
    return out


def recall_of_top(score, y, k):
    """Share of the positives among the k highest scores; the group of equal
    scores at the cut counts in proportion to the places it gets."""
    import numpy as np
    if not y.any():
        return 0.0
    vals, inv = np.unique(-np.asarray(score, dtype=np.float64), return_inverse=True)   # groups, highest first
    kept, taken = 0.0, 0
    for g in range(len(vals)):
        m = inv == g
        size, pos = int(m.sum()), int(y[m].sum())
        if taken + size <= k:
            kept += pos
        elif taken < k:
            kept += pos * (k - taken) / size
        taken += size
    return kept / int(y.sum())


def bucket_of(H):
    import numpy as np
    b = np.floor(H).astype(np.int64)
    return np.clip(b, 0, 6)


def evaluate(conf, logits, ev, beta, sweep, topn, tables):
    import numpy as np
    y = ev["y"].astype(bool)
    starts = ev["tree_start"]
    parent = ev["parent"]
    P = ev["P"]; H = ev["H"]
    T = len(starts) - 1
    tree_sel = np.zeros(len(y), dtype=bool)
    e2 = np.zeros(len(y), dtype=bool)
    pmin = np.zeros(len(y))
    sweep_tree = {b: np.zeros(len(y), dtype=bool) for b in sweep} if tables else {}
    for t in range(T):
        s, e = int(starts[t]), int(starts[t + 1])
        c = conf[s:e]; par = parent[s:e]
        tree_sel[s:e] = tree_select(c, par, beta)
        e2[s:e] = e2_select(P[s:e], topn)
        pmin[s:e] = path_min(c.astype(np.float64), par)
        for b in sweep_tree:
            sweep_tree[b][s:e] = tree_select(c, par, b)
    z = logits.astype(np.float64)
    loss = float(np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))))
    out = {"auc": auc(conf, y), "loss": loss, "classifier": rates(conf >= beta, y),
           "c2t_tree": rates(tree_sel, y), "eagle2": rates(e2, y),
           "c2t_tree_recall_at_eagle2_theta": recall_of_top(pmin, y, int(e2.sum()))}
    if tables:
        out["beta_sweep"] = [{"beta": b, "classifier": rates(conf >= b, y), "c2t_tree": rates(sweep_tree[b], y)}
                             for b in sweep]
        bk = bucket_of(H)
        rows = []
        for b in list(range(7)) + ["total"]:
            m = np.ones(len(y), dtype=bool) if b == "total" else (bk == b)
            name = "total" if b == "total" else ("[6,inf)" if b == 6 else f"[{b},{b + 1})")
            rows.append({"range": name, "nodes": int(m.sum()), "proportion": float(m.mean()) if len(y) else 0.0,
                         "E2": rates(e2[m], y[m]), "C2T": rates(tree_sel[m], y[m])})
        out["entropy_buckets"] = rows
    return out


def select_epoch(epochs, similar):
    best = max(e["eval"]["classifier"]["recall"] for e in epochs)
    sel = None
    for e in epochs:
        r = e["eval"]["classifier"]
        if r["recall"] < best - similar - 1e-12:
            continue
        if sel is None or r["theta"] < sel["eval"]["classifier"]["theta"] or (
                r["theta"] == sel["eval"]["classifier"]["theta"] and r["recall"] > sel["eval"]["classifier"]["recall"]):
            sel = e
    return sel["epoch"]


# ---------------------------------------------------------------- train

def cmd_train(args):
    torch = load_torch()
    import numpy as np
    from safetensors.torch import load_file, save_file
    torch.set_num_threads(1)
    d = args.dump
    meta = json.load(open(os.path.join(d, "dump.json")))
    hidden, batch = meta["hidden"], meta["batch"]
    init = load_file(os.path.join(d, "init.safetensors"))
    model = make_module(torch, hidden, init["fc1.weight"].shape[1])
    model.load_state_dict(init, strict=True)
    opt = torch.optim.Adam(model.parameters(), lr=meta["lr"], betas=(meta["beta1"], meta["beta2"]),
                           eps=meta["adam_eps"])
    lossf = torch.nn.BCEWithLogitsLoss()
    ev = {k: v.numpy() for k, v in load_file(os.path.join(d, "eval.safetensors")).items()}
    ex = torch.from_numpy(ev["x"])
    epochs = args.epochs or meta["epochs_dumped"]
    os.makedirs(args.out, exist_ok=True)
    hist = []
    for e in range(1, epochs + 1):
        data = load_file(os.path.join(d, f"epoch_{e:03d}.safetensors"))
        x, y = data["x"], data["y"]
        total = 0.0
        for s in range(0, len(y), batch):
            xb, yb = x[s:s + batch], y[s:s + batch]
            opt.zero_grad()
            loss = lossf(model(xb), yb)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(yb)
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()},
                  os.path.join(args.out, f"torch_weights_epoch_{e:03d}.safetensors"))
        with torch.no_grad():
            logits = model(ex).numpy()
            conf = torch.sigmoid(torch.from_numpy(logits)).numpy()
        last = e == epochs
        res = evaluate(conf, logits, ev, meta["beta"], meta["sweep"], meta["e2_topn"], tables=last)
        hist.append({"epoch": e, "train_loss": total / len(y), "eval": res})
        print(f"oracle epoch {e}: loss {total / len(y):.5f} recall {res['classifier']['recall']:.4f} "
              f"theta {res['classifier']['theta']:.4f} auc {res['auc']:.4f}", file=sys.stderr)
    out = {"format": "c2t-train-oracle", "torch": torch.__version__, "numpy": np.__version__,
           "inputs": meta.get("hashes", {}), "epochs": hist,
           "selected_epoch": select_epoch(hist, meta["similar_recall"])}
    json.dump(out, open(os.path.join(args.out, "oracle.json"), "w"), indent=1)


# ---------------------------------------------------------------- forward

def transform(torch, v, f):
    t = torch.log(v + f.get("eps", 1e-6)) if f.get("transform", "raw") == "log" else v
    return (t - f.get("mean", 0.0)) / f.get("std", 1.0)


def cmd_forward(args):
    torch = load_torch()
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    with safe_open(args.weights, "pt") as f:
        md = f.metadata() or {}
    sd = load_file(args.weights)
    hidden, n_in = sd["fc1.weight"].shape
    model = make_module(torch, hidden, n_in)
    model.load_state_dict(sd, strict=True)
    feats = json.loads(md.get("features", "[]")) or [{"name": n} for n in ("P", "H", "depth")]
    inp = load_file(args.inputs)
    cols = [transform(torch, inp[f["name"]].float(), f) for f in feats]
    x = torch.stack(cols, dim=1).float()
    with torch.no_grad():
        conf = torch.sigmoid(model(x))
    save_file({"conf": conf.contiguous()}, args.out, metadata={"torch": torch.__version__})


# ---------------------------------------------------------------- reference

def cmd_reference(args):
    t0 = time.perf_counter()
    torch = load_torch()
    import numpy as np
    import h5py
    import hdf5plugin  # noqa: F401  (registers the zstd filter)
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])   # its first use imports torch._dynamo (~2 s)
    t_import = time.perf_counter() - t0
    if args.threads:
        torch.set_num_threads(args.threads)
    # read: finished rows only (root attributes), as the trace schema says
    feats, labels, parents, sizes = [], [], [], []
    for path in args.traces:
        with h5py.File(path, "r") as f:
            nt, nn = int(f.attrs["n_trees"]), int(f.attrs["n_nodes"])
            first = f["trees/first_node"][:nt]
            cnt = f["trees/n_nodes"][:nt]
            P = f["nodes/P"][:nn]; H = f["nodes/H"][:nn]; d = f["nodes/depth"][:nn]
            a = f["nodes/accepted"][:nn]; par = f["nodes/parent"][:nn]
        for s, c in zip(first, cnt):
            sizes.append((len(feats), s, c))
        feats.append(np.stack([P, H, d.astype(np.float32)], axis=1))
        labels.append(a.astype(np.float32)); parents.append(par)
    X = np.concatenate(feats); Y = np.concatenate(labels); PAR = np.concatenate(parents)
    offs = np.cumsum([0] + [len(f) for f in feats])
    trees = [(int(offs[fi] + s), int(c)) for fi, s, c in sizes]
    t_read = time.perf_counter() - t0 - t_import
    finite = np.isfinite(X).all(axis=1)
    rng = np.random.default_rng(args.seed)
    T = len(trees)
    n_eval = max(1, round(args.eval_frac * T))
    is_eval = np.zeros(T, dtype=bool)
    is_eval[rng.choice(T, n_eval, replace=False)] = True
    train_idx = np.concatenate([np.arange(s, s + c) for (s, c), e in zip(trees, is_eval) if not e])
    train_idx = train_idx[finite[train_idx]]
    pos = train_idx[Y[train_idx] == 1]
    neg = train_idx[Y[train_idx] == 0]
    k = min(len(neg), int(round(args.neg_ratio * len(pos))))
    eval_trees = [t for t, e in zip(trees, is_eval) if e]
    Xt = torch.from_numpy(X)
    Yt = torch.from_numpy(Y)
    torch.manual_seed(args.seed)
    model = make_module(torch, args.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    lossf = torch.nn.BCEWithLogitsLoss()
    t_train = t_eval = 0.0
    hist = []
    for e in range(args.epochs):
        ts = time.perf_counter()
        idx = np.concatenate([pos, rng.choice(neg, k, replace=False)])
        idx = torch.from_numpy(idx)[torch.randperm(len(idx))]
        total = 0.0
        for s in range(0, len(idx), args.batch):
            b = idx[s:s + args.batch]
            opt.zero_grad()
            loss = lossf(model(Xt[b]), Yt[b])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        t_train += time.perf_counter() - ts
        ts = time.perf_counter()
        confs = []
        with torch.no_grad():
            for s, c in eval_trees:                      # one tree per batch, as in the paper
                confs.append(torch.sigmoid(model(Xt[s:s + c])).numpy())
        conf = np.concatenate(confs)
        ye = np.concatenate([Y[s:s + c] for s, c in eval_trees])
        pred = conf >= args.beta
        r = rates(pred, ye)
        r["auc"] = auc(conf, ye)
        t_eval += time.perf_counter() - ts
        hist.append({"epoch": e + 1, "train_loss": total / len(idx), "eval": r})
    total = time.perf_counter() - t0
    print(json.dumps({"total_s": total, "import_s": t_import, "read_s": t_read, "train_s": t_train,
                      "eval_s": t_eval, "records": int(len(X)), "samples_per_epoch": int(len(pos) + k),
                      "records_per_s": len(X) / total, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "epochs": hist}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("dump"); t.add_argument("out")
    t.add_argument("--epochs", type=int, default=0, help="default: every dumped epoch")
    f = sub.add_parser("forward")
    f.add_argument("weights"); f.add_argument("inputs"); f.add_argument("out")
    r = sub.add_parser("reference")
    r.add_argument("--traces", action="append", required=True)
    r.add_argument("--epochs", type=int, default=10)
    r.add_argument("--batch", type=int, default=1024)
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--hidden", type=int, default=48)
    r.add_argument("--neg-ratio", type=float, default=1.0)
    r.add_argument("--eval-frac", type=float, default=0.05)
    r.add_argument("--beta", type=float, default=0.5)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    {"train": cmd_train, "forward": cmd_forward, "reference": cmd_reference}[a.cmd](a)


if __name__ == "__main__":
    main()
