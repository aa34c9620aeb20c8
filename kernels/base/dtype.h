/* Element types of checkpoint tensors and weights (a basic: the trainer's
 * checkpoint reader needs it without the compute interface). */
#ifndef C2T_DTYPE_H
#define C2T_DTYPE_H
#include <stddef.h>
#include <stdint.h>

/* DT_Q8_0 .. DT_Q3_K: GGUF's (ggml's) block types, stored as ggml lays out
 * their blocks (kernels/base/quant.h); they have no size per element, so
 * dtype_size gives 0 for them (quant_row_bytes sizes a row). */
typedef enum {
    DT_F32 = 0, DT_F16, DT_BF16, DT_I32, DT_I64, DT_U8,
    DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_NL, DT_IQ4_XS, DT_Q2_K, DT_Q3_K, DT_COUNT
} DType;
size_t dtype_size(DType t);
/* F32 to BF16, rounded to nearest even (NaN stays NaN). */
uint16_t f32_to_bf16(float f);
const char *dtype_name(DType t);
#endif
