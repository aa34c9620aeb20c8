"""Every draft's recipe, by model and device: the one table the call sites of the
draft pipeline (tools/drafts/__init__.py) read their sizes, step counts and
learning rates from.  A call site's options override single keys (epochs,
unroll, labels); what it trained with is recorded in its log.

  demo_settings    the demo family (tools/models/train_demo.py), CPU
  DEMO_EAGLE3      the demo target's EAGLE-3 head (train_eagle3_demo.py), CPU
  SMOLLM2_HEAD     SmolLM2's EAGLE heads on either device (the loss and optimizer)
  SMOLLM2_EAGLE    ... on the CPU (smollm2_drafts.py): SMOLLM2_HEAD and its epochs
  SMOLLM2_DRAFT    SmolLM2's draft LM, CPU
  SMOLLM2_EAGLE3   SmolLM2's EAGLE-3 head (not shipped), CPU
  SMOLLM2_GPU      SmolLM2's heads at GPU scale (smollm2_gpu.py): SMOLLM2_HEAD at
                   batches fit to the data (its --epochs, --min-steps,
                   --max-batch-tokens)"""


def demo_settings(smoke=False):
    """All sizes and step counts of the demo family. The defaults were measured on 2 cores."""
    s = dict(
        vocab_size=8192,          # incl. the 2 special tokens
        heldout_frac=0.2,         # >= 80 held-out modules are needed for the `continue` prompts
        seq_len=512, long_seq_len=1024,
        target=dict(hidden_size=256, intermediate_size=688, num_hidden_layers=6,
                    num_attention_heads=8, num_key_value_heads=2,
                    steps=1200, batch=8, long_frac=0.2, lr=2e-3, warmup=100, wd=0.1),
        # The draft must be clearly weaker than the target: at equal tokens a 2-layer
        # model learns as fast as the 6-layer target early on (measured), so it gets a
        # narrower width and about a third of the target's training tokens.
        draft=dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2,
                   steps=500, batch=8, long_frac=0.2, lr=3e-3, warmup=50, wd=0.1),
        # p_labels "greedy": the head's token loss uses the target's greedy token, not its
        # distribution (the reference's soft labels). The demo decodes at temperature 0, where
        # a draft token is accepted iff it is the target's argmax; this 8M target is uncertain
        # (mean top-1 probability 0.33), so a head that copies its distribution states about
        # half the acceptance rate (a candidate of confidence 0.2-0.3 was accepted 59% of the
        # time) and EAGLE-2's premise, confidence ~ acceptance, fails. Trained on greedy
        # tokens, the head's probabilities estimate exactly that acceptance (eval: calibration);
        # p_w 1.0 (reference 0.1) so the token loss is not drowned by the feature loss.
        eagle=dict(feature_windows=4000, steps=1000, batch=8, lr=1.5e-3, warmup=60,
                   noise=0.2, v_w=1.0, p_w=1.0, grad_clip_value=0.5, p_labels="greedy"),
        eval_windows=1000, eagle_eval_windows=300,
    )
    if smoke:
        s["target"].update(steps=12, warmup=2)
        s["draft"].update(steps=8, warmup=2)
        s["eagle"].update(feature_windows=24, steps=10, warmup=2)
        s["eval_windows"] = 8
        s["eagle_eval_windows"] = 6
    return s



DEMO_EAGLE3 = dict(steps=400, batch=8, seq=256, length=7, draft_vocab=2048, lr=1.5e-3, warmup=30)
# the EAGLE-1 loss with greedy labels, input noise, value clipping, 3 unrolled steps
SMOLLM2_HEAD = dict(lr=1e-3, warmup=50, noise=0.2, v_w=1.0, p_w=1.0, p_labels="greedy", clip_value=0.5, unroll=3)
SMOLLM2_EAGLE = dict(epochs=4, tokens_per_batch=4096, **SMOLLM2_HEAD)
SMOLLM2_DRAFT = dict(epochs=3, tokens_per_batch=4096, lr=3e-3, warmup=50, wd=0.1, kd_w=0.5,
                     hidden=192, layers=4, heads=3, kv_heads=1, ffn=512)
SMOLLM2_EAGLE3 = dict(epochs=3, tokens_per_batch=4096, lr=1e-3, warmup=50, clip_value=0.5, length=7, draft_vocab=8192)
SMOLLM2_GPU = dict(epochs=3, min_steps=600, max_batch_tokens=32768)
