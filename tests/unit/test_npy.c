/* test_npy.c - tensors, .npy records and tensor streams: round trips of every
 * dtype and shape, the exact bytes numpy writes, numpy reading our streams
 * and us reading numpy's, and every kind of truncated or corrupt record
 * rejected with the right status and a message that names it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "tfm/io.h"

/* Element i of the test pattern; python computes the same values. */
static float pattern_f32(int64_t i) { return (float)i * 0.5f - 3.0f; }
static int32_t pattern_i32(int64_t i) { return (int32_t)(i * 7 - 100); }

static void fill_pattern(tfm_tensor *t)
{
    int64_t n = tfm_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == TFM_F32) ((float *)t->data)[i] = pattern_f32(i);
        else ((int32_t *)t->data)[i] = pattern_i32(i);
    }
}

static bool has_pattern(const tfm_tensor *t)
{
    int64_t n = tfm_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == TFM_F32 && ((float *)t->data)[i] != pattern_f32(i)) return false;
        if (t->dtype == TFM_I32 && ((int32_t *)t->data)[i] != pattern_i32(i)) return false;
    }
    return true;
}

static bool same_shape(const tfm_tensor *t, tfm_dtype dtype, int ndim, const int64_t *shape)
{
    if (t->dtype != dtype || t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

/* The shapes every round trip covers. */
typedef struct shape_case {
    int ndim;
    int64_t shape[TFM_MAX_DIMS];
} shape_case;

static const shape_case shapes[] = {
    {0, {0}},                       /* a scalar */
    {1, {5}},                       /* 1-d */
    {1, {0}},                       /* empty 1-d */
    {2, {0, 4}},                    /* an empty sentence of d_model 4 */
    {2, {3, 4}},
    {2, {4, 0}},
    {3, {2, 3, 4}},
    {8, {2, 1, 2, 1, 2, 1, 2, 3}},  /* TFM_MAX_DIMS */
    {2, {1000, 300}},               /* bigger than one read chunk */
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Builds one record as bytes: version major, a header text, then payload. */
static size_t make_record(unsigned char *out, int major, const char *header,
                          const void *payload, size_t payload_len)
{
    size_t hlen = strlen(header);
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    size_t pos = 8;
    out[pos++] = (unsigned char)(hlen & 0xff);
    out[pos++] = (unsigned char)(hlen >> 8);
    if (major > 1) {
        out[pos++] = (unsigned char)(hlen >> 16);
        out[pos++] = (unsigned char)(hlen >> 24);
    }
    memcpy(out + pos, header, hlen);
    pos += hlen;
    if (payload_len) memcpy(out + pos, payload, payload_len);
    return pos + payload_len;
}

/* Writes a record of t into a memory buffer (caller frees *data). */
static size_t record_bytes(const tfm_tensor *t, char **data)
{
    size_t size = 0;
    FILE *fp = open_memstream(data, &size);
    tfm_error err;
    CHECK(tfm_npy_write(fp, t, &err) == TFM_OK);
    fclose(fp);
    return size;
}

static void test_shape_str(void)
{
    tfm_tensor t;
    tfm_tensor_init(&t);
    char s[64];
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 0, NULL) == TFM_OK);
    tfm_tensor_shape_str(&t, s, sizeof s);
    CHECK(strcmp(s, "()") == 0);
    CHECK(tfm_tensor_numel(&t) == 1);
    int64_t one[1] = {3};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 1, one) == TFM_OK);
    tfm_tensor_shape_str(&t, s, sizeof s);
    CHECK(strcmp(s, "(3,)") == 0);
    int64_t two[2] = {3, 512};
    CHECK(tfm_tensor_reshape(&t, TFM_I32, 2, two) == TFM_OK);
    tfm_tensor_shape_str(&t, s, sizeof s);
    CHECK(strcmp(s, "(3, 512)") == 0);
    CHECK(tfm_tensor_numel(&t) == 1536);
    CHECK(t.cap >= 1536 * 4);
    tfm_tensor_shape_str(&t, s, 4); /* cut short but terminated */
    CHECK(strcmp(s, "(3,") == 0);
    tfm_tensor_free(&t);
    tfm_tensor_free(NULL);
}

