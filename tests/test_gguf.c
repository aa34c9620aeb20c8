/* The GGUF reader (infer/model/gguf.c) against files the `gguf` package
 * wrote (tools/golden/gguf_golden.py): every metadata type, string and number
 * arrays, tensor shapes, and F32 / F16 / Q8_0 / Q4_1 values bit for bit
 * equal to gguf.quants.dequantize (llama.cpp's reference).  Then hostile
 * copies: every truncation, lying counts and lengths, bad offsets. */
#include "tests/harness.h"
#include "infer/model/gguf.h"
#include "kernels/base/util.h"

#define GOLD "tests/golden/gguf/"

static void test_metadata(void) {
    Gguf *g = gguf_open(GOLD "small.gguf");
    REQUIRE(g, "%s", err_get());
    CHECK(gguf_version(g) == 3, "version %d", gguf_version(g));
    int64_t v;
    double d;
    CHECK(gguf_get_i64(g, "t.u8", &v) == 0 && v == 200, "u8");
    CHECK(gguf_get_i64(g, "t.i8", &v) == 0 && v == -100, "i8");
    CHECK(gguf_get_i64(g, "t.u16", &v) == 0 && v == 60000, "u16");
    CHECK(gguf_get_i64(g, "t.i16", &v) == 0 && v == -30000, "i16");
    CHECK(gguf_get_i64(g, "t.u32", &v) == 0 && v == 4000000000LL, "u32");
    CHECK(gguf_get_i64(g, "t.i32", &v) == 0 && v == -2000000000LL, "i32");
    CHECK(gguf_get_i64(g, "t.u64", &v) == 0 && v == (1LL << 40) + 3, "u64");
    CHECK(gguf_get_i64(g, "t.i64", &v) == 0 && v == -(1LL << 50) - 7, "i64");
    CHECK(gguf_get_i64(g, "t.bool", &v) == 0 && v == 1, "bool");
    CHECK(gguf_get_f64(g, "t.f32", &d) == 0 && d == 0.15625, "f32 %g", d);
    CHECK(gguf_get_f64(g, "t.f64", &d) == 0 && d == -1.0e100, "f64 %g", d);
    CHECK(gguf_get_i64(g, "t.f32", &v) == -1, "a float read as an integer");
    CHECK(gguf_get_i64(g, "no.such.key", &v) == -1 && strstr(err_get(), "no.such.key"), "missing key: %s", err_get());
    char *s = gguf_get_str(g, "t.str");
    CHECK(s && !strcmp(s, "h\xc3\xa9llo \xe2\x96\x81world"), "string '%s'", s ? s : "(null)");
    free(s);
    const GgufKV *kv = gguf_find(g, "t.strs");
    REQUIRE(kv && kv->type == GGUF_ARRAY && kv->elem_type == GGUF_STRING && kv->n == 4, "string array");
    const char *want[4] = {"a", "", "\xc4\xa0the", "<|im_start|>"};
    for (int i = 0; i < 4; i++) {
        const char *e;
        uint64_t n;
        CHECK(gguf_arr_str(kv, (uint64_t)i, &e, &n) == 0 && n == strlen(want[i]) && !memcmp(e, want[i], n),
              "strs[%d]", i);
    }
    const char *e;
    uint64_t n;
    CHECK(gguf_arr_str(kv, 4, &e, &n) == -1, "past the end of a string array");
    kv = gguf_find(g, "t.f32s");
    double x0, x1, x2;
    CHECK(kv && gguf_arr_num(kv, 0, &x0) == 0 && gguf_arr_num(kv, 1, &x1) == 0 && gguf_arr_num(kv, 2, &x2) == 0 &&
          x0 == 1.5 && x1 == -2.25 && x2 == 3.0 && gguf_arr_num(kv, 3, &x0) == -1, "float array");
    char *arch = gguf_get_str(g, "general.architecture");
    CHECK(arch && !strcmp(arch, "llama"), "architecture");
    free(arch);
    gguf_close(g);
}

