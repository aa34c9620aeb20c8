"""The draft heads every pipeline trains (tools/drafts/__init__.py): the EAGLE-1
head (EagleHead; unrollable as the decoding loop drafts) and the EAGLE-3 head
(Eagle3Head, the published layout, SafeAILab/EAGLE eagle/model/cnets.py), their
losses, and loading a saved head.  Their config.json and files are written by
c2ttools.heads; parameter names are those of the public checkpoints."""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from c2ttools.heads import EAGLE1_KEYS, eagle1_config, read_head, target_keys
from c2ttools.prompts import IM_END


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope(x, pos, theta):
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    f = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class EagleAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd, self.theta = h // self.nh, c["rope_theta"]
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def qkv(self, x):
        """Queries, keys and values [B, heads, T, hd] of slots 0..T-1 (RoPE at the slot
        index; keys and values repeated to the query heads)."""
        B, T, _ = x.shape
        pos = torch.arange(T, device=x.device)
        q = rope(self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2), pos, self.theta)
        k = rope(self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2), pos, self.theta)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        rep = self.nh // self.nkv
        return q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)

    def out(self, o):
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True))


class EagleMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class EagleLayer(nn.Module):
    """EAGLE-1 decoder layer with index 0: no input_layernorm before attention."""

    def __init__(self, c):
        super().__init__()
        self.self_attn = EagleAttention(c)
        self.mlp = EagleMLP(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, x):
        x = x + self.self_attn(x)
        return x + self.mlp(self.post_attention_layernorm(x))


class EagleHead(nn.Module):
    """out = layer0(fc([embed(token_{t+1}) ; feature_t])); tokens = target lm_head(out).
    Parameter names are those of EAGLE's cnets1.Model without embed_tokens."""

    def __init__(self, c):
        super().__init__()
        self.fc = nn.Linear(2 * c["hidden_size"], c["hidden_size"], bias=True)
        self.layers = nn.ModuleList([EagleLayer(c)])

    def forward(self, feat, emb):
        x = self.fc(torch.cat([emb, feat], dim=-1))
        for layer in self.layers:
            x = layer(x)
        return x

    def unroll(self, feat, emb, steps):
        """The head run `steps` times on its own predictions, as the decoding loop runs it
        down a draft tree ("training-time test" of EAGLE-3 and HASS, on the EAGLE-1
        layout). Slot t, step 1: input (emb_t, feat_t), the target's feature. Step k > 1:
        input (emb_t, step k-1's prediction at slot t-1), and attention over what the
        drafting cache holds at that point: step 1's keys at slots <= t-k+1 (the context,
        computed from target features) and step i's key at slot t-(k-i) for i = 2..k (the
        node's ancestors in the tree, itself last). Returns the k predictions [B, T, h];
        step k's slots t < k-1 have no ancestors in the sequence and are meaningless."""
        assert len(self.layers) == 1, "unroll: one decoder layer (EAGLE-1 layout)"
        layer = self.layers[0]
        att = layer.self_attn
        T = feat.shape[1]
        t = torch.arange(T, device=feat.device)
        keys, vals, preds = [], [], []
        inp = feat
        for k in range(1, steps + 1):
            x = self.fc(torch.cat([emb, inp], dim=-1))
            q, kk, vv = att.qkv(x)
            keys.append(kk)
            vals.append(vv)
            # allowed[t, i*T + s]: step (i+1)'s key at slot s is visible to slot t at step k
            allowed = [t[None, :] <= (t[:, None] - k + 1)]
            for i in range(2, k + 1):
                allowed.append(t[None, :] == (t[:, None] - (k - i)))
            mask = torch.cat(allowed, 1)
            o = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(vals, 2), attn_mask=mask)
            x = x + att.out(o)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            preds.append(x)
            # the next step's input at slot t is this step's prediction at slot t-1
            inp = torch.cat([feat[:, :1], x[:, :-1]], 1)
        return preds


def eagle_config(tcfg):
    """EAGLE checkpoint config.json of a transformers target config tcfg: the base
    LlamaConfig with one layer + "bias", and the transformers version."""
    version = tcfg.to_dict().get("transformers_version")
    return eagle1_config(target_keys(tcfg, EAGLE1_KEYS), transformers_version=version)


