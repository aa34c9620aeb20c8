#!/bin/sh
# The documentation against the tree: every relative link in README and
# docs/ resolves (file and #anchor), README's commands at a glance name
# only options the commands have, with the defaults their --help states, and
# docs/commands.md (with train.md's and tokenizer.md's option tables) names
# every option of each command's --help, no other, with its defaults.
# PASS/FAIL lines for tests/run.sh; SKIP without python3.
cd "$(dirname "$0")/.."
BIN=${C2T_BIN:-bin}
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP test_docs_links: no python3"; echo "SKIP test_readme_options_match_help: no python3"
    echo "SKIP test_docs_options_match_help: no python3"; exit 0
fi
out=$(python3 tests/docs_links.py README.md docs/*.md docs/paper/report.md 2>&1)
if [ $? -eq 0 ]; then echo "PASS test_docs_links"; echo "# $(echo "$out" | tail -1)"
else echo "FAIL test_docs_links: $(echo "$out" | head -5 | tr '\n' ';')"; fi
out=$(python3 tests/docs_options.py README.md "$BIN" 2>&1)
if [ $? -eq 0 ]; then echo "PASS test_readme_options_match_help"; echo "# $(echo "$out" | tail -1)"
else echo "FAIL test_readme_options_match_help: $(echo "$out" | head -8 | tr '\n' ';')"; fi
out=$(python3 tests/docs_commands.py docs "$BIN" 2>&1)
if [ $? -eq 0 ]; then echo "PASS test_docs_options_match_help"; echo "# $(echo "$out" | tail -1)"
else echo "FAIL test_docs_options_match_help: $(echo "$out" | head -8 | tr '\n' ';')"; fi
exit 0
