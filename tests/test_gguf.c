/* The GGUF reader (infer/model/gguf.c) against files the `gguf` package
 * wrote (tools/golden/gguf_golden.py): every metadata type, string and number
 * arrays, tensor shapes, and F32 / F16 / Q8_0 / Q4_1 / Q4_0 / Q5_0 / Q5_1 /
 * Q4_K / Q5_K / Q6_K values bit for bit equal to gguf.quants.dequantize
 * (llama.cpp's reference; the block types from random block bytes, edge
 * scales included).  Then hostile copies: every truncation, lying counts and
 * lengths, bad offsets; and files made here: rows that are not whole blocks,
 * a data section a byte short, NaN and infinite scales, types not read.
 * And the other way: quant_q4_0_row (spec-convert --dtype q4_0) writes the
 * bytes gguf.quants.quantize writes for Q4_0, edge blocks included, with
 * its F16 scales rounded as the compiler's _Float16 rounds them. */
#include "tests/harness.h"
#include "infer/model/gguf.h"
#include "kernels/base/quant.h"
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
    static const struct { const char *name; int type; int64_t ne0, ne1; } want[] = {
        {"f32", GGML_F32, 64, 3},      {"f16", GGML_F16, 32, 2},      {"q8_0", GGML_Q8_0, 64, 4},
        {"q4_1", GGML_Q4_1, 96, 2},    {"bf16", GGML_BF16, 64, 2},    {"q4_0", GGML_Q4_0, 128, 3},   {"q5_0", GGML_Q5_0, 128, 3},
        {"q5_1", GGML_Q5_1, 128, 3},   {"q4_k", GGML_Q4_K, 1536, 2},  {"q5_k", GGML_Q5_K, 1536, 2},
        {"q6_k", GGML_Q6_K, 1536, 2},  {"iq4_nl", GGML_IQ4_NL, 128, 3}, {"iq4_xs", GGML_IQ4_XS, 1536, 2},
        {"q2_k", GGML_Q2_K, 1536, 2},  {"q3_k", GGML_Q3_K, 1536, 2}};
    const int nwant = (int)(sizeof want / sizeof *want);
    REQUIRE(gguf_n_tensors(g) == nwant, "%d tensors", gguf_n_tensors(g));
    size_t at = 0;
    for (int i = 0; i < nwant; i++) {
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
        printf("# %s: %zu values compared bit for bit, %zu differ\n", want[i].name, n, diff);
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

/* quant_f16_bits against the compiler's conversion to _Float16 (GCC's,
 * round to nearest even): every half value, the midpoints between
 * neighbours (ties) and a float either side of each, 2^24 random bit
 * patterns (NaN compared as NaN: its payload may differ), and the edges
 * (65504, 65520, the subnormals, 2^-25). */
static float f32_of(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static int f16_agrees(float x) {
    const _Float16 c = (_Float16)x;
    uint16_t want, got = quant_f16_bits(x);
    memcpy(&want, &c, 2);
    if (x != x) return (got & 0x7C00u) == 0x7C00u && (got & 0x3FFu) != 0;
    return got == want;
}
static void test_f16_conversion_rounds_as_the_compiler(void) {
    long bad = 0, n = 0;
    float first = 0;
    for (uint32_t h = 0; h < 0x7C00u; h++) {   /* finite halves of both signs, their ties and neighbours */
        for (int sg = 0; sg < 2; sg++) {
            const float lo = quant_half((uint16_t)(h | (sg ? 0x8000u : 0))), hi = quant_half((uint16_t)((h + 1) | (sg ? 0x8000u : 0)));
            const float mid = (float)(((double)lo + (double)hi) / 2);
            const float xs[4] = {lo, mid, nextafterf(mid, 0), nextafterf(mid, 2 * mid)};
            for (int k = 0; k < 4; k++, n++)
                if (!f16_agrees(xs[k]) && !bad++) first = xs[k];
        }
    }
    uint32_t r = 2463534242u;
    for (long i = 0; i < (1L << 24); i++, n++) {
        r ^= r << 13; r ^= r >> 17; r ^= r << 5;
        if (!f16_agrees(f32_of(r)) && !bad++) first = f32_of(r);
    }
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, 1e9f, INFINITY, -INFINITY, NAN, 0x1p-24f, 0x1p-25f,
                           0x1.000002p-25f, 0x1.8p-24f, 0x1.ffcp-15f, 0x1.ffep-15f, 0.0f, -0.0f};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++, n++)
        if (!f16_agrees(edges[i]) && !bad++) first = edges[i];
    CHECK(bad == 0, "%ld of %ld conversions differ from (_Float16), the first of %a", bad, n, (double)first);
    printf("# quant_f16_bits: %ld conversions equal to (_Float16)\n", n);
}

