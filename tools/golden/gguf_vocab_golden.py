#!/usr/bin/env python3
"""Vocabulary-only GGUFs for tests/test_tokenizer.c, written by the `gguf`
package the way llama.cpp's converter writes a vocabulary, which spec-convert
--tokenizer-only turns back into our tokenizer files:

  llama2_vocab.gguf.zst     the LLaMA-2 tokenizer.model of ../shared as a
                            SentencePiece ("llama") vocabulary: each piece,
                            score and type as sentencepiece reads them, the
                            unknown, bos and eos ids, add_bos_token on; its
                            expected ids are expected_llama2_model.json's
                            (sentencepiece's and transformers' on the
                            original file).
  deepseek_coder_vocab.gguf.zst  a small byte-level BPE ("gpt2", pre-tokenizer
                            deepseek-coder) trained here with `tokenizers` and
                            DeepSeek-Coder's published pre-tokenizer: line
                            breaks alone, letter runs and punctuation runs
                            with one leading space, CJK and Hangul runs, each
                            split isolating, then every digit alone, then
                            bytes; expected_deepseek_coder_vocab.json holds the
                            strings and that library's ids for them.
  deepseek_llm_vocab.gguf.zst    the same with DeepSeek-LLM's pre-tokenizer (runs
                            of its cased letters and of ASCII and fullwidth
                            punctuation with one leading space, trailing
                            whitespace, CJK and Hangul runs, digit runs) and
                            expected_deepseek_llm_vocab.json.
  gemma_vocab.gguf.zst      the Gemma-style tokenizer of gemma/ (tokenizer_oracle.py
                            gemma --train) as llama.cpp's converter writes a Gemma 3
                            vocabulary: architecture gemma3, tokenizer model "llama"
                            with add_space_prefix off; sentencepiece's pieces,
                            scores and types, then tokenizer_config.json's
                            added_tokens_decoder over them: control where special
                            (or named like <mask>, <unusedN>, <|...|>), else
                            user-defined with each ▁ written as a space, score
                            -1000 for both; Gemma 3's chat template
                            (chat_families_golden.py's); its expected ids are
                            expected_gemma.json.zst's (transformers' GemmaTokenizer
                            on the original files).

    pip install gguf==0.19.0 sentencepiece==0.2.0 tokenizers==0.20.3   # and the zstd tool
    python3 tools/golden/gguf_vocab_golden.py [llama2] [deepseek_coder] [deepseek_llm] [gemma]   # default: all"""
import json
import os
import subprocess
import tempfile
import sys
import gguf
import sentencepiece

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_oracle import looks_special, train_bytelevel_words  # noqa: E402
from chat_families_golden import GEMMA3  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "tokenizer")
SRC = os.path.join(ROOT, "..", "shared", "tokenizers", "llama2", "tokenizer.model")


