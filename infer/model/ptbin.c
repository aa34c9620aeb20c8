#include "infer/model/ptbin.h"
#include "infer/model/torch_pickle.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

/* Storages sit in one buffer at 64-byte boundaries, as torch aligns them in
 * the file. */
#define PT_ALIGN 64

typedef struct {
    const char *path;
    zip_t *z;
    uint64_t file_size;
    char prefix[256];   /* the archive's folder name, e.g. "pytorch_model" */
} Zip;

/* The one <prefix>/data.pkl at the top of the archive names the prefix. */
static int find_prefix(Zip *a) {
    zip_int64_t n = zip_get_num_entries(a->z, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(a->z, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        const char *slash = name ? strchr(name, '/') : NULL;
        if (slash && !strcmp(slash, "/data.pkl") && (size_t)(slash - name) < sizeof a->prefix) {
            snprintf(a->prefix, sizeof a->prefix, "%.*s", (int)(slash - name), name);
            return 0;
        }
    }
    err_set("%s: a zip archive without <name>/data.pkl, so not a torch.save file", a->path);
    return -1;
}

/* Index and size of <prefix>/<rel>.  Only STORED entries (torch writes no
 * other kind): their size is bytes of this file, so no entry can ask for
 * more memory than the file has. */
static int find_entry(Zip *a, const char *rel, zip_uint64_t *idx, zip_uint64_t *size) {
    char name[600];
    snprintf(name, sizeof name, "%s/%s", a->prefix, rel);
    zip_int64_t i = zip_name_locate(a->z, name, ZIP_FL_ENC_RAW);
    if (i < 0) { err_set("%s: archive has no %s", a->path, name); return -1; }
    zip_stat_t sb;
    if (zip_stat_index(a->z, (zip_uint64_t)i, 0, &sb) != 0 || !(sb.valid & ZIP_STAT_SIZE) ||
        !(sb.valid & ZIP_STAT_COMP_METHOD)) {
        err_set("%s: cannot stat %s: %s", a->path, name, zip_strerror(a->z));
        return -1;
    }
    if (sb.comp_method != ZIP_CM_STORE) {
        err_set("%s: %s is compressed; torch.save stores entries uncompressed", a->path, name);
        return -1;
    }
    if (sb.size > a->file_size) {
        err_set("%s: %s claims %llu bytes, more than the file holds", a->path, name, (unsigned long long)sb.size);
        return -1;
    }
    *idx = (zip_uint64_t)i;
    *size = sb.size;
    return 0;
}

/* Reads a whole entry into dst.  libzip compares the CRC when a read hits
 * the entry's end, so one more read past the last byte must return 0: a
 * flipped byte surfaces there as "CRC error". */
static int read_entry(Zip *a, zip_uint64_t idx, void *dst, zip_uint64_t size) {
    const char *name = zip_get_name(a->z, idx, ZIP_FL_ENC_RAW);
    zip_file_t *f = zip_fopen_index(a->z, idx, 0);
    if (!f) { err_set("%s: cannot read %s: %s", a->path, name, zip_strerror(a->z)); return -1; }
    zip_int64_t got = size ? zip_fread(f, dst, size) : 0;
    char extra;
    zip_int64_t more = got == (zip_int64_t)size ? zip_fread(f, &extra, 1) : 0;
    int rc = 0;
    if (got < 0 || more < 0) { err_set("%s: %s: %s", a->path, name, zip_file_strerror(f)); rc = -1; }
    else if (got != (zip_int64_t)size || more) { err_set("%s: %s: length differs from the zip directory", a->path, name); rc = -1; }
    zip_fclose(f);
    return rc;
}

/* Whole entry <prefix>/<rel> into a fresh buffer (NUL-terminated). */
static uint8_t *slurp(Zip *a, const char *rel, size_t *len) {
    zip_uint64_t idx, size;
    if (find_entry(a, rel, &idx, &size)) return NULL;
    uint8_t *b = xmalloc(size + 1);
    if (read_entry(a, idx, b, size)) { free(b); return NULL; }
    b[size] = 0;
    *len = size;
    return b;
}

/* torch writes "little" or "big"; storages are raw bytes in that order */
static int check_byteorder(Zip *a) {
    char name[300];
    snprintf(name, sizeof name, "%s/byteorder", a->prefix);
    if (zip_name_locate(a->z, name, ZIP_FL_ENC_RAW) < 0) return 0;   /* older torch: always little */
    size_t n;
    uint8_t *b = slurp(a, "byteorder", &n);
    if (!b) return -1;
    int ok = n == 6 && !memcmp(b, "little", 6);
    free(b);
    if (!ok) err_set("%s: storages are not little-endian (byteorder entry); only little-endian files are read", a->path);
    return ok ? 0 : -1;
}

/* Reads every storage into one buffer; offs[i] is storage i's place.  Each
 * entry's size must be what the pickle declares. */
static int read_storages(Zip *a, const TpStateDict *sd, uint8_t **buf, size_t *total, size_t *offs) {
    zip_uint64_t *idx = xcalloc(sd->nstorages + 1, sizeof *idx), *size = xcalloc(sd->nstorages + 1, sizeof *size);
    size_t sum = 0;
    uint64_t raw = 0;
    int rc = 0;
    for (int i = 0; i < sd->nstorages && !rc; i++) {
        const TpStorage *s = &sd->storages[i];
        char rel[300];
        snprintf(rel, sizeof rel, "data/%s", s->key);
        size_t esize;
        DType dt;
        if (st_dtype_lookup(s->dtype_name, &esize, &dt) || find_entry(a, rel, &idx[i], &size[i])) { rc = -1; break; }
        if ((uint64_t)s->numel > size[i] / esize || (uint64_t)s->numel * esize != size[i]) {
            err_set("%s: storage %s holds %llu bytes, the pickle says %lld elements of %zu bytes", a->path, s->key,
                    (unsigned long long)size[i], (long long)s->numel, esize);
            rc = -1;
        }
        /* stored entries of a real archive are disjoint bytes of it; entries sharing bytes
         * could otherwise ask for many times the file's size */
        raw += size[i];
        if (!rc && raw > a->file_size) {
            err_set("%s: storages claim more bytes than the file holds (overlapping zip entries)", a->path);
            rc = -1;
        }
        sum = (sum + PT_ALIGN - 1) / PT_ALIGN * PT_ALIGN;
        offs[i] = sum;
        sum += size[i];
    }
    if (!rc) {
        *buf = xmalloc(sum ? sum : 1);
        *total = sum;
        for (int i = 0; i < sd->nstorages && !rc; i++) rc = read_entry(a, idx[i], *buf + offs[i], size[i]);
    }
    free(idx);
    free(size);
    return rc;
}

/* Elements of a shape (0 / -1 on a negative dim or more than 2^53). */
static int shape_numel(const TpTensor *t, int64_t *numel) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || (t->shape[d] && n > ((int64_t)1 << 53) / t->shape[d])) return -1;
        n *= t->shape[d];
    }
    *numel = n;
    return 0;
}

