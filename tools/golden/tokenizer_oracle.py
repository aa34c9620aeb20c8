#!/usr/bin/env python3
"""Oracle for the tokenizer, chat-template and question-file tests.

Everything expected by tests/test_tokenizer.c and tests/test_chat.c comes from
libraries nobody here wrote: Hugging Face `tokenizers` and `transformers`,
Google's `sentencepiece`, and fastchat's conversation templates (the ones the
EAGLE evaluation scripts use).  Versions: tools/requirements.txt.

    python3 tools/golden/tokenizer_oracle.py train     # retrain the small test tokenizers (rarely)
    python3 tools/golden/tokenizer_oracle.py golden    # rewrite the expected ids / prompts
    python3 tools/golden/tokenizer_oracle.py speed --tokenizer PATH --text FILE
                                                       # encode throughput (used by make bench)
    python3 tools/golden/tokenizer_oracle.py fuzz [--n 3000] [--seed 1]
                                                       # random strings: bin/spec-tokenize vs the libraries
    python3 tools/golden/tokenizer_oracle.py qwen2 [--train]
                                                       # only Qwen2's goldens (and tokenizer)
    python3 tools/golden/tokenizer_oracle.py gemma [--train]
                                                       # only Gemma's golden (and tokenizer)

Files under tests/golden/tokenizer/:
  hard_strings.json       project-written hard strings (code, CJK, accents,
                          emoji, whitespace runs, digits, special-token text)
  sp_bytefallback.json    SentencePiece-style tokenizer.json like LLaMA-2's:
                          normalizer Prepend(▁)+Replace(' ',▁), BPE with
                          byte_fallback + fuse_unk, decoder Replace/ByteFallback/
                          Fuse/Strip, TemplateProcessing "<s> $A"; plus four
                          added tokens exercising lstrip / rstrip / single_word
                          / normalized.  Trained here with `tokenizers`.
  sp_metaspace.json       the same vocabulary and merges with the newer
                          pipeline: Metaspace(prepend_scheme="first") pre-
                          tokenizer and Metaspace decoder.
  bytelevel_llama3.json   byte-level BPE like LLaMA-3's: Split(LLaMA-3 regex,
                          Isolated) + ByteLevel(use_regex=False), ignore_merges,
                          <|begin_of_text|> etc., ByteLevel decoder.
  expected_<name>.json    per tokenizer: ids of every hard string (with and
                          without special tokens, with special-token text as
                          plain text), the library's decodes, and for the
                          benchmark turns of ../shared/benchmarks/*/question.jsonl
                          the ids only, keyed "bench/question_id/turn"
                          (never the benchmark text).
  expected_llama2_model.json  the LLaMA-2 tokenizer.model of ../shared:
                          sentencepiece ids (plain), transformers'
                          LlamaTokenizer (sentencepiece-based; legacy True and
                          False) for special-token text, sentencepiece decodes.
  bytelevel_qwen2.json    byte-level BPE with exactly Qwen2's pipeline (what
                          transformers' Qwen2Converter and Qwen's tokenizer.json
                          hold): NFC normalizer, Split(Qwen2 regex: every digit
                          alone, Isolated) + ByteLevel(use_regex=False),
                          ByteLevel decoder/post-processor, <|endoftext|>,
                          <|im_start|>, <|im_end|> (special), <tool_call>
                          (not special).  Merges learned on Qwen2's pieces and
                          on coarser ones (LLaMA-3's, whole lines), so a cut
                          made differently encodes differently.
  qwen2_strings.json      the strings Qwen2's tokenizers are checked on (689:
                          the hard strings, code, digit / whitespace runs,
                          NFC, contractions in every case, ChatML prompts,
                          seeded mixes); also tools/experiments/qwen_tokenizer.sh's.
  expected_bytelevel_qwen2.json  its ids as expected_<name>.json, plus "nfc":
                          [text, tokenizers' NFC of it] for 1500 random runs of
                          marks, decomposable letters and Hangul jamo.
  chat_qwen_golden.json   prompts and ids (bytelevel_qwen2.json) of transformers'
                          apply_chat_template with Qwen2.5's chat_template (read
                          from the Qwen2.5-Coder GGUF), and the tokenizer_config /
                          generation_config a Qwen2.5-Instruct checkpoint has.
  gemma/                  a Gemma-style SentencePiece vocabulary: tokenizer.model
                          trained here by sentencepiece with Gemma's settings and
                          user-defined pieces, and the tokenizer.json and
                          tokenizer_config.json transformers' GemmaTokenizerFast
                          converts it into (train_gemma).
  expected_gemma.json.zst its ids on gemma_strings() from sentencepiece,
                          transformers' GemmaTokenizer and the tokenizers
                          library (golden_gemma).
  chat_golden.json        two-turn prompts rendered by fastchat (llama-2-chat,
                          vicuna, as EAGLE's gen_ea_answer_*.py build them) and
                          by transformers' apply_chat_template with Meta's
                          LLaMA-3-Instruct template (as gen_ea_answer_llama3chat
                          does), on project-written conversations; and the ids
                          of benchmark prompts rendered through each template.
Training data: the project-written text below plus the Python standard
library sources of this machine (no downloads).
"""
import argparse, glob, json, os, subprocess, sys, time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "tokenizer")
SHARED = os.path.join(ROOT, "..", "shared")
LLAMA2_MODEL = os.path.join(SHARED, "tokenizers", "llama2", "tokenizer.model")
DEMO = os.path.join(ROOT, "data", "demo", "target", "tokenizer.json")

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Meta-Llama-3-8B-Instruct tokenizer_config.json chat_template.
LLAMA3_TEMPLATE = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
                   "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
                   "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
                   "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

# The system prompt of EAGLE's gen_ea_answer_llama2chat.py / _llama3chat.py.
EAGLE_SYSTEM = ("You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
                "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, "
                "toxic, dangerous, or illegal content. Please ensure that your responses are socially unbiased "
                "and positive in nature.\n\nIf a question does not make any sense, or is not factually coherent, "
                "explain why instead of answering something not correct. If you don't know the answer to a "
                "question, please don't share false information.")

PROJECT_TEXT = """\
Speculative decoding drafts several tokens with a small model and verifies them with the
target model in one forward pass. A token tree lets the target check many candidate
continuations at once; the classifier decides which nodes of the tree are worth keeping.
The acceptance length tau is the mean number of tokens accepted per verification step.
We measure tau and the speed-up gamma on MT-Bench, HumanEval, GSM8K, Alpaca, CNN/DM and
Natural Questions, with LLaMA-2-chat, Vicuna and LLaMA-3-Instruct targets.
Tokenizers must agree id for id: if one id differs, every trace and figure differs.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 1000 3.14159 2.71828 1e-5 0x7f 2024-06-01.
Punctuation: (a) [b] {c} <d> "e" 'f' `g` !? ... -- ; : , . / \\ | @ # $ % ^ & * _ + = ~
Café, naïve, résumé, Ångström, façade, über, señor, ça va, garçon.
"""


