/* GGUF files (llama.cpp's checkpoint format, versions 2 and 3): metadata and
 * tensors, read through a mapping of the file.  Every count, length and
 * offset is checked against the bytes that remain, so a lying file is one
 * line naming the file and what is wrong, never a read past the end.
 * Tensors come out as F32, bit for bit what ggml's dequantize_row_* (and
 * gguf-py's gguf.quants.dequantize) give (the dequantiser is the kernels'
 * one, kernels/base/quant.h): F32 and F16 as stored; the blocks
 * of 32 Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (a half-precision scale d times the
 * block's integer, plus the half-precision minimum for Q4_1 / Q5_1); the
 * super-blocks of 256 Q4_K, Q5_K (d times a 6-bit scale, times the integer,
 * minus dmin times a 6-bit minimum), Q6_K (d times an int8 scale, times
 * the integer), Q2_K (as Q4_K, 4-bit scales and minimums of 16 elements)
 * Q3_K (d times a 6-bit scale, times the integer less 4), IQ4_NL and
 * IQ4_XS.  A quantised tensor's rows must be whole blocks (32, or 256
 * for the K types) or the file is refused when opened.  Tensors of other
 * types (IQ1-IQ3, TQ, MXFP4, ...) are listed and refused by name
 * when read.  A NaN or infinite scale is not refused: its block comes out
 * as ggml computes it (NaN, or inf; inf times a zero integer is NaN), as an
 * F32 or F16 tensor's NaN does. */
#ifndef C2T_GGUF_H
#define C2T_GGUF_H
#include "kernels/base/dtype.h"
#include <stddef.h>
#include <stdint.h>

/* metadata value types (GGUF spec) */
enum {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING,
    GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64, GGUF_NTYPES
};
/* tensor types this reader dequantises (ggml_type numbers) */
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_IQ4_NL = 20, GGML_IQ4_XS = 23, GGML_BF16 = 30
};

typedef struct {
    const char *key;        /* NUL-terminated copy */
    int type;               /* GGUF_* */
    int elem_type;          /* arrays: the element type */
    uint64_t n;             /* arrays: element count (1 otherwise) */
    const uint8_t *data;    /* the value's bytes in the mapping (arrays: the first element) */
    uint64_t *str_offs;     /* string arrays: each element's offset from data (else NULL) */
} GgufKV;

typedef struct {
    const char *name;
    int n_dims;
    int64_t ne[4];          /* ne[0] varies fastest: a [rows][cols] matrix has ne = {cols, rows} */
    int type;               /* GGML_* (others are listed but not read) */
    uint64_t offset;        /* from the start of the data section */
    uint64_t bytes;
} GgufTensor;

typedef struct Gguf Gguf;

/* Opens and validates path; NULL with a one-line error naming it. */
Gguf *gguf_open(const char *path);
void gguf_close(Gguf *g);
int gguf_version(const Gguf *g);
int gguf_n_kv(const Gguf *g);
const GgufKV *gguf_kv(const Gguf *g, int i);
const GgufKV *gguf_find(const Gguf *g, const char *key);
int gguf_n_tensors(const Gguf *g);
const GgufTensor *gguf_tensor(const Gguf *g, int i);
const GgufTensor *gguf_find_tensor(const Gguf *g, const char *name);

/* Scalars by key: 0 and the value (any integer type, or any number for
 * gguf_get_f64), else -1 with an error naming the key. */
int gguf_get_i64(const Gguf *g, const char *key, int64_t *out);
int gguf_get_f64(const Gguf *g, const char *key, double *out);
/* A string value as a fresh NUL-terminated copy (free it), or NULL. */
char *gguf_get_str(const Gguf *g, const char *key);
/* Element i of a string array: its bytes and length, or -1. */
int gguf_arr_str(const GgufKV *kv, uint64_t i, const char **s, uint64_t *len);
/* Element i of a numeric array as a double, or -1. */
int gguf_arr_num(const GgufKV *kv, uint64_t i, double *out);

/* ggml's name of a tensor type ("Q4_K"), or "unknown". */
const char *gguf_type_name(int type);
/* The kernels' DType the tensor is read as (F32, F16, BF16 or a block
 * type, kernels/base/quant.h: its own type); DT_COUNT for a type this
 * reader does not read. */
DType gguf_tensor_dtype(const GgufTensor *t);
/* The tensor's bytes as stored (its blocks), inside the file's mapping. */
const void *gguf_tensor_data(const Gguf *g, const GgufTensor *t);
/* The tensor's blocks into out, as stored; -1 with a one-line error for a type this reader
 * does not read. */
int gguf_tensor_blocks(const Gguf *g, const GgufTensor *t, void *out);
/* The tensor's elements as F32 into out[ne0*ne1*...]; -1 with a one-line
 * error naming the file, the tensor and its type for a type this reader does
 * not dequantise. */
int gguf_tensor_f32(const Gguf *g, const GgufTensor *t, float *out);
#endif
