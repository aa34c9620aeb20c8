#include "kernels/base/dtype.h"
#include <string.h>

uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFF)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

size_t dtype_size(DType t) {
    static const size_t sz[DT_COUNT] = {4, 2, 2, 4, 8, 1};   /* the block types: 0 */
    return (unsigned)t < DT_COUNT ? sz[t] : 0;
}

const char *dtype_name(DType t) {
    static const char *nm[DT_COUNT] = {"F32", "F16", "BF16", "I32", "I64", "U8", "Q8_0", "Q4_0",
                                       "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "Q2_K", "Q3_K"};
    return (unsigned)t < DT_COUNT ? nm[t] : "?";
}
