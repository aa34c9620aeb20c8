/* Damage to trace files for tests (header-only fixture): a flipped bit in a
 * stored chunk, as a bad disk or a bad copy leaves it. */
#ifndef C2T_TESTS_H5_DAMAGE_H
#define C2T_TESTS_H5_DAMAGE_H
#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

/* Flips one bit in the middle of the middle chunk of dataset ds; returns
 * the chunk's first row, or -1. */
static inline long long flip_chunk_bit(const char *path, const char *ds) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, ds, H5P_DEFAULT), s = H5Dget_space(d);
    hsize_t off = 0, size = 0, n = 0;
    haddr_t addr = HADDR_UNDEF;
    unsigned mask;
    H5Dget_num_chunks(d, s, &n);
    herr_t rc = H5Dget_chunk_info(d, s, n / 2, &off, &mask, &addr, &size);
    H5Sclose(s); H5Dclose(d); H5Fclose(f);
    if (rc < 0 || addr == HADDR_UNDEF || size == 0) return -1;
    int fd = open(path, O_RDWR);
    unsigned char b;
    off_t at = (off_t)(addr + size / 2);
    if (fd < 0 || pread(fd, &b, 1, at) != 1) return -1;
    b ^= 0x10;
    long long rc2 = pwrite(fd, &b, 1, at) == 1 ? (long long)off : -1;
    close(fd);
    return rc2;
}
#endif