/* q4_0_from.f32's rows quantised here equal q4_0_from.bin byte for byte
 * (zeros, a negative largest value, +m before -m, half steps and the clamp
 * at 15, a scale below F16's subnormals, random rows); each value then
 * dequantises to within half a step of itself; rows not of whole blocks
 * are refused. */
static void test_q4_0_quantisation_equals_gguf(void) {
    size_t nx, nq;
    float *x = (float *)read_text_file(GOLD "q4_0_from.f32", &nx);
    unsigned char *want = (unsigned char *)read_text_file(GOLD "q4_0_from.bin", &nq);
    REQUIRE(x && want, "%s", err_get());
    const int64_t cols = 96, rows = (int64_t)(nx / 4) / cols, rb = quant_row_bytes(DT_Q4_0, cols);
    REQUIRE(rows == 6 && (int64_t)nq == rows * rb, "golden sizes %zu, %zu", nx, nq);
    unsigned char *got = xmalloc(nq);
    for (int64_t r = 0; r < rows; r++) CHECK(quant_q4_0_row(x + r * cols, cols, got + r * rb) == 0, "row %lld", (long long)r);
    int64_t first = -1;
    for (size_t i = 0; i < nq && first < 0; i++)
        if (got[i] != want[i]) first = (int64_t)i;
    CHECK(first < 0, "block %lld differs from gguf.quants.quantize (byte %lld of its 18)", (long long)(first / 18),
          (long long)(first % 18));
    float back[96];
    for (int64_t r = 0; r < rows; r++) {
        REQUIRE(quant_dequant_row(DT_Q4_0, got + r * rb, back, cols) == 0, "%s", err_get());
        for (int j = 0; j < cols; j++) {
            const int64_t b = r * (cols / 32) + j / 32;
            uint16_t h;
            memcpy(&h, got + b * 18, 2);
            const float step = fabsf(quant_half(h)), err = fabsf(back[j] - x[r * cols + j]);
            /* half a step, one more at the clamp; a scale F16 cannot hold
             * (below its subnormals) loses the block */
            CHECK(err <= step * 1.001f + 1e-6f || step == 0, "row %lld element %d: %g back as %g (step %g)",
                  (long long)r, j, x[r * cols + j], back[j], step);
        }
    }
    CHECK(quant_q4_0_row(x, 48, got) == -1 && strstr(err_get(), "whole blocks of 32"), "48 values: %s", err_get());
    free(x); free(want); free(got);
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

/* The block types, as ggml lays them out: elements and bytes per block, and
 * where the block's half-precision scale d lies (and its minimum, if any). */
static const struct { int type; const char *name; int block, bytes, d_at, min_at; } QT[] = {
    {GGML_Q4_0, "Q4_0", 32, 18, 0, -1},    {GGML_Q4_1, "Q4_1", 32, 20, 0, 2},     {GGML_Q5_0, "Q5_0", 32, 22, 0, -1},
    {GGML_Q5_1, "Q5_1", 32, 24, 0, 2},     {GGML_Q8_0, "Q8_0", 32, 34, 0, -1},    {GGML_Q4_K, "Q4_K", 256, 144, 0, 2},
    {GGML_Q5_K, "Q5_K", 256, 176, 0, 2},   {GGML_Q6_K, "Q6_K", 256, 210, 208, -1}, {GGML_Q2_K, "Q2_K", 256, 84, 80, 82},
    {GGML_Q3_K, "Q3_K", 256, 110, 108, -1}};
#define N_QT (int)(sizeof QT / sizeof *QT)

typedef struct { const char *name; int type; uint64_t ne0, ne1; } Made;

/* A GGUF v3 file made here: no metadata, the tensors (all at offset 0 of
 * the data section), then the ndata bytes given as the data section.
 * Returns its path. */
static const char *made_file(const Made *t, int nt, const unsigned char *data, size_t ndata) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/c2t_gguf_made_%d.gguf", (int)getpid());
    unsigned char head[1024];
    size_t n = 0;
#define PUT(v) do { memcpy(head + n, &(v), sizeof(v)); n += sizeof(v); } while (0)
    const uint32_t version = 3, two = 2;
    const uint64_t ntensors = (uint64_t)nt, nkv = 0, zero = 0;
    memcpy(head, "GGUF", 4);
    n = 4;
    PUT(version); PUT(ntensors); PUT(nkv);
    for (int i = 0; i < nt; i++) {
        const uint64_t len = strlen(t[i].name);
        const uint32_t type = (uint32_t)t[i].type;
        PUT(len);
        memcpy(head + n, t[i].name, len);
        n += len;
        PUT(two); PUT(t[i].ne0); PUT(t[i].ne1); PUT(type); PUT(zero);
    }
#undef PUT
    while (n % 32) head[n++] = 0;
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    fwrite(head, 1, n, f);
    if (ndata) fwrite(data, 1, ndata, f);
    fclose(f);
    return path;
}

