/* GGUF reader (infer/model/gguf.h).  Layout, little-endian: "GGUF", version
 * u32, tensor count u64, metadata count u64; then each metadata pair (key as
 * u64 length + bytes, type u32, value; an array is element type u32, count
 * u64, elements); then each tensor's name, n_dims u32, dims u64[n_dims],
 * type u32 and data offset u64; then, at the next multiple of
 * general.alignment (default 32), the data section. */
#include "infer/model/gguf.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct Gguf {
    char *path;
    const uint8_t *map;
    size_t size;
    int version;
    int n_kv, n_tensors;
    GgufKV *kv;
    GgufTensor *tensors;
    const uint8_t *data;   /* start of the data section */
};

typedef struct { const uint8_t *p, *end; const char *path; } Cur;

static int take(Cur *c, size_t n, const uint8_t **out, const char *what) {
    if ((size_t)(c->end - c->p) < n) {
        err_set("%s: truncated: %s needs %zu bytes, %zu remain", c->path, what, n, (size_t)(c->end - c->p));
        return -1;
    }
    *out = c->p;
    c->p += n;
    return 0;
}
static int u32(Cur *c, uint32_t *v, const char *what) {
    const uint8_t *p;
    if (take(c, 4, &p, what)) return -1;
    memcpy(v, p, 4);
    return 0;
}
static int u64(Cur *c, uint64_t *v, const char *what) {
    const uint8_t *p;
    if (take(c, 8, &p, what)) return -1;
    memcpy(v, p, 8);
    return 0;
}
/* a GGUF string: u64 length + bytes (not NUL-terminated) */
static int str(Cur *c, const uint8_t **s, uint64_t *len, const char *what) {
    if (u64(c, len, what)) return -1;
    if (*len > (uint64_t)(c->end - c->p)) {
        err_set("%s: %s: string of %llu bytes, %zu remain", c->path, what, (unsigned long long)*len,
                (size_t)(c->end - c->p));
        return -1;
    }
    return take(c, (size_t)*len, s, what);
}

/* a string as a NUL-terminated copy (names and keys) */
static char *str_copy(Cur *c, const char *what) {
    const uint8_t *s;
    uint64_t len;
    if (str(c, &s, &len, what)) return NULL;
    char *out = xmalloc((size_t)len + 1);
    memcpy(out, s, (size_t)len);
    out[len] = 0;
    return out;
}