/* Row-major strides; a dim of size 1 may have any stride (torch gives it
 * whatever), an empty tensor any strides at all. */
static int contiguous(const TpTensor *t, int64_t numel) {
    if (!numel) return 1;
    int64_t want = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != want) return 0;
        want *= t->shape[d];
    }
    return 1;
}

/* One record of the pickle as a view of its storage's bytes. */
static int make_tensor(const char *path, const TpStateDict *sd, const TpTensor *r, const uint8_t *buf,
                       const size_t *offs, int file, StTensor *out) {
    const TpStorage *s = &sd->storages[r->storage];
    size_t esize;
    StTensor t = {0};
    st_dtype_lookup(s->dtype_name, &esize, &t.dtype);
    int64_t numel;
    if (shape_numel(r, &numel)) { err_set("%s: tensor %s: bad shape", path, r->name); return -1; }
    if (!contiguous(r, numel)) {
        err_set("%s: tensor %s is not contiguous (a transposed or strided view); save it after .contiguous()", path, r->name);
        return -1;
    }
    if (r->offset < 0 || r->offset > s->numel || numel > s->numel - r->offset) {
        err_set("%s: tensor %s: elements [%lld, %lld) run past the end of storage %s (%lld elements)", path, r->name,
                (long long)r->offset, (long long)r->offset + (long long)numel, s->key, (long long)s->numel);
        return -1;
    }
    t.name = xstrdup(r->name);
    snprintf(t.dtype_name, sizeof t.dtype_name, "%s", s->dtype_name);
    t.ndim = r->ndim;
    memcpy(t.shape, r->shape, sizeof t.shape);
    t.data = buf + offs[r->storage] + (size_t)r->offset * esize;
    t.nbytes = (size_t)numel * esize;
    t.file = file;
    *out = t;
    return 0;
}

/* The pickle's tensors as views of the storages; the buffer becomes a file
 * of st that st_close frees. */
static int add_tensors(SafeTensors *st, const char *path, const TpStateDict *sd, uint8_t *buf, size_t total,
                       const size_t *offs) {
    int fi = st->nfiles++;
    st->files = xrealloc(st->files, sizeof(StFile) * st->nfiles);
    st->files[fi] = (StFile){xstrdup(path), buf, total, 1};
    st->tensors = xrealloc(st->tensors, sizeof(StTensor) * (st->ntensors + sd->ntensors + 1));
    for (int i = 0; i < sd->ntensors; i++) {
        if (make_tensor(path, sd, &sd->tensors[i], buf, offs, fi, &st->tensors[st->ntensors])) return -1;
        st->ntensors++;
    }
    return 0;
}

static int load(Zip *a, SafeTensors *st) {
    size_t plen;
    uint8_t *pkl;
    if (find_prefix(a) || check_byteorder(a) || !(pkl = slurp(a, "data.pkl", &plen))) return -1;
    TpStateDict sd;
    int rc = tp_parse(a->path, pkl, plen, &sd);
    free(pkl);
    if (rc) return -1;
    size_t *offs = xcalloc(sd.nstorages + 1, sizeof *offs), total = 0;
    uint8_t *buf = NULL;
    rc = read_storages(a, &sd, &buf, &total, offs);
    if (rc) free(buf);
    else rc = add_tensors(st, a->path, &sd, buf, total, offs);
    free(offs);
    tp_free(&sd);
    return rc;
}

int ptbin_open(SafeTensors *st, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    if (!z) {
        zip_error_t e;
        zip_error_init_with_code(&e, zerr);
        err_set("%s: not a readable zip archive (truncated or damaged?): %s", path, zip_error_strerror(&e));
        zip_error_fini(&e);
        return -1;
    }
    Zip a = {path, z, (uint64_t)sb.st_size, ""};
    int rc = load(&a, st);
    zip_discard(z);
    return rc;
}
