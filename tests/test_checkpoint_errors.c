/* Every way a checkpoint can lie gives one line naming the file and the
 * tensor (or key), a non-zero exit, and no crash — through the library and
 * through the command line. */
#include "tests/harness.h"
#include "infer/model/llama.h"
#include "kernels/base/util.h"
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

static const char *good = "tests/ckpt/llama2_f32";
static char dir[] = "/tmp/c2t_badckptXXXXXX";

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) { fputs(text, f); fclose(f); }
}

/* A safetensors file from a literal header and `data` zero bytes. */
static void write_raw(const char *path, const char *header, size_t data) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    fwrite(&n, 8, 1, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data; i++) fputc(0, f);
    fclose(f);
}

/* len bytes of value written at byte `at` of a tensor's data */
typedef struct { const char *tensor; size_t at; uint32_t value; size_t len; } Poke;

/* Rewrites src's tensors into dir/model.safetensors, with `drop` left out,
 * `reshape` declared [64, 172] instead of [172, 64] and `poke` applied. */
static void rewrite_model_from(const char *src_dir, const char *drop, const char *reshape, const Poke *poke) {
    char *src = path_join(src_dir, "model.safetensors");
    SafeTensors *st = st_open(src);
    StWrite *w = xcalloc(st->ntensors, sizeof *w);
    uint8_t *poked = NULL;
    int n = 0;
    for (int i = 0; i < st->ntensors; i++) {
        const StTensor *t = &st->tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        w[n] = (StWrite){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(w[n].shape, t->shape, sizeof t->shape);
        if (reshape && !strcmp(t->name, reshape)) { int64_t a = w[n].shape[0]; w[n].shape[0] = w[n].shape[1]; w[n].shape[1] = a; }
        if (poke && !strcmp(t->name, poke->tensor)) {
            poked = xmalloc(t->nbytes);
            memcpy(poked, t->data, t->nbytes);
            memcpy(poked + poke->at, &poke->value, poke->len);
            w[n].data = poked;
        }
        n++;
    }
    char *dst = path_join(dir, "model.safetensors");
    st_write(dst, w, n);
    free(dst); free(w); free(src); free(poked);
    st_close(st);
}

static void rewrite_model(const char *drop, const char *reshape) { rewrite_model_from(good, drop, reshape, NULL); }

/* Loads dir through the library and the CLI; both must fail naming needle. */
static void expect_failure(const char *what, const char *needle) {
    LlamaModel *m = llama_load(dir, &cpu_backend);
    CHECK(m == NULL, "%s: load succeeded", what);
    if (m) { llama_free(m); return; }
    CHECK(strstr(err_get(), needle) != NULL, "%s: error does not name '%s': %s", what, needle, err_get());
    char err[2048];
    int rc = run_cmd(err, sizeof err, "%s/spec-generate --target %s --ids 1,2 --max-new-tokens 2", bin_dir(), dir);
    CHECK_ONE_LINE_ERROR(rc, err, needle);
}

static void setup_from(const char *src_dir) {
    char *cfg = path_join(dir, "config.json"), *src = path_join(src_dir, "config.json");
    copy_file(src, cfg);
    free(cfg); free(src);
}

static void setup(void) { setup_from(good); }

static void test_missing_tensor(void) {
    setup();
    rewrite_model("model.layers.1.mlp.up_proj.weight", NULL);
    expect_failure("missing tensor", "model.layers.1.mlp.up_proj.weight");
}

static void test_wrong_shape(void) {
    setup();
    rewrite_model(NULL, "model.layers.0.mlp.gate_proj.weight");
    expect_failure("wrong shape", "model.layers.0.mlp.gate_proj.weight");
}

static void test_offsets_past_end(void) {
    setup();
    char *p = path_join(dir, "model.safetensors");
    write_raw(p, "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[0,256]},"
                 "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[256,272]}}", 100);
    free(p);
    expect_failure("offsets past end", "past end of file");
}

static void test_overlapping_tensors(void) {
    setup();
    char *p = path_join(dir, "model.safetensors");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[0,256]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[224,256]}}", 256);
    free(p);
    expect_failure("overlap", "overlap");
}

static void test_unknown_dtype(void) {
    setup();
    char *p = path_join(dir, "model.safetensors");
    write_raw(p, "{\"model.norm.weight\":{\"dtype\":\"F17\",\"shape\":[64],\"data_offsets\":[0,256]}}", 256);
    free(p);
    expect_failure("unknown dtype", "model.norm.weight");
}

static void test_unsupported_weight_dtype(void) {
    setup();
    char *p = path_join(dir, "model.safetensors");
    write_raw(p, "{\"model.embed_tokens.weight\":{\"dtype\":\"I32\",\"shape\":[256,64],\"data_offsets\":[0,65536]}}", 65536);
    free(p);
    expect_failure("I32 weight", "model.embed_tokens.weight");
}

