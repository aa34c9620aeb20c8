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
  self     prompts the target writes itself about topics it lists within broad
           subjects (see "self-written prompts" below; stage selfask of
           tools/models/smollm2_drafts.py, prompts/self.jsonl)

A fifth of the prompts get a second turn (a follow-up such as "Make it shorter"),
so that multi-turn contexts are seen in training too. Everything is drawn with
random.Random(seed): the same machine lists and seed give the same prompts.
Used by tools/models/smollm2_drafts.py (stage "prompts")."""
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


# --------------------------------------------------------------------------- self-written prompts
# The package and docstring prompts above are mostly about software.  To cover
# the rest of what people ask an assistant (science, history, everyday life,
# the arts, roleplay, opinion), the target writes prompts itself, in two rounds
# (tools/models/smollm2_drafts.py, stage "selfask"): it lists topics within broad
# subjects, then writes a question about some of those topics; the rest become
# writing, roleplay and explanation prompts from templates.  Only the subject
# names and the templates below are ours.

SUBJECTS = [
    "astronomy", "biology", "chemistry", "physics", "geology", "ecology", "medicine", "nutrition",
    "psychology", "sociology", "economics", "personal finance", "world history", "ancient civilizations",
    "medieval Europe", "the history of science", "geography", "politics", "law", "philosophy", "ethics",
    "religion", "mythology", "literature", "poetry", "film", "music", "painting", "architecture",
    "photography", "cooking", "gardening", "sports", "travel", "fashion", "education", "parenting",
    "careers", "business management", "marketing", "entrepreneurship", "engineering", "transportation",
    "energy", "climate", "agriculture", "oceans", "animals", "mathematics", "statistics", "linguistics",
    "languages", "the internet", "artificial intelligence", "video games", "board games", "health and fitness",
    "mental health", "home repair", "pets", "space exploration", "inventions", "famous scientists",
]
TOPIC_ASKS = [
    "List 12 specific topics within {s}. Write one topic per line, with no numbering and no explanations.",
    "List 12 things a beginner should learn about {s}, one short phrase per line, with no numbering.",
    "Name 12 famous people, places, events or ideas connected to {s}. One per line, no numbering, "
    "no explanations.",
]
# round one and a half (tools/gpu/smollm2_gpu.py): the same kind of list about each topic found
SUBTOPIC_ASK = "List 12 specific subtopics of {t}, one per line, with no numbering and no explanations."
QUESTION_ASKS = [
    ("qa", "Write one interesting question that a curious student might ask about {t}. "
           "Reply with the question only."),
    ("qa", "Write a question about {t} that needs a detailed answer. Reply with the question only."),
    ("reasoning", "Write a tricky question about {t} that needs careful reasoning to answer. "
                  "Reply with the question only."),
    ("advice", "Write a question a person might ask an assistant for advice about {t}. "
               "Reply with the question only."),
]
ROLES = ["a tour guide", "a museum curator", "a detective", "a chef", "a ship's captain", "a science teacher",
         "a medieval knight", "a sports coach", "a doctor", "a journalist", "a librarian", "a park ranger",
         "an astronaut", "a famous novelist", "a startup founder", "a historian", "a wise old farmer",
         "a radio host", "a travel blogger", "a personal trainer"]
EXPLAINS = ["Explain {t} in simple terms.", "What are the pros and cons of {t}?", "Why does {t} matter?",
            "Describe the history of {t} in a few paragraphs.", "Give five surprising facts about {t}.",
            "Compare {t} and {u}: how are they alike and how do they differ?",
            "What are common misconceptions about {t}?", "Write a step-by-step guide to getting started with {t}."]


def topic_requests():
    """Round one: requests for topics within each subject."""
    return [ask.format(s=s) for s in SUBJECTS for ask in TOPIC_ASKS]


def parse_list(text):
    """One topic per line of the target's list: bullets and numbers stripped, a
    trailing explanation after a colon or dash dropped; 4-60 characters with a
    word in them kept."""
    out = []
    for line in text.splitlines():
        t = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip()
        t = re.split(r"\s*(?::|\s-\s|\s–\s)\s*", t)[0].strip().strip("*").strip()
        if (4 <= len(t) <= 60 and re.search(r"[a-z]{3}", t) and not t.endswith(("?", ":", "."))
                and not re.match(r"(?i)(here|sure|these|i |the \d)", t)):
            out.append(t)
    return out


def question_requests(topics, n, rng):
    """Round two: (category, request) asking the target for a question about n topics."""
    return [(c, a.format(t=t)) for t in rng.sample(topics, min(n, len(topics))) for c, a in [rng.choice(QUESTION_ASKS)]]


# the small target often wraps its question ("What a wonderful question! A student
# might ask: \"...?\"") or answers with chat instead of a question
NOT_A_QUESTION = re.compile(r"(?i)(you like to ask|here to help|how about|what a (?:wonderful|delightful|great)|"
                            r"i'd be|comes to mind|\basking\b|can i help|your question)")


def parse_question(text):
    """The target's question: the quoted question in its first line that has one,
    else that line's last sentence ending with a question mark; 15-300 characters,
    None when there is none or it is chat rather than a question."""
    for line in text.splitlines():
        if "?" not in line:
            continue
        quoted = re.findall(r"[\"“]([^\"“”]{10,}?\?)", line)
        if quoted:
            q = quoted[-1]
        else:
            parts = [x for x in re.split(r"(?<=[.!?])\s+", line) if x.endswith("?")]
            q = parts[-1] if parts else ""
        q = re.sub(r"(?i)^\s*(?:question\s*:\s*|[-*]\s*)", "", q).strip().strip("*").strip()
        if 15 <= len(q) <= 300 and not NOT_A_QUESTION.search(q) and q[0].isupper():
            return q
    return None


def self_prompts(topics, questions, n, rng, first_id, second_turns=0.0):
    """n prompts: the target's own questions (about half), then writing, roleplay and
    explanation prompts from the templates above, each about a topic it listed; a
    second_turns share of them gets a follow-up turn from FOLLOW_UPS."""
    out, seen = [], set()

    def add(cat, text):
        if text not in seen and len(out) < n:
            seen.add(text)
            turns = [text] + ([rng.choice(FOLLOW_UPS)] if second_turns and rng.random() < second_turns else [])
            out.append({"question_id": first_id + len(out), "category": cat, "turns": turns})

    for cat, q in questions[:n // 2]:
        add(cat, q)
    tries = 0
    while len(out) < n and tries < 50 * n:   # the templates can run out of new combinations
        tries += 1
        t, u = rng.sample(topics, 2)
        r = rng.random()
        if r < 0.35:
            add("writing", f"Write {rng.choice(WRITING)} about {t}.")
        elif r < 0.6:
            q = rng.choice(questions)[1] if questions else f"Tell me about {t}."
            add("roleplay", f"Pretend you are {rng.choice(ROLES)}. {q}")
        else:
            add("explain", rng.choice(EXPLAINS).format(t=t, u=u))
    return out