class SoftCrossEntropy(torch.autograd.Function):
    """mean_n( -sum_v p_nv log_softmax(z_n)_v ) = mean_n( logsumexp(z_n) - <p_n, z_n> ),
    with a fused backward (softmax(z) - p) / N: the [N, vocab] passes dominate the
    head's training cost on the CPU."""

    @staticmethod
    def forward(ctx, z, p):
        lse = torch.logsumexp(z, -1)
        loss = (lse - torch.linalg.vecdot(p, z)).mean()
        ctx.save_for_backward(z, p, lse)
        return loss

    @staticmethod
    def backward(ctx, g):
        z, p, lse = ctx.saved_tensors
        dz = z - lse[:, None]
        dz.exp_().sub_(p).mul_(g / z.shape[0])
        return dz, None


def eagle_batch_loss(head, embed, lm_head, ids, feat, m, gen=None, mask=None, labels=None, step_top1=None,
                     deep_vocab=None):
    """EAGLE-1 objective, FP32. Slot j: input (embed(x_{j+1}), f_j) -> predict f_{j+1}.
    Loss = v_w * SmoothL1(pred, f_{j+1}) + p_w * CE(labels, lm_head pred), where the labels
    are the target's distribution softmax(lm_head f_{j+1}) (p_labels "soft", the reference)
    or its greedy token argmax(lm_head f_{j+1}) (p_labels "greedy", see recipes.demo_settings).
    gen given = training (uniform noise on the input features). mask [B, T-1] (optional)
    picks the slots that count (EAGLE's loss_mask: the assistant's tokens); labels [B, T-1]
    (optional) are the target's greedy tokens where already known (answers the target
    generated greedily), which saves the target's lm_head pass.
    m["unroll"] = K > 1 adds the head's own k-th prediction for k = 2..K (EagleHead.unroll:
    what a draft tree's depth k sees), each with the same targets and weight 0.8^(k-1)
    (EAGLE-3's step weights); step_top1, a list, receives each step's top-1 agreement.
    deep_vocab (sorted token ids holding every label; greedy labels only) restricts the
    cross-entropy of steps k > 1 to those tokens, as EAGLE-3's reduced draft vocabulary
    does: the full-vocabulary lm_head pass dominates the cost on a CPU, and step 1
    still pushes every other token down through the shared weights.
    Returns the total loss and step 1's SmoothL1, CE, logits and labels."""
    h = feat.shape[-1]
    inp = feat[:, :-1]
    tgt_all = feat[:, 1:].reshape(-1, h)
    if gen is not None and m["noise"] > 0:   # EAGLE "data_noise": uniform, std 0.2 (width at len 512)
        inp = inp + (torch.rand(inp.shape, generator=gen, device=gen.device) - 0.5) * m["noise"]
    emb = embed(ids[:, 1:])
    steps = m.get("unroll", 1)
    preds = head.unroll(inp, emb, steps) if steps > 1 else [head(inp, emb)]
    if mask is None and steps > 1:
        mask = torch.ones(inp.shape[:2], dtype=torch.bool, device=inp.device)
    total, first = 0.0, None
    for k, pred in enumerate(preds):
        pred, tgt = pred.reshape(-1, h), tgt_all
        if mask is not None:
            # step k+1's slots j < k have no ancestors in the sequence
            keep = (mask & (torch.arange(mask.shape[1], device=mask.device) >= k)).reshape(-1)
            pred, tgt = pred[keep], tgt[keep]
        t_logits = None
        if labels is not None and m["p_labels"] == "greedy":
            t_greedy = labels.reshape(-1)[keep] if mask is not None else labels.reshape(-1)
        else:
            with torch.no_grad():
                t_logits = F.linear(tgt, lm_head.weight)
                t_greedy = t_logits.argmax(-1)
        if k > 0 and deep_vocab is not None:
            assert t_logits is None, "deep_vocab needs greedy labels"
            logits = F.linear(pred, lm_head.weight[deep_vocab])
            t_greedy = torch.searchsorted(deep_vocab, t_greedy)
        else:
            logits = F.linear(pred, lm_head.weight)
        vloss = F.smooth_l1_loss(pred, tgt, reduction="mean")
        if m["p_labels"] == "greedy":
            ploss = F.cross_entropy(logits, t_greedy)
        else:
            ploss = SoftCrossEntropy.apply(logits, t_logits.softmax(-1))
        loss = m["v_w"] * vloss + m["p_w"] * ploss
        total = loss if k == 0 else total + 0.8 ** k * loss
        if step_top1 is not None:
            step_top1.append((logits.argmax(-1) == t_greedy).float().mean().item())
        if k == 0:
            first = (vloss, ploss, logits, t_greedy)
    return (total, *first)


