/* The safetensors format: its dtypes, reading one file into a SafeTensors
 * (mapped, every header entry checked before any tensor is handed out),
 * and writing one.  Which reader a file needs, shards and lookups are
 * checkpoint.c's. */
#include "infer/model/safetensors.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every dtype of the safetensors format with its size; those we compute
 * with map to a DType, the rest are readable but refused when used. */
static const struct { const char *name; size_t size; DType dt; } st_dtypes[] = {
    {"F32", 4, DT_F32}, {"F16", 2, DT_F16}, {"BF16", 2, DT_BF16}, {"I32", 4, DT_I32},
    {"I64", 8, DT_I64}, {"U8", 1, DT_U8}, {"F64", 8, DT_COUNT}, {"I8", 1, DT_COUNT},
    {"I16", 2, DT_COUNT}, {"U16", 2, DT_COUNT}, {"U32", 4, DT_COUNT}, {"U64", 8, DT_COUNT},
    {"BOOL", 1, DT_COUNT}, {"F8_E4M3", 1, DT_COUNT}, {"F8_E5M2", 1, DT_COUNT},
};

int st_dtype_lookup(const char *name, size_t *size, DType *dt) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (!strcmp(name, st_dtypes[i].name)) { *size = st_dtypes[i].size; *dt = st_dtypes[i].dt; return 0; }
    err_set("unknown dtype %s", name);
    return -1;
}

/* A tensor of a GGUF block type (kernels/base/quant.h) is stored as the
 * safetensors format allows: U8 [rows][bytes of a row], its blocks as
 * ggml lays them out, with __metadata__ entry QUANT_KEY<name> naming the
 * type ("Q4_K").  Read back, it is that DType with its shape in elements
 * [rows][cols]. */
#define QUANT_KEY "c2t.quant."

/* t (read as U8 [rows][row bytes]) becomes the block type named by the
 * metadata value v; 0, or -1 with err_set naming path and the tensor. */
static int quant_tensor(StTensor *t, const cJSON *v, const char *path) {
    DType q = DT_COUNT;
    for (int d = 0; d < DT_COUNT && cJSON_IsString(v); d++)
        if (dtype_is_quant((DType)d) && !strcmp(v->valuestring, dtype_name((DType)d))) q = (DType)d;
    if (q == DT_COUNT) {
        err_set("%s: tensor %s: __metadata__ names block type '%s', which is not one of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                "Q2_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS", path, t->name, cJSON_IsString(v) ? v->valuestring : "(not a string)");
        return -1;
    }
    const int64_t bb = (int64_t)quant_block_bytes(q);
    if (t->dtype != DT_U8 || t->ndim != 2 || t->shape[1] == 0 || t->shape[1] % bb) {
        err_set("%s: tensor %s: a %s tensor must be stored U8 [rows][whole %lld-byte blocks], not %s with %d dims",
                path, t->name, dtype_name(q), (long long)bb, t->dtype_name, t->ndim);
        return -1;
    }
    t->dtype = q;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtype_name(q));
    t->shape[1] = t->shape[1] / bb * quant_block_elems(q);
    return 0;
}

/* Every QUANT_KEY entry of meta names a tensor of this file's tensors
 * [first, st->ntensors), which becomes that block type. */
static int quant_tensors(SafeTensors *st, int first, const cJSON *meta, const char *path) {
    const size_t kl = strlen(QUANT_KEY);
    if (meta && !cJSON_IsObject(meta)) {   /* the format's __metadata__ maps strings to strings */
        err_set("%s: __metadata__ is not an object", path);
        return -1;
    }
    for (const cJSON *m = meta ? meta->child : NULL; m; m = m->next) {
        if (strncmp(m->string, QUANT_KEY, kl)) continue;
        StTensor *t = NULL;
        for (int i = first; i < st->ntensors && !t; i++)
            if (!strcmp(st->tensors[i].name, m->string + kl)) t = &st->tensors[i];
        if (!t) { err_set("%s: __metadata__ entry %s names a tensor the file does not hold", path, m->string); return -1; }
        if (quant_tensor(t, m, path)) return -1;
    }
    return 0;
}

