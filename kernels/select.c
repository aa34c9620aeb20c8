/* Choosing a backend by name (--device) and asking it for failures that its
 * void ops could not return. */
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <string.h>
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

const Backend *backend_by_name(const char *device) {
    if (!device || !strcmp(device, "cpu")) return &cpu_backend;
    int is_auto = !strcmp(device, "auto");
    if (!is_auto && strcmp(device, "cuda")) {
        err_set("--device must be cpu, cuda or auto, not '%s'", device);
        return NULL;
    }
#ifdef C2T_CUDA
    if (backend_settings()->kv_dtype != DT_F32 && (!is_auto || cuda_available())) {
        err_set("--device %s: the CUDA backend keeps its KV cache in F32 (--kv-dtype bf16 is the CPU's)", device);
        return NULL;
    }
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