static void test_tensors_equal_llamacpp_dequantisation(void) {
    Gguf *g = gguf_open(GOLD "small.gguf");
    REQUIRE(g, "%s", err_get());
    size_t nexp = 0;
    float *exp = (float *)read_text_file(GOLD "small.expected.f32", &nexp);
    REQUIRE(exp, "%s", err_get());
    nexp /= 4;
    static const struct { const char *name; int type; int64_t ne0, ne1; } want[4] = {
        {"f32", GGML_F32, 64, 3}, {"f16", GGML_F16, 32, 2}, {"q8_0", GGML_Q8_0, 64, 4}, {"q4_1", GGML_Q4_1, 96, 2}};
    REQUIRE(gguf_n_tensors(g) == 4, "%d tensors", gguf_n_tensors(g));
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        const GgufTensor *t = gguf_find_tensor(g, want[i].name);
        REQUIRE(t && t->type == want[i].type && t->n_dims == 2 && t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1,
                "tensor %s: type/shape", want[i].name);
        size_t n = (size_t)(t->ne[0] * t->ne[1]);
        REQUIRE(at + n <= nexp, "expected values run out");
        float *v = malloc(n * sizeof *v);
        REQUIRE(gguf_tensor_f32(g, t, v) == 0, "%s", err_get());
        size_t diff = 0;
        for (size_t j = 0; j < n; j++) diff += memcmp(&v[j], &exp[at + j], 4) != 0;
        CHECK(diff == 0, "%s: %zu of %zu values differ from gguf.quants.dequantize", want[i].name, diff, n);
        at += n;
        free(v);
    }
    CHECK(at == nexp, "expected file holds %zu values, tensors %zu", nexp, at);
    free(exp);
    gguf_close(g);
}

/* Writes bytes to a temp file and opens it: must fail in one line naming it,
 * or succeed; never crash (ASan checks the reads). */
static int open_bytes(const unsigned char *b, size_t n, char *err, size_t errlen) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/c2t_gguf_%d.gguf", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return -2;
    fwrite(b, 1, n, f);
    fclose(f);
    Gguf *g = gguf_open(path);
    int ok = g != NULL;
    if (g) {
        for (int i = 0; i < gguf_n_tensors(g); i++) {
            const GgufTensor *t = gguf_tensor(g, i);
            float *v = malloc(sizeof(float) * (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]));
            gguf_tensor_f32(g, t, v);
            free(v);
        }
        gguf_close(g);
    } else {
        snprintf(err, errlen, "%s", err_get());
    }
    unlink(path);
    return ok;
}

static void test_hostile_copies(void) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)read_text_file(GOLD "small.gguf", &n);
    REQUIRE(b, "%s", err_get());
    char err[1024];
    int bad_msgs = 0, opened = 0;
    for (size_t len = 0; len < n; len++) {   /* every truncation */
        int ok = open_bytes(b, len, err, sizeof err);
        if (ok) {
            /* only the writer's zero padding after the last tensor may go */
            int padding_only = n - len < 32;
            for (size_t j = len; j < n && padding_only; j++) padding_only = b[j] == 0;
            if (!padding_only) opened++;
        } else if (!strstr(err, "/tmp/c2t_gguf_") || strchr(err, '\n')) bad_msgs++;
    }
    CHECK(opened == 0, "%d truncated copies that lack tensor bytes opened", opened);
    CHECK(bad_msgs == 0, "%d truncations without a one-line error naming the file", bad_msgs);
    /* lying counts: the tensor count and metadata count set huge */
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    memset(c + 8, 0xFF, 8);
    CHECK(!open_bytes(c, n, err, sizeof err) && strstr(err, "cannot fit"), "huge tensor count: %s", err);
    memcpy(c, b, n);
    memset(c + 16, 0x7F, 8);
    CHECK(!open_bytes(c, n, err, sizeof err) && strstr(err, "cannot fit"), "huge metadata count: %s", err);
    memcpy(c, b, n);
    c[4] = 9;
    CHECK(!open_bytes(c, n, err, sizeof err) && strstr(err, "version 9"), "version 9: %s", err);
    memcpy(c, b, n);
    c[0] = 'X';
    CHECK(!open_bytes(c, n, err, sizeof err) && strstr(err, "not a GGUF"), "bad magic: %s", err);
    /* the first key's length set past the end of the file */
    memcpy(c, b, n);
    memset(c + 24, 0x7F, 8);
    CHECK(!open_bytes(c, n, err, sizeof err) && strstr(err, "remain"), "lying key length: %s", err);
    /* every single byte of the header flipped in turn: open or refuse, never crash */
    int flips = 0;
    for (size_t i = 0; i < n && i < 1200; i++) {
        memcpy(c, b, n);
        c[i] ^= 0xA5;
        open_bytes(c, n, err, sizeof err);
        flips++;
    }
    printf("# %zu truncations refused; %d byte flips survived\n", n, flips);
    free(c);
    free(b);
}

int main(void) {
    RUN(test_metadata);
    RUN(test_tensors_equal_llamacpp_dequantisation);
    RUN(test_hostile_copies);
    return h_done();
}
