/* test_safetensors.c - safetensors files: round trips with metadata and every
 * kind of shape, the exact bytes of the reference implementation's own test
 * vectors, files python writes by the spec read here and ours read by a
 * small python reader, files cut short at every byte, opening, and the
 * errors of the lookup and writing functions.  The header's rules, each
 * failing with a message that names the tensor: test_safetensors_header.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testsafetensors.h"
#include "testutil.h"
#include "tfm/io.h"
#include "tfm/safetensors.h"

/* Element i of the test pattern; python computes the same values. */
static float pattern_f32(int64_t i) { return (float)i * 0.5f - 3.0f; }
static int32_t pattern_i32(int64_t i) { return (int32_t)(i * 7 - 100); }

static int64_t numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* A buffer of n pattern elements (at least one element allocated). */
static void *pattern(tfm_dtype dtype, int64_t n)
{
    void *p = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == TFM_F32) ((float *)p)[i] = pattern_f32(i);
        else ((int32_t *)p)[i] = pattern_i32(i);
    }
    return p;
}

static bool has_pattern(tfm_dtype dtype, const void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == TFM_F32 && ((const float *)p)[i] != pattern_f32(i)) return false;
        if (dtype == TFM_I32 && ((const int32_t *)p)[i] != pattern_i32(i)) return false;
    }
    return true;
}

static unsigned char *read_whole(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    *size = fread(buf, 1, (size_t)n, fp);
    fclose(fp);
    return buf;
}

/* ---- the round trip ------------------------------------------------------------ */

typedef struct tensor_case {
    const char *name;
    tfm_dtype dtype;
    int ndim;
    int64_t shape[TFM_MAX_DIMS];
} tensor_case;

static const tensor_case round_trip_tensors[] = {
    {"encoder.layers.0.self_attn.q_proj.weight", TFM_F32, 2, {8, 6}},
    {"encoder.layers.0.self_attn.q_proj.bias", TFM_F32, 1, {6}},
    {"step", TFM_I32, 0, {0}},
    {"empty", TFM_F32, 2, {0, 4}},
    {"empty.middle", TFM_I32, 3, {3, 0, 2}},
    {"ids", TFM_I32, 1, {7}},
    {"scale", TFM_F32, 0, {0}},
    {"eight.dims", TFM_F32, 8, {2, 1, 3, 1, 2, 1, 2, 2}},
    {"na\xc3\xafve \xe2\x96\x81name \"quoted\" \\ back\ttab", TFM_F32, 1, {3}},
};
#define N_ROUND_TRIP (sizeof round_trip_tensors / sizeof round_trip_tensors[0])

/* The metadata of the round trip; the long value is built at run time. */
static char long_value[40000];
static const char *meta_keys[] = {"format", "unicode", "empty", "config", "json", "vocab"};
static const char *meta_values[6];

static void build_metadata(void)
{
    size_t pos = 0;
    for (int i = 0; i < 400; i++)
        pos += (size_t)snprintf(long_value + pos, sizeof long_value - pos,
                                "{\"id\": %d, \"piece\": \"\xe2\x96\x81p%d\", \"esc\": "
                                "\"\\\\n\\t\", \"score\": -%d.5}\n",
                                i, i, i);
    meta_values[0] = "pt";
    meta_values[1] = "Gr\xc3\xbc\xc3\x9f" "e \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8c\x8d";
    meta_values[2] = "";
    meta_values[3] = "{\"d_model\": 512, \"layers\": 6, \"norm\": \"post\"}";
    meta_values[4] = "line one\nline \"two\"\ttabbed \\ backslash \x01 control";
    meta_values[5] = long_value;
}

static void *round_trip_data[N_ROUND_TRIP];

/* Writes the round-trip file at path. */
static bool write_round_trip(const char *path)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    tfm_error err;
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < 6; i++) {
        ok = tfm_safetensors_writer_add_metadata(w, meta_keys[i], meta_values[i], &err) == TFM_OK;
        CHECK_MSG(ok, "%s", err.msg);
    }
    for (size_t i = 0; ok && i < N_ROUND_TRIP; i++) {
        const tensor_case *c = &round_trip_tensors[i];
        if (!round_trip_data[i])
            round_trip_data[i] = pattern(c->dtype, numel(c->ndim, c->shape));
        ok = tfm_safetensors_writer_add_tensor(w, c->name, c->dtype, c->ndim, c->shape,
                                               round_trip_data[i], &err) == TFM_OK;
        CHECK_MSG(ok, "%s", err.msg);
    }
    if (ok) {
        ok = tfm_safetensors_write(w, path, &err) == TFM_OK;
        CHECK_MSG(ok, "%s", err.msg);
    }
    tfm_safetensors_writer_free(w);
    return ok;
}

