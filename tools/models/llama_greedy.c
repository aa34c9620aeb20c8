/* Greedy answers, with the target's final features, from llama.cpp decoding
 * many sequences together: the training-data generator of
 * tools/models/smollm2_drafts.py (answers stage).  Not part of the toolkit's build:
 * the script compiles it against the libllama that tools/experiments/llamacpp.sh builds
 * from the PyPI sdist.
 *
 * Why llama.cpp: torch's batched generation ran at ~21 answer tokens/s on two
 * cores; our runtime decodes one sequence at a time.  llama.cpp batches
 * sequences (continuous batching: a slot whose answer ends takes the next
 * prompt in a later decode call), so decoding runs near its prompt-processing
 * rate.  The same forward passes give the features (the hidden state after
 * the final RMSNorm, llama.cpp's "embeddings" with no pooling) of every
 * prompt position and every answer token fed back, so no second pass is
 * needed.  Greedy = argmax of the logits, computed here (no sampler).
 *
 *   llama_greedy MODEL.gguf IN OUT [--parallel N] [--max-new M] [--threads T] [--features 0|1]
 *                [--kv f16|f32]
 *
 * IN: one prompt per line, "key n id_1 .. id_n" (token ids; key without
 * spaces).  OUT (appended, one line per finished answer, flushed after its
 * features): "key finished n_feat offset m a_1 .. a_m", finished = 1 when
 * the answer ended with an end-of-generation token (included in a_*), 0 when
 * cut at M tokens; OUT.feat holds n_feat rows of BF16 features (hidden size
 * each) from byte offset: the prompt's positions, then each answer token that
 * was fed back (all but the last).  Keys already in OUT are skipped, so a
 * killed run resumes (a torn last line and features past the last complete
 * line are cut first).  --features 0: answers only (no features, logits of a
 * prompt's last position alone: a plain greedy reference, n_feat 0).  --kv:
 * the KV cache's type (default f16, llama.cpp's own; f32 keeps K and V as
 * our runtime's default cache does). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "llama.h"

typedef struct { char key[128]; int n; int *ids; } Prompt;
typedef struct { int active; Prompt *p; int pos; int n_ans; int *ans; int next; int n_feat; uint16_t *feat; } Slot;

static void quiet(enum ggml_log_level level, const char *text, void *user) { (void)level; (void)text; (void)user; }

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void die(const char *what, const char *path) { fprintf(stderr, "llama_greedy: %s %s\n", what, path); exit(1); }

static int read_prompts(const char *path, Prompt **out) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open", path);
    int cap = 256, n = 0;
    Prompt *ps = malloc(cap * sizeof *ps);
    Prompt p;
    while (fscanf(f, "%127s %d", p.key, &p.n) == 2) {
        if (p.n <= 0 || p.n > 1 << 20) die("bad prompt length in", path);
        p.ids = malloc(p.n * sizeof(int));
        for (int i = 0; i < p.n; i++)
            if (fscanf(f, "%d", &p.ids[i]) != 1) die("truncated prompt in", path);
        if (n == cap) ps = realloc(ps, (cap *= 2) * sizeof *ps);
        ps[n++] = p;
    }
    fclose(f);
    *out = ps;
    return n;
}

/* Resume: keep OUT's complete lines (a kill can tear the last one) and
 * return their keys. */
