/* The LLaMA runtime against Hugging Face transformers (goldens written by
 * tools/golden/make_test_checkpoints.py) and against itself: tree attention
 * equals decoding each root-to-node path, KV keep equals recomputation. */
#include "tests/harness.h"
#include "infer/model/generate.h"
#include "infer/model/gguf.h"
#include "infer/model/llama.h"
#include "infer/text/chat.h"
#include "infer/text/questions.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

static const Backend *be = &cpu_backend;

typedef struct {
    SafeTensors *st;
    const StTensor *ids, *logits, *hidden, *gen_prompt, *gen_ids, *native;
} Golden;

static int golden_open(Golden *g, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/golden/%s.safetensors", name);
    g->st = st_open(path);
    if (!g->st) return -1;
    g->ids = st_find(g->st, "input_ids");
    g->logits = st_find(g->st, "logits");
    g->hidden = st_find(g->st, "hidden");
    g->gen_prompt = st_find(g->st, "gen_prompt");
    g->gen_ids = st_find(g->st, "gen_ids");
    g->native = st_find(g->st, "logits_native");
    return g->ids && g->logits && g->hidden && g->gen_prompt && g->gen_ids ? 0 : -1;
}

static int *ids_of(const StTensor *t, int *n) {
    *n = (int)t->shape[0];
    int *v = xmalloc(sizeof(int) * *n);
    for (int i = 0; i < *n; i++) v[i] = (int)((const int64_t *)t->data)[i];
    return v;
}


/* Bound of the runtime's logits against a float32 reference computed on the
 * same stored weights (any storage dtype): |Δ| ≤ 1e-4 · max|logit|. */
#define PARITY_REL 1e-4f
/* Against the reference run natively in the storage dtype (what users see in
 * torch with half precision) rounding of activations dominates; documented
 * bound: F16 ≤ 1e-2, BF16 ≤ 5e-2 of max|logit| (measured 1.4e-3 / 8.5e-3). */
#define NATIVE_REL_F16 1e-2f
#define NATIVE_REL_BF16 5e-2f

/* Greedy ids equal transformers' generate for every gen_prompt[.k] / gen_ids[.k]
 * pair of the golden. */
static void generate_cases(LlamaModel *m, const Golden *g, const char *name) {
    for (int k = 0;; k++) {
        char pn[32] = "gen_prompt", gn[32] = "gen_ids";
        if (k) { snprintf(pn, sizeof pn, "gen_prompt.%d", k); snprintf(gn, sizeof gn, "gen_ids.%d", k); }
        const StTensor *tp = st_find(g->st, pn), *tg = st_find(g->st, gn);
        if (!tp || !tg) { CHECK(k > 0, "%s: golden has no generate case", name); return; }
        int np, ng;
        int *prompt = ids_of(tp, &np), *want = ids_of(tg, &ng);
        LlamaState *s = llama_state_new(m, np + ng);
        int *got = xmalloc(sizeof(int) * ng);
        int n = greedy_generate(s, prompt, np, ng, got);
        int same = n == ng;
        for (int i = 0; same && i < ng; i++) same = got[i] == want[i];
        CHECK(same, "%s case %d: greedy ids differ from transformers generate", name, k);
        free(got); free(prompt); free(want);
        llama_state_free(s);
    }
}

/* golden tests/golden/<name>.safetensors against the checkpoint in dir */
static void parity_dir(const char *dir, const char *name) {
    Golden g;
    REQUIRE(golden_open(&g, name) == 0, "golden %s: %s", name, err_get());
    LlamaModel *m = llama_load(dir, be);
    REQUIRE(m, "load %s: %s", dir, err_get());
    int T;
    int *ids = ids_of(g.ids, &T);
    int *pos = xmalloc(sizeof(int) * T);
    for (int i = 0; i < T; i++) pos[i] = i;
    LlamaState *s = llama_state_new(m, T);
    REQUIRE(llama_forward(s, ids, pos, T, NULL, LOGITS_ALL) == 0, "forward: %s", err_get());
    const int V = m->cfg.vocab, H = m->cfg.hidden;
    const float *ref = g.logits->data;
    float scale = max_abs(ref, (size_t)T * V);
    float dl = max_diff(s->logits, ref, (size_t)T * V);
    float dh = max_diff(s->hidden, g.hidden->data, (size_t)T * H);
    float hs = max_abs(g.hidden->data, (size_t)T * H);
    CHECK(dl <= PARITY_REL * scale, "%s logits: max diff %g > %g (max |logit| %g)", name, dl, PARITY_REL * scale, scale);
    CHECK(dh <= PARITY_REL * hs, "%s hidden: max diff %g > %g", name, dh, PARITY_REL * hs);
    if (g.native) {
        float bound = m->embed.dtype == DT_BF16 ? NATIVE_REL_BF16 : NATIVE_REL_F16;
        float dn = max_diff(s->logits, g.native->data, (size_t)T * V);
        CHECK(dn <= bound * scale, "%s vs native %s forward: %g > %g", name, dtype_name(m->embed.dtype), dn, bound * scale);
        printf("# %s: |Δlogit| vs f32 reference %.2e, vs native %s forward %.2e (max |logit| %.2f)\n", name,
               dl / scale, dtype_name(m->embed.dtype), dn / scale, scale);
    } else {
        printf("# %s: |Δlogit|/max|logit| = %.2e\n", name, dl / scale);
    }

    /* incremental: prefill half, then one token at a time, equals batch */
    llama_truncate(s, 0);
    int half = T / 2;
    REQUIRE(llama_forward(s, ids, pos, half, NULL, LOGITS_LAST) == 0, "prefill: %s", err_get());
    llama_commit(s, NULL, half);
    float worst = max_diff(s->logits, ref + (size_t)(half - 1) * V, V);
    for (int t = half; t < T; t++) {
        REQUIRE(llama_forward(s, ids + t, pos + t, 1, NULL, LOGITS_LAST) == 0, "decode: %s", err_get());
        llama_commit(s, NULL, 1);
        float d = max_diff(s->logits, ref + (size_t)t * V, V);
        if (d > worst) worst = d;
    }
    CHECK(worst <= PARITY_REL * scale, "%s incremental decode: max diff %g", name, worst);

    generate_cases(m, &g, name);
    llama_state_free(s);
    free(ids); free(pos);
    llama_free(m);
    st_close(g.st);
}

static void parity(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/ckpt/%s", name);
    parity_dir(dir, name);
}

static void test_parity_llama2_f32(void) { parity("llama2_f32"); }
static void test_parity_llama2_f16_sharded(void) { parity("llama2_f16"); }
static void test_parity_llama3_f32_gqa_rope_scaling_tied(void) { parity("llama3_f32"); }
static void test_parity_llama3_bf16(void) { parity("llama3_bf16"); }
/* Qwen2: q/k/v biases (random in the checkpoint), rope_theta 1e6, GQA;
 * goldens from tools/golden/qwen2_golden.py */
static void test_parity_qwen2_f32_qkv_bias(void) { parity("qwen2_f32"); }
static void test_parity_qwen2_bf16(void) { parity("qwen2_bf16"); }
/* Qwen3: each head of q and k RMS-normalised before RoPE (random norm
 * weights), a head size of 32 beside hidden 64 / 4 heads, no biases, tied
 * embeddings; goldens from tools/golden/qwen3_golden.py (transformers 4.51) */
static void test_parity_qwen3_f32_qk_norm(void) { parity("qwen3_f32"); }
static void test_parity_qwen3_bf16(void) { parity("qwen3_bf16"); }
/* Gemma 3: norms applied as 1 + w (random weights), a norm after attention
 * and after the MLP, GELU, embeddings scaled by sqrt(hidden), an attention
 * scale of its own, sliding layers (a window of 6 that the 40 tokens pass,
 * RoPE base 10^4) between full ones (10^6, linear x4); goldens from
 * tools/golden/gemma3_golden.py (transformers 4.51) */
static void test_parity_gemma3_f32_sliding(void) { parity("gemma3_f32"); }
static void test_parity_gemma3_bf16(void) { parity("gemma3_bf16"); }
/* Gemma 3 as Google publishes 4B-27B (model_type gemma3, a text_config
 * holding only what differs from Gemma3TextConfig's defaults, a vision tower
 * beside the decoder), gemma3_f32's weights: its goldens, under both names
 * of the decoder's tensors (language_model.model. as published,
 * model.language_model. as transformers writes them from 4.52 on);
 * gemma3_golden.py --multimodal checks transformers' logits of the wrapped
 * model equal gemma3_f32's.  The eos ids are the top level's. */
