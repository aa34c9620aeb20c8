/* Random-weight LLaMA checkpoints in BF16 for the benchmarks, of two shapes:
 *  - 1B (LLaMA-3.2-1B: hidden 2048, 16 layers, 32 heads, 8 KV heads,
 *    head_dim 64, FFN 8192, vocab 128256, tied embeddings, llama3 RoPE), the
 *    shape tools/experiments/hf_decode_bench.py builds in transformers;
 *  - SmolLM2-135M (hidden 576, 30 layers, 9 heads, 3 KV heads, head_dim 64,
 *    FFN 1536, vocab 49152, tied, RoPE theta 100000): the real model's shape,
 *    for machines where its checkpoint cannot travel (the GPU machine);
 *  - LLaMA-2-7B's, for the GPU alone. */
#ifndef C2T_BENCH_MODEL_H
#define C2T_BENCH_MODEL_H
#include "infer/model/safetensors.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int hidden, ffn, vocab, heads, kv_heads, layers;
    int llama3_rope;   /* LLaMA-3's scaled RoPE, theta 500000; else plain, theta 100000 */
} BenchShape;

static const BenchShape BENCH_1B = {"1B", 2048, 8192, 128256, 32, 8, 16, 1};
static const BenchShape BENCH_SMOLLM2 = {"SmolLM2-135M", 576, 1536, 49152, 9, 3, 30, 0};
/* LLaMA-2-7B (hidden 4096, 32 layers, 32 heads, no GQA, FFN 11008, vocab
 * 32000; written with tied embeddings, so 6.5B parameters, 13 GB in BF16):
 * bench_cuda --7b. */
static const BenchShape BENCH_7B = {"LLaMA-2-7B", 4096, 11008, 32000, 32, 32, 32, 0};

static uint64_t bench_rng = 0x2545F4914F6CDD1DULL;
static inline uint64_t bench_rand(void) {
    bench_rng ^= bench_rng << 13; bench_rng ^= bench_rng >> 7; bench_rng ^= bench_rng << 17;
    return bench_rng;
}
static uint16_t bench_rand_bf16(float scale) {
    float f = ((float)((bench_rand() >> 40) & 0xFFFFFF) / 16777216.0f * 2 - 1) * scale;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* An activation for the product benchmarks: -1 .. 1 in steps of 1/1000. */
static inline float bench_rand_act(void) { return (float)((int)(bench_rand() % 2001) - 1000) / 1000.0f; }

/* Bytes of a rows x cols weight of type t (BF16 or a GGUF block type). */
static inline size_t bench_weight_bytes(DType t, int64_t rows, int64_t cols) {
    return t == DT_BF16 ? (size_t)(rows * cols * 2) : (size_t)(rows * quant_row_bytes(t, cols));
}

/* A rows x cols weight of type t for the product benchmarks: random bytes,
 * BF16 values of magnitude in [2^-7, 2^-5), a block's half-precision scale
 * (and minimum) small and finite; *bytes its size. */
static inline uint8_t *bench_blocks(DType t, int64_t rows, int64_t cols, size_t *bytes) {
    *bytes = bench_weight_bytes(t, rows, cols);
    uint8_t *w = xmalloc(*bytes);
    for (size_t i = 0; i < *bytes; i++) w[i] = (uint8_t)(bench_rand() >> 56);
    if (t == DT_BF16) {
        for (size_t i = 1; i < *bytes; i += 2) w[i] = (uint8_t)(0x3C + (w[i] & 1) * 0x80);
        return w;
    }
    const size_t bb = quant_block_bytes(t);
    int d_at, m_at;
    quant_half_offsets(t, &d_at, &m_at);
    for (size_t b = 0; b < *bytes / bb; b++) {
        const uint16_t h = (uint16_t)(0x1C00 | (bench_rand() >> 54));
        memcpy(w + b * bb + d_at, &h, 2);
        if (m_at >= 0) memcpy(w + b * bb + m_at, &h, 2);
    }
    return w;
}

/* Appends a random BF16 tensor [rows, cols] (cols 0: a norm vector of ones). */
static void bench_add_tensor(StWrite *w, char (*names)[96], int *k, const char *name, int64_t rows, int64_t cols) {
    snprintf(names[*k], 96, "%s", name);
    size_t cnt = (size_t)rows * (cols ? cols : 1);
    uint16_t *d = malloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++) d[i] = cols ? bench_rand_bf16(1.0f / 45.0f) : 0x3F80;
    w[*k] = (StWrite){names[*k], DT_BF16, cols ? 2 : 1, {rows, cols}, d};
    (*k)++;
}

/* Writes config.json + model.safetensors of a random `layers`-layer model of
 * the given shape into a fresh directory under /tmp, whose path goes to dir
 * (char[64]).  Exits with a message on failure (benchmarks only). */
__attribute__((unused)) static void bench_write_model(char *dir, const BenchShape *sh, int layers) {
    strcpy(dir, "/tmp/c2t_benchXXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
    char *cfgp = path_join(dir, "config.json"), *stp = path_join(dir, "model.safetensors");
    FILE *f = fopen(cfgp, "w");
    if (!f) { perror(cfgp); exit(1); }
    fprintf(f, "{\"model_type\":\"llama\",\"hidden_size\":%d,\"intermediate_size\":%d,"
               "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
               "\"vocab_size\":%d,\"rms_norm_eps\":1e-5,\"tie_word_embeddings\":true,"
               "\"torch_dtype\":\"bfloat16\",%s}\n",
            sh->hidden, sh->ffn, layers, sh->heads, sh->kv_heads, sh->vocab,
            sh->llama3_rope ? "\"max_position_embeddings\":131072,\"rope_theta\":500000.0,"
                              "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32.0,"
                              "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                              "\"original_max_position_embeddings\":8192}"
                            : "\"max_position_embeddings\":8192,\"rope_theta\":100000.0");
    fclose(f);

    double t0 = now_seconds();
    int nt = 2 + layers * 9;
    StWrite *w = calloc(nt, sizeof *w);
    char (*names)[96] = calloc(nt, 96);
    int k = 0;
    const int hd = sh->hidden / sh->heads;
    const int H = sh->hidden, FF = sh->ffn, QD = sh->heads * hd, KD = sh->kv_heads * hd;
    bench_add_tensor(w, names, &k, "model.embed_tokens.weight", sh->vocab, H);
    bench_add_tensor(w, names, &k, "model.norm.weight", H, 0);
    for (int l = 0; l < layers; l++) {
        static const char *suffix[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                        "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                                        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
        const int64_t rows[9] = {H, QD, KD, KD, H, H, FF, FF, H}, cols[9] = {0, H, H, H, QD, 0, H, H, FF};
        for (int j = 0; j < 9; j++) {
            char p[96];
            snprintf(p, sizeof p, "model.layers.%d.%s.weight", l, suffix[j]);
            bench_add_tensor(w, names, &k, p, rows[j], cols[j]);
        }
    }
    if (st_write(stp, w, k)) die_err("bench");
    for (int i = 0; i < k; i++) free((void *)w[i].data);
    free(w); free(names);
    fprintf(stderr, "wrote a random %d-layer %s-shape BF16 checkpoint in %.1fs\n", layers, sh->name,
            now_seconds() - t0);
    free(cfgp); free(stp);
}

/* Removes what bench_write_model wrote (a loaded model keeps its mapping). */
__attribute__((unused)) static void bench_remove_model(const char *dir) {
    char *cfgp = path_join(dir, "config.json"), *stp = path_join(dir, "model.safetensors");
    unlink(stp); unlink(cfgp); rmdir(dir);
    free(cfgp); free(stp);
}
#endif
