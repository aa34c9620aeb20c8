/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_<parser>.c): each
 * defines LLVMFuzzerTestOneInput over one parser of a file format users
 * bring.  `make fuzz` links them with libFuzzer (clang, ASan + UBSan);
 * `make test` links them with tests/fuzz/replay.c and replays the committed
 * corpus tests/fuzz/corpus/<parser>/ (seeds and every input that once
 * found a bug), so a fixed bug stays fixed. */
#ifndef C2T_FUZZ_H
#define C2T_FUZZ_H
#include "kernels/base/util.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The per-process directory the inputs are written to. */
static inline const char *fuzz_dir_name(void) {
    static char dir[64];
    if (!dir[0]) snprintf(dir, sizeof dir, "/tmp/c2t_fuzz_%d", (int)getpid());
    return dir;
}

static inline int fuzz_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

/* The directory and what the inputs left in it, removed at a normal exit
 * (a run that crashes keeps its files to look at). */
static inline void fuzz_remove_dir(void) { nftw(fuzz_dir_name(), fuzz_remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

/* The input as a file named `name` in the per-process directory (parsers
 * take paths, and some find siblings by name); returns its path. */
static inline const char *fuzz_file(const char *name, const uint8_t *data, size_t size) {
    static char path[128];
    static int made;
    if (!made) {
        mkdir(fuzz_dir_name(), 0700);
        atexit(fuzz_remove_dir);
        made = 1;
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_dir_name(), name);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); abort(); }
    if (size && fwrite(data, 1, size, f) != size) { perror(path); abort(); }
    fclose(f);
    return path;
}

static inline const char *fuzz_dir(void) {
    fuzz_file(".keep", (const uint8_t *)"", 0);
    return fuzz_dir_name();
}
#endif
