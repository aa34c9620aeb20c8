/* Choosing a backend by name (--device) and asking it for failures that its
 * void ops could not return. */
#include "kernels/kernels.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include <stdio.h>
#include <string.h>
#ifdef C2T_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_measure.h"
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

/* The first "model name" of /proc/cpuinfo, else "CPU". */
static const char *cpu_model_name(void) {
    static char name[256];
    if (name[0]) return name;
    snprintf(name, sizeof name, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(name, sizeof name, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    if (f) fclose(f);
    return name;
}

const char *backend_device_name(const Backend *be) {
#ifdef C2T_CUDA
    static char gpu[256];
    if (be == &cuda_backend) {
        if (!gpu[0] && cuda_device_name(gpu, sizeof gpu)) snprintf(gpu, sizeof gpu, "CUDA device");
        return gpu;
    }
#endif
    (void)be;
    return cpu_model_name();
}

int backend_product_tokens(const Backend *be) {
#ifdef C2T_CUDA
    if (be == &cuda_backend) return 64;
#endif
    return be == &cpu_backend && backend_settings()->cpu_fast_gemm == CPU_GEMM_AMX ? 16 : 1;
}

int backend_pad_rows(const Backend *be) {
#ifdef C2T_CUDA
    if (be == &cuda_backend) return 64;
#endif
    (void)be;
    return FEW_TOKENS;
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
        int rc;
        do {
            ops(arg);
        } while ((rc = be->record_end()) == 1);
        if (rc == 0) return;
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

_Static_assert(sizeof(int) == sizeof(float), "index arrays share the float buffers of alloc");

int *backend_alloc_ints(const Backend *be, size_t n) { return (int *)(void *)be->alloc(n); }

void backend_ints_to_host(const Backend *be, int *host, const int *dev, size_t n) {
    be->to_host((float *)(void *)host, (const float *)(const void *)dev, n);
}

void backend_ints_to_device(const Backend *be, int *dev, const int *host, size_t n) {
    be->to_device((float *)(void *)dev, (const float *)(const void *)host, n);
}

DevTree backend_tree_alloc(const Backend *be, int cap) {
    DevTree t = {.cap = cap};
    float *all = be->alloc((size_t)8 * cap);
    int *ints = (int *)(void *)all;
    t.token = ints; t.parent = ints + cap; t.depth = ints + 2 * cap; t.rank = ints + 3 * cap; t.slot = ints + 4 * cap;
    t.p = all + 5 * (size_t)cap; t.P = all + 6 * (size_t)cap; t.H = all + 7 * (size_t)cap;
    return t;
}

void backend_tree_release(const Backend *be, DevTree *t) {
    if (t->token) be->release(t->token);
    memset(t, 0, sizeof *t);
}

static void tree_op_run(const Backend *be, const TreeOp *o) {
    switch (o->kind) {
    case TREE_OP_ROOT: be->tree_root(&o->t, o->root); break;
    case TREE_OP_GROW: be->tree_grow(&o->t, o->n0, o->rows, o->ids, o->probs, o->ent, o->k, o->picks, o->count, o->map); break;
    case TREE_OP_TOP: be->tree_top(&o->t, o->score, o->from, o->n, o->m, o->sel); break;
    case TREE_OP_CLASSIFY: be->tree_classify(&o->t, o->from, o->n, &o->net, o->conf); break;
    case TREE_OP_PASS: be->tree_pass(&o->t, o->from, o->n, o->conf, o->beta, o->path_conf, o->count_out); break;
    case TREE_OP_COMPACT: be->tree_compact(&o->t, &o->src, o->keep, o->m, o->pad); break;
    case TREE_OP_INPUTS:
        be->tree_inputs(&o->t, o->rows, o->m, o->at, o->base, o->ones, o->pos0, o->nctx, o->out, o->mask);
        break;
    case TREE_OP_ACCEPT: be->tree_accept(&o->t, o->n, o->want, o->from_start, o->steps, o->walk); break;
    case TREE_OP_ARGMAX: be->argmax_dev(o->logits, o->n, o->vocab, o->out_ids); break;
    case TREE_OP_SAMPLE: be->sample_dev(o->logits, o->n, o->vocab, &o->sp, o->key, o->n0, o->out_ids); break;
    case TREE_OP_KINDS: break;
    }
}

void backend_tree_batch(const Backend *be, const TreeOp *ops, int n) {
    if (n <= 0) return;
    if (be->tree_batch && n > 1) {   /* one op: its own entry, the kernel it always launches */
        be->tree_batch(ops, n);
        return;
    }
    for (int i = 0; i < n; i++) tree_op_run(be, &ops[i]);
}

void backend_to_host_many(const Backend *be, float *const *host, const float *const *dev, const size_t *n, int count) {
    if (count <= 0) return;
    if (be->to_host_many) {
        be->to_host_many(host, dev, n, count);
        return;
    }
    for (int i = 0; i < count; i++) be->to_host(host[i], dev[i], n[i]);
}