static void test_reshape_rejects(void)
{
    tfm_tensor t;
    tfm_tensor_init(&t);
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 9, nine) == TFM_ERR_RANGE);
    CHECK(tfm_tensor_reshape(&t, TFM_F32, -1, nine) == TFM_ERR_RANGE);
    int64_t neg[2] = {3, -1};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 2, neg) == TFM_ERR_RANGE);
    int64_t huge[3] = {1 << 20, 1 << 20, 1 << 20};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 3, huge) == TFM_ERR_RANGE);
    int64_t ok[1] = {2};
    CHECK(tfm_tensor_reshape(&t, (tfm_dtype)7, 1, ok) == TFM_ERR_ARG);
    CHECK(t.data == NULL); /* nothing was allocated for the failures */
    /* write refuses a tensor it could not describe */
    t.ndim = 2;
    t.shape[0] = 3;
    t.shape[1] = -2;
    tfm_error err;
    FILE *fp = fopen("/dev/null", "wb");
    CHECK(tfm_npy_write(fp, &t, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "(3, -2)") != NULL, "%s", err.msg);
    fclose(fp);
    tfm_tensor_free(&t);
}

/* Every dtype and shape, written as one stream and read back in order. */
static void test_round_trip_stream(void)
{
    const char *path = tmp_path("round_trip.npy");
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    tfm_npy_stream out = {.fp = fp};
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    for (int dt = 0; dt < 2; dt++)
        for (size_t i = 0; i < N_SHAPES; i++) {
            CHECK(tfm_tensor_reshape(&t, (tfm_dtype)dt, shapes[i].ndim, shapes[i].shape) ==
                  TFM_OK);
            fill_pattern(&t);
            CHECK_MSG(tfm_npy_stream_write(&out, &t, &err) == TFM_OK, "%s", err.msg);
        }
    CHECK(out.record == 2 * N_SHAPES);
    fclose(fp);
    tfm_tensor_free(&t);

    fp = fopen(path, "rb");
    tfm_npy_stream in = {.fp = fp};
    tfm_tensor_init(&t);
    for (int dt = 0; dt < 2; dt++)
        for (size_t i = 0; i < N_SHAPES; i++) {
            tfm_status st = tfm_npy_stream_read(&in, &t, &err);
            CHECK_MSG(st == TFM_OK, "record %zu: %s", in.record + 1, err.msg);
            if (st != TFM_OK) break;
            CHECK(same_shape(&t, (tfm_dtype)dt, shapes[i].ndim, shapes[i].shape));
            CHECK(has_pattern(&t));
            CHECK(t.data != NULL);
        }
    CHECK(tfm_npy_stream_read(&in, &t, &err) == TFM_EOF);
    CHECK(tfm_npy_stream_read(&in, &t, &err) == TFM_EOF); /* and stays there */
    CHECK(in.record == 2 * N_SHAPES);
    fclose(fp);
    tfm_tensor_free(&t);
}

/* The header is byte for byte what numpy 1.x/2.x writes for (3, 4) float32. */
static void test_header_bytes(void)
{
    tfm_tensor t;
    tfm_tensor_init(&t);
    int64_t shape[2] = {3, 4};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 2, shape) == TFM_OK);
    fill_pattern(&t);
    char *data = NULL;
    size_t size = record_bytes(&t, &data);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    CHECK(size == 128 + 48);
    CHECK(memcmp(data, "\x93NUMPY\x01\x00", 8) == 0);
    CHECK((unsigned char)data[8] == 118 && data[9] == 0); /* 128 - 10 */
    CHECK(memcmp(data + 10, dict, strlen(dict)) == 0);
    for (size_t i = 10 + strlen(dict); i < 127; i++) CHECK(data[i] == ' ');
    CHECK(data[127] == '\n');
    CHECK(memcmp(data + 128, t.data, 48) == 0);
    free(data);

    /* 0-d: "()" and no growth padding; 1-d: "(7,)" */
    CHECK(tfm_tensor_reshape(&t, TFM_I32, 0, NULL) == TFM_OK);
    size = record_bytes(&t, &data);
    CHECK(size == 128 + 4); /* 65 bytes of header and '\n' round up to 128 */
    CHECK(memmem(data, size, "'descr': '<i4'", 14) && memmem(data, size, "'shape': (), }", 14));
    CHECK(data[127] == '\n');
    free(data);
    int64_t one[1] = {7};
    CHECK(tfm_tensor_reshape(&t, TFM_I32, 1, one) == TFM_OK);
    size = record_bytes(&t, &data);
    CHECK(memmem(data, size, "'shape': (7,), }", 16) != NULL);
    CHECK((size - 28) % 64 == 0);
    free(data);
    tfm_tensor_free(&t);
}

