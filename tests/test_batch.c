/* Batched forwards (llama_forward_batch): several sequences of different
 * lengths, each with its own cache, positions and mask, in one forward must
 * give each sequence what its own llama_forward gives — logits, final
 * hidden states, captured layer inputs and the cache the next forward reads
 * — and a cache that would overflow is an error naming the sequence.  And
 * the fibers that batched decoding runs its sequences on: they switch back
 * and forth with their frames intact, and a stack overflow faults on the
 * guard page instead of writing below the stack. */
#include "tests/harness.h"
#include "tests/strict_backend.h"
#include "infer/session/fiber.h"
#include <signal.h>
#include "infer/model/llama.h"
#include "infer/speculative/draft.h"
#include "kernels/base/util.h"

static const Backend *be;   /* the CPU backend, strict (main) */

#define NSEQ 3
static const int prompt_len[NSEQ] = {5, 9, 3};

static void fill_tokens(int *t, int n, int seed, int vocab) {
    for (int i = 0; i < n; i++) t[i] = 1 + (seed * 37 + i * 11) % (vocab - 1);
}

/* a tree of 4 nodes, 0 -> {1, 2}, 1 -> 3, over its window (the 4 new
 * slots; the committed context is visible to all) */
static void four_node_mask(uint8_t *mask) {
    static const int parent[4] = {-1, 0, 0, 1};
    memset(mask, 0, 16);
    for (int i = 0; i < 4; i++)
        for (int a = i; a >= 0; a = parent[a]) mask[i * 4 + a] = 1;
}

/* max |difference| of the rows a and b (n floats each, backend memory) */
static float rows_diff(const float *a, const float *b, size_t n) {
    float *ha = xmalloc(sizeof(float) * n), *hb = xmalloc(sizeof(float) * n);
    be->to_host(ha, a, n);
    be->to_host(hb, b, n);
    float d = max_diff(ha, hb, n);
    free(ha); free(hb);
    return d;
}

static void batch_equals_single(const char *dir, float bound) {
    LlamaModel *m = llama_load(dir, be);
    REQUIRE(m, "%s", err_get());
    const int V = m->cfg.vocab, H = m->cfg.hidden;
    LlamaState *one[NSEQ], *many[NSEQ];
    const int capture[2] = {0, 1};
    for (int i = 0; i < NSEQ; i++) {
        one[i] = llama_state_new(m, 64);
        many[i] = llama_state_new(m, 64);
        REQUIRE(one[i] && many[i], "%s", err_get());
    }
    REQUIRE(!llama_capture(one[1], capture, 2) && !llama_capture(many[1], capture, 2), "%s", err_get());
    LlamaBatch *b = llama_batch_new(m);
    float worst = 0;
    /* step 1: prompts of different lengths; step 2: a token tree for
     * sequence 0, one token for 1, a causal chain of 2 for 2 */
    for (int step = 0; step < 2; step++) {
        int n[NSEQ], off[NSEQ + 1] = {0}, tokens[64], pos[64];
        uint8_t tmask[16];
        const uint8_t *masks[NSEQ] = {NULL, NULL, NULL};
        for (int i = 0; i < NSEQ; i++) {
            n[i] = step == 0 ? prompt_len[i] : (int[]){4, 1, 2}[i];
            off[i + 1] = off[i] + n[i];
            fill_tokens(tokens + off[i], n[i], 3 * step + i, V);
            static const int tree_depth[4] = {0, 1, 1, 2};
            for (int t = 0; t < n[i]; t++)
                pos[off[i] + t] = one[i]->n_past + (step == 1 && i == 0 ? tree_depth[t] : t);
        }
        if (step == 1) { four_node_mask(tmask); masks[0] = tmask; }
        for (int i = 0; i < NSEQ; i++)
            REQUIRE(!llama_forward(one[i], tokens + off[i], pos + off[i], n[i], masks[i], LOGITS_ALL), "%s", err_get());
        REQUIRE(!llama_forward_batch(b, many, NSEQ, tokens, pos, off, masks, NULL, NULL), "%s", err_get());
        for (int i = 0; i < NSEQ; i++) {
            float dl = rows_diff(one[i]->logits, many[i]->logits, (size_t)n[i] * V);
            float dh = rows_diff(one[i]->hidden, many[i]->hidden, (size_t)n[i] * H);
            CHECK(dl <= bound && dh <= bound, "%s step %d sequence %d: logits differ by %g, hidden by %g", dir, step,
                  i, dl, dh);
            if (dl > worst) worst = dl;
            CHECK(many[i]->n_new == n[i], "n_new %d", many[i]->n_new);
        }
        float da = rows_diff(one[1]->aux, many[1]->aux, (size_t)n[1] * 2 * H);
        CHECK(da <= bound, "%s step %d: captured layer inputs differ by %g", dir, step, da);
        /* keep the tree's path 0 -> 1 -> 3 in sequence 0, everything elsewhere */
        const int keep[3] = {0, 1, 3};   /* to backend memory, where kv_keep reads it */
        int *dkeep = backend_alloc_ints(be, 3);
        backend_ints_to_device(be, dkeep, keep, 3);
        llama_commit(one[0], step ? dkeep : NULL, step ? 3 : n[0]);
        llama_commit(many[0], step ? dkeep : NULL, step ? 3 : n[0]);
        be->release(dkeep);
        for (int i = 1; i < NSEQ; i++) { llama_commit(one[i], NULL, n[i]); llama_commit(many[i], NULL, n[i]); }
    }
    /* the caches the batch wrote: one more token each, alone, reads them */
    for (int i = 0; i < NSEQ; i++) {
        int t = 7 + i, p = one[i]->n_past;
        REQUIRE(!llama_forward(one[i], &t, &p, 1, NULL, LOGITS_ALL) && !llama_forward(many[i], &t, &p, 1, NULL, LOGITS_ALL),
                "%s", err_get());
        float d = rows_diff(one[i]->logits, many[i]->logits, V);
        CHECK(d <= bound, "%s sequence %d: the next token after the batch differs by %g", dir, i, d);
    }
    printf("# %s: %d sequences, batched vs one at a time: logits within %.2g\n", dir, NSEQ, worst);
    for (int i = 0; i < NSEQ; i++) { llama_state_free(one[i]); llama_state_free(many[i]); }
    llama_batch_free(b);
    llama_free(m);
}