static void test_parity_gemma3_multimodal(void) {
    parity_dir("tests/ckpt/gemma3_mm", "gemma3_f32");
    parity_dir("tests/ckpt/gemma3_mm_renamed", "gemma3_f32");
    ModelConfig c;
    REQUIRE(config_load("tests/ckpt/gemma3_mm/config.json", &c) == 0, "%s", err_get());
    CHECK(c.n_eos == 2 && c.eos_ids[0] == 1 && c.eos_ids[1] == 106 && c.bos_id == 2 && c.tie_embeddings &&
          c.rms_eps == 1e-6f && c.rope_local_theta == 10000.0f && c.act == ACT_GELU_TANH,
          "gemma3_mm: defaults or eos ids not read (eos %d: %d, bos %d)", c.n_eos, c.eos_ids[0], c.bos_id);
}

/* A GGUF metadata pair appended to b (at *n): a string (val) or, with val
 * NULL, an unsigned 32-bit integer (num) */
static void kv_put(uint8_t *b, size_t *n, const char *key, const char *val, uint32_t num) {
    const uint64_t klen = strlen(key);
    const uint32_t type = val ? 8 : 4;   /* GGUF_TYPE_STRING, GGUF_TYPE_UINT32 */
    memcpy(b + *n, &klen, 8); memcpy(b + *n + 8, key, klen); *n += 8 + klen;
    memcpy(b + *n, &type, 4); *n += 4;
    if (val) {
        const uint64_t vlen = strlen(val);
        memcpy(b + *n, &vlen, 8); memcpy(b + *n + 8, val, vlen); *n += 8 + vlen;
    } else {
        memcpy(b + *n, &num, 4); *n += 4;
    }
}

/* src (a GGUF v3 without general.alignment) rewritten to path with the
 * pairs kvs[0..kvlen) (nkv of them) first in its metadata, the first
 * occurrence of the bytes from[0..from_len) replaced by to[0..to_len) (a
 * tensor renamed, a value rewritten; none when from is NULL), then a
 * padding string so that the tensors' data keeps its 32-byte alignment. */
static void gguf_variant(const char *src, const char *path, const uint8_t *kvs, size_t kvlen, int nkv, const void *from,
                         size_t from_len, const void *to, size_t to_len) {
    size_t n = 0;
    uint8_t *b = (uint8_t *)read_text_file(src, &n), pad[96];
    REQUIRE(b, "%s", err_get());
    const uint8_t *at = from ? memmem(b, n, from, from_len) : NULL;
    REQUIRE(!from || at, "%s: the bytes to replace are not there", src);
    const size_t grow = kvlen + to_len - (from ? from_len : 0) + 8 + 12 + 4 + 8;   /* "c2t.test.pad" is 12 bytes */
    size_t np = 0;
    char fill[40] = "";
    memset(fill, 'x', (32 - grow % 32) % 32);
    kv_put(pad, &np, "c2t.test.pad", fill, 0);
    uint64_t count;
    memcpy(&count, b + 16, 8);
    count += (uint64_t)nkv + 1;
    memcpy(b + 16, &count, 8);
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "cannot write %s", path);
    fwrite(b, 1, 24, f);
    if (kvlen) fwrite(kvs, 1, kvlen, f);
    fwrite(pad, 1, np, f);
    if (at) {
        fwrite(b + 24, 1, (size_t)(at - b) - 24, f);
        fwrite(to, 1, to_len, f);
        fwrite(at + from_len, 1, n - (size_t)(at - b) - from_len, f);
    } else {
        fwrite(b + 24, 1, n - 24, f);
    }
    fclose(f);
    free(b);
}

/* spec-convert of a qwen2, a qwen3 and a gemma3 GGUF (tools/golden/
 * qwen2_golden.py, qwen3_golden.py and gemma3_golden.py wrote their F32
 * checkpoints' weights as llama.cpp's converter names and lays them out:
 * qwen3's q/k norms and head size of its own; gemma3's norms as 1 + w, its
 * sliding layers as a flag per layer, their RoPE base) gives transformers'
 * logits back: F32 exactly as the F32 checkpoint, BF16 as the BF16 one (the
 * same rounding as torch's). */
static void test_convert_gguf_families(void) {
    static const char *const cases[][4] = {
        {"qwen2", "f32", "qwen2_f32", "qwen2"},   {"qwen2", "bf16", "qwen2_bf16", "qwen2"},
        {"qwen3", "f32", "qwen3_f32", "qwen3"},   {"qwen3", "bf16", "qwen3_bf16", "qwen3"},
        {"gemma3", "f32", "gemma3_f32", "gemma3_text"}, {"gemma3", "bf16", "gemma3_bf16", "gemma3_text"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char dir[128], err[2048];
        snprintf(dir, sizeof dir, "/tmp/c2t_%s_conv_%s_%d", cases[i][0], cases[i][1], (int)getpid());
        int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert tests/golden/%s_tiny.gguf %s --dtype %s", dir,
                         bin_dir(), cases[i][0], dir, cases[i][1]);
        REQUIRE(rc == 0, "spec-convert: %s", err);
        char *cfg = path_join(dir, "config.json");
        cJSON *c = read_json_file(cfg);
        REQUIRE(c, "%s", err_get());
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c, "model_type");
        CHECK(cJSON_IsString(mt) && !strcmp(mt->valuestring, cases[i][3]), "%s: model_type is not %s", cfg, cases[i][3]);
        cJSON *qs = cJSON_GetObjectItemCaseSensitive(c, "query_pre_attn_scalar");
        if (qs) {   /* no GGUF key holds it: llama.cpp's rule, the head size (32) but for the 27B; the
                     * checkpoint's own 24 put back for the logits (test_parity_gemma3_* cover it) */
            CHECK(cJSON_IsNumber(qs) && qs->valuedouble == 32, "%s: query_pre_attn_scalar %g, not the head size 32", cfg,
                  cJSON_IsNumber(qs) ? qs->valuedouble : -1.0);
            cJSON_SetNumberValue(qs, 24);
            REQUIRE(write_json(cfg, c) == 0, "%s", err_get());
        }
        cJSON_Delete(c);
        free(cfg);
        parity_dir(dir, cases[i][2]);
        char *tok = path_join(dir, "tokenizer.json");
        Tokenizer *t = tokenizer_load(tok);
        CHECK(t != NULL, "%s: %s", tok, err_get());
        tokenizer_free(t);
        free(tok);
        run_cmd(err, sizeof err, "rm -rf %s", dir);
    }
}

/* gguf converted by spec-convert --dtype f32 into dir (emptied first):
 * its config.json, or NULL (a check has failed). */
static cJSON *convert_f32_config(const char *gguf, const char *dir) {
    char err[2048];
    const int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", dir, bin_dir(), gguf, dir);
    if (rc) { CHECK(0, "spec-convert %s: %s", gguf, err); return NULL; }
    char *cfg = path_join(dir, "config.json");
    cJSON *c = read_json_file(cfg);
    if (!c) CHECK(0, "%s", err_get());
    free(cfg);
    return c;
}

/* spec-convert of a llama GGUF with LLaMA 3's RoPE scaling
 * (tools/golden/qwen2_golden.py wrote tests/golden/llama3_tiny.gguf from
 * tests/ckpt/llama3_f32 as llama.cpp's converter does: q / k permuted,
 * rope_freqs.weight, no output.weight): config.json's rope_scaling as
 * llama3_f32's (factor 8, 1, 4, original context 64), the logits and greedy
 * tokens of transformers on llama3_f32; a divisor changed is refused; an
 * end-of-turn id joins the eos in generation_config.json. */