static int cmp_by_data(const void *a, const void *b) {
    const StTensor *x = *(StTensor *const *)a, *y = *(StTensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* Maps one safetensors file and appends it and its tensors to st. */
int st_read_safetensors(SafeTensors *st, const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat sb;
    if (fstat(fd, &sb) != 0) { close(fd); err_set("%s: cannot stat", path); return -1; }
    size_t size = (size_t)sb.st_size;
    if (size < 8) { close(fd); err_set("%s: truncated file (%zu bytes, no header)", path, size); return -1; }
    /* MAP_POPULATE reads the file in now: otherwise the first forward pays
     * for the page faults, and a timed run that comes first in a process
     * would count the disk reads as its own time */
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) { err_set("%s: mmap failed: %s", path, strerror(errno)); return -1; }

    int fi = st->nfiles++;
    st->files = xrealloc(st->files, sizeof(StFile) * st->nfiles);
    st->files[fi] = (StFile){xstrdup(path), map, size, 0};

    uint64_t hlen = 0;
    memcpy(&hlen, map, 8);   /* little-endian u64 */
    if (hlen > size - 8) {
        err_set("%s: truncated file: header of %llu bytes past end of file (%zu bytes)", path,
                (unsigned long long)hlen, size);
        return -1;
    }
    const char *hdr = (const char *)map + 8;
    const char *data0 = hdr + hlen;
    size_t data_size = size - 8 - hlen;
    cJSON *j = cJSON_ParseWithLength(hdr, hlen);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        err_set("%s: malformed JSON header", path);
        return -1;
    }
    int first = st->ntensors, rc = 0;
    for (cJSON *e = j->child; e && rc == 0; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(off) ||
            cJSON_GetArraySize(off) != 2) {
            err_set("%s: tensor %s: header entry needs dtype, shape and data_offsets[2]", path, e->string);
            rc = -1; break;
        }
        StTensor t = {0};
        t.file = fi;
        size_t esize;
        if (st_dtype_lookup(dt->valuestring, &esize, &t.dtype) != 0) {
            err_set("%s: tensor %s: unknown dtype %s", path, e->string, dt->valuestring);
            rc = -1; break;
        }
        snprintf(t.dtype_name, sizeof t.dtype_name, "%s", dt->valuestring);
        t.ndim = cJSON_GetArraySize(shape);
        if (t.ndim > ST_MAX_DIMS) { err_set("%s: tensor %s: %d dims", path, e->string, t.ndim); rc = -1; break; }
        double numel = 1;
        int i = 0;
        for (cJSON *d = shape->child; d; d = d->next, i++) {
            char what[160];
            snprintf(what, sizeof what, "tensor %s: shape[%d]", e->string, i);
            if (json_int(d, path, what, 0, (int64_t)1 << 53, &t.shape[i])) { rc = -1; break; }
            numel *= t.shape[i];
        }
        if (rc) break;
        int64_t b64, en64;
        char what[160];
        snprintf(what, sizeof what, "tensor %s: data_offsets", e->string);
        if (json_int(cJSON_GetArrayItem(off, 0), path, what, 0, (int64_t)1 << 53, &b64) ||
            json_int(cJSON_GetArrayItem(off, 1), path, what, 0, (int64_t)1 << 53, &en64)) { rc = -1; break; }
        double b = (double)b64, en = (double)en64;
        if (en < b) {
            err_set("%s: tensor %s: bad data_offsets", path, e->string); rc = -1; break;
        }
        if (en > (double)data_size) {
            err_set("%s: tensor %s: data offsets [%.0f, %.0f) past end of file (data section %zu bytes)",
                    path, e->string, b, en, data_size);
            rc = -1; break;
        }
        if (en - b != numel * (double)esize) {
            err_set("%s: tensor %s: shape needs %.0f bytes but data_offsets span %.0f", path, e->string,
                    numel * esize, en - b);
            rc = -1; break;
        }
        t.name = xstrdup(e->string);
        t.data = data0 + (size_t)b;
        t.nbytes = (size_t)(en - b);
        st->tensors = xrealloc(st->tensors, sizeof(StTensor) * (st->ntensors + 1));
        st->tensors[st->ntensors++] = t;
    }
    if (rc == 0) rc = quant_tensors(st, first, cJSON_GetObjectItemCaseSensitive(j, "__metadata__"), path);
    cJSON_Delete(j);
    if (rc) return rc;

    /* no two tensors of this file may share bytes */
    int n = st->ntensors - first;
    StTensor **order = xmalloc(sizeof(StTensor *) * (n ? n : 1));
    for (int i = 0; i < n; i++) order[i] = &st->tensors[first + i];
    qsort(order, n, sizeof *order, cmp_by_data);
    for (int i = 1; i < n && rc == 0; i++) {
        const char *prev_end = (const char *)order[i - 1]->data + order[i - 1]->nbytes;
        if ((const char *)order[i]->data < prev_end) {
            err_set("%s: tensors %s and %s overlap", path, order[i - 1]->name, order[i]->name);
            rc = -1;
        }
    }
    free(order);
    return rc;
}

