#!/bin/sh
# make demo: the README's first command.  Until the decoding loop lands it
# runs greedy generation on the test checkpoint.
set -eu
cd "$(dirname "$0")/.."
echo "greedy generation, tests/ckpt/llama3_f32, prompt ids 1,21,208,255,244,151,37:"
bin/spec-generate --model tests/ckpt/llama3_f32 --ids 1,21,208,255,244,151,37 --max-new-tokens 24