def write_gguf_zst(name, fill, arch="llama"):
    """A vocabulary-only GGUF filled by fill(writer), zstd-compressed into GOLD/name."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vocab.gguf")
        w = gguf.GGUFWriter(path, arch)
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        raw = open(path, "rb").read()
    out = os.path.join(GOLD, name)
    subprocess.run(["zstd", "-q", "-19", "-f", "-o", out], input=raw, check=True)
    print(f"{out}: {len(raw)} bytes, {os.path.getsize(out)} compressed")


def llama2():
    sp = sentencepiece.SentencePieceProcessor(model_file=SRC)
    n = sp.get_piece_size()
    # sentencepiece's types in llama.cpp's numbering (the same as sentencepiece's enum)
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1
             for i in range(n)]

    def fill(w):
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list([sp.id_to_piece(i).encode("utf-8") for i in range(n)])
        w.add_token_scores([sp.get_score(i) for i in range(n)])
        w.add_token_types(types)
        w.add_bos_token_id(sp.bos_id())
        w.add_eos_token_id(sp.eos_id())
        w.add_unk_token_id(sp.unk_id())
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
    write_gguf_zst("llama2_vocab.gguf.zst", fill)


# DeepSeek-Coder's tokenizer.json pre-tokenizer, as published
DEEPSEEK_SPLITS = [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"]
# DeepSeek-LLM's, as published
DEEPSEEK_LLM_SPLITS = [
    "[\\r\\n]",
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+"]
DEEPSEEK_SPECIAL = ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"]
# strings at the splits' edges: line breaks, punctuation runs, the CJK and Hangul ranges' ends, digits
# (also next to symbols no split takes: currency, Arabic), whitespace after such symbols
DEEPSEEK_STRINGS = [
    "def f(x):\r\n    return x**2  # square\n\n\n", "a\r\rb\n\rc", "  leading  spaces   and\ttabs\t\t",
    "x = [1, 2, 3]; y = {'k': 42}", "version 10.2.33 and 2026-12-06 at 09:15", "12345678901234567890",
    "Hello, world!!! ... ?!", "\u4e2d\u6587\u5b57\u7b26 \u6f22\u5b57 \u9fa5\u9fa6 \u4e00\u4dff",
    "\uac00\ub098\ub2e4 \ud7a3\ud7ff \u0800\u0801 \u07ff", "caf\u00e9 na\u00efve \u00fcber \u00f5\u00f7",
    "emoji \U0001F600\U0001F680 and \u2581 and \u00a0nbsp", "x<<=2;y>>=3&&z||!w", "'s 't 're 've 'm 'll 'd",
    "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 \u05e9\u05dc\u05d5\u05dd",
    "mixed\u4e2d\u6587and\ud55c\uad6d\uc5b4123text", "tab\tsep\tvalues\n1\t2\t3", "",
    " ", "\n", "   \n   ", "\u20ac123 and \u00a545 and \u00a92024", "price: \u20ac  ", "\u0628\u0661\u0662\u0663\u0664",
    "\u2116 7 \u2116\u2116  ", "\u00a9\u00ae  \t", "<\uff5cbegin\u2581of\u2581sentence\uff5c>print(1)<\uff5cend\u2581of\u2581sentence\uff5c>",
]


def deepseek_bpe(name, pre_name, splits, digits):
    """A small byte-level BPE with one of DeepSeek's pre-tokenizers (splits,
    each isolating, then each digit alone where digits), as a vocabulary-only
    GGUF name_vocab.gguf.zst and its ids on the strings it is checked on.
    Its merges are learnt on the pre-tokenizer's pieces of the committed
    tokenizer strings and of those strings, and also on whole lines, so the
    vocabulary holds tokens across the splits' cuts: a cut made differently
    (or not made) encodes differently."""
    from tokenizers import AddedToken, Regex, decoders, pre_tokenizers
    hard = json.load(open(os.path.join(GOLD, "hard_strings.json"), encoding="utf-8"))
    # the committed strings of the tokenizer goldens (code, digits, whitespace, CJK, ChatML), so a rerun learns the same merges
    lines = json.load(open(os.path.join(GOLD, "qwen2_strings.json"), encoding="utf-8")) * 3 + hard * 5 + DEEPSEEK_STRINGS * 5
    pre = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in splits] +
        ([pre_tokenizers.Digits(individual_digits=True)] if digits else []) +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    cut = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in splits] +
        ([pre_tokenizers.Digits(individual_digits=True)] if digits else []))
    words = []
    for i, line in enumerate(lines):
        words += [w for w, _ in cut.pre_tokenize_str(line)]
        if i % 3 == 0:
            words.append(line)
    tok = train_bytelevel_words(words, 3000)
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    tok.add_special_tokens([AddedToken(x, normalized=False, special=True) for x in DEEPSEEK_SPECIAL])
    j = json.loads(tok.to_str())
    vocab = tok.get_vocab(with_added_tokens=True)
    n = len(vocab)
    names = [None] * n
    for t, i in vocab.items():
        names[i] = t
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    special = {vocab[x] for x in DEEPSEEK_SPECIAL}

    def fill(w):
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre_name)
        w.add_token_list(names)
        w.add_token_types([3 if i in special else 1 for i in range(n)])
        w.add_token_merges(merges)
        w.add_bos_token_id(vocab[DEEPSEEK_SPECIAL[0]])
        w.add_eos_token_id(vocab[DEEPSEEK_SPECIAL[1]])
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
    write_gguf_zst(name + "_vocab.gguf.zst", fill)
    strings = hard + DEEPSEEK_STRINGS
    rows = [tok.encode(s, add_special_tokens=False).ids for s in strings]
    import tokenizers
    with open(os.path.join(GOLD, "expected_" + name + "_vocab.json"), "w", encoding="utf-8") as f:
        json.dump({"library": "tokenizers " + tokenizers.__version__, "strings": strings, "ids": rows}, f,
                  ensure_ascii=False)
    print(f"{name}: vocab {n}, merges {len(merges)}, {len(strings)} strings")


def gemma():
    d = os.path.join(GOLD, "gemma")
    sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
    n = sp.get_piece_size()
    names = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1
             for i in range(n)]
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8"))
    for key, tok in cfg["added_tokens_decoder"].items():
        i, text = int(key), tok["content"]
        if tok.get("special") or looks_special(text):
            types[i] = 3
        else:
            text, types[i] = text.replace("\u2581", " "), 4
        names[i], scores[i] = text, -1000.0

    def fill(w):
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list([x.encode("utf-8") for x in names])
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(sp.bos_id())
        w.add_eos_token_id(sp.eos_id())
        w.add_unk_token_id(sp.unk_id())
        w.add_pad_token_id(sp.pad_id())
        w.add_add_bos_token(cfg.get("add_bos_token", True))
        w.add_add_eos_token(cfg.get("add_eos_token", False))
        w.add_add_space_prefix(False)
        w.add_chat_template(GEMMA3)
    write_gguf_zst("gemma_vocab.gguf.zst", fill, "gemma3")
    print(f"gemma: {n} tokens, {types.count(4)} user-defined, {types.count(3)} control")


MAKERS = {"llama2": llama2,
          "deepseek_coder": lambda: deepseek_bpe("deepseek_coder", "deepseek-coder", DEEPSEEK_SPLITS, True),
          "deepseek_llm": lambda: deepseek_bpe("deepseek_llm", "deepseek-llm", DEEPSEEK_LLM_SPLITS, False),
          "gemma": gemma}
for name in sys.argv[1:] or MAKERS:
    if name not in MAKERS:
        raise SystemExit("unknown vocabulary %r (known: %s)" % (name, ", ".join(MAKERS)))
    MAKERS[name]()
