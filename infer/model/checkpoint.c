/* Checkpoints: which reader each file needs (safetensors.c, or ptbin.c for
 * torch.save archives), shards listed by an index .json, the folder
 * layouts Hugging Face writes, looking tensors up and closing. */
#include "infer/model/ptbin.h"
#include "infer/model/safetensors.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* torch.save's legacy format starts with a pickle of the magic number
 * 0x1950a86a20f9469cfc6c (these are its bytes, little-endian, as LONG1
 * writes them; a PROTO 4 pickle puts a FRAME before them) */
static const unsigned char legacy_torch[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

/* A file is told by its first bytes: a zip is torch.save's archive, the
 * legacy torch format is refused with the way to convert it, anything else
 * is read as safetensors. */
static int open_file(SafeTensors *st, const char *path) {
    unsigned char head[32] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) { err_set("%s: cannot open: %s", path, strerror(errno)); return -1; }
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n >= 4 && (!memcmp(head, "PK\3\4", 4) || !memcmp(head, "PK\5\6", 4))) return ptbin_open(st, path);
    if (n > 2 && head[0] == 0x80 && memmem(head, n, legacy_torch, sizeof legacy_torch)) {
        err_set("%s: a legacy (non-zip) torch file, which is not read; convert it once with "
                "python -c \"import torch; torch.save(torch.load('%s'), '%s')\" (or to safetensors)",
                path, path, path);
        return -1;
    }
    return st_read_safetensors(st, path);
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int open_index(SafeTensors *st, const char *index_path) {
    cJSON *j = read_json_file(index_path);
    if (!j) return -1;
    cJSON *wm = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(j);
        err_set("%s: no weight_map object", index_path);
        return -1;
    }
    char *dir = xstrdup(index_path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0; else strcpy(dir, "./");
    int rc = 0;
    /* open each shard once, in order of first mention */
    for (cJSON *e = wm->child; e && rc == 0; e = e->next) {
        if (!cJSON_IsString(e)) { err_set("%s: weight_map entry %s is not a file name", index_path, e->string); rc = -1; break; }
        /* shards sit beside the index: a name with a path in it could make us open anything
         * (a FIFO would hang the load) */
        const char *name = e->valuestring;
        if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
            err_set("%s: weight_map entry %s names \"%s\", not a file beside the index", index_path, e->string, name);
            rc = -1;
            break;
        }
        char *p = path_join(dir, name);
        int seen = 0;
        for (int f = 0; f < st->nfiles; f++) if (!strcmp(st->files[f].path, p)) seen = 1;
        if (!seen) rc = open_file(st, p);
        free(p);
    }
    /* every tensor the index names must be in the shard it names */
    for (cJSON *e = wm->child; e && rc == 0; e = e->next) {
        const StTensor *t = st_find(st, e->string);
        char *p = path_join(dir, e->valuestring);
        if (!t) { err_set("%s: missing tensor %s (listed in %s)", p, e->string, index_path); rc = -1; }
        else if (strcmp(st->files[t->file].path, p)) {
            err_set("%s: tensor %s is in %s, not where the index says", index_path, e->string, st->files[t->file].path);
            rc = -1;
        }
        free(p);
    }
    free(dir);
    cJSON_Delete(j);
    return rc;
}

SafeTensors *st_open(const char *path) {
    SafeTensors *st = xcalloc(1, sizeof *st);
    int rc;
    if (is_dir(path)) {
        /* safetensors first where a folder has both (it needs no copy) */
        static const char *const names[][2] = {{"model.safetensors.index.json", "model.safetensors"},
                                               {"pytorch_model.bin.index.json", "pytorch_model.bin"}};
        rc = 1;
        for (int i = 0; i < 2 && rc == 1; i++) {
            char *index = path_join(path, names[i][0]), *single = path_join(path, names[i][1]);
            if (file_exists(index)) rc = open_index(st, index);
            else if (file_exists(single)) rc = open_file(st, single);
            free(single); free(index);
        }
        if (rc == 1) {
            err_set("%s: no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                    "pytorch_model.bin.index.json", path);
            rc = -1;
        }
    } else if (has_suffix(path, ".json")) {
        rc = open_index(st, path);
    } else {
        rc = open_file(st, path);
    }
    if (rc) { st_close(st); return NULL; }
    return st;
}

void st_close(SafeTensors *st) {
    if (!st) return;
    for (int i = 0; i < st->nfiles; i++) {
        if (st->files[i].owned) free(st->files[i].map);
        else munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    for (int i = 0; i < st->ntensors; i++) free(st->tensors[i].name);
    free(st->files); free(st->tensors); free(st);
}

int st_weights_hash_hex(const char *path, char out[17]) {
    SafeTensors *st = st_open(path);
    if (!st) return -1;
    uint64_t h = FNV1A_START;
    for (int i = 0; i < st->nfiles; i++) h = fnv1a(st->files[i].map, st->files[i].size, h);
    st_close(st);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return 0;
}

const StTensor *st_find(const SafeTensors *st, const char *name) {
    for (int i = 0; i < st->ntensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

const char *st_file_of(const SafeTensors *st, const StTensor *t) { return st->files[t->file].path; }

void st_weight_types(const SafeTensors *st, char *out, size_t cap) {
    int count[DT_COUNT + 1] = {0};
    for (int i = 0; i < st->ntensors; i++) count[st->tensors[i].dtype]++;
    size_t n = 0;
    out[0] = 0;
    for (int d = 0; d <= DT_COUNT; d++)
        if (count[d] && n < cap)
            n += (size_t)snprintf(out + n, cap - n, "%s%s %d", n ? ", " : "", d < DT_COUNT ? dtype_name((DType)d) : "other",
                                  count[d]);
}

const StTensor *st_get(const SafeTensors *st, const char *name, int64_t d0, int64_t d1) {
    const StTensor *t = st_find(st, name);
    const char *where = st->nfiles ? st->files[0].path : "checkpoint";
    if (!t) { err_set("%s: missing tensor %s", where, name); return NULL; }
    where = st_file_of(st, t);
    if (t->dtype != DT_F32 && t->dtype != DT_F16 && t->dtype != DT_BF16 && !(dtype_is_quant(t->dtype) && d1)) {
        err_set("%s: tensor %s: dtype %s is not supported for weights (F32, F16, BF16; GGUF block types for matrices)",
                where, name, t->dtype_name);
        return NULL;
    }
    int want_ndim = d1 ? 2 : 1;
    if (t->ndim != want_ndim || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        char got[96] = "", *g = got;
        for (int i = 0; i < t->ndim && g < got + 80; i++)
            g += snprintf(g, got + sizeof got - g, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (d1) err_set("%s: tensor %s: wrong shape [%s], expected [%lld, %lld]", where, name, got, (long long)d0, (long long)d1);
        else err_set("%s: tensor %s: wrong shape [%s], expected [%lld]", where, name, got, (long long)d0);
        return NULL;
    }
    /* one pass over the weights: a NaN or an infinity would decode garbage without a word */
    const int64_t bad = quant_first_nonfinite(t->dtype, t->data, d1 ? d0 * d1 : d0);
    if (bad >= 0) {
        char at[64];
        if (d1) snprintf(at, sizeof at, "[%lld, %lld]", (long long)(bad / d1), (long long)(bad % d1));
        else snprintf(at, sizeof at, "%lld", (long long)bad);
        err_set("%s: tensor %s: %s %s is NaN or infinite (weights must be finite numbers)", where, name,
                dtype_is_quant(t->dtype) ? "the scale of the block at element" : "element", at);
        return NULL;
    }
    return t;
}