/* A GGUF block type in safetensors (U8 rows of whole blocks, named in
 * __metadata__; safetensors.c) that lies: a type we do not know, a tensor
 * not stored as U8 rows, rows that are not whole blocks, a name the file
 * does not hold, a block type for a vector. */
static void test_block_type_lies(void) {
    static const struct { const char *header; size_t bytes; const char *needle; } cases[] = {
        {"{\"__metadata__\":{\"c2t.quant.model.embed_tokens.weight\":\"IQ2_XS\"},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"U8\",\"shape\":[256,68],\"data_offsets\":[0,17408]}}", 17408, "IQ2_XS"},
        {"{\"__metadata__\":{\"c2t.quant.model.embed_tokens.weight\":\"Q8_0\"},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[256,17],\"data_offsets\":[0,17408]}}", 17408,
         "model.embed_tokens.weight"},
        {"{\"__metadata__\":{\"c2t.quant.model.embed_tokens.weight\":\"Q8_0\"},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"U8\",\"shape\":[256,67],\"data_offsets\":[0,17152]}}", 17152,
         "whole 34-byte blocks"},
        {"{\"__metadata__\":{\"c2t.quant.model.embed_tokens.weigh\":\"Q8_0\"},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"U8\",\"shape\":[256,68],\"data_offsets\":[0,17408]}}", 17408,
         "model.embed_tokens.weigh"},
        /* a Q8_0 embedding of the right shape [256, 64] loads; the norm after it is a block-type vector */
        {"{\"__metadata__\":{\"c2t.quant.model.embed_tokens.weight\":\"Q8_0\",\"c2t.quant.model.norm.weight\":\"Q8_0\"},"
         "\"model.embed_tokens.weight\":{\"dtype\":\"U8\",\"shape\":[256,68],\"data_offsets\":[0,17408]},"
         "\"model.norm.weight\":{\"dtype\":\"U8\",\"shape\":[1,68],\"data_offsets\":[17408,17476]}}", 17476,
         "model.norm.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setup();
        char *p = path_join(dir, "model.safetensors");
        write_raw(p, cases[i].header, cases[i].bytes);
        free(p);
        char what[32];
        snprintf(what, sizeof what, "block type case %zu", i);
        expect_failure(what, cases[i].needle);
    }
}

/* A NaN or an infinity among the weights decodes garbage without a word,
 * so loading refuses it naming the tensor and the element: in an F32
 * matrix and vector, a BF16 matrix, and the scales of block types (a
 * Q4_K block's d, a Q4_1 block's minimum, a Q6_K block's d, which it
 * stores last). */
static void test_nonfinite_weights(void) {
    static const struct { const char *src; Poke poke; const char *needle; } cases[] = {
        {"tests/ckpt/llama2_f32", {"model.layers.1.mlp.down_proj.weight", 4 * (172 * 3 + 5), 0x7FC00000u, 4}, "element [3, 5] is NaN"},
        {"tests/ckpt/llama2_f32", {"model.norm.weight", 4 * 7, 0xFF800000u, 4}, "element 7 is NaN or infinite"},
        {"tests/ckpt/llama3_bf16", {"model.layers.0.self_attn.o_proj.weight", 2 * 9, 0x7F80, 2}, "element [0, 9] is NaN"},
        {"tests/ckpt/qwen2_quant", {"model.layers.0.mlp.up_proj.weight", 144 * 1, 0x7E00, 2}, "block at element [1, 0]"},
        {"tests/ckpt/qwen2_quant", {"model.layers.0.self_attn.v_proj.weight", 20 * 8 + 2, 0x7C00, 2}, "block at element [1, 0]"},
        {"tests/ckpt/qwen2_quant", {"model.layers.0.mlp.down_proj.weight", 208, 0xFC00, 2}, "block at element [0, 0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setup_from(cases[i].src);
        rewrite_model_from(cases[i].src, NULL, NULL, &cases[i].poke);
        char what[96];
        snprintf(what, sizeof what, "non-finite %s", cases[i].poke.tensor);
        expect_failure(what, cases[i].poke.tensor);
        CHECK(strstr(err_get(), cases[i].needle), "%s: the error does not say '%s': %s", what, cases[i].needle, err_get());
    }
}

static void test_truncated_file(void) {
    setup();
    char *src = path_join(good, "model.safetensors"), *dst = path_join(dir, "model.safetensors");
    size_t n;
    char *b = read_text_file(src, &n);
    FILE *f = fopen(dst, "wb");
    fwrite(b, 1, n / 2, f);
    fclose(f);
    expect_failure("truncated data", "past end of file");
    f = fopen(dst, "wb");
    fwrite(b, 1, 4, f);
    fclose(f);
    expect_failure("truncated header", "truncated");
    f = fopen(dst, "wb");
    fwrite(b, 1, 40, f);   /* header length says more than there is */
    fclose(f);
    expect_failure("truncated header JSON", "truncated");
    free(b); free(src); free(dst);
}

static void test_malformed_header_json(void) {
    setup();
    char *p = path_join(dir, "model.safetensors");
    write_raw(p, "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],", 0);
    free(p);
    expect_failure("malformed header", "malformed JSON header");
}

static void test_malformed_config(void) {
    setup();
    rewrite_model(NULL, NULL);
    char *cfg = path_join(dir, "config.json");
    write_text(cfg, "{\"hidden_size\": 64, \"num_hidden_layers\": 2,,}");
    expect_failure("malformed config", "config.json");
    write_text(cfg, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_attention_heads\": 4, \"vocab_size\": 256}");
    expect_failure("config without num_hidden_layers", "num_hidden_layers");
    write_text(cfg, "{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 2,"
                    "\"num_attention_heads\": 4, \"vocab_size\": 256, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2}}");
    expect_failure("unsupported rope scaling", "yarn");
    write_text(cfg, "{\"model_type\": \"mistral\", \"sliding_window\": 4096, \"hidden_size\": 64, \"intermediate_size\": 172,"
                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 256}");
    expect_failure("mistral's sliding window", "sliding_window 4096");
    write_text(cfg, "{\"model_type\": \"llama\", \"mlp_bias\": true, \"hidden_size\": 64, \"intermediate_size\": 172,"
                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 256}");
    expect_failure("mlp bias", "mlp_bias");
    /* a window of null (Mistral from v0.2 on) and mlp_bias false load */
    write_text(cfg, "{\"model_type\": \"mistral\", \"sliding_window\": null, \"mlp_bias\": false, \"hidden_size\": 64,"
                    "\"intermediate_size\": 172, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 256}");
    LlamaModel *m = llama_load(dir, &cpu_backend);
    CHECK(m != NULL, "mistral without a window: %s", err_get());
    if (m) llama_free(m);
    free(cfg);
}

static void test_sharded_index_lies(void) {
    setup();
    rewrite_model(NULL, NULL);
    char *idx = path_join(dir, "model.safetensors.index.json");
    write_text(idx, "{\"weight_map\": {\"model.norm.weight\": \"model.safetensors\", "
                    "\"model.extra.weight\": \"model.safetensors\"}}");
    expect_failure("index names a tensor the shard lacks", "model.extra.weight");
    write_text(idx, "{\"weight_map\": {\"model.norm.weight\": \"model-00009-of-00009.safetensors\"}}");
    expect_failure("index names a missing shard", "model-00009-of-00009.safetensors");
    write_text(idx, "{\"weight_map\": {\"model.norm.weight\": \"../../etc/passwd\"}}");
    expect_failure("index names a file outside the checkpoint", "not a file beside the index");
    write_text(idx, "{\"weight_map\": {\"model.norm.weight\": \"/dev/zero\"}}");
    expect_failure("index names an absolute path", "not a file beside the index");
    unlink(idx);
    free(idx);
}

static void test_missing_checkpoint(void) {
    char *cfg = path_join(dir, "config.json"), *m = path_join(dir, "model.safetensors");
    unlink(cfg); unlink(m);
    expect_failure("no config", "config.json");
    free(cfg); free(m);
}

/* A write that fails half-way (here: the file-size limit, as a full disk
 * would) is one error line naming the file, leaves the file that was there
 * intact and no temporary behind. */
static void test_failed_write_keeps_old_file(void) {
    char path[256], tmp[300];
    snprintf(path, sizeof path, "/tmp/c2t_fsize_%d.safetensors", (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    float small[4] = {1, 2, 3, 4};
    StWrite w = {"x", DT_F32, 1, {4}, small};
    REQUIRE(st_write(path, &w, 1) == 0, "%s", err_get());
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {8192, 8192};
        setrlimit(RLIMIT_FSIZE, &rl);
        static float big[65536];
        StWrite wb = {"x", DT_F32, 1, {65536}, big};
        int rc = st_write(path, &wb, 1);
        int named = strstr(err_get(), path) && strstr(err_get(), "write failed") && !strchr(err_get(), '\n');
        _exit(rc == -1 && named ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the failed write was not one error naming the file");
    SafeTensors *s = st_open(path);
    CHECK(s != NULL, "old file lost: %s", err_get());
    const StTensor *t = s ? st_find(s, "x") : NULL;
    CHECK(t && t->shape[0] == 4 && ((const float *)t->data)[3] == 4, "old file changed");
    CHECK(access(tmp, F_OK) != 0, "%s left behind", tmp);
    if (s) st_close(s);
    unlink(path);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_missing_tensor);
    RUN(test_wrong_shape);
    RUN(test_offsets_past_end);
    RUN(test_overlapping_tensors);
    RUN(test_unknown_dtype);
    RUN(test_unsupported_weight_dtype);
    RUN(test_block_type_lies);
    RUN(test_nonfinite_weights);
    RUN(test_truncated_file);
    RUN(test_malformed_header_json);
    RUN(test_malformed_config);
    RUN(test_sharded_index_lies);
    RUN(test_missing_checkpoint);
    RUN(test_failed_write_keeps_old_file);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    return h_done();
}
