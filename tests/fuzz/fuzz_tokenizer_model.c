/* A SentencePiece tokenizer.model (infer/text/sentencepiece_model.c) and
 * the pipeline it builds (sentencepiece.c). */
#include "tests/fuzz/fuzz_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_tokenizer("tokenizer.model", data, size); }
