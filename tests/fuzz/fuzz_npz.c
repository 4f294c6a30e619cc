/* fuzz_npz.c - libFuzzer target for the .npz reader: opens the input as an
 * archive held in memory and reads every member every way, checking that
 *   - nothing reads out of bounds, leaks or overflows (the sanitizers watch),
 *   - every failure carries its status and a message,
 *   - a member's raw bytes are as long as the directory says, and a tensor
 *     read from the archive is the tensor tfm_npy_parse reads from those
 *     bytes (C order; a Fortran-order member is transposed, so only its
 *     shape is compared),
 *   - text holds no NUL and is no longer than its member.
 * (libzip and zlib are Debian's, not instrumented: the fuzzer's coverage
 * is that of npz.c and npy.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/npz.h"

#define FUZZ_TARGET "fuzz_npz"
#include "require.h"

static int same_tensor(const tfm_tensor *a, const tfm_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return memcmp(a->data, b->data, (size_t)tfm_tensor_numel(a) * 4) == 0;
}

static void check_failure(tfm_status st, const tfm_error *err)
{
    require(err->status == st && err->msg[0] != 0, "a failure without its message");
    require(st == TFM_ERR_FORMAT || st == TFM_ERR_UNSUPPORTED || st == TFM_ERR_NOMEM,
            "a failure of an unexpected kind");
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_npz *z = NULL;
    tfm_error err;
    tfm_status st = tfm_npz_parse(data, size, &z, &err);
    if (st != TFM_OK) {
        require(z == NULL, "a failed open returned an archive");
        check_failure(st, &err);
        return 0;
    }
    tfm_tensor t, u;
    tfm_tensor_init(&t);
    tfm_tensor_init(&u);
    tfm_buf raw, text;
    tfm_buf_init(&raw);
    tfm_buf_init(&text);
    for (size_t i = 0; i < tfm_npz_count(z); i++) {
        const char *name = tfm_npz_name(z, i);
        size_t at;
        require(name && tfm_npz_find(z, name, &at) && at == i, "a listed member is not found");
        tfm_status sb = tfm_npz_read_bytes(z, name, &raw, &err);
        if (sb != TFM_OK) check_failure(sb, &err);
        else require(raw.len == tfm_npz_member_size(z, i), "raw bytes of another size");

        st = tfm_npz_read(z, name, &t, &err);
        if (st != TFM_OK) {
            check_failure(st, &err);
        } else {
            require(sb == TFM_OK, "a tensor from a member whose bytes do not read");
            require(t.ndim <= TFM_NPZ_MAX_NDIM, "too many dimensions");
            size_t used = 0;
            tfm_error e2;
            tfm_npy_header h;
            require(tfm_npy_header_parse(raw.data, raw.len, &h, &e2) == TFM_OK,
                    "a tensor whose header does not parse");
            require(h.ndim == t.ndim && memcmp(h.shape, t.shape, sizeof h.shape) == 0,
                    "the tensor's shape is not its header's");
            if (!h.fortran_order) {
                require(tfm_npy_parse(raw.data, raw.len, &u, &used, &e2) == TFM_OK,
                        "a tensor that tfm_npy_parse refuses");
                require(used == raw.len, "the member holds more than its record");
                require(same_tensor(&t, &u), "the tensor differs from its record's");
            }
        }

        st = tfm_npz_read_text(z, name, &text, &err);
        if (st != TFM_OK) {
            check_failure(st, &err);
            require(text.len == 0, "failed text left in the buffer");
        } else {
            require(text.len <= tfm_npz_member_size(z, i), "text longer than its member");
            require(memchr(text.data ? text.data : "", 0, text.len) == NULL, "text with a NUL");
        }
    }
    require(tfm_npz_name(z, tfm_npz_count(z)) == NULL, "a name past the end");
    tfm_buf_free(&raw);
    tfm_buf_free(&text);
    tfm_tensor_free(&t);
    tfm_tensor_free(&u);
    tfm_npz_free(z);
    return 0;
}