static void test_convert_llama3_gguf(void) {
    char dir[128], path[96], err[2048];
    snprintf(dir, sizeof dir, "/tmp/c2t_llama3_conv_%d", (int)getpid());
    snprintf(path, sizeof path, "/tmp/c2t_llama3_%d.gguf", (int)getpid());
    cJSON *c = convert_f32_config("tests/golden/llama3_tiny.gguf", dir);
    if (!c) return;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(rs, "rope_type"));
    CHECK(type && !strcmp(type, "llama3") &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(rs, "factor")) == 8 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(rs, "low_freq_factor")) == 1 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(rs, "high_freq_factor")) == 4 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(rs, "original_max_position_embeddings")) == 64,
          "%s/config.json: rope_scaling is not llama3_f32's", dir);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(c, "tie_word_embeddings")), "%s/config.json: not tied", dir);
    cJSON_Delete(c);
    parity_dir(dir, "llama3_f32");
    /* the divisors 1, 2.44..., 8 of the tensor's first three frequencies, the middle one changed */
    const float was[3] = {1.0f, 2.44225955f, 8.0f}, now[3] = {1.0f, 2.5f, 8.0f};
    gguf_variant("tests/golden/llama3_tiny.gguf", path, NULL, 0, 0, was, sizeof was, now, sizeof now);
    int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", dir, bin_dir(), path, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "tensor rope_freqs.weight: its divisors are not LLaMA 3's scaling");
    /* an end-of-turn and an end-of-message id (LLaMA 3's <|eot_id|>, <|eom_id|>; here one id) stop generation
     * beside the eos */
    uint8_t kvs[128];
    size_t kvlen = 0;
    kv_put(kvs, &kvlen, "tokenizer.ggml.eot_token_id", NULL, 7);
    kv_put(kvs, &kvlen, "tokenizer.ggml.eom_token_id", NULL, 7);
    gguf_variant("tests/golden/llama3_tiny.gguf", path, kvs, kvlen, 2, NULL, 0, NULL, 0);
    rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", dir, bin_dir(), path, dir);
    REQUIRE(rc == 0, "spec-convert: %s", err);
    char *gen = path_join(dir, "generation_config.json");
    cJSON *gc = read_json_file(gen);
    const cJSON *eos = cJSON_GetObjectItem(gc, "eos_token_id");
    CHECK(cJSON_GetArraySize(eos) == 2 && cJSON_GetNumberValue(cJSON_GetArrayItem(eos, 0)) == 2 &&
              cJSON_GetNumberValue(cJSON_GetArrayItem(eos, 1)) == 7, "%s: eos_token_id is not [2, 7]", gen);
    cJSON_Delete(gc);
    free(gen);
    run_cmd(err, sizeof err, "rm -rf %s %s", dir, path);
}

/* spec-convert of a llama GGUF with linear RoPE scaling (DeepSeek-Coder's;
 * tools/golden/qwen2_golden.py wrote tests/golden/llama2_linear_tiny.gguf
 * from tests/ckpt/llama2_f32 under factor 4): config.json's rope_scaling
 * linear with factor 4, and transformers' logits and greedy tokens of that
 * model (the llama2_linear_f32 references); another scaling type, or a
 * factor of 0, is refused in one line. */
static void test_convert_linear_rope_gguf(void) {
    char dir[128], path[96], err[2048];
    snprintf(dir, sizeof dir, "/tmp/c2t_linear_conv_%d", (int)getpid());
    snprintf(path, sizeof path, "/tmp/c2t_linear_%d.gguf", (int)getpid());
    cJSON *c = convert_f32_config("tests/golden/llama2_linear_tiny.gguf", dir);
    if (!c) return;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(rs, "rope_type"));
    CHECK(type && !strcmp(type, "linear") && cJSON_GetNumberValue(cJSON_GetObjectItem(rs, "factor")) == 4,
          "%s/config.json: rope_scaling is not linear, factor 4", dir);
    cJSON_Delete(c);
    parity_dir(dir, "llama2_linear_f32");
    static const char linear[] = "\x06\0\0\0\0\0\0\0linear", yarn[] = "\x04\0\0\0\0\0\0\0yarn";
    gguf_variant("tests/golden/llama2_linear_tiny.gguf", path, NULL, 0, 0, linear, sizeof linear - 1, yarn, sizeof yarn - 1);
    int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", dir, bin_dir(), path, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "'yarn': only linear RoPE scaling is converted");
    const float four = 4.0f, zero = 0.0f;
    gguf_variant("tests/golden/llama2_linear_tiny.gguf", path, NULL, 0, 0, &four, sizeof four, &zero, sizeof zero);
    rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", dir, bin_dir(), path, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "needs a positive llama.rope.scaling.factor");
    run_cmd(err, sizeof err, "rm -rf %s %s", dir, path);
}

/* Logits of the keep conversion against the F32 one (the same weights,
 * dequantised): the block products quantise each activation row to 8 bits
 * per block (kernels/base/quant.h, docs/runtime.md), a relative error of at
 * most 1/254 per element before the sums, which two layers and the LM head
 * carry into the logits.  Random weights cancel in their sums far more than
 * trained ones, so the relative error of a logit grows: 2.9e-2 of
 * max|logit| measured here; the bound is 5e-2. */
#define KEEP_REL 5e-2f

/* The largest difference of a's logits from b's over one 24-token forward
 * (ids below 256), as a share of b's largest logit. */
static double logits_rel_diff(LlamaModel *a, LlamaModel *b) {
    int ids[24], pos[24];
    for (int i = 0; i < 24; i++) { ids[i] = (i * 37 + 11) % 256; pos[i] = i; }
    LlamaState *sa = llama_state_new(a, 24), *sb = llama_state_new(b, 24);
    if (llama_forward(sa, ids, pos, 24, NULL, LOGITS_ALL) || llama_forward(sb, ids, pos, 24, NULL, LOGITS_ALL)) {
        CHECK(0, "forward: %s", err_get());
        llama_state_free(sa); llama_state_free(sb);
        return INFINITY;
    }
    const size_t n = (size_t)24 * a->cfg.vocab;
    const double rel = max_diff(sa->logits, sb->logits, n) / max_abs(sb->logits, n);
    llama_state_free(sa); llama_state_free(sb);
    return rel;
}

/* spec-convert --dtype keep of tests/golden/qwen2_quant.gguf, a random
 * Qwen2 whose matrices hold all ten GGUF block types
 * (tools/golden/qwen2_golden.py): the same bytes as the committed
 * tests/ckpt/qwen2_quant (the lossless tests' target), every matrix in its
 * block type whose rows dequantise bit for bit to --dtype f32's values, the
 * types reported, and logits within KEEP_REL of the F32 model's. */
static void test_convert_keep_block_types(void) {
    char keep[128], f32[128], err[2048];
    snprintf(keep, sizeof keep, "/tmp/c2t_keep_%d", (int)getpid());
    snprintf(f32, sizeof f32, "/tmp/c2t_keep_f32_%d", (int)getpid());
    int rc = run_cmd(err, sizeof err, "rm -rf %s %s && %s/spec-convert tests/golden/qwen2_quant.gguf %s --dtype keep && "
                     "%s/spec-convert tests/golden/qwen2_quant.gguf %s --dtype f32 && "
                     "cmp %s/model.safetensors tests/ckpt/qwen2_quant/model.safetensors",
                     keep, f32, bin_dir(), keep, bin_dir(), f32, keep);
    REQUIRE(rc == 0, "spec-convert --dtype keep: %s", err);
    LlamaModel *mk = llama_load(keep, be), *mf = llama_load(f32, be);
    REQUIRE(mk && mf, "%s", err_get());
    CHECK(!strcmp(mk->weight_types, "F32 11, Q8_0 2, Q4_0 1, Q4_1 1, Q5_0 1, Q5_1 1, Q4_K 2, Q5_K 2, Q6_K 2, IQ4_NL 1, IQ4_XS 1, Q2_K 1, Q3_K 1"),
          "weight types '%s'", mk->weight_types);
    CHECK(mk->embed.dtype == DT_Q6_K && mk->lm_head.dtype == DT_Q8_0 && mk->layer[1].wk.dtype == DT_Q5_K &&
          mf->layer[1].wk.dtype == DT_F32, "weights not kept in their block types");
    int blocks = 0;
    for (int i = 0; i < mk->st->ntensors; i++) {
        const StTensor *t = &mk->st->tensors[i], *u = st_find(mf->st, t->name);
        REQUIRE(u && u->dtype == DT_F32 && u->shape[0] == t->shape[0], "%s: no F32 twin", t->name);
        if (!dtype_is_quant(t->dtype)) continue;
        blocks++;
        float *v = xmalloc(sizeof(float) * (size_t)(t->shape[0] * t->shape[1]));
        REQUIRE(quant_dequant_row(t->dtype, t->data, v, t->shape[0] * t->shape[1]) == 0, "%s", err_get());
        CHECK(!memcmp(v, u->data, u->nbytes), "%s (%s): dequantised rows differ from --dtype f32's", t->name, t->dtype_name);
        free(v);
    }
    CHECK(blocks == 16, "%d block-type matrices, expected 16", blocks);
    const double rel = logits_rel_diff(mk, mf);
    CHECK(rel <= KEEP_REL, "keep logits vs f32: %g of max|logit| > %g", rel, KEEP_REL);
    printf("# qwen2_quant: keep vs f32 |Δlogit|/max|logit| = %.2e\n", rel);
    llama_free(mk); llama_free(mf);
    run_cmd(err, sizeof err, "rm -rf %s %s", keep, f32);
}

