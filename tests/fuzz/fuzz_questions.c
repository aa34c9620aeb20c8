/* question.jsonl (infer/text/questions.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/text/questions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    QuestionSet *q = questions_load(fuzz_file("question.jsonl", data, size));
    if (q) {
        questions_keep_first(q, 3);
        questions_free(q);
    }
    return 0;
}
