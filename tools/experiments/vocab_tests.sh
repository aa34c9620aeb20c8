#!/bin/sh
# llama.cpp's own tokenizer test cases against ours: the vocabulary-only
# GGUFs in llama.cpp's models/ (ggml-vocab-*.gguf with their .inp cases and
# .out ids, vendored in the sdist llama-cpp-python==0.3.36), each converted
# by spec-convert --tokenizer-only and every case encoded by spec-tokenize
# --no-bos.  Vocabularies whose tokenizer spec-convert refuses are listed
# with its line.  Exits 1 on any difference; a few seconds.
#
#   tools/experiments/vocab_tests.sh
. "$(dirname "$0")/lib.sh"
SDIST=$(llamacpp_sdist)
need_bins spec-convert spec-tokenize
D=build/vocab-tests
rm -rf "$D" && mkdir -p "$D"
tar xzf "$SDIST" -C "$D" --strip-components=4 --wildcards "llama_cpp_python-$LLAMACPP_VER/vendor/llama.cpp/models/ggml-vocab-*"
exec python3 tools/experiments/vocab_tests.py "$D"
