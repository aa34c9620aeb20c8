#include "kernels/base/dtype.h"

size_t dtype_size(DType t) {
    static const size_t sz[DT_COUNT] = {4, 2, 2, 4, 8, 1};
    return (unsigned)t < DT_COUNT ? sz[t] : 0;
}

const char *dtype_name(DType t) {
    static const char *nm[DT_COUNT] = {"F32", "F16", "BF16", "I32", "I64", "U8"};
    return (unsigned)t < DT_COUNT ? nm[t] : "?";
}
