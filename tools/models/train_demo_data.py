"""train_demo.py's data: the corpus (this interpreter's standard library, split
by file), the byte-level BPE tokenizer, the token stream and its training
windows, the held-out prompt sets; stage tok."""
import ast
import hashlib
import json
import random
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import torch

from c2ttools.files import write_json, write_jsonl
from c2ttools.progress import log


BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
# The pre-tokenization regex of the LLaMA-3 tokenizer.json.
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
EXCLUDED_DIRS = {"test", "tests", "idlelib", "site-packages", "encodings", "pydoc_data",
                 "__pycache__"}


def list_corpus():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        parts = rel.parts[:-1]
        if any(d in EXCLUDED_DIRS or d.startswith("config-") for d in parts):
            continue
        if rel.name.startswith("_sysconfigdata"):
            continue
        files.append(rel.as_posix())
    return root, files


def split_files(files, seed, frac):
    rng = random.Random(seed)
    order = list(files)
    rng.shuffle(order)
    n_held = int(round(len(order) * frac))
    return sorted(order[n_held:]), sorted(order[:n_held])


def sha256_list(names):
    return hashlib.sha256(("\n".join(sorted(names)) + "\n").encode()).hexdigest()


def read_text(root, rel):
    return (root / rel).read_bytes().decode("utf-8", errors="replace")


def train_tokenizer(texts, vocab_size):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers,
                            processors, trainers)
    tok = Tokenizer(models.BPE(ignore_merges=True))   # as in LLaMA-3's tokenizer.json
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 2, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens([AddedToken(BOS, special=True, normalized=False),
                            AddedToken(EOS, special=True, normalized=False)])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS}:1 $B:1",
                                      special_tokens=[(BOS, bos_id)]),
    ])
    return tok


def save_tokenizer(tok, out_dir):
    from transformers import PreTrainedTokenizerFast
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                   model_max_length=2048, clean_up_tokenization_spaces=True)
    fast.save_pretrained(str(out_dir))
    # tokenizers >= 0.20 writes merges as ["a", "b"] pairs; the published LLaMA-3
    # tokenizer.json (and every older reader) uses "a b" strings. Byte-level tokens
    # never contain a space, so the string form is unambiguous: write that.
    path = out_dir / "tokenizer.json"
    j = json.loads(path.read_text())
    j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    path.write_text(json.dumps(j, ensure_ascii=False, indent=2) + "\n")


def load_tokenizer(out):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(out / "target" / "tokenizer.json"))


