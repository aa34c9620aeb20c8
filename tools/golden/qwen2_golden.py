#!/usr/bin/env python3
"""Oracle for the Qwen2 runtime tests: small random Qwen2 checkpoints written
by transformers' Qwen2ForCausalLM.save_pretrained, with transformers' logits,
final hidden states and greedy ids (the same reference layout as
make_test_checkpoints.py, whose `references` this reuses).

    python3 tools/golden/qwen2_golden.py   # rewrites tests/ckpt/qwen2_*, tests/golden/qwen2_*

Checkpoints (tests/ckpt/<name>/):
  qwen2_f32    Qwen2 shape: GQA (4 heads / 2 KV), q/k/v biases (random, not
               transformers' zero init, so a forward without them fails),
               rope_theta 1e6, untied lm_head, F32
  qwen2_bf16   the same weights stored BF16 (also the LM draft of qwen2_f32
               in the lossless tests: most guesses right, some not)
And tests/golden/qwen2_tiny.gguf: qwen2_f32 as llama.cpp's converter writes a
qwen2 GGUF (gguf-py's GGUFWriter; blk.N.* names, q/k rows not permuted, F32,
a byte-level BPE over the 256 byte characters with pre-tokenizer qwen2), for
spec-convert's test (its conversion must give qwen2_f32's logits back).
And tests/golden/qwen2_quant.gguf: a random Qwen2 of hidden 256 (whole
super-blocks of 256, which the K types need), its matrices in every GGUF
block type the runtime computes with (QUANT_TYPES below), for the tests of
the block products in a model (spec-convert --dtype keep against --dtype
f32 of the same file).  gguf-py quantizes the 32-element types; the K types
and IQ4_NL / IQ4_XS (which gguf-py only dequantizes), Q2_K and Q3_K are quantized here by a
plain min/max rule (llama.cpp's quantizer searches
its scales; any valid blocks serve a test of what they decode to).

    python3 tools/golden/qwen2_golden.py --quant-only   # rewrites qwen2_quant.gguf alone
    python3 tools/golden/qwen2_golden.py --llama3-only  # rewrites llama3_tiny.gguf alone
    python3 tools/golden/qwen2_golden.py --linear-only  # rewrites llama2_linear_tiny.gguf alone

And tests/golden/llama3_tiny.gguf: tests/ckpt/llama3_f32 (LLaMA 3 shape, rope_type
llama3) as llama.cpp's converter writes a llama GGUF (q / k rows permuted, the
rope_freqs.weight divisors, pre-tokenizer llama-bpe), for spec-convert's test
(its conversion must give llama3_f32's logits back).
And tests/golden/llama2_linear_tiny.gguf: tests/ckpt/llama2_f32 under linear RoPE scaling,
factor 4, as llama.cpp's converter writes it (rope.scaling.type linear, rope.scaling.factor),
whose conversion must give the llama2_linear_f32 references back.
"""
import os, sys
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_test_checkpoints import CKPT, references  # noqa: E402


def config():
    return Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
                       use_sliding_window=False, bos_token_id=1, eos_token_id=2, initializer_range=0.1)


