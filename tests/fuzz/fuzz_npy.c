/* fuzz_npy.c - libFuzzer target for the .npy reader: parses the input as a
 * stream of records and checks that
 *   - nothing reads out of bounds or overflows (the sanitizers watch),
 *   - a record that parses writes back and parses again to the same tensor,
 *   - reading through a FILE gives the same answer as parsing from memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"

/* Stops the fuzzer with a report when a property fails. */
#define FUZZ_TARGET "fuzz_npy"
#include "require.h"

static int same_tensor(const tfm_tensor *a, const tfm_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return memcmp(a->data, b->data, (size_t)tfm_tensor_numel(a) * 4) == 0;
}

/* Writes t and parses it back. */
static void check_round_trip(const tfm_tensor *t)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&buf, &size);
    require(fp != NULL, "open_memstream failed");
    tfm_error err;
    require(tfm_npy_write(fp, t, &err) == TFM_OK, "a parsed tensor does not write");
    fclose(fp);
    require(size % 64 == (size_t)tfm_tensor_numel(t) * 4 % 64, "header not aligned to 64");
    tfm_tensor u;
    tfm_tensor_init(&u);
    size_t used = 0;
    require(tfm_npy_parse(buf, size, &u, &used, &err) == TFM_OK, "written record does not parse");
    require(used == size && same_tensor(t, &u), "round trip changed the tensor");
    tfm_tensor_free(&u);
    free(buf);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_tensor t, u;
    tfm_tensor_init(&t);
    tfm_tensor_init(&u);
    tfm_error err, ferr;
    FILE *fp = size ? fmemopen((void *)data, size, "rb") : NULL;
    size_t pos = 0;
    for (;;) {
        size_t used = 0;
        tfm_status st = tfm_npy_parse(data + pos, size - pos, &t, &used, &err);
        tfm_status fst = fp ? tfm_npy_read(fp, &u, &ferr) : TFM_EOF;
        require(st == fst, "FILE and memory readers disagree");
        if (st != TFM_OK) {
            require(st == TFM_EOF ? pos == size : err.status == st && err.msg[0] != 0,
                    "a failure without its message");
            if (st != TFM_EOF) require(strcmp(err.msg, ferr.msg) == 0, "messages disagree");
            break;
        }
        require(used >= 10 && used <= size - pos, "used is out of range");
        require((size_t)tfm_tensor_numel(&t) * 4 <= t.cap, "data larger than its buffer");
        require(same_tensor(&t, &u), "FILE and memory readers read different tensors");
        check_round_trip(&t);
        pos += used;
    }
    if (fp) fclose(fp);
    tfm_tensor_free(&t);
    tfm_tensor_free(&u);
    return 0;
}
