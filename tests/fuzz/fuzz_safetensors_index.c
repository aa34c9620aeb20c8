/* A sharded checkpoint's model.safetensors.index.json (weight_map, shard
 * names) next to two small valid shards (infer/model/checkpoint.c): the
 * index names files, so a lying one must not reach outside what it may open. */
#include "tests/fuzz/fuzz.h"
#include "infer/model/safetensors.h"

static void write_shards(void) {
    static int done;
    if (done) return;
    done = 1;
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4] = {1, 1, 1, 1};
    char path[256];
    StWrite wa = {"model.embed_tokens.weight", DT_F32, 2, {2, 4}, a};
    StWrite wb = {"model.norm.weight", DT_F32, 1, {4}, b};
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", fuzz_dir());
    if (st_write(path, &wa, 1)) abort();
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", fuzz_dir());
    if (st_write(path, &wb, 1)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_shards();
    fuzz_file("model.safetensors.index.json", data, size);
    SafeTensors *st = st_open(fuzz_dir());
    if (st) {
        const StTensor *t = st_get(st, "model.embed_tokens.weight", 2, 4);
        if (t) st_file_of(st, t);
        st_get(st, "model.norm.weight", 4, 0);
        st_close(st);
    }
    return 0;
}
