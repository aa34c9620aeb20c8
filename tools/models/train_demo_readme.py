"""train_demo.py's export of the record: data/demo/README.md from the stages'
figures (train_log.json) and the files written; stage readme."""
import json

from c2ttools.progress import fmt_secs
from drafts.eval import calibration_table


def dir_sizes(out):
    rows = []
    for p in sorted(out.rglob("*")):
        if p.is_file():
            rows.append((p.relative_to(out).as_posix(), p.stat().st_size))
    return rows


def write_readme(out, st):
    sp, tg, dr, eg, ev = (st.get(k, {}) for k in ("split", "target", "draft", "eagle", "eval"))
    tcfg = json.load(open(out / "target" / "config.json"))
    dcfg = json.load(open(out / "draft" / "config.json"))
    ecfg = json.load(open(out / "eagle" / "config.json")) if (out / "eagle" / "config.json").exists() else {}
    L = []
    a = L.append
    a("# C2T demo model family\n")
    a("Small LLaMA-architecture models trained on the CPU by `tools/models/train_demo.py`; they exist "
      "so that the C runtime, the trace collector and the tree builder can be exercised end to "
      "end on real (if tiny) checkpoints in the exact on-disk layouts of the real ones.\n")
    a("Rerun (deterministic for a seed, given the same Python stdlib and the package versions "
      "pinned in `tools/requirements.txt`):\n")
    a("    python3 tools/models/train_demo.py --out data/demo --seed 0\n    python3 tools/golden/demo_refs.py\n")
    a(f"Trained {st.get('started', '?')} with seed {st.get('seed')}; torch {st.get('versions', {}).get('torch')}, "
      f"transformers {st.get('versions', {}).get('transformers')}, tokenizers "
      f"{st.get('versions', {}).get('tokenizers')}, safetensors {st.get('versions', {}).get('safetensors')}; "
      f"{st.get('threads')} threads.\n")
    a("## Corpus\n")
    a(f"- Python {sp.get('python_version')} standard library (`{sp.get('stdlib')}`), `*.py` files, "
      "excluding directories `test`, `tests`, `idlelib`, `site-packages`, `encodings` (codec tables), "
      "`pydoc_data` (documentation text), `__pycache__`, `config-*` and the build-specific "
      "`_sysconfigdata*` module.")
    a(f"- Split by file with `random.Random({st.get('seed')})`: {len(sp.get('train_files', []))} train "
      f"files ({sp.get('train_tokens')} tokens, {sp.get('train_bytes')} bytes), "
      f"{len(sp.get('heldout_files', []))} held-out files ({sp.get('heldout_tokens')} tokens, "
      f"{sp.get('heldout_bytes')} bytes). Held-out fraction {sp.get('heldout_frac')}: large enough to "
      "give >= 80 held-out modules for the `continue` prompts.")
    a(f"- sha256 of the sorted train file list: `{sp.get('train_sha256')}`")
    a(f"- sha256 of the sorted held-out file list: `{sp.get('heldout_sha256')}`")
    a("  (paths relative to the stdlib directory, `/`-separated, sorted, each followed by `\\n`, "
      "UTF-8; both lists are in `train_log.json`).")
    a("- Token stream: per file `<|begin_of_text|>` + tokens + `<|end_of_text|>`, files concatenated. "
      "Training windows start at a source line start, are prefixed with `<|begin_of_text|>` and may "
      "run across file boundaries.\n")
    a("## Tokenizer (`target/tokenizer.json`, copied to `draft/`)\n")
    a(f"Byte-level BPE trained with `tokenizers` on the train files only: vocabulary "
      f"{tcfg['vocab_size']} = {tcfg['vocab_size'] - 2} BPE tokens + `<|begin_of_text|>` "
      f"(id {tcfg['bos_token_id']}, bos) + `<|end_of_text|>` (id {tcfg['eos_token_id']}, eos). "
      "Same layout as LLaMA-3's `tokenizer.json`: no normalizer; pre-tokenizer `Sequence[Split(LLaMA-3 "
      "regex, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)]`; model `BPE` with "
      "`ignore_merges: true`; decoder `ByteLevel`; post-processor `Sequence[ByteLevel, "
      "TemplateProcessing(single: bos $A)]`, so `encode(text)` prepends bos. "
      "`tokenizer_config.json` names bos/eos. Prompts are fed raw: bos + text.\n")
    a("## Models\n")
    a("| dir | architecture | layers | hidden | heads / KV heads | intermediate | vocab | params | file |")
    a("|---|---|---|---|---|---|---|---|---|")
    sizes = dict(dir_sizes(out))
    for name, c, r in (("target", tcfg, tg), ("draft", dcfg, dr)):
        a(f"| `{name}/` | LlamaForCausalLM, untied lm_head, RoPE theta {c['rope_theta']:g}, "
          f"max pos {c['max_position_embeddings']} | {c['num_hidden_layers']} | {c['hidden_size']} | "
          f"{c['num_attention_heads']} / {c['num_key_value_heads']} | {c['intermediate_size']} | "
          f"{c['vocab_size']} | {r.get('parameters', 0) / 1e6:.2f}M | "
          f"{sizes.get(name + '/model.safetensors', 0) / 1e6:.2f} MB BF16 |")
    if ecfg:
        a(f"| `eagle/` | EAGLE-1 head: fc 2h->h + 1 decoder layer | 1 | {ecfg['hidden_size']} | "
          f"{ecfg['num_attention_heads']} / {ecfg['num_key_value_heads']} | {ecfg['intermediate_size']} | "
          f"(target's) | {eg.get('parameters', 0) / 1e6:.3f}M | "
          f"{sizes.get('eagle/model.safetensors', 0) / 1e6:.2f} MB BF16 |")
    a("")
    a("`eagle3/` (when present) is an EAGLE-3 head for the same target, trained separately by "
      "`tools/models/train_eagle3_demo.py`: see `eagle3/README.md`.\n")
    a("`target/` and `draft/` are `save_pretrained(..., safe_serialization=True)` outputs in BF16 "
      "(`config.json`, `generation_config.json`, `model.safetensors`) and load with "
      "`LlamaForCausalLM.from_pretrained`. RMSNorm eps 1e-5, SiLU MLP, no biases.\n")
    a("### EAGLE head (`eagle/`)\n")
    a("Follows EAGLE-1 (`eagle/model/cnets1.py`, `eagle/train/main.py` of SafeAILab/EAGLE):")
    a("- slot j gets the target's final feature f_j (LlamaModel output, i.e. AFTER the final RMSNorm) "
      "and the token x_{j+1}: `x = fc(concat(embed(x_{j+1}), f_j))` (embedding first, then the "
      "feature; `fc` has a bias); embed = the target's frozen `model.embed_tokens`;")
    a("- then ONE LLaMA decoder layer whose `input_layernorm` is absent (EAGLE layer index 0): "
      "`x = x + attn(x); x = x + mlp(post_attention_layernorm(x))`; causal attention, RoPE with the "
      "target's theta at positions 0,1,2,... of the slots (slot j has position j);")
    a("- the output is the predicted feature f_{j+1}; it goes straight into the target's frozen "
      "`lm_head` (no extra norm) to give the draft distribution for x_{j+2};")
    greedy_labels = eg.get("p_labels", "soft") == "greedy"
    a(f"- loss = {eg.get('v_w')} * SmoothL1(pred, f_{{j+1}}) + {eg.get('p_w')} * cross-entropy between "
      + ("the target's greedy token argmax(lm_head(f_{j+1}))" if greedy_labels else
         "softmax(lm_head(f_{j+1})) (the target's distribution)")
      + " and log_softmax(lm_head(pred)) (the reference: v_w=1.0, p_w=0.1); uniform noise of width "
      f"{eg.get('noise')} on the input features (the reference's `data_noise`, std 0.2); gradient "
      f"value clipping {eg.get('grad_clip_value')}; AdamW betas (0.9, 0.95). Deviations: lr "
      f"{eg.get('lr')} with warmup + cosine decay (the reference's 3e-5 is for 7B models and 20 epochs)"
      + ("; and `p_labels: greedy` with p_w 1.0: the target's greedy token instead of its "
         "distribution as the token label, weighted like the feature loss. The demo decodes at "
         "temperature 0, where a draft token is accepted iff it is the target's argmax. This 8M-parameter target is uncertain (mean top-1 probability 0.33 on "
         "held-out code), so a head trained on its soft distribution understated greedy acceptance "
         "about twofold (candidates of probability 0.2-0.3 were accepted 59% of the time, 0.05-0.1: "
         "17%; calibration error 0.044) - the premise of EAGLE-2 (and of C2T's P feature) that the "
         "draft's confidence approximates the acceptance rate failed, and with it the EAGLE-2 paper's "
         "ordering of dynamic vs static trees. The EAGLE-2 paper measured the premise on Vicuna 7B's "
         "soft-label head (its Fig. 6: confidence below 0.05 accepted about 4% of the time, above 0.95 "
         "about 98%); for this target, greedy labels give such a head (calibration table below; with "
         "p_w 0.1 the feature loss still dominated and the head stayed under-confident: error 0.026)."
         if greedy_labels else ".")
      )
    a("- `eagle/config.json` is the base LlamaConfig with `num_hidden_layers: 1` plus `\"bias\": true` "
      "(the layout of the public EAGLE checkpoints). Public heads ship `pytorch_model.bin`; this one "
      "ships `model.safetensors` with the same tensor names, without `embed_tokens.weight` (the head "
      "reuses the target's).\n")
    if eg.get("tensors"):
        a("Tensors in `eagle/model.safetensors` (all BF16):\n")
        a("| name | shape |")
        a("|---|---|")
        for k, v in eg["tensors"].items():
            a(f"| `{k}` | {v} |")
        a("")
    a("## Training\n")
    a("| stage | steps | batch x seq | tokens | wall time | notes |")
    a("|---|---|---|---|---|---|")
    if st.get("tok"):
        a(f"| tokenizer + data + prompts | - | - | - | {fmt_secs(st['tok'].get('seconds', 0))} | |")
    for name, r in (("target", tg), ("draft", dr)):
        if r:
            a(f"| {name} | {r['steps']}/{r['planned_steps']} | {r['batch']} x {r['seq_len']}, last "
              f"{r['long_steps']} steps {max(1, r['batch'] * r['seq_len'] // r['long_seq_len'])} x "
              f"{r['long_seq_len']} | {r['tokens']:,} | {fmt_secs(r['seconds'])} | AdamW lr {r['lr']} "
              f"warmup {r['warmup']} cosine to 10%, wd {r['weight_decay']}, BF16 autocast, final loss "
              f"(EMA) {r['final_loss_ema']}{' SCHEDULE CUT (time cap)' if r['stopped_early'] else ''} |")
    if eg:
        a(f"| eagle features | - | {eg['feature_windows']} x {eg['seq_len']} | {eg['feature_tokens']:,} | "
          f"{fmt_secs(eg['feature_seconds'])} | target forward in FP32 on the saved BF16 weights |")
        a(f"| eagle | {eg['steps']}/{eg['planned_steps']} | {eg['batch']} x {eg['seq_len']} | "
          f"{eg['tokens']:,} | {fmt_secs(eg['seconds'])} | final train top-1 (EMA) {eg['final_top1_ema']}"
          f"{' SCHEDULE CUT (time cap)' if eg['stopped_early'] else ''} |")
    if ev:
        a(f"| eval | - | - | - | {fmt_secs(ev.get('seconds', 0))} | |")
    a(f"\nTotal wall time of the run(s): {fmt_secs(st.get('total_seconds', 0))} on {st.get('threads')} "
      "threads (OMP_WAIT_POLICY=PASSIVE), sharing the 2 cores with other work at times. Step counts "
      "are fixed, so a rerun reproduces the weights, unless a stage's `--max-minutes` cap cut its "
      "schedule (marked SCHEDULE CUT above; then planned/actual steps are given). "
      "All figures are also in `train_log.json`.\n")
    if ev:
        a("## Results (FP32 compute on the saved BF16 weights)\n")
        a(f"- held-out perplexity ({ev.get('ppl_tokens')} tokens, windows of 512 with bos): "
          f"**target {ev.get('target_heldout_ppl')}**, **draft LM {ev.get('draft_heldout_ppl')}** "
          f"(train-sample: target {ev.get('target_train_ppl')}, draft {ev.get('draft_train_ppl')})")
        if "eagle_heldout_top1" in ev:
            a(f"- EAGLE head held-out top-1 agreement with the target's greedy next token "
              f"(one draft step, target features of the prefix): **{ev['eagle_heldout_top1'] * 100:.2f}%** "
              f"(top-3: {ev['eagle_heldout_top3'] * 100:.2f}%, {ev['eagle_eval_tokens']} tokens; "
              f"train sample top-1 {ev['eagle_train_top1'] * 100:.2f}%)")
        cal = ev.get("eagle_calibration")
        if cal:
            a(f"- EAGLE head calibration (one draft step, its top-{cal['topk']} candidates at every "
              f"position of 60 held-out windows): a candidate's probability q vs how often it is the "
              f"target's greedy token, i.e. accepted at temperature 0. Expected calibration error "
              f"**{cal['ece']:.4f}**. EAGLE-2 ranks candidates by q on the premise that q tracks "
              "acceptance; see `p_labels` under Training for why this head is trained on greedy tokens.\n")
            a(calibration_table(cal))
        a("")
    a("## Prompt sets (`prompts/`)\n")
    a("question.jsonl format (`question_id`, `category`, `turns` with one turn), held-out files only; "
      "the held-out files are split in two halves (`prompts/sources.json`) so `*_train` and `*_test` "
      "share no source file. Use `*_train` for trace collection and `*_test` for evaluation.\n")
    a("- `code_*`: a function's signature and docstring (dedented; the model completes the body), at "
      "most 4 per file, 20-300 tokens;")
    a("- `continue_*`: the opening lines of a held-out module (whole lines, <= 200 tokens).\n")
    a("| file | prompts | source files |")
    a("|---|---|---|")
    for k, v in sorted(st.get("tok", {}).get("prompts", {}).items()):
        a(f"| `prompts/{k}.jsonl` | {v['prompts']} | {v['files']} |")
    a("")
    if ev.get("samples"):
        a("## Greedy samples (64 new tokens, FP32)\n")
        for smp in ev["samples"]:
            a(f"Prompt `{smp['prompt_file']}` #{smp['question_id']}:\n")
            a("````python\n" + smp["prompt"].rstrip("\n") + "\n````\n")
            a("Target continuation:\n")
            a("````python\n" + smp["target"].rstrip("\n") + "\n````\n")
            a("Draft LM continuation:\n")
            a("````python\n" + smp["draft"].rstrip("\n") + "\n````\n")
    a("## Default classifier (`classifier.json`, `classifier.safetensors`)\n")
    a("The demo family's classifier: `spec-eval --policy c2t --classifier data/demo/classifier.json` (c2t needs one named; a classifier belongs to the target and head whose traces trained it). Not made by this script but "
      "by the toolkit itself from the models above (make first; about 10 minutes on 2 cores):\n")
    a("    bin/spec-collect --target data/demo/target --draft data/demo/eagle --template none \\")
    a("        --max-new-tokens 64 --topk 10 --depth 10 --out traces.h5 \\")
    a("        --questions data/demo/prompts/code_train.jsonl --questions data/demo/prompts/continue_train.jsonl")
    a("    bin/spec-train --traces traces.h5 --out data/demo/classifier.json \\")
    a("        --safetensors data/demo/classifier.safetensors --transform P=log --standardize \\")
    a("        --epochs 150 --neg-ratio 2.5 --select last\n")
    a("All 163 train prompts give 1,670 full trees (1,011 nodes each, 8,714 accepted nodes in the "
      "training part). log P standardised and 150 epochs (~4,500 Adam steps) because the classifier, "
      "left under-trained, ranks a layer's candidates worse than P alone; `--select last` because the "
      "paper's selection rule (highest recall at beta) picks the early, over-inclusive epochs; 2.5 "
      "negatives per positive put beta 0.5 at EAGLE-2's default recall on held-out trees (recall 0.830 "
      "at 5.7% of the nodes vs EAGLE-2's top 60: 0.830 at 5.9%; 2.0 negatives: 0.839 at 6.1%). "
      "The weights file records the trace's hash and the held-out metrics.\n")
    rows = dir_sizes(out)
    rows = [r for r in rows if r[0] != "README.md"]
    a("## Files and sizes\n")
    a("| file | bytes |")
    a("|---|---|")
    for name, n in rows:
        a(f"| `{name}` | {n:,} |")
    a(f"\nTotal (without this README): {sum(n for _, n in rows) / 1e6:.2f} MB.\n")
    a("Golden references for the C tests (`tests/golden/demo_*`) are written by `tools/golden/demo_refs.py`.")
    (out / "README.md").write_text("\n".join(L) + "\n")