def random_biases(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.copy_(torch.randn(proj.bias.shape, generator=g) * 0.5)


def save(model, name, **kw):
    d = os.path.join(CKPT, name)
    model.save_pretrained(d, safe_serialization=True, **kw)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    return d


def bytelevel_chars():
    """GPT-2's byte -> printable character map, as transformers spells it (the 256 tokens of the GGUF)"""
    from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode
    table = bytes_to_unicode()
    return [table[b] for b in range(256)]


def config_quant():
    return Qwen2Config(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
                       use_sliding_window=False, bos_token_id=1, eos_token_id=2, initializer_range=0.1)


# qwen2_quant.gguf's matrices by GGUF name: every block type at least once
QUANT_TYPES = {
    "token_embd.weight": "Q6_K", "output.weight": "Q8_0",
    "blk.0.attn_q.weight": "Q8_0", "blk.0.attn_k.weight": "Q4_0", "blk.0.attn_v.weight": "Q4_1",
    "blk.0.attn_output.weight": "Q5_0", "blk.0.ffn_gate.weight": "Q5_1", "blk.0.ffn_up.weight": "Q4_K",
    "blk.0.ffn_down.weight": "Q6_K",
    "blk.1.attn_q.weight": "Q4_K", "blk.1.attn_k.weight": "Q5_K", "blk.1.attn_v.weight": "Q3_K",
    "blk.1.attn_output.weight": "IQ4_NL", "blk.1.ffn_gate.weight": "Q2_K", "blk.1.ffn_up.weight": "Q5_K",
    "blk.1.ffn_down.weight": "IQ4_XS",
}


def _f16(x):
    import numpy as np
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def _pack_scales_k4(sc, mn):
    """Q4_K / Q5_K's 12 bytes of eight 6-bit scales and minimums per row of super-blocks"""
    import numpy as np
    q = np.zeros(sc.shape[:-1] + (12,), dtype=np.uint8)
    q[..., 0:4] = sc[..., 0:4] | ((sc[..., 4:8] >> 4) << 6)
    q[..., 4:8] = mn[..., 0:4] | ((mn[..., 4:8] >> 4) << 6)
    q[..., 8:12] = (sc[..., 4:8] & 15) | ((mn[..., 4:8] & 15) << 4)
    return q


def quantize_k(x, kind):
    """x [n][256] (super-blocks) to Q4_K, Q5_K, Q6_K or Q2_K blocks [n][bytes] by a
    min/max rule per sub-block, in ggml's layout"""
    import numpy as np
    x = x.astype(np.float32)
    n = x.shape[0]
    if kind == "Q3_K":                                    # sub-blocks of 16, signed 6-bit scales, q - 4
        sub = x.reshape(n, 16, 16)                        # the element of largest magnitude to q - 4 = -4
        at = np.abs(sub).argmax(axis=2)
        sd = np.take_along_axis(sub, at[:, :, None], axis=2)[:, :, 0] / -4.0
        d16 = (np.maximum(np.abs(sd).max(axis=1), 1e-12) / 31.0).astype(np.float16).astype(np.float32)
        sc = np.clip(np.round(sd / d16[:, None]), -31, 31).astype(np.int32)
        step = d16[:, None] * np.where(sc == 0, 1, sc)
        q = np.clip(np.round(sub / step[:, :, None]) + 4, 0, 7).astype(np.uint8).reshape(n, 2, 4, 32)
        lo = q & 3                                        # element 128h + 32j + l: bits 2j of qs[32h + l]
        qs = (lo[:, :, 0] | (lo[:, :, 1] << 2) | (lo[:, :, 2] << 4) | (lo[:, :, 3] << 6)).reshape(n, 64)
        hm = np.zeros((n, 32), np.uint8)                  # its third bit at bit 4h + j of hmask[l]
        for h in range(2):
            for j in range(4):
                hm |= (q[:, h, j] >> 2) << (4 * h + j)
        u = (sc + 32).astype(np.uint8)                    # stored sc + 32: low 4 bits in nibbles, top 2 in bytes 8-11
        scales = np.zeros((n, 12), np.uint8)
        for i in range(16):
            scales[:, i % 8] |= (u[:, i] & 15) << (4 * (i // 8))
            scales[:, 8 + i % 4] |= (u[:, i] >> 4) << (2 * (i // 4))
        return np.concatenate([hm, qs, scales, _f16(d16)], axis=1)
    if kind == "Q2_K":                                    # sub-blocks of 16, 4-bit scales and minimums
        sub = x.reshape(n, 16, 16)
        lo = np.minimum(sub.min(axis=2), 0)
        sd = np.maximum(sub.max(axis=2) - lo, 1e-12) / 3
        d16 = (np.maximum(sd.max(axis=1), 1e-12) / 15.0).astype(np.float16).astype(np.float32)
        m16 = (np.maximum((-lo).max(axis=1), 1e-12) / 15.0).astype(np.float16).astype(np.float32)
        sc = np.clip(np.round(sd / d16[:, None]), 1, 15).astype(np.uint8)
        mn = np.clip(np.round(-lo / m16[:, None]), 0, 15).astype(np.uint8)
        q = np.clip(np.round((sub + (m16[:, None] * mn)[:, :, None]) / (d16[:, None] * sc)[:, :, None]), 0, 3)
        q = q.astype(np.uint8).reshape(n, 2, 4, 32)       # element 128h + 32j + l: bits 2j of qs[32h + l]
        qs = (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(n, 64)
        return np.concatenate([sc | (mn << 4), qs, _f16(d16), _f16(m16)], axis=1)
    if kind == "Q6_K":
        sub = x.reshape(n, 16, 16)
        amax = np.abs(sub).max(axis=2)
        sd = amax / 31.0                                  # sub-block scale, as d * int8
        d = np.maximum(sd.max(axis=1), 1e-12) / 127.0
        sc = np.clip(np.round(sd / d[:, None]), 1, 127).astype(np.int8)
        d16 = d.astype(np.float16).astype(np.float32)
        step = d16[:, None] * sc.astype(np.float32)
        q = np.clip(np.round(sub / step[:, :, None]) + 32, 0, 63).astype(np.uint8).reshape(n, 256)
        ql = np.zeros((n, 128), np.uint8)
        qh = np.zeros((n, 64), np.uint8)
        for h in range(2):                                # two halves of 128
            c = q[:, 128 * h:128 * h + 128]
            ql[:, 64 * h:64 * h + 32] = (c[:, 0:32] & 15) | ((c[:, 64:96] & 15) << 4)
            ql[:, 64 * h + 32:64 * h + 64] = (c[:, 32:64] & 15) | ((c[:, 96:128] & 15) << 4)
            qh[:, 32 * h:32 * h + 32] = ((c[:, 0:32] >> 4) | ((c[:, 32:64] >> 4) << 2) |
                                         ((c[:, 64:96] >> 4) << 4) | ((c[:, 96:128] >> 4) << 6))
        return np.concatenate([ql, qh, sc.view(np.uint8), _f16(d16)], axis=1)
    top = 15 if kind == "Q4_K" else 31
    sub = x.reshape(n, 8, 32)
    lo = np.minimum(sub.min(axis=2), 0)
    hi = sub.max(axis=2)
    sd = np.maximum(hi - lo, 1e-12) / top                 # each sub-block's step and minimum
    mm = -lo
    d = np.maximum(sd.max(axis=1), 1e-12) / 63.0
    dmin = np.maximum(mm.max(axis=1), 1e-12) / 63.0
    d16 = d.astype(np.float16).astype(np.float32)
    m16 = dmin.astype(np.float16).astype(np.float32)
    sc = np.clip(np.round(sd / d16[:, None]), 1, 63).astype(np.uint8)
    mn = np.clip(np.round(mm / m16[:, None]), 0, 63).astype(np.uint8)
    step = d16[:, None] * sc
    off = m16[:, None] * mn
    q = np.clip(np.round((sub + off[:, :, None]) / step[:, :, None]), 0, top).astype(np.uint8)
    qs = np.zeros((n, 128), np.uint8)
    for j in range(4):                                    # sub-blocks 2j (low nibbles), 2j+1 (high)
        qs[:, 32 * j:32 * j + 32] = (q[:, 2 * j] & 15) | ((q[:, 2 * j + 1] & 15) << 4)
    head = np.concatenate([_f16(d16), _f16(m16), _pack_scales_k4(sc, mn)], axis=1)
    if kind == "Q4_K":
        return np.concatenate([head, qs], axis=1)
    qh = np.zeros((n, 32), np.uint8)
    for j in range(8):
        qh |= ((q[:, j] >> 4) & 1) << j
    return np.concatenate([head, qh, qs], axis=1)


# IQ4_NL's and IQ4_XS's grid (ggml's kvalues_iq4nl)
IQ4_GRID = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def quantize_iq4(x, kind):
    """x [n][256] (IQ4_XS: super-blocks) or [n][32] (IQ4_NL) to blocks [n][bytes]
    in ggml's layout: per 32 elements the signed scale that takes the element of
    largest magnitude to -127, each element the nearest grid integer times it;
    IQ4_XS holds those scales as d * (ls - 32), d F16 per 256 and ls 6-bit"""
    import numpy as np
    grid = np.array(IQ4_GRID, np.float32)
    x = x.astype(np.float32)
    n = x.shape[0]
    sub = x.reshape(n, -1, 32)
    at = np.abs(sub).argmax(axis=2)
    s = np.take_along_axis(sub, at[:, :, None], axis=2)[:, :, 0] / -127.0   # each sub-block's scale
    if kind == "IQ4_NL":
        d16 = s.astype(np.float16)
        step = d16.astype(np.float32)
    else:
        d = np.maximum(np.abs(s).max(axis=1), 1e-12) / 31.0
        d16 = d.astype(np.float16)
        ls = np.clip(np.round(s / d16.astype(np.float32)[:, None]), -32, 31).astype(np.int32) + 32
        step = d16.astype(np.float32)[:, None] * (ls - 32).astype(np.float32)
    safe = np.where(step == 0, 1.0, step)
    idx = np.abs(sub[:, :, :, None] / safe[:, :, None, None] - grid).argmin(axis=3).astype(np.uint8)
    qs = (idx[:, :, :16] | (idx[:, :, 16:] << 4)).reshape(n, -1)   # per 32: low nibbles 0-15, high 16-31
    if kind == "IQ4_NL":
        return np.concatenate([d16.reshape(-1, 1).view(np.uint8), qs.reshape(-1, 16)], axis=1).reshape(n, -1)
    scales_h = np.zeros(n, np.uint16)
    scales_l = np.zeros((n, 4), np.uint8)
    for j in range(8):
        scales_l[:, j // 2] |= ((ls[:, j] & 15) << (4 * (j % 2))).astype(np.uint8)
        scales_h |= ((ls[:, j] >> 4) << (2 * j)).astype(np.uint16)
    return np.concatenate([_f16(d16), scales_h.reshape(-1, 1).view(np.uint8), scales_l, qs], axis=1)


def quantize(t, kind):
    """t [rows][cols] (float32 numpy) as GGUF blocks of kind: uint8 [rows][row bytes]"""
    import gguf
    import numpy as np
    qt = getattr(gguf.GGMLQuantizationType, kind)
    if kind in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL"):
        rows, cols = t.shape
        block = 32 if kind == "IQ4_NL" else 256
        q = (quantize_iq4 if kind.startswith("IQ4") else quantize_k)(t.reshape(-1, block), kind)
        q = q.reshape(rows, -1)
    else:
        q = gguf.quants.quantize(t, qt)
    back = gguf.quants.dequantize(q, qt).reshape(t.shape)
    err = np.abs(back - t).max() / max(np.abs(t).max(), 1e-12)
    bound = 0.4 if kind == "Q2_K" else 0.25 if kind == "Q3_K" else 0.15 if kind in ("Q4_0", "Q4_1", "Q4_K", "IQ4_NL", "IQ4_XS") else 0.08
    assert err < bound, (kind, err)   # the packing is right
    return q, qt


def llama_permute(t, heads):
    """q / k rows as llama.cpp's converter stores them for arch llama: within each
    head, the two rotary halves interleaved (what spec-convert undoes)"""
    return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


def llama3_rope_freqs(cfg):
    """rope_freqs.weight as llama.cpp's converter writes it for rope_type llama3:
    per frequency of base^(-2i/d) its divisor (1 short wavelengths, factor long,
    1 / ((1 - s) / factor + s) between), F32"""
    import math
    import numpy as np
    rs, d = cfg.rope_scaling, cfg.head_dim
    freqs = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float32) / d))
    ctx, lo, hi, factor = rs["original_max_position_embeddings"], rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < ctx / hi:
            out.append(1.0)
        elif wl > ctx / lo:
            out.append(factor)
        else:
            s = (ctx / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def write_gguf(model, path, quant=None):
    import gguf
    cfg = model.config
    llama = cfg.model_type == "llama"
    gemma3 = cfg.model_type == "gemma3_text"
    w = gguf.GGUFWriter(path, "gemma3" if gemma3 else cfg.model_type)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if llama:
        w.add_rope_dimension_count(cfg.head_dim)
    if cfg.model_type in ("qwen3", "gemma3_text"):   # a head size of its own, as llama.cpp's converter writes it
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    if gemma3:   # the sliding layers as a flag per layer (llama.cpp reads that or a period)
        w.add_sliding_window(cfg.sliding_window)
        w.add_array(gguf.Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="gemma3"),
                    [bool((i + 1) % cfg.sliding_window_pattern) for i in range(cfg.num_hidden_layers)])
        w.add_float32(gguf.Keys.Rope.FREQ_BASE_SWA.format(arch="gemma3"), cfg.rope_local_base_freq)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg.rope_scaling["factor"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe" if llama else "qwen2")
    # the 256 byte characters, but byte 0xFF (never in UTF-8 text) gives its
    # id to one merge's product, so the file has a merge as real ones do
    tokens = bytelevel_chars()
    tokens[255] = "\u0120\u0120"
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * 256)
    w.add_token_merges(["\u0120 \u0120"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                 "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
                 "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    if gemma3:   # the norm after attention, the MLP's before and after it
        per_layer.update({"post_attention_layernorm.weight": "post_attention_norm.weight",
                          "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                          "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue   # tied: llama.cpp writes no output.weight
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{layer}.{per_layer[rest]}"
        else:
            gname = names[name]
        t = t.float().numpy()
        if gemma3 and gname.endswith("norm.weight"):
            t = t + 1   # llama.cpp's converter stores the 1 + w Gemma 3's RMSNorm applies
        if llama and gname.endswith(("attn_q.weight", "attn_k.weight")):
            t = llama_permute(t, cfg.num_attention_heads if gname.endswith("attn_q.weight") else cfg.num_key_value_heads)
        if quant and gname in quant:
            q, qt = quantize(t, quant[gname])
            w.add_tensor(gname, q, raw_dtype=qt)
        else:
            w.add_tensor(gname, t)
    if llama and (cfg.rope_scaling or {}).get("rope_type") == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(cfg))
    if llama and (cfg.rope_scaling or {}).get("rope_type") == "linear":   # as for DeepSeek-Coder
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg.rope_scaling["factor"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_quant():
    torch.manual_seed(43)
    model = Qwen2ForCausalLM(config_quant()).float().eval()
    random_biases(model, 44)
    write_gguf(model, os.path.join(CKPT, "..", "golden", "qwen2_quant.gguf"), QUANT_TYPES)


def write_llama3():
    """tests/golden/llama3_tiny.gguf: tests/ckpt/llama3_f32 (make_test_checkpoints.py:
    GQA, llama3 rope scaling, tied embeddings) as llama.cpp's converter writes a llama
    GGUF: q / k permuted, rope_freqs.weight, pre-tokenizer llama-bpe, F32"""
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(os.path.join(CKPT, "llama3_f32"), torch_dtype=torch.float32).eval()
    write_gguf(model, os.path.join(CKPT, "..", "golden", "llama3_tiny.gguf"))


def write_llama2_linear():
    """tests/golden/llama2_linear_tiny.gguf: tests/ckpt/llama2_f32 under rope_scaling linear,
    factor 4 (the config of the llama2_linear_f32 references, make_test_checkpoints.py
    --linear-only), as llama.cpp's converter writes it: rope.scaling.type linear and its
    factor, q / k permuted, F32"""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig.from_pretrained(os.path.join(CKPT, "llama2_f32"))
    cfg.rope_scaling = {"rope_type": "linear", "factor": 4.0}
    model = LlamaForCausalLM.from_pretrained(os.path.join(CKPT, "llama2_f32"), config=cfg,
                                             torch_dtype=torch.float32).eval()
    write_gguf(model, os.path.join(CKPT, "..", "golden", "llama2_linear_tiny.gguf"))


def main():
    if "--linear-only" in sys.argv:
        write_llama2_linear()
        return
    if "--quant-only" in sys.argv:
        write_quant()
        return
    if "--llama3-only" in sys.argv:
        write_llama3()
        return
    write_llama3()
    write_llama2_linear()
    write_quant()
    write_tiny_family(Qwen2ForCausalLM, config, "qwen2", (4321, 41, 42), random_biases)


def write_tiny_family(cls, config, family, seeds, randomize, use_cache=True):
    """tests/ckpt/<family>_f32 (cls(config()) from torch seed seeds[1], randomize(model,
    seeds[2]) on top) and <family>_bf16 (its weights in BF16) with their transformers
    references on ids drawn from seeds[0] (no BOS, as Qwen's), and
    tests/golden/<family>_tiny.gguf, the F32 weights as llama.cpp's converter writes them"""
    g = torch.Generator().manual_seed(seeds[0])
    ids = torch.randint(3, 256, (40,), generator=g).tolist()
    prompt = torch.randint(3, 256, (7,), generator=g).tolist()
    torch.manual_seed(seeds[1])
    model = cls(config()).float().eval()
    randomize(model, seeds[2])
    save(model, family + "_f32")
    references(model, family + "_f32", ids, prompt, use_cache=use_cache)
    write_gguf(model, os.path.join(CKPT, "..", "golden", family + "_tiny.gguf"))
    half = cls(config()).eval()
    half.load_state_dict(model.state_dict())
    half = half.to(torch.bfloat16)
    d = save(half, family + "_bf16")
    up = cls.from_pretrained(d, torch_dtype=torch.float32).eval()
    references(up, family + "_bf16", ids, prompt, native=half, use_cache=use_cache)
    print("versions: torch", torch.__version__, "transformers",
          __import__("transformers").__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