/* Checks everything the round-trip file should hold. */
static void check_round_trip(tfm_safetensors *f)
{
    tfm_error err;
    CHECK(tfm_safetensors_count(f) == N_ROUND_TRIP);
    for (size_t i = 0; i < N_ROUND_TRIP; i++) {
        const tensor_case *c = &round_trip_tensors[i];
        /* written in the order added, so listed in that order */
        CHECK_MSG(strcmp(tfm_safetensors_name(f, i), c->name) == 0, "%zu: %s", i,
                  tfm_safetensors_name(f, i));
        size_t index = 99;
        CHECK(tfm_safetensors_find(f, c->name, &index) && index == i);
        tfm_safetensors_info info;
        tfm_safetensors_info_at(f, i, &info);
        CHECK(strcmp(info.name, c->name) == 0);
        CHECK(strcmp(info.dtype_name, c->dtype == TFM_F32 ? "F32" : "I32") == 0);
        CHECK(info.supported && info.dtype == c->dtype && info.ndim == c->ndim);
        for (int d = 0; d < c->ndim; d++) CHECK(info.shape[d] == c->shape[d]);
        CHECK(info.nbytes == (uint64_t)numel(c->ndim, c->shape) * 4);

        const void *data = NULL;
        CHECK_MSG(tfm_safetensors_get(f, c->name, c->dtype, c->ndim, c->shape, &data, &err) ==
                      TFM_OK,
                  "%s", err.msg);
        CHECK(data != NULL && (uintptr_t)data % 4 == 0);
        if (data) CHECK(has_pattern(c->dtype, data, numel(c->ndim, c->shape)));
        /* asking twice gives the same data */
        const void *again = NULL;
        CHECK(tfm_safetensors_get(f, c->name, c->dtype, c->ndim, c->shape, &again, &err) ==
              TFM_OK);
        CHECK(again == data);
    }
    CHECK(tfm_safetensors_metadata_count(f) == 6);
    for (size_t i = 0; i < 6; i++) {
        CHECK(strcmp(tfm_safetensors_metadata_key(f, i), meta_keys[i]) == 0);
        CHECK_MSG(strcmp(tfm_safetensors_metadata_value(f, i), meta_values[i]) == 0, "%s",
                  meta_keys[i]);
        const char *v = tfm_safetensors_metadata(f, meta_keys[i]);
        CHECK(v && strcmp(v, meta_values[i]) == 0);
    }
    CHECK(tfm_safetensors_metadata(f, "absent") == NULL);
    CHECK(tfm_safetensors_metadata_key(f, 6) == NULL);
    CHECK(tfm_safetensors_name(f, N_ROUND_TRIP) == NULL);
    CHECK(!tfm_safetensors_find(f, "absent", NULL));
    CHECK_MSG(tfm_safetensors_check_all_used(f, &err) == TFM_OK, "%s", err.msg);
}

