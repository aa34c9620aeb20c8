#!/bin/sh
# Qwen2.5-Coder's tokenizer, ours against the references, on the strings of
# tests/golden/tokenizer/qwen2_strings.json (code, digit and whitespace runs,
# NFC, contractions, ChatML prompts) and the chat prompts of
# tests/golden/tokenizer/chat_qwen_golden.json:
#   (a) bin/spec-tokenize on MODEL against the `tokenizers` library on
#       MODEL/tokenizer.json (specials parsed, specials as text, decode);
#   (b) against llama.cpp's llama-tokenize on the original GGUF (built by
#       tools/experiments/llamacpp.sh: several minutes on 2 cores, once);
#   (c) spec-tokenize --template auto against transformers'
#       apply_chat_template(add_generation_prompt=True) on MODEL.
# Prints each comparison's strings and differences; exits 1 on any
# difference, 2 when MODEL (make qwen) is missing.  About 7 minutes on 2
# cores (llama-tokenize loads the vocabulary once per string).
#
#   tools/experiments/qwen_tokenizer.sh [MODEL [GGUF]]
#   WRITE_GOLDEN=1 tools/experiments/qwen_tokenizer.sh   also rewrites
#       tests/golden/tokenizer/qwen2_llamacpp.json.zst (llama.cpp's ids, which
#       tests/test_tokenizer.c compares ours on MODEL with)
#       MODEL  default models/qwen2.5-coder-1.5b-instruct (make qwen)
#       GGUF   default models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# Needs python3 with tokenizers, transformers (tools/requirements.txt) and gguf.
# tools/experiments/qwen_tokenizer.py --from-gguf DIR writes a stand-in
# tokenizer folder from the GGUF, to try this before make qwen exists.
. "$(dirname "$0")/lib.sh"
MODEL=${1:-models/qwen2.5-coder-1.5b-instruct}
GGUF=${2:-models/download/qwen/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
if [ ! -f "$MODEL/tokenizer.json" ]; then
    echo "qwen_tokenizer: $MODEL/tokenizer.json absent (make qwen converts the GGUF)" >&2
    exit 2
fi
[ -f "$GGUF" ] || { echo "qwen_tokenizer: $GGUF absent" >&2; exit 2; }
make --no-print-directory -j2 bin/spec-tokenize >&2
LLAMA_BIN=$(tools/experiments/llamacpp.sh)
exec python3 tools/experiments/qwen_tokenizer.py --model "$MODEL" --gguf "$GGUF" \
    --llama-tokenize "$LLAMA_BIN/llama-tokenize" ${WRITE_GOLDEN:+--write-golden}
