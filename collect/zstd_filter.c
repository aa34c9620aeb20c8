/* zstd HDF5 filter (see zstd_filter.h).  This file is compiled into libc2t.a
 * and, with -DH5ZSTD_PLUGIN, into the dynamic plugin libh5zstd.so.  The
 * filter itself calls no HDF5 function (buffers are plain malloc/free, as
 * HDF5's own filters and hdf5plugin's use), so the plugin does not link
 * libhdf5 and loads into any HDF5 1.10+ (h5py wheels bundle their own). */
#include "collect/zstd_filter.h"
#include <stdint.h>
#include <stdlib.h>
#include <zstd.h>

/* A frame without a content size (not ours; other writers may stream) is
 * decoded with a growing buffer, up to this size. */
#define ZSTD_FILTER_MAX_OUT ((size_t)1 << 32)

static size_t decompress_stream(const void *src, size_t n, void **out, size_t *out_cap) {
    ZSTD_DStream *ds = ZSTD_createDStream();
    if (!ds) return 0;
    size_t cap = n * 4 < 4096 ? 4096 : n * 4;
    unsigned char *dst = malloc(cap);
    ZSTD_inBuffer in = {src, n, 0};
    ZSTD_outBuffer ob = {dst, cap, 0};
    size_t ret = 1;
    while (dst) {
        ret = ZSTD_decompressStream(ds, &ob, &in);
        if (ZSTD_isError(ret)) break;
        if (in.pos == in.size && ret == 0) break;          /* all frames done */
        if (in.pos == in.size && ob.pos < ob.size) { ret = 1; break; }  /* truncated input */
        if (ob.pos == ob.size) {
            if (cap >= ZSTD_FILTER_MAX_OUT) { ret = 1; break; }
            cap *= 2;
            unsigned char *nd = realloc(dst, cap);
            if (!nd) { ret = 1; break; }
            dst = nd;
            ob.dst = dst;
            ob.size = cap;
        }
    }
    ZSTD_freeDStream(ds);
    if (!dst || ret != 0) { free(dst); return 0; }
    *out = dst;
    *out_cap = cap;
    return ob.pos;
}

/* Total content size of the frames in src (skippable frames count 0), or
 * ZSTD_CONTENTSIZE_UNKNOWN / ZSTD_CONTENTSIZE_ERROR (stable API only). */
static unsigned long long content_size(const void *src, size_t n) {
    const unsigned char *p = src;
    unsigned long long total = 0;
    while (n > 0) {
        size_t fs = ZSTD_findFrameCompressedSize(p, n);
        if (ZSTD_isError(fs) || fs > n) return ZSTD_CONTENTSIZE_ERROR;
        unsigned long long cs = ZSTD_getFrameContentSize(p, fs);
        if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN) return cs;
        if (total + cs < total) return ZSTD_CONTENTSIZE_ERROR;
        total += cs;
        p += fs;
        n -= fs;
    }
    return total;
}

size_t c2t_zstd_filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[],
                       size_t nbytes, size_t *buf_size, void **buf) {
    if (flags & H5Z_FLAG_REVERSE) {
        unsigned long long total = content_size(*buf, nbytes);
        if (total == ZSTD_CONTENTSIZE_ERROR) return 0;
        void *out = NULL;
        size_t cap = 0, got;
        if (total == ZSTD_CONTENTSIZE_UNKNOWN) {
            got = decompress_stream(*buf, nbytes, &out, &cap);
            if (!out) return 0;
        } else {
            if (total > ZSTD_FILTER_MAX_OUT) return 0;
            cap = total ? (size_t)total : 1;
            out = malloc(cap);
            if (!out) return 0;
            got = ZSTD_decompress(out, (size_t)total, *buf, nbytes);
            if (ZSTD_isError(got) || got != total) { free(out); return 0; }
        }
        free(*buf);
        *buf = out;
        *buf_size = cap;
        return got;
    }
    int level = cd_nelmts > 0 ? (int)cd_values[0] : C2T_ZSTD_DEFAULT_LEVEL;
    size_t cap = ZSTD_compressBound(nbytes);
    void *out = malloc(cap);
    if (!out) return 0;
    size_t n = ZSTD_compress(out, cap, *buf, nbytes, level);
    /* An optional filter that cannot shrink the chunk declines: HDF5 then
     * stores the chunk unfiltered (and marks that in the chunk's mask). */
    if (ZSTD_isError(n) || ((flags & H5Z_FLAG_OPTIONAL) && n >= nbytes)) { free(out); return 0; }
    free(*buf);
    *buf = out;
    *buf_size = cap;
    return n;
}

const H5Z_class2_t c2t_zstd_filter_class[1] = {{
    H5Z_CLASS_T_VERS,
    (H5Z_filter_t)H5Z_FILTER_ZSTD,
    1, 1,
    "zstd (c2t, libzstd)",
    NULL, NULL,
    (H5Z_func_t)c2t_zstd_filter,
}};

#ifndef H5ZSTD_PLUGIN
#include "kernels/base/util.h"

int trace_register_zstd(void) {
    /* Library functions report one line through err_set; HDF5's own stack
     * dump on stderr would be a second (long) report. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* Registered unconditionally (not after H5Zfilter_avail, which would
     * load whatever plugin HDF5_PLUGIN_PATH offers for 32015): in-process,
     * this code is the filter.  H5Zregister replaces a registration. */
    static int registered;
    if (registered) return 0;
    if (H5Zregister(c2t_zstd_filter_class) < 0) {
        err_set("cannot register the zstd HDF5 filter (id %d)", H5Z_FILTER_ZSTD);
        return -1;
    }
    registered = 1;
    return 0;
}
#endif
