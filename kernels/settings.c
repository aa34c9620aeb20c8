/* The backends' settings (BackendOptions in kernels/kernels.h): one
 * process-wide copy that the backends read and the commands set, apart from
 * backend selection so that no two files call each other. */
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <stdio.h>

/* cuda_tiled_max: from 2^24 multiply-adds cuBLAS was faster (docs/cuda.md) */
#define BACKEND_DEFAULTS {.cpu_f32_cache_mb = 4096, .cuda_graphs = 0, .cuda_tiled_max = 1LL << 24, .cuda_fast_gemm = 0, \
                          .kv_dtype = DT_F32, .cpu_fast_gemm = 0}
static BackendOptions settings = BACKEND_DEFAULTS;

void backend_options_default(BackendOptions *o) { *o = (BackendOptions)BACKEND_DEFAULTS; }

int backend_configure(const BackendOptions *o) {
    if (o->cpu_f32_cache_mb < 0 || o->cuda_tiled_max < 0 || o->cuda_graphs < 0 || o->cuda_graphs > 2 ||
        (o->cuda_fast_gemm != 0 && o->cuda_fast_gemm != 1) || o->cpu_fast_gemm < CPU_GEMM_F32 || o->cpu_fast_gemm > CPU_GEMM_AMX ||
        (o->kv_dtype != DT_F32 && o->kv_dtype != DT_BF16)) {
        err_set("backend settings out of range");
        return -1;
    }
    if (o->cpu_fast_gemm == CPU_GEMM_BF16 && !backend_cpu_gemm_runs(CPU_GEMM_BF16)) {
        err_set("--cpu-fast-gemm on: this build has no AVX512-BF16 (a CPU with it and make ARCH=-march=native)");
        return -1;
    }
    if (o->cpu_fast_gemm == CPU_GEMM_AMX && !backend_cpu_gemm_runs(CPU_GEMM_AMX)) {
        err_set("--cpu-fast-gemm amx: this build or CPU has no AMX-BF16, or the kernel refused the tiles "
                "(a CPU with it, Linux 5.16 or later and make ARCH=-march=native)");
        return -1;
    }
    settings = *o;
    return 0;
}

const BackendOptions *backend_settings(void) { return &settings; }

int backend_cpu_gemm_runs(int gemm) {
    switch (gemm) {
    case CPU_GEMM_F32: return 1;
#ifdef __AVX512BF16__
    case CPU_GEMM_BF16: return 1;
#endif
    case CPU_GEMM_AMX: return cpu_amx_ready();
    default: return 0;
    }
}

const char *cpu_gemm_name(int g) { return g == CPU_GEMM_AMX ? "amx" : g == CPU_GEMM_BF16 ? "on" : "off"; }

const char *backend_cpu_isa(void) {
#if defined(__AVX512BF16__)
    const char *vec = "avx512-bf16";
#elif defined(__AVX512F__)
    const char *vec = "avx512";
#elif defined(__AVX2__) && defined(__AVXVNNI__)
    const char *vec = "avx2-vnni";   /* the quantized products' dots on AVX-VNNI */
#elif defined(__AVX2__)
    const char *vec = "avx2";
#else
    const char *vec = "x86-64";
#endif
    static char isa[32];
    snprintf(isa, sizeof isa, "%s%s", vec, cpu_amx_ready() ? "+amx" : "");
    return isa;
}

const char *backend_cpu_blas(void) { return openblas_get_corename(); }

int backend_setting_text(const BackendOptions *o, int i, const char **key, char *value, size_t size) {
    static const char *const graphs[] = {"off", "on", "verbose"};
    switch (i) {
    case 0: *key = "cpu_f32_cache_mb"; snprintf(value, size, "%d", o->cpu_f32_cache_mb); return 0;
    case 1: *key = "cuda_graphs"; snprintf(value, size, "%s", graphs[o->cuda_graphs]); return 0;
    case 2: *key = "cuda_tiled_max"; snprintf(value, size, "%lld", o->cuda_tiled_max); return 0;
    case 3: *key = "cuda_fast_gemm"; snprintf(value, size, "%s", o->cuda_fast_gemm ? "on" : "off"); return 0;
    case 4: *key = "kv_dtype"; snprintf(value, size, "%s", o->kv_dtype == DT_BF16 ? "bf16" : "f32"); return 0;
    case 5: *key = "cpu_fast_gemm"; snprintf(value, size, "%s", cpu_gemm_name(o->cpu_fast_gemm)); return 0;
    default: return -1;
    }
}

