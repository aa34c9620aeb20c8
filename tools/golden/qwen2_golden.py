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


def write_gguf(model, path):
    import gguf
    cfg = model.config
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
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
                 "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    for name, t in model.state_dict().items():
        if name.startswith("model.layers."):
            layer, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{layer}.{per_layer[rest]}"
        else:
            gname = names[name]
        w.add_tensor(gname, t.float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    g = torch.Generator().manual_seed(4321)
    ids = torch.randint(3, 256, (40,), generator=g).tolist()
    prompt = torch.randint(3, 256, (7,), generator=g).tolist()   # Qwen2 adds no BOS
    torch.manual_seed(41)
    model = Qwen2ForCausalLM(config()).float().eval()
    random_biases(model, 42)
    save(model, "qwen2_f32")
    references(model, "qwen2_f32", ids, prompt)
    write_gguf(model, os.path.join(CKPT, "..", "golden", "qwen2_tiny.gguf"))
    half = Qwen2ForCausalLM(config()).eval()
    half.load_state_dict(model.state_dict())
    half = half.to(torch.bfloat16)
    d = save(half, "qwen2_bf16")
    up = Qwen2ForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    references(up, "qwen2_bf16", ids, prompt, native=half)
    print("versions: torch", torch.__version__, "transformers",
          __import__("transformers").__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