static size_t scalar_size(int t) {
    static const size_t sz[GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t >= 0 && t < GGUF_NTYPES ? sz[t] : 0;
}

/* Steps over one value (arrays one level deep), recording where it is and,
 * for a string array, where each element starts. */
static int value(Cur *c, GgufKV *kv) {
    if (kv->type == GGUF_STRING) {
        const uint8_t *s;
        uint64_t n;
        kv->data = c->p;
        return str(c, &s, &n, kv->key);
    }
    if (kv->type != GGUF_ARRAY) {
        size_t sz = scalar_size(kv->type);
        if (!sz) { err_set("%s: key %s: unknown value type %d", c->path, kv->key, kv->type); return -1; }
        return take(c, sz, &kv->data, kv->key);
    }
    uint32_t et;
    if (u32(c, &et, kv->key) || u64(c, &kv->n, kv->key)) return -1;
    kv->elem_type = (int)et;
    kv->data = c->p;
    if (et == GGUF_STRING) {
        /* each element is at least its 8-byte length */
        if (kv->n > (uint64_t)(c->end - c->p) / 8) {
            err_set("%s: key %s: %llu strings cannot fit in the %zu bytes left", c->path, kv->key,
                    (unsigned long long)kv->n, (size_t)(c->end - c->p));
            return -1;
        }
        kv->str_offs = xmalloc(sizeof(uint64_t) * (size_t)(kv->n ? kv->n : 1));
        for (uint64_t i = 0; i < kv->n; i++) {
            kv->str_offs[i] = (uint64_t)(c->p - kv->data);
            const uint8_t *s;
            uint64_t n;
            if (str(c, &s, &n, kv->key)) return -1;
        }
        return 0;
    }
    size_t sz = scalar_size((int)et);
    if (!sz) { err_set("%s: key %s: arrays of type %u are not supported", c->path, kv->key, et); return -1; }
    if (kv->n > (uint64_t)(c->end - c->p) / sz) {
        err_set("%s: key %s: %llu elements of %zu bytes, %zu bytes left", c->path, kv->key,
                (unsigned long long)kv->n, sz, (size_t)(c->end - c->p));
        return -1;
    }
    const uint8_t *p;
    return take(c, (size_t)kv->n * sz, &p, kv->key);
}

/* ggml's type names by number (gaps: numbers ggml no longer uses) */
static const char *const TYPE_NAMES[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
    "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16",
    "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4", "NVFP4",
    "Q1_0"};

const char *gguf_type_name(int type) {
    const int n = (int)(sizeof TYPE_NAMES / sizeof *TYPE_NAMES);
    return type >= 0 && type < n && TYPE_NAMES[type] ? TYPE_NAMES[type] : "unknown";
}

/* the types gguf_tensor_f32 reads, as the kernels' DType (kernels/base/quant.h
 * holds their layouts and the one dequantiser); DT_COUNT for the others */
static DType read_type(int type) {
    switch (type) {
    case GGML_F32: return DT_F32;
    case GGML_F16: return DT_F16;
    case GGML_BF16: return DT_BF16;
    case GGML_Q4_0: return DT_Q4_0;
    case GGML_Q4_1: return DT_Q4_1;
    case GGML_Q5_0: return DT_Q5_0;
    case GGML_Q5_1: return DT_Q5_1;
    case GGML_Q8_0: return DT_Q8_0;
    case GGML_Q4_K: return DT_Q4_K;
    case GGML_Q5_K: return DT_Q5_K;
    case GGML_Q6_K: return DT_Q6_K;
    case GGML_IQ4_NL: return DT_IQ4_NL;
    case GGML_IQ4_XS: return DT_IQ4_XS;
    case GGML_Q2_K: return DT_Q2_K;
    case GGML_Q3_K: return DT_Q3_K;
    default: return DT_COUNT;
    }
}

DType gguf_tensor_dtype(const GgufTensor *t) { return read_type(t->type); }

/* bytes of a tensor of n elements (whole blocks) as stored, or 0 for a type we do not read */
static uint64_t tensor_bytes(int type, uint64_t n) {
    const DType t = read_type(type);
    return t == DT_COUNT ? 0 : n / (uint64_t)quant_block_elems(t) * quant_block_bytes(t);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* -1 with a line naming the first name of names[0..n) given twice (what
 * would take the first and ignore the second: a lying file, which ggml
 * refuses too) */
static int unique_names(const Gguf *g, const char **names, int n, const char *what) {
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) {
            err_set("%s: %s '%s' appears twice", g->path, what, names[i]);
            return -1;
        }
    return 0;
}

static int names_unique(const Gguf *g) {
    const int most = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    const char **names = xmalloc(sizeof *names * (size_t)(most + 1));
    for (int i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
    int rc = unique_names(g, names, g->n_kv, "metadata key");
    for (int i = 0; !rc && i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    if (!rc) rc = unique_names(g, names, g->n_tensors, "tensor");
    free(names);
    return rc;
}

static int parse(Gguf *g) {
    Cur c = {g->map, g->map + g->size, g->path};
    const uint8_t *magic;
    uint32_t version;
    uint64_t nt, nkv;
    if (take(&c, 4, &magic, "magic") || memcmp(magic, "GGUF", 4)) {
        err_set("%s: not a GGUF file (no GGUF magic)", g->path);
        return -1;
    }
    if (u32(&c, &version, "version") || u64(&c, &nt, "tensor count") || u64(&c, &nkv, "metadata count")) return -1;
    if (version != 2 && version != 3) { err_set("%s: GGUF version %u (this reader knows 2 and 3)", g->path, version); return -1; }
    g->version = (int)version;
    /* each pair and each tensor takes at least 12 bytes */
    if (nkv > g->size / 12 || nt > g->size / 12) {
        err_set("%s: %llu metadata pairs and %llu tensors cannot fit in %zu bytes", g->path,
                (unsigned long long)nkv, (unsigned long long)nt, g->size);
        return -1;
    }
    g->kv = xcalloc((size_t)nkv + 1, sizeof *g->kv);
    uint64_t alignment = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        GgufKV *kv = &g->kv[i];
        uint32_t t;
        char *key = str_copy(&c, "metadata key");
        if (!key) return -1;
        kv->key = key;
        g->n_kv = (int)i + 1;
        if (u32(&c, &t, key)) return -1;
        kv->type = (int)t;
        kv->n = 1;
        if (value(&c, kv)) return -1;
        if (!strcmp(key, "general.alignment")) {
            int64_t a;
            if (gguf_get_i64(g, key, &a) || a < 1 || a > 65536 || (a & (a - 1))) {
                err_set("%s: general.alignment must be a power of two up to 65536", g->path);
                return -1;
            }
            alignment = (uint64_t)a;
        }
    }
    g->tensors = xcalloc((size_t)nt + 1, sizeof *g->tensors);
    for (uint64_t i = 0; i < nt; i++) {
        GgufTensor *t = &g->tensors[i];
        uint32_t nd, type;
        char *name = str_copy(&c, "tensor name");
        if (!name) return -1;
        t->name = name;
        g->n_tensors = (int)i + 1;
        if (u32(&c, &nd, name)) return -1;
        if (nd < 1 || nd > 4) { err_set("%s: tensor %s: %u dimensions", g->path, name, nd); return -1; }
        t->n_dims = (int)nd;
        uint64_t n = 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t e;
            if (u64(&c, &e, name)) return -1;
            if (e == 0 || e > ((uint64_t)1 << 40) || n > ((uint64_t)1 << 40) / e) {
                err_set("%s: tensor %s: dimension %u of %llu is outside what a file can hold", g->path, name, d,
                        (unsigned long long)e);
                return -1;
            }
            t->ne[d] = (int64_t)e;
            n *= e;
        }
        if (u32(&c, &type, name) || u64(&c, &t->offset, name)) return -1;
        t->type = (int)type;
        const DType dt = read_type(t->type);
        if (dt != DT_COUNT && quant_row_bytes(dt, t->ne[0]) < 0) {
            err_set("%s: tensor %s: %s rows of %lld are not whole blocks of %lld", g->path, name,
                    gguf_type_name(t->type), (long long)t->ne[0], (long long)quant_block_elems(dt));
            return -1;
        }
        t->bytes = tensor_bytes(t->type, n);
    }
    if (names_unique(g)) return -1;
    size_t head = (size_t)(c.p - g->map);
    size_t start = (size_t)((head + alignment - 1) / alignment * alignment);
    /* a file of no tensors (llama.cpp's vocabulary-only files) may end before the padding */
    if (start > g->size && !g->n_tensors) start = g->size;
    if (start > g->size) { err_set("%s: truncated before the data section", g->path); return -1; }
    g->data = g->map + start;
    size_t data_size = g->size - start;
    for (int i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        if (t->offset % alignment || t->offset > data_size || t->bytes > data_size - t->offset) {
            err_set("%s: tensor %s: %llu bytes at offset %llu do not lie in the %zu-byte data section (aligned to %llu)",
                    g->path, t->name, (unsigned long long)t->bytes, (unsigned long long)t->offset, data_size,
                    (unsigned long long)alignment);
            return -1;
        }
    }
    return 0;
}

Gguf *gguf_open(const char *path) {
    Gguf *g = xcalloc(1, sizeof *g);
    g->path = xstrdup(path);
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        err_set("%s: cannot open: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        gguf_close(g);
        return NULL;
    }
    g->size = (size_t)sb.st_size;
    if (g->size) {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) { err_set("%s: cannot map: %s", path, strerror(errno)); close(fd); gguf_close(g); return NULL; }
        g->map = m;
    }
    close(fd);
    if (!g->map || parse(g)) {
        if (!g->map) err_set("%s: empty file", path);
        gguf_close(g);
        return NULL;
    }
    return g;
}

