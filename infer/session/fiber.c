/* Fibers (infer/session/fiber.h). */
#include "infer/session/fiber.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#else
#define FIBER_ASAN 0
#endif

/* ASan's side of a switch, in two halves around swapcontext: the leaving
 * context names the stack it is about to run on (to) and keeps its own
 * fake stack (save; NULL when it leaves for good), and the context that
 * resumes learns the stack it came from. */
static void asan_leave(void **save, const Fiber *to) {
#if FIBER_ASAN
    __sanitizer_start_switch_fiber(save, to->stack, to->stack_size);
#else
    (void)save; (void)to;
#endif
}

static void asan_arrive(void *save, Fiber *from) {
#if FIBER_ASAN
    const void *bottom; size_t size;
    __sanitizer_finish_switch_fiber(save, &bottom, &size);
    if (from && !from->map) { from->stack = bottom; from->stack_size = size; }   /* the thread's stack */
#else
    (void)save; (void)from;
#endif
}

/* The fiber being started, its address in two ints: makecontext passes
 * ints only. */
static void fiber_entry(int lo, int hi) {
    Fiber *f = (Fiber *)(uintptr_t)((uint64_t)(uint32_t)hi << 32 | (uint32_t)lo);
    asan_arrive(NULL, f->link);
    f->fn(f->arg);
    asan_leave(NULL, f->link);   /* this stack is done: its fake frames go */
    setcontext(&f->link->ctx);
}

void fiber_init_thread(Fiber *f) { memset(f, 0, sizeof *f); }

int fiber_init(Fiber *f, size_t stack_size, void (*fn)(void *), void *arg, Fiber *link) {
    memset(f, 0, sizeof *f);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_size = (stack_size + page - 1) / page * page;
    char *map = mmap(NULL, stack_size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (map == MAP_FAILED) {
        err_set("fiber stack of %zu bytes: %s", stack_size, strerror(errno));
        return -1;
    }
    if (mprotect(map, page, PROT_NONE)) {
        err_set("fiber stack's guard page: %s", strerror(errno));
        munmap(map, stack_size + page);
        return -1;
    }
    f->map = map;
    f->map_size = stack_size + page;
    f->stack = map + page;
    f->stack_size = stack_size;
    f->fn = fn;
    f->arg = arg;
    f->link = link;
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = map + page;
    f->ctx.uc_stack.ss_size = stack_size;
    f->ctx.uc_link = NULL;   /* fiber_entry switches to link itself */
    const uint64_t at = (uintptr_t)f;
    makecontext(&f->ctx, (void (*)(void))fiber_entry, 2, (int)(uint32_t)at, (int)(uint32_t)(at >> 32));
    return 0;
}

void fiber_switch(Fiber *from, Fiber *to) {
    asan_leave(&from->asan_fake, to);
    swapcontext(&from->ctx, &to->ctx);
    asan_arrive(from->asan_fake, NULL);
}

void fiber_free(Fiber *f) {
    if (f->map) munmap(f->map, f->map_size);
    f->map = NULL;
}

const void *fiber_guard(const Fiber *f, size_t *size) {
    *size = f->map ? f->map_size - f->stack_size : 0;
    return f->map;
}
