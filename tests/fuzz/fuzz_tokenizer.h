/* What the two tokenizer harnesses share: load the input as a tokenizer
 * file, then run the pipeline it builds (encode a few strings, decode the
 * low ids). */
#ifndef C2T_FUZZ_TOKENIZER_H
#define C2T_FUZZ_TOKENIZER_H
#include "tests/fuzz/fuzz.h"
#include "infer/text/tokenizer.h"
#include <stdlib.h>
#include <string.h>

static const char *const TEXTS[] = {"Hello, world! 123  4567", "  tabs\tand\nnewlines ", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                                    "<s>special</s><|im_start|>", ""};

/* Loads the input as a tokenizer file called name, then runs it. */
static int fuzz_tokenizer(const char *name, const uint8_t *data, size_t size) {
    Tokenizer *t = tokenizer_load(fuzz_file(name, data, size));
    if (!t) return 0;
    for (size_t i = 0; i < sizeof TEXTS / sizeof *TEXTS; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode_ex(t, TEXTS[i], strlen(TEXTS[i]), TOK_ADD_SPECIAL, &ids, &n) == 0) {
            free(tokenizer_decode(t, ids, n, 0));
            free(ids);
        }
    }
    int32_t some[64];
    for (int i = 0; i < 64; i++) some[i] = i;
    free(tokenizer_decode(t, some, 64, 1));
    tokenizer_free(t);
    return 0;
}
#endif