/* Headers numpy (or a person) might write differently from us. */
static void test_parse_variants(void)
{
    static const struct {
        int major;
        const char *header;
        tfm_dtype dtype;
        int ndim;
        int64_t shape[3];
    } cases[] = {
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", TFM_F32, 2, {2, 3}},
        {1, "{\"shape\": (2, 3), \"descr\": \"<i4\", \"fortran_order\": False}", TFM_I32, 2, {2, 3}},
        {1, " {  'fortran_order':False,'shape':(6,),'descr':'<f4' }  \n", TFM_F32, 1, {6}},
        {1, "{'descr':\n'<f4',\t'fortran_order' : False ,\n 'shape' : ( 1 , 2 , 3 , ) , }",
         TFM_F32, 3, {1, 2, 3}},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", TFM_F32, 0, {0}},
        {2, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }   \n", TFM_I32, 2, {3, 2}},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n", TFM_F32, 1, {6}},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9), }", TFM_F32, 2, {0, 9}},
    };
    int32_t payload[6] = {1, 2, 3, 4, 5, 6};
    unsigned char buf[512];
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t numel = 1;
        for (int d = 0; d < cases[i].ndim; d++) numel *= cases[i].shape[d];
        size_t n = make_record(buf, cases[i].major, cases[i].header, payload, (size_t)numel * 4);
        size_t used = 0;
        tfm_status st = tfm_npy_parse(buf, n + 5, &t, &used, &err); /* 5 bytes beyond */
        CHECK_MSG(st == TFM_OK, "case %zu: %s", i, err.msg);
        CHECK_MSG(used == n, "case %zu: used %zu of %zu", i, used, n);
        CHECK_MSG(same_shape(&t, cases[i].dtype, cases[i].ndim, cases[i].shape), "case %zu", i);
        CHECK(memcmp(t.data, payload, (size_t)numel * 4) == 0);
    }
    tfm_tensor_free(&t);
}

/* One bad header: the status and a piece of the message it must give. */
typedef struct bad_case {
    const char *header;
    tfm_status status;
    const char *msg;
} bad_case;