def hard_strings():
    s = [
        "Hello world", "", " ", "  leading spaces", "trailing spaces   ", "multiple   spaces   inside",
        "\t\ttabs\tand\nnewlines\n\n\n", "\r\n windows line\r\n", "\n", "\n\n", "a\n\nb", "    indented",
        "def f(x):\n    return x**2 + 1  # comment\n",
        "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "    if (x != NULL && *p == '\\0') return -1;\n",
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }",
        "中文分词测试：今天天气很好。", "日本語のテキスト、カタカナとひらがな。", "한국어 문장입니다.",
        "mixed中文English混合text", "Ελληνικά κείμενο", "Русский текст", "עברית ערבית العربية", "हिन्दी पाठ", "ไทย",
        "café naïve résumé Ångström façade", "combining: e\u0301 a\u0308 o\u0303", "ab\u0301c",
        "I love 🦙 and 🚀! 👩\u200d👩\u200d👧\u200d👦 family 🇫🇷", "🦙" * 10, "emoji at end 😀",
        "1234567890 3.14159 1,000,000 2024-01-01 0x1F 1e-10", "12345678901234567890", "v1.2.3-rc4",
        "I'm you're he's we've they'll I'd don't IT'S WE'LL", "It'ſ", "'s 't 're",
        "a\u00a0b", "a\u3000b", "a\u2028b", "x\u0085y", "zero\u200bwidth", "\u00a0\u00a0 mixed \t \u3000 spaces",
        "\x01 control \x1f chars \x7f", "∑∫√∞≠≤≥ math ∀x∈ℝ", "«guillemets» „quotes“ ‘single’",
        "'quoted' \"double\" `back`", "https://example.com/path?q=1&r=2#frag", "email@example.com",
        "▁ literal metaspace ▁▁x", "Ġ literal Ċ", "<0x41> byte token text",
        "<s>Hello</s>", "text <s> middle </s> end", "<unk>", "<s><s></s>", " <s> ", "<s>",
        "[INST] question [/INST]", "[INST] <<SYS>>\nsys\n<</SYS>>\n\nq [/INST] a </s><s>[INST] q2 [/INST] ",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        "<|eot_id|>", "<|eot_id|> <|eot_id|>x", "<|begin_of_text|>", "<|end_of_text|> tail",
        "<lstrip>", "a  <lstrip>b", "a<rstrip>  b", "a <word> b", "a<word>b", "x <norm> y", "x<norm>y",
        "USER: hi ASSISTANT: hello</s>USER: again ASSISTANT:",
        "a" * 200, "ab" * 100, " " * 17, "\n" * 9 + "x", "!!!???...", "----====____",
        PROJECT_TEXT,
    ]
    return s


# ---------------------------------------------------------------- training

def corpus():
    lines = PROJECT_TEXT.splitlines() * 20
    lines += [x for x in hard_strings() if x and "<" not in x] * 5
    std = os.path.dirname(os.__file__)
    total = 0
    for f in sorted(glob.glob(os.path.join(std, "*.py"))):
        try:
            txt = open(f, encoding="utf-8").read()
        except Exception:
            continue
        lines += txt.splitlines()
        total += len(txt)
        if total > 3_000_000:
            break
    return lines


