/* A safetensors file: header JSON, dtypes, shapes, offsets
 * (infer/model/checkpoint.c, safetensors.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    SafeTensors *st = st_open(fuzz_file("model.safetensors", data, size));
    if (st) {
        /* touch what a loader asks for */
        st_find(st, "model.embed_tokens.weight");
        st_get(st, "model.norm.weight", 8, 0);
        st_close(st);
    }
    return 0;
}
