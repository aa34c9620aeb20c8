/* spec-train's weights JSON as spec-eval loads it (infer/speculative/classifier.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/speculative/classifier.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Classifier *c = classifier_load(fuzz_file("classifier.json", data, size));
    classifier_free(c);
    return 0;
}
