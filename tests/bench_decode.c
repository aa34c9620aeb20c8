/* Single-token decode speed on a random-weight LLaMA of 1B shape in BF16
 * (LLaMA-3.2-1B: hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192,
 * vocab 128256, tied embeddings), next to the memory-bandwidth bound:
 * weight bytes read per token ÷ copy bandwidth measured in the same run.
 * The checkpoint is written to /tmp at bench time and deleted after. */
#include "infer/model/llama.h"
#include "tests/bench_model.h"
#include "kernels/base/util.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
    int layers = 16, tokens = 16;
    if (argc > 1) layers = atoi(argv[1]);   /* smaller shapes for a quick look */
    const int64_t V = B1_VOCAB;
    char dir[64];
    bench_write_1b(dir, layers);

    double t0;
    LlamaModel *m = llama_load(dir, &cpu_backend);
    if (!m) die_err("bench_decode");
    bench_remove_1b(dir);   /* the mapping keeps the data */
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
