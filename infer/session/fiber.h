/* Fibers: cooperative contexts on stacks of their own (glibc's ucontext),
 * for batched decoding (batch.c), which runs each sequence's one-sequence
 * code as a fiber and suspends it at every model product.
 *
 * Each stack is mapped with a PROT_NONE guard page below it, so a fiber
 * that overflows its stack faults (SIGSEGV) at once instead of writing over
 * whatever lies below.  Under AddressSanitizer every switch is announced to
 * it (__sanitizer_start/finish_switch_fiber), so that ASan knows which
 * stack is live and checks the fibers' frames like any other. */
#ifndef C2T_FIBER_H
#define C2T_FIBER_H
#include <stddef.h>
#include <ucontext.h>

typedef struct Fiber Fiber;
struct Fiber {
    ucontext_t ctx;
    char *map;            /* the mapping: guard page, then the stack (NULL: the thread's own stack) */
    size_t map_size;
    const void *stack;    /* the stack's lowest byte and size (for ASan; the thread's own learnt at the first switch) */
    size_t stack_size;
    void *asan_fake;      /* ASan's fake stack of this fiber while it is switched out */
    void (*fn)(void *);   /* what the fiber runs, with arg */
    void *arg;
    Fiber *link;          /* where it goes when fn returns */
};

/* The calling thread's own context, to switch from and back to: a zeroed
 * Fiber with no stack of its own. */
void fiber_init_thread(Fiber *f);

/* A fiber that runs fn(arg) on a stack of stack_size bytes (rounded up to
 * whole pages) with a guard page below, then switches to link.  0, or -1
 * with err_set when the stack cannot be mapped. */
int fiber_init(Fiber *f, size_t stack_size, void (*fn)(void *), void *arg, Fiber *link);

/* Suspends from (the running context) and resumes to. */
void fiber_switch(Fiber *from, Fiber *to);

/* Unmaps a fiber's stack (not running; a thread fiber: nothing). */
void fiber_free(Fiber *f);

/* The guard page's first byte and size (tests). */
const void *fiber_guard(const Fiber *f, size_t *size);
#endif