static void test_parse_rejects(void)
{
    static const bad_case cases[] = {
        {"{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", TFM_ERR_UNSUPPORTED,
         "dtype '>f8' is not supported: expected '<f4' or '<i4'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", TFM_ERR_UNSUPPORTED,
         "dtype '<f8' is not supported"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", TFM_ERR_UNSUPPORTED,
         "dtype '|u1'"},
        {"{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2,), }",
         TFM_ERR_UNSUPPORTED, "structured dtypes"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", TFM_ERR_UNSUPPORTED,
         "fortran_order True"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }",
         TFM_ERR_UNSUPPORTED, "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", TFM_ERR_FORMAT,
         "(3) is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1), }", TFM_ERR_FORMAT,
         "negative"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
         TFM_ERR_FORMAT, "too large for 64 bits"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807,), }",
         TFM_ERR_FORMAT, "larger than 2^40"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }",
         TFM_ERR_FORMAT, "float32 needs more than 2^40 bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9223372036854775807), }",
         TFM_ERR_FORMAT, "larger than 2^40"},
        {"{'descr': '<f4', 'fortran_order': False, }", TFM_ERR_FORMAT, "lacks the key 'shape'"},
        {"{'fortran_order': False, 'shape': (2,)}", TFM_ERR_FORMAT, "lacks the key 'descr'"},
        {"{'descr': '<f4', 'shape': (2,)}", TFM_ERR_FORMAT, "lacks the key 'fortran_order'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
         TFM_ERR_FORMAT, "'descr' twice"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", TFM_ERR_FORMAT,
         "unknown key 'x'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", TFM_ERR_FORMAT,
         "expected True or False at byte 34"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", TFM_ERR_FORMAT,
         "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", TFM_ERR_FORMAT,
         "shape tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", TFM_ERR_FORMAT,
         "expected ',' or ')' in the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", TFM_ERR_FORMAT,
         "expected a dimension"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", TFM_ERR_FORMAT,
         "expected ',' or '}'"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", TFM_ERR_FORMAT,
         "expected ':'"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", TFM_ERR_FORMAT,
         "expected ',' or '}' at byte 17 of the header, found 'f'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", TFM_ERR_FORMAT,
         "found the end of the header"},
        {"{'descr': '<f4\n', 'fortran_order': False, 'shape': (2,)}", TFM_ERR_FORMAT,
         "found byte 0x0a"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", TFM_ERR_FORMAT,
         "only spaces after the '}'"},
        {"{'descr': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'fortran_order': False}",
         TFM_ERR_FORMAT, "longer than 31 characters"},
        {"", TFM_ERR_FORMAT, "expected '{' at byte 0 of the header, found the end"},
        {"[]", TFM_ERR_FORMAT, "expected '{'"},
        {"{'desc\\r': '<f4'}", TFM_ERR_FORMAT, "closing quote"},
    };
    unsigned char buf[512];
    tfm_tensor t;
    tfm_tensor_init(&t);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfm_error err = {0};
        size_t n = make_record(buf, 1, cases[i].header, "\0\0\0\0\0\0\0\0", 8);
        size_t used = 12345;
        tfm_status st = tfm_npy_parse(buf, n, &t, &used, &err);
        CHECK_MSG(st == cases[i].status, "case %zu: status %d: %s", i, (int)st, err.msg);
        CHECK_MSG(err.status == st, "case %zu", i);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: \"%s\" lacks \"%s\"", i,
                  err.msg, cases[i].msg);
        CHECK(used == 12345); /* untouched on failure */
    }
    tfm_tensor_free(&t);
}

/* Bad magic, versions and header lengths. */
static void test_bad_preamble(void)
{
    unsigned char buf[256];
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    size_t n = make_record(buf, 1, hdr, "\0\0\0\0", 4);

    CHECK(tfm_npy_parse(buf, 0, &t, NULL, &err) == TFM_EOF);
    CHECK(tfm_npy_parse(NULL, 0, &t, NULL, &err) == TFM_EOF);

    buf[1] = 'X';
    CHECK(tfm_npy_parse(buf, n, &t, NULL, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "magic") && strstr(err.msg, "found 93 58 55 4d 50 59"), "%s",
              err.msg);
    buf[1] = 'N';
    const char *text = "12 7 431\n";
    CHECK(tfm_npy_parse(text, strlen(text), &t, NULL, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "not a .npy record"), "%s", err.msg);
    CHECK(tfm_npy_parse("x", 1, &t, NULL, &err) == TFM_ERR_FORMAT);
    CHECK(strstr(err.msg, "magic") != NULL);

    buf[6] = 4;
    CHECK(tfm_npy_parse(buf, n, &t, NULL, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "version 4.0") != NULL, "%s", err.msg);
    buf[6] = 1;
    buf[7] = 1;
    CHECK(tfm_npy_parse(buf, n, &t, NULL, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "version 1.1") != NULL, "%s", err.msg);
    buf[7] = 0;

    /* version 2.0 with a 4 GB header length */
    unsigned char big[16] = "\x93NUMPY\x02\x00\xff\xff\xff\xff{}";
    CHECK(tfm_npy_parse(big, sizeof big, &t, NULL, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "header length 4294967295 is absurd") != NULL, "%s", err.msg);
    CHECK(t.cap < 1024); /* and nothing was allocated for it */
    tfm_tensor_free(&t);
}

