/* Choosing a backend by name (--device) and asking it for failures that its
 * void ops could not return. */
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <string.h>
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

/* cuda_tiled_max: from 2^24 multiply-adds cuBLAS was faster (docs/cuda.md) */
#define BACKEND_DEFAULTS {.cpu_f32_cache_mb = 4096, .cuda_graphs = 0, .cuda_tiled_max = 1LL << 24, .cuda_fast_gemm = 0}
static BackendOptions settings = BACKEND_DEFAULTS;

void backend_options_default(BackendOptions *o) { *o = (BackendOptions)BACKEND_DEFAULTS; }

int backend_configure(const BackendOptions *o) {
    if (o->cpu_f32_cache_mb < 0 || o->cuda_tiled_max < 0 || o->cuda_graphs < 0 || o->cuda_graphs > 2 ||
        (o->cuda_fast_gemm != 0 && o->cuda_fast_gemm != 1)) {
        err_set("backend settings out of range");
        return -1;
    }
    settings = *o;
    return 0;
}

const BackendOptions *backend_settings(void) { return &settings; }

int backend_setting_text(const BackendOptions *o, int i, const char **key, char *value, size_t size) {
    static const char *const graphs[] = {"off", "on", "verbose"};
    switch (i) {
    case 0: *key = "cpu_f32_cache_mb"; snprintf(value, size, "%d", o->cpu_f32_cache_mb); return 0;
    case 1: *key = "cuda_graphs"; snprintf(value, size, "%s", graphs[o->cuda_graphs]); return 0;
    case 2: *key = "cuda_tiled_max"; snprintf(value, size, "%lld", o->cuda_tiled_max); return 0;
    case 3: *key = "cuda_fast_gemm"; snprintf(value, size, "%s", o->cuda_fast_gemm ? "on" : "off"); return 0;
    default: return -1;
    }
}

const Backend *backend_by_name(const char *device) {
    if (!device || !strcmp(device, "cpu")) return &cpu_backend;
    int is_auto = !strcmp(device, "auto");
    if (!is_auto && strcmp(device, "cuda")) {
        err_set("--device must be cpu, cuda or auto, not '%s'", device);
        return NULL;
    }
#ifdef C2T_CUDA
    if (cuda_available()) return &cuda_backend;
    if (is_auto) return &cpu_backend;
    err_set("--device cuda: no CUDA device is visible");
#else
    if (is_auto) return &cpu_backend;
    err_set("--device cuda: this build has no CUDA backend (nvcc was not on PATH when it was built)");
#endif
    return NULL;
}

const char *backend_failure(const Backend *be) {
#ifdef C2T_CUDA
    if (be == &cuda_backend && cuda_errors()) return cuda_last_error();
#endif
    (void)be;
    return NULL;
}

void backend_recorded(const Backend *be, void (*ops)(void *arg), void *arg) {
    if (be->record_begin && be->record_begin()) {
        ops(arg);
        if (be->record_end() == 0) return;
    }
    ops(arg);
}

void backend_shutdown(const Backend *be) {
#ifdef C2T_CUDA
    if (be == &cuda_backend) cuda_shutdown();
#endif
    (void)be;
}

void backend_unit_begin(const Backend *be, BackendTuner *t) {
    if (be->unit_begin) be->unit_begin(t);
}

void backend_unit_end(const Backend *be, BackendTuner *t) {
    if (be->unit_end) be->unit_end(t);
}
