#!/usr/bin/env python3
"""The anchor a GPU user would pick instead of bench_cuda's decode: the same
random 1B-shape LLaMA (tests/bench_model.h: hidden 2048, 16 layers, 32/8
heads, FFN 8192, vocab 128256, tied embeddings, llama3 RoPE) in transformers,
BF16 on the GPU, greedy `generate` with a static cache.

Prints tokens/s of 128 new tokens after an 8-token prompt, for the static
cache without compilation and with transformers' own compilation of the
decode step (what `generate` does by default with a static cache), each the
best of three timed calls after warm-up.  Weights are random (shapes decide
the speed)."""
import argparse
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def timed_generate(model, ids, new, **kw):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, **kw)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if out.shape[1] != ids.shape[1] + new:
        sys.exit(f"hf_decode_bench: generate returned {out.shape[1] - ids.shape[1]} tokens, not {new}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--no-compile", action="store_true", help="skip the compiled variant")
    a = ap.parse_args()
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=a.layers,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                      rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                      max_position_embeddings=131072,
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      bos_token_id=128000, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([[128000, 791, 4062, 14198, 39935, 35308, 927, 279]], device="cuda")
    print(f"transformers on {torch.cuda.get_device_name()}: torch {torch.__version__}, bf16, {a.layers} layers")
    variants = [("static cache, eager", dict(cache_implementation="static", disable_compile=True))]
    if not a.no_compile:
        variants.append(("static cache, compiled (generate's default)", dict(cache_implementation="static")))
    for name, kw in variants:
        try:
            t0 = time.perf_counter()
            for _ in range(2):
                timed_generate(model, ids, a.new, **kw)
            warm = time.perf_counter() - t0
            best = min(timed_generate(model, ids, a.new, **kw) for _ in range(3))
            print(f"hf decode [{name}]: {a.new / best:.1f} tokens/s (warm-up {warm:.0f} s)")
        except Exception as e:   # report and go on: one variant failing must not hide the other
            print(f"hf decode [{name}]: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