def train():
    from tokenizers import Tokenizer, AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    os.makedirs(GOLD, exist_ok=True)
    data = corpus()

    # -- SentencePiece-style with byte fallback (LLaMA-2's tokenizer.json layout)
    tok = Tokenizer(BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)  # training only
    tr = trainers.BpeTrainer(vocab_size=1200, limit_alphabet=90, show_progress=False, special_tokens=[])
    tok.train_from_iterator(data, tr)
    j = json.loads(tok.to_str())
    learned = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for k, _ in learned:
        if k not in vocab:
            vocab[k] = len(vocab)
    j["model"]["vocab"] = vocab
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    j["model"]["unk_token"] = "<unk>"
    j["added_tokens"] = []
    sp = Tokenizer.from_str(json.dumps(j))
    sp.pre_tokenizer = None
    sp.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    sp.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    sp.add_special_tokens([AddedToken("<unk>", normalized=False, special=True),
                           AddedToken("<s>", normalized=False, special=True),
                           AddedToken("</s>", normalized=False, special=True)])
    sp.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                      special_tokens=[("<s>", 1)])
    sp.add_special_tokens([AddedToken("<lstrip>", lstrip=True, normalized=False, special=True),
                           AddedToken("<rstrip>", rstrip=True, normalized=False, special=True)])
    sp.add_tokens([AddedToken("<word>", single_word=True, normalized=False, special=False),
                   AddedToken("<norm>", normalized=True, special=False)])
    # merges as "a b" strings, the layout of LLaMA-2's (and older) tokenizer.json files
    j = json.loads(sp.to_str())
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    with open(os.path.join(GOLD, "sp_bytefallback.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    sp = Tokenizer.from_file(os.path.join(GOLD, "sp_bytefallback.json"))

    # -- the same model, Metaspace pipeline (transformers >= 4.41 conversions, legacy=False)
    ms = Tokenizer.from_str(sp.to_str())
    ms.normalizer = None
    ms.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    ms.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    ms.save(os.path.join(GOLD, "sp_metaspace.json"), pretty=False)

    # -- byte-level, LLaMA-3 style
    bl = Tokenizer(BPE(ignore_merges=True))
    bl.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    bl.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tr = trainers.BpeTrainer(vocab_size=1800, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=[])
    bl.train_from_iterator(data, tr)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"]
    bl.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    bos = bl.token_to_id("<|begin_of_text|>")
    bl.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A:0 <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    bl.save(os.path.join(GOLD, "bytelevel_llama3.json"), pretty=False)
    for n in ("sp_bytefallback", "sp_metaspace", "bytelevel_llama3"):
        t = Tokenizer.from_file(os.path.join(GOLD, n + ".json"))
        print(n, "vocab", t.get_vocab_size())
    train_qwen2()


# ---------------------------------------------------------------- goldens

def bench_questions():
    """[(bench, question)] of every line of ../shared/benchmarks/*/question.jsonl."""
    out = []
    for f in sorted(glob.glob(os.path.join(SHARED, "benchmarks", "*", "question.jsonl"))):
        bench = os.path.basename(os.path.dirname(f))
        for line in open(f, encoding="utf-8"):
            if line.strip():
                out.append((bench, json.loads(line)))
    return out


def bench_turns():
    """[(key, text)] for every turn of the benchmark questions, keyed bench/question_id/turn."""
    return [("%s/%s/%d" % (b, q["question_id"], k), t) for b, q in bench_questions() for k, t in enumerate(q["turns"])]


def fnv64(path):
    """FNV-1a 64 of the file's bytes, as kernels/base/util.c file_hash_hex computes it."""
    h = 1469598103934665603
    for b in open(path, "rb").read():
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def write_json(name, obj):
    path = os.path.join(GOLD, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    return path


def write_zst(name, obj):
    """Benchmark ids: JSON compressed with the zstd tool (read back with libzstd)."""
    raw = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    path = os.path.join(GOLD, name)
    subprocess.run(["zstd", "-q", "-19", "-f", "-o", path], input=raw, check=True)
    return path


def golden_tokenizers_json(name, path, hard, turns, bench=True, strings_file=None):
    from tokenizers import Tokenizer
    import tokenizers
    tok = Tokenizer.from_file(path)
    rows = []
    for s in hard:
        add = tok.encode(s, add_special_tokens=True).ids
        noadd = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        split = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        rows.append({"add": add, "noadd": noadd, "split": split,
                     "decode": tok.decode(add, skip_special_tokens=False),
                     "decode_skip": tok.decode(add, skip_special_tokens=True)})
    meta = {"tokenizer": os.path.relpath(path, ROOT), "fnv64": fnv64(path),
            "library": "tokenizers " + tokenizers.__version__, "hard": rows}
    if strings_file:
        meta["strings"] = strings_file
    if name == "sp_bytefallback":
        # LLaMA tokenizer classes: transformers' LlamaTokenizerFast rebuilds the
        # post-processor from add_bos_token / add_eos_token of tokenizer_config.json.
        import transformers
        from transformers import LlamaTokenizerFast
        cfg = {"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": False, "add_eos_token": True,
               "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "legacy": True}
        lt = LlamaTokenizerFast(tokenizer_file=path, **{k: v for k, v in cfg.items() if k != "tokenizer_class"})
        texts = ["Hello world", "<s>Hi</s> there", "", "code: x = 1"]
        meta["llama_class"] = {"library": "transformers " + transformers.__version__, "config": cfg,
                               "rows": [{"text": x, "ids": lt(x).input_ids} for x in texts]}
    write_json("expected_%s.json" % name, meta)
    if turns and bench:
        ids = {k: tok.encode(t, add_special_tokens=False).ids for k, t in turns}
        write_zst("bench_%s.json.zst" % name, {"library": meta["library"], "ids": ids})
        n = sum(len(v) for v in ids.values())
        print("%-18s %d hard strings, %d benchmark turns, %d benchmark ids" % (name, len(hard), len(ids), n))


def golden_llama2(hard, turns):
    import sentencepiece as spm
    import transformers
    from transformers import LlamaTokenizer
    sp = spm.SentencePieceProcessor(model_file=LLAMA2_MODEL)
    slow = LlamaTokenizer(vocab_file=LLAMA2_MODEL, legacy=True)
    slow_nl = LlamaTokenizer(vocab_file=LLAMA2_MODEL, legacy=False)
    rows = []
    for s in hard:
        plain = sp.encode(s)
        rows.append({"split": plain,                              # sentencepiece: no special-token parsing
                     "add": slow(s).input_ids,                    # LlamaTokenizer(legacy=True), bos
                     "noadd": slow(s, add_special_tokens=False).input_ids,
                     "add_nonlegacy": slow_nl(s).input_ids,       # LlamaTokenizer(legacy=False)
                     "decode": sp.decode(plain)})                 # sentencepiece DecodeIds
    meta = {"tokenizer": "../shared/tokenizers/llama2/tokenizer.model", "fnv64": fnv64(LLAMA2_MODEL),
            "library": "sentencepiece %s, transformers %s LlamaTokenizer" % (spm.__version__, transformers.__version__),
            "hard": rows}
    write_json("expected_llama2_model.json", meta)
    ids = {k: sp.encode(t) for k, t in turns}
    write_zst("bench_llama2_model.json.zst", {"library": "sentencepiece " + spm.__version__, "ids": ids})
    print("%-18s %d hard strings, %d benchmark turns, %d benchmark ids" % ("llama2_model", len(hard), len(ids),
                                                                          sum(len(v) for v in ids.values())))


# Project-written conversations for the rendered-prompt goldens.
CONVERSATIONS = [
    {"user": ["What is speculative decoding?", "Explain it to a child."],
     "assistant": ["It drafts tokens with a small model and verifies them with the large one."]},
    {"user": ["  Leading and trailing spaces  ", "Second turn\nwith a newline"],
     "assistant": ["  An answer with spaces around it.  "]},
    {"user": ["Write a haiku about llamas 🦙.", "Now in 中文, please."],
     "assistant": ["Soft wool in the wind,\nllamas hum beneath the stars,\ntokens drift like snow."]},
    {"user": ["One single turn only."], "assistant": []},
]


def chat_conversations():
    """(system, users, answers, messages) of every prefix of CONVERSATIONS, without a system
    message and with one: the conversations the ChatML goldens render."""
    for conv in CONVERSATIONS:
        users, answers = conv["user"], conv["assistant"]
        for system in (None, "You are a pirate. Answer in one sentence."):
            for k in range(1, len(users) + 1):
                msgs = [{"role": "system", "content": system}] if system else []
                for j in range(k):
                    msgs.append({"role": "user", "content": users[j]})
                    if j < k - 1:
                        msgs.append({"role": "assistant", "content": answers[j]})
                yield system, users[:k], answers[:k - 1], msgs


def chat_template_rows(tok, template):
    """Rows of chat_conversations() rendered by transformers' apply_chat_template
    (add_generation_prompt=True) with template: system, user, assistant, prompt, ids."""
    tok.chat_template = template
    rows = []
    for system, users, answers, msgs in chat_conversations():
        prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False).input_ids
        assert ids == tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        rows.append({"system": system, "user": users, "assistant": answers, "prompt": prompt, "ids": ids})
    return rows


def fastchat_prompt(template, system, users, answers):
    from fastchat.conversation import get_conv_template
    # EAGLE: get_conversation_template("llama-2-chat") -> Llama2Adapter -> "llama-2";
    #        get_conversation_template("vicuna")       -> VicunaAdapter -> "vicuna_v1.1".
    conv = get_conv_template({"llama-2-chat": "llama-2", "vicuna": "vicuna_v1.1"}[template])
    if system is None and template == "llama-2-chat":
        system = EAGLE_SYSTEM          # gen_ea_answer_llama2chat.py: conv.system_message = sys_p
    if system is not None:
        conv.system_message = system
    prompt = None
    for j, q in enumerate(users):
        conv.append_message(conv.roles[0], q)
        conv.append_message(conv.roles[1], None)
        prompt = conv.get_prompt() + (" " if template == "llama-2-chat" else "")
        if j < len(answers):
            conv.messages[-1][-1] = answers[j]
    return prompt


def hf_llama3_prompt(hf_tok, system, users, answers):
    msgs = []
    if system:
        msgs.append({"role": "system", "content": system})
    prompt = None
    for j, q in enumerate(users):
        msgs.append({"role": "user", "content": q})
        prompt = hf_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        if j < len(answers):
            msgs.append({"role": "assistant", "content": answers[j]})
    return prompt


def golden_chat():
    import fastchat, transformers
    from transformers import PreTrainedTokenizerFast, LlamaTokenizer
    from tokenizers import Tokenizer
    bl_path = os.path.join(GOLD, "bytelevel_llama3.json")
    hf3 = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(bl_path), bos_token="<|begin_of_text|>",
                                  eos_token="<|eot_id|>")
    hf3.chat_template = LLAMA3_TEMPLATE
    rows = []
    for conv in CONVERSATIONS:
        users, answers = conv["user"], conv["assistant"]
        for system in (None, ""):
            for k in range(1, len(users) + 1):
                for tpl in ("llama-2-chat", "vicuna"):
                    rows.append({"template": tpl, "system": system, "user": users[:k], "assistant": answers[:k - 1],
                                 "prompt": fastchat_prompt(tpl, system, users[:k], answers[:k - 1]),
                                 "source": "fastchat %s conversation template (EAGLE gen_ea_answer_%s.py)" %
                                           (fastchat.__version__, "llama2chat" if tpl == "llama-2-chat" else "vicuna")})
                sys3 = EAGLE_SYSTEM if system is None else system
                rows.append({"template": "llama-3-instruct", "system": system, "user": users[:k],
                             "assistant": answers[:k - 1],
                             "prompt": hf_llama3_prompt(hf3, sys3, users[:k], answers[:k - 1]),
                             "source": "transformers %s apply_chat_template, Meta-Llama-3-Instruct template "
                                       "(EAGLE gen_ea_answer_llama3chat.py)" % transformers.__version__})
    # benchmark prompts (ids only): turn 1 and turn 2 with a project-written answer
    bench = {}
    if os.path.exists(LLAMA2_MODEL):
        slow = LlamaTokenizer(vocab_file=LLAMA2_MODEL, legacy=True)
        for bname, q in bench_questions():
            if bname not in ("mt_bench", "humaneval"):
                continue
            ans = ["Here is my answer."] * len(q["turns"])
            for k in range(1, len(q["turns"]) + 1):
                key = "%s/%s/%d" % (bname, q["question_id"], k - 1)
                p2 = fastchat_prompt("llama-2-chat", None, q["turns"][:k], ans[:k - 1])
                pv = fastchat_prompt("vicuna", None, q["turns"][:k], ans[:k - 1])
                p3 = hf_llama3_prompt(hf3, EAGLE_SYSTEM, q["turns"][:k], ans[:k - 1])
                bench[key] = {"llama-2-chat": slow([p2]).input_ids[0],          # tokenizer([prompt]) in EAGLE
                              "vicuna": slow([pv]).input_ids[0],
                              "llama-3-instruct": hf3([p3], add_special_tokens=False).input_ids[0]}
    write_json("chat_golden.json", {"answer": "Here is my answer.", "eagle_system": EAGLE_SYSTEM,
                                    "llama3_template": LLAMA3_TEMPLATE, "prompts": rows})
    if bench:
        write_zst("chat_bench_ids.json.zst", {"note": "llama-2-chat and vicuna ids: transformers LlamaTokenizer "
                                              "(legacy) on ../shared llama2 tokenizer.model; llama-3-instruct ids: "
                                              "bytelevel_llama3.json", "ids": bench})
    print("chat: %d rendered prompts, %d benchmark prompt id lists" % (len(rows), len(bench)))


def golden():
    hard = hard_strings()
    write_json("hard_strings.json", hard)
    turns = bench_turns() if os.path.isdir(os.path.join(SHARED, "benchmarks")) else []
    for n in ("sp_bytefallback", "sp_metaspace", "bytelevel_llama3"):
        # sp_metaspace differs from sp_bytefallback only at text starts: hard strings only
        golden_tokenizers_json(n, os.path.join(GOLD, n + ".json"), hard, turns, bench=n != "sp_metaspace")
    if os.path.exists(LLAMA2_MODEL):
        golden_llama2(hard, turns)
    else:
        print("../shared/tokenizers/llama2/tokenizer.model absent: LLaMA-2 goldens not rewritten")
    if os.path.exists(DEMO):
        golden_tokenizers_json("demo", DEMO, hard, turns)
    else:
        print("data/demo/target/tokenizer.json absent: demo goldens not written")
    golden_chat()
    golden_qwen2()
    golden_chat_qwen()
    golden_gemma()


# ---------------------------------------------------------------- Qwen2

# Qwen2's pre-tokenizer regex (transformers' Qwen2Converter, the tokenizer.json
# Qwen publishes): LLaMA-3's with every digit alone (\p{N}, not \p{N}{1,3}).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# Qwen2.5's chat_template: tokenizer.chat_template of qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# (the 0.5b GGUF holds the same), i.e. Qwen2.5-*-Instruct's tokenizer_config.json.
QWEN_GGUF = os.path.join(ROOT, "models", "download", "qwen", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")

QWEN_CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n",
    "import os\nimport sys\n\n\ndef main() -> int:\n    print(sys.argv[1:], os.getcwd())\n    return 0\n\n\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "    for i, (k, v) in enumerate(sorted(d.items())):\n        if v is None:\n            continue\n        yield f\"{i:03d} {k!r}={v:.2f}\"\n",
    "\tdef tabbed(self):\n\t\treturn [x for x in range(10) if x % 2 == 0]\n",
    "@dataclass(frozen=True)\nclass Point:\n    x: float = 0.0\n    y: float = 0.0\n",
    "try:\n    value = int(text)\nexcept ValueError as exc:  # not a number\n    raise SystemExit(f'bad: {exc}') from None\n",
    "lambda x: x**2 + 3*x - 1  # quadratic\n",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; i++)\n\t\tprintf(\"%d: %s\\n\", i, argv[i]);\n\treturn 0;\n}\n",
    "static inline uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }\n",
    "struct node {\n    struct node *next;\n    int value;\n};\n\nvoid push(struct node **head, int v) {\n    struct node *n = malloc(sizeof *n);\n    n->value = v; n->next = *head; *head = n;\n}\n",
    "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#ifdef DEBUG\n#  define LOG(...) fprintf(stderr, __VA_ARGS__)\n#endif\n",
    "if (p != NULL && *p == '\\0') { return -EINVAL; } else if (x >= 0x7fffffff) { x = ~0u; }\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n",
    "function debounce(fn, ms) {\n  let t;\n  return (...args) => {\n    clearTimeout(t);\n    t = setTimeout(() => fn.apply(this, args), ms);\n  };\n}\n",
    "export default async function handler(req, res) {\n  const { id } = req.query;\n  res.status(200).json({ id, ok: true });\n}\n",
    "let xs = [1, 2, 3].map(x => x * 2).filter(x => x !== 4); // [2, 6]\n",
    "fn main() {\n    let v: Vec<u64> = (1..=10).collect();\n    println!(\"{:?}\", v.iter().sum::<u64>());\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, 世界\")\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC LIMIT 10;\n",
    "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  wc -l \"$f\"\ndone 2>/dev/null | sort -n\n",
    "<div class=\"row\">\n  <span id='x'>&nbsp;&lt;tag&gt;</span>\n</div>\n",
    "{\n  \"name\": \"qwen\",\n  \"version\": \"2.5\",\n  \"layers\": [28, 24],\n  \"tied\": true\n}\n",
    "    \n    \n\n    x = 1\n\t\n",
    "a = 1\r\nb = 2\r\n\r\nprint(a + b)\r\n",
    "x = {'a': 1, \"b\": [1, 2, 3], 'c': (4,)}  \t# trailing tab and spaces  \t \n",
    "public static void main(String[] args) throws Exception {\n        System.out.println(args.length);\n    }\n",
    "matrix = [[0] * 8 for _ in range(8)]\nmatrix[3][4] += 1_000_000\n",
    "    return self._cache.setdefault(key, compute(key)) or None\n\n\n\n",
    "# TODO(qwen): 100% coverage!!!\n# -*- coding: utf-8 -*-\n",
    "assert f(2) == 4, 'f(2) should be 4'\nassert g('x') is not None\n",
    "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n<|fim_middle|>return a + b",
]

QWEN_WORDS = ["the", "The", "THE", "qwen", "Qwen2.5", "token", "tokens", "coder", "_private", "__init__", "self",
              "naïve", "café", "Straße", "ĳ", "ﬁle", "中文", "日本語", "한국어", "Ελληνικά", "русский", "עברית",
              "العربية", "हिन्दी", "ไทย", "x", "a1b2", "camelCase", "snake_case", "SCREAMING_CASE", "kebab-case"]
QWEN_PUNCT = ["(", ")", "[", "]", "{", "}", "::", "->", "=>", "==", "!=", "<=", ">=", "+=", "...", ";", ",", ".",
              "!", "?", "#", "//", "/*", "*/", "\"", "'", "`", "@", "$", "%", "^", "&&", "||", "~", "…", "—", "「", "」"]
QWEN_WS = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "  \n  ", "\u00a0",
           "\u3000", "\u2003", "\u200b", "\x0b", "\x0c", "\u2028", "\u0085", " \t ", "\n\t"]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_CAPS = ["'Sam", "'LLama", "'Dave", "'Ted", "'Mary", "'REd", "'VEry", "'Dandy", "'Mom", "'Tea"]


def chatml(msgs, gen=True):
    s = "".join("<|im_start|>%s\n%s<|im_end|>\n" % m for m in msgs)
    return s + ("<|im_start|>assistant\n" if gen else "")


def qwen2_strings():
    """The strings Qwen2's tokenizer is checked on (tests/golden/tokenizer/qwen2_strings.json):
    the hard strings, code, digit runs, whitespace runs, Unicode that NFC changes,
    contractions in mixed case, ChatML prompts, and seeded random mixes of all of them."""
    import random, unicodedata
    rnd = random.Random(2025)
    s = list(hard_strings())
    s += QWEN_CODE
    # digits: Qwen2 cuts every digit alone (\p{N}: Nd, Nl and No)
    s += ["7", "42", "123", "1234", "12345", "123456789012345678901234567890", "3.14159265358979", "-0.5e-10",
          "1,234,567.89", "0xDEADBEEF", "0b1010_1010", "1_000_000", "v2.5.1-rc3", "2024-12-02T04:47:00Z",
          "+86 10 1234 5678", "$1,000.00", "50%", "3/4", "x1y22z333", "abc123def", "a 1 b 22 c 333", " 2013",
          "   2013", "\t2013", "\n2013", "１２３４５ full-width", "٠١٢٣٤٥٦٧٨٩ Arabic-Indic", "۱۲۳ Persian",
          "०१२३ Devanagari", "Ⅻ Ⅳ ⅷ Roman", "½ ¾ ² ³ ¹ ⁴ ₅", "① ② ⑩ circled", "〇一二三", "𝟏𝟐𝟑 math digits",
          "2²=4", "H₂O", "x = 10**9 + 7", "int a[1024][768];", "192.168.0.1:8080", "#ff00ff", "1e9+7"]
    s += ["%d%s" % (n, w) for n, w in [(1, "st"), (2, "nd"), (3, "rd"), (4, "th"), (100, "px"), (16, "GB"), (2025, "年")]]
    s += [str(rnd.randint(0, 10 ** rnd.randint(1, 25))) for _ in range(10)]
    # whitespace runs: \s+(?!\S) leaves the last space to the next word
    s += ["a b", "a  b", "a   b", "a    b", "a\tb", "a \tb", "a\t b", "a\n b", "a \nb", "a \n b", "a\r\nb", "a \r\n b",
          "a\n\n\nb", "a\n \n \nb", "  a", "   a", "\ta", "\t\ta", "a  ", "a   ", "a\t", "a \t", "a\n", "a \n",
          "a\n  ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\r\r\n", " \n", "  \n  \n  ", "\t\n\t\n", "\x0b\x0c",
          "a\u00a0\u00a0b", "a \u00a0b", "a\u3000\u3000b", "a\u2003 b", "x\u2028y", "x\u0085 y", "end.   ",
          "end.\n\n   ", "   \n   x", "x  \n  y", "if x:\n\tpass\n", "  \t  \t", "word  word\tword\nword"]
    s += [" " * k + "x" for k in (5, 8, 9, 16, 33)] + ["\t" * k + "x" for k in (3, 7)] + ["x" + " " * k for k in (5, 12)]
    s += ["\n" * k for k in (3, 4, 7)] + ["\r\n" * 3 + "x", " \r\n" * 4]
    # Unicode, NFC: composed and decomposed forms, mark order, singletons, exclusions, Hangul jamo
    s += ["e\u0301", "E\u0301cole", "cafe\u0301", "nai\u0308ve", "A\u030Angstro\u0308m", "\u212Bngstr\u00f6m",
          "\u2126 ohm", "K\u212a kelvin", "a\u0323\u0307", "a\u0307\u0323", "q\u0307\u0323", "o\u031b\u0301 Vie\u0323\u0302t",
          "Tie\u0302\u0301ng Vie\u0323\u0302t co\u0301 da\u0302\u0301u", "\u0958\u0915\u093c", "\u0915\u093c", "\u0344",
          "\u0340\u0341", "\u0374;\u037e", "\u1100\u1161\u11a8", "\u1100\u1161", "\u110b\u1167\u11bc\u1109\u1165\u11bc",
          "\uac00\u11a8", "한\u1100\u1161", "\uf900\uf901 compat", "\u2000\u2001 spaces", "\u1e9b\u0323",
          "\u0041\u030a\u0301", "\u00c5\u0301", "\u05e9\u05bc\u05c1", "\ufb2c", "\u0627\u0653", "\u0622",
          "\u1f82 \u03b1\u0313\u0300\u0345", "\U0001d15e\U0001d15f", "\u0f73 \u0f71\u0f72", "\u09cb \u09c7\u09be",
          "\u0061\u0328\u0301", "\u0105\u0301", "i\u0307\u0301", "Z\u0335\u0327\u0301", "n\u0303o\u0303",
          "\u00f1 vs n\u0303", "Zalgo: Z\u0351\u036b\u0343a\u0310\u0352l\u0313g\u036do\u0335", "\u0301 leading mark",
          "x\u200d\u0301", "\u3099\u304b\u3099\u304c", "\u30cf\u309a \u30d1", "\u0e01\u0e34\u0e4a", "\u1e0b\u0323",
          "\u0390 \u03ca\u0301 \u03b9\u0308\u0301", "\u01d5 u\u0308\u0304", "\u1e69 s\u0323\u0307 s\u0307\u0323",
          "\U0001f469\u200d\U0001f4bb", "\U0001f44d\U0001f3fd", "\U0001f1e8\U0001f1f3\U0001f1fa\U0001f1f8",
          "❤️ ✈️ ☺︎", "🙂🙃😉", "emoji🦙in🚀words", "x\ufe0fy", "\U000e0041 tag", "\ufeffBOM", "\u00ad soft hyphen",
          "𝓗𝓮𝓵𝓵𝓸 math letters", "ｆｕｌｌ ｗｉｄｔｈ", "ﬀ ﬁ ﬂ ligatures", "㍿ ㌔ squared", "Ⓐ ⓑ circled",
          "مرحبا بالعالم", "שָׁלוֹם עוֹלָם", "سلام دنیا", "नमस्ते दुनिया", "ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ", "வணக்கம்", "ສະບາຍດີ", "မင်္ဂလာပါ",
          "Привет, мир!", "Γειά σου Κόσμε", "Բարեւ", "გამარჯობა", "こんにちは世界", "你好，世界！", "안녕하세요 세계",
          "混合mixed文本text123数字", "全角：，。！？「」", "Ça va? Très bien. Où est l'hôtel?", "Łódź, Kraków, Gdańsk",
          "İstanbul ıi Iİ", "ǅ ǈ ǋ titlecase", "ß ẞ SS", "Ǆemal", "ŉ", "ǰ", "ΐ ΰ", "ﬆ", "Å Å Å", "Ω Ω",
          "\u1e9e\u00df", "\U00010400\U00010428 Deseret", "\U0001d400 bold A", "\U00020000 CJK ext B",
          "\u0600\u0601 Arabic number signs", "a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308"]
    for w in ["résumé", "Ångström", "Việt Nam", "Ελληνικά", "한국어", "がぎぐげご", "ṩ", "ǖ"]:
        s += [unicodedata.normalize("NFD", w), unicodedata.normalize("NFD", w) + " " + w]
    # contractions: (?i:'s|'t|'re|'ve|'m|'ll|'d) in every case
    s += ["I'm", "I'M", "i'M", "you're", "YOU'RE", "You'Re", "we've", "WE'VE", "they'll", "THEY'LL", "They'Ll",
          "he'd", "HE'D", "it's", "IT'S", "It'S", "don't", "DON'T", "Don'T", "'s", "'S", "'ll", "'LL", "'Ll",
          "'t", "'T", "'re", "'RE", "'ve", "'VE", "'m", "'M", "'d", "'D", "'sa", "'Sa", "'st", "'lll", "'ss",
          "y'all'd've", "Y'ALL'D'VE", "O'Neill's", "rock 'n' roll", "'tis", "ma'am", "l'homme", "aujourd'hui",
          "'quoted'", "' s", "''s", "' 'll", "it’s curly", "IT’S", "can‘t", "x'S'LL'D", "'S'LL'D'T'M'RE'VE",
          "He said 'Hello'", "'123", "'_x", "'中", "'é", "'e\u0301", "'ſ", "'K", "'\u212a"]
    s += QWEN_CAPS + [w.lower() for w in QWEN_CAPS] + ["I" + w for w in QWEN_CAPS] + ["O" + w + "'S" for w in QWEN_CAPS[:4]]
    # ChatML and specials (parsed as special tokens unless split_special)
    conv = [("system", QWEN_SYSTEM), ("user", "Write a Python function that reverses a string.")]
    s += [chatml(conv), chatml(conv[1:]), chatml(conv, gen=False),
          chatml([("system", "You are a pirate."), ("user", "Hi"), ("assistant", "Arr!"), ("user", "Count to 5")]),
          chatml([("user", "  spaces around  ")]), chatml([("user", "")]), chatml([("user", "中文问题：1+1=?")]),
          chatml([("user", "```python\nprint('hi')\n```")]), chatml([("user", "<|im_end|> inside")]),
          chatml([("system", ""), ("user", "x")]), chatml([("user", "a\r\nb\r\n")]),
          "<|im_start|>assistant\ndef f():\n    return 1<|im_end|>\n<|endoftext|>",
          "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_end|><|im_start|>", "<|im_start|><|im_start|>",
          " <|im_start|> ", "\n<|im_end|>\n", "x<|endoftext|>y", "<|endoftext|><|endoftext|>", "<|im_start|>user",
          "<|im_start", "im_start|>", "<|im_end|", "<||>", "<|IM_START|>", "< |im_start| >", "<|im_start|>>",
          "<<|im_end|>", "<|endoftext|>\n\n", "  <|endoftext|>  ", "\t<|im_start|>\t", "<tool_call>", "</tool_call>",
          "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<|fim_prefix|>", "<|file_sep|>x",
          "<|repo_name|>c2t", "<|object_ref_start|>", "<|vision_start|><|image_pad|><|vision_end|>"]
    s += [chatml([("user", rnd.choice(QWEN_CODE))]) for _ in range(4)]
    # seeded random mixes
    frags = QWEN_WORDS + QWEN_PUNCT + QWEN_WS + QWEN_SPECIAL + ["0", "1", "9", "42", "007", "'s", "'S", "'ll", "'LL",
             "'d", "\u0301", "\u0308", "\u0323", "e\u0301", "\u1100", "\u1161", "\u11a8", "\U0001f680", "\u200d"]
    for _ in range(160):
        s.append("".join(rnd.choice(frags) for _ in range(rnd.randint(1, 24))))
    for _ in range(40):
        lines = [rnd.choice(["", " ", "    ", "\t", "        "]) + rnd.choice(rnd.choice(QWEN_CODE).split("\n"))
                 for _ in range(rnd.randint(1, 6))]
        s.append(rnd.choice(["\n", "\r\n"]).join(lines) + rnd.choice(["", "\n", "  ", "\n\n"]))
    out, seen = [], set()
    for x in s:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def train_bytelevel_words(words, vocab_size):
    """A byte-level BPE of vocab_size tokens (all 256 byte characters among
    them) whose merges are learnt on words, each item one word: the caller
    then sets the pre-tokenizer it is to run with."""
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers.models import BPE
    tok = Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(words, tr)
    return tok


def train_qwen2():
    """bytelevel_qwen2.json: a small byte-level BPE with exactly Qwen2's
    normalizer (NFC), pre-tokenizer (Split with Qwen2's regex, Isolated, then
    ByteLevel without regex), post-processor and decoder (ByteLevel), the
    ChatML special tokens and one non-special added token, trained here.
    The merges are learned on Qwen2's pieces and also on coarser ones (LLaMA-3's,
    with digits in threes, and whole lines), so the vocabulary holds tokens
    across Qwen2's cuts: a cut made differently (two digits together, a space
    run split elsewhere, 'S case-sensitive) encodes differently."""
    from tokenizers import Tokenizer, AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    lines = corpus() + QWEN_CODE * 20 + [x for x in qwen2_strings() if "<|" not in x] * 3
    nfc = normalizers.NFC()
    qsplit = pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False)
    l3split = pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False)
    words = []
    for i, line in enumerate(lines):
        line = nfc.normalize_str(line)
        words += [w for w, _ in qsplit.pre_tokenize_str(line)]
        if i % 3 == 0:
            words += [w for w, _ in l3split.pre_tokenize_str(line)]
        if i % 7 == 0:
            words.append(line)
    # contractions glued to a capitalised word, as one coarse piece: Qwen2 cuts
    # "'S" off "'Sam" only because its contraction group is case-insensitive
    words += QWEN_CAPS * 300
    tok = train_bytelevel_words(words, 4000)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        qsplit, pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.add_special_tokens([AddedToken(x, normalized=False, special=True) for x in QWEN_SPECIAL])
    tok.add_tokens([AddedToken("<tool_call>", normalized=False, special=False)])   # as in Qwen2.5's added tokens
    path = os.path.join(GOLD, "bytelevel_qwen2.json")
    j = json.loads(tok.to_str())
    j["pre_tokenizer"]["pretokenizers"][1]["trim_offsets"] = False      # as Qwen's tokenizer.json has it (ids unaffected)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    t = Tokenizer.from_file(path)
    vocab = t.get_vocab()
    print("bytelevel_qwen2 vocab", t.get_vocab_size(), "merges", len(j["model"]["merges"]),
          "multi-digit tokens", sum(1 for k in vocab if len(k) > 1 and k.isdigit()))


