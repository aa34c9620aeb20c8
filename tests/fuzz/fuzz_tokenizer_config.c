/* tokenizer_config.json next to a valid tokenizer.json: special-token names,
 * flags and the chat_template string the template guess reads
 * (infer/text/tokenizer_load.c, infer/text/chat.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/text/chat.h"
#include "infer/text/tokenizer.h"

static const char *tokenizer_json(void) {
    static char path[256];
    if (!path[0]) {
        size_t n;
        char *txt = read_text_file("tests/golden/tokenizer/bytelevel_llama3.json", &n);
        if (!txt) { fprintf(stderr, "run from the repository root\n"); abort(); }
        snprintf(path, sizeof path, "%s", fuzz_file("tokenizer.json", (const uint8_t *)txt, n));
        free(txt);
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *tok_path = tokenizer_json();
    fuzz_file("tokenizer_config.json", data, size);
    Tokenizer *t = tokenizer_load(tok_path);
    if (t) {
        ChatTemplate ct;
        char why[256];
        if (chat_template_guess(t, fuzz_dir(), &ct, why, sizeof why) == 0) {
            const char *user = "hi";
            int32_t *ids = NULL;
            size_t n = 0;
            if (chat_encode(t, ct, chat_default_system(ct), &user, NULL, 1, &ids, &n) == 0) free(ids);
        }
        tokenizer_free(t);
    }
    return 0;
}
