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

    pip install gguf==0.19.0 sentencepiece==0.2.0 tokenizers==0.20.3   # and the zstd tool
    python3 tools/golden/gguf_vocab_golden.py"""
import glob
import json
import os
import subprocess
import tempfile
import gguf
import sentencepiece

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "tokenizer")
SRC = os.path.join(ROOT, "..", "shared", "tokenizers", "llama2", "tokenizer.model")


def write_gguf_zst(name, fill):
    """A vocabulary-only GGUF filled by fill(writer), zstd-compressed into GOLD/name."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "vocab.gguf")
        w = gguf.GGUFWriter(path, "llama")
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
DEEPSEEK_SPECIAL = ["<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"]
# strings at the splits' edges: line breaks, punctuation runs, the CJK and Hangul ranges' ends, digits
DEEPSEEK_STRINGS = [
    "def f(x):\r\n    return x**2  # square\n\n\n", "a\r\rb\n\rc", "  leading  spaces   and\ttabs\t\t",
    "x = [1, 2, 3]; y = {'k': 42}", "version 10.2.33 and 2026-12-06 at 09:15", "12345678901234567890",
    "Hello, world!!! ... ?!", "\u4e2d\u6587\u5b57\u7b26 \u6f22\u5b57 \u9fa5\u9fa6 \u4e00\u4dff",
    "\uac00\ub098\ub2e4 \ud7a3\ud7ff \u0800\u0801 \u07ff", "caf\u00e9 na\u00efve \u00fcber \u00f5\u00f7",
    "emoji \U0001F600\U0001F680 and \u2581 and \u00a0nbsp", "x<<=2;y>>=3&&z||!w", "'s 't 're 've 'm 'll 'd",
    "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 \u05e9\u05dc\u05d5\u05dd",
    "mixed\u4e2d\u6587and\ud55c\uad6d\uc5b4123text", "tab\tsep\tvalues\n1\t2\t3", "",
    " ", "\n", "   \n   ", "<\uff5cbegin\u2581of\u2581sentence\uff5c>print(1)<\uff5cend\u2581of\u2581sentence\uff5c>",
]


def deepseek_coder():
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    hard = json.load(open(os.path.join(GOLD, "hard_strings.json"), encoding="utf-8"))
    lines = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "tools", "*", "*.py"))):
        lines += open(path, encoding="utf-8").read().splitlines()
    lines += hard * 5 + DEEPSEEK_STRINGS * 5
    pre = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in DEEPSEEK_SPLITS] +
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = Tokenizer(BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    tr = trainers.BpeTrainer(vocab_size=3000, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=[])
    tok.train_from_iterator(lines, tr)
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
        w.add_tokenizer_pre("deepseek-coder")
        w.add_token_list(names)
        w.add_token_types([3 if i in special else 1 for i in range(n)])
        w.add_token_merges(merges)
        w.add_bos_token_id(vocab[DEEPSEEK_SPECIAL[0]])
        w.add_eos_token_id(vocab[DEEPSEEK_SPECIAL[1]])
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
    write_gguf_zst("deepseek_coder_vocab.gguf.zst", fill)
    strings = hard + DEEPSEEK_STRINGS
    rows = [tok.encode(s, add_special_tokens=False).ids for s in strings]
    import tokenizers
    with open(os.path.join(GOLD, "expected_deepseek_coder_vocab.json"), "w", encoding="utf-8") as f:
        json.dump({"library": "tokenizers " + tokenizers.__version__, "strings": strings, "ids": rows}, f,
                  ensure_ascii=False)
    print(f"deepseek_coder: vocab {n}, merges {len(merges)}, {len(strings)} strings")


llama2()
deepseek_coder()