/* spec-convert --dtype q4_0 of the same all-block-types GGUF: every matrix
 * (embeddings and LM head included) in Q4_0, its rows the bytes
 * quant_q4_0_row makes of --dtype f32's values (test_gguf holds that
 * function to gguf.quants.quantize), vectors F32 as in f32's; the types
 * reported; and the model computing with its blocks in place gives logits
 * within KEEP_REL of an F32 checkpoint of its dequantised weights (how far
 * 4 bits move this random model's logits from f32's is not the check: its
 * random Q6_K / K sub-block scales differ by up to 2^12 inside a Q4_0
 * block, 0.56 of max|logit|). */
static void test_convert_q4_0(void) {
    char q4[128], f32[128], deq[128], err[2048];
    snprintf(q4, sizeof q4, "/tmp/c2t_q4_0_%d", (int)getpid());
    snprintf(f32, sizeof f32, "/tmp/c2t_q4_0_f32_%d", (int)getpid());
    snprintf(deq, sizeof deq, "/tmp/c2t_q4_0_deq_%d", (int)getpid());
    int rc = run_cmd(err, sizeof err, "rm -rf %s %s %s && %s/spec-convert tests/golden/qwen2_quant.gguf %s --dtype q4_0 && "
                     "%s/spec-convert tests/golden/qwen2_quant.gguf %s --dtype f32 && mkdir %s && cp %s/*.json %s/",
                     q4, f32, deq, bin_dir(), q4, bin_dir(), f32, deq, q4, deq);
    REQUIRE(rc == 0, "spec-convert --dtype q4_0: %s", err);
    LlamaModel *mq = llama_load(q4, be), *mf = llama_load(f32, be);
    REQUIRE(mq && mf, "%s", err_get());
    CHECK(!strcmp(mq->weight_types, "F32 11, Q4_0 16"), "weight types '%s'", mq->weight_types);
    const int nt = mq->st->ntensors;
    StWrite *w = xcalloc((size_t)nt, sizeof *w);
    for (int i = 0; i < nt; i++) {
        const StTensor *t = &mq->st->tensors[i], *u = st_find(mf->st, t->name);
        REQUIRE(u && u->dtype == DT_F32 && u->shape[0] == t->shape[0], "%s: no F32 twin", t->name);
        const int64_t rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
        float *v = xmalloc(sizeof(float) * (size_t)(rows * cols));
        w[i] = (StWrite){t->name, DT_F32, t->ndim, {rows, t->ndim == 2 ? cols : 0}, v};
        if (t->ndim == 1) {
            CHECK(t->dtype == DT_F32 && !memcmp(t->data, u->data, u->nbytes), "%s: the vector is not f32's", t->name);
            memcpy(v, t->data, t->nbytes);
            continue;
        }
        const int64_t rb = quant_row_bytes(DT_Q4_0, cols);
        REQUIRE(t->dtype == DT_Q4_0 && (int64_t)t->nbytes == rows * rb, "%s: %s, %zu bytes", t->name, t->dtype_name, t->nbytes);
        uint8_t *want = xmalloc((size_t)(rows * rb));
        for (int64_t r = 0; r < rows; r++) quant_q4_0_row((const float *)u->data + r * cols, cols, want + r * rb);
        CHECK(!memcmp(want, t->data, t->nbytes), "%s: blocks differ from quant_q4_0_row of f32's values", t->name);
        free(want);
        REQUIRE(quant_dequant_row(DT_Q4_0, t->data, v, rows * cols) == 0, "%s", err_get());
    }
    char *p = path_join(deq, "model.safetensors");
    REQUIRE(st_write(p, w, nt) == 0, "%s", err_get());
    free(p);
    for (int i = 0; i < nt; i++) free((void *)w[i].data);
    free(w);
    LlamaModel *md = llama_load(deq, be);
    REQUIRE(md, "%s", err_get());
    const double rel = logits_rel_diff(mq, md);
    CHECK(rel <= KEEP_REL, "q4_0 logits vs its dequantised weights in f32: %g of max|logit| > %g", rel, KEEP_REL);
    printf("# qwen2_quant: q4_0 vs its weights in F32 |Δlogit|/max|logit| = %.2e\n", rel);
    llama_free(mq); llama_free(mf); llama_free(md);
    run_cmd(err, sizeof err, "rm -rf %s %s %s", q4, f32, deq);
}

/* spec-convert refuses a GGUF that holds a NaN or an infinity (a Q4_K
 * block's d, with --dtype keep and f32; an F32 vector's element) and a
 * value too large for --dtype f16 or for a Q4_0 block's scale, each in one
 * line naming the tensor and the element; --dtype bf16 (f32) converts the
 * large value. */
static void test_convert_refuses_nonfinite(void) {
    const char *src = "tests/golden/qwen2_quant.gguf";
    size_t n = 0;
    char *bytes = read_text_file(src, &n);
    Gguf *g = gguf_open(src);
    REQUIRE(bytes && g, "%s", err_get());
    static const struct { const char *tensor; size_t at; uint32_t value; size_t len; const char *dtype, *needle; } cases[] = {
        {"blk.0.ffn_up.weight", 144 * 2, 0x7E00, 2, "keep", "tensor blk.0.ffn_up.weight: the scale of the block at element [2, 0] is NaN"},
        {"blk.0.ffn_up.weight", 144 * 2 + 2, 0x7C00, 2, "f32", "tensor blk.0.ffn_up.weight: element [2, 0] is NaN or infinite"},
        {"blk.1.attn_k.bias", 4 * 5, 0xFF800000u, 4, "bf16", "tensor blk.1.attn_k.bias: element 5 is NaN or infinite in the GGUF"},
        {"blk.0.attn_q.bias", 4 * 3, 0x49742400u, 4, "f16", "tensor model.layers.0.self_attn.q_proj.bias: element 3 is NaN or infinite in F16"},
        {"blk.0.attn_q.bias", 4 * 3, 0x49742400u, 4, "bf16", NULL},   /* 1e6 */
        /* a Q8_0 scale of 65504: values past 8 x 65504, a Q4_0 scale F16 cannot hold */
        {"output.weight", 34 * 3, 0x7BFF, 2, "q4_0", "tensor lm_head.weight: the scale of the block at element [0, 96] is NaN or infinite in Q4_0"},
        {"output.weight", 34 * 3, 0x7BFF, 2, "f32", NULL},
    };
    char path[96], out[96], err[2048];
    snprintf(path, sizeof path, "/tmp/c2t_nonfinite_%d.gguf", (int)getpid());
    snprintf(out, sizeof out, "/tmp/c2t_nonfinite_%d", (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const GgufTensor *t = gguf_find_tensor(g, cases[i].tensor);
        REQUIRE(t, "%s: no tensor %s", src, cases[i].tensor);
        const char *at = memmem(bytes, n, gguf_tensor_data(g, t), 64);   /* random bytes: found once */
        REQUIRE(at, "%s: tensor %s not found in the file's bytes", src, cases[i].tensor);
        char *copy = xmalloc(n);
        memcpy(copy, bytes, n);
        memcpy(copy + (at - bytes) + cases[i].at, &cases[i].value, cases[i].len);
        FILE *f = fopen(path, "wb");
        REQUIRE(f && fwrite(copy, 1, n, f) == n, "cannot write %s", path);
        fclose(f);
        free(copy);
        int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype %s", out, bin_dir(), path, out,
                         cases[i].dtype);
        if (cases[i].needle) CHECK_ONE_LINE_ERROR(rc, err, cases[i].needle);
        else CHECK(rc == 0, "%s --dtype %s: %s", cases[i].tensor, cases[i].dtype, err);
    }
    gguf_close(g);
    free(bytes);
    run_cmd(err, sizeof err, "rm -rf %s %s", out, path);
}

/* spec-convert --tokenizer-only writes the same tokenizer.json and
 * tokenizer_config.json as the whole conversion, and nothing else. */
static void test_convert_tokenizer_only(void) {
    char a[96], b[96], err[2048];
    snprintf(a, sizeof a, "/tmp/c2t_tokonly_%d", (int)getpid());
    snprintf(b, sizeof b, "/tmp/c2t_tokall_%d", (int)getpid());
    int rc = run_cmd(err, sizeof err, "rm -rf %s %s && %s/spec-convert tests/golden/qwen2_tiny.gguf %s --tokenizer-only && "
                     "%s/spec-convert tests/golden/qwen2_tiny.gguf %s && cmp %s/tokenizer.json %s/tokenizer.json && "
                     "cmp %s/tokenizer_config.json %s/tokenizer_config.json && [ \"$(ls %s)\" = \"$(printf 'tokenizer.json\\ntokenizer_config.json')\" ]",
                     a, b, bin_dir(), a, bin_dir(), b, a, b, a, b, a);
    CHECK(rc == 0, "--tokenizer-only: %s", err);
    run_cmd(err, sizeof err, "rm -rf %s %s", a, b);
}

