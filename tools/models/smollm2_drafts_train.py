"""smollm2_drafts.py's training: the EAGLE head (stage eagle), the draft LM (stage
draft) and the answer-token counts (stage counts); the training loop, the head
and its loss are tools/drafts'."""
import torch
import torch.nn.functional as F

from c2ttools.heads import save_head, save_token_counts, saved_size, target_keys
from c2ttools.progress import log
from c2ttools.prompts import IM_END
from c2ttools.rows import load_shards
from drafts.heads import EagleHead, SoftCrossEntropy, answer_loss, eagle_config
from drafts.recipes import SMOLLM2_DRAFT, SMOLLM2_EAGLE
from drafts.train import train_rows
from smollm2_drafts_common import ANSWERS, TARGET, WORK, answer_counts, load_target


def eagle_rows(args):
    """The training answers; with --eagle-rows-frac < 1 a seeded share of them (a
    data-scaling point)."""
    rows = load_shards(ANSWERS, "train")
    if args.eagle_rows_frac < 1:
        keep = torch.randperm(len(rows), generator=torch.Generator().manual_seed(args.seed))
        rows = [rows[i] for i in sorted(keep[:round(len(rows) * args.eagle_rows_frac)].tolist())]
        log(f"eagle: {len(rows)} of the training answers (--eagle-rows-frac {args.eagle_rows_frac})")
    return rows


def train_eagle(args, target, rows, m, name):
    """One EAGLE head on rows with the recipe m (EAGLE's keys); its checkpoint
    (resumable) is WORK/<name>_ckpt.pt.  Returns the head and its training record."""
    c = eagle_config(target.config)
    torch.manual_seed(args.seed + 1)
    head = EagleHead(c)
    embed, lm_head = target.model.embed_tokens, target.lm_head
    # greedy labels: the deeper steps' cross-entropy runs over every answer token of the
    # training data (soft labels need the whole vocabulary)
    deep_vocab = torch.unique(torch.cat([r["ids"][r["n_prompt"]:].long() for r in rows]))
    if m["p_labels"] != "greedy":
        deep_vocab = None
    m = dict(m, deep_vocab=len(deep_vocab) if deep_vocab is not None else "full")

    def loss_fn(model, batch, gen):
        top1 = []
        return answer_loss(model, embed, lm_head, batch, m, gen, deep_vocab, top1), top1

    rec = train_rows(name, head, rows, m, loss_fn, args.seed + 1, WORK / f"{name}_ckpt.pt")
    rec.update(config=c, train_tokens=sum(len(r["ids"]) for r in rows),
               answer_tokens=sum(len(r["ids"]) - r["n_prompt"] for r in rows))
    return head, rec


def save_eagle(head, c, d):
    """The head in the public layout (BF16 safetensors + config.json) in d; its size."""
    return saved_size(d, save_head(d, head, c))


def stage_eagle(args, out, st):
    target, _ = load_target()
    rows = eagle_rows(args)
    m = dict(SMOLLM2_EAGLE, epochs=args.eagle_epochs, unroll=args.eagle_unroll, p_labels=args.eagle_labels)
    # each training set (a share of the answers, the self-written prompts) has its own checkpoint
    head, rec = train_eagle(args, target, rows, m, f"eagle_{len(rows)}rows")
    rec.update(save_eagle(head, rec.pop("config"), out / "eagle"))
    st["eagle"] = rec


def stage_draft(args, out, st):
    from transformers import LlamaConfig, LlamaForCausalLM
    target, tok = load_target()
    rows = load_shards(ANSWERS, "train")
    m = dict(SMOLLM2_DRAFT, epochs=args.draft_epochs)
    tc = target.config
    cfg = LlamaConfig(vocab_size=tc.vocab_size, hidden_size=m["hidden"], intermediate_size=m["ffn"],
                      num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                      num_key_value_heads=m["kv_heads"], head_dim=m["hidden"] // m["heads"],
                      max_position_embeddings=tc.max_position_embeddings, rms_norm_eps=tc.rms_norm_eps,
                      rope_theta=target_keys(tc, ["rope_theta"])["rope_theta"], tie_word_embeddings=True, bos_token_id=tc.bos_token_id,
                      eos_token_id=tc.eos_token_id, pad_token_id=IM_END)
    torch.manual_seed(args.seed + 2)
    draft = LlamaForCausalLM(cfg)
    # embedding (tied): the target's, projected on its top principal directions and scaled
    # to RMS 0.05, so that the draft starts with the target's notion of which tokens are alike
    E = target.model.embed_tokens.weight
    _, _, V = torch.pca_lowrank(E, q=m["hidden"], center=True)
    P = E @ V
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(P / P.pow(2).mean().sqrt() * 0.05)
    W = target.lm_head.weight

    def loss_fn(model, batch, gen):
        ids, feat, answer = batch
        keep = answer[:, 1:]
        z = model.lm_head(model.model(input_ids=ids).last_hidden_state[:, :-1][keep])
        want = ids[:, 1:][keep]
        with torch.no_grad():
            p = F.linear(feat[:, :-1][keep], W).softmax(-1)
        loss = (1 - m["kd_w"]) * F.cross_entropy(z, want) + m["kd_w"] * SoftCrossEntropy.apply(z, p)
        return loss, (z.argmax(-1) == want).float().mean().item()

    name = f"draft_{len(rows)}rows"
    rec = train_rows(name, draft, rows, m, loss_fn, args.seed + 2, WORK / f"{name}_ckpt.pt")
    d = out / "draft"
    draft = draft.to(torch.bfloat16)
    draft.config.torch_dtype = torch.bfloat16
    draft.save_pretrained(str(d), safe_serialization=True)
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        (d / fn).write_bytes((TARGET / fn).read_bytes())
    rec.update(parameters=sum(p.numel() for p in draft.parameters()),
               bytes=(d / "model.safetensors").stat().st_size)
    st["draft"] = rec


def stage_counts(args, out, st):
    """How often each target token is an answer token of the training data: the
    reduced draft vocabulary (spec-eval --draft-vocab N) keeps the N most frequent.
    Written beside both drafts as token_counts.safetensors (I64 [vocab])."""
    counts = answer_counts(load_shards(ANSWERS, "train"))
    for sub in ("eagle", "draft"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        save_token_counts(out / sub, counts, "SmolLM2 answer tokens of data/smollm2/prompts/train.jsonl")
    cum = counts.sort(descending=True).values.cumsum(0).double() / counts.sum()
    st["counts"] = dict(answer_tokens=int(counts.sum()), distinct=int((counts > 0).sum()),
                        coverage={str(n): round(float(cum[n - 1]), 4) for n in (1024, 2048, 4096, 8192, 16384)})
    log(f"counts: {st['counts']}")
