/* The zstd filter as a dynamic HDF5 filter plugin (build/plugins/libh5zstd.so,
 * installed to $(PREFIX)/lib/hdf5/plugin).  HDF5 finds it through
 * HDF5_PLUGIN_PATH; the filter code is collect/zstd_filter.c, compiled into
 * the same .so with -DH5ZSTD_PLUGIN. */
#include "collect/zstd_filter.h"
#include <H5PLextern.h>

H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }
const void *H5PLget_plugin_info(void) { return c2t_zstd_filter_class; }
