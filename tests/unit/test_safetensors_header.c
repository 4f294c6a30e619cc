/* test_safetensors_header.c - the rules of a safetensors file's header:
 * every validation rule failing with a message that names the tensor, the
 * headers at the edges of the rules accepted, header lengths that point
 * past the end or past the format's limit, and headers refused before they
 * are parsed for holding more than any model needs.  Whole files, cut short
 * too: test_safetensors.c. */
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

/* ---- validation ------------------------------------------------------------------ */

typedef struct bad_case {
    const char *json;
    size_t data_size;
    tfm_status status;
    const char *msg; /* the start of the message, or a part in it after '*' */
} bad_case;

#define T(name, rest) "\"" name "\":{" rest "}"
#define F32_4(offsets) "\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":" offsets

static const bad_case bad_cases[] = {
    /* sizes and layout */
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[5,6],\"data_offsets\":[0,100]") "}", 100,
     TFM_ERR_FORMAT, "tensor 'x': data_offsets [0, 100] do not match shape [5, 6] F32 (120 bytes)"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets [16, 0] do not match shape [4] F32 (16 bytes)"},
    {"{" T("x", F32_4("[0,16]")) "," T("y", F32_4("[8,24]")) "}", 24, TFM_ERR_FORMAT,
     "tensor 'y' overlaps tensor 'x' (data_offsets [8, 24] and [0, 16])"},
    {"{" T("y", F32_4("[0,16]")) "," T("x", F32_4("[0,16]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'y' overlaps tensor 'x'"},
    {"{" T("x", F32_4("[0,16]")) "," T("y", F32_4("[20,36]")) "}", 36, TFM_ERR_FORMAT,
     "the data section has 4 bytes that belong to no tensor before tensor 'y' (bytes 16 to 20)"},
    {"{" T("x", F32_4("[4,20]")) "}", 20, TFM_ERR_FORMAT,
     "the data section has 4 bytes that belong to no tensor before tensor 'x'"},
    {"{" T("x", F32_4("[0,16]")) "}", 8, TFM_ERR_FORMAT,
     "file is truncated: the header says the data section is 16 bytes, the file holds 8"},
    {"{" T("x", F32_4("[0,16]")) "}", 20, TFM_ERR_FORMAT,
     "the file has 4 bytes after the last tensor: the header says the data section is 16 bytes, "
     "the file holds 20"},
    {"{}", 1, TFM_ERR_FORMAT, "the file has 1 bytes after the last tensor"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4503599627370496,4503599627370496,1024],"
                "\"data_offsets\":[0,0]") "}",
     0, TFM_ERR_FORMAT, "tensor 'x': shape [4503599627370496, 4503599627370496, 1024] F32 holds "
                        "more than 2^64 bits"},
    {"{" T("x", "\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]") "}", 1, TFM_ERR_FORMAT,
     "tensor 'x': shape [3] F4 is 12 bits, not a whole number of bytes"},
    /* metadata */
    {"{\"__metadata__\":{\"k\":1}}", 0, TFM_ERR_FORMAT,
     "__metadata__ value for 'k' is not a string (it is a number)"},
    {"{\"__metadata__\":{\"a\":\"1\",\"k\":[\"x\"]}}", 0, TFM_ERR_FORMAT,
     "__metadata__ value for 'k' is not a string (it is an array)"},
    {"{\"__metadata__\":{\"k\":null}}", 0, TFM_ERR_FORMAT, "__metadata__ value for 'k' is not"},
    {"{\"__metadata__\":\"x\"}", 0, TFM_ERR_FORMAT, "__metadata__ is a string, expected an object"},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, TFM_ERR_FORMAT,
     "__metadata__ has the key 'k' twice"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, TFM_ERR_FORMAT,
     "header has \"__metadata__\" twice"},
    /* names and fields */
    {"{" T("x", F32_4("[0,16]")) "," T("x", F32_4("[16,32]")) "}", 32, TFM_ERR_FORMAT,
     "header names tensor 'x' twice"},
    {"{\"x\":5}", 0, TFM_ERR_FORMAT,
     "tensor 'x': expected an object with \"dtype\", \"shape\" and \"data_offsets\", found a "
     "number"},
    {"{" T("x", "\"shape\":[4],\"data_offsets\":[0,16]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x' has no \"dtype\""},
    {"{" T("x", "\"dtype\":\"F32\",\"data_offsets\":[0,16]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x' has no \"shape\""},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x' has no \"data_offsets\""},
    {"{" T("x", "\"dtype\":\"I32\"," F32_4("[0,16]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': \"dtype\" appears twice"},
    {"{" T("x", "\"dtype\":\"Q7\",\"shape\":[4],\"data_offsets\":[0,16]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x' has the unknown dtype \"Q7\""},
    {"{" T("x", "\"dtype\":\"f32\",\"shape\":[4],\"data_offsets\":[0,16]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x' has the unknown dtype \"f32\""},
    {"{" T("x", "\"dtype\":32,\"shape\":[4],\"data_offsets\":[0,16]") "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': dtype is a number, expected a string"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":\"[4]\",\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape is a string, expected an array of non-negative integers"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":{\"0\":4},\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape is an object"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape[1] is -2, expected a non-negative integer below 2^53"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,6]") "}", 6,
     TFM_ERR_FORMAT, "tensor 'x': shape[0] is 1.5, expected"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape[0] is 1.0000000000000001e+300, expected"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[1e999],\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape[0] is inf, expected"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,16]") "}",
     16, TFM_ERR_FORMAT, "tensor 'x': shape[0] is 1.8446744073709552e+19, expected"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[9007199254740993],\"data_offsets\":[0,16]") "}",
     16, TFM_ERR_FORMAT, "tensor 'x': shape[0] is 9007199254740992, expected"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]") "}", 16,
     TFM_ERR_FORMAT, "tensor 'x': shape[0] is a string, expected a non-negative integer"},
    {"{" T("x", "\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]") "}", 4,
     TFM_ERR_FORMAT, "tensor 'x': shape[0] is a boolean"},
    {"{" T("x", F32_4("[0,16.5]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets[1] is 16.5, expected a non-negative integer"},
    {"{" T("x", F32_4("[-16,0]")) "}", 16, TFM_ERR_FORMAT, "tensor 'x': data_offsets[0] is -16"},
    {"{" T("x", F32_4("[0,16,32]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets is an array of other than 2 items, expected [begin, end]"},
    {"{" T("x", F32_4("[16]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets is an array of other than 2 items"},
    {"{" T("x", F32_4("\"0,16\"")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets is a string, expected [begin, end]"},
    {"{" T("x", F32_4("[0,\"16\"]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets[1] is a string"},
    {"{" T("x", F32_4("[0,1e20]")) "}", 16, TFM_ERR_FORMAT,
     "tensor 'x': data_offsets[1] is 1e+20, expected"},
    /* the header as a whole */
    {"[1,2]", 0, TFM_ERR_FORMAT, "header is a JSON array, expected a JSON object"},
    {"\"hello\"", 0, TFM_ERR_FORMAT, "header is a string, expected a JSON object"},
    {"null", 0, TFM_ERR_FORMAT, "header is null, expected"},
    {"{nope", 0, TFM_ERR_FORMAT, "header is not valid JSON: error near byte "},
    {"{\"x\":", 0, TFM_ERR_FORMAT, "header is not valid JSON"},
    {"{\"a\":1,}", 0, TFM_ERR_FORMAT, "header is not valid JSON"},
    {"{} x", 0, TFM_ERR_FORMAT, "header has text after its JSON value, at byte 3 of 4"},
    {"{}{}", 0, TFM_ERR_FORMAT, "header has text after its JSON value, at byte 2 of 4"},
    {"", 0, TFM_ERR_FORMAT, "header is empty: expected a JSON object"},
    {"   ", 0, TFM_ERR_FORMAT, "header is not valid JSON"},
    {"{\"\xff\":1}", 0, TFM_ERR_FORMAT,
     "header is not valid UTF-8: bad byte 0xff at byte 2 of the header"},
    {"{\"\xc0\xaf\":1}", 0, TFM_ERR_FORMAT, "header is not valid UTF-8"},  /* overlong '/' */
    {"{\"\xed\xa0\x80\":1}", 0, TFM_ERR_FORMAT, "header is not valid UTF-8"}, /* surrogate */
    {"{\"a\x01\":1}", 0, TFM_ERR_FORMAT, "header holds the control byte 0x01 at byte 3"},
    {"{\"a\\u0000b\":{}}", 0, TFM_ERR_FORMAT,
     "header holds \\u0000 (a NUL character) at byte 3"},
    {"{\"__metadata__\":{\"k\":\"v\\\\\\u0000\"}}", 0, TFM_ERR_FORMAT, "header holds \\u0000"},
    {"{\"a\\ud800\":{}}", 0, TFM_ERR_FORMAT, "header is not valid JSON"}, /* lone surrogate */
    /* faults right after what the string scan skips: escapes, UTF-8 */
    {"{\"a\\n\xff\":1}", 0, TFM_ERR_FORMAT,
     "header is not valid UTF-8: bad byte 0xff at byte 5 of the header"},
    {"{\"\\t\xc3\xa9\x01\":1}", 0, TFM_ERR_FORMAT,
     "header holds the control byte 0x01 at byte 6"},
    {"{\"a\\\"\\u0000\":1}", 0, TFM_ERR_FORMAT, "header holds \\u0000 (a NUL character) at byte 5"},
    {"{\"\\\\\\\\\\u0000\":1}", 0, TFM_ERR_FORMAT,
     "header holds \\u0000 (a NUL character) at byte 6"},
    {"{\"\xc3\xa9\\\x01\":1}", 0, TFM_ERR_FORMAT, "header holds the control byte 0x01 at byte 5"},
};

/* Each bad case fails with its status and message, from memory and from a
 * file, and leaves *out NULL. */
static void test_validation(void)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t size;
        unsigned char *bytes = make_file(c->json, 0, c->data_size, &size);
        tfm_safetensors *f = (tfm_safetensors *)&size; /* must be reset to NULL */
        tfm_error err = {0};
        tfm_status st = tfm_safetensors_parse(bytes, size, &f, &err);
        CHECK_MSG(st == c->status && f == NULL, "case %zu: status %d: %s", i, st, err.msg);
        CHECK_MSG(err.status == st && strncmp(err.msg, c->msg, strlen(c->msg)) == 0,
                  "case %zu: got \"%s\", want \"%s\"", i, err.msg, c->msg);
        tfm_safetensors_free(f == (tfm_safetensors *)&size ? NULL : f);

        const char *path = tmp_path("bad.safetensors");
        CHECK(write_whole(path, bytes, size));
        tfm_error ferr = {0};
        CHECK(tfm_safetensors_open(path, &f, &ferr) == c->status && f == NULL);
        CHECK_MSG(strcmp(ferr.msg, err.msg) == 0, "case %zu: %s", i, ferr.msg);
        free(bytes);
    }
}

/* What the reference accepts and we must too: other fields in a tensor,
 * whitespace around the JSON, zero-size tensors anywhere, an escaped
 * backslash before "u0000", a name of escapes. */
static void test_accepts(void)
{
    static const struct {
        const char *json;
        size_t data_size;
        const char *name;
    } cases[] = {
        {"{" T("x", F32_4("[0,16]") ",\"extra\":[1,{}]") "}", 16, "x"},
        {" \n\t{" T("x", F32_4("[0,16]")) "}\r\n ", 16, "x"},
        {"{" T("z", "\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]") ","
         T("x", F32_4("[0,16]")) ","
         T("e", "\"dtype\":\"I64\",\"shape\":[3,0],\"data_offsets\":[16,16]") "}",
         16, "x"},
        {"{" T("a\\\\u0000", F32_4("[0,16]")) "}", 16, "a\\u0000"},
        {"{" T("\\u00e9\\n\\\"\\ud83c\\udf0d", F32_4("[0,16]")) "}", 16,
         "\xc3\xa9\n\"\xf0\x9f\x8c\x8d"},
        {"{" T("x", "\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0.0,1.6e1]") "}", 16, "x"},
        {"{\"__metadata__\":{}," T("x", F32_4("[0,16]")) "}", 16, "x"},
        {"{" T("", F32_4("[0,16]")) "}", 16, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size;
        unsigned char *bytes = make_file(cases[i].json, 0, cases[i].data_size, &size);
        tfm_safetensors *f = NULL;
        tfm_error err;
        CHECK_MSG(tfm_safetensors_parse(bytes, size, &f, &err) == TFM_OK, "case %zu: %s", i,
                  err.msg);
        if (f) {
            size_t index;
            CHECK_MSG(tfm_safetensors_find(f, cases[i].name, &index), "case %zu", i);
            int64_t s4[1] = {4};
            const float *x = NULL;
            CHECK(tfm_safetensors_get(f, cases[i].name, TFM_F32, 1, s4, (const void **)&x,
                                      &err) == TFM_OK);
        }
        tfm_safetensors_free(f);
        free(bytes);
    }
}

/* Header lengths that point past the end, or past the format's limit. */
static void test_header_length(void)
{
    tfm_error err;
    tfm_safetensors *f = NULL;
    unsigned char bytes[4096] = {0};
    uint64_t n = 12345678901ULL;
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(n >> (8 * i));
    CHECK(tfm_safetensors_parse(bytes, sizeof bytes, &f, &err) == TFM_ERR_FORMAT && !f);
    CHECK_MSG(strstr(err.msg, "header length 12345678901 exceeds the file size 4096") == err.msg,
              "%s", err.msg);
    memset(bytes, 0xff, 8);
    CHECK(tfm_safetensors_parse(bytes, sizeof bytes, &f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "header length 18446744073709551615 exceeds") == err.msg, "%s",
              err.msg);
    /* one byte more than the file holds */
    size_t size;
    unsigned char *file = make_file("{}", 6, 0, &size);
    file[0]++;
    CHECK(tfm_safetensors_parse(file, size, &f, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "header length 9 exceeds the file size 16") == err.msg, "%s",
              err.msg);
    free(file);
    for (size_t cut = 0; cut < 8; cut++) {
        CHECK(tfm_safetensors_parse(bytes, cut, &f, &err) == TFM_ERR_FORMAT && !f);
        char want[128];
        snprintf(want, sizeof want, "file is truncated: it holds %zu bytes", cut);
        CHECK_MSG(strstr(err.msg, want) == err.msg, "%s", err.msg);
    }
    CHECK(tfm_safetensors_parse(NULL, 0, &f, &err) == TFM_ERR_FORMAT);
    CHECK(tfm_safetensors_parse(NULL, 5, &f, &err) == TFM_ERR_ARG);

    /* over the 16 MiB limit, in a sparse file that really is that long */
    const char *path = tmp_path("huge_header.safetensors");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    CHECK(fd >= 0);
    if (fd < 0) return;
    n = TFM_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(n >> (8 * i));
    CHECK(write(fd, bytes, 8) == 8);
    CHECK(ftruncate(fd, (off_t)(8 + n + 16)) == 0);
    close(fd);
    CHECK(tfm_safetensors_open(path, &f, &err) == TFM_ERR_FORMAT && !f);
    CHECK_MSG(strstr(err.msg, "header length 16777217 exceeds the limit of 16777216 bytes") ==
                  err.msg,
              "%s", err.msg);
    unlink(path);
}

/* A header is refused before cJSON builds it when it holds more values
 * than any model needs, or a shape of more than 64 dimensions: a header
 * of "shape":[0,0,0,...] would otherwise cost some 70 bytes per zero. */
static void test_header_size_limits(void)
{
    tfm_error err;
    tfm_safetensors *f = NULL;
    for (int variant = 0; variant < 4; variant++) {
        /* 0: just under the value limit (a valid file, if a strange one);
         * 1: one over it; 2: 64 dimensions; 3: 65 */
        /* the header below holds 14 values besides the zeros */
        size_t zeros = variant == 0   ? TFM_SAFETENSORS_MAX_VALUES - 14
                       : variant == 1 ? TFM_SAFETENSORS_MAX_VALUES - 13
                                      : (size_t)(variant == 2 ? 64 : 65);
        tfm_buf json;
        tfm_buf_init(&json);
        bool ok = tfm_buf_printf(&json, "{\"t\":{\"dtype\":\"F32\",\"shape\":[") == TFM_OK;
        for (size_t i = 0; i < zeros && ok; i++)
            ok = tfm_buf_append(&json, i ? ",0" : "0", i ? 2 : 1) == TFM_OK;
        CHECK(ok);
        CHECK(tfm_buf_printf(&json, "],\"data_offsets\":[0,0]},\"u\":{\"dtype\":\"F32\","
                                    "\"shape\":[1],\"data_offsets\":[0,4]}}") == TFM_OK);
        size_t size;
        unsigned char *file = make_file(json.data, 0, 4, &size);
        tfm_status st = tfm_safetensors_parse(file, size, &f, &err);
        if (variant == 0) {
            /* a shape this long is allowed only within the dimension limit */
            CHECK_MSG(st == TFM_ERR_FORMAT && strstr(err.msg, "dimensions"), "%s", err.msg);
        } else if (variant == 1) {
            CHECK_MSG(st == TFM_ERR_FORMAT && strstr(err.msg, "header holds more than 262144 "
                                                               "JSON values"),
                      "%s", err.msg);
        } else if (variant == 2) {
            CHECK_MSG(st == TFM_OK, "%s", err.msg);
        } else {
            CHECK_MSG(st == TFM_ERR_FORMAT &&
                          strstr(err.msg, "tensor 't': shape has 65 dimensions, more than the "
                                          "64 allowed"),
                      "%s", err.msg);
        }
        tfm_safetensors_free(f);
        f = NULL;
        free(file);
        tfm_buf_free(&json);
    }
    /* commas and brackets inside strings are not values */
    size_t size;
    unsigned char *file = make_file("{\"__metadata__\":{\"k\":\"[,{,\\\",[\"}}", 0, 0, &size);
    CHECK_MSG(tfm_safetensors_parse(file, size, &f, &err) == TFM_OK, "%s", err.msg);
    CHECK(f && strcmp(tfm_safetensors_metadata(f, "k"), "[,{,\",[") == 0);
    tfm_safetensors_free(f);
    free(file);
}

int main(void)
{
    test_tmpdir_init("test_safetensors_header");
    RUN(test_validation);
    RUN(test_accepts);
    RUN(test_header_length);
    RUN(test_header_size_limits);
    CHECK_DONE();
}
