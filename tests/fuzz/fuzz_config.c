/* config.json of a checkpoint (infer/model/config.c). */
#include "tests/fuzz/fuzz.h"
#include "infer/model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ModelConfig c;
    if (config_load(fuzz_file("config.json", data, size), &c) == 0) {
        float inv[512];
        if (c.head_dim > 0 && c.head_dim <= 1024) config_inv_freq(&c, inv);
    }
    return 0;
}
