#!/usr/bin/env python3
"""Oracle for the Gemma 3 runtime tests: a small random Gemma 3 text checkpoint written
by transformers' Gemma3ForCausalLM.save_pretrained, with transformers' logits, final
hidden states and greedy ids (make_test_checkpoints.py's reference layout).  Gemma 3
came to transformers in 4.50: run this one with transformers 4.51.3 (and tokenizers
0.21.1), e.g. in the virtual environment qwen3_golden.py describes:

    /tmp/tf451/bin/python tools/golden/gemma3_golden.py   # rewrites tests/ckpt/gemma3_*, tests/golden/gemma3_*

Checkpoints (tests/ckpt/<name>/):
  gemma3_f32   Gemma 3 shape, small: GQA (4 heads / 2 KV), a head size of 32 beside
               hidden 64, q/k norms per head, a norm after attention and after the MLP,
               GELU (tanh form), embeddings scaled by sqrt(hidden), an attention scale
               of its own (query_pre_attn_scalar 24, not the head size), sliding layers
               (0 and 2: a window of 6 positions, RoPE base 10^4) between full ones (1
               and 3: base 10^6, linear scaling x4), tied embeddings; every norm weight
               random (transformers starts them at 0, which 1 + w hides), F32
  gemma3_bf16  the same weights stored BF16
The references' 40 tokens and 7 + 24 generated ones reach past the window, so a
forward that ignores it fails.  The greedy ids come from full forwards (generate with
use_cache=False), not through transformers' hybrid cache.  And tests/golden/
gemma3_tiny.gguf: gemma3_f32 as llama.cpp's converter writes a gemma3 GGUF
(qwen2_golden.write_gguf: norms stored as 1 + w, blk.N.post_attention_norm /
ffn_norm / post_ffw_norm, the sliding layers as a flag per layer, rope.freq_base_swa,
no output.weight), for spec-convert's test.

    /tmp/tf451/bin/python tools/golden/gemma3_golden.py --multimodal   # after the above

writes tests/ckpt/gemma3_mm (gemma3_f32's weights as the text model of a
Gemma3ForConditionalGeneration with a tiny vision tower, saved as Google publishes
Gemma 3 4B-27B: model_type gemma3, a text_config that omits every value equal to
Gemma3TextConfig's default, the decoder's tensors under language_model.model.) and
tests/ckpt/gemma3_mm_renamed (the same tensors under model.language_model., as
transformers from 4.52 on saves them); it checks that transformers' logits of the
wrapped model equal gemma3_f32's.

    /tmp/tf451/bin/python tools/golden/gemma3_golden.py --llamacpp DIR

writes instead, for a comparison with llama.cpp (not a test input), a larger random Gemma 3
in DIR with a Gemma-style tokenizer (a SentencePiece BPE of 512 pieces trained on this
project's sources: byte fallback, no dummy prefix, <start_of_turn> / <end_of_turn>) as
GemmaTokenizerFast saves it, six layers at llama.cpp's default pattern (layer 5 full) and a
window of 8; then llama.cpp's own converter (the sdist's convert_hf_to_gguf.py) makes
DIR.f32.gguf, spec-convert reads that, and tools/experiments/qwen_greedy.py compares the
greedy tokens (docs/models.md#gemma-3).
"""
import json, os, sys
import torch
from transformers import Gemma3TextConfig, Gemma3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2_golden import write_tiny_family  # noqa: E402


def config():
    return Gemma3TextConfig(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=2048,
                            rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                            rope_scaling={"rope_type": "linear", "factor": 4.0}, query_pre_attn_scalar=24,
                            sliding_window=6, sliding_window_pattern=2, final_logit_softcapping=None,
                            attn_logit_softcapping=None, tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
                            pad_token_id=0, initializer_range=0.1, attn_implementation="eager")