static void test_batch_equals_single_f32(void) { batch_equals_single("tests/ckpt/llama3_f32", 1e-4f); }
static void test_batch_equals_single_bf16(void) { batch_equals_single("tests/ckpt/llama3_bf16", 1e-3f); }
/* the real model (make smollm2), where products of many tokens take sgemm */
static void test_batch_equals_single_smollm2(void) {
    if (!file_exists("models/smollm2-135m-instruct/model.safetensors")) SKIP("models/smollm2-135m-instruct absent (make smollm2)");
    batch_equals_single("models/smollm2-135m-instruct", 1e-3f);
}

/* One sequence whose cache would overflow: an error naming it, and no
 * sequence's context moved. */
static void test_batch_overflow_is_an_error(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    LlamaState *s[2] = {llama_state_new(m, 64), llama_state_new(m, 4)};
    LlamaBatch *b = llama_batch_new(m);
    int tokens[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pos[8] = {0, 1, 2, 0, 1, 2, 3, 4}, off[3] = {0, 3, 8};
    const LogitsMode last[2] = {LOGITS_LAST, LOGITS_LAST};
    int rc = llama_forward_batch(b, s, 2, tokens, pos, off, NULL, NULL, last);
    CHECK(rc == -1 && strstr(err_get(), "sequence 1") && strstr(err_get(), "4 slots"), "overflow: %s", err_get());
    CHECK(s[0]->n_past == 0 && s[0]->n_new == 0 && s[1]->n_new == 0, "a refused batch changed a state");
    int bad_off[3] = {0, 3, 2};
    CHECK(llama_forward_batch(b, s, 2, tokens, pos, bad_off, NULL, NULL, NULL) == -1, "negative length accepted");
    llama_state_free(s[0]); llama_state_free(s[1]);
    llama_batch_free(b);
    llama_free(m);
}

/* draft_dists: calls of one shape run as one softmax_topk over their
 * gathered rows, others apart; every call's ids, probabilities and
 * entropies are those of a softmax_topk of its own.  Outputs in backend
 * memory (the cycle's: softmax_topk_dev, copied out of the gathered
 * rows on the device) are a shape of their own; the strict backend checks
 * that the device outputs it is given are its memory.  Modes: every call's
 * outputs on the host, every call's in backend memory, and alternating;
 * each with the logits in buffers of their own, as consecutive rows of one
 * (read in place) and as rows of one in another order (gathered). */
static void test_dists_batched_equal_alone(void) {
    enum { V = 3000, K = 4, C = 5 };
    const int rows[C] = {1, 3, 1, 2, 1}, topm[C] = {100, 100, 0, 100, 100};
    float *logits[C];
    int ids[C][3 * K], want_ids[C][3 * K];
    float probs[C][3 * K], ent[C][3], want_probs[C][3 * K], want_ent[C][3];
    DistCall calls[C], *ptr[C];
    uint32_t seed = 7;
    for (int c = 0; c < C; c++) {
        logits[c] = be->alloc((size_t)rows[c] * V);
        for (int i = 0; i < rows[c] * V; i++) {
            seed = seed * 1664525u + 1013904223u;
            logits[c][i] = (float)(seed >> 8) / (1 << 24) * 12.0f - 6.0f;
        }
        cpu_backend.softmax_topk(logits[c], rows[c], V, 1.0f, K, want_ids[c], want_probs[c], topm[c],
                                 c == 3 ? NULL : want_ent[c]);
    }
    /* the logits where each call has its own buffer, as consecutive rows of
     * one in the calls' order of shape (0, 1, 2, 4 then 3: a batched draft
     * step's, read in place), and in the reverse order (gathered) */
    float *block = be->alloc((size_t)8 * V), *at[3][C];
    const int order[2][C] = {{0, 1, 2, 4, 3}, {3, 4, 2, 1, 0}};
    for (int c = 0; c < C; c++) at[0][c] = logits[c];
    for (int p = 0; p < 2; p++)
        for (int i = 0, off = 0; i < C; off += rows[order[p][i]], i++) at[1 + p][order[p][i]] = block + (size_t)off * V;
    const long violations0 = strict_violations;
    for (int place = 0; place < 3; place++)
    for (int mode = 0; mode < 3; mode++) {
        if (place) for (int c = 0; c < C; c++) be->copy(at[place][c], logits[c], (size_t)rows[c] * V);
        int *dev_ids[C];
        float *dev_probs[C], *dev_ent[C];
        for (int c = 0; c < C; c++) {
            const int dev = mode == 1 || (mode == 2 && c % 2);
            dev_ids[c] = dev ? backend_alloc_ints(be, 3 * K) : NULL;
            dev_probs[c] = dev ? be->alloc(3 * K) : NULL;
            dev_ent[c] = dev ? be->alloc(3) : NULL;
            /* the fourth call wants no entropy: a shape of its own */
            calls[c] = (DistCall){at[place][c], rows[c], V, K, topm[c], 1.0f, dev ? dev_ids[c] : ids[c],
                                  dev ? dev_probs[c] : probs[c], c == 3 ? NULL : dev ? dev_ent[c] : ent[c], dev};
            ptr[c] = &calls[c];
        }
        memset(ids, 0, sizeof ids); memset(probs, 0, sizeof probs); memset(ent, 0, sizeof ent);
        draft_dists(be, ptr, C);
        for (int c = 0; c < C; c++) {
            if (calls[c].on_device) {
                backend_ints_to_host(be, ids[c], dev_ids[c], (size_t)rows[c] * K);
                be->to_host(probs[c], dev_probs[c], (size_t)rows[c] * K);
                be->to_host(ent[c], dev_ent[c], rows[c]);
            }
            CHECK(!memcmp(ids[c], want_ids[c], sizeof(int) * rows[c] * K),
                  "logits %d, mode %d, call %d: ids differ from its own call", place, mode, c);
            CHECK(!memcmp(probs[c], want_probs[c], sizeof(float) * rows[c] * K),
                  "logits %d, mode %d, call %d: probabilities differ", place, mode, c);
            if (c != 3) CHECK(!memcmp(ent[c], want_ent[c], sizeof(float) * rows[c]),
                              "logits %d, mode %d, call %d: entropies differ", place, mode, c);
            if (dev_ids[c]) { be->release(dev_ids[c]); be->release(dev_probs[c]); be->release(dev_ent[c]); }
        }
    }
    CHECK(strict_violations == violations0, "%ld device outputs given host memory", strict_violations - violations0);
    for (int c = 0; c < C; c++) be->release(logits[c]);
    be->release(block);
}

/* The thread resumes two fibers in turn; each records a shared counter
 * and its own local (which must survive its suspensions), then yields. */
typedef struct { Fiber *self, *thread; int id, *counter, seen[8], done; } PingPong;
static void ping_pong(void *arg) {
    PingPong *p = arg;
    const int local = 1000 * p->id;
    for (int i = 0; i < 8; i++) {
        p->seen[i] = local + (*p->counter)++;
        fiber_switch(p->self, p->thread);
    }
    p->done = 1;
}

static void test_fibers_switch_and_return(void) {
    Fiber thread, a, b;
    int counter = 0;
    fiber_init_thread(&thread);
    PingPong pa = {&a, &thread, 0, &counter, {0}, 0}, pb = {&b, &thread, 1, &counter, {0}, 0};
    REQUIRE(!fiber_init(&a, 64 << 10, ping_pong, &pa, &thread), "fiber_init: %s", err_get());
    REQUIRE(!fiber_init(&b, 64 << 10, ping_pong, &pb, &thread), "fiber_init: %s", err_get());
    for (int i = 0; i < 16; i++) fiber_switch(&thread, i % 2 ? &b : &a);
    CHECK(!pa.done && !pb.done, "a fiber ended early");
    fiber_switch(&thread, &a);   /* a's fn returns: back here through its link */
    fiber_switch(&thread, &b);
    CHECK(pa.done && pb.done, "a fiber did not end");
    for (int i = 0; i < 8; i++) {
        CHECK(pa.seen[i] == 2 * i, "a's step %d saw %d, want %d", i, pa.seen[i], 2 * i);
        CHECK(pb.seen[i] == 1000 + 2 * i + 1, "b's step %d saw %d, want %d", i, pb.seen[i], 1000 + 2 * i + 1);
    }
    size_t guard_size;
    CHECK(fiber_guard(&a, &guard_size) && guard_size >= 4096, "no guard page below the stack");
    fiber_free(&a);
    fiber_free(&b);
}

/* A recursion that cannot be turned into a loop: each frame's buffer is
 * handed to an opaque function after the call. */
static void (*volatile touch)(volatile char *, int);
static void touch_buf(volatile char *b, int d) { b[d & 255] = (char)d; }
static int recurse(int depth) {
    volatile char buf[256];
    touch(buf, depth);
    if (depth > (1 << 30)) return 0;   /* far beyond any stack: never reached */
    const int r = recurse(depth + 1);
    touch(buf, r);
    return r + buf[0];
}
static void overflow(void *arg) { (void)arg; recurse(0); }

static const char *guard_lo;
static size_t guard_len;
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    const char *a = si->si_addr;
    _exit(a >= guard_lo && a < guard_lo + guard_len ? 42 : 43);
}

