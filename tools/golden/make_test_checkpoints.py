#!/usr/bin/env python3
"""Oracle for the runtime's parity tests: small random LLaMA checkpoints
written by Hugging Face transformers' save_pretrained, with reference logits,
final hidden states and a greedy generate() continuation.

    python3 tools/golden/make_test_checkpoints.py   # rewrites tests/ckpt, tests/golden

Checkpoints (tests/ckpt/<name>/):
  llama2_f32   LLaMA-2 shape: multi-head attention, untied lm_head, F32
  llama2_f16   the same weights stored F16, sharded (model.safetensors.index.json)
  llama3_f32   LLaMA-3 shape: GQA, llama3 rope scaling, tied embeddings, F32
  llama3_bf16  the same weights stored BF16
References (tests/golden/<name>.safetensors):
  input_ids [T] I64, logits [T,V] F32, hidden [T,H] F32 (LlamaModel output,
  after the final norm), computed in float32 from the stored weights;
  for the 16-bit checkpoints also logits_native: the forward in the stored
  dtype itself, the figure users compare against in half precision;
  gen_prompt [P] I64 and gen_ids [G] I64 from generate(do_sample=False).
Decoding-loop checkpoints (no references; the loop is checked against itself):
  eagle_tiny   a random EAGLE-1 head (SafeAILab/EAGLE cnets1 layout: fc with
               bias, layers.0.* without input_layernorm) fitting llama3_f32
  v8_target, v8_draft   vocabulary-8 LLaMAs for the sampling chi-square test
  tiny_chat    a LLaMA with a byte-level BPE tokenizer.json (vocab 384,
               trained on this project's C sources) for command-line tests,
               with tiny_chat_eagle (an EAGLE head) and tiny_chat_draft (an LM)
"""
import os, sys, json
import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CKPT = os.path.join(ROOT, "tests", "ckpt")
GOLD = os.path.join(ROOT, "tests", "golden")

def config(kind):
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                  max_position_embeddings=2048, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    if kind == "llama2":
        return LlamaConfig(num_attention_heads=4, num_key_value_heads=4, rope_theta=10000.0,
                           tie_word_embeddings=False, **common)
    return LlamaConfig(num_attention_heads=4, num_key_value_heads=2, rope_theta=500000.0,
                       tie_word_embeddings=True,
                       rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=64),
                       **{**common, "eos_token_id": [2, 3]})

def references(model, name, ids, prompt, native=None, use_cache=True):
    """use_cache False: each greedy token from a forward over the whole sequence (the
    definition, for a cache whose own path is not to be trusted as the oracle)"""
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
        gen = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=24,
                             min_new_tokens=24, pad_token_id=0, use_cache=use_cache)
    ref = {"input_ids": torch.tensor(ids, dtype=torch.int64),
           "logits": out.logits[0].float().contiguous(),
           "hidden": out.hidden_states[-1][0].float().contiguous(),
           "gen_prompt": torch.tensor(prompt, dtype=torch.int64),
           "gen_ids": gen[0, len(prompt):].to(torch.int64).contiguous()}
    if native is not None:
        with torch.no_grad():
            ref["logits_native"] = native(torch.tensor([ids])).logits[0].float().contiguous()
    save_file(ref, os.path.join(GOLD, name + ".safetensors"))

def linear_reference():
    """tests/golden/llama2_linear_f32.safetensors: llama2_f32's weights under rope_scaling
    linear, factor 4 (positions divided by 4), on llama2_f32's own inputs; test_runtime
    loads the checkpoint with that config.json"""
    from safetensors.torch import load_file
    cfg = LlamaConfig.from_pretrained(os.path.join(CKPT, "llama2_f32"))
    cfg.rope_scaling = {"rope_type": "linear", "factor": 4.0}
    model = LlamaForCausalLM.from_pretrained(os.path.join(CKPT, "llama2_f32"), config=cfg, torch_dtype=torch.float32).eval()
    g = load_file(os.path.join(GOLD, "llama2_f32.safetensors"))
    references(model, "llama2_linear_f32", g["input_ids"].tolist(), g["gen_prompt"].tolist())

