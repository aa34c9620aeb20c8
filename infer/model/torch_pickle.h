/* The pickle inside a torch.save archive (<archive>/data.pkl), read by a
 * restricted stack machine: only the protocol-2 opcodes a state dict uses,
 * only the globals that name a dict, a tensor rebuild or a storage type.
 * Nothing is ever called; the "calls" it understands are recognised and
 * turned into records.  Anything else is refused with one line naming the
 * file and what it met. */
#ifndef C2T_TORCH_PICKLE_H
#define C2T_TORCH_PICKLE_H
#include "infer/model/safetensors.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *key;             /* the zip entry <archive>/data/<key> */
    char dtype_name[12];   /* safetensors spelling: "F32", "BF16", "I64", ... */
    int64_t numel;         /* elements the pickle says the storage holds */
} TpStorage;

typedef struct {
    char *name;
    int storage;           /* index into storages */
    int64_t offset;        /* in elements */
    int ndim;
    int64_t shape[ST_MAX_DIMS], stride[ST_MAX_DIMS];
} TpTensor;

typedef struct {
    TpStorage *storages;
    int nstorages;
    TpTensor *tensors;
    int ntensors;
} TpStateDict;

/* Parses buf (n bytes) as a state dict {name: tensor}; file names the
 * archive in errors.  0, or -1 with err_set. */
int tp_parse(const char *file, const uint8_t *buf, size_t n, TpStateDict *out);
void tp_free(TpStateDict *sd);
#endif