def nfc_strings(n=1500, seed=15):
    """Seeded random runs of marks, letters with decompositions, Hangul jamo and
    syllables, and characters NFC replaces: [text, NFC as tokenizers computes it,
    NFC by Python's unicodedata]. The two NFCs differ where tokenizers' Unicode
    tables are older than Python's (marks given a combining class since)."""
    import random, unicodedata as ud
    from tokenizers import normalizers
    nfc = normalizers.NFC()
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    marks = [c for c in cps if ud.combining(chr(c))]
    decomposable = [c for c in cps if ud.decomposition(chr(c)) and not ud.decomposition(chr(c)).startswith("<")]
    hangul = list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A7, 0x11C3)) + \
        [0xAC00, 0xAC01, 0xAC1C, 0xD7A3, 0xD7A4]
    rnd = random.Random(seed)
    pool = marks + decomposable + hangul + [ord(x) for x in "aeiouAEOUnsSzZ 1"]
    out = []
    for _ in range(n):
        t = "".join(chr(rnd.choice(pool)) for _ in range(rnd.randint(1, 7)))
        out.append([t, nfc.normalize_str(t), ud.normalize("NFC", t)])
    return out


def golden_qwen2():
    strings = qwen2_strings()
    write_json("qwen2_strings.json", strings)
    golden_tokenizers_json("bytelevel_qwen2", os.path.join(GOLD, "bytelevel_qwen2.json"), strings, [], bench=False,
                           strings_file="qwen2_strings.json")
    # NFC on its own: the tokenizer's decode of its ids is the normalized text
    path = os.path.join(GOLD, "expected_bytelevel_qwen2.json")
    meta = json.load(open(path, encoding="utf-8"))
    meta["nfc"] = nfc_strings()
    write_json("expected_bytelevel_qwen2.json", meta)
    changed = sum(1 for a, b, _ in meta["nfc"] if a != b)
    print("bytelevel_qwen2: %d strings; %d NFC texts (%d changed by NFC)" % (len(strings), len(meta["nfc"]), changed))


