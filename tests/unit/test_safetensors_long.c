/* test_safetensors_long.c - long metadata values (a model's vocabulary),
 * which the reader leaves out of the header's parse and reads when asked
 * for: they come back exactly (escapes, UTF-8, beside short values and
 * tensors), a fault in one is reported when it is asked for and names its
 * byte in the header, a JSON error after one names the right byte, and
 * long strings that are not metadata values are what they were. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/io.h"
#include "tfm/safetensors.h"

/* Longer than the reader's threshold (64 KB). */
#define LONG_BYTES 70000

/* A safetensors file of header text json and one F32 tensor "x" of 4
 * elements (its entry is json's to give), in *size bytes. */
static unsigned char *file_of(const char *json, size_t *size)
{
    const size_t n = strlen(json);
    *size = 8 + n + 16;
    unsigned char *buf = calloc(1, *size);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, json, n);
    return buf;
}

/* The JSON text of a header whose "__metadata__" holds "short": "s" and
 * "long": the JSON string body body, then tensor x; after is put after the
 * long value's closing quote (normally ""). */
static char *header_with(const char *body, const char *after)
{
    static const char x[] = ",\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    size_t n = strlen(body) + strlen(after) + sizeof x + 64;
    char *json = malloc(n);
    snprintf(json, n, "{\"__metadata__\":{\"short\":\"s\",\"long\":\"%s\"%s}%s", body, after, x);
    return json;
}

/* A body of LONG_BYTES plain letters; at holds it. */
static char *plain_body(void)
{
    char *body = malloc(LONG_BYTES + 1);
    for (size_t i = 0; i < LONG_BYTES; i++) body[i] = (char)('a' + i % 26);
    body[LONG_BYTES] = 0;
    return body;
}

/* The byte of the header where the long value's body starts. */
static size_t body_start(void)
{
    return strlen("{\"__metadata__\":{\"short\":\"s\",\"long\":\"");
}

/* Opens the file of header_with(body, "") (a failed check for case c when
 * it does not open); *buf holds the file, to free after the result. */
static tfm_safetensors *parse_body(const char *body, size_t c, unsigned char **buf)
{
    char *json = header_with(body, "");
    size_t size;
    *buf = file_of(json, &size);
    free(json);
    tfm_safetensors *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_safetensors_parse(*buf, size, &f, &err) == TFM_OK, "case %zu: %s", c, err.msg);
    return f;
}

/* Written by the writer, read back: the same text, by key and by listing,
 * and the tensor beside it. */
static void test_round_trip(void)
{
    /* every kind of character JSON escapes, UTF-8 of 2, 3 and 4 bytes */
    static const char unit[] = "piece\t-1.5\tnormal\n\xe2\x96\x81\xc3\xa9t\xc3\xa9 \"q\" \\ /"
                               "\xf0\x9f\x8c\x8d\x01\x1f end\n";
    size_t n_units = LONG_BYTES / (sizeof unit - 1) + 1;
    char *value = malloc(n_units * (sizeof unit - 1) + 1);
    value[0] = 0;
    for (size_t i = 0; i < n_units; i++) strcat(value, unit);

    tfm_error err;
    tfm_safetensors_writer *w = tfm_safetensors_writer_create();
    const float data[4] = {1, 2, 3, 4};
    const int64_t shape[1] = {4};
    CHECK(tfm_safetensors_writer_add_metadata(w, "format", "test", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "vocab", value, &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_metadata(w, "after", "x", &err) == TFM_OK);
    CHECK(tfm_safetensors_writer_add_tensor(w, "t", TFM_F32, 1, shape, data, &err) == TFM_OK);
    char *buf = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&buf, &size);
    CHECK(tfm_safetensors_write_stream(w, fp, &err) == TFM_OK);
    fclose(fp);
    tfm_safetensors_writer_free(w);

    tfm_safetensors *f = NULL;
    CHECK_MSG(tfm_safetensors_parse(buf, size, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) {
        CHECK(tfm_safetensors_has_metadata(f, "vocab") && !tfm_safetensors_has_metadata(f, "x"));
        const char *got = NULL;
        CHECK(tfm_safetensors_metadata_get(f, "vocab", &got, &err) == TFM_OK);
        CHECK(got && strcmp(got, value) == 0);
        CHECK(tfm_safetensors_metadata(f, "vocab") == got); /* read once */
        CHECK(strcmp(tfm_safetensors_metadata(f, "format"), "test") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "after"), "x") == 0);
        CHECK(tfm_safetensors_metadata_get(f, "none", &got, &err) == TFM_OK && got == NULL);
        CHECK(tfm_safetensors_metadata_count(f) == 3);
        CHECK(strcmp(tfm_safetensors_metadata_key(f, 1), "vocab") == 0 &&
              strcmp(tfm_safetensors_metadata_value(f, 1), value) == 0);
        const float *x = NULL;
        CHECK(tfm_safetensors_get(f, "t", TFM_F32, 1, shape, (const void **)&x, &err) ==
                  TFM_OK &&
              x[3] == 4);
    }
    tfm_safetensors_free(f);

    /* a file whose long value is never asked for frees cleanly */
    CHECK(tfm_safetensors_parse(buf, size, &f, &err) == TFM_OK);
    tfm_safetensors_free(f);
    free(buf);
    free(value);
}