/* err is one line naming the file, the tensor and what */
static int names(const char *err, const char *path, const char *tensor, const char *what) {
    char t[64];
    snprintf(t, sizeof t, "tensor %s:", tensor);
    return !strchr(err, '\n') && strstr(err, path) && strstr(err, t) && strstr(err, what);
}

/* random block bytes whose half-precision scales (d, and the minimum) are
 * 1/128 and 1 (random bytes there could be NaN) */
static void fill_blocks(unsigned char *b, int q, int nblocks, unsigned seed) {
    for (int k = 0; k < nblocks * QT[q].bytes; k++) {
        seed = seed * 1103515245u + 12345u;
        b[k] = (unsigned char)(seed >> 16);
    }
    for (int k = 0; k < nblocks; k++) {
        const uint16_t d = 0x2000, m = 0x3C00;
        memcpy(b + k * QT[q].bytes + QT[q].d_at, &d, 2);
        if (QT[q].min_at >= 0) memcpy(b + k * QT[q].bytes + QT[q].min_at, &m, 2);
    }
}

/* K-type rows of 288 (whole blocks of 32, not of 256), 32-type rows of 48:
 * refused when the file is opened, in one line naming the file, the tensor,
 * its type and the block. */
static void test_rows_must_be_whole_blocks(void) {
    static unsigned char data[4096];
    for (int q = 0; q < N_QT; q++) {
        const uint64_t ne0 = QT[q].block == 256 ? 288 : 48;
        Made t = {"blk.0.ffn_down.weight", QT[q].type, ne0, 2};
        const char *path = made_file(&t, 1, data, sizeof data);
        Gguf *g = gguf_open(path);
        char want[64];
        snprintf(want, sizeof want, "%s rows of %d are not whole blocks of %d", QT[q].name, (int)ne0, QT[q].block);
        CHECK(!g && names(err_get(), path, t.name, want), "%s: %s", QT[q].name, g ? "opened" : err_get());
        gguf_close(g);
        t.ne0 = (uint64_t)QT[q].block;   /* one whole block a row opens */
        g = gguf_open(made_file(&t, 1, data, sizeof data));
        CHECK(g, "%s, one block a row: %s", QT[q].name, err_get());
        gguf_close(g);
        unlink(path);
    }
}

/* A tensor of 2 x 2 blocks whose data section is one byte short: refused
 * when opened, naming the file and the tensor; with that byte it reads. */
