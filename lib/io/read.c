/* read.c - reading from a file descriptor with a bound, for the loaders
 * that must not read a pipe or a device without end (models, checkpoints,
 * vocabularies). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "tfm/io.h"

/* The most read at a time. */
#define READ_CHUNK ((size_t)1 << 16)

tfm_status tfm_read_upto(int fd, tfm_buf *b, uint64_t want, tfm_error *err)
{
    while (want > 0) {
        size_t chunk = want < READ_CHUNK ? (size_t)want : READ_CHUNK;
        if (tfm_buf_reserve(b, chunk) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        ssize_t got = read(fd, b->data + b->len, chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return tfm_error_set(err, TFM_ERR_IO, "read error: %s", strerror(errno));
        if (got == 0) return TFM_OK;
        b->len += (size_t)got;
        b->data[b->len] = 0;
        want -= (uint64_t)got;
    }
    return TFM_OK;
}
