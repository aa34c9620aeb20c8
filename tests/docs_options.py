#!/usr/bin/env python3
"""README's "Commands at a glance" against the commands themselves: every
option README names for a command must be one its --help lists, and every
default README gives in parentheses right after an option, "`--epochs N`
(200)", must be the default --help states for it.

    python3 tests/docs_options.py README.md BIN_DIR

Prints each mismatch and a count; exits 1 if there is any."""
import re, subprocess, sys

readme, bin_dir = sys.argv[1], sys.argv[2]
text = open(readme, encoding='utf-8').read()
start = text.index('## Commands at a glance')
section = text[start:text.index('\n## ', start + 1)]
# paragraphs: "**spec-x** ..." up to the next command's
blocks = re.split(r'\n\*\*(spec-[a-z]+)\*\*', section)
bad = checked = 0
for name, body in zip(blocks[1::2], blocks[2::2]):
    helptext = subprocess.run([f'{bin_dir}/{name}', '--help'], capture_output=True, text=True).stdout
    if not helptext:
        print(f'{name}: --help printed nothing'); bad += 1; continue
    # each option line of --help and what follows it up to the next option line
    opt_help = {}
    for m in re.finditer(r'^\s+(--[a-z0-9-]+)(.*?)(?=^\s+--[a-z0-9-]|\Z)', helptext, flags=re.M | re.S):
        opt_help.setdefault(m.group(1), m.group(2))
    for opt in sorted(set(re.findall(r'(?<![\w-])(--[a-z0-9][a-z0-9-]*)', body))):
        checked += 1
        if opt not in helptext:
            print(f'README names {name} {opt}, which {name} --help does not list'); bad += 1
    for opt, default in re.findall(r'`(--[a-z0-9-]+)[^`]*` \(([^)]+)\)', body):
        value = re.split(r'[:;,]', default)[0].strip()
        if not re.match(r'^[0-9][0-9.e+-]*$', value): continue
        checked += 1
        h = opt_help.get(opt, '')
        if not re.search(r'default:? ' + re.escape(value) + r'(?![0-9.])', h):
            print(f'README gives {name} {opt} the default {value}; --help says: {" ".join(h.split())[:120]}'); bad += 1
print(f'{checked} README option names and defaults checked against --help, {bad} wrong')
sys.exit(1 if bad else 0)
