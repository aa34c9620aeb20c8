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


# ---------------------------------------------------------------- goldens

def bench_turns():
    """[(key, text)] for every turn of ../shared/benchmarks/*/question.jsonl."""
    out = []
    for f in sorted(glob.glob(os.path.join(SHARED, "benchmarks", "*", "question.jsonl"))):
        bench = os.path.basename(os.path.dirname(f))
        for line in open(f, encoding="utf-8"):
            if not line.strip():
                continue
            q = json.loads(line)
            for k, t in enumerate(q["turns"]):
                out.append(("%s/%s/%d" % (bench, q["question_id"], k), t))
    return out


def bench_questions():
    out = []
    for f in sorted(glob.glob(os.path.join(SHARED, "benchmarks", "*", "question.jsonl"))):
        bench = os.path.basename(os.path.dirname(f))
        for line in open(f, encoding="utf-8"):
            if line.strip():
                out.append((bench, json.loads(line)))
    return out


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


def golden_tokenizers_json(name, path, hard, turns, bench=True):
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


# ---------------------------------------------------------------- speed

def speed(args):
    texts = [json.loads(l) for l in open(args.text, encoding="utf-8") if l.strip()]
    nbytes = sum(len(t.encode()) for t in texts)
    res = {}
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
    "\u200b", "ſ", "K", "Ω", "ß", "İ", "\u0301", "١٢٣", "๑", "Ⅻ", "½", "²", " <s> ", "\x0b", "\x0c", "\x1c"]


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

    paths = [(n, os.path.join(GOLD, n + ".json")) for n in ("sp_bytefallback", "sp_metaspace", "bytelevel_llama3")]
    if os.path.exists(DEMO):
        paths.append(("demo", DEMO))
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
    tok.chat_template = cfg["chat_template"]
    rows = []
    for conv in CONVERSATIONS:
        users, answers = conv["user"], conv["assistant"]
        for system in (None, "You are a pirate. Answer in one sentence."):
            for k in range(1, len(users) + 1):
                msgs = [{"role": "system", "content": system}] if system else []
                for j in range(k):
                    msgs.append({"role": "user", "content": users[j]})
                    if j < k - 1:
                        msgs.append({"role": "assistant", "content": answers[j]})
                prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
                rows.append({"template": "chatml", "system": system, "user": users[:k], "assistant": answers[:k - 1],
                             "prompt": prompt, "ids": tok(prompt, add_special_tokens=False).input_ids})
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
    a = ap.parse_args()
    if a.cmd == "train":
        train()
    elif a.cmd == "speed":
        speed(a)
    elif a.cmd == "fuzz":
        fuzz(a)
    elif a.cmd == "chatml":
        golden_chatml(a.ckpt)
    else:
        golden()


if __name__ == "__main__":
    main()
