#!/usr/bin/env python3
"""tests/golden/tokenizer/llama2_vocab.gguf.zst for tests/test_tokenizer.c:
the LLaMA-2 tokenizer.model of ../shared as a vocabulary-only GGUF, written
by the `gguf` package the way llama.cpp's converter writes a SentencePiece
("llama") vocabulary: each piece, score and type as sentencepiece reads them,
the unknown, bos and eos ids, add_bos_token on.  spec-convert makes a
tokenizer.model of it again, whose ids the test checks against
expected_llama2_model.json (sentencepiece's and transformers' ids on the
original file).

    pip install gguf==0.19.0 sentencepiece==0.2.0   # and the zstd tool
    python3 tools/golden/spm_gguf_golden.py"""
import os
import subprocess
import tempfile
import gguf
import sentencepiece

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "..", "shared", "tokenizers", "llama2", "tokenizer.model")
OUT = os.path.join(HERE, "..", "..", "tests", "golden", "tokenizer", "llama2_vocab.gguf.zst")

sp = sentencepiece.SentencePieceProcessor(model_file=SRC)
n = sp.get_piece_size()
# sentencepiece's types in llama.cpp's numbering (the same as sentencepiece's enum)
types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1
         for i in range(n)]
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "vocab.gguf")
    w = gguf.GGUFWriter(path, "llama")
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
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    raw = open(path, "rb").read()
subprocess.run(["zstd", "-q", "-19", "-f", "-o", OUT], input=raw, check=True)
print(f"{OUT}: {n} pieces, {len(raw)} bytes, {os.path.getsize(OUT)} compressed")