def qwen_template():
    """Qwen2.5's chat_template: from the GGUF when it is here, else the one the golden holds."""
    if os.path.exists(QWEN_GGUF):
        import gguf
        r = gguf.GGUFReader(QWEN_GGUF)
        return r.fields["tokenizer.chat_template"].contents()
    return json.load(open(os.path.join(GOLD, "chat_qwen_golden.json"), encoding="utf-8"))["chat_template"]


def golden_chat_qwen():
    """chat_qwen_golden.json: prompts transformers' apply_chat_template renders
    with Qwen2.5's chat_template (add_generation_prompt=True) on the project's
    conversations, default system message and an explicit one, and their ids
    on bytelevel_qwen2.json; the tokenizer_config.json / generation_config.json
    a Qwen2.5-Instruct checkpoint has, with this tokenizer's ids."""
    import transformers
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer
    tmpl = qwen_template()
    assert QWEN_SYSTEM in tmpl
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(os.path.join(GOLD, "bytelevel_qwen2.json")),
                                  eos_token="<|im_end|>", pad_token="<|endoftext|>")
    rows = chat_template_rows(tok, tmpl)
    # Qwen2.5-*-Instruct's tokenizer_config.json / generation_config.json, ids of this tokenizer
    cfg = {"add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
           "pad_token": "<|endoftext|>", "unk_token": None, "clean_up_tokenization_spaces": False,
           "model_max_length": 32768, "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
           "chat_template": tmpl}
    gen = {"bos_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
           "eos_token_id": [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")],
           "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>")}
    write_json("chat_qwen_golden.json", {
        "source": "transformers %s apply_chat_template(add_generation_prompt=True) with Qwen2.5's chat_template "
                  "(tokenizer.chat_template of qwen2.5-coder-1.5b-instruct-q4_k_m.gguf); ids: bytelevel_qwen2.json"
                  % transformers.__version__,
        "default_system": QWEN_SYSTEM, "chat_template": tmpl, "tokenizer_config": cfg, "generation_config": gen,
        "prompts": rows})
    print("chat qwen: %d rendered prompts" % len(rows))


