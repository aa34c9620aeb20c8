/* Write faults for tests (LD_PRELOAD=build/tests/libfault_write.so): a disk
 * that fills up or starts failing in the middle of a run.  Only writes to
 * files whose path contains $C2T_FAULT_FILE are touched; the first
 * $C2T_FAULT_AFTER bytes written to them go through, then
 *   C2T_FAULT_MODE=enospc  a write that would grow the file fails with
 *                          ENOSPC (a full disk: rewrites inside the file
 *                          still succeed), the one crossing the budget is
 *                          cut short first, as a filling disk does;
 *   C2T_FAULT_MODE=kill    the write crossing the budget kills the process
 *                          (SIGKILL) before any of it lands: a kill -9 at an
 *                          exact point of the file's making;
 *   C2T_FAULT_MODE=eio     the write crossing the budget and every later
 *                          write and fsync fail with EIO, none cut short (a
 *                          dying disk; a request the device half wrote
 *                          inside the file is a torn write, which HDF5's
 *                          metadata checksums detect but cannot undo:
 *                          docs/trace_format.md);
 *   C2T_FAULT_MODE=tear    C2T_FAULT_AFTER counts writes that cross a 4 KiB
 *                          page boundary instead of bytes: that many go
 *                          through, the next lands up to its first page
 *                          boundary and the process is killed (SIGKILL).
 *                          What kill -9 can do to a multi-page write: the
 *                          kernel copies a write into the page cache page
 *                          by page and stops between pages on a fatal
 *                          signal; the bytes within one page land together.
 * Used by tests/test_collect.c (spec-collect stops with one line and the
 * file it leaves resumes to the uninterrupted result). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static long long budget = -1;   /* bytes left before faults; -1: not read yet */
static int eio_mode, kill_mode, tear_mode;
static const char *target;

static void setup(void) {
    if (budget != -1) return;
    const char *a = getenv("C2T_FAULT_AFTER"), *m = getenv("C2T_FAULT_MODE");
    target = getenv("C2T_FAULT_FILE");
    budget = a ? atoll(a) : 0;
    eio_mode = m && !strcmp(m, "eio");
    kill_mode = m && !strcmp(m, "kill");
    tear_mode = m && !strcmp(m, "tear");
}

static int is_target(int fd) {
    setup();
    if (!target || !*target) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strstr(path, target) != NULL;
}

/* How many of len bytes at off (off < 0: the current position) may be
 * written; 0 with errno set when none may. */
static size_t allowed(int fd, size_t len, off_t off) {
    if (!is_target(fd) || tear_mode) return len;
    if (budget >= (long long)len) { budget -= (long long)len; return len; }
    if (kill_mode) raise(SIGKILL);
    if (eio_mode) {
        budget = 0;
        errno = EIO;
        return 0;
    }
    struct stat st;
    if (off < 0) off = lseek(fd, 0, SEEK_CUR);
    if (fstat(fd, &st) == 0 && off + (off_t)len <= st.st_size) return len;   /* inside the file */
    if (budget > 0) { size_t n = (size_t)budget; budget = 0; return n; }
    errno = ENOSPC;
    return 0;
}

/* Tear mode: a write to the target that crosses a page boundary, once the
 * budget of such writes is spent, lands its first page's part; then the
 * process dies. */
enum { PAGE = 4096 };
static void maybe_tear(int fd, const void *buf, size_t len, off_t off) {
    if (!is_target(fd) || !tear_mode) return;
    if (off < 0) off = lseek(fd, 0, SEEK_CUR);
    size_t first = PAGE - (size_t)(off % PAGE);
    if (len <= first || budget-- > 0) return;
    if (syscall(SYS_pwrite64, fd, buf, first, off) < 0) _exit(96);
    raise(SIGKILL);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off) {
    maybe_tear(fd, buf, len, off);
    size_t n = allowed(fd, len, off);
    if (n == 0 && len > 0) return -1;
    return syscall(SYS_pwrite64, fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) { return pwrite(fd, buf, len, off); }

ssize_t write(int fd, const void *buf, size_t len) {
    maybe_tear(fd, buf, len, -1);
    size_t n = allowed(fd, len, -1);
    if (n == 0 && len > 0) return -1;
    return syscall(SYS_write, fd, buf, n);
}

static int sync_fault(int fd) {
    if (eio_mode && budget == 0 && is_target(fd)) { errno = EIO; return -1; }
    return 0;
}

int fsync(int fd) { return sync_fault(fd) ? -1 : (int)syscall(SYS_fsync, fd); }
int fdatasync(int fd) { return sync_fault(fd) ? -1 : (int)syscall(SYS_fdatasync, fd); }
