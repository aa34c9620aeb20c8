/* matmul_many against separate matmuls, shared by tests/test_kernels.c and
 * tests/test_quant.c. */
#ifndef C2T_MATMUL_MANY_CHECK_H
#define C2T_MATMUL_MANY_CHECK_H
#include "kernels/kernels.h"
#include <string.h>

/* matmul_many over count weights (of equal cols) of x[n], and each weight's
 * matmul alone, with 1 and then 2 threads (the thread count left at 2):
 * how many of the weights' products differ in any bit.  many[i] and
 * one[i] hold n * ws[i]->rows floats. */
static inline int many_vs_matmuls(const Weight *const *ws, int count, const float *x, int n, float *const *many,
                                  float *const *one) {
    int bad = 0;
    for (int threads = 1; threads <= 2; threads++) {
        cpu_threads_set(threads);
        cpu_backend.matmul_many(many, x, ws, count, n);
        for (int i = 0; i < count; i++) {
            cpu_backend.matmul(one[i], x, ws[i], n);
            bad += memcmp(one[i], many[i], sizeof(float) * (size_t)n * (size_t)ws[i]->rows) != 0;
        }
    }
    return bad;
}
#endif