# ---------------------------------------------------------------- Gemma

GEMMA_DIR = os.path.join(GOLD, "gemma")
# Gemma's SentencePiece pieces that are not learnt: the turn markers, runs of
# newlines, spaces and tabs, HTML tags (user-defined: kept whole, matched in
# the text) and the control pieces <mask> and [@BOS@]; a tab alone is its
# byte piece <0x09>, as in Gemma's vocabulary.
GEMMA_USER = (["<start_of_turn>", "<end_of_turn>"] + ["\n" * k for k in range(1, 32)] +
              ["\u2581" * k for k in range(2, 32)] + ["\t" * k for k in range(2, 9)] +
              ["<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>", "<h1>", "</h1>", "<code>", "</code>", "<s>",
               "</s>", "<br>"])
GEMMA_CONTROL = ["<mask>", "[@BOS@]"]


def train_gemma():
    """tests/golden/tokenizer/gemma/: a small SentencePiece BPE with Gemma's
    settings (byte fallback, no dummy prefix, digits split, identity
    normalization, whitespace kept, pad/eos/bos/unk = 0/1/2/3, the pieces
    above), trained here by sentencepiece on corpus() (tabs made spaces: a
    tab is left to its byte piece), and the tokenizer.json and
    tokenizer_config.json transformers' GemmaTokenizerFast converts it into
    (save_pretrained, special_tokens_map.json left out)."""
    import io, shutil, tempfile
    import sentencepiece as spm
    from transformers import GemmaTokenizerFast
    lines = [x.replace("\t", "    ") for x in corpus()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=1200, byte_fallback=True,
        add_dummy_prefix=False, split_digits=True, remove_extra_whitespaces=False, normalization_rule_name="identity",
        allow_whitespace_only_pieces=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>", user_defined_symbols=GEMMA_USER,
        control_symbols=GEMMA_CONTROL, num_threads=1, minloglevel=2)
    os.makedirs(GEMMA_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tokenizer.model")
        open(path, "wb").write(model.getvalue())
        GemmaTokenizerFast(vocab_file=path).save_pretrained(d)
        shutil.copy(os.path.join(d, "tokenizer.model"), os.path.join(GEMMA_DIR, "tokenizer.model"))
        for name in ("tokenizer.json", "tokenizer_config.json"):   # written again without indentation
            j = json.load(open(os.path.join(d, name), encoding="utf-8"))
            with open(os.path.join(GEMMA_DIR, name), "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False)
        j = json.load(open(os.path.join(GEMMA_DIR, "tokenizer.json"), encoding="utf-8"))
    print("gemma: %d pieces, %d merges, %d added tokens" % (len(j["model"]["vocab"]), len(j["model"]["merges"]),
                                                           len(j["added_tokens"])))


def looks_special(text):
    """Added tokens llama.cpp's converter makes control tokens though their
    tokenizer_config.json entry is not special (Gemma's <mask>, <unusedN>)."""
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (text.startswith("<|") and text.endswith("|>")) or
            (text.startswith("<\uff5c") and text.endswith("\uff5c>")) or
            (text.startswith("<unused") and text.endswith(">")))


def gemma_strings():
    """The strings Gemma's tokenizers are checked on: qwen2_strings.json (the
    hard strings among them) and text at the edges of Gemma's pieces: chat
    turns, runs of spaces, newlines and tabs shorter and longer than its
    longest piece, HTML tags and near misses, special-token text, literal
    metaspace characters."""
    turn = "<bos><start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n"
    s = json.load(open(os.path.join(GOLD, "qwen2_strings.json"), encoding="utf-8"))
    s += [turn % "Hi", turn % "You are a pirate.\n\nCount to 5", "<start_of_turn>model\nSure.<end_of_turn>\n",
          turn % "  spaces  ", "<start_of_turn>", "<end_of_turn>", "<start_of_turn >", "<start_of_turn>user",
          "<end_of_turn><eos>", "x<end_of_turn>y", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[@BOS@]",
          "<bos><bos>", " <eos> ", "<mask>x<mask>"]
    s += [" " * k for k in (1, 2, 15, 16, 17, 30, 31, 32, 33, 47, 62, 63, 64, 100)]
    s += ["x" + " " * k + "y" for k in (1, 2, 3, 16, 31, 32, 40)] + [" " * k + "word" for k in (1, 2, 5, 31, 35)]
    s += ["\n" * k for k in (1, 2, 30, 31, 32, 45, 70)] + ["a" + "\n" * k + "b" for k in (3, 33)]
    s += ["\t" * k for k in (1, 2, 3, 8, 9, 17)] + ["\tx\t\ty\t\t\tz", " \t \t", "\t \n \t\n"]
    s += [" \n \n ", "\n \n", "  \n\n  \t\t", "line\n    indented\n\n        more\n"]
    s += ["<table><tr><td>1</td></tr></table>", "<h1>Title</h1>", "<s>strike</s>", "<code>x = 1</code><br>",
          "<tables>", "< table>", "<TABLE>", "<table", "<h1 >", "</s ><s>"]
    s += ["\u2581", "\u2581\u2581", "a\u2581\u2581b", "\u2581 \u2581", "\u2581" * 20, " \u2581\u2581 ",
          "\u2581\n\u2581"]
    s += ["12345", "3.14159", "\uff11\uff12\uff13", "x1y22", " 2024"]
    return s


def golden_gemma():
    """expected_gemma.json.zst: for each of gemma_strings(), the ids of
    sentencepiece on gemma/tokenizer.model ("sp", no special-token text
    parsed) and its decode; of transformers' GemmaTokenizer (sentencepiece
    under it) loaded from gemma/'s tokenizer.model and tokenizer_config.json
    with bos ("slow_add"), without ("slow_noadd") and with special-token text
    as plain text ("slow_split"); of the tokenizers library on
    gemma/tokenizer.json (add, noadd, split, decode, decode_skip: the fields
    of expected_<name>.json); of sentencepiece on the model with the types a
    GGUF gives its pieces (gguf_vocab_golden.py: the added tokens that are
    special, or look it, control) with no special-token text parsed
    ("gguf_split"); and GemmaTokenizerFast's with add_bos_token off and
    add_eos_token on ("gemma_class")."""
    import tempfile
    import sentencepiece as spm
    import tokenizers, transformers
    from tokenizers import Tokenizer
    from transformers import GemmaTokenizer, GemmaTokenizerFast
    strings = gemma_strings()
    sp = spm.SentencePieceProcessor(model_file=os.path.join(GEMMA_DIR, "tokenizer.model"))
    with tempfile.TemporaryDirectory() as d:   # the slow tokenizer's files, without tokenizer.json
        for name in ("tokenizer.model", "tokenizer_config.json"):
            os.symlink(os.path.join(os.path.abspath(GEMMA_DIR), name), os.path.join(d, name))
        slow = GemmaTokenizer.from_pretrained(d)
        slow_split = GemmaTokenizer.from_pretrained(d, split_special_tokens=True)
    from sentencepiece import sentencepiece_model_pb2
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(open(os.path.join(GEMMA_DIR, "tokenizer.model"), "rb").read())
    cfg = json.load(open(os.path.join(GEMMA_DIR, "tokenizer_config.json"), encoding="utf-8"))
    for key, added in cfg["added_tokens_decoder"].items():
        piece = proto.pieces[int(key)]
        if (added.get("special") or looks_special(added["content"])) and piece.type != piece.UNKNOWN:
            piece.type = piece.CONTROL
    sp_gguf = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    tok = Tokenizer.from_file(os.path.join(GEMMA_DIR, "tokenizer.json"))
    rows = []
    for s in strings:
        plain = sp.encode(s)
        add = tok.encode(s, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        split = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        rows.append({"sp": plain, "sp_decode": sp.decode(plain), "slow_add": slow(s).input_ids,
                     "slow_noadd": slow(s, add_special_tokens=False).input_ids,
                     "slow_split": slow_split(s, add_special_tokens=False).input_ids, "gguf_split": sp_gguf.encode(s),
                     "add": add, "noadd": tok.encode(s, add_special_tokens=False).ids, "split": split,
                     "decode": tok.decode(add, skip_special_tokens=False),
                     "decode_skip": tok.decode(add, skip_special_tokens=True)})
    cfg = {"tokenizer_class": "GemmaTokenizerFast", "add_bos_token": False, "add_eos_token": True}
    fast = GemmaTokenizerFast(tokenizer_file=os.path.join(GEMMA_DIR, "tokenizer.json"), add_bos_token=False,
                              add_eos_token=True)
    texts = ["Hello world", "<bos>Hi<eos> there", "", "<start_of_turn>user\nx<end_of_turn>\n"]
    write_zst("expected_gemma.json.zst", {
        "library": "sentencepiece %s, transformers %s GemmaTokenizer, tokenizers %s" %
                   (spm.__version__, transformers.__version__, tokenizers.__version__),
        "fnv64": {n: fnv64(os.path.join(GEMMA_DIR, n)) for n in ("tokenizer.model", "tokenizer.json")},
        "strings": strings, "rows": rows,
        "gemma_class": {"config": cfg, "rows": [{"text": x, "ids": fast(x).input_ids} for x in texts]}})
    print("gemma: %d strings" % len(strings))


# ---------------------------------------------------------------- speed

def speed(args):
    texts = [json.loads(l) for l in open(args.text, encoding="utf-8") if l.strip()]
    nbytes = sum(len(t.encode()) for t in texts)
    if args.tokenizer.endswith(".model"):
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
        enc = sp.encode
        lib = "sentencepiece " + spm.__version__
    else:
        from tokenizers import Tokenizer
        import tokenizers
        tok = Tokenizer.from_file(args.tokenizer)
        enc = lambda t: tok.encode(t, add_special_tokens=False).ids
        lib = "tokenizers " + tokenizers.__version__
    best = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        n = 0
        for t in texts:
            n += len(enc(t))
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    res = {"library": lib, "mbps": nbytes / best / 1e6, "ids": n, "bytes": nbytes}
    print(json.dumps(res))


# ---------------------------------------------------------------- fuzz

FUZZ_ALPHABET = list("abcdeXYZ 0123456789.,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`\t\n\r") + [
    "  ", "   ", "\n\n", "'s", "'S", "'ll", "<s>", "</s>", "<unk>", "<|eot_id|>", "<|begin_of_text|>", "<lstrip>",
    "<rstrip>", "<word>", "<norm>", "▁", "Ġ", "é", "中", "文", "🦙", "👩\u200d👧", "\u00a0", "\u3000", "\u2028", "\u0085",
    "\u200b", "ſ", "K", "Ω", "ß", "İ", "\u0301", "١٢٣", "๑", "Ⅻ", "½", "²", " <s> ", "\x0b", "\x0c", "\x1c",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "\u0308", "\u0323", "\u1100", "\u1161", "\u11a8", "Å", "'Sam",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<mask>", "<table>", "</td>", " " * 16, "\n" * 5, "\t\t\t"]


def run_cli(tokpath, args, lines):
    inp = "".join(json.dumps(x) + "\n" for x in lines)
    r = subprocess.run([os.path.join(ROOT, "bin", "spec-tokenize"), "--tokenizer", tokpath] + args,
                       input=inp.encode(), capture_output=True)
    if r.returncode:
        raise SystemExit("spec-tokenize failed: " + r.stderr.decode())
    return [json.loads(l) for l in r.stdout.decode().split("\n")[:-1]]


def fuzz(args):
    import random
    from tokenizers import Tokenizer
    rnd = random.Random(args.seed)
    texts = ["".join(rnd.choice(FUZZ_ALPHABET) for _ in range(rnd.randint(0, 120))) for _ in range(args.n)]
    bad_total = 0

    def report(what, exp, got):
        nonlocal bad_total
        bad = [i for i in range(len(texts)) if exp[i] != got[i]]
        bad_total += len(bad)
        print("%-48s %s" % (what, "identical" if not bad else "%d of %d differ" % (len(bad), len(texts))))
        for i in bad[:3]:
            print("    %r\n    expected %r\n    got      %r" % (texts[i], exp[i], got[i]))

    paths = [(n, os.path.join(GOLD, n + ".json")) for n in ("sp_bytefallback", "sp_metaspace", "bytelevel_llama3",
                                                            "bytelevel_qwen2")]
    if os.path.exists(DEMO):
        paths.append(("demo", DEMO))
    paths.append(("gemma", os.path.join(GEMMA_DIR, "tokenizer.json")))
    for name, path in paths:
        tok = Tokenizer.from_file(path)
        for cli, add, split in (([], True, False), (["--no-bos"], False, False), (["--no-bos", "--split-special"], False, True)):
            tok.encode_special_tokens = split
            report("%s encode %s" % (name, " ".join(cli)), [tok.encode(t, add_special_tokens=add).ids for t in texts],
                   run_cli(path, cli, texts))
        tok.encode_special_tokens = False
        ids = [tok.encode(t).ids for t in texts]
        for cli, skip in ((["--decode"], False), (["--decode", "--skip-special"], True)):
            report("%s %s" % (name, " ".join(cli)), [tok.decode(x, skip_special_tokens=skip) for x in ids],
                   run_cli(path, cli, ids))
    if os.path.exists(LLAMA2_MODEL):
        import sentencepiece as spm
        from transformers import LlamaTokenizer
        sp = spm.SentencePieceProcessor(model_file=LLAMA2_MODEL)
        plain = [sp.encode(t) for t in texts]
        report("llama2 .model vs sentencepiece", plain, run_cli(LLAMA2_MODEL, ["--no-bos", "--split-special"], texts))
        slow = LlamaTokenizer(vocab_file=LLAMA2_MODEL, legacy=True)
        report("llama2 .model vs LlamaTokenizer(legacy)", [slow(t).input_ids for t in texts], run_cli(LLAMA2_MODEL, [], texts))
        report("llama2 .model decode vs sentencepiece", [sp.decode(x) for x in plain],
               run_cli(LLAMA2_MODEL, ["--decode", "--skip-special"], plain))
    import sentencepiece as spm
    gemma_model = os.path.join(GEMMA_DIR, "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=gemma_model)
    report("gemma .model vs sentencepiece", [sp.encode(t) for t in texts],
           run_cli(gemma_model, ["--no-bos", "--split-special"], texts))
    print("all identical" if not bad_total else "%d differences" % bad_total)
    sys.exit(1 if bad_total else 0)


def golden_chatml(ckpt):
    """chat_chatml_golden.json: prompts of the chatml template as transformers'
    apply_chat_template renders them with SmolLM2-Instruct's own chat_template
    (read from ckpt/tokenizer_config.json, which spec-convert copied from the
    GGUF): the default system message when none is given, an explicit one,
    and multi-turn conversations with answers."""
    import transformers
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer
    cfg = json.load(open(os.path.join(ckpt, "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json")))
    rows = [dict(template="chatml", **r) for r in chat_template_rows(tok, cfg["chat_template"])]
    write_json("chat_chatml_golden.json", {"source": "transformers %s apply_chat_template with SmolLM2-135M-Instruct's "
                                           "chat_template" % transformers.__version__,
                                           "chat_template": cfg["chat_template"], "prompts": rows})
    print("chatml: %d rendered prompts" % len(rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    sub.add_parser("train")
    sub.add_parser("golden")
    sp = sub.add_parser("speed")
    sp.add_argument("--tokenizer", required=True)
    sp.add_argument("--text", required=True, help="file of JSON strings, one per line")
    sp.add_argument("--repeat", type=int, default=3)
    cm = sub.add_parser("chatml", help="chat_chatml_golden.json from a spec-convert'ed SmolLM2 checkpoint")
    cm.add_argument("--ckpt", default="models/smollm2-135m-instruct")
    fz = sub.add_parser("fuzz")
    fz.add_argument("--n", type=int, default=3000)
    fz.add_argument("--seed", type=int, default=1)
    qw = sub.add_parser("qwen2", help="only Qwen2's: bytelevel_qwen2 goldens and chat_qwen_golden.json")
    qw.add_argument("--train", action="store_true", help="retrain bytelevel_qwen2.json first")
    gm = sub.add_parser("gemma", help="only Gemma's: expected_gemma.json.zst")
    gm.add_argument("--train", action="store_true", help="retrain tests/golden/tokenizer/gemma/ first")
    a = ap.parse_args()
    if a.cmd == "qwen2" and a.train:
        train_qwen2()
    if a.cmd == "gemma" and a.train:
        train_gemma()
    {"qwen2": lambda: (golden_qwen2(), golden_chat_qwen()), "gemma": golden_gemma, "train": train,
     "speed": lambda: speed(a), "fuzz": lambda: fuzz(a), "chatml": lambda: golden_chatml(a.ckpt)}.get(a.cmd, golden)()

if __name__ == "__main__":
    main()