/* Every cut of a valid record fails as a truncated header or truncated data,
 * never as a clean end, from memory and from a FILE. */
static void test_truncated(void)
{
    tfm_tensor t, u;
    tfm_tensor_init(&t);
    tfm_tensor_init(&u);
    int64_t shape[2] = {3, 4};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 2, shape) == TFM_OK);
    fill_pattern(&t);
    char *data = NULL;
    size_t size = record_bytes(&t, &data);
    tfm_error err;
    for (size_t cut = 1; cut < size; cut++) {
        tfm_status st = tfm_npy_parse(data, cut, &u, NULL, &err);
        CHECK_MSG(st == TFM_ERR_FORMAT, "cut %zu: %d", cut, (int)st);
        char want[128];
        if (cut < 10) snprintf(want, sizeof want, "truncated header: expected 10 bytes, got %zu", cut);
        else if (cut < 128) snprintf(want, sizeof want, "truncated header: expected 128 bytes, got %zu", cut);
        else snprintf(want, sizeof want, "truncated data: shape (3, 4) float32 needs 48 bytes, got %zu", cut - 128);
        CHECK_MSG(strcmp(err.msg, want) == 0, "cut %zu: \"%s\" is not \"%s\"", cut, err.msg, want);
        if (cut % 7 != 0) continue; /* through a FILE too, for some cuts */
        FILE *fp = fmemopen(data, cut, "rb");
        CHECK(tfm_npy_read(fp, &u, &err) == TFM_ERR_FORMAT);
        CHECK_MSG(strcmp(err.msg, want) == 0, "FILE cut %zu: %s", cut, err.msg);
        fclose(fp);
    }
    /* a version 2.0 preamble cut inside its 4-byte length */
    unsigned char v2[11] = "\x93NUMPY\x02\x00\x40\x00";
    CHECK(tfm_npy_parse(v2, 11, &u, NULL, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "truncated header: expected 12 bytes, got 11"), "%s", err.msg);
    free(data);
    tfm_tensor_free(&t);
    tfm_tensor_free(&u);
}

/* Errors in a stream name the 1-based record they are in. */
static void test_stream_errors(void)
{
    tfm_tensor t;
    tfm_tensor_init(&t);
    int64_t shape[2] = {3, 512};
    CHECK(tfm_tensor_reshape(&t, TFM_F32, 2, shape) == TFM_OK);
    fill_pattern(&t);
    char *rec = NULL;
    size_t size = record_bytes(&t, &rec);
    const size_t header = 128;
    CHECK(size == header + 6144);

    struct {
        size_t cut;               /* bytes of the second copy kept */
        const char *msg;
    } cases[] = {
        {header + 100, "record 2: truncated data: shape (3, 512) float32 needs 6144 bytes, got 100"},
        {header - 1, "record 2: truncated header: expected 128 bytes, got 127"},
        {3, "record 2: truncated header: expected 10 bytes, got 3"},
    };
    tfm_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = tmp_path("stream_errors.npy");
        FILE *fp = fopen(path, "wb");
        fwrite(rec, 1, size, fp);
        fwrite(rec, 1, cases[i].cut, fp);
        fclose(fp);
        fp = fopen(path, "rb");
        tfm_npy_stream s = {.fp = fp};
        CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_OK);
        CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_ERR_FORMAT);
        CHECK_MSG(strcmp(err.msg, cases[i].msg) == 0, "\"%s\"", err.msg);
        CHECK(s.record == 1);
        fclose(fp);
    }

    /* a corrupt header in record 3 */
    const char *path = tmp_path("stream_corrupt.npy");
    FILE *fp = fopen(path, "wb");
    fwrite(rec, 1, size, fp);
    fwrite(rec, 1, size, fp);
    memcpy(rec + 20, "'<f8'", 5); /* "{'descr': '<f4'" -> '<f8' */
    fwrite(rec, 1, size, fp);
    fclose(fp);
    fp = fopen(path, "rb");
    tfm_npy_stream s = {.fp = fp};
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_OK);
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_OK);
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_ERR_UNSUPPORTED);
    CHECK_MSG(strcmp(err.msg, "record 3: dtype '<f8' is not supported: expected '<f4' or '<i4'") ==
                  0, "\"%s\"", err.msg);
    fclose(fp);

    /* a write error names the record too */
    fp = fopen("/dev/full", "wb");
    if (fp) {
        setvbuf(fp, NULL, _IONBF, 0);
        tfm_npy_stream w = {.fp = fp, .record = 4};
        CHECK(tfm_npy_stream_write(&w, &t, &err) == TFM_ERR_IO);
        CHECK_MSG(strstr(err.msg, "record 5: write failed: No space left") == err.msg, "\"%s\"",
                  err.msg);
        CHECK(w.record == 4);
        fclose(fp);
    }
    free(rec);
    tfm_tensor_free(&t);
}