static void test_data_section_a_byte_short(void) {
    static unsigned char data[4 * 256];
    for (int q = 0; q < N_QT; q++) {
        const size_t need = 4 * (size_t)QT[q].bytes;
        fill_blocks(data, q, 4, 7u + (unsigned)q);
        const Made t = {"w", QT[q].type, 2 * (uint64_t)QT[q].block, 2};
        const char *path = made_file(&t, 1, data, need - 1);
        Gguf *g = gguf_open(path);
        CHECK(!g && names(err_get(), path, "w", "do not lie in"), "%s short: %s", QT[q].name, g ? "opened" : err_get());
        gguf_close(g);
        g = gguf_open(made_file(&t, 1, data, need));
        REQUIRE(g, "%s whole: %s", QT[q].name, err_get());
        const GgufTensor *w = gguf_find_tensor(g, "w");
        REQUIRE(w && w->bytes == need, "%s: %llu bytes, want %zu", QT[q].name, w ? (unsigned long long)w->bytes : 0ULL, need);
        float v[4 * 256];
        CHECK(gguf_tensor_f32(g, w, v) == 0, "%s: %s", QT[q].name, err_get());
        gguf_close(g);
        unlink(path);
    }
}

/* A file of no tensors may end right after its metadata, before the
 * padding that would start a data section (llama.cpp's vocabulary-only
 * files do); a file with a tensor may not. */
static void test_no_tensors_no_padding(void) {
    const char *path = made_file(NULL, 0, NULL, 0);
    CHECK(truncate(path, 24) == 0, "cannot truncate %s", path);
    Gguf *g = gguf_open(path);
    CHECK(g && gguf_n_tensors(g) == 0, "no tensors, no padding: %s", g ? "" : err_get());
    gguf_close(g);
    static unsigned char data[34];
    const Made t = {"w", GGML_Q8_0, 32, 1};
    path = made_file(&t, 1, data, 0);
    g = gguf_open(path);
    CHECK(!g && strstr(err_get(), "do not lie in"), "a tensor without its data: %s", g ? "opened" : err_get());
    gguf_close(g);
    unlink(path);
}

/* Two tensors of one name: refused naming it (the reader would take the
 * first and leave the second unread). */
static void test_duplicate_tensor_refused(void) {
    static unsigned char data[2 * 34];
    const Made t[2] = {{"w", GGML_Q8_0, 32, 1}, {"w", GGML_Q8_0, 32, 1}};
    const char *path = made_file(t, 2, data, sizeof data);
    Gguf *g = gguf_open(path);
    CHECK(!g && strstr(err_get(), "tensor 'w' appears twice") && strstr(err_get(), path), "duplicate: %s",
          g ? "opened" : err_get());
    gguf_close(g);
    unlink(path);
}

/* A NaN or infinite scale is not refused, as ggml does not refuse it (and
 * this reader never did for Q8_0, nor for an F32 or F16 NaN): the block
 * comes out as ggml computes it, NaN for a NaN d or minimum, inf or NaN
 * (inf times a zero integer) for an infinite d; the other block is
 * untouched. */
static void test_nan_and_inf_scales_pass_through(void) {
    static unsigned char data[2 * 256];
    static float v[2 * 256];
    static const struct { const char *what; uint16_t half; int at_min; } bad[] = {
        {"NaN d", 0x7E00, 0}, {"-NaN d", 0xFE01, 0}, {"inf d", 0x7C00, 0}, {"NaN minimum", 0x7E00, 1}};
    for (int q = 0; q < N_QT; q++)
        for (int c = 0; c < 4; c++) {
            if (bad[c].at_min && QT[q].min_at < 0) continue;
            const int block = QT[q].block;
            fill_blocks(data, q, 2, 11u + (unsigned)q);
            memcpy(data + (bad[c].at_min ? QT[q].min_at : QT[q].d_at), &bad[c].half, 2);
            const Made t = {"w", QT[q].type, 2 * (uint64_t)block, 1};
            const char *path = made_file(&t, 1, data, 2 * (size_t)QT[q].bytes);
            Gguf *g = gguf_open(path);
            REQUIRE(g, "%s %s: %s", QT[q].name, bad[c].what, err_get());
            CHECK(gguf_tensor_f32(g, gguf_tensor(g, 0), v) == 0, "%s %s: %s", QT[q].name, bad[c].what, err_get());
            int finite0 = 0, nan0 = 0, finite1 = 0;
            for (int j = 0; j < block; j++) {
                finite0 += isfinite(v[j]) != 0;
                nan0 += isnan(v[j]) != 0;
                finite1 += isfinite(v[block + j]) != 0;
            }
            CHECK(finite0 == 0, "%s %s: %d finite values in its block", QT[q].name, bad[c].what, finite0);
            if (bad[c].half != 0x7C00) CHECK(nan0 == block, "%s %s: %d of %d NaN", QT[q].name, bad[c].what, nan0, block);
            CHECK(finite1 == block, "%s %s: the next block has %d of %d finite", QT[q].name, bad[c].what, finite1, block);
            gguf_close(g);
            unlink(path);
        }
}

