#!/usr/bin/env python3
"""Qwen2.5-Coder's real tokenizer, ours against the references (run by
tools/experiments/qwen_tokenizer.sh, which builds what it needs).

On the strings of tests/golden/tokenizer/qwen2_strings.json (code, digit and
whitespace runs, Unicode NFC changes, contractions, ChatML prompts):

  (a) bin/spec-tokenize on MODEL (the folder `make qwen` writes) against the
      `tokenizers` library on MODEL/tokenizer.json: ids with special tokens
      parsed, ids with special-token text as plain text (--split-special /
      encode_special_tokens), and the decode of the library's ids; also on
      3000 seeded random mixes and every benchmark turn of ../shared;
  (b) against llama.cpp's llama-tokenize on the original GGUF (specials
      parsed: its default; plain text: --no-parse-special).  llama.cpp does
      not apply the NFC normalizer Qwen2's tokenizer.json declares, so it is
      given each text as `tokenizers`' NFC leaves it; how many of the texts
      NFC changes it tokenizes otherwise raw is printed, not counted.  And
      llama.cpp makes a few ordinary tokens control tokens by their text
      (Qwen2.5: '</s>'), which it then cuts out of text when it parses
      specials; strings holding them are listed, not counted, in that row;
  (c) the chat prompts of tests/golden/tokenizer/chat_qwen_golden.json's
      conversations: spec-tokenize --template auto (the template guessed, its
      default system message) against transformers' apply_chat_template(...,
      add_generation_prompt=True) on MODEL.

Prints the strings and differences of each comparison; exits 1 on any
difference, 2 when something it needs is missing.  --write-golden also
writes llama.cpp's ids to tests/golden/tokenizer/qwen2_llamacpp.json.zst,
which tests/test_tokenizer.c compares ours with when MODEL is there.

--from-gguf DIR writes a stand-in Hugging Face tokenizer folder from the GGUF
(vocabulary, merges, added tokens, the chat template, Qwen2's NFC normalizer
and pre-tokenizer), for trying this before `make qwen` exists; the
comparison is meant for the folder `make qwen` writes."""
import argparse, ast, concurrent.futures, json, os, re, subprocess, sys, tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GOLD = os.path.join(ROOT, "tests", "golden", "tokenizer")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def spec_tokenize(model, args, lines):
    inp = "".join(json.dumps(x) + "\n" for x in lines)
    r = subprocess.run([os.path.join(ROOT, "bin", "spec-tokenize"), "--tokenizer", model] + args,
                       input=inp.encode(), capture_output=True)
    if r.returncode:
        sys.exit("spec-tokenize failed: " + r.stderr.decode().strip())
    return [json.loads(l) for l in r.stdout.decode().split("\n")[:-1]], r.stderr.decode()


