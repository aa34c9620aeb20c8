/* Replays a harness's committed corpus without libFuzzer (gcc, any build):
 * build/fuzz/replay_<parser> runs every file of tests/fuzz/corpus/<parser>/
 * (or the files given) through LLVMFuzzerTestOneInput.  A crash or a
 * sanitizer report (make test-asan) fails the test; otherwise one PASS line
 * for tests/run.sh. */
#include "tests/fuzz/fuzz.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static int replay_file(const char *path) {
    size_t n = 0;
    char *buf = read_text_file(path, &n);
    if (!buf) { fprintf(stderr, "%s\n", err_get()); return -1; }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *name = strncmp(base, "replay_", 7) ? base : base + 7;
    int n = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++, n++)
            if (replay_file(argv[i])) return 1;
    } else {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
        DIR *d = opendir(dir);
        if (!d) { printf("FAIL fuzz_replay_%s: no corpus at %s\n", name, dir); return 1; }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[600];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (replay_file(p)) { closedir(d); printf("FAIL fuzz_replay_%s: cannot read %s\n", name, p); return 1; }
            n++;
        }
        closedir(d);
    }
    printf("PASS fuzz_replay_%s\n# %s: %d inputs replayed without a crash\n", name, name, n);
    return 0;
}