/* A fault inside a long value: the file opens, the value is NULL, and
 * _get names the fault and its byte in the header. */
static void test_faults(void)
{
    static const struct {
        size_t at;         /* where in the body the fault is put */
        const char *fault; /* its bytes */
        const char *msg;   /* the message, up to " at byte" */
        size_t byte_shift; /* the byte named, from the fault's */
    } cases[] = {
        {100, "\xff", "header is not valid UTF-8: bad byte 0xff", 0},
        {30000, "\x02", "header holds the control byte 0x02", 0},
        {69990, "\\u0000", "header holds \\u0000 (a NUL character)", 0},
        {5, "\\x", "header is not valid JSON: error near byte", 0},
        /* half a surrogate pair, bad digits, an escape cut by the quote */
        {200, "\\ud83dabcdef", "header is not valid JSON: error near byte", 0},
        {210, "\\ud83d\\u0041", "header is not valid JSON: error near byte", 0},
        {300, "\\ude00", "header is not valid JSON: error near byte", 0},
        {400, "\\u12g4", "header is not valid JSON: error near byte", 0},
        {LONG_BYTES - 4, "\\u12", "header is not valid JSON: error near byte", 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *body = plain_body();
        memcpy(body + cases[c].at, cases[c].fault, strlen(cases[c].fault));
        unsigned char *buf;
        tfm_safetensors *f = parse_body(body, c, &buf);
        tfm_error err;
        if (f) {
            CHECK(strcmp(tfm_safetensors_metadata(f, "short"), "s") == 0);
            CHECK(tfm_safetensors_metadata(f, "long") == NULL);
            CHECK(tfm_safetensors_metadata_value(f, 1) == NULL);
            const char *got = "unset";
            CHECK(tfm_safetensors_metadata_get(f, "long", &got, &err) == TFM_ERR_FORMAT &&
                  got == NULL);
            CHECK_MSG(strncmp(err.msg, cases[c].msg, strlen(cases[c].msg)) == 0, "case %zu: %s",
                      c, err.msg);
            /* the byte: the fault's, in the header (a bad escape: its
             * backslash's) */
            char want[64];
            snprintf(want, sizeof want, " %zu", body_start() + cases[c].at + cases[c].byte_shift);
            CHECK_MSG(strstr(err.msg, want) != NULL, "case %zu: %s", c, err.msg);
            tfm_safetensors_free(f);
        }
        free(buf);
        free(body);
    }
}

/* Escapes written by hand, of every kind, come back as the bytes they
 * stand for: a surrogate pair as one 4-byte character, the other
 * backslash-u escapes as UTF-8 of 1, 2 and 3 bytes at the edges of each
 * length. */
static void test_escapes(void)
{
    static const struct {
        const char *escape, *bytes;
    } cases[] = {
        {"\\ud83d\\ude00", "\xF0\x9F\x98\x80"},
        {"\\udbff\\udfff", "\xF4\x8F\xBF\xBF"},
        {"\\uD800\\uDC00", "\xF0\x90\x80\x80"},
        {"\\u0041\\u007e", "A~"},
        {"\\u0080\\u07FF", "\xC2\x80\xDF\xBF"},
        {"\\u0800\\u20ac\\uFFFF", "\xE0\xA0\x80\xE2\x82\xAC\xEF\xBF\xBF"},
        {"\\/\\b\\f\\n\\r\\t\\\"\\\\", "/\b\f\n\r\t\"\\"},
        {"\\u0001\\u001f", "\x01\x1f"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* 1,000 a's, the escape, then b's past the long threshold */
        const size_t head = 1000, tail = LONG_BYTES;
        size_t elen = strlen(cases[c].escape), blen = strlen(cases[c].bytes);
        char *body = malloc(head + elen + tail + 1), *want = malloc(head + blen + tail + 1);
        memset(body, 'a', head);
        memcpy(body + head, cases[c].escape, elen);
        memset(body + head + elen, 'b', tail);
        body[head + elen + tail] = 0;
        memset(want, 'a', head);
        memcpy(want + head, cases[c].bytes, blen);
        memset(want + head + blen, 'b', tail);
        want[head + blen + tail] = 0;
        unsigned char *buf;
        tfm_safetensors *f = parse_body(body, c, &buf);
        tfm_error err;
        const char *got = NULL;
        CHECK_MSG(f && tfm_safetensors_metadata_get(f, "long", &got, &err) == TFM_OK,
                  "case %zu: %s", c, err.msg);
        CHECK_MSG(got && strcmp(got, want) == 0, "case %zu: the value differs", c);
        tfm_safetensors_free(f);
        free(buf);
        free(want);
        free(body);
    }
}

/* What is not a long metadata value is read as before: a JSON error after a
 * long value names the right byte; a long string in an array or a long key
 * is parsed at open (and its faults found then); a long dtype is refused. */
static void test_others(void)
{
    char *body = plain_body();
    tfm_error err;
    tfm_safetensors *f = NULL;
    size_t size;

    /* an error after the long value: its byte in the header, not in the
     * shortened text cJSON saw; the same byte after the value as with a
     * short value (cJSON stops at the 'o' of "nope") */
    for (size_t len = 10; len <= LONG_BYTES; len += LONG_BYTES - 10) {
        const char keep = body[len];
        body[len] = 0;
        char *json = header_with(body, ",nope");
        body[len] = keep;
        unsigned char *buf = file_of(json, &size);
        CHECK(tfm_safetensors_parse(buf, size, &f, &err) == TFM_ERR_FORMAT && f == NULL);
        char want[80];
        snprintf(want, sizeof want, "error near byte %zu of %zu", body_start() + len + 3,
                 strlen(json));
        CHECK_MSG(strstr(err.msg, want) != NULL, "%s (want %s)", err.msg, want);
        free(buf);
        free(json);
    }

    /* in an array: parsed at open, so a fault in it fails the open */
    body[500] = '\x03';
    size_t n = strlen(body) + 200;
    char *json = malloc(n);
    snprintf(json, n,
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16],\"extra\":[\"%s\"]}}",
             body);
    unsigned char *buf = file_of(json, &size);
    CHECK(tfm_safetensors_parse(buf, size, &f, &err) == TFM_ERR_FORMAT && f == NULL);
    CHECK_MSG(strstr(err.msg, "control byte 0x03") != NULL, "%s", err.msg);
    free(buf);
    body[500] = 'a';
    snprintf(json, n,
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16],\"extra\":[\"%s\"]}}",
             body);
    buf = file_of(json, &size);
    CHECK_MSG(tfm_safetensors_parse(buf, size, &f, &err) == TFM_OK, "%s", err.msg);
    tfm_safetensors_free(f);
    free(buf);
    free(json);

    /* a long key: a tensor's name, parsed at open */
    n = strlen(body) + 200;
    json = malloc(n);
    snprintf(json, n, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", body);
    buf = file_of(json, &size);
    CHECK_MSG(tfm_safetensors_parse(buf, size, &f, &err) == TFM_OK, "%s", err.msg);
    size_t index;
    CHECK(f && tfm_safetensors_find(f, body, &index));
    tfm_safetensors_free(f);
    free(buf);

    /* values that cJSON unescapes into the bytes near the mark are text */
    snprintf(json, n,
             "{\"__metadata__\":{\"a\":\"\\u00010\",\"b\":\"\\u00ff0\",\"long\":\"%s\"},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             body);
    buf = file_of(json, &size);
    CHECK_MSG(tfm_safetensors_parse(buf, size, &f, &err) == TFM_OK, "%s", err.msg);
    if (f) {
        CHECK(strcmp(tfm_safetensors_metadata(f, "a"), "\x01" "0") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "b"), "\xc3\xbf" "0") == 0);
        CHECK(strcmp(tfm_safetensors_metadata(f, "long"), body) == 0);
        tfm_safetensors_free(f);
    }
    free(buf);

    /* a long dtype is no dtype */
    snprintf(json, n, "{\"x\":{\"dtype\":\"%s\",\"shape\":[4],\"data_offsets\":[0,16]}}", body);
    buf = file_of(json, &size);
    CHECK(tfm_safetensors_parse(buf, size, &f, &err) == TFM_ERR_FORMAT && f == NULL);
    CHECK_MSG(strstr(err.msg, "tensor 'x' has a dtype of 65536 bytes or more") == err.msg, "%s",
              err.msg);
    free(buf);
    free(json);
    free(body);
}

int main(void)
{
    RUN(test_round_trip);
    RUN(test_faults);
    RUN(test_escapes);
    RUN(test_others);
    CHECK_DONE();
}
