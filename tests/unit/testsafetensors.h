/* testsafetensors.h - what the tests of safetensors files
 * (test_safetensors.c and test_safetensors_header.c) share: a file written
 * whole, and a file made by hand from a header's text. */
#ifndef TFM_TEST_SAFETENSORS_H
#define TFM_TEST_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool write_whole(const char *path, const void *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    bool ok = fwrite(data, 1, size, fp) == size;
    return fclose(fp) == 0 && ok;
}

/* A file made by hand: the length, the header text, pad spaces, and
 * data_size bytes of data (0, 1, 2, ...). */
static inline unsigned char *make_file(const char *json, size_t pad, size_t data_size, size_t *size)
{
    size_t n = strlen(json) + pad;
    *size = 8 + n + data_size;
    unsigned char *buf = malloc(*size ? *size : 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, json, strlen(json));
    memset(buf + 8 + strlen(json), ' ', pad);
    for (size_t i = 0; i < data_size; i++) buf[8 + n + i] = (unsigned char)i;
    return buf;
}

#endif