/* Writes records of the 2-D float32 shapes given (each filled with the
 * pattern) to path, and opens it again through a pipe (no seeking), or
 * returns NULL. */
static FILE *pattern_records_through_pipe(const char *path, int64_t (*sizes)[2], int n)
{
    FILE *fp = fopen(path, "wb");
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    for (int i = 0; fp && i < n; i++) {
        CHECK(tfm_tensor_reshape(&t, TFM_F32, 2, sizes[i]) == TFM_OK);
        fill_pattern(&t);
        CHECK(tfm_npy_write(fp, &t, &err) == TFM_OK);
    }
    if (fp) fclose(fp);
    tfm_tensor_free(&t);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "cat '%s'", path);
    fp = popen(cmd, "r");
    CHECK(fp != NULL);
    return fp;
}

/* A stream with limits: records longer than max_rows are cropped to their
 * first rows, the rest read past without being held (the buffer stays the
 * size of what is kept), and the next record is read from the right place;
 * a record that would keep more than max_bytes is refused before its data. */
static void test_stream_limits(void)
{
    const char *path = tmp_path("limits.npy");
    int64_t sizes[4][2] = {{5000, 8}, {3, 8}, {0, 8}, {12, 8}};
    FILE *fp = pattern_records_through_pipe(path, sizes, 4);
    if (!fp) return;
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    char cmd[8300];
    tfm_npy_stream s = {.fp = fp, .max_rows = 10};
    int64_t kept[4][2] = {{10, 8}, {3, 8}, {0, 8}, {10, 8}};
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(tfm_npy_stream_read(&s, &t, &err) == TFM_OK, "%s", err.msg);
        CHECK(same_shape(&t, TFM_F32, 2, kept[i]) && has_pattern(&t));
        CHECK(s.rows_in_file == sizes[i][0]);
    }
    CHECK(t.cap < 5000 * 8 * sizeof(float) / 4); /* never held the 5000 rows */
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_EOF);
    CHECK(pclose(fp) == 0);

    /* cut short inside the rows read past: the message gives the whole shape */
    const char *cut = tmp_path("limits_cut.npy");
    snprintf(cmd, sizeof cmd, "head -c 2000 '%s' > '%s'", path, cut);
    CHECK(system(cmd) == 0);
    fp = fopen(cut, "rb");
    s = (tfm_npy_stream){.fp = fp, .max_rows = 10};
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "record 1: truncated data: shape (5000, 8) float32 needs 160000 bytes"),
              "%s", err.msg);
    fclose(fp);

    /* over max_bytes: refused, naming the shape kept */
    fp = fopen(path, "rb");
    s = (tfm_npy_stream){.fp = fp, .max_rows = 100, .max_bytes = 1000};
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strcmp(err.msg, "record 1: shape (100, 8) float32 is 3200 bytes, more than the 1000 "
                              "a record may have here") == 0,
              "%s", err.msg);
    fclose(fp);
    tfm_tensor_free(&t);
}

