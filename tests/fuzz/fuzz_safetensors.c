/* fuzz_safetensors.c - libFuzzer target for the safetensors reader: parses
 * the input as a whole file and checks that
 *   - nothing reads out of bounds or overflows (the sanitizers watch),
 *   - a failure has its status and a message, and leaves no object,
 *   - an accepted file is what the format promises: unique names that find
 *     themselves, tensors that tile the data section, data handed out
 *     aligned and equal to the file's bytes, metadata keys that find their
 *     values (a long value, read when asked for, either read or refused
 *     with a message),
 *   - a file of F32/I32 tensors writes back and parses again to the same
 *     names, shapes, data and metadata. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/io.h"
#include "tfm/safetensors.h"

/* Stops the fuzzer with a report when a property fails. */
#define FUZZ_TARGET "fuzz_safetensors"
#include "require.h"

/* Writes f out again (all its tensors must be F32 or I32 of at most
 * TFM_MAX_DIMS dimensions) and checks that the result parses to the same. */
static void check_round_trip(tfm_safetensors *f)
{
    tfm_error err;
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    require(w != NULL, "writer_create failed");
    for (size_t i = 0; i < tfm_safetensors_metadata_count(f); i++)
        require(tfm_safetensors_writer_add_metadata(w, tfm_safetensors_metadata_key(f, i),
                                                    tfm_safetensors_metadata_value(f, i),
                                                    &err) == TFM_OK,
                "metadata read does not write");
    size_t n = tfm_safetensors_count(f);
    for (size_t i = 0; i < n; i++) {
        tfm_safetensors_info info;
        tfm_safetensors_info_at(f, i, &info);
        const void *data;
        require(tfm_safetensors_get(f, info.name, info.dtype, info.ndim, info.shape, &data,
                                    &err) == TFM_OK,
                "get failed on a tensor it listed");
        require(tfm_safetensors_writer_add_tensor(w, info.name, info.dtype, info.ndim, info.shape,
                                                  data, &err) == TFM_OK,
                "a tensor read does not write");
    }
    char *buf = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&buf, &size);
    require(fp != NULL, "open_memstream failed");
    require(tfm_safetensors_write_stream(w, fp, &err) == TFM_OK, "write failed");
    fclose(fp);
    require(size >= 8 && (unsigned char)buf[0] % 8 == 0, "written header not padded to 8");

    tfm_safetensors *g = NULL;
    require(tfm_safetensors_parse(buf, size, &g, &err) == TFM_OK, "written file does not parse");
    require(tfm_safetensors_count(g) == n, "round trip changed the count");
    require(tfm_safetensors_metadata_count(g) == tfm_safetensors_metadata_count(f),
            "round trip changed the metadata count");
    for (size_t i = 0; i < tfm_safetensors_metadata_count(f); i++) {
        const char *v = tfm_safetensors_metadata(g, tfm_safetensors_metadata_key(f, i));
        require(v && strcmp(v, tfm_safetensors_metadata_value(f, i)) == 0,
                "round trip changed metadata");
    }
    for (size_t i = 0; i < n; i++) {
        tfm_safetensors_info a, b;
        tfm_safetensors_info_at(f, i, &a);
        size_t j;
        require(tfm_safetensors_find(g, a.name, &j), "round trip lost a tensor");
        tfm_safetensors_info_at(g, j, &b);
        require(a.dtype == b.dtype && a.ndim == b.ndim && a.nbytes == b.nbytes,
                "round trip changed a tensor");
        for (int d = 0; d < a.ndim; d++) require(a.shape[d] == b.shape[d], "shape changed");
        const void *pa, *pb;
        require(tfm_safetensors_get(f, a.name, a.dtype, a.ndim, a.shape, &pa, &err) == TFM_OK &&
                    tfm_safetensors_get(g, b.name, b.dtype, b.ndim, b.shape, &pb, &err) ==
                        TFM_OK,
                "get failed after the round trip");
        require(a.nbytes == 0 || memcmp(pa, pb, (size_t)a.nbytes) == 0, "data changed");
    }
    require(tfm_safetensors_check_all_used(g, &err) == TFM_OK, "all used, yet not");
    tfm_safetensors_free(g);
    free(buf);
    tfm_safetensors_writer_free(w);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_safetensors *f = (tfm_safetensors *)&size; /* must be reset */
    tfm_error err = {0};
    tfm_status st = tfm_safetensors_parse(data, size, &f, &err);
    if (st != TFM_OK) {
        require(f == NULL, "a failure left an object");
        require(err.status == st && err.msg[0] != 0, "a failure without its message");
        require(st == TFM_ERR_FORMAT || st == TFM_ERR_NOMEM, "unexpected status");
        return 0;
    }
    require(size >= 8, "accepted a file without a header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    require(hlen <= size - 8, "header length past the end");
    const unsigned char *section = data + 8 + hlen;

    size_t n = tfm_safetensors_count(f);
    uint64_t offset = 0; /* the tensors tile the data section in order */
    bool simple = true;  /* every tensor F32/I32 with at most TFM_MAX_DIMS dims */
    bool all_supported = true;
    tfm_tensor t;
    tfm_tensor_init(&t);
    for (size_t i = 0; i < n; i++) {
        tfm_safetensors_info info;
        tfm_safetensors_info_at(f, i, &info);
        require(strcmp(info.name, tfm_safetensors_name(f, i)) == 0, "name and info disagree");
        size_t j;
        require(tfm_safetensors_find(f, info.name, &j) && j == i, "a name does not find itself");
        require(strcmp(info.name, "__metadata__") != 0, "a tensor called __metadata__");
        const void *p;
        st = tfm_safetensors_get(f, info.name, info.dtype, info.ndim, info.shape, &p, &err);
        if (!info.supported) {
            require(st == TFM_ERR_UNSUPPORTED, "an unsupported dtype was handed out");
            simple = false;
            all_supported = false;
        } else {
            require(st == TFM_OK, "get of its own shape failed");
            require((uintptr_t)p % tfm_dtype_size(info.dtype) == 0, "data not aligned");
            require(info.nbytes == 0 || memcmp(p, section + offset, (size_t)info.nbytes) == 0,
                    "data differ from the file");
            if (info.dtype == TFM_I8 || info.dtype == TFM_BF16) {
                /* quantized weights: read in place only, never into a tfm_tensor */
                simple = false;
                require(tfm_safetensors_read(f, info.name, &t, &err) == TFM_ERR_UNSUPPORTED,
                        "read took a dtype a tfm_tensor does not hold");
            } else if (info.ndim > TFM_MAX_DIMS) {
                simple = false;
                require(tfm_safetensors_read(f, info.name, &t, &err) == TFM_ERR_UNSUPPORTED,
                        "read took too many dimensions");
            } else {
                require(tfm_safetensors_read(f, info.name, &t, &err) == TFM_OK, "read failed");
                require(info.nbytes == 0 || memcmp(t.data, p, (size_t)info.nbytes) == 0,
                        "read and get differ");
            }
        }
        offset += info.nbytes;
    }
    require(8 + hlen + offset == size, "tensors do not tile the data section");
    /* get took every tensor but those of other dtypes */
    require((tfm_safetensors_check_all_used(f, &err) == TFM_OK) == all_supported,
            "check_all_used is wrong");
    bool values_read = true; /* a long value is read when asked for, and may be faulty */
    for (size_t i = 0; i < tfm_safetensors_metadata_count(f); i++) {
        const char *key = tfm_safetensors_metadata_key(f, i);
        const char *v = tfm_safetensors_metadata(f, key);
        require(tfm_safetensors_has_metadata(f, key), "a metadata key is not there");
        require(v == tfm_safetensors_metadata_value(f, i), "a metadata key does not find itself");
        const char *got = NULL;
        st = tfm_safetensors_metadata_get(f, key, &got, &err);
        require(got == v && (st == TFM_OK) == (v != NULL), "metadata_get and metadata disagree");
        require(st == TFM_OK || (st == TFM_ERR_FORMAT && err.msg[0]) || st == TFM_ERR_NOMEM,
                "a faulty long value without its message");
        if (!v) values_read = false;
    }
    tfm_tensor_free(&t);
    if (simple && values_read) check_round_trip(f);
    tfm_safetensors_free(f);
    return 0;
}
