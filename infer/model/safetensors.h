/* Checkpoints: one file, or shards listed by model.safetensors.index.json
 * (or pytorch_model.bin.index.json), as one set of named tensors.
 * Safetensors files are mmap'ed read-only; every header is checked
 * (offsets inside the file, sizes matching shapes, no overlaps) before any
 * tensor is handed out.  PyTorch pytorch_model.bin files are read into the
 * same structure by infer/model/ptbin.c.
 *
 * checkpoint.c opens (it picks each file's reader), looks up and closes;
 * safetensors.c reads and writes the safetensors format; ptbin.c reads
 * torch.save archives. */
#ifndef C2T_SAFETENSORS_H
#define C2T_SAFETENSORS_H
#include "kernels/base/dtype.h"
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    char dtype_name[12];   /* as written in the header, e.g. "BF16"; a block type's name ("Q4_K") */
    DType dtype;           /* DT_COUNT when the format knows it but we don't compute in it */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
    int file;              /* index into files */
} StTensor;

typedef struct {
    char *path;
    void *map;
    size_t size;
    int owned;             /* map is malloc'ed (a torch zip's storages), not mmap'ed */
} StFile;

typedef struct {
    StFile *files;
    int nfiles;
    StTensor *tensors;
    int ntensors;
} SafeTensors;

/* checkpoint.c.  path: a .safetensors or pytorch_model.bin file, an index
 * .json, or a directory holding model.safetensors(.index.json) or, failing
 * those, pytorch_model.bin(.index.json).  A file is told by its first
 * bytes. */
SafeTensors *st_open(const char *path);
void st_close(SafeTensors *st);
/* Identity of a checkpoint's weights, FNV-1a 64 over its weight files as 16
 * hex digits (a head retrained in place keeps its path and config.json but
 * not this).  0, or -1 with err_set. */
int st_weights_hash_hex(const char *path, char out[17]);
const StTensor *st_find(const SafeTensors *st, const char *name);
/* Finds a tensor and checks its dtype is one we compute with and its shape
 * equals the given dims (0-terminated list of up to 2 dims); errors name
 * the file and the tensor. */
const StTensor *st_get(const SafeTensors *st, const char *name, int64_t d0, int64_t d1);
const char *st_file_of(const SafeTensors *st, const StTensor *t);
/* The checkpoint's tensor types with their counts, "BF16 141" or
 * "F32 141, Q4_K 169, Q6_K 29" (DType order; a type we do not compute with
 * by its header name), for reports: which arithmetic the weights are in. */
void st_weight_types(const SafeTensors *st, char *out, size_t cap);

/* safetensors.c.  Element size and DType of a safetensors dtype name
 * ("F32", "I64", ...): 0, or -1 with err_set when the name is unknown. */
int st_dtype_lookup(const char *name, size_t *size, DType *dt);
/* Maps the safetensors file at path and appends it and its tensors to st.
 * 0, or -1 with err_set naming path (st then holds what was appended, for
 * st_close). */
int st_read_safetensors(SafeTensors *st, const char *path);

/* Writes a single-file safetensors checkpoint (tests, bench models,
 * spec-convert).  A tensor of a block type (kernels/base/quant.h) is 2-D
 * [rows][cols] in elements, its data rows of whole blocks; it is stored as
 * U8 with a __metadata__ entry naming its type (safetensors.c), which
 * st_open reads back as that type. */
typedef struct {
    const char *name;
    DType dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
} StWrite;
/* __metadata__ is {"format": "pt"} as torch writes it (transformers needs it);
 * st_write_meta takes its own object (owned by the call). Written atomically
 * (atomic_create): a failed write leaves the file that was there. */
int st_write(const char *path, const StWrite *tensors, int n);
struct cJSON;
int st_write_meta(const char *path, const StWrite *tensors, int n, struct cJSON *meta);
#endif