def llama_tokenize(exe, gguf, text, parse_special):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode())
    try:
        cmd = [exe, "-m", gguf, "-f", f.name, "--ids", "--log-disable", "--no-escape"]
        if not parse_special:
            cmd.append("--no-parse-special")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit("llama-tokenize failed on %r: %s" % (text[:40], r.stderr.strip()[-300:]))
        return ast.literal_eval(r.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(f.name)


class Report:
    def __init__(self):
        self.total = 0

    def __call__(self, what, texts, exp, got, count=None):
        bad = [i for i in range(len(texts)) if exp[i] != got[i]]
        if count is not None:
            bad = [i for i in bad if count(i)]
        self.total += len(bad)
        print("%-62s %4d strings, %d differ" % (what, len(texts), len(bad)))
        for i in bad[:5]:
            print("    %r\n      expected %s\n      got      %s" % (texts[i][:80], exp[i], got[i]))
        return bad


def from_gguf(gguf_path, out):
    """A tokenizer folder as Hugging Face lays it out, from the GGUF alone."""
    import gguf
    r = gguf.GGUFReader(gguf_path)
    f = r.fields

    def strs(k):
        return [bytes(f[k].parts[i]).decode("utf-8") for i in f[k].data]
    toks, merges = strs("tokenizer.ggml.tokens"), strs("tokenizer.ggml.merges")
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    vocab = {t: i for i, (t, ty) in enumerate(zip(toks, types)) if ty == 1}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": ty == 3} for i, (t, ty) in enumerate(zip(toks, types)) if ty in (3, 4)]
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": {"type": "NFC"},
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False}, bl]},
          "post_processor": bl, "decoder": bl,
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                    "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": vocab, "merges": merges}}
    eos = int(f["tokenizer.ggml.eos_token_id"].contents())
    cfg = {"add_bos_token": False, "bos_token": None, "eos_token": toks[eos], "pad_token": "<|endoftext|>",
           "clean_up_tokenization_spaces": False, "tokenizer_class": "Qwen2Tokenizer",
           "chat_template": f["tokenizer.chat_template"].contents()}
    os.makedirs(out, exist_ok=True)
    json.dump(tj, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False,
              indent=1)
    print("%s: tokenizer.json (%d tokens, %d merges, %d added), tokenizer_config.json" %
          (out, len(vocab), len(merges), len(added)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--gguf", default="models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--llama-tokenize", help="llama.cpp's llama-tokenize (without it, (b) is left out)")
    ap.add_argument("--from-gguf", metavar="DIR", help="write a stand-in tokenizer folder from --gguf and exit")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--write-golden", action="store_true",
                    help="also write llama.cpp's ids to tests/golden/tokenizer/qwen2_llamacpp.json.zst "
                         "(tests/test_tokenizer.c compares ours on MODEL with them)")
    a = ap.parse_args()
    if a.from_gguf:
        from_gguf(a.gguf, a.from_gguf)
        return
    if not os.path.exists(os.path.join(a.model, "tokenizer.json")):
        print("qwen_tokenizer: %s/tokenizer.json absent (make qwen writes it)" % a.model, file=sys.stderr)
        sys.exit(2)
    from tokenizers import Tokenizer
    import tokenizers
    texts = json.load(open(os.path.join(GOLD, "qwen2_strings.json"), encoding="utf-8"))
    rep = Report()
    print("%d strings (tests/golden/tokenizer/qwen2_strings.json); model %s" % (len(texts), a.model))

    # (a) the tokenizers library on the same tokenizer.json
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    ours, _ = spec_tokenize(a.model, ["--no-bos"], texts)
    hf = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    rep("(a) tokenizers %s, specials parsed" % tokenizers.__version__, texts, hf, ours)
    ours_plain, _ = spec_tokenize(a.model, ["--no-bos", "--split-special"], texts)
    tok.encode_special_tokens = True
    hf_plain = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    tok.encode_special_tokens = False
    rep("(a) tokenizers, special-token text as text", texts, hf_plain, ours_plain)
    dec, _ = spec_tokenize(a.model, ["--decode"], hf)
    rep("(a) decode of the library's ids", texts, [tok.decode(x, skip_special_tokens=False) for x in hf], dec)
    # more text for the library alone (fast): seeded random mixes, benchmark turns of ../shared
    sys.path.insert(0, os.path.join(ROOT, "tools", "golden"))
    import random, tokenizer_oracle
    rnd = random.Random(5)
    more = ["".join(rnd.choice(tokenizer_oracle.FUZZ_ALPHABET) for _ in range(rnd.randint(0, 120)))
            for _ in range(3000)] + [t for _, t in tokenizer_oracle.bench_turns()]
    got, _ = spec_tokenize(a.model, ["--no-bos"], more)
    rep("(a) tokenizers, 3000 random mixes + %d benchmark turns" % (len(more) - 3000), more,
        [tok.encode(t, add_special_tokens=False).ids for t in more], got)

    # (b) llama.cpp on the GGUF, given the text as NFC leaves it
    if a.llama_tokenize:
        norm = tokenizers.normalizers.NFC()
        nfc = [norm.normalize_str(t) for t in texts]
        changed = [i for i in range(len(texts)) if nfc[i] != texts[i]]
        special = [i for i in range(len(texts)) if "<" in texts[i]]   # the only ones --no-parse-special may change
        jobs = [(t, True) for t in nfc] + [(nfc[i], False) for i in special] + [(texts[i], True) for i in changed]
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            res = list(ex.map(lambda j: llama_tokenize(a.llama_tokenize, a.gguf, j[0], j[1]), jobs))
        lc = res[:len(texts)]
        lc_plain = list(lc)
        for i, r in zip(special, res[len(texts):len(texts) + len(special)]):
            lc_plain[i] = r
        raw = res[len(texts) + len(special):]
        gg = os.path.basename(a.gguf)
        # llama.cpp makes ordinary tokens whose text looks like an end-of-
        # generation token control tokens (Qwen2.5: 128247 '</s>', "for
        # paddleocr"), so with specials parsed it cuts them out of the text;
        # Hugging Face parses only the added tokens.  Those strings are listed,
        # not counted (--no-parse-special below compares them in full).
        log = subprocess.run([a.llama_tokenize, "-m", a.gguf, "-p", "x", "--ids", "--no-escape"],
                             capture_output=True, text=True).stderr
        forced = re.findall(r"control-looking token: *(\d+) '(.*?)' was not control-type", log)
        hit = [i for i, t in enumerate(texts) if any(f in t for _, f in forced)]
        rep("(b) llama.cpp on %s, specials parsed" % gg, texts, lc, ours, count=lambda i: i not in hit)
        if forced:
            print("    llama.cpp turns %s into control tokens: %d strings holding them not counted, of which %d differ"
                  % (", ".join("%s %r" % f for f in forced), len(hit), sum(1 for i in hit if lc[i] != ours[i])))
        rep("(b) llama.cpp --no-parse-special, special-token text as text", texts, lc_plain, ours_plain)
        if a.write_golden:
            g = {"library": "llama.cpp llama-tokenize (llama-cpp-python 0.3.36 sdist) on " + gg,
                 "note": "texts of qwen2_strings.json given NFC-normalized (llama.cpp applies no NFC); ids: specials "
                         "parsed, null where the text holds a token llama.cpp makes a control token (%s); plain: "
                         "--no-parse-special" % ", ".join(f for _, f in forced),
                 "ids": [None if i in hit else lc[i] for i in range(len(texts))], "plain": lc_plain}
            raw_json = (json.dumps(g, separators=(",", ":")) + "\n").encode()
            out = os.path.join(GOLD, "qwen2_llamacpp.json.zst")
            subprocess.run(["zstd", "-q", "-19", "-f", "-o", out], input=raw_json, check=True)
            print("    wrote", os.path.relpath(out, ROOT))
        nfc_only = sum(1 for i, r in zip(changed, raw) if r != ours[i])
        print("    llama.cpp applies no NFC: on the raw text, %d of the %d strings NFC changes tokenize otherwise "
              "(not counted)" % (nfc_only, len(changed)))
    else:
        print("(b) llama.cpp: no --llama-tokenize given, left out")

    # (c) chat prompts
    g = json.load(open(os.path.join(GOLD, "chat_qwen_golden.json"), encoding="utf-8"))
    from transformers import AutoTokenizer
    import transformers
    at = AutoTokenizer.from_pretrained(a.model)
    lines, exp, names = [], [], []
    for row in g["prompts"]:
        msgs = [{"role": "system", "content": row["system"]}] if row["system"] else []
        for j, u in enumerate(row["user"]):
            msgs.append({"role": "user", "content": u})
            if j < len(row["assistant"]):
                msgs.append({"role": "assistant", "content": row["assistant"][j]})
        exp.append(at.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True))
        lines.append(row)
        names.append("%d turns, system %s" % (len(row["user"]), "given" if row["system"] else "default"))
    got = []
    for row in lines:
        q = {"question_id": 1, "turns": row["user"], "answers": row["assistant"]}
        args = ["--template", "auto"] + (["--system", row["system"]] if row["system"] else [])
        ids, err = spec_tokenize(a.model, args, [q])
        got.append(ids[-1] if ids else None)
    rep("(c) chat prompts vs transformers %s apply_chat_template" % transformers.__version__, names, exp, got)

    print("all identical" if not rep.total else "%d differences" % rep.total)
    sys.exit(1 if rep.total else 0)


if __name__ == "__main__":
    main()