/* What a GGUF says of its attention that config.json would not carry —
 * scaled RoPE (a scaling type other than linear, linear without its
 * factor, LLaMA 3's rope_freqs tensor not of its shape), RoPE over part
 * of a head, keys or values of another size than the head — is refused in
 * one line naming the key or tensor; the same file with a scaling type
 * "none" and sizes equal to the head converts.  A key given twice is
 * refused by the GGUF reader. */
static void test_convert_refuses_other_attention(void) {
    static const struct { const char *key, *val; uint32_t num; const char *from, *to, *needle; } cases[] = {
        {"qwen2.rope.scaling.type", "yarn", 0, NULL, NULL, "qwen2.rope.scaling.type = 'yarn'"},
        {"qwen2.rope.scaling.type", "linear", 0, NULL, NULL, "linear needs a positive qwen2.rope.scaling.factor"},
        {"qwen2.rope.dimension_count", NULL, 8, NULL, NULL, "qwen2.rope.dimension_count = 8, not the head size 16"},
        {"qwen2.attention.key_length", NULL, 32, NULL, NULL, "qwen2.attention.key_length = 32"},
        {"qwen2.attention.value_length", "16", 0, NULL, NULL, "qwen2.attention.value_length"},
        {NULL, NULL, 0, "blk.0.attn_q.bias", "rope_freqs.weight", "tensor rope_freqs.weight"},
        {"qwen2.rope.scaling.type", "none", 0, NULL, NULL, NULL},
        {"qwen2.rope.dimension_count", NULL, 16, NULL, NULL, NULL},
        /* a key given twice (here one that the file holds already): a lie, whichever value is meant */
        {"qwen2.rope.freq_base", NULL, 10000, NULL, NULL, "metadata key 'qwen2.rope.freq_base' appears twice"},
    };
    char path[96], out[96], err[2048];
    snprintf(path, sizeof path, "/tmp/c2t_attn_%d.gguf", (int)getpid());
    snprintf(out, sizeof out, "/tmp/c2t_attn_%d", (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t kvs[256];
        size_t kvlen = 0;
        if (cases[i].key) kv_put(kvs, &kvlen, cases[i].key, cases[i].val, cases[i].num);
        gguf_variant("tests/golden/qwen2_tiny.gguf", path, kvs, kvlen, cases[i].key != NULL, cases[i].from,
                     cases[i].from ? strlen(cases[i].from) : 0, cases[i].to, cases[i].to ? strlen(cases[i].to) : 0);
        int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --dtype f32", out, bin_dir(), path, out);
        if (cases[i].needle) CHECK_ONE_LINE_ERROR(rc, err, cases[i].needle);
        else CHECK(rc == 0, "%s = %s: %s", cases[i].key, cases[i].val ? cases[i].val : "16", err);
    }
    run_cmd(err, sizeof err, "rm -rf %s %s", out, path);
}

/* The tokenizer.json spec-convert writes for a pre-tokenizer (the tiny
 * GGUF's qwen2, and llama-bpe and gpt-2 written in its place): NFC and
 * Qwen2's split for qwen2, LLaMA 3's split (digits in threes) with
 * ignore_merges for llama-bpe, GPT-2's regex inside the byte-level step
 * for gpt-2; an unknown one refused by name.  (llama.cpp's own test cases
 * check the ids: tools/experiments/vocab_tests.sh.) */
static void test_convert_pre_tokenizers(void) {
    static const struct { const char *pre, *split, *normalizer; int ignore_merges, byte_regex; } cases[] = {
        {"qwen2", "\\p{N}| ?", "NFC", 0, 0},
        {"llama-bpe", "\\p{N}{1,3}| ?", NULL, 1, 0},
        {"gpt-2", NULL, NULL, 0, 1},
        {"falcon", NULL, NULL, 0, 0},
    };
    char path[96], out[96], err[2048];
    snprintf(path, sizeof path, "/tmp/c2t_pre_%d.gguf", (int)getpid());
    snprintf(out, sizeof out, "/tmp/c2t_pre_%d", (int)getpid());
    const char *key = "tokenizer.ggml.pre";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t from[64], to[64];   /* the pair's key, string type, length and "qwen2" */
        size_t nf = 0, nt = 0;
        kv_put(from, &nf, key, "qwen2", 0);
        kv_put(to, &nt, key, cases[i].pre, 0);
        gguf_variant("tests/golden/qwen2_tiny.gguf", path, NULL, 0, 0, from + 8, nf - 8, to + 8, nt - 8);
        int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert %s %s --tokenizer-only", out, bin_dir(), path, out);
        if (!strcmp(cases[i].pre, "falcon")) {
            CHECK_ONE_LINE_ERROR(rc, err, "pre-tokenizer 'falcon'");
            continue;
        }
        REQUIRE(rc == 0, "%s: %s", cases[i].pre, err);
        char *tj = path_join(out, "tokenizer.json");
        cJSON *j = read_json_file(tj);
        REQUIRE(j, "%s", err_get());
        const cJSON *pt = cJSON_GetObjectItem(j, "pre_tokenizer"), *nm = cJSON_GetObjectItem(j, "normalizer"),
                    *model = cJSON_GetObjectItem(j, "model");
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(pt, "pretokenizers"), 0);
        const char *regex = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(first, "pattern"), "Regex"));
        const cJSON *bl = cases[i].split ? cJSON_GetArrayItem(cJSON_GetObjectItem(pt, "pretokenizers"), 1) : pt;
        CHECK(cases[i].split ? regex && strstr(regex, cases[i].split) : !regex, "%s: split '%s'", cases[i].pre, regex ? regex : "none");
        const char *norm = cJSON_GetStringValue(cJSON_GetObjectItem(nm, "type"));
        CHECK(cases[i].normalizer ? norm && !strcmp(norm, cases[i].normalizer) : cJSON_IsNull(nm), "%s: normalizer",
              cases[i].pre);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(model, "ignore_merges")) == cases[i].ignore_merges, "%s: ignore_merges",
              cases[i].pre);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(bl, "use_regex")) == cases[i].byte_regex, "%s: ByteLevel use_regex", cases[i].pre);
        cJSON_Delete(j);
        free(tj);
    }
    run_cmd(err, sizeof err, "rm -rf %s %s", out, path);
}

/* dir/config.json: config.json of src with `from` replaced by `to`; dir's
 * model.safetensors a link to src's. */
static void config_variant(const char *dir, const char *src, const char *from, const char *to) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && ln -s $PWD/%s/model.safetensors %s/ && "
             "sed 's/%s/%s/' %s/config.json > %s/config.json", dir, dir, src, dir, from, to, src, dir);
    REQUIRE(system(cmd) == 0, "%s", cmd);
}

/* rope_scaling linear (factor 4: every position divided by 4) against
 * transformers: llama2_f32's weights under that config.json, its inputs
 * (goldens: tools/golden/make_test_checkpoints.py --linear-only). */
static void test_parity_llama2_rope_linear(void) {
    const char *dir = "/tmp/c2t_rope_linear";
    config_variant(dir, "tests/ckpt/llama2_f32", "\"rope_scaling\": null",
                   "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}");
    parity_dir(dir, "llama2_linear_f32");
    char err[256];
    run_cmd(err, sizeof err, "rm -rf %s", dir);
}

/* What a Qwen2 or Gemma 3 config asks and the runtime cannot do is refused
 * by name (Gemma 2's soft-capping, layer types no period describes, another
 * activation), and a qwen2 config over weights without biases names the
 * missing bias; a Qwen3 config called gemma3_text names its activation. */