/* Reading many records into one tensor reuses its buffer, and reads from a
 * pipe (no seeking). */
static void test_reuse_and_pipe(void)
{
    int64_t sizes[4][2] = {{50, 8}, {3, 8}, {0, 8}, {50, 8}};
    FILE *fp = pattern_records_through_pipe(tmp_path("reuse.npy"), sizes, 4);
    if (!fp) return;
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    tfm_npy_stream s = {.fp = fp};
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_OK);
    void *first = t.data;
    size_t cap = t.cap;
    for (int i = 1; i < 4; i++) {
        CHECK_MSG(tfm_npy_stream_read(&s, &t, &err) == TFM_OK, "%s", err.msg);
        CHECK(same_shape(&t, TFM_F32, 2, sizes[i]) && has_pattern(&t));
        CHECK(t.data == first && t.cap == cap);
    }
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_EOF);
    CHECK(pclose(fp) == 0);
    tfm_tensor_free(&t);
}

/* numpy.load called again and again on one open file reads our stream, and
 * numpy.save writes the same bytes we did. */
static const char numpy_reads_script[] =
    "import io, sys\n"
    "import numpy as np\n"
    "shapes = [(), (5,), (0,), (0, 4), (3, 4), (4, 0), (2, 3, 4), (2, 1, 2, 1, 2, 1, 2, 3),\n"
    "          (1000, 300)]\n"
    "raw = open(sys.argv[1], 'rb').read()\n"
    "f = open(sys.argv[1], 'rb')\n"
    "for dt in ('<f4', '<i4'):\n"
    "    for shape in shapes:\n"
    "        start = f.tell()\n"
    "        a = np.load(f)\n"
    "        n = int(np.prod(shape))\n"
    "        i = np.arange(n, dtype=np.int64)\n"
    "        want = (i * 0.5 - 3).astype('<f4') if dt == '<f4' else (i * 7 - 100).astype('<i4')\n"
    "        want = want.reshape(shape)\n"
    "        assert a.dtype == np.dtype(dt), (a.dtype, dt)\n"
    "        assert a.shape == shape, (a.shape, shape)\n"
    "        assert np.array_equal(a, want), shape\n"
    "        b = io.BytesIO()\n"
    "        np.save(b, want)\n"
    "        assert b.getvalue() == raw[start:f.tell()], (shape, b.getvalue()[:128], raw[start:start+128])\n"
    "assert f.read() == b'', 'bytes after the last record'\n"
    "print('numpy read', 2 * len(shapes), 'records')\n";

static void test_numpy_reads_ours(void)
{
    const char *path = tmp_path("round_trip.npy"); /* written by test_round_trip_stream */
    char arg[8192];
    snprintf(arg, sizeof arg, "%s", path);
    CHECK(access(arg, R_OK) == 0);
    CHECK(run_python(numpy_reads_script, arg) == 0);
}

/* numpy writes; we read. */
static const char numpy_writes_script[] =
    "import sys\n"
    "import numpy as np\n"
    "from numpy.lib import format as fmt\n"
    "d = sys.argv[1]\n"
    "def pat(shape, dt):\n"
    "    n = int(np.prod(shape))\n"
    "    i = np.arange(n, dtype=np.int64)\n"
    "    a = (i * 0.5 - 3).astype(dt) if dt == '<f4' else (i * 7 - 100).astype(dt)\n"
    "    return a.reshape(shape)\n"
    "with open(d + '/numpy_stream.npy', 'wb') as f:\n"
    "    np.save(f, pat((2, 3), '<f4'))\n"
    "    np.save(f, pat((7,), '<i4'))\n"
    "    np.save(f, pat((), '<f4'))\n"
    "    np.save(f, pat((0, 512), '<f4'))\n"
    "    np.save(f, np.empty((2**31 + 5, 0), dtype='<f4'))\n"
    "    np.save(f, pat((300000,), '<f4'))\n"
    "    np.save(f, pat((2, 1, 3, 1, 2, 1, 2, 2), '<i4'))\n"
    "    fmt.write_array(f, pat((4, 5), '<f4'), version=(2, 0))\n"
    "    fmt.write_array(f, pat((3, 2), '<i4'), version=(3, 0))\n"
    "    np.save(f, np.float32(2.5))\n"
    "np.save(d + '/numpy_f8.npy', np.zeros(3))\n"
    "np.save(d + '/numpy_fortran.npy', np.asfortranarray(pat((2, 3), '<f4')))\n"
    "np.save(d + '/numpy_big_endian.npy', pat((2, 3), '<f4').astype('>f4'))\n";

