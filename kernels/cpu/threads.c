/* The CPU backend's thread count, apart from the kernels that use it (so
 * that no two files of kernels/cpu/ call each other). */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <omp.h>

/* OpenBLAS runs on one thread; the backend splits its calls over OpenMP
 * threads itself (kernels/cpu/matmul.c), so results do not depend on the
 * thread count. */
int cpu_threads_max(void) {
    static int max = 0;
    if (!max) {
        max = omp_get_max_threads();   /* OMP_NUM_THREADS, else the cores */
        openblas_set_num_threads(1);
    }
    return max;
}

void cpu_threads_set(int n) {
    if (n < 1) n = 1;
    if (n > cpu_threads_max()) n = cpu_threads_max();
    omp_set_num_threads(n);
}