static void test_family_refusals(void) {
    const char *dir = "/tmp/c2t_qwen2_variant";
    struct { const char *src, *from, *to, *needle; } cases[] = {
        {"tests/ckpt/qwen2_f32", "\"use_sliding_window\": false", "\"use_sliding_window\": true", "use_sliding_window"},
        {"tests/ckpt/llama2_f32", "\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"", "self_attn.q_proj.bias"},
        {"tests/ckpt/llama2_f32", "\"attention_bias\": false", "\"attention_bias\": true", "attention_bias"},
        {"tests/ckpt/qwen2_f32", "\"model_type\": \"qwen2\"", "\"model_type\": \"qwen3\"", "self_attn.q_norm.weight"},
        {"tests/ckpt/gemma3_f32", "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0",
         "final_logit_softcapping"},
        {"tests/ckpt/gemma3_f32", "\"sliding_window_pattern\": 2",
         "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", \"sliding_attention\"]",
         "layer_types"},
        {"tests/ckpt/gemma3_f32", "\"hidden_activation\": \"gelu_pytorch_tanh\"", "\"hidden_activation\": \"silu\"",
         "hidden_activation"},
        {"tests/ckpt/qwen3_f32", "\"model_type\": \"qwen3\"", "\"model_type\": \"gemma3_text\"", "hidden_act silu"},
        {"tests/ckpt/gemma3_mm", "\"text_config\"", "\"txt_config\"", "text_config"},
        {"tests/ckpt/gemma3_mm", "\"model_type\": \"gemma3_text\"", "\"model_type\": \"gemma2_text\"", "text_config's model_type"},
        {"tests/ckpt/gemma3_mm", "\"model_type\": \"gemma3_text\"",
         "\"model_type\": \"gemma3_text\", \"attn_logit_softcapping\": 50.0", "attn_logit_softcapping"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        config_variant(dir, cases[i].src, cases[i].from, cases[i].to);
        LlamaModel *m = llama_load(dir, be);
        CHECK(m == NULL, "case %zu: %s loaded", i, cases[i].to);
        if (m) { llama_free(m); continue; }
        CHECK(strstr(err_get(), cases[i].needle) && !strchr(err_get(), '\n'), "case %zu: error '%s' does not name %s",
              i, err_get(), cases[i].needle);
    }
    REQUIRE(system("rm -rf /tmp/c2t_qwen2_variant") == 0, "cleanup");
}
/* A backend whose weights are copies (a device's memory), here the CPU's
 * over a malloc'ed copy of each tensor's bytes. */
static int copied_weight(Weight *w, const void *host, DType dt, int64_t rows, int64_t cols) {
    const int64_t rb = quant_row_bytes(dt, cols);
    if (rb < 0) return -1;
    void *c = xmalloc((size_t)(rows * rb));
    memcpy(c, host, (size_t)(rows * rb));
    if (cpu_backend.weight(w, c, dt, rows, cols)) { free(c); return -1; }
    return 0;
}
static void copied_release(Weight *w) {
    void *c = (void *)w->data;
    cpu_backend.weight_release(w);
    free(c);
}

/* This process's resident bytes (/proc/self/statm). */
static double resident_bytes(void) {
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    if (f) fclose(f);
    return (double)res * (double)sysconf(_SC_PAGESIZE);
}

/* A checkpoint loaded by a backend that copies its weights leaves the
 * file's mapped pages: the process grows by the copies alone (22 MB of
 * SmolLM2's draft LM), not by the copies and the file's pages too. */
static void test_copied_weights_drop_the_file_pages(void) {
    Backend copying = cpu_backend;
    copying.weight = copied_weight;
    copying.weight_release = copied_release;
    const char *dir = "data/smollm2/draft";
    size_t file = 0;
    char *path = path_join(dir, "model.safetensors");
    struct stat sb;
    REQUIRE(stat(path, &sb) == 0, "%s", path);
    file = (size_t)sb.st_size;
    free(path);
    const double before = resident_bytes();
    LlamaModel *m = llama_load(dir, &copying);
    REQUIRE(m, "%s", err_get());
    const double grown = resident_bytes() - before;
    CHECK(grown < 1.5 * (double)file, "loading %s with copied weights grew the process by %.1f MB (its file %.1f MB): "
          "the file's pages stayed", dir, grown / 1e6, (double)file / 1e6);
    printf("# %s with copied weights: the process grew %.1f MB for a file of %.1f MB\n", dir, grown / 1e6,
           (double)file / 1e6);
    llama_free(m);
}

/* the shipped demo family (data/demo, BF16), goldens from
 * tools/golden/demo_refs.py */
static void test_parity_demo_target(void) { parity_dir("data/demo/target", "demo_target"); }
static void test_parity_demo_draft(void) { parity_dir("data/demo/draft", "demo_draft"); }

/* The generation command prints what transformers' generate gave. */
static void test_generate_command(void) {
    Golden g;
    REQUIRE(golden_open(&g, "llama3_f32") == 0, "golden: %s", err_get());
    int np, ng;
    int *prompt = ids_of(g.gen_prompt, &np), *want = ids_of(g.gen_ids, &ng);
    char cmd[1024], *c = cmd;
    c += sprintf(c, "%s/spec-generate --target tests/ckpt/llama3_f32 --max-new-tokens %d --ids ", bin_dir(), ng);
    for (int i = 0; i < np; i++) c += sprintf(c, "%s%d", i ? "," : "", prompt[i]);
    FILE *p = popen(cmd, "r");
    REQUIRE(p, "popen");
    char out[4096] = "", expect[4096], *e = expect;
    if (!fgets(out, sizeof out, p)) out[0] = 0;
    int rc = pclose(p);
    e += sprintf(e, "[");
    for (int i = 0; i < ng; i++) e += sprintf(e, "%s%d", i ? "," : "", want[i]);
    sprintf(e, "]\n");
    CHECK(rc == 0, "exit status %d", rc);
    CHECK(!strcmp(out, expect), "spec-generate printed %s, transformers %s", out, expect);
    free(prompt); free(want);
    st_close(g.st);
}

/* --- tree attention --------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ULL;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* A tree as parent indices; node 0 is the root, parents precede children. */
typedef struct { int n, *parent, *depth, *token; } Tree;

static Tree tree_random(int n, int max_depth, int vocab, int shape) {
    Tree t = {n, xmalloc(sizeof(int) * n), xmalloc(sizeof(int) * n), xmalloc(sizeof(int) * n)};
    t.parent[0] = -1; t.depth[0] = 0; t.token[0] = 3 + rnd() % (vocab - 3);
    for (int i = 1; i < n; i++) {
        int p;
        if (shape == 0) p = i - 1;                                /* chain */
        else if (shape == 1) p = 0;                               /* star */
        else if (shape == 2) p = (i - 1) / 10;                    /* 10-ary, breadth first */
        else do p = rnd() % i; while (t.depth[p] >= max_depth);   /* random */
        if (t.depth[p] >= max_depth) p = 0;
        t.parent[i] = p;
        t.depth[i] = t.depth[p] + 1;
        t.token[i] = 3 + rnd() % (vocab - 3);
    }
    return t;
}
static void tree_free(Tree *t) { free(t->parent); free(t->depth); free(t->token); }

/* Path root..node into path[]; returns its length. */
static int tree_path(const Tree *t, int node, int *path) {
    int len = 0, tmp[64];
    for (int v = node; v >= 0; v = t->parent[v]) tmp[len++] = v;
    for (int i = 0; i < len; i++) path[i] = tmp[len - 1 - i];
    return len;
}

static void check_tree(LlamaModel *m, const int *prefix, int P, const Tree *t, const char *label) {
    const int V = m->cfg.vocab, n = t->n;
    LlamaState *s = llama_state_new(m, P + n + 16), *ref = llama_state_new(m, P + 16);
    int *pos = xmalloc(sizeof(int) * (P > n ? P : n));
    for (int i = 0; i < P; i++) pos[i] = i;
    REQUIRE(llama_forward(s, prefix, pos, P, NULL, LOGITS_NONE) == 0, "prefix: %s", err_get());
    llama_commit(s, NULL, P);
    uint8_t *mask = xcalloc((size_t)n * n, 1);   /* the tree's window; the prefix is visible to all */
    for (int i = 0; i < n; i++) {
        for (int v = i; v >= 0; v = t->parent[v]) mask[(size_t)i * n + v] = 1;
        pos[i] = P + t->depth[i];
    }
    REQUIRE(llama_forward(s, t->token, pos, n, mask, LOGITS_ALL) == 0, "tree: %s", err_get());
    float scale = max_abs(s->logits, (size_t)n * V), worst = 0;
    int path[64];
    for (int node = 0; node < n; node++) {
        int len = tree_path(t, node, path);
        llama_truncate(ref, 0);
        int rp = 0;
        REQUIRE(llama_forward(ref, prefix, &rp, 1, NULL, LOGITS_NONE) == 0, "ref: %s", err_get());
        llama_commit(ref, NULL, 1);
        for (int i = 1; i < P; i++) { int p = i; llama_forward(ref, prefix + i, &p, 1, NULL, LOGITS_NONE); llama_commit(ref, NULL, 1); }
        for (int i = 0; i < len; i++) {
            int p = P + i;
            llama_forward(ref, &t->token[path[i]], &p, 1, NULL, LOGITS_LAST);
            llama_commit(ref, NULL, 1);
        }
        float d = max_diff(ref->logits, s->logits + (size_t)node * V, V);
        if (d > worst) worst = d;
    }
    CHECK(worst <= PARITY_REL * scale, "%s: tree node logits differ from path decode by %g (scale %g)", label, worst, scale);

    /* keep the path to the deepest node; the next decode must equal decoding
     * that path from scratch */
    int deepest = 0;
    for (int i = 0; i < n; i++) if (t->depth[i] > t->depth[deepest]) deepest = i;
    int len = tree_path(t, deepest, path);
    int *dpath = backend_alloc_ints(m->be, len);   /* kv_keep reads it in backend memory */
    backend_ints_to_device(m->be, dpath, path, len);
    llama_commit(s, dpath, len);
    m->be->release(dpath);
    int next = 5, np = P + len;
    REQUIRE(llama_forward(s, &next, &np, 1, NULL, LOGITS_LAST) == 0, "after keep: %s", err_get());
    int *seq = xmalloc(sizeof(int) * (P + len + 1));
    memcpy(seq, prefix, sizeof(int) * P);
    for (int i = 0; i < len; i++) seq[P + i] = t->token[path[i]];
    seq[P + len] = next;
    LlamaState *fresh = llama_state_new(m, P + len + 1);
    int *fpos = xmalloc(sizeof(int) * (P + len + 1));
    for (int i = 0; i <= P + len; i++) fpos[i] = i;
    REQUIRE(llama_forward(fresh, seq, fpos, P + len + 1, NULL, LOGITS_LAST) == 0, "fresh: %s", err_get());
    float d = max_diff(fresh->logits, s->logits, V);
    CHECK(d <= PARITY_REL * scale, "%s: decode after KV keep differs by %g", label, d);
    free(seq); free(fpos); free(mask); free(pos);
    llama_state_free(fresh); llama_state_free(s); llama_state_free(ref);
}

static void test_tree_attention_equals_path_decoding(void) {
    const char *ckpts[] = {"tests/ckpt/llama2_f32", "tests/ckpt/llama3_bf16"};
    for (int c = 0; c < 2; c++) {
        LlamaModel *m = llama_load(ckpts[c], be);
        REQUIRE(m, "load: %s", err_get());
        int prefix[12];
        for (int i = 0; i < 12; i++) prefix[i] = 3 + rnd() % (m->cfg.vocab - 3);
        struct { int n, depth, shape; const char *label; } cases[] = {
            {11, 10, 0, "chain depth 10"}, {40, 1, 1, "star of 40"},
            {111, 10, 2, "10-ary tree of 111"}, {300, 10, 3, "random 300 nodes"},
            {1011, 10, 3, "random 1011 nodes depth<=10"},
        };
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            Tree t = tree_random(cases[k].n, cases[k].depth, m->cfg.vocab, cases[k].shape);
            char label[128];
            snprintf(label, sizeof label, "%s, %s", ckpts[c], cases[k].label);
            check_tree(m, prefix, 12, &t, label);
            tree_free(&t);
        }
        llama_free(m);
    }
}

/* The decoder changes the CPU thread count between cycles (decode.c), so
 * results must not depend on it: a prefill and a 1-token decode step give
 * bit-identical logits on one thread and on all of them. */
static void test_threads_do_not_change_results(void) {
    if (cpu_threads_max() < 2) SKIP("one CPU thread only");
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    const size_t V = m->cfg.vocab;
    /* token counts where OpenBLAS's own slicing changed results (9..33) */
    const int counts[] = {3, 9, 21, 33, 70};
    for (int c = 0; c < 5; c++) {
        const int T = counts[c];
        int ids[71], pos[71];
        for (int i = 0; i <= T; i++) { ids[i] = (i * 7919 + 13 + c) % (int)V; pos[i] = i; }
        float *ref[2] = {xmalloc(sizeof(float) * T * V), xmalloc(sizeof(float) * V)};
        int same = 1;
        for (int pass = 0; pass < 2; pass++) {
            cpu_threads_set(pass ? cpu_threads_max() : 1);
            LlamaState *s = llama_state_new(m, T + 1);
            REQUIRE(llama_forward(s, ids, pos, T, NULL, LOGITS_ALL) == 0, "%s", err_get());
            if (!pass) memcpy(ref[0], s->logits, sizeof(float) * T * V);
            else same &= !memcmp(ref[0], s->logits, sizeof(float) * T * V);
            llama_commit(s, NULL, T);
            REQUIRE(llama_forward(s, ids + T, pos + T, 1, NULL, LOGITS_LAST) == 0, "%s", err_get());
            if (!pass) memcpy(ref[1], s->logits, sizeof(float) * V);
            else same &= !memcmp(ref[1], s->logits, sizeof(float) * V);
            llama_state_free(s);
        }
        cpu_threads_set(cpu_threads_max());
        CHECK(same, "%d tokens: logits differ between 1 and %d threads", T, cpu_threads_max());
        free(ref[0]); free(ref[1]);
    }
    llama_free(m);
}

/* The cache refuses to overflow instead of writing past its end. */
static void test_cache_overflow_is_an_error(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama2_f32", be);
    REQUIRE(m, "load: %s", err_get());
    LlamaState *s = llama_state_new(m, 4);
    int ids[5] = {1, 2, 3, 4, 5}, pos[5] = {0, 1, 2, 3, 4};
    CHECK(llama_forward(s, ids, pos, 5, NULL, LOGITS_LAST) != 0, "5 tokens into 4 slots accepted");
    CHECK(strstr(err_get(), "KV cache") != NULL, "error: %s", err_get());
    ids[0] = 100000;
    CHECK(llama_forward(s, ids, pos, 1, NULL, LOGITS_LAST) != 0, "token outside vocab accepted");
    llama_state_free(s);
    llama_free(m);
}

/* ---- SmolLM2-135M-Instruct (make smollm2, make smollm2-f32) against
 * transformers (tools/golden/smollm2_runtime_golden.py): the F32 conversion
 * holds the GGUF's dequantised weights exactly, so transformers on it is the
 * reference.  The BF16 conversion rounds each weight to 8 bits of mantissa;
 * its logits stay within SMOLLM2_BF16_REL of max|logit| of that reference
 * (measured 4.7e-3 on the golden prompt, hidden state 4.3e-3; F32: 1.7e-6). */
#define SMOLLM2_F32 "models/smollm2-135m-instruct-f32"
#define SMOLLM2_BF16 "models/smollm2-135m-instruct"
#define SMOLLM2_BF16_REL 2e-2f

static void smollm2_logits(const char *dir, float bound, const char *what) {
    if (!file_exists(SMOLLM2_F32 "/model.safetensors") || !file_exists(SMOLLM2_BF16 "/model.safetensors"))
        SKIP("%s or %s absent (make smollm2 smollm2-f32)", SMOLLM2_F32, SMOLLM2_BF16);
    SafeTensors *g = st_open("tests/golden/smollm2_hf.safetensors");
    REQUIRE(g, "%s", err_get());
    const StTensor *gi = st_find(g, "input_ids"), *gl = st_find(g, "logits"), *gh = st_find(g, "hidden");
    REQUIRE(gi && gl && gh, "golden lacks input_ids/logits/hidden");
    LlamaModel *m = llama_load(dir, be);
    REQUIRE(m, "load %s: %s", dir, err_get());
    int T, R = (int)gl->shape[0];
    const int V = m->cfg.vocab, H = m->cfg.hidden;
    REQUIRE(gl->shape[1] == V && gh->shape[1] == H, "golden shapes do not match %s", dir);
    int *ids = ids_of(gi, &T), *pos = xmalloc(sizeof(int) * T);
    for (int i = 0; i < T; i++) pos[i] = i;
    LlamaState *s = llama_state_new(m, T);
    REQUIRE(llama_forward(s, ids, pos, T, NULL, LOGITS_ALL) == 0, "forward: %s", err_get());
    const float *rl = gl->data, *rh = gh->data;
    float scale = max_abs(rl, (size_t)R * V), hs = max_abs(rh, (size_t)R * H);
    float dl = max_diff(s->logits + (size_t)(T - R) * V, rl, (size_t)R * V);
    float dh = max_diff(s->hidden + (size_t)(T - R) * H, rh, (size_t)R * H);
    printf("# SmolLM2 %s vs transformers F32: |Δlogit|/max %.2e, |Δhidden|/max %.2e (%d tokens)\n", what,
           dl / scale, dh / hs, T);
    CHECK(dl <= bound * scale, "%s logits: max diff %g > %g (max |logit| %g)", what, dl, bound * scale, scale);
    CHECK(dh <= bound * hs, "%s hidden: max diff %g > %g", what, dh, bound * hs);
    llama_state_free(s);
    llama_free(m);
    free(ids); free(pos);
    st_close(g);
}
static void test_smollm2_f32_logits_vs_transformers(void) { smollm2_logits(SMOLLM2_F32, PARITY_REL, "F32"); }
static void test_smollm2_bf16_logits_vs_transformers(void) { smollm2_logits(SMOLLM2_BF16, SMOLLM2_BF16_REL, "BF16"); }

static int *json_ids(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int *v = xmalloc(sizeof(int) * (*n > 0 ? *n : 1)), i = 0;
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next) v[i++] = (int)e->valuedouble;
    return v;
}

