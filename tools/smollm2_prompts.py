"""Instruction prompts for training SmolLM2-135M-Instruct's drafts, built from text
that is on this machine and unrelated to the six benchmarks in ../shared:

  debian   package names and one-line descriptions from apt's package lists
           (/var/lib/apt/lists/*_Packages.lz4): what-is, explain, tips, compare,
           write-an-introduction prompts
  pydoc    docstrings of this interpreter's standard library: "complete this
           function" (name, signature and docstring, the shape of a code
           benchmark), "explain / summarise this documentation", "what is module X for"
  topics   Python's own help topics (pydoc_data.topics): explain / summarise
  math     arithmetic word problems from templates with random names and numbers
  writing  short writing tasks (story, poem, email, ...) about subjects drawn
           from the package descriptions

A fifth of the prompts get a second turn (a follow-up such as "Make it shorter"),
so that multi-turn contexts are seen in training too. Everything is drawn with
random.Random(seed): the same machine lists and seed give the same prompts.
Used by tools/smollm2_drafts.py (stage "prompts")."""
import ast
import glob
import os
import random
import re
import subprocess
import sysconfig

NAMES = ["Ava", "Ben", "Carla", "Dmitri", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Luca",
         "Maya", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yusuf", "Zoe"]
ITEMS = [("apples", "bags"), ("pencils", "boxes"), ("stickers", "sheets"), ("cookies", "trays"),
         ("marbles", "jars"), ("books", "shelves"), ("eggs", "cartons"), ("cards", "packs"),
         ("bottles", "crates"), ("flowers", "bunches")]
FOLLOW_UPS = ["Make your answer shorter.", "Explain that to a ten-year-old.", "Give a concrete example.",
              "Rewrite your answer as a bulleted list.", "What are the main drawbacks?",
              "Summarize your answer in one sentence.", "Can you add more detail to the second point?",
              "Now write it in a more formal tone.", "What would you do differently next time?",
              "Translate the first sentence into French."]
WRITING = ["a short story", "a poem", "a persuasive paragraph", "a friendly email to a colleague",
           "a product description", "a short speech", "a diary entry", "a limerick", "a news headline and lead",
           "a haiku", "a thank-you note", "a short dialogue between two friends"]


def debian_packages():
    """(name, synopsis) from the package lists apt already has; no network."""
    out, seen = [], set()
    for f in sorted(glob.glob("/var/lib/apt/lists/*_Packages.lz4")):
        text = subprocess.run(["lz4cat", f], capture_output=True, text=True, check=True).stdout
        name = None
        for line in text.splitlines():
            if line.startswith("Package: "):
                name = line[9:].strip()
            elif line.startswith("Description: ") and name:
                syn = line[13:].strip()
                key = re.sub(r"\(.*?\)", "", syn).strip().lower()
                if len(syn) >= 20 and key not in seen and not re.search(r"(dbgsym|-dev|-doc|-data)$", name):
                    seen.add(key)
                    out.append((name, syn.rstrip(".")))
                name = None
    return out


def stdlib_docs():
    """(qualified name, signature, docstring) of documented functions, and (module,
    docstring) of documented modules, from the stdlib sources (parsed, not imported)."""
    root = sysconfig.get_paths()["stdlib"]
    funcs, mods = [], []
    skip = {"test", "tests", "idlelib", "site-packages", "__pycache__", "encodings", "pydoc_data"}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("config-"))
        for fn in sorted(files):
            if not fn.endswith(".py") or fn.startswith("_sysconfigdata"):
                continue
            path = os.path.join(dirpath, fn)
            mod = os.path.relpath(path, root)[:-3].replace(os.sep, ".").replace(".__init__", "")
            try:
                tree = ast.parse(open(path, encoding="utf-8").read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            doc = ast.get_docstring(tree)
            if doc and len(doc) >= 200 and not mod.startswith("_"):
                mods.append((mod, doc))
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                    d = ast.get_docstring(node)
                    if d and 40 <= len(d) <= 900:
                        funcs.append((f"{mod}.{node.name}", node.name, ast.unparse(node.args), d))
    return funcs, mods


def help_topics():
    try:
        from pydoc_data import topics
    except ImportError:
        return []
    return [(k, v) for k, v in sorted(topics.topics.items()) if len(v) >= 300]


def chunk(text, rng, lo=400, hi=1200):
    text = text.strip()
    if len(text) <= hi:
        return text
    start = rng.randrange(0, len(text) - lo)
    start = text.rfind("\n\n", 0, start) + 1 if text.rfind("\n\n", 0, start) >= 0 else 0
    piece = text[start:start + hi]
    cut = piece.rfind("\n\n")
    return (piece[:cut] if cut >= lo else piece).strip()


def math_problem(rng):
    n1, n2 = rng.sample(NAMES, 2)
    item, box = rng.choice(ITEMS)
    a, b, c = rng.randint(3, 60), rng.randint(2, 12), rng.randint(2, 24)
    price, hours = rng.choice([2, 3, 4, 5, 7.5, 12, 15]), rng.randint(2, 9)
    kinds = [
        f"{n1} has {a} {item}. {n1} buys {b} {box} with {c} {item} in each. How many {item} does {n1} have now?",
        f"{n1} has {a * b} {item} and shares them equally among {b} friends. Then {n1} gets {c} more {item} "
        f"back from each friend. How many {item} does {n1} have at the end?",
        f"A shop sells {item} for ${price} each. {n1} buys {b} and {n2} buys {c}. How much do they spend in total?",
        f"{n1} works {hours} hours a day for {b} days and earns ${price} per hour. {n1} spends ${a} on food. "
        f"How much money is left?",
        f"{n1} reads {c} pages a day. The book has {c * b + a} pages. After {b} days, how many pages are left?",
        f"A train travels {a * 2} km in {b} hours. At the same speed, how far does it travel in {b + hours} hours?",
        f"{n1} is {a} years old. {n2} is {b} years older than half of {n1}'s age. How old is {n2}?",
        f"There are {a + c} students in a class. {a} of them like tea and the rest like coffee. What percentage "
        f"like coffee?",
    ]
    return rng.choice(kinds)


def make_prompts(n, seed):
    rng = random.Random(seed)
    pkgs = debian_packages()
    funcs, mods = stdlib_docs()
    topics = help_topics()

    def deb():
        name, syn = rng.choice(pkgs)
        other = rng.choice(pkgs)
        return rng.choice([
            ("qa", f"What is {name}, and what would someone use it for?"),
            ("qa", f"Explain in simple terms what this software does: {syn}."),
            ("writing", f"Write a short introduction for new users of {name} ({syn})."),
            ("qa", f"Give three practical tips for someone getting started with {name}, which is described as "
                   f"\"{syn}\"."),
            ("reasoning", f"Compare these two tools and say when you would choose each: {name} ({syn}) and "
                          f"{other[0]} ({other[1]})."),
        ])

    def code():
        qual, name, args, doc = rng.choice(funcs)
        body = "\n".join("    " + line if line else "" for line in doc.splitlines())
        return rng.choice([
            ("code", f"def {name}({args}):\n    \"\"\"\n{body}\n    \"\"\"\n"),
            ("code", f"Complete the following Python function.\n\ndef {name}({args}):\n    \"\"\"{doc}\"\"\"\n"),
            ("code", f"Explain what the Python function {qual} does and show a short example of calling it. "
                     f"Its documentation says:\n\n{doc}"),
        ])

    def module():
        mod, doc = rng.choice(mods)
        return rng.choice([
            ("qa", f"What is the Python module {mod} for? Give a short example."),
            ("summary", f"Summarize the following documentation in a few sentences.\n\n{chunk(doc, rng)}"),
        ])

    def topic():
        key, text = rng.choice(topics)
        return rng.choice([
            ("summary", f"Summarize this excerpt from the Python reference manual:\n\n{chunk(text, rng)}"),
            ("qa", f"Explain the Python concept \"{key}\" with an example."),
        ])

    def math():
        return ("math", rng.choice(["", "Solve step by step: ", "Answer the question. "]) + math_problem(rng))

    def writing():
        _, syn = rng.choice(pkgs)
        return ("writing", f"Write {rng.choice(WRITING)} about {syn[0].lower() + syn[1:]}.")

    makers = [(deb, 0.25), (code, 0.2), (module, 0.1), (topic, 0.1), (math, 0.2), (writing, 0.15)]
    out, seen = [], set()
    while len(out) < n:
        r, acc = rng.random(), 0.0
        for fn, w in makers:
            acc += w
            if r < acc:
                break
        cat, text = fn()
        if text in seen:
            continue
        seen.add(text)
        turns = [text]
        if rng.random() < 0.2:
            turns.append(rng.choice(FOLLOW_UPS))
        out.append({"question_id": len(out), "category": cat, "turns": turns})
    return out