void gguf_close(Gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) { free((void *)g->kv[i].key); free(g->kv[i].str_offs); }
    for (int i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    free(g->kv); free(g->tensors);
    if (g->map) munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
}

int gguf_version(const Gguf *g) { return g->version; }
int gguf_n_kv(const Gguf *g) { return g->n_kv; }
const GgufKV *gguf_kv(const Gguf *g, int i) { return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }
int gguf_n_tensors(const Gguf *g) { return g->n_tensors; }
const GgufTensor *gguf_tensor(const Gguf *g, int i) { return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL; }

const GgufKV *gguf_find(const Gguf *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const GgufTensor *gguf_find_tensor(const Gguf *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* a numeric scalar of type t at p as a double; -1 if t is not numeric */
static int num_at(int t, const uint8_t *p, double *out) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f; uint64_t u64;
            int64_t i64; double d; } v;
    size_t sz = scalar_size(t);
    if (!sz || t == GGUF_STRING || t == GGUF_ARRAY) return -1;
    memcpy(&v, p, sz);
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: *out = v.u8; break;
    case GGUF_I8: *out = v.i8; break;
    case GGUF_U16: *out = v.u16; break;
    case GGUF_I16: *out = v.i16; break;
    case GGUF_U32: *out = v.u32; break;
    case GGUF_I32: *out = v.i32; break;
    case GGUF_F32: *out = v.f; break;
    case GGUF_U64: *out = (double)v.u64; break;
    case GGUF_I64: *out = (double)v.i64; break;
    case GGUF_F64: *out = v.d; break;
    default: return -1;
    }
    return 0;
}

