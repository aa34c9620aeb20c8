/* The zstd HDF5 filter (id 32015, the id hdf5plugin and the HDF Group's
 * plugin registry use), implemented with libzstd.
 *
 * One source, compiled twice: into libc2t.a, where trace_register_zstd()
 * registers it in-process, and (with -DH5ZSTD_PLUGIN) into the dynamic filter
 * plugin build/plugins/libh5zstd.so that h5dump, h5py and any other HDF5
 * program load through HDF5_PLUGIN_PATH.
 *
 * Chunk format: one zstd frame with its content size in the header, as
 * ZSTD_compress writes it (what hdf5plugin's Zstd filter writes and reads).
 * cd_values[0], if present, is the compression level (a signed int stored in
 * an unsigned slot; 0 means libzstd's default).  The decoder also accepts
 * several concatenated frames, skippable frames and frames without a content
 * size.  When the filter is optional in the pipeline and compressing would not
 * make the chunk smaller, it declines, and HDF5 stores the chunk as is. */
#ifndef C2T_ZSTD_FILTER_H
#define C2T_ZSTD_FILTER_H
#include <stddef.h>
#include <hdf5.h>

#ifndef H5Z_FILTER_ZSTD
#define H5Z_FILTER_ZSTD 32015
#endif
#define C2T_ZSTD_DEFAULT_LEVEL 3

/* The HDF5 filter callback (H5Z_func_t). */
size_t c2t_zstd_filter(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[],
                       size_t nbytes, size_t *buf_size, void **buf);

/* The filter class handed to H5Zregister / returned by H5PLget_plugin_info. */
extern const H5Z_class2_t c2t_zstd_filter_class[1];

#ifndef H5ZSTD_PLUGIN
/* Registers the filter with the HDF5 library in this process (idempotent)
 * and turns off HDF5's automatic error-stack printing.  0 or -1 + err_set. */
int trace_register_zstd(void);
#endif

#endif