/* greedy ids of the runtime on the F32 conversion equal transformers' generate */
/* The first `most` of the golden's greedy ids (all of them at most <= 0):
 * a prefix of a greedy decode is the greedy decode of that length. */
static int smollm2_greedy_one(LlamaModel *m, const int *prompt, int np, const cJSON *want_json, const char *key,
                              int most) {
    int ng;
    int *want = json_ids(want_json, &ng);
    if (most > 0 && ng > most) ng = most;
    LlamaState *s = llama_state_new(m, np + ng + 1);
    int *got = xmalloc(sizeof(int) * (ng + 1));
    int n = greedy_generate(s, prompt, np, ng, got), same = n == ng;
    for (int i = 0; same && i < ng; i++) same = got[i] == want[i];
    CHECK(same, "%s: greedy ids differ from transformers generate (%d vs %d tokens)", key, n, ng);
    free(got); free(want);
    llama_state_free(s);
    return same;
}

static cJSON *smollm2_greedy_golden(LlamaModel **m) {
    if (!file_exists(SMOLLM2_F32 "/model.safetensors")) return NULL;
    *m = llama_load(SMOLLM2_F32, be);
    return *m ? read_json_file("tests/golden/smollm2_hf_greedy.json") : NULL;
}

/* --prompt is a user message in the guessed chat template, as spec-eval puts
 * it: the instruct model answers instead of ending at once. */
