/* PyTorch pytorch_model.bin (infer/model/ptbin.c, torch_pickle.c).  An
 * input starting with "PK" is the whole file: the zip directory, entries,
 * CRCs.  Any other input is the pickle (data.pkl), put into a torch-style
 * zip beside two storages (data/0: 16 floats, data/1: 4 halves), so the
 * mutations reach the unpickler and the view checks instead of dying at
 * the CRC. */
#include "tests/fuzz/fuzz.h"
#include "infer/model/safetensors.h"
#include <string.h>
#include <zip.h>

static const uint8_t storage0[64], storage1[8];

static int add(zip_t *z, const char *name, const void *data, size_t size) {
    zip_source_t *s = zip_source_buffer(z, data, size, 0);
    zip_int64_t i = s ? zip_file_add(z, name, s, ZIP_FL_OVERWRITE) : -1;
    if (i < 0) { zip_source_free(s); return -1; }
    return zip_set_file_compression(z, (zip_uint64_t)i, ZIP_CM_STORE, 0);
}

static const char *wrap_pickle(const uint8_t *data, size_t size) {
    const char *path = fuzz_file("pytorch_model.bin", (const uint8_t *)"", 0);
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, NULL);
    if (!z || add(z, "archive/data.pkl", data, size) || add(z, "archive/byteorder", "little", 6) ||
        add(z, "archive/data/0", storage0, sizeof storage0) || add(z, "archive/data/1", storage1, sizeof storage1) ||
        zip_close(z)) {
        fprintf(stderr, "fuzz_ptbin: cannot write %s\n", path);
        abort();
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = size >= 2 && data[0] == 'P' && data[1] == 'K' ? fuzz_file("pytorch_model.bin", data, size)
                                                                      : wrap_pickle(data, size);
    SafeTensors *st = st_open(path);
    if (st) {
        /* touch every byte a loader would read */
        volatile uint8_t sum = 0;
        for (int i = 0; i < st->ntensors; i++)
            for (size_t b = 0; b < st->tensors[i].nbytes; b++) sum += ((const uint8_t *)st->tensors[i].data)[b];
        st_get(st, "w", 4, 0);
        st_close(st);
    }
    return 0;
}
