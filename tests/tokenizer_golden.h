/* Shared by the tokenizer and chat-template tests: the golden files made by
 * tools/golden/tokenizer_oracle.py (HF tokenizers / sentencepiece /
 * transformers). */
#ifndef C2T_TOKENIZER_GOLDEN_H
#define C2T_TOKENIZER_GOLDEN_H
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <zstd.h>

#define GOLD "tests/golden/tokenizer/"
#define SHARED "../shared"
#define LLAMA2_MODEL SHARED "/tokenizers/llama2/tokenizer.model"

/* A zstd-compressed golden's bytes (*len of them, then a NUL); NULL with
 * err_set on failure. */
static inline char *load_zst(const char *path, size_t *len) {
    size_t n;
    char *src = read_text_file(path, &n);
    if (!src) return NULL;
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_initDStream(ds);
    size_t cap = 1 << 20;
    char *dst = xmalloc(cap);
    *len = 0;
    ZSTD_inBuffer in = {src, n, 0};
    while (in.pos < in.size) {
        if (cap - *len < (1 << 16)) { cap *= 2; dst = xrealloc(dst, cap); }
        ZSTD_outBuffer out = {dst + *len, cap - *len - 1, 0};
        size_t r = ZSTD_decompressStream(ds, &out, &in);
        *len += out.pos;
        if (ZSTD_isError(r)) { free(src); free(dst); ZSTD_freeDStream(ds); err_set("%s: zstd: %s", path, ZSTD_getErrorName(r)); return NULL; }
        if (r == 0 && in.pos == in.size) break;
    }
    ZSTD_freeDStream(ds);
    free(src);
    dst[*len] = 0;
    return dst;
}

/* A zstd-compressed JSON golden; NULL with err_set on failure. */
static inline cJSON *load_zst_json(const char *path) {
    size_t len;
    char *dst = load_zst(path, &len);
    if (!dst) return NULL;
    cJSON *j = cJSON_ParseWithLength(dst, len);
    free(dst);
    if (!j) err_set("%s: bad JSON after decompression", path);
    return j;
}

/* 1 when the JSON array holds exactly ids[0..n) */
static inline int same_ids(const cJSON *arr, const int32_t *ids, size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return 0;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if ((int32_t)e->valuedouble != ids[i++]) return 0;
    return 1;
}

/* First differing position, for messages. */
#endif
