/* Replaying recorded forwards: what decides that a captured forward (a CUDA
 * graph, kernels/cuda/graph.cu) may run again without being issued op by op.
 *
 * A forward is first *signed*: its ops are issued with nothing launched,
 * each one mixing into a 64-bit signature everything a launch is made of
 * (the kernel, its grid and block, every argument's bytes, the bytes of
 * every control upload).  Two forwards of equal signature launch the same
 * kernels with the same arguments, so the graph recorded for the first is
 * the second's, whatever else the host did in between: the inputs that
 * change every cycle (tokens, positions, the KV slot, the context length,
 * masks) are read in device memory (kernels.h).  The signature is the key
 * of a small cache of recorded graphs, the least recently used replaced.
 *
 * What still changes with the context is the attention launch's bound on it
 * (AttnSeq.ctx_max: its grid and split count): attn_ctx_bound rounds it up
 * to a bucket, so one recording serves ATTN_CTX_BUCKET slots of context.
 *
 * Plain C (tested on the CPU, test_kernels); the CUDA runtime calls it. */
#ifndef C2T_REPLAY_H
#define C2T_REPLAY_H
#include <stddef.h>
#include <stdint.h>

/* Contexts share a bound in steps of this many slots. */
#define ATTN_CTX_BUCKET 256

/* The attention launch's bound for a context of ctx slots in a cache of
 * `slots`: ctx rounded up to a multiple of ATTN_CTX_BUCKET, at most slots
 * (never below ctx). */
int attn_ctx_bound(int ctx, int slots);

/* The rows of a tree verification of n nodes where forwards are replayed:
 * n rounded up to the next of 1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, ...
 * (from 8 on, steps of a half and a third in turn), at most cap, never
 * below n.  Trees whose size changes every cycle (a threshold's, a size
 * from costs) then share one recording per bucket; the rows past n are
 * dead padding (tree_compact's pad), which no walk accepts. */
int verify_rows_bound(int n, int cap);

/* A signature being made: replay_sign_init, then replay_sign per piece. */
#define REPLAY_SIGN_INIT 1469598103934665603ull
/* h with the n bytes at p mixed in (FNV-1a, 64 bits; order matters). */
uint64_t replay_sign(uint64_t h, const void *p, size_t n);

/* Recorded graphs by signature: the entries' own data (the CUDA graphs,
 * their pinned upload buffers) are the caller's, indexed by entry. */
#define REPLAY_ENTRIES 64
typedef struct {
    uint64_t key[REPLAY_ENTRIES];       /* 0: free */
    unsigned long long used[REPLAY_ENTRIES];
    unsigned long long clock;
    long hits, misses;
} ReplayCache;

/* The entry recorded under key (its use noted), or -1 (a miss, counted). */
int replay_find(ReplayCache *c, uint64_t key);
/* Where a new recording goes: a free entry, else the least recently used
 * (the caller drops what it held there first). */
int replay_victim(const ReplayCache *c);
/* Entry i now holds key's recording (key != 0), used now. */
void replay_store(ReplayCache *c, int i, uint64_t key);
/* Entry i is free again. */
void replay_drop(ReplayCache *c, int i);
#endif
