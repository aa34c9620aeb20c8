/* Single-token decode speed on a random-weight LLaMA of 1B shape in BF16
 * (LLaMA-3.2-1B: hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192,
 * vocab 128256, tied embeddings), next to the memory-bandwidth bound:
 * weight bytes read per token ÷ copy bandwidth measured in the same run.
 * The checkpoint is written to /tmp at bench time and deleted after. */
#include "infer/llama.h"
#include "infer/util.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t s = 0x2545F4914F6CDD1DULL;
static uint16_t rand_bf16(float scale) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    float f = ((float)((s >> 40) & 0xFFFFFF) / 16777216.0f * 2 - 1) * scale;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* Copy bandwidth (STREAM convention: bytes read + bytes written per second)
 * of a 512 MiB memcpy split over all threads; best of 5. */
static double copy_bandwidth(void) {
    size_t n = 512u << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n); memset(b, 2, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), id = omp_get_thread_num();
            size_t chunk = n / nt;
            memcpy(b + id * chunk, a + id * chunk, chunk);
        }
        double bw = 2.0 * n / (now_seconds() - t0);
        if (bw > best) best = bw;
    }
    free(a); free(b);
    return best;
}

/* Appends a random BF16 tensor [rows, cols] (cols 0: a norm vector of ones). */
static void add_tensor(StWrite *w, char (*names)[96], int *k, const char *name, int64_t rows, int64_t cols) {
    snprintf(names[*k], 96, "%s", name);
    size_t cnt = (size_t)rows * (cols ? cols : 1);
    uint16_t *d = malloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++) d[i] = cols ? rand_bf16(1.0f / 45.0f) : 0x3F80;
    w[*k] = (StWrite){names[*k], DT_BF16, cols ? 2 : 1, {rows, cols}, d};
    (*k)++;
}
#define ADD(nm, r, c) add_tensor(w, names, &k, nm, r, c)

int main(int argc, char **argv) {
    int layers = 16, tokens = 16;
    if (argc > 1) layers = atoi(argv[1]);   /* smaller shapes for a quick look */
    const int64_t H = 2048, FF = 8192, V = 128256, NH = 32, NKV = 8, HD = 64;
    char dir[] = "/tmp/c2t_bench1bXXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char *cfgp = path_join(dir, "config.json"), *stp = path_join(dir, "model.safetensors");
    FILE *f = fopen(cfgp, "w");
    fprintf(f, "{\"model_type\":\"llama\",\"hidden_size\":%lld,\"intermediate_size\":%lld,"
               "\"num_hidden_layers\":%d,\"num_attention_heads\":%lld,\"num_key_value_heads\":%lld,"
               "\"vocab_size\":%lld,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,"
               "\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"max_position_embeddings\":131072,"
               "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32.0,\"low_freq_factor\":1.0,"
               "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}\n",
            (long long)H, (long long)FF, layers, (long long)NH, (long long)NKV, (long long)V);
    fclose(f);

    double t0 = now_seconds();
    int nt = 2 + layers * 9;
    StWrite *w = calloc(nt, sizeof *w);
    char (*names)[96] = calloc(nt, 96);
    int k = 0;
    ADD("model.embed_tokens.weight", V, H);
    ADD("model.norm.weight", H, 0);
    for (int l = 0; l < layers; l++) {
        char p[96];
#define L(suffix, r, c) snprintf(p, sizeof p, "model.layers.%d.%s", l, suffix); ADD(p, r, c)
        L("input_layernorm.weight", H, 0);
        L("self_attn.q_proj.weight", NH * HD, H);
        L("self_attn.k_proj.weight", NKV * HD, H);
        L("self_attn.v_proj.weight", NKV * HD, H);
        L("self_attn.o_proj.weight", H, NH * HD);
        L("post_attention_layernorm.weight", H, 0);
        L("mlp.gate_proj.weight", FF, H);
        L("mlp.up_proj.weight", FF, H);
        L("mlp.down_proj.weight", H, FF);
    }
    if (st_write(stp, w, k)) die_err("bench_decode");
    for (int i = 0; i < k; i++) free((void *)w[i].data);
    free(w); free(names);
    fprintf(stderr, "wrote a random %d-layer 1B-shape BF16 checkpoint in %.1fs\n", layers, now_seconds() - t0);

    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_decode");
    unlink(stp); unlink(cfgp); rmdir(dir);   /* the mapping keeps the data */
    LlamaState *st = llama_state_new(m, 64);
    int prompt[8] = {128000, 791, 4062, 14198, 39935, 35308, 927, 279}, pos[8];
    for (int i = 0; i < 8; i++) pos[i] = i;
    llama_forward(st, prompt, pos, 8, NULL, LOGITS_LAST);
    llama_commit(st, NULL, 8);
    int tok = 1000;
    /* one warm-up token pages the weights in */
    int p = st->n_past;
    llama_forward(st, &tok, &p, 1, NULL, LOGITS_LAST);
    llama_commit(st, NULL, 1);
    t0 = now_seconds();
    for (int i = 0; i < tokens; i++) {
        p = st->n_past;
        llama_forward(st, &tok, &p, 1, NULL, LOGITS_LAST);
        llama_commit(st, NULL, 1);
        cpu_backend.argmax(st->logits, 1, (int)V, &tok);
    }
    double dt = now_seconds() - t0, tps = tokens / dt;
    double bytes = (double)llama_weight_bytes(m), bw = copy_bandwidth();
    double bound = bw / bytes;
    printf("decode 1B-shape BF16 (%d layers, %d threads): %.2f tokens/s\n", layers, omp_get_max_threads(), tps);
    printf("weights read per token %.2f GB; copy bandwidth %.2f GB/s (read+write, STREAM convention)\n",
           bytes / 1e9, bw / 1e9);
    printf("bandwidth bound %.2f tokens/s -> %.0f%% of bound (aim >= 60%%)\n", bound, 100 * tps / bound);
    llama_state_free(st);
    llama_free(m);
    return 0;
}