int st_write(const char *path, const StWrite *tensors, int n) {
    return st_write_meta(path, tensors, n, NULL);
}

/* The shape and bytes a tensor is stored with: a block type's rows as
 * U8 [rows][bytes of a row] (QUANT_KEY above). */
static size_t stored_shape(const StWrite *t, double *shp) {
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) { numel *= t->shape[d]; shp[d] = (double)t->shape[d]; }
    if (!dtype_is_quant(t->dtype)) return numel * dtype_size(t->dtype);
    shp[1] = (double)quant_row_bytes(t->dtype, t->shape[1]);
    return (size_t)t->shape[0] * (size_t)shp[1];
}

int st_write_meta(const char *path, const StWrite *tensors, int n, cJSON *meta) {
    for (int i = 0; i < n; i++)
        if (dtype_is_quant(tensors[i].dtype) && (tensors[i].ndim != 2 || quant_row_bytes(tensors[i].dtype, tensors[i].shape[1]) < 0)) {
            err_set("%s: tensor %s: a %s tensor must be 2-D with whole blocks per row", path, tensors[i].name,
                    dtype_name(tensors[i].dtype));
            cJSON_Delete(meta);
            return -1;
        }
    cJSON *h = cJSON_CreateObject();
    if (!meta) {    /* what torch's save_file writes; transformers refuses a checkpoint without it */
        meta = cJSON_CreateObject();
        cJSON_AddStringToObject(meta, "format", "pt");
    }
    cJSON_AddItemToObject(h, "__metadata__", meta);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const StWrite *t = &tensors[i];
        double shp[ST_MAX_DIMS];
        size_t nb = stored_shape(t, shp);
        if (dtype_is_quant(t->dtype)) {
            char key[256];
            snprintf(key, sizeof key, QUANT_KEY "%s", t->name);
            cJSON_AddStringToObject(meta, key, dtype_name(t->dtype));
        }
        cJSON *e = cJSON_AddObjectToObject(h, t->name);
        cJSON_AddStringToObject(e, "dtype", dtype_is_quant(t->dtype) ? "U8" : dtype_name(t->dtype));
        cJSON_AddItemToObject(e, "shape", cJSON_CreateDoubleArray(shp, t->ndim));
        double offs[2] = {(double)off, (double)(off + nb)};
        cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(offs, 2));
        off += nb;
    }
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    size_t hl = strlen(js), padded = (hl + 7) & ~(size_t)7;
    char *tmp;
    FILE *f = atomic_create(path, &tmp);
    if (!f) { free(js); return -1; }
    uint64_t hlen = padded;
    int bad = fwrite(&hlen, 8, 1, f) != 1 || fwrite(js, 1, hl, f) != hl;
    for (size_t i = hl; i < padded; i++) bad |= fputc(' ', f) == EOF;
    free(js);
    for (int i = 0; i < n && !bad; i++) {
        double shp[ST_MAX_DIMS];
        size_t nb = stored_shape(&tensors[i], shp);
        bad |= fwrite(tensors[i].data, 1, nb, f) != nb;
    }
    return atomic_finish(f, tmp, path, bad);
}