static void test_round_trip(void)
{
    build_metadata();
    const char *path = tmp_path("round_trip.safetensors");
    CHECK(write_round_trip(path));
    /* the atomic write leaves no temporary file behind */
    char tmp[9000];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);

    tfm_safetensors *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_safetensors_open(path, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) check_round_trip(f);
    tfm_safetensors_free(f);

    /* the same bytes parse from memory, at an odd address too */
    size_t size = 0;
    unsigned char *bytes = read_whole(path, &size);
    CHECK(bytes != NULL && size > 8);
    if (!bytes) return;
    CHECK_MSG(tfm_safetensors_parse(bytes, size, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) check_round_trip(f);
    tfm_safetensors_free(f);
    unsigned char *odd = malloc(size + 1);
    memcpy(odd + 1, bytes, size);
    CHECK_MSG(tfm_safetensors_parse(odd + 1, size, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) check_round_trip(f);
    tfm_safetensors_free(f);
    free(odd);

    /* the layout: the header padded with spaces to a multiple of 8 */
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
    CHECK(n % 8 == 0 && n + 8 < size);
    CHECK(bytes[8] == '{');
    size_t last = 8 + (size_t)n - 1;
    while (bytes[last] == ' ') last--;
    CHECK(bytes[last] == '}' && 8 + n - 1 - last < 8);
    free(bytes);
}

/* The reference implementation's own test vectors (safetensors/src/tensor.rs:
 * test_serialization, test_empty, test_serialization_forced_alignement):
 * we write the same bytes and read them back. */
static void test_reference_bytes(void)
{
    static const unsigned char attn0[] = {
        64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34,
        58,  123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,
        115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,  44,  34,  100,
        97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,  91,  48,  44,  50,
        52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,  0,   0,   0,   64,  0,
        0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
    static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    static const unsigned char framework[] = {
        40,  0,   0,   0,   0,   0,   0,   0,   123, 34, 95,  95,  109, 101, 116, 97,
        100, 97,  116, 97,  95,  95,  34,  58,  123, 34, 102, 114, 97,  109, 101, 119,
        111, 114, 107, 34,  58,  34,  112, 116, 34,  125, 125, 32,  32,  32,  32,  32};
    static const unsigned char forced[] = {
        72,  0,   0,   0,  0,   0,   0,   0,   123, 34,  97, 116, 116, 110, 48, 34,  58,  123,
        34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51, 50,  34,  44,  34, 115, 104, 97,
        112, 101, 34,  58, 91,  49,  44,  49,  44,  50,  44, 51,  93,  44,  34, 100, 97,  116,
        97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58, 91,  48,  44,  50, 52,  93,  125,
        125, 32,  32,  32, 32,  32,  32,  32,  0,   0,   0,  0,   0,   0,   128, 63, 0,   0,
        0,   64,  0,   0,  64,  64,  0,   0,   128, 64,  0,  0,   160, 64};
    static const float values[6] = {0, 1, 2, 3, 4, 5};
    static const struct {
        const unsigned char *bytes;
        size_t size;
        const char *name, *meta_key, *meta_value;
        int ndim;
        int64_t shape[4];
    } cases[] = {
        {attn0, sizeof attn0, "attn.0", NULL, NULL, 3, {1, 2, 3}},
        {empty, sizeof empty, NULL, NULL, NULL, 0, {0}},
        {framework, sizeof framework, NULL, "framework", "pt", 0, {0}},
        {forced, sizeof forced, "attn0", NULL, NULL, 4, {1, 1, 2, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_error err;
        tfm_safetensors_writer *w = tfm_safetensors_writer_create();
        if (cases[c].meta_key)
            CHECK(tfm_safetensors_writer_add_metadata(w, cases[c].meta_key, cases[c].meta_value,
                                                      &err) == TFM_OK);
        if (cases[c].name)
            CHECK(tfm_safetensors_writer_add_tensor(w, cases[c].name, TFM_F32, cases[c].ndim,
                                                    cases[c].shape, values, &err) == TFM_OK);
        char *buf = NULL;
        size_t size = 0;
        FILE *fp = open_memstream(&buf, &size);
        CHECK(tfm_safetensors_write_stream(w, fp, &err) == TFM_OK);
        fclose(fp);
        CHECK_MSG(size == cases[c].size && memcmp(buf, cases[c].bytes, size) == 0,
                  "case %zu: %zu bytes, want %zu: %.*s", c, size, cases[c].size,
                  size > 8 ? (int)size - 8 : 0, buf + 8);
        free(buf);
        tfm_safetensors_writer_free(w);

        tfm_safetensors *f = NULL;
        CHECK_MSG(tfm_safetensors_parse(cases[c].bytes, cases[c].size, &f, &err) == TFM_OK,
                  "case %zu: %s", c, err.msg);
        if (!f) continue;
        CHECK(tfm_safetensors_count(f) == (cases[c].name ? 1u : 0u));
        if (cases[c].name) {
            const float *x = NULL;
            CHECK(tfm_safetensors_get(f, cases[c].name, TFM_F32, cases[c].ndim, cases[c].shape,
                                      (const void **)&x, &err) == TFM_OK);
            CHECK(x && memcmp(x, values, sizeof values) == 0);
        }
        if (cases[c].meta_key)
            CHECK(strcmp(tfm_safetensors_metadata(f, cases[c].meta_key), "pt") == 0);
        tfm_safetensors_free(f);
    }
}

/* ---- lookups ------------------------------------------------------------------- */

/* I8 and BF16 tensors (quantized models) are written with their element
 * sizes and read back with the same checks as F32. */
static void test_small_dtypes(void)
{
    const int8_t q[6] = {-127, -1, 0, 1, 64, 127};
    const uint16_t h[3] = {0x3f80, 0xc000, 0x7f80};
    const float f[2] = {0.5f, 2.0f};
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s2[1] = {2}, s6[1] = {6};
    tfm_error err;
    tfm_safetensors_writer *wr = tfm_safetensors_writer_create();
    CHECK(tfm_safetensors_writer_add_tensor(wr, "q", TFM_I8, 2, s23, q, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(wr, "h", TFM_BF16, 1, s3, h, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(wr, "q_scale", TFM_F32, 1, s2, f, &err) == TFM_OK);
    const char *path = tmp_path("small_dtypes.safetensors");
    CHECK(tfm_safetensors_write(wr, path, &err) == TFM_OK);
    tfm_safetensors_writer_free(wr);
    tfm_safetensors *file = NULL;
    CHECK_MSG(tfm_safetensors_open(path, &file, &err) == TFM_OK, "%s", err.msg);
    if (!file) return;
    tfm_safetensors_info info;
    tfm_safetensors_info_at(file, 0, &info);
    CHECK(strcmp(info.dtype_name, "I8") == 0 && info.supported && info.dtype == TFM_I8 &&
          info.nbytes == 6);
    tfm_safetensors_info_at(file, 1, &info);
    CHECK(strcmp(info.dtype_name, "BF16") == 0 && info.dtype == TFM_BF16 && info.nbytes == 6);
    const void *p;
    CHECK(tfm_safetensors_get(file, "q", TFM_I8, 2, s23, &p, &err) == TFM_OK &&
          memcmp(p, q, sizeof q) == 0);
    CHECK(tfm_safetensors_get(file, "h", TFM_BF16, 1, s3, &p, &err) == TFM_OK &&
          memcmp(p, h, sizeof h) == 0);
    CHECK(tfm_safetensors_get(file, "q", TFM_I8, 1, s6, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'q' has shape [2, 3], expected [6]") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(file, "h", TFM_I8, 1, s3, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'h' has dtype BF16, expected I8") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(file, "q_scale", TFM_F32, 1, s2, &p, &err) == TFM_OK);
    CHECK(tfm_safetensors_check_all_used(file, &err) == TFM_OK);
    tfm_safetensors_free(file);
}

static void test_get_errors(void)
{
    float w[6] = {1, 2, 3, 4, 5, 6};
    int32_t ids[2] = {7, 8};
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6}, s2[1] = {2};
    tfm_error err;
    tfm_safetensors_writer *wr = tfm_safetensors_writer_create();
    CHECK(tfm_safetensors_writer_add_tensor(wr, "enc.w", TFM_F32, 2, s23, w, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(wr, "enc.ids", TFM_I32, 1, s2, ids, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(wr, "extra.a", TFM_F32, 1, s2, w, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(wr, "extra.b", TFM_F32, 1, s2, w, &err) == TFM_OK);
    const char *path = tmp_path("get_errors.safetensors");
    CHECK(tfm_safetensors_write(wr, path, &err) == TFM_OK);
    tfm_safetensors_writer_free(wr);

    tfm_safetensors *f = NULL;
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_OK);
    if (!f) return;
    const void *p = NULL;
    CHECK(tfm_safetensors_get(f, "enc.missing", TFM_F32, 2, s23, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "missing tensor 'enc.missing'") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_F32, 2, s32, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'enc.w' has shape [2, 3], expected [3, 2]") == 0, "%s",
              err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_F32, 1, s6, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'enc.w' has shape [2, 3], expected [6]") == 0, "%s",
              err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_F32, 0, NULL, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'enc.w' has shape [2, 3], expected []") == 0, "%s",
              err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_I32, 2, s23, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'enc.w' has dtype F32, expected I32") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_F32, -1, s23, &p, &err) == TFM_ERR_ARG);

    /* nothing taken yet: all four are unexpected */
    CHECK(tfm_safetensors_check_all_used(f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "unexpected tensor 'enc.w' (and 3 more)") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(f, "enc.w", TFM_F32, 2, s23, &p, &err) == TFM_OK);
    CHECK(p && memcmp(p, w, sizeof w) == 0);
    tfm_tensor t;
    tfm_tensor_init(&t);
    CHECK(tfm_safetensors_read(f, "enc.ids", &t, &err) == TFM_OK);
    CHECK(t.dtype == TFM_I32 && t.ndim == 1 && t.shape[0] == 2 &&
          memcmp(t.data, ids, sizeof ids) == 0);
    CHECK(tfm_safetensors_read(f, "nope", &t, &err) == TFM_ERR_FORMAT);
    CHECK(strcmp(err.msg, "missing tensor 'nope'") == 0);
    CHECK(tfm_safetensors_get(f, "extra.a", TFM_F32, 1, s2, &p, &err) == TFM_OK);
    CHECK(tfm_safetensors_check_all_used(f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "unexpected tensor 'extra.b'") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_read(f, "extra.b", &t, &err) == TFM_OK);
    CHECK(t.dtype == TFM_F32 && t.ndim == 1 && t.shape[0] == 2 && ((float *)t.data)[1] == 2);
    CHECK(tfm_safetensors_check_all_used(f, &err) == TFM_OK);
    tfm_tensor_free(&t);
    tfm_safetensors_free(f);
}

/* Files of dtypes the library does not read still open (they are valid);
 * asking for their data names the dtype and the tensor. */
static void test_other_dtypes(void)
{
    static const char json[] =
        "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[12,14]},"
        "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[14,22]},"
        "\"l\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[22,38]},"
        "\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[38,41]},"
        "\"q\":{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[41,44]},"
        "\"s\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[44,47]},"
        "\"c\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[47,55]},"
        "\"t\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[55,56]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[56,64]}}";
    size_t size;
    unsigned char *bytes = make_file(json, 0, 64, &size);
    tfm_safetensors *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_safetensors_parse(bytes, size, &f, &err) == TFM_OK, "%s", err.msg);
    if (!f) {
        free(bytes);
        return;
    }
    static const char *order = "bhdluqsctf";
    static const char *dtypes[] = {"BF16", "F16", "F64",  "I64", "U8",
                                   "F4",   "F6_E2M3", "C64", "BOOL", "F32"};
    CHECK(tfm_safetensors_count(f) == 10);
    for (size_t i = 0; i < 10; i++) {
        tfm_safetensors_info info;
        tfm_safetensors_info_at(f, i, &info);
        CHECK(info.name[0] == order[i] && strcmp(info.dtype_name, dtypes[i]) == 0);
        CHECK(info.supported == (i == 0 || i == 9)); /* BF16 and F32 */
    }
    int64_t s23[2] = {2, 3}, s1[1] = {1};
    const void *p = NULL;
    CHECK(tfm_safetensors_get(f, "h", TFM_F32, 1, s1, &p, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "tensor 'h' has dtype F16") != NULL, "%s", err.msg);
    CHECK(tfm_safetensors_get(f, "b", TFM_F32, 2, s23, &p, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "tensor 'b' has dtype BF16, expected F32") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_get(f, "b", TFM_BF16, 2, s23, &p, &err) == TFM_OK);
    CHECK(p && ((const unsigned char *)p)[0] == 0 && ((const unsigned char *)p)[11] == 11);
    tfm_tensor t;
    tfm_tensor_init(&t);
    /* a tfm_tensor holds F32 and I32 only */
    CHECK(tfm_safetensors_read(f, "b", &t, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "a tfm_tensor holds F32 or I32") != NULL, "%s", err.msg);
    CHECK(tfm_safetensors_read(f, "l", &t, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "tensor 'l' has dtype I64") != NULL, "%s", err.msg);
    /* "f" starts at byte 56 of the data: aligned in place when the data
     * section is; the values are the bytes 56..63 either way */
    CHECK(tfm_safetensors_read(f, "f", &t, &err) == TFM_OK);
    CHECK(t.dtype == TFM_F32 && ((unsigned char *)t.data)[0] == 56 &&
          ((unsigned char *)t.data)[7] == 63);
    tfm_tensor_free(&t);
    tfm_safetensors_free(f);
    free(bytes);
}

/* Data not aligned for its dtype (a header length that is not a multiple of
 * 8, or a tensor after an odd-sized one) comes back aligned and right. */
static void test_misaligned(void)
{
    static const char json[] = "{\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                               "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[3,11]},"
                               "\"y\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[11,15]}}";
    for (size_t pad = 0; pad < 4; pad++) {
        size_t size;
        unsigned char *bytes = make_file(json, pad, 15, &size);
        float want[2];
        int32_t want_y;
        memcpy(want, bytes + size - 12, 8);
        memcpy(&want_y, bytes + size - 4, 4);
        const char *path = tmp_path("misaligned.safetensors");
        CHECK(write_whole(path, bytes, size));
        for (int from_file = 0; from_file < 2; from_file++) {
            tfm_safetensors *f = NULL;
            tfm_error err;
            tfm_status st = from_file ? tfm_safetensors_open(path, &f, &err)
                                      : tfm_safetensors_parse(bytes, size, &f, &err);
            CHECK_MSG(st == TFM_OK, "%s", err.msg);
            if (!f) continue;
            int64_t s2[1] = {2};
            const float *x = NULL;
            const int32_t *y = NULL;
            CHECK(tfm_safetensors_get(f, "x", TFM_F32, 1, s2, (const void **)&x, &err) == TFM_OK);
            CHECK(tfm_safetensors_get(f, "y", TFM_I32, 0, NULL, (const void **)&y, &err) ==
                  TFM_OK);
            CHECK(x && (uintptr_t)x % 4 == 0 && memcmp(x, want, 8) == 0);
            CHECK(y && (uintptr_t)y % 4 == 0 && *y == want_y);
            tfm_safetensors_free(f);
        }
        free(bytes);
    }
}

/* ---- files cut short, and opening ------------------------------------------------ */

/* A valid file cut short anywhere fails cleanly, never crashes or reads
 * past the end (ASan watches); only the whole file opens. */
static void test_truncated(void)
{
    const char *path = tmp_path("round_trip.safetensors"); /* from test_round_trip */
    size_t size = 0;
    unsigned char *bytes = read_whole(path, &size);
    CHECK(bytes != NULL && size > 1000);
    if (!bytes) return;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
    size_t failures = 0;
    for (size_t cut = 0; cut <= size; cut++) {
        /* every byte of the header and the first 300 of the data, then
         * every 97th */
        if (cut > 8 + n + 300 && cut % 97 != 0 && cut != size && cut != size - 1) continue;
        unsigned char *copy = malloc(cut ? cut : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, bytes, cut);
        tfm_safetensors *f = NULL;
        tfm_error err = {0};
        tfm_status st = tfm_safetensors_parse(copy, cut, &f, &err);
        if (cut == size) {
            CHECK_MSG(st == TFM_OK && f, "%s", err.msg);
        } else if (st != TFM_ERR_FORMAT || f || err.msg[0] == 0) {
            failures++;
            CHECK_MSG(false, "cut at %zu: status %d, %s", cut, st, err.msg);
        } else if (cut >= 8 + n) {
            CHECK_MSG(strstr(err.msg, "file is truncated: the header says the data section is") ==
                          err.msg,
                      "cut at %zu: %s", cut, err.msg);
        } else if (cut >= 8) {
            CHECK_MSG(strstr(err.msg, "exceeds the file size") != NULL, "cut at %zu: %s", cut,
                      err.msg);
        }
        tfm_safetensors_free(f);
        free(copy);
        if (failures > 5) break;
    }
    /* through open (mapped) too, at a few places */
    const char *cut_path = tmp_path("cut.safetensors");
    size_t cuts[] = {0, 3, 8, 9, 8 + (size_t)n / 2, 8 + (size_t)n, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        CHECK(write_whole(cut_path, bytes, cuts[i]));
        tfm_safetensors *f = NULL;
        tfm_error err;
        CHECK_MSG(tfm_safetensors_open(cut_path, &f, &err) == TFM_ERR_FORMAT && !f, "%zu",
                  cuts[i]);
    }
    free(bytes);
}

/* Files that cannot be opened, and files read through a pipe. */
static void test_open(void)
{
    tfm_safetensors *f = NULL;
    tfm_error err;
    const char *missing = tmp_path("no_such.safetensors");
    CHECK(tfm_safetensors_open(missing, &f, &err) == TFM_ERR_IO && !f);
    CHECK_MSG(strstr(err.msg, "No such file") && !strstr(err.msg, missing), "%s", err.msg);
    CHECK(tfm_safetensors_open(test_tmpdir, &f, &err) == TFM_ERR_IO && !f);
    CHECK_MSG(strstr(err.msg, "Is a directory") != NULL, "%s", err.msg);
    const char *empty = tmp_path("empty.safetensors");
    CHECK(write_whole(empty, "", 0));
    CHECK(tfm_safetensors_open(empty, &f, &err) == TFM_ERR_FORMAT && !f);
    CHECK_MSG(strstr(err.msg, "file is truncated: it holds 0 bytes") == err.msg, "%s", err.msg);

    /* a pipe cannot be mapped: it is read */
    size_t size = 0;
    unsigned char *bytes = read_whole(tmp_path("round_trip.safetensors"), &size);
    int fds[2];
    CHECK(bytes && pipe(fds) == 0);
    if (!bytes) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        size_t done = 0;
        while (done < size) {
            ssize_t k = write(fds[1], bytes + done, size - done);
            if (k <= 0) _exit(1);
            done += (size_t)k;
        }
        _exit(0);
    }
    close(fds[1]);
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/fd/%d", fds[0]);
    CHECK_MSG(tfm_safetensors_open(dev, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) check_round_trip(f);
    tfm_safetensors_free(f);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);

    /* a pipe is read only as far as its header says: a file with more
     * after it, or cut short, is refused, and so is /dev/zero, at once */
    for (int variant = 0; variant < 2; variant++) {
        CHECK(pipe(fds) == 0);
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
            close(fds[0]);
            size_t want = variant == 0 ? size - 1 : size, done = 0;
            while (done < want) {
                ssize_t k = write(fds[1], bytes + done, want - done);
                if (k <= 0) _exit(1);
                done += (size_t)k;
            }
            /* then, for variant 1, bytes without end, until the reader goes */
            static const char more[4096];
            while (variant == 1 && write(fds[1], more, sizeof more) > 0) {}
            _exit(0);
        }
        close(fds[1]);
        snprintf(dev, sizeof dev, "/dev/fd/%d", fds[0]);
        CHECK(tfm_safetensors_open(dev, &f, &err) == TFM_ERR_FORMAT && !f);
        CHECK_MSG(strstr(err.msg, variant == 0 ? "file is truncated" : "the input goes on after "
                                                                      "the"),
                  "%s", err.msg);
        close(fds[0]);
        waitpid(pid, &status, 0);
    }
    CHECK(tfm_safetensors_open("/dev/zero", &f, &err) == TFM_ERR_FORMAT && !f);
    free(bytes);
}

/* ---- writing errors ------------------------------------------------------------- */

static void test_writer_errors(void)
{
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    tfm_error err;
    float x[4] = {1, 2, 3, 4};
    int64_t s4[1] = {4}, s0[2] = {5, 0}, neg[1] = {-1}, big[2] = {1LL << 40, 1LL << 40};
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(tfm_safetensors_writer_add_tensor(w, "a", TFM_F32, 1, s4, x, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(w, "a", TFM_F32, 1, s4, x, &err) == TFM_ERR_ARG);
    CHECK_MSG(strcmp(err.msg, "tensor 'a' was added twice") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_writer_add_tensor(w, "__metadata__", TFM_F32, 1, s4, x, &err) ==
          TFM_ERR_ARG);
    CHECK(tfm_safetensors_writer_add_tensor(w, "bad\xff", TFM_F32, 1, s4, x, &err) == TFM_ERR_UTF8);
    CHECK_MSG(strstr(err.msg, "tensor name is not valid UTF-8") == err.msg, "%s", err.msg);
    CHECK(tfm_safetensors_writer_add_tensor(w, "n", TFM_F32, 1, neg, x, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "tensor 'n' has a bad shape [-1]") == err.msg, "%s", err.msg);
    CHECK(tfm_safetensors_writer_add_tensor(w, "b", TFM_F32, 2, big, x, &err) == TFM_ERR_RANGE);
    CHECK(tfm_safetensors_writer_add_tensor(w, "9", TFM_F32, 9, nine, x, &err) == TFM_ERR_RANGE);
    CHECK(tfm_safetensors_writer_add_tensor(w, "d", (tfm_dtype)7, 1, s4, x, &err) == TFM_ERR_ARG);
    CHECK(tfm_safetensors_writer_add_tensor(w, "nul", TFM_F32, 1, s4, NULL, &err) == TFM_ERR_ARG);
    /* empty tensors need no data */
    CHECK(tfm_safetensors_writer_add_tensor(w, "e", TFM_F32, 2, s0, NULL, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "k", "v", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "k", "w", &err) == TFM_ERR_ARG);
    CHECK_MSG(strcmp(err.msg, "metadata key 'k' was added twice") == 0, "%s", err.msg);
    CHECK(tfm_safetensors_writer_add_metadata(w, "v", "\xc3", &err) == TFM_ERR_UTF8);
    CHECK_MSG(strstr(err.msg, "metadata 'v': metadata value is not valid UTF-8") == err.msg, "%s",
              err.msg);
    CHECK(tfm_safetensors_writer_add_metadata(w, NULL, "x", &err) == TFM_ERR_ARG);

    /* a folder that does not exist: the error names the path */
    CHECK(tfm_safetensors_write(w, "/nonexistent-dir/x.safetensors", &err) == TFM_ERR_IO);
    CHECK_MSG(strstr(err.msg, "/nonexistent-dir/x.safetensors") != NULL, "%s", err.msg);

    /* what was accepted writes and reads back: a and e, k */
    const char *path = tmp_path("writer.safetensors");
    CHECK(tfm_safetensors_write(w, path, &err) == TFM_OK);
    /* writing again replaces the file with the same bytes */
    size_t size1 = 0, size2 = 0;
    unsigned char *b1 = read_whole(path, &size1);
    CHECK(tfm_safetensors_write(w, path, &err) == TFM_OK);
    unsigned char *b2 = read_whole(path, &size2);
    CHECK(b1 && b2 && size1 == size2 && memcmp(b1, b2, size1) == 0);
    free(b1);
    free(b2);
    tfm_safetensors *f = NULL;
    CHECK_MSG(tfm_safetensors_open(path, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) {
        CHECK(tfm_safetensors_count(f) == 2 && tfm_safetensors_metadata_count(f) == 1);
        const void *p;
        CHECK(tfm_safetensors_get(f, "e", TFM_F32, 2, s0, &p, &err) == TFM_OK && p != NULL);
        CHECK(tfm_safetensors_get(f, "a", TFM_F32, 1, s4, &p, &err) == TFM_OK &&
              memcmp(p, x, sizeof x) == 0);
    }
    tfm_safetensors_free(f);
    tfm_safetensors_writer_free(w);
    tfm_safetensors_writer_free(NULL);
    tfm_safetensors_free(NULL);
}

/* ---- python ------------------------------------------------------------------------ */

/* A reader written from the spec alone reads our file: the length, the
 * header padded with spaces, the offsets, the data and the metadata (which
 * the C side writes out NUL-separated for comparison). */
static const char python_reads_script[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "d = sys.argv[1]\n"
    "raw = open(d + '/round_trip.safetensors', 'rb').read()\n"
    "(n,) = struct.unpack('<Q', raw[:8])\n"
    "assert n % 8 == 0, n\n"
    "text = raw[8:8 + n].decode('utf-8')\n"
    "assert len(text) - len(text.rstrip(' ')) < 8\n"
    "h = json.loads(text)\n"
    "parts = open(d + '/expected.bin', 'rb').read().decode('utf-8').split('\\0')[:-1]\n"
    "n_meta = int(parts[0])\n"
    "want_meta = dict(zip(parts[1:1 + 2 * n_meta:2], parts[2:2 + 2 * n_meta:2]))\n"
    "want_names = parts[1 + 2 * n_meta:]\n"
    "meta = h.pop('__metadata__')\n"
    "assert meta == want_meta, (meta.keys(), want_meta.keys())\n"
    "assert list(h.keys()) == want_names, (list(h.keys()), want_names)\n"
    "data = raw[8 + n:]\n"
    "pos = 0\n"
    "for name in want_names:\n"
    "    info = h[name]\n"
    "    b, e = info['data_offsets']\n"
    "    assert b == pos, (name, b, pos)\n"
    "    pos = e\n"
    "    dt = {'F32': '<f4', 'I32': '<i4'}[info['dtype']]\n"
    "    a = np.frombuffer(data[b:e], dtype=dt).reshape(info['shape'])\n"
    "    i = np.arange(a.size, dtype=np.int64)\n"
    "    want = (i * 0.5 - 3).astype(dt) if dt == '<f4' else (i * 7 - 100).astype(dt)\n"
    "    assert np.array_equal(a.ravel(), want), name\n"
    "    assert (8 + n + b) % 4 == 0, name\n"
    "assert pos == len(data), (pos, len(data))\n"
    "print('python read', len(want_names), 'tensors and', len(meta), 'metadata entries')\n";

static void test_python_reads_ours(void)
{
    const char *path = tmp_path("expected.bin");
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fprintf(fp, "%d%c", 6, 0);
    for (int i = 0; i < 6; i++) fprintf(fp, "%s%c%s%c", meta_keys[i], 0, meta_values[i], 0);
    for (size_t i = 0; i < N_ROUND_TRIP; i++) fprintf(fp, "%s%c", round_trip_tensors[i].name, 0);
    fclose(fp);
    CHECK(run_python(python_reads_script, test_tmpdir) == 0);
}

/* Python writes files by the spec, with json.dumps: one padded as the
 * reference pads, one not padded at all with its keys in another order
 * than their data (so every tensor is misaligned), both holding a BF16
 * tensor and one of 9 dimensions. */
static const char python_writes_script[] =
    "import json, struct, sys\n"
    "import numpy as np\n"
    "d = sys.argv[1]\n"
    "def pat(shape, dt):\n"
    "    n = int(np.prod(shape))\n"
    "    i = np.arange(n, dtype=np.int64)\n"
    "    a = (i * 0.5 - 3).astype(dt) if dt == '<f4' else (i * 7 - 100).astype(dt)\n"
    "    return a.reshape(shape)\n"
    "tensors = [('embed.weight', 'F32', pat((5, 4), '<f4')),\n"
    "           ('layers.0.ids', 'I32', pat((7,), '<i4')),\n"
    "           ('scalar', 'F32', pat((), '<f4')),\n"
    "           ('empty', 'F32', pat((0, 3), '<f4')),\n"
    "           ('half', 'BF16', np.zeros(6, dtype='<u2').reshape(2, 3)),\n"
    "           ('deep', 'I32', pat((2, 1, 3, 1, 2, 1, 2, 2, 1), '<i4'))]\n"
    "meta = {'format': 'pt', 'note': 'Gr\\u00fc\\u00dfe \\u4e16\\u754c \\U0001f30d',\n"
    "        'json': json.dumps({'a': [1, 2], 'b': 'x\"y\\\\z'})}\n"
    "def save(path, align, reverse, ascii):\n"
    "    hdr, blobs, off = {}, [], 0\n"
    "    for name, dtype, a in tensors:\n"
    "        b = a.tobytes()\n"
    "        hdr[name] = {'dtype': dtype, 'shape': list(a.shape),\n"
    "                     'data_offsets': [off, off + len(b)]}\n"
    "        off += len(b)\n"
    "        blobs.append(b)\n"
    "    items = list(hdr.items())\n"
    "    if reverse:\n"
    "        items.reverse()\n"
    "    full = dict([('__metadata__', meta)] + items)\n"
    "    text = json.dumps(full, ensure_ascii=ascii).encode('utf-8')\n"
    "    if align:\n"
    "        text += b' ' * ((8 - len(text) % 8) % 8)\n"
    "    elif len(text) % 4 == 0:\n"
    "        text += b' '\n"
    "    open(path, 'wb').write(struct.pack('<Q', len(text)) + text + b''.join(blobs))\n"
    "save(d + '/py_aligned.safetensors', True, False, False)\n"
    "save(d + '/py_unaligned.safetensors', False, True, True)\n";

static void check_python_file(const char *name)
{
    tfm_safetensors *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_safetensors_open(tmp_path(name), &f, &err) == TFM_OK, "%s: %s", name, err.msg);
    if (!f) return;
    CHECK(tfm_safetensors_count(f) == 6);
    CHECK(strcmp(tfm_safetensors_name(f, 0), "embed.weight") == 0); /* data order */
    CHECK(strcmp(tfm_safetensors_metadata(f, "format"), "pt") == 0);
    CHECK_MSG(strcmp(tfm_safetensors_metadata(f, "note"),
                     "Gr\xc3\xbc\xc3\x9f" "e \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x8c\x8d") == 0,
              "%s", tfm_safetensors_metadata(f, "note"));
    CHECK(strcmp(tfm_safetensors_metadata(f, "json"), "{\"a\": [1, 2], \"b\": \"x\\\"y\\\\z\"}") ==
          0);
    static const tensor_case want[] = {
        {"embed.weight", TFM_F32, 2, {5, 4}},
        {"layers.0.ids", TFM_I32, 1, {7}},
        {"scalar", TFM_F32, 0, {0}},
        {"empty", TFM_F32, 2, {0, 3}},
    };
    for (size_t i = 0; i < 4; i++) {
        const void *p = NULL;
        CHECK_MSG(tfm_safetensors_get(f, want[i].name, want[i].dtype, want[i].ndim, want[i].shape,
                                      &p, &err) == TFM_OK,
                  "%s", err.msg);
        CHECK(p && (uintptr_t)p % 4 == 0 &&
              has_pattern(want[i].dtype, p, numel(want[i].ndim, want[i].shape)));
    }
    int64_t deep[9] = {2, 1, 3, 1, 2, 1, 2, 2, 1};
    const int32_t *p = NULL;
    CHECK(tfm_safetensors_get(f, "deep", TFM_I32, 9, deep, (const void **)&p, &err) == TFM_OK);
    CHECK(p && has_pattern(TFM_I32, p, 48));
    tfm_tensor t;
    tfm_tensor_init(&t);
    CHECK(tfm_safetensors_read(f, "deep", &t, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "tensor 'deep' has 9 dimensions") == err.msg, "%s", err.msg);
    int64_t s23[2] = {2, 3};
    const void *h;
    CHECK(tfm_safetensors_get(f, "half", TFM_F32, 2, s23, &h, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_safetensors_check_all_used(f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(err.msg, "unexpected tensor 'half'") == 0, "%s", err.msg);
    tfm_tensor_free(&t);
    tfm_safetensors_free(f);
}

static void test_we_read_python(void)
{
    CHECK(run_python(python_writes_script, test_tmpdir) == 0);
    check_python_file("py_aligned.safetensors");
    check_python_file("py_unaligned.safetensors");
}

int main(void)
{
    test_tmpdir_init("test_safetensors");
    RUN(test_small_dtypes);
    RUN(test_round_trip);
    RUN(test_reference_bytes);
    RUN(test_get_errors);
    RUN(test_other_dtypes);
    RUN(test_misaligned);
    RUN(test_truncated);
    RUN(test_open);
    RUN(test_writer_errors);
    if (have_numpy()) {
        RUN(test_python_reads_ours);
        RUN(test_we_read_python);
    } else {
        SKIP(test_python_reads_ours, TEST_PYTHON " cannot import numpy");
        SKIP(test_we_read_python, TEST_PYTHON " cannot import numpy");
    }
    for (size_t i = 0; i < N_ROUND_TRIP; i++) free(round_trip_data[i]);
    CHECK_DONE();
}
