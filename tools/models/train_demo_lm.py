"""train_demo.py's language models: the LLaMA target and the draft LM (their
config, the pretraining loop, saving and loading); stages target and draft."""
import shutil
import time

from c2ttools.progress import fmt_secs, log
from train_demo_common import StepBudget, lr_at
from train_demo_data import BOS, EOS, Corpus, list_corpus, load_tokenizer

import torch  # noqa: E402  (after train_demo_common: OMP_WAIT_POLICY)
import torch.nn.functional as F  # noqa: E402


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
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                               x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
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