def main():
    if "--linear-only" in sys.argv:
        linear_reference()
        return
    os.makedirs(CKPT, exist_ok=True); os.makedirs(GOLD, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(3, 256, (40,), generator=g).tolist()
    ids[0] = 1
    prompt = [1] + torch.randint(3, 256, (6,), generator=g).tolist()
    for kind, low, lowdt in (("llama2", "llama2_f16", torch.float16), ("llama3", "llama3_bf16", torch.bfloat16)):
        torch.manual_seed(7 if kind == "llama2" else 8)
        cfg = config(kind)
        cfg.initializer_range = 0.1  # larger than default so logits are far from uniform
        model = LlamaForCausalLM(cfg).float().eval()
        d32 = os.path.join(CKPT, kind + "_f32")
        model.save_pretrained(d32, safe_serialization=True)
        references(model, kind + "_f32", ids, prompt)
        # 16-bit: store rounded weights, reference = float32 compute on them
        dlow = os.path.join(CKPT, low)
        half = LlamaForCausalLM(cfg).eval()
        half.load_state_dict(model.state_dict())
        half = half.to(lowdt)
        shard = dict(max_shard_size="100KB") if kind == "llama2" else {}
        half.save_pretrained(dlow, safe_serialization=True, **shard)
        up = LlamaForCausalLM.from_pretrained(dlow, torch_dtype=torch.float32).eval()
        references(up, low, ids, prompt, native=half)
        for d in (d32, dlow):
            gc = os.path.join(d, "generation_config.json")
            if os.path.exists(gc): os.remove(gc)
    loop_checkpoints()
    chat_checkpoints()
    print("versions: torch", torch.__version__, file=sys.stderr)

def loop_checkpoints():
    torch.manual_seed(11)
    linear_reference()
    head_cfg = config("llama3")
    head_cfg.num_hidden_layers = 1
    head_cfg.initializer_range = 0.1
    layer = LlamaForCausalLM(head_cfg).model.layers[0]
    h = head_cfg.hidden_size
    tensors = {"fc.weight": torch.randn(h, 2 * h) * 0.1, "fc.bias": torch.randn(h) * 0.1}
    for name, t in layer.state_dict().items():
        if not name.startswith("input_layernorm"):
            tensors["layers.0." + name] = t.float().contiguous()
    d = os.path.join(CKPT, "eagle_tiny")
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({**head_cfg.to_dict(), "bias": True}, f, indent=1, sort_keys=True)
    for name, seed, layers in (("v8_target", 21, 2), ("v8_draft", 22, 1)):
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                          num_attention_heads=2, num_key_value_heads=2, bos_token_id=0, eos_token_id=None,
                          initializer_range=0.3, tie_word_embeddings=False)
        model = LlamaForCausalLM(cfg).float()
        model.save_pretrained(os.path.join(CKPT, name), safe_serialization=True)
        gc = os.path.join(CKPT, name, "generation_config.json")
        if os.path.exists(gc): os.remove(gc)



def chat_checkpoints():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, processors
    import glob
    text = []
    for path in sorted(glob.glob(os.path.join(ROOT, "infer", "*.c")))[:6]:
        with open(path, encoding="utf-8") as f:
            text.append(f.read())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    vocab = tok.get_vocab_size()
    d = os.path.join(CKPT, "tiny_chat")
    torch.manual_seed(31)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, bos_token_id=0, eos_token_id=1,
                      initializer_range=0.1, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).float().save_pretrained(d, safe_serialization=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    torch.manual_seed(32)
    dcfg = LlamaConfig(**{**cfg.to_dict(), "num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64,
                          "num_attention_heads": 2, "num_key_value_heads": 2})
    LlamaForCausalLM(dcfg).float().save_pretrained(os.path.join(CKPT, "tiny_chat_draft"), safe_serialization=True)
    torch.manual_seed(33)
    hcfg = LlamaConfig(**{**cfg.to_dict(), "num_hidden_layers": 1})
    layer = LlamaForCausalLM(hcfg).model.layers[0]
    tensors = {"fc.weight": torch.randn(64, 128) * 0.1, "fc.bias": torch.randn(64) * 0.1}
    for name, t in layer.state_dict().items():
        if not name.startswith("input_layernorm"):
            tensors["layers.0." + name] = t.float().contiguous()
    hd = os.path.join(CKPT, "tiny_chat_eagle")
    os.makedirs(hd, exist_ok=True)
    save_file(tensors, os.path.join(hd, "model.safetensors"))
    with open(os.path.join(hd, "config.json"), "w") as f:
        json.dump({**hcfg.to_dict(), "bias": True}, f, indent=1, sort_keys=True)
    for dd in (d, os.path.join(CKPT, "tiny_chat_draft")):
        gc = os.path.join(dd, "generation_config.json")
        if os.path.exists(gc): os.remove(gc)

if __name__ == "__main__":
    main()