static void test_we_read_numpy(void)
{
    CHECK(run_python(numpy_writes_script, test_tmpdir) == 0);
    static const struct {
        tfm_dtype dtype;
        int ndim;
        int64_t shape[TFM_MAX_DIMS];
    } want[] = {
        {TFM_F32, 2, {2, 3}},
        {TFM_I32, 1, {7}},
        {TFM_F32, 0, {0}},
        {TFM_F32, 2, {0, 512}},
        {TFM_F32, 2, {2147483653LL, 0}},
        {TFM_F32, 1, {300000}},
        {TFM_I32, 8, {2, 1, 3, 1, 2, 1, 2, 2}},
        {TFM_F32, 2, {4, 5}},
        {TFM_I32, 2, {3, 2}},
    };
    FILE *fp = fopen(tmp_path("numpy_stream.npy"), "rb");
    CHECK(fp != NULL);
    if (!fp) return;
    tfm_npy_stream s = {.fp = fp};
    tfm_tensor t;
    tfm_tensor_init(&t);
    tfm_error err;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tfm_status st = tfm_npy_stream_read(&s, &t, &err);
        CHECK_MSG(st == TFM_OK, "%s", err.msg);
        if (st != TFM_OK) break;
        CHECK_MSG(same_shape(&t, want[i].dtype, want[i].ndim, want[i].shape), "record %zu", i + 1);
        CHECK_MSG(has_pattern(&t), "record %zu", i + 1);
    }
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_OK); /* np.float32(2.5) */
    CHECK(t.ndim == 0 && t.dtype == TFM_F32 && *(float *)t.data == 2.5f);
    CHECK(tfm_npy_stream_read(&s, &t, &err) == TFM_EOF);
    fclose(fp);

    static const struct {
        const char *file;
        const char *msg;
    } bad[] = {
        {"numpy_f8.npy", "record 1: dtype '<f8' is not supported: expected '<f4' or '<i4'"},
        {"numpy_fortran.npy", "record 1: fortran_order True"},
        {"numpy_big_endian.npy", "record 1: dtype '>f4' is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fp = fopen(tmp_path(bad[i].file), "rb");
        CHECK(fp != NULL);
        if (!fp) continue;
        tfm_npy_stream b = {.fp = fp};
        CHECK(tfm_npy_stream_read(&b, &t, &err) == TFM_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, bad[i].msg) == err.msg, "\"%s\"", err.msg);
        fclose(fp);
    }
    tfm_tensor_free(&t);
}

int main(void)
{
    test_tmpdir_init("test_npy");
    RUN(test_shape_str);
    RUN(test_reshape_rejects);
    RUN(test_round_trip_stream);
    RUN(test_stream_limits);
    RUN(test_header_bytes);
    RUN(test_parse_variants);
    RUN(test_parse_rejects);
    RUN(test_bad_preamble);
    RUN(test_truncated);
    RUN(test_stream_errors);
    RUN(test_reuse_and_pipe);
    if (have_numpy()) {
        RUN(test_numpy_reads_ours);
        RUN(test_we_read_numpy);
    } else {
        SKIP(test_numpy_reads_ours, TEST_PYTHON " cannot import numpy");
        SKIP(test_we_read_numpy, TEST_PYTHON " cannot import numpy");
    }
    CHECK_DONE();
}
