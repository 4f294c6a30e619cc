/* memfile.h - for fuzz targets of loaders that take a path: the input as an
 * in-memory file (memfd), named by /proc/self/fd/N, so that nothing touches
 * the disk and the loader reads it as it reads a real file (mapped). */
#ifndef FUZZ_MEMFILE_H
#define FUZZ_MEMFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a new memfd, names it in path; the descriptor, or -1. */
static int memfile_open(const uint8_t *data, size_t size, char path[64])
{
    int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
