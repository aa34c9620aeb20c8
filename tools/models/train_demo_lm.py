"""train_demo.py's training: the LLaMA target and the draft LM (their config, the
pretraining loop, saving and loading; stages target and draft) and the EAGLE head
on the target's features (stage eagle; the head and its loss are tools/drafts')."""
import shutil
import time

from c2ttools.heads import save_head
from c2ttools.progress import fmt_secs, log
from drafts.heads import EagleHead, eagle_batch_loss, eagle_config
from drafts.train import StepBudget, lr_at, optimizer_step
from train_demo_data import BOS, EOS, Corpus, list_corpus, load_tokenizer

import torch
import torch.nn.functional as F


def llama_config(s, kind, vocab, bos_id, eos_id):
    from transformers import LlamaConfig
    m = s[kind]
    return LlamaConfig(vocab_size=vocab, hidden_size=m["hidden_size"],
                       intermediate_size=m["intermediate_size"],
                       num_hidden_layers=m["num_hidden_layers"],
                       num_attention_heads=m["num_attention_heads"],
                       num_key_value_heads=m["num_key_value_heads"],
                       max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5,
                       hidden_act="silu", tie_word_embeddings=False, attention_bias=False,
                       mlp_bias=False, initializer_range=0.02, bos_token_id=bos_id,
                       eos_token_id=eos_id, torch_dtype="bfloat16", use_cache=True)


def batches(corpus, T, B, gen):
    """Endless deterministic stream of [B, T] training batches."""
    while True:
        pos = corpus.epoch_windows(T, gen)
        for i in range(0, pos.numel() - B + 1, B):
            yield torch.stack([corpus.window(int(p), T) for p in pos[i:i + B]])