/* In a child: a fiber that recurses without end must fault on its guard
 * page (exit 42 from the SIGSEGV handler), not run on below its stack. */
static void test_fiber_overflow_faults_on_guard_page(void) {
    fflush(stdout);
    const pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        Fiber thread, f;
        fiber_init_thread(&thread);
        if (fiber_init(&f, 64 << 10, overflow, NULL, &thread)) _exit(2);
        guard_lo = fiber_guard(&f, &guard_len);
        stack_t alt = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
        sigaltstack(&alt, NULL);
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        touch = touch_buf;
        fiber_switch(&thread, &f);
        _exit(3);   /* the recursion returned: cannot happen */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42,
          "child %s %d (42: SIGSEGV on the guard page; 43: SIGSEGV elsewhere)",
          WIFEXITED(st) ? "exited with" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int main(void) {
    be = strict_backend();
    RUN(test_fibers_switch_and_return);
    RUN(test_fiber_overflow_faults_on_guard_page);
    RUN(test_batch_equals_single_f32);
    RUN(test_batch_equals_single_bf16);
    RUN(test_batch_equals_single_smollm2);
    RUN(test_batch_overflow_is_an_error);
    RUN(test_dists_batched_equal_alone);
    RUN(test_forward_inputs_in_backend_memory);
    return h_done();
}