int gguf_get_f64(const Gguf *g, const char *key, double *out) {
    const GgufKV *kv = gguf_find(g, key);
    if (!kv || num_at(kv->type, kv->data, out)) { err_set("%s: no number %s", g->path, key); return -1; }
    return 0;
}

int gguf_get_i64(const Gguf *g, const char *key, int64_t *out) {
    const GgufKV *kv = gguf_find(g, key);
    double d;
    if (!kv || kv->type == GGUF_F32 || kv->type == GGUF_F64 || num_at(kv->type, kv->data, &d)) {
        err_set("%s: no integer %s", g->path, key);
        return -1;
    }
    if (kv->type == GGUF_U64 || kv->type == GGUF_I64) {
        memcpy(out, kv->data, 8);   /* exact beyond 2^53 */
        if (kv->type == GGUF_U64 && *out < 0) { err_set("%s: %s does not fit in 63 bits", g->path, key); return -1; }
    } else {
        *out = (int64_t)d;
    }
    return 0;
}

char *gguf_get_str(const Gguf *g, const char *key) {
    const GgufKV *kv = gguf_find(g, key);
    if (!kv || kv->type != GGUF_STRING) { err_set("%s: no string %s", g->path, key); return NULL; }
    uint64_t len;
    memcpy(&len, kv->data, 8);
    char *s = xmalloc((size_t)len + 1);
    memcpy(s, kv->data + 8, (size_t)len);
    s[len] = 0;
    return s;
}

int gguf_arr_str(const GgufKV *kv, uint64_t i, const char **s, uint64_t *len) {
    if (kv->type != GGUF_ARRAY || kv->elem_type != GGUF_STRING || i >= kv->n || !kv->str_offs) return -1;
    const uint8_t *p = kv->data + kv->str_offs[i];
    memcpy(len, p, 8);
    *s = (const char *)p + 8;
    return 0;
}

int gguf_arr_num(const GgufKV *kv, uint64_t i, double *out) {
    if (kv->type != GGUF_ARRAY || i >= kv->n) return -1;
    return num_at(kv->elem_type, kv->data + i * scalar_size(kv->elem_type), out);
}

const void *gguf_tensor_data(const Gguf *g, const GgufTensor *t) { return g->data + t->offset; }

static int unread_type(const Gguf *g, const GgufTensor *t) {
    err_set("%s: tensor %s: ggml type %d (%s) is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, "
            "Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS are)", g->path, t->name, t->type, gguf_type_name(t->type));
    return -1;
}

static uint64_t tensor_elems(const GgufTensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    return n;
}

int gguf_tensor_blocks(const Gguf *g, const GgufTensor *t, void *out) {
    const DType dt = read_type(t->type);
    if (dt == DT_COUNT) return unread_type(g, t);
    memcpy(out, g->data + t->offset, (size_t)t->bytes);
    return 0;
}

int gguf_tensor_f32(const Gguf *g, const GgufTensor *t, float *out) {
    const uint64_t n = tensor_elems(t);
    const DType dt = read_type(t->type);
    if (dt == DT_COUNT) return unread_type(g, t);
    if (quant_dequant_row(dt, g->data + t->offset, out, (int64_t)n)) {
        err_set("%s: tensor %s: %s", g->path, t->name, err_get());
        return -1;
    }
    return 0;
}