def token_bytes_table(tok):
    """id -> raw bytes of the token (byte-level BPE alphabet inverted)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    inv = {chr(c): b for b, c in zip(bs, cs)}
    table = {}
    for t, i in tok.get_vocab(with_added_tokens=True).items():
        table[i] = bytes(inv[ch] for ch in t) if all(ch in inv for ch in t) else t.encode()
    return table


class Corpus:
    """Token stream of a file list: per file [bos] tokens [eos], and the stream
    positions at which a source line starts (training windows start there)."""

    def __init__(self, tok, root, files):
        bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
        texts = [read_text(root, f) for f in files]
        encs = tok.encode_batch(texts, add_special_tokens=False)
        table = token_bytes_table(tok)
        ends_nl = torch.zeros(tok.get_vocab_size(with_added_tokens=True), dtype=torch.bool)
        for i, b in table.items():
            ends_nl[i] = b.endswith(b"\n")
        ids = []
        self.file_spans = []
        for f, e in zip(files, encs):
            start = len(ids)
            ids.append(bos)
            ids.extend(e.ids)
            ids.append(eos)
            self.file_spans.append((f, start, len(ids)))
        self.ids = torch.tensor(ids, dtype=torch.int64)
        self.bos, self.eos = bos, eos
        prev_nl = torch.zeros_like(self.ids, dtype=torch.bool)
        prev_nl[1:] = ends_nl[self.ids[:-1]]
        is_start = (prev_nl | (self.ids == bos)) & (self.ids != eos)
        is_start[0] = True
        self.starts = torch.nonzero(is_start).flatten()
        self.n_bytes = sum(len(t.encode()) for t in texts)

    def __len__(self):
        return self.ids.numel()

    def window(self, p, T):
        """T tokens starting with bos: [bos] + stream[p:p+T-1] (no double bos)."""
        if self.ids[p] == self.bos:
            return self.ids[p:p + T]
        return torch.cat([self.ids.new_tensor([self.bos]), self.ids[p:p + T - 1]])

    def epoch_windows(self, T, gen):
        """Window starts for one pass: a grid of stride T-1 with a random offset,
        each point snapped forward to the next line start; shuffled."""
        off = int(torch.randint(0, T - 1, (1,), generator=gen))
        grid = torch.arange(off, len(self) - T, T - 1)
        idx = torch.searchsorted(self.starts, grid).clamp(max=self.starts.numel() - 1)
        pos = torch.unique(self.starts[idx])
        pos = pos[pos + T <= len(self)]
        return pos[torch.randperm(pos.numel(), generator=gen)]

    def eval_windows(self, T, n):
        """Deterministic, non-overlapping evaluation windows (evenly spaced subset)."""
        pos = torch.arange(0, len(self) - T, T - 1)
        if pos.numel() > n:
            pos = pos[torch.linspace(0, pos.numel() - 1, n).round().long()]
        return [self.window(int(p), T) for p in pos]


def make_prompts(tok, root, held_files, seed, out_dir, max_tokens=300):
    """question.jsonl prompt sets from held-out files only; train/test share no file."""
    rng = random.Random(seed + 1)
    files = list(held_files)
    rng.shuffle(files)
    half = len(files) // 2
    groups = {"train": sorted(files[:half]), "test": sorted(files[half:])}
    ntok = lambda s: len(tok.encode(s, add_special_tokens=False).ids)
    stats = {}
    qid = 0
    for split, group in groups.items():
        code, cont = [], []
        for rel in group:
            text = read_text(root, rel)
            lines = text.splitlines(keepends=True)
            # continue: the opening lines of the module, cut at a line boundary
            acc, n = "", 0
            for ln in lines:
                if ntok(acc + ln) > 200:
                    break
                acc += ln
                n += 1
            if n >= 5 and ntok(acc) >= 40:
                cont.append((rel, acc))
            # code: signature + docstring of a function with a real body
            try:
                mod = ast.parse(text)
            except SyntaxError:
                continue
            cands = []
            for node in ast.walk(mod):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if ast.get_docstring(node) is None or len(node.body) < 2:
                    continue
                body_lines = node.end_lineno - node.body[0].end_lineno
                if body_lines < 3 or body_lines > 40:
                    continue
                head = "".join(lines[node.lineno - 1:node.body[0].end_lineno])
                head = textwrap.dedent(head)
                if not head.lstrip().startswith(("def ", "async def ")):
                    continue   # multi-line decorators etc.
                if not 20 <= ntok(head) <= max_tokens:
                    continue
                cands.append((node.lineno, rel, head))
            cands.sort()
            rng.shuffle(cands)
            code.extend(cands[:4])
        rng.shuffle(code)
        code = code[:120]
        for cat, items in (("code", code), ("continue", cont)):
            questions = [{"question_id": qid + i, "category": cat, "turns": [item[-1]]} for i, item in enumerate(items)]
            qid += len(items)
            write_jsonl(out_dir / f"{cat}_{split}.jsonl", questions, ensure_ascii=True)
            stats[f"{cat}_{split}"] = dict(prompts=len(items), files=len({i[-2] for i in items}))
    write_json(out_dir / "sources.json", {"seed": seed, "files": groups}, end="")
    return stats


def stage_tok(args, s, out, st):
    t0 = time.time()
    root, files = list_corpus()
    train_files, held_files = split_files(files, args.seed, s["heldout_frac"])
    log(f"corpus: {len(files)} files under {root}: {len(train_files)} train, {len(held_files)} held-out")
    tok = train_tokenizer([read_text(root, f) for f in train_files], s["vocab_size"])
    (out / "target").mkdir(parents=True, exist_ok=True)
    save_tokenizer(tok, out / "target")
    mem, tok = tok, load_tokenizer(out)
    for f in train_files[:20]:     # the file on disk must encode exactly like the trained object
        text = read_text(root, f)
        ids = tok.encode(text).ids
        assert ids == mem.encode(text).ids and ids[0] == tok.token_to_id(BOS), f
        assert tok.decode(ids, skip_special_tokens=True) == text, f
    log(f"tokenizer: vocab {tok.get_vocab_size(with_added_tokens=True)}, bos {tok.token_to_id(BOS)}, "
        f"eos {tok.token_to_id(EOS)}")
    tr, he = Corpus(tok, root, train_files), Corpus(tok, root, held_files)
    st["split"] = dict(python_version=sys.version.split()[0], python_full=sys.version, stdlib=str(root),
                       heldout_frac=s["heldout_frac"], train_files=train_files, heldout_files=held_files,
                       train_sha256=sha256_list(train_files), heldout_sha256=sha256_list(held_files),
                       train_tokens=len(tr), heldout_tokens=len(he), train_bytes=tr.n_bytes,
                       heldout_bytes=he.n_bytes)
    log(f"tokens: train {len(tr)} ({tr.n_bytes / len(tr):.2f} bytes/token), held-out {len(he)}")
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    stats = make_prompts(tok, root, held_files, args.seed, out / "prompts")
    log(f"prompts: {stats}")
    for k, v in stats.items():
        if v["prompts"] < 40:
            log(f"WARNING: only {v['prompts']} prompts in {k}")
    return dict(seconds=round(time.time() - t0, 1), prompts=stats)
