#!/usr/bin/env python3
"""Check relative links (files and #anchors) in Markdown files, with GitHub-style heading slugs
and explicit <a id="..."></a> anchors.  A link into docs/results.md or docs/results_archive.md must
name an explicit anchor: their sections are titled by topic, run and date, and a title that changes
must not break links.

    python3 tests/docs_links.py README.md docs/*.md docs/paper/report.md

Prints each broken link and a count; exits 1 if any is broken."""
import re, sys, os, unicodedata
def slug(h):
    h = re.sub(r'`', '', h.strip()).lower()
    # drop markdown links/emphasis markers
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)
    out = []
    for ch in h:
        cat = unicodedata.category(ch)
        if ch in ' -': out.append('-' if ch == ' ' else ch)
        elif ch == '_' or cat[0] in 'LN': out.append(ch)
    return ''.join(out)
def explicit_anchors(path):
    return set(re.findall(r'<a id="([^"]+)"></a>', open(path, encoding='utf-8').read()))
def anchors(path):
    a, seen = explicit_anchors(path), {}
    incode = False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'): incode = not incode; continue
        if incode: continue
        m = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if m:
            s = slug(m.group(2)); n = seen.get(s, 0); seen[s] = n + 1
            a.add(s if n == 0 else f'{s}-{n}')
    return a
RESULTS = {os.path.normpath('docs/results.md'), os.path.normpath('docs/results_archive.md')}
bad = 0; n = 0
for f in sys.argv[1:]:
    text = open(f, encoding='utf-8').read()
    text_nocode = re.sub(r'```.*?```', '', text, flags=re.S)
    for m in re.finditer(r'!?\[[^\]]*\]\(([^)\s]+)\)', text_nocode):
        url = m.group(1)
        if re.match(r'^[a-z]+:', url): continue
        n += 1
        path, _, frag = url.partition('#')
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            print(f'{f}: missing file {url}'); bad += 1; continue
        if frag:
            if not target.endswith('.md'): print(f'{f}: anchor on non-md {url}'); bad += 1; continue
            if frag not in anchors(target):
                print(f'{f}: missing anchor {url}'); bad += 1
            elif target in RESULTS and frag not in explicit_anchors(target):
                print(f'{f}: {url} names a section title; link to an explicit <a id> anchor of {os.path.basename(target)}'); bad += 1
print(f'{n} relative links checked, {bad} broken'); sys.exit(1 if bad else 0)