static void test_smollm2_generate_applies_chat_template(void) {
    if (!file_exists(SMOLLM2_BF16 "/model.safetensors")) SKIP("%s absent (make smollm2)", SMOLLM2_BF16);
    char err[4096];
    int rc = run_cmd(err, sizeof err, "sh -c '%s/spec-generate --target %s --prompt \"What is the capital of France?\" "
                     "--max-new-tokens 12 --device cpu 2>/dev/null | grep -q Paris'", bin_dir(), SMOLLM2_BF16);
    CHECK(rc == 0, "no 'Paris' in the answer (exit %d)", rc);
    rc = run_cmd(err, sizeof err, "%s/spec-generate --target %s --prompt hi --max-new-tokens 1 --device cpu", bin_dir(),
                 SMOLLM2_BF16);
    CHECK(rc == 0 && strstr(err, "chat template chatml"), "the template notice: %s", err);
}

static void test_smollm2_greedy_vs_transformers_local(void) {
    LlamaModel *m = NULL;
    if (!file_exists(SMOLLM2_F32 "/model.safetensors")) SKIP("%s absent (make smollm2-f32)", SMOLLM2_F32);
    cJSON *g = smollm2_greedy_golden(&m);
    REQUIRE(g, "%s", err_get());
    int cases = 0;
    for (const cJSON *e = cJSON_GetObjectItem(g, "generate")->child; e; e = e->next) {
        if (strncmp(e->string, "local/", 6)) continue;
        int np;
        int *prompt = json_ids(cJSON_GetObjectItem(e, "prompt"), &np);
        smollm2_greedy_one(m, prompt, np, cJSON_GetObjectItem(e, "ids"), e->string, 0);
        free(prompt);
        cases++;
    }
    CHECK(cases >= 3, "golden has %d local cases", cases);
    cJSON_Delete(g);
    llama_free(m);
}

/* first turns of the benchmarks: prompt ids from our tokenizer and chatml template
 * (each checked against llama.cpp / transformers in test_tokenizer, test_chat).
 * make test decodes one question of each benchmark, its first 32 tokens
 * (each benchmark's kind of text through the tokenizer, the template and
 * the forward, the summaries' long prompts among them); make test-long
 * every question of the golden, 64 tokens. */
static void test_smollm2_greedy_vs_transformers_bench(void) {
    if (!file_exists(SMOLLM2_F32 "/model.safetensors")) SKIP("%s absent (make smollm2-f32)", SMOLLM2_F32);
    if (!file_exists("../shared/benchmarks/mt_bench/question.jsonl")) SKIP("../shared/benchmarks absent");
    LlamaModel *m = NULL;
    cJSON *g = smollm2_greedy_golden(&m);
    REQUIRE(g, "%s", err_get());
    Tokenizer *tok = tokenizer_load(SMOLLM2_BF16);
    REQUIRE(tok, "%s", err_get());
    int cases = 0, same = 0, benches = 0;
    char last[64] = "";
    for (const cJSON *e = cJSON_GetObjectItem(g, "generate")->child; e; e = e->next) {
        if (!strncmp(e->string, "local/", 6)) continue;
        char bench[64], qid[64], path[256];
        REQUIRE(sscanf(e->string, "%63[^/]/%63s", bench, qid) == 2, "golden key %s", e->string);
        if (strcmp(bench, last)) benches++;
        else if (!test_long()) continue;
        snprintf(last, sizeof last, "%s", bench);
        snprintf(path, sizeof path, "../shared/benchmarks/%s/question.jsonl", bench);
        QuestionSet *qs = questions_load(path);
        REQUIRE(qs, "%s", err_get());
        const Question *q = NULL;
        for (int i = 0; i < qs->n; i++) if (!strcmp(qs->q[i].id, qid)) q = &qs->q[i];
        REQUIRE(q, "%s: question %s not found", path, qid);
        int32_t *ids;
        size_t n;
        const char *user = q->turns[0];
        REQUIRE(chat_encode(tok, CHAT_CHATML, chat_default_system(CHAT_CHATML), &user, NULL, 1, &ids, &n) == 0,
                "%s", err_get());
        int *prompt = xmalloc(sizeof(int) * n);
        for (size_t i = 0; i < n; i++) prompt[i] = ids[i];
        same += smollm2_greedy_one(m, prompt, (int)n, e, e->string, TEST_SIZE(32, 0));
        free(prompt); free(ids);
        questions_free(qs);
        cases++;
    }
    printf("# SmolLM2 F32 greedy: %d/%d benchmark first turns of %d benchmarks equal to transformers\n", same, cases,
           benches);
    CHECK(benches == 6 && cases >= TEST_SIZE(6, 20), "golden has %d benchmark cases of %d benchmarks", cases, benches);
    tokenizer_free(tok);
    cJSON_Delete(g);
    llama_free(m);
}

int main(void) {
    RUN(test_parity_llama2_f32);
    RUN(test_parity_llama2_f16_sharded);
    RUN(test_parity_llama3_f32_gqa_rope_scaling_tied);
    RUN(test_parity_llama3_bf16);
    RUN(test_parity_llama2_rope_linear);
    RUN(test_parity_qwen2_f32_qkv_bias);
    RUN(test_parity_qwen2_bf16);
    RUN(test_parity_qwen3_f32_qk_norm);
    RUN(test_parity_qwen3_bf16);
    RUN(test_parity_gemma3_f32_sliding);
    RUN(test_parity_gemma3_bf16);
    RUN(test_parity_gemma3_multimodal);
    RUN(test_copied_weights_drop_the_file_pages);
    RUN(test_convert_keep_block_types);
    RUN(test_convert_q4_0);
    RUN(test_convert_refuses_nonfinite);
    RUN(test_convert_refuses_other_attention);
    RUN(test_convert_tokenizer_only);
    RUN(test_convert_pre_tokenizers);
    RUN(test_family_refusals);
    RUN(test_convert_gguf_families);
    RUN(test_convert_llama3_gguf);
    RUN(test_convert_linear_rope_gguf);
    RUN(test_parity_demo_target);
    RUN(test_parity_demo_draft);
    RUN(test_generate_command);
    RUN(test_tree_attention_equals_path_decoding);
    RUN(test_cache_overflow_is_an_error);
    RUN(test_threads_do_not_change_results);
    RUN(test_smollm2_f32_logits_vs_transformers);
    RUN(test_smollm2_bf16_logits_vs_transformers);
    RUN(test_smollm2_generate_applies_chat_template);
    RUN(test_smollm2_greedy_vs_transformers_local);
    RUN(test_smollm2_greedy_vs_transformers_bench);
    return h_done();
}
