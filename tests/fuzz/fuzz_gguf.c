/* A GGUF file (infer/model/gguf.c): metadata, string arrays, every tensor
 * dequantised. */
#include "tests/fuzz/fuzz.h"
#include "infer/model/gguf.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Gguf *g = gguf_open(fuzz_file("model.gguf", data, size));
    if (!g) return 0;
    for (int i = 0; i < gguf_n_kv(g); i++) {
        const GgufKV *kv = gguf_kv(g, i);
        const char *s;
        uint64_t n;
        double d;
        for (uint64_t j = 0; j < kv->n && j < 64; j++) { gguf_arr_str(kv, j, &s, &n); gguf_arr_num(kv, j, &d); }
    }
    for (int i = 0; i < gguf_n_tensors(g); i++) {
        const GgufTensor *t = gguf_tensor(g, i);
        uint64_t n = (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        if (n > (1u << 24)) continue;   /* a valid huge tensor is not a parser bug */
        float *v = malloc(sizeof(float) * n);
        if (v) gguf_tensor_f32(g, t, v);
        free(v);
    }
    gguf_close(g);
    return 0;
}
