#!/usr/bin/env python3
"""Every value of a GGUF against the folder `spec-convert --dtype keep` made of it, both read by the
`gguf` package (llama.cpp's reference): each GGUF tensor dequantised by gguf.quants, each of ours
dequantised from its blocks (safetensors metadata c2t.quant.NAME says the type) or read as stored, compared bit for bit (llama's q / k rows as spec-convert
de-interleaves them).

    python3 tools/experiments/gguf_keep_check.py IN.gguf OUTDIR
      -> one line per block type on stdout: tensors, values, values that differ; exit 1 on any
"""
import collections
import json
import struct
import sys
import time

import numpy as np
import gguf
from gguf import quants

PARTS = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight",
       "output_norm.weight": "model.norm.weight"}


def hf_name(name):
    if name in TOP:
        return TOP[name]
    _, layer, part, kind = name.split(".")
    return "model.layers.%s.%s.%s" % (layer, PARTS[part], kind)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1].strip())
    reader = gguf.GGUFReader(sys.argv[1])
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    heads = {k: int(reader.fields["%s.attention.head_count%s" % (arch, k)].parts[-1][0]) for k in ("", "_kv")}
    path = sys.argv[2] + "/model.safetensors"
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    meta, base, mm = head.get("__metadata__", {}), 8 + n, np.memmap(path, dtype=np.uint8, mode="r")
    seen = collections.defaultdict(lambda: [0, 0, 0])
    t0 = time.time()
    for t in reader.tensors:
        if t.name == "rope_freqs.weight":
            continue
        name = hf_name(t.name)
        ref = quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(-1, int(t.shape[0]))
        if arch == "llama" and t.name.split(".")[2:3] in (["attn_q"], ["attn_k"]):
            h = heads["" if t.name.split(".")[2] == "attn_q" else "_kv"]
            hd = ref.shape[0] // h   # HF row h hd + j hd/2 + i is GGUF row h hd + 2i + j
            ref = ref.reshape(h, hd // 2, 2, -1).transpose(0, 2, 1, 3).reshape(ref.shape)
        a, b = head[name]["data_offsets"]
        raw = np.asarray(mm[base + a:base + b])
        kind = meta.get("c2t.quant." + name)
        if kind:
            qt = getattr(gguf.GGMLQuantizationType, kind)
            ours = quants.dequantize(raw.reshape(-1, gguf.GGML_QUANT_SIZES[qt][1]), qt)
        elif head[name]["dtype"] == "BF16":   # the upper half of an F32
            ours = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            ours = raw.view({"F32": np.float32, "F16": np.float16}[head[name]["dtype"]]).astype(np.float32)
        ours = ours.reshape(ref.shape)
        s = seen["%s -> %s" % (t.tensor_type.name, kind or head[name]["dtype"])]
        s[0] += 1
        s[1] += ref.size
        s[2] += int((ours.view(np.uint32) != ref.view(np.uint32)).sum())
    for k, (nt, nv, nd) in sorted(seen.items()):
        print("%-14s %4d tensors %14d values %d differ" % (k, nt, nv, nd))
    print("gguf_keep_check: %s against %s in %.0f s" % (sys.argv[1], sys.argv[2], time.time() - t0), file=sys.stderr)
    sys.exit(1 if any(s[2] for s in seen.values()) else 0)


if __name__ == "__main__":
    main()
