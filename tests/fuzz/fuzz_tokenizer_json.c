/* tokenizer.json (infer/text/tokenizer_load.c) and the pipeline it builds. */
#include "tests/fuzz/fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_tokenizer("tokenizer.json", data, size); }
