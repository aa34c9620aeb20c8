#!/usr/bin/env python3
"""Oracle for the Qwen3 runtime tests: a small random Qwen3 checkpoint written by
transformers' Qwen3ForCausalLM.save_pretrained, with transformers' logits, final
hidden states and greedy ids (make_test_checkpoints.py's reference layout).
Qwen3 came to transformers in 4.51, after the version tools/requirements.txt pins
for everything else: run this one with transformers 4.51.3 (and tokenizers
0.21.1), e.g. in a virtual environment over the pinned packages:

    python3 -m venv --system-site-packages /tmp/tf451
    /tmp/tf451/bin/pip install transformers==4.51.3 tokenizers==0.21.1
    /tmp/tf451/bin/python tools/golden/qwen3_golden.py   # rewrites tests/ckpt/qwen3_*, tests/golden/qwen3_*

Checkpoints (tests/ckpt/<name>/):
  qwen3_f32    Qwen3 shape: GQA (4 heads / 2 KV), a head size of 32 that is not
               hidden / heads (16), q_norm and k_norm per head (random, not
               transformers' ones, so a forward without them fails), no
               biases, rope_theta 1e6, tied embeddings (as Qwen3 0.6B-4B), F32
  qwen3_bf16   the same weights stored BF16
And tests/golden/qwen3_tiny.gguf: qwen3_f32 as llama.cpp's converter writes a
qwen3 GGUF (qwen2_golden.write_gguf: blk.N.attn_q_norm / attn_k_norm, key and
value lengths, q/k rows not permuted, no output.weight), for spec-convert's test.
"""
import os, sys
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_golden import write_tiny_family  # noqa: E402


def config():
    return Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=2048,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False,
                       use_sliding_window=False, bos_token_id=1, eos_token_id=2, initializer_range=0.1)


def random_norms(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.model.layers:
            for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                norm.weight.copy_(1 + torch.randn(norm.weight.shape, generator=g) * 0.5)


if __name__ == "__main__":
    write_tiny_family(Qwen3ForCausalLM, config, "qwen3", (5321, 51, 52), random_norms)