def train_lm(model, corpus, m, s, seed, max_minutes, name):
    """Pretrain a LlamaForCausalLM; BF16 autocast, FP32 master weights, AdamW."""
    B = m["batch"]
    budget = StepBudget(m["steps"], max_minutes, name)
    T1, T2 = s["seq_len"], s["long_seq_len"]
    gen = torch.Generator().manual_seed(seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": m["wd"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=m["lr"], betas=(0.9, 0.95), eps=1e-8)
    it_short = batches(corpus, T1, B, gen)
    it_long = None
    model.train()
    t_start = time.time()
    tokens, ema, done, long_steps = 0, None, 0, 0
    step = 0
    while step < budget.total:
        steps = budget.total
        if step < steps - int(round(steps * m["long_frac"])):
            x = next(it_short)
        else:
            if it_long is None:
                it_long = batches(corpus, T2, max(1, B * T1 // T2), gen)
                log(f"{name}: switching to sequence length {T2}")
            x = next(it_long)
            long_steps += 1
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                               x[:, 1:].reshape(-1))
        optimizer_step(opt, model.parameters(), loss, lr)
        tokens += x.numel()
        step = done = step + 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        el = time.time() - t_start
        if done % 10 == 1 or done == steps:
            log(f"{name} step {done}/{steps} loss {loss.item():.3f} (ema {ema:.3f}) lr {lr:.2e} "
                f"T {x.shape[1]} {tokens / el:.0f} tok/s ETA {fmt_secs(el / done * (steps - done))}")
        budget.update(done)
    return dict(steps=done, tokens=tokens, seconds=round(time.time() - t_start, 1),
                final_loss_ema=round(ema, 4), batch=B, seq_len=T1, long_seq_len=T2,
                long_steps=long_steps, lr=m["lr"], warmup=m["warmup"], weight_decay=m["wd"],
                **budget.record())


def save_lm(model, out_dir, tok_src):
    out_dir.mkdir(parents=True, exist_ok=True)
    model = model.to(torch.bfloat16)
    model.config.torch_dtype = torch.bfloat16
    model.save_pretrained(str(out_dir), safe_serialization=True)
    if tok_src is not None and tok_src.resolve() != out_dir.resolve():
        for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copyfile(tok_src / fn, out_dir / fn)


def load_lm(path):
    from transformers import LlamaForCausalLM
    m = LlamaForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32)
    m.eval()
    return m


def stage_lm(kind, args, s, out, st):
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    train = Corpus(tok, root, st["split"]["train_files"])
    from transformers import LlamaForCausalLM
    torch.manual_seed(args.seed + (0 if kind == "target" else 1))
    cfg = llama_config(s, kind, tok.get_vocab_size(with_added_tokens=True),
                       tok.token_to_id(BOS), tok.token_to_id(EOS))
    model = LlamaForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{kind}: {n_params / 1e6:.2f}M parameters, {len(train)} training tokens in the stream")
    res = train_lm(model, train, s[kind], s, args.seed + (0 if kind == "target" else 1),
                   args.max_minutes.get(kind), kind)
    res["parameters"] = n_params
    save_lm(model, out / kind, out / "target")
    log(f"{kind}: saved to {out / kind}")
    return res


@torch.no_grad()
def target_features(target, windows, bs=8, name="features"):
    """Final features (LlamaModel output, after the final RMSNorm), FP32 compute."""
    feats = []
    t0 = time.time()
    for i in range(0, len(windows), bs):
        x = torch.stack(windows[i:i + bs])
        feats.append(target.model(input_ids=x).last_hidden_state)
        if (i // bs) % 25 == 0:
            n = i + x.shape[0]
            el = time.time() - t0
            log(f"{name}: {n}/{len(windows)} windows, {n * x.shape[1] / el:.0f} tok/s, "
                f"ETA {fmt_secs(el / n * (len(windows) - n))}")
    return torch.cat(feats)


def stage_eagle(args, s, out, st):
    m = s["eagle"]
    tok = load_tokenizer(out)
    root, _ = list_corpus()
    train = Corpus(tok, root, st["split"]["train_files"])
    target = load_lm(out / "target")            # the saved BF16 weights, FP32 compute
    for p in target.parameters():
        p.requires_grad_(False)
    T = s["seq_len"]
    gen = torch.Generator().manual_seed(args.seed + 2)
    pos = train.epoch_windows(T, gen)[:m["feature_windows"]]
    windows = [train.window(int(p), T) for p in pos]
    t0 = time.time()
    feats = target_features(target, windows, name="eagle features")
    ids = torch.stack(windows)
    feat_secs = time.time() - t0
    log(f"eagle: {ids.numel()} feature tokens in {fmt_secs(feat_secs)}")
    c = eagle_config(target.config)
    torch.manual_seed(args.seed + 3)
    head = EagleHead(c)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    opt = torch.optim.AdamW(head.parameters(), lr=m["lr"], betas=(0.9, 0.95), weight_decay=0.0)
    B = m["batch"]
    budget = StepBudget(m["steps"], args.max_minutes.get("eagle"), "eagle")
    n = ids.shape[0]
    order = torch.randperm(n, generator=gen)
    cursor, ema, tokens = 0, None, 0
    t1 = time.time()
    done = step = 0
    head.train()
    while step < budget.total:
        steps = budget.total
        if cursor + B > n:
            order, cursor = torch.randperm(n, generator=gen), 0
        sel = order[cursor:cursor + B]
        cursor += B
        lr = lr_at(step, steps, m["lr"], m["warmup"])
        loss, vloss, ploss, logits, t_greedy = eagle_batch_loss(head, embed, lm_head, ids[sel],
                                                           feats[sel], m, gen)
        optimizer_step(opt, head.parameters(), loss, lr, m["grad_clip_value"])
        tokens += sel.numel() * (T - 1)
        step = done = step + 1
        el = time.time() - t1
        if done % 20 == 1 or done == steps:
            acc = (logits.argmax(-1) == t_greedy).float().mean().item()
            ema = (loss.item(), acc) if ema is None else (0.8 * ema[0] + 0.2 * loss.item(),
                                                          0.8 * ema[1] + 0.2 * acc)
            log(f"eagle step {done}/{steps} loss {loss.item():.4f} (v {vloss.item():.4f} "
                f"p {ploss.item():.3f}) top1 {acc:.3f} (ema {ema[1]:.3f}) lr {lr:.2e} "
                f"{tokens / el:.0f} tok/s ETA {fmt_secs(el / done * (steps - done))}")
        budget.update(done)
    sd = save_head(out / "eagle", head, c)
    log(f"eagle: saved {sorted(sd)}")
    return dict(steps=done, tokens=tokens, feature_tokens=ids.numel(), **budget.record(),
                feature_windows=len(windows), feature_seconds=round(feat_secs, 1),
                seconds=round(time.time() - t1, 1),
                final_top1_ema=round(ema[1], 4), parameters=sum(v.numel() for v in sd.values()),
                lr=m["lr"], batch=B, seq_len=T, noise=m["noise"], v_w=m["v_w"], p_w=m["p_w"],
                p_labels=m["p_labels"],
                grad_clip_value=m["grad_clip_value"],
                tensors={k: list(v.shape) for k, v in sorted(sd.items())})
