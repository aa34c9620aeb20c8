/* The CPU backend's threads (kernels/cpu/cpu.h): a small pool of its own
 * rather than OpenMP's parallel regions.
 *
 * Why: a decoded token runs a hundred or more short regions (each product
 * and attention of each layer).  At the end of an OpenMP region every thread
 * waits for the slowest, so on a machine another job shares, a worker that
 * is descheduled holds up the region for a whole time slice: SmolLM2
 * decoded at 7 tok/s on two threads against 54 on one while a busy loop held
 * one of two cores.  Here a region is cut into `parts` fixed pieces (one per
 * thread, so that each thread streams one contiguous share of a weight, as
 * before), and any thread may claim any piece that no one has started: the
 * caller runs its own piece and then every piece a descheduled worker has
 * not taken, so the region waits only for a piece that is already running.
 * A worker between regions spins for POOL_SPIN_US (the gaps within a
 * forward are shorter) and then sleeps on a futex, so it neither burns the
 * core a competing job needs nor, having slept, waits long for the CPU when
 * woken (the scheduler favours a thread that slept).
 *
 * Which thread runs a piece changes no result: a piece is the same work
 * whoever runs it, and the pieces' splits make no sum depend on the thread
 * count (matmul.c), which the backend's tuner changes between cycles. */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <limits.h>
#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long a worker waits for the next region before it sleeps. */
#define POOL_SPIN_US 50
#define POOL_MAX_THREADS 256

/* OpenBLAS runs on one thread; the backend splits its calls itself
 * (matmul.c), so results do not depend on the thread count. */
int cpu_threads_max(void) {
    static int max = 0;
    if (!max) {
        max = omp_get_max_threads();   /* OMP_NUM_THREADS, else the cores */
        if (max > POOL_MAX_THREADS) max = POOL_MAX_THREADS;
        openblas_set_num_threads(1);
    }
    return max;
}

static atomic_int pool_parts = 0;   /* threads of the next regions (0: all) */

void cpu_threads_set(int n) {
    if (n < 1) n = 1;
    if (n > cpu_threads_max()) n = cpu_threads_max();
    atomic_store(&pool_parts, n);
}

static struct {
    atomic_uint gen;                /* futex word: the current region's number */
    atomic_uint_least64_t claim;    /* that number << 32 | the next unclaimed piece */
    atomic_int done;                /* pieces of the current region finished */
    atomic_int sleepers;            /* workers asleep on gen */
    _Atomic(PoolTask) fn;
    _Atomic(void *) ctx;
    atomic_int parts;
    int workers;                    /* started, besides the callers */
    pthread_mutex_t busy;           /* one region at a time; a second caller runs alone */
} P = {.busy = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int in_region;   /* a region's piece calling into the backend runs alone */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claims and runs pieces of region gen until none is left. */
static void run_pieces(unsigned gen, PoolTask fn, void *ctx, int parts) {
    for (;;) {
        uint_least64_t c = atomic_load_explicit(&P.claim, memory_order_acquire);
        if ((unsigned)(c >> 32) != gen || (int)(c & 0xffffffffu) >= parts) return;
        if (!atomic_compare_exchange_weak_explicit(&P.claim, &c, c + 1, memory_order_acq_rel, memory_order_relaxed))
            continue;
        in_region = 1;
        fn(ctx, (int)(c & 0xffffffffu), parts);
        in_region = 0;
        atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    }
}

static void *worker(void *arg) {
    (void)arg;
    unsigned seen = atomic_load(&P.gen);
    for (;;) {
        unsigned g;
        double t0 = now_us();
        int spins = 0;
        while ((g = atomic_load_explicit(&P.gen, memory_order_acquire)) == seen) {
            cpu_relax();
            if (++spins % 64 || now_us() - t0 < POOL_SPIN_US) continue;
            atomic_fetch_add(&P.sleepers, 1);
            syscall(SYS_futex, &P.gen, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            atomic_fetch_sub(&P.sleepers, 1);
            t0 = now_us();
        }
        seen = g;
        /* these may already be a later region's: then every claim fails */
        PoolTask fn = atomic_load_explicit(&P.fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&P.ctx, memory_order_relaxed);
        run_pieces(g, fn, ctx, atomic_load_explicit(&P.parts, memory_order_relaxed));
    }
    return NULL;
}

/* Starts workers until there are n. */
static void pool_grow(int n) {
    for (; P.workers < n; P.workers++) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&t, &a, worker, NULL);
        pthread_attr_destroy(&a);
        if (rc) break;   /* fewer workers: the caller runs their pieces */
    }
}

void cpu_parallel(PoolTask fn, void *ctx, int parallel) {
    int parts = atomic_load(&pool_parts);
    if (!parts) parts = cpu_threads_max();
    if (!parallel || parts < 2 || in_region || pthread_mutex_trylock(&P.busy)) {
        fn(ctx, 0, 1);
        return;
    }
    pool_grow(parts - 1);
    const unsigned g = atomic_load_explicit(&P.gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&P.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&P.parts, parts, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (uint_least64_t)g << 32, memory_order_release);
    atomic_store_explicit(&P.gen, g, memory_order_release);
    if (atomic_load(&P.sleepers)) syscall(SYS_futex, &P.gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    run_pieces(g, fn, ctx, parts);
    /* what is left runs on workers now: wait, yielding the core to them */
    double t0 = now_us();
    for (int spins = 0; atomic_load_explicit(&P.done, memory_order_acquire) < parts; spins++) {
        cpu_relax();
        if (spins % 64 == 0 && now_us() - t0 > POOL_SPIN_US) sched_yield();
    }
    pthread_mutex_unlock(&P.busy);
}