/* The block types are read as stored, the runtime's own types (IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K here). */
static void test_blocks_read_as_stored(void) {
    Gguf *g = gguf_open(GOLD "small.gguf");
    REQUIRE(g, "%s", err_get());
    const struct { const char *name; DType dt; } want[5] = {
        {"iq4_nl", DT_IQ4_NL}, {"iq4_xs", DT_IQ4_XS}, {"q2_k", DT_Q2_K}, {"q3_k", DT_Q3_K}, {"q4_k", DT_Q4_K}};
    for (int i = 0; i < 5; i++) {
        const GgufTensor *t = gguf_find_tensor(g, want[i].name);
        REQUIRE(t && gguf_tensor_dtype(t) == want[i].dt, "%s is read as %s", want[i].name, dtype_name(want[i].dt));
        CHECK(t->bytes == (uint64_t)(t->ne[0] * t->ne[1] / quant_block_elems(want[i].dt)) * quant_block_bytes(want[i].dt),
              "%s stored as %llu bytes", want[i].name, (unsigned long long)t->bytes);
        uint8_t *b = malloc((size_t)t->bytes);
        REQUIRE(gguf_tensor_blocks(g, t, b) == 0, "%s", err_get());
        CHECK(!memcmp(b, gguf_tensor_data(g, t), (size_t)t->bytes), "%s's blocks are not its bytes", want[i].name);
        free(b);
    }
    gguf_close(g);
}

/* Tensors of types the reader does not dequantise are listed; reading one
 * is one line naming the file, the tensor and the type. */
static void test_types_not_read_are_refused_by_name(void) {
    static unsigned char data[144];
    fill_blocks(data, 5, 1, 3u);   /* QT[5] is Q4_K */
    const Made t[4] = {{"iq2xs", 17, 256, 1}, {"iq3s", 21, 256, 1}, {"odd", 99, 4, 1}, {"q4k", GGML_Q4_K, 256, 1}};
    const char *path = made_file(t, 4, data, sizeof data);
    Gguf *g = gguf_open(path);
    REQUIRE(g, "%s", err_get());
    REQUIRE(gguf_n_tensors(g) == 4, "%d tensors", gguf_n_tensors(g));
    const char *want[3] = {"ggml type 17 (IQ2_XS) is not supported", "ggml type 21 (IQ3_S) is not supported",
                           "ggml type 99 (unknown) is not supported"};
    float v[256];
    for (int i = 0; i < 3; i++) {
        const GgufTensor *x = gguf_find_tensor(g, t[i].name);
        REQUIRE(x && x->type == t[i].type, "%s listed", t[i].name);
        CHECK(gguf_tensor_f32(g, x, v) == -1 && names(err_get(), path, t[i].name, want[i]), "%s: %s", t[i].name,
              err_get());
    }
    CHECK(gguf_tensor_f32(g, gguf_find_tensor(g, "q4k"), v) == 0, "q4k: %s", err_get());
    CHECK(!strcmp(gguf_type_name(GGML_Q6_K), "Q6_K") && !strcmp(gguf_type_name(4), "unknown") &&
          !strcmp(gguf_type_name(-1), "unknown") && !strcmp(gguf_type_name(1000), "unknown"), "type names");
    gguf_close(g);
    unlink(path);
}

int main(void) {
    RUN(test_metadata);
    RUN(test_tensors_equal_llamacpp_dequantisation);
    RUN(test_blocks_read_as_stored);
    RUN(test_f16_conversion_rounds_as_the_compiler);
    RUN(test_q4_0_quantisation_equals_gguf);
    RUN(test_hostile_copies);
    RUN(test_rows_must_be_whole_blocks);
    RUN(test_data_section_a_byte_short);
    RUN(test_no_tensors_no_padding);
    RUN(test_duplicate_tensor_refused);
    RUN(test_nan_and_inf_scales_pass_through);
    RUN(test_types_not_read_are_refused_by_name);
    return h_done();
}
