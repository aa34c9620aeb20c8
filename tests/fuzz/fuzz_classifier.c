/* spec-train's weights JSON as spec-eval loads it (infer/speculative/classifier.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/speculative/classifier.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Classifier *c = classifier_load(fuzz_file("classifier.json", data, size));
    if (c) {   /* a file that loads runs: its features, its fc1 width */
        ClsNode x[9];
        for (int i = 0; i < 9; i++) x[i] = cls_node(0.5f / (float)(i + 1), 1.0f + (float)i, i + 1, 0.5f, i, 2.0f);
        float conf[9];
        classifier_forward(c, x, 9, conf);
    }
    classifier_free(c);
    return 0;
}
