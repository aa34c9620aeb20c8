"""EAGLE heads as files, for every pipeline that trains one: config.json built from
the target's config, model.safetensors in BF16 (EAGLE-3 heads with their draft
vocabulary's d2t/t2d), token_counts.safetensors beside a draft; the depths a
head's held-out agreement is measured at and a greedy chain's τ from it.

Contract on config.json: the keys come in the order of the public checkpoints'
files: architectures, model_type, the target's keys (EAGLE1_KEYS / EAGLE3_KEYS
order), num_hidden_layers, then the head's own keys in the caller's order.  The
head modules themselves are tools/drafts/heads.py's (EagleHead, Eagle3Head)."""
import json

from c2ttools.files import write_json

# the target config keys an EAGLE-1 head's config.json copies (the base LlamaConfig)
EAGLE1_KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
               "hidden_act", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
               "initializer_range", "bos_token_id", "eos_token_id", "tie_word_embeddings", "pretraining_tp",
               "attention_bias", "mlp_bias"]
# the target config keys an EAGLE-3 head's config.json copies
EAGLE3_KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
               "hidden_act", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
               "bos_token_id", "eos_token_id", "tie_word_embeddings"]
EVAL_STEPS = 4   # held-out agreement of a head's first EVAL_STEPS unrolled steps (depths 1-4)


def target_keys(tcfg, keep):
    """The keys keep of a transformers config tcfg as a dict, rope_theta and
    rope_scaling as config.json has them (and our runtime reads them):
    transformers 5 holds them in rope_parameters."""
    d = tcfg.to_dict()
    c = {k: d[k] for k in keep if k in d}
    rp = d.get("rope_parameters") or {}
    if "rope_theta" in keep and "rope_theta" not in c and "rope_theta" in rp:
        c["rope_theta"] = rp["rope_theta"]
        c.setdefault("rope_scaling", None if rp.get("rope_type", "default") == "default" else rp)
    return c


def eagle1_config(target_part, **more):
    """An EAGLE-1 head's config.json: the base LlamaConfig (target_part, the target's
    EAGLE1_KEYS) with one layer and "bias" (the layout of the public EAGLE
    checkpoints), then the keys in more."""
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    c.update(target_part)
    c.update(num_hidden_layers=1, bias=True, pad_token_id=0, torch_dtype="bfloat16", use_cache=True)
    c.update(more)
    return c


def eagle3_config(target_part, draft_vocab, layers):
    """An EAGLE-3 head's config.json (target_part: the target's EAGLE3_KEYS): one
    layer, a draft vocabulary of draft_vocab tokens, and the target layers whose
    inputs are its features (vLLM's key)."""
    c = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    c.update(target_part)
    c.update(num_hidden_layers=1, draft_vocab_size=draft_vocab, eagle_aux_hidden_state_layer_ids=layers,
             pad_token_id=0, torch_dtype="bfloat16")
    return c


def draft_vocab_maps(used, vocab):
    """EAGLE-3's tensors for a draft vocabulary used (ascending target ids) of a
    target with vocab tokens: d2t, each draft id's offset to its target id, and t2d,
    a mask of the target ids in it."""
    import torch
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    return {"d2t": (used - torch.arange(used.numel())).to(torch.int64), "t2d": t2d}


def save_head(d, head, config, extra=None):
    """d/model.safetensors: head's weights in BF16 (on the CPU) and then the tensors
    of extra as they are; d/config.json: config (indent 2).  Returns the tensors
    written."""
    import torch
    from safetensors.torch import save_file
    d.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in head.state_dict().items()}
    sd.update(extra or {})
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    write_json(d / "config.json", config, indent=2)
    return sd


def saved_size(d, tensors):
    """dict(parameters: the elements of tensors, bytes: the size of d/model.safetensors)."""
    return dict(parameters=sum(v.numel() for v in tensors.values()), bytes=(d / "model.safetensors").stat().st_size)


def read_head(d):
    """A saved head's config.json and its weights in FP32 (no draft vocabulary maps)."""
    from safetensors.torch import load_file
    with open(d / "config.json") as f:
        config = json.load(f)
    return config, {k: v.float() for k, v in load_file(str(d / "model.safetensors")).items()}


def save_token_counts(d, counts, source):
    """d/token_counts.safetensors: counts (I64 [vocab], how often each target token is
    an answer token of the training data; spec-eval --draft-vocab N keeps the N most
    frequent), its metadata's source saying of which data."""
    from safetensors.torch import save_file
    save_file({"token_counts": counts.cpu()}, str(d / "token_counts.safetensors"),
              metadata={"format": "pt", "source": source})


def chain_tau(step_top1):
    """Expected accepted length of a greedy chain whose step k is accepted with
    probability step_top1[k-1] given its parent was: 1 + sum_k prod_(i<=k) a_i."""
    tau, run = 1.0, 1.0
    for a in step_top1:
        run *= a
        tau += run
    return tau
