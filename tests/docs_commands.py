#!/usr/bin/env python3
"""docs/commands.md, and the option tables of docs/train.md (spec-train) and
docs/tokenizer.md (spec-tokenize), against the commands' --help:

1. every option a command's section names in a table row or a usage/example
   line is one that command's --help lists (the rows of "Options shared by the
   decoding commands" count for spec-generate, spec-eval and spec-collect, or
   for the commands a row's "(spec-eval, spec-collect)" names);
2. every default a row states ("default 10", "default: -,-", "`zstd`
   (default)", train.md's default column) is one --help states for that
   option, where --help states one (numbers compared as numbers);
3. every option --help lists appears in the command's section of
   docs/commands.md, in the shared table, or (spec-train, whose section
   defers to it) in train.md's table. Old spellings --help mentions only in
   passing (--batch, --model) are not option lines and so not required.

    python3 tests/docs_commands.py DOCS_DIR BIN_DIR

Prints each mismatch and a count; exits 1 if there is any."""
import re, subprocess, sys

docs, bin_dir = sys.argv[1], sys.argv[2]
OPT = r'(?<![\w-])--[a-z0-9][a-z0-9-]*'
DECODING = ['spec-generate', 'spec-eval', 'spec-collect']
COMMANDS = DECODING + ['spec-train', 'spec-analyze', 'spec-tokenize', 'spec-convert']


def section(path, heading):
    """The lines under heading up to the next heading of its level or above
    (lines in ``` fences are not headings)."""
    out, level, fence = None, 0, False
    for line in open(f'{docs}/{path}', encoding='utf-8').read().split('\n'):
        fence ^= line.startswith('```')
        if line.startswith('#') and not fence:
            n = len(line) - len(line.lstrip('#'))
            if out is not None and n <= level: break
            if line == heading: out, level = [], n
        if out is not None: out.append(line)
    if out is None: sys.exit(f'{path}: no heading "{heading}"')
    return out


def rows(lines):
    """Table rows as lists of cells (an escaped \\| stays in its cell), those
    whose first cell names an option."""
    cells = [[c.strip() for c in re.split(r'(?<!\\)\|', l)[1:-1]] for l in lines if l.startswith('|')]
    return [c for c in cells if re.search(OPT, c[0])]


def code_lines(lines):
    """Usage and example lines (indented or fenced), comments ("#SBATCH") left out."""
    out, fence = [], False
    for l in lines:
        fence ^= l.startswith('```')
        if (fence or l.startswith('    ')) and not l.lstrip().startswith('#'): out.append(l)
    return out


def names(text, name):
    """The options text names, but not another command's ("spec-eval's `--classifier`")."""
    text = re.sub(r"(spec-[a-z]+)(?:'s)? `?--", lambda m: m.group(0) if m.group(1) == name else '', text)
    return set(re.findall(OPT, text))


def defaults(text, name=None):
    """The values text states as defaults: "default 10", "default: -,-",
    "zstd (default)"; "spec-eval, spec-collect default 4096" only for those.
    A word that starts a phrase ("default: its tree is dropped") is no value."""
    text = text.replace('`', '').replace('…', '...')
    vals = []
    for scope, v, after in re.findall(r'((?:spec-[a-z]+,? )*)\bdefault:? ([^\s;:)]+)(.?)', text):
        if (not scope or name in scope) and (number(v) is not None or v.endswith(',') or after in ';:)'):
            vals.append(v.rstrip(','))
    return vals + re.findall(r'(\S+) \(default\)', text)


def number(v):
    try: return float(v)
    except ValueError: return None


def same(a, b):
    return a == b or number(a) is not None and number(a) == number(b)


def help_options(name):
    """--help's text and {option: its description} for each option line
    ("  --top-k K, --top-p P   ..." gives both)."""
    text = subprocess.run([f'{bin_dir}/{name}', '--help'], capture_output=True, text=True).stdout
    opts, cur = {}, []
    for line in text.split('\n'):
        m = re.match(r'\s+(?:-h, )?(--\S.*?)(?:\s{2,}(.*)|$)', line)
        if m:
            cur = re.findall(OPT, m.group(1))
            for o in cur: opts[o] = m.group(2) or ''
        elif line[:1].isspace() and cur:
            for o in cur: opts[o] += ' ' + line.strip()
        else: cur = []
    return text, opts


bad = named_n = checked = 0
def wrong(msg):
    global bad
    print(msg); bad += 1

shared = rows(section('commands.md', '## Options shared by the decoding commands'))
extra = {'spec-train': ('train.md', '## Usage'), 'spec-tokenize': ('tokenizer.md', '### `spec-tokenize`')}
for name in COMMANDS:
    text, opts = help_options(name)
    if not opts:
        wrong(f'{name}: --help lists no options'); continue
    own = section('commands.md', f'## {name}')
    # (where, its lines, its table rows) for each place that documents name's options
    places = [(f'commands.md ## {name}', own, rows(own))]
    if name in DECODING:
        scoped = [r for r in shared if not r[1].startswith('(spec-') or name in r[1].split(')')[0]]
        places.append(('commands.md shared table', [], scoped))
    if name in extra:
        lines = section(*extra[name])
        places.append((' '.join(extra[name]), lines, rows(lines)))
    for where, lines, table in places:
        # 1. the names: table rows, usage and example lines
        for opt in sorted(names(' '.join(' '.join(r) for r in table) + ' ' + ' '.join(code_lines(lines)), name)):
            named_n += 1
            if not re.search(re.escape(opt) + r'(?![\w-])', text):
                wrong(f'{where} names {opt}, which {name} --help does not list')
        # 2. the defaults, a row's meaning split at top-level ";" when it
        # has one part per option ("per turn (default 256); KV cache slots (default 4096)")
        for r in table:
            row_opts = re.findall(OPT, r[0])
            stated = r[-1] if len(r) == 2 else f'(default {r[1]}) {r[2]}'   # train.md: | flag | default | meaning |
            parts = re.split(r';(?![^(]*\))', stated)
            pairs = zip(row_opts, parts) if len(row_opts) > 1 and len(parts) == len(row_opts) else \
                [(o, stated) for o in row_opts]
            for opt, part in pairs:
                has = defaults(opts.get(opt, ''))
                for v in defaults(part, name):
                    if not has: continue   # --help states none to compare with
                    checked += 1
                    if not any(same(v, h) for h in has):
                        wrong(f'{where} gives {name} {opt} the default {v}; --help says {", ".join(has)}')
    # 3. completeness: every option line of --help, somewhere in those places
    mentioned, searched = set(), []
    for where, lines, table in places:
        if where.startswith('commands.md') or name == 'spec-train':
            mentioned |= set(re.findall(OPT, ' '.join(lines) + ' ' + ' '.join(r[0] for r in table)))
            searched.append(where)
    for opt in sorted(set(opts) - mentioned - {'--help'}):
        wrong(f'{name} --help lists {opt}, which {" / ".join(searched)} do not mention')
print(f'{named_n} option names and {checked} defaults in docs/commands.md, train.md, tokenizer.md '
      f'checked against --help, {bad} wrong')
sys.exit(1 if bad else 0)