def answer_loss(head, embed, lm_head, batch, m, gen, deep_vocab, top1):
    """eagle_batch_loss on a batch of greedy answers (ids, feat, answer: pad_batch's):
    slot j predicts f_{j+1}, whose greedy token is x_{j+2}: the slots whose x_{j+2} is
    an answer token count, with that token as the label (known from the answers); the
    last slot has none.  top1 (a list) receives each unrolled step's top-1."""
    ids, feat, answer = batch
    mask = torch.cat([answer[:, 2:], torch.zeros((answer.shape[0], 1), dtype=torch.bool, device=ids.device)], 1)
    labels = torch.cat([ids[:, 2:], torch.full((ids.shape[0], 1), IM_END, device=ids.device)], 1)
    loss, *_ = eagle_batch_loss(head, embed, lm_head, ids, feat, m, gen, mask, labels, top1, deep_vocab)
    return loss


def load_eagle(d):
    """The EAGLE head saved in the directory d (FP32, eval mode)."""
    c, weights = read_head(d)
    head = EagleHead(c)
    head.load_state_dict(weights)
    return head.eval()


class Eagle3Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.nh, self.nkv, self.hd, self.theta = (c["num_attention_heads"], c["num_key_value_heads"],
                                                  h // c["num_attention_heads"], c["rope_theta"])
        self.q_proj = nn.Linear(2 * h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(2 * h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(2 * h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)

    def forward(self, x, step, cache):
        """x [B, T, 2h] at unrolled step `step` (positions j + step). cache
        holds the (k, v) of earlier steps; step 0's serve as the context,
        later ones only for their own slot."""
        B, T, _ = x.shape
        pos = torch.arange(T) + step
        q = rope(self.q_proj(x).view(B, T, self.nh, self.hd).transpose(1, 2), pos, self.theta)
        k = rope(self.k_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2), pos, self.theta)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        cache.append((k, v))
        k0, v0 = cache[0]
        scale = 1.0 / math.sqrt(self.hd)
        s0 = (q @ k0.transpose(2, 3)) * scale
        s0 = s0.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        diag = [((q * ki).sum(-1) * scale)[..., None] for ki, _ in cache[1:]]
        a = torch.softmax(torch.cat([s0] + diag, -1), -1)
        o = a[..., :T] @ v0
        for i, (_, vi) in enumerate(cache[1:]):
            o = o + a[..., T + i, None] * vi
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MidLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RMSNorm(h, eps)
        self.hidden_norm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.self_attn = Eagle3Attention(c)
        self.mlp = EagleMLP(c)   # the same SwiGLU block as the EAGLE-1 head's

    def forward(self, emb, feat, step, cache):
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(feat)], -1)
        h = feat + self.self_attn(x, step, cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Head(nn.Module):
    """Parameter names are those of the published EAGLE-3 checkpoints."""

    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.fc = nn.Linear(3 * h, h, bias=False)
        self.midlayer = MidLayer(c)
        self.norm = RMSNorm(h, c["rms_norm_eps"])
        self.lm_head = nn.Linear(h, c["draft_vocab_size"], bias=False)


def unrolled_loss(head, embed, ids, feats, greedy, col, length):
    """Training-time test. Slot j at step k: token x_{j+1+k}, label the
    target's greedy token after it (greedy[j+1+k]) as a draft column (-100:
    outside the draft vocabulary, or past the window)."""
    B, T = ids.shape
    h = head.fc(feats)
    cache, losses, accs = [], [], []
    for k in range(length):
        tok = torch.full_like(ids, 0)
        lab = torch.full_like(ids, -100)
        n = T - 1 - k
        if n <= 0:
            break
        tok[:, :n] = ids[:, 1 + k:]
        lab[:, :n] = col[greedy[:, 1 + k:]]
        out = head.midlayer(embed(tok), h, k, cache)
        logits = head.lm_head(head.norm(out))
        ok = lab != -100
        if not ok.any():   # no label at this depth (short answers): nothing to learn, and CE would be NaN
            break
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1), ignore_index=-100))
        with torch.no_grad():
            accs.append(((logits.argmax(-1) == lab) & ok).sum().item() / max(1, ok.sum().item()))
        h = out
    loss = sum(0.8 ** k * l for k, l in enumerate(losses))
    return loss, [l.item() for l in losses], accs


def load_eagle3(d):
    """The EAGLE-3 head saved in the directory d (FP32, eval mode) and its draft
    vocabulary (ascending target ids, from d2t)."""
    from safetensors.torch import load_file
    sd = load_file(str(d / "model.safetensors"))
    head = Eagle3Head(json.load(open(d / "config.json")))
    used = torch.arange(len(sd["d2t"])) + sd.pop("d2t")
    sd.pop("t2d")
    head.load_state_dict({k: v.float() for k, v in sd.items()})
    return head.eval(), used