static int repair_and_list(const char *out_path, char ***keys_out) {
    char **keys = NULL; int nk = 0, cap = 0;
    long keep = 0;
    FILE *f = fopen(out_path, "r");
    if (f) {
        static char line[1 << 20];
        while (fgets(line, sizeof line, f)) {
            long len = (long)strlen(line);
            char k[128];
            if (line[len - 1] != '\n' || sscanf(line, "%127s", k) != 1) break;    /* torn */
            if (nk == cap) keys = realloc(keys, (cap = cap ? 2 * cap : 256) * sizeof *keys);
            keys[nk++] = strdup(k);
            keep += len;
        }
        fclose(f);
        if (truncate(out_path, keep) != 0) die("cannot truncate", out_path);
    }
    *keys_out = keys;
    return nk;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static uint16_t to_bf16(float x) {   /* round to nearest even; features are finite */
    uint32_t u; memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: llama_greedy MODEL.gguf IN OUT [--parallel N] [--max-new M] [--threads T]\n"); return 2; }
    int par = 32, max_new = 256, threads = 2, features = 1;
    enum ggml_type kv = GGML_TYPE_F16;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--parallel")) par = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-new")) max_new = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--features")) features = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kv") && (!strcmp(argv[i + 1], "f16") || !strcmp(argv[i + 1], "f32")))
            kv = argv[i + 1][1] == '1' ? GGML_TYPE_F16 : GGML_TYPE_F32;
        else { fprintf(stderr, "llama_greedy: unknown option %s\n", argv[i]); return 2; }
    }
    char feat_path[4096];
    snprintf(feat_path, sizeof feat_path, "%s.feat", argv[3]);
    Prompt *ps; int np = read_prompts(argv[2], &ps);
    char **done_keys; int n_done = repair_and_list(argv[3], &done_keys);
    int longest = 0, todo = 0;
    for (int i = 0; i < np; i++) {
        if (ps[i].n > longest) longest = ps[i].n;
        for (int k = 0; k < n_done; k++) if (!strcmp(done_keys[k], ps[i].key)) { ps[i].n = 0; break; }
        if (ps[i].n) todo++;
    }

    llama_backend_init();
    llama_log_set(quiet, NULL);   /* NULL would mean llama.cpp's own printer */
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) die("cannot load", argv[1]);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab), hidden = llama_model_n_embd(model);
    int per_seq = longest + max_new + 8;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_seq_max = par;
    cp.n_ctx = (uint32_t)per_seq * par;
    cp.n_batch = 4 * longest + par;     /* up to four whole prompts plus every slot's next token */
    cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.kv_unified = false;
    cp.type_k = cp.type_v = kv;
    cp.embeddings = features;
    cp.pooling_type = LLAMA_POOLING_TYPE_NONE;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llama_greedy: cannot create a context of %u tokens\n", cp.n_ctx); return 1; }
    llama_memory_t mem = llama_get_memory(ctx);
    struct llama_batch batch = llama_batch_init(cp.n_batch, 0, 1);

    /* the features file ends where the last complete line's features end */
    long long feat_rows = 0;
    {
        FILE *o = fopen(argv[3], "r");
        static char line[1 << 20];   /* a line holds at most max_new ids */
        if (o) {
            while (fgets(line, sizeof line, o)) {
                char k[128]; int fin, nf; long long off;
                if (sscanf(line, "%127s %d %d %lld", k, &fin, &nf, &off) == 4 && off / (2LL * hidden) + nf > feat_rows)
                    feat_rows = off / (2LL * hidden) + nf;
                while (!strchr(line, '\n') && fgets(line, sizeof line, o)) {}
            }
            fclose(o);
        }
        FILE *t = fopen(feat_path, "a");
        if (!t) die("cannot write", feat_path);
        fclose(t);
        if (truncate(feat_path, feat_rows * 2 * hidden) != 0) die("cannot truncate", feat_path);
    }
    FILE *out = fopen(argv[3], "a"), *feat = fopen(feat_path, "a");
    if (!out) die("cannot write", argv[3]);
    if (!feat) die("cannot write", feat_path);

    Slot *slots = calloc(par, sizeof *slots);
    for (int s = 0; s < par; s++) {
        slots[s].ans = malloc((max_new + 1) * sizeof(int));
        slots[s].feat = malloc((size_t)per_seq * hidden * sizeof(uint16_t));
    }
    int next_prompt = 0, done = 0;
    long answer_tokens = 0;
    double t0 = now(), last_report = t0;
    for (;;) {
        batch.n_tokens = 0;
        int admitted = 0;   /* a few new prompts per call keeps calls short */
        for (int s = 0; s < par; s++) {
            Slot *sl = &slots[s];
            if (!sl->active && admitted < 4) {
                while (next_prompt < np && ps[next_prompt].n == 0) next_prompt++;
                if (next_prompt == np) continue;
                sl->active = 1; sl->p = &ps[next_prompt++]; sl->n_ans = 0; sl->n_feat = 0; admitted++;
                llama_memory_seq_rm(mem, s, -1, -1);
                for (int i = 0; i < sl->p->n; i++) {
                    int b = batch.n_tokens++;
                    batch.token[b] = sl->p->ids[i]; batch.pos[b] = i;
                    batch.n_seq_id[b] = 1; batch.seq_id[b][0] = s; batch.logits[b] = features || i == sl->p->n - 1;
                }
                sl->pos = sl->p->n;
                sl->next = batch.n_tokens - sl->p->n;   /* first of this slot's outputs */
            } else if (sl->active) {
                int b = batch.n_tokens++;
                batch.token[b] = sl->ans[sl->n_ans - 1]; batch.pos[b] = sl->pos++;
                batch.n_seq_id[b] = 1; batch.seq_id[b][0] = s; batch.logits[b] = 1;
                sl->next = b;
            }
        }
        if (batch.n_tokens == 0) break;
        int rc = llama_decode(ctx, batch);
        if (rc != 0) { fprintf(stderr, "llama_greedy: llama_decode failed (%d)\n", rc); return 1; }
        for (int s = 0; s < par; s++) {
            Slot *sl = &slots[s];
            if (!sl->active) continue;
            int first = sl->next, last = sl->n_ans == 0 ? first + sl->p->n - 1 : first;
            for (int b = first; features && b <= last; b++) {
                const float *e = llama_get_embeddings_ith(ctx, b);
                for (int j = 0; j < hidden; j++) sl->feat[(size_t)sl->n_feat * hidden + j] = to_bf16(e[j]);
                sl->n_feat++;
            }
            int tok = argmax(llama_get_logits_ith(ctx, last), n_vocab);
            sl->ans[sl->n_ans++] = tok;
            answer_tokens++;
            int eog = llama_vocab_is_eog(vocab, tok);
            if (eog || sl->n_ans == max_new) {
                if (fwrite(sl->feat, sizeof(uint16_t) * hidden, sl->n_feat, feat) != (size_t)sl->n_feat || fflush(feat))
                    die("cannot write", feat_path);
                fprintf(out, "%s %d %d %lld %d", sl->p->key, eog, sl->n_feat, feat_rows * 2 * hidden, sl->n_ans);
                for (int i = 0; i < sl->n_ans; i++) fprintf(out, " %d", sl->ans[i]);
                fputc('\n', out);
                if (fflush(out)) die("cannot write", argv[3]);
                feat_rows += sl->n_feat;
                sl->active = 0;
                done++;
            }
        }
        double t = now();
        if (t - last_report > 10 || done == todo) {
            double rate = answer_tokens / (t - t0), eta = done ? (t - t0) / done * (todo - done) : 0;
            fprintf(stderr, "\rllama_greedy: %d/%d answers, %.0f answer tok/s, elapsed %.0fs, ETA %.0fs   ",
                    done, todo, rate, t - t0, eta);
            last_report = t;
        }
    }
    fprintf(stderr, "\n");
    fclose(out);
    fclose(feat);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