def random_norms(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def write_llamacpp_pair(out):
    import glob
    import sentencepiece as spm
    from transformers import GemmaTokenizerFast
    os.makedirs(out, exist_ok=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    lines = []
    for f in sorted(glob.glob(os.path.join(root, "infer", "**", "*.c"), recursive=True))[:40]:
        lines += [x for x in open(f).read().splitlines() if x.strip()]
    corpus = os.path.join(out, "corpus.txt")
    open(corpus, "w").write("\n".join(lines))
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(out, "tokenizer"), vocab_size=512,
                                   model_type="bpe", byte_fallback=True, add_dummy_prefix=False, split_digits=True,
                                   user_defined_symbols=["<start_of_turn>", "<end_of_turn>"], pad_id=0, eos_id=1,
                                   bos_id=2, unk_id=3, remove_extra_whitespaces=False,
                                   normalization_rule_name="identity", minloglevel=2)
    os.remove(corpus)
    GemmaTokenizerFast(vocab_file=os.path.join(out, "tokenizer.model")).save_pretrained(out)
    cfg = config()
    cfg.vocab_size, cfg.num_hidden_layers, cfg.sliding_window, cfg.sliding_window_pattern = 512, 6, 8, 6
    cfg.query_pre_attn_scalar, cfg.rope_scaling = cfg.head_dim, None   # what a GGUF can say
    torch.manual_seed(5)
    model = Gemma3ForCausalLM(cfg).float().eval()
    random_norms(model, 6)
    model.save_pretrained(out, safe_serialization=True)


def write_multimodal():
    from safetensors.torch import load_file, save_file
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, SiglipVisionConfig
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "ckpt")
    text = Gemma3ForCausalLM.from_pretrained(os.path.join(root, "gemma3_f32"), torch_dtype=torch.float32,
                                             attn_implementation="eager").eval()
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    cfg = Gemma3Config(text_config=text.config.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                       boi_token_index=250, eoi_token_index=251, image_token_index=252, eos_token_id=[1, 106])
    torch.manual_seed(7)
    mm = Gemma3ForConditionalGeneration(cfg).float().eval()
    missing = mm.language_model.load_state_dict(text.state_dict(), strict=False)
    assert not missing.unexpected_keys, missing
    ids = torch.tensor([[(i * 37 + 11) % 256 for i in range(40)]])
    with torch.no_grad():
        assert torch.equal(mm(input_ids=ids).logits, text(input_ids=ids).logits)
    out = os.path.join(root, "gemma3_mm")
    mm.save_pretrained(out, safe_serialization=True)
    # text_config as Google's configs hold it: only what differs from Gemma3TextConfig's defaults
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    default = Gemma3TextConfig().to_dict()
    c["text_config"] = {k: v for k, v in c["text_config"].items()
                        if k == "model_type" or (not k.startswith("_") and k not in ("architectures", "torch_dtype")
                                                 and default.get(k, object()) != v)}
    json.dump(c, open(path, "w"), indent=2)
    again = Gemma3ForConditionalGeneration.from_pretrained(out, torch_dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    with torch.no_grad():
        assert torch.equal(again(input_ids=ids).logits, text(input_ids=ids).logits)
    keys = list(load_file(os.path.join(out, "model.safetensors")))
    assert any(k.startswith("language_model.model.layers.") for k in keys), keys[:5]
    assert any(k.startswith("vision_tower.") for k in keys)
    renamed = os.path.join(root, "gemma3_mm_renamed")
    os.makedirs(renamed, exist_ok=True)
    t = load_file(os.path.join(out, "model.safetensors"))
    new = {}
    for k, v in t.items():   # transformers >= 4.52's names
        if k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif k.startswith("language_model.lm_head."):
            k = k[len("language_model."):]
        else:
            k = "model." + k
        new[k] = v
    save_file(new, os.path.join(renamed, "model.safetensors"), metadata={"format": "pt"})
    open(os.path.join(renamed, "config.json"), "w").write(open(os.path.join(out, "config.json")).read())
    print("wrote", out, renamed)


if __name__ == "__main__":
    if "--multimodal" in sys.argv:
        write_multimodal()
    elif "--llamacpp" in sys.argv:
        write_llamacpp_pair(sys.argv[sys.argv.index("--llamacpp") + 1])
    else:
        write_tiny_family(Gemma3ForCausalLM, config, "gemma3", (6321, 61, 62), random_norms, use_cache=False)
