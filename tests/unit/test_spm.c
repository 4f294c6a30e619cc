/* test_spm.c - SentencePiece model files (tfm/spm.h) without spm_train:
 * models written here field by field in protobuf's wire format, so that
 * each test says exactly what the file holds.  The protobuf reader's edge
 * cases and every corrupt file a clear error; a tiny unigram and a tiny BPE
 * model whose segmentations are worked out by hand; a precompiled character
 * map built unit by unit; Decode(Encode(x)) == the normalized x.
 * (tests/cli/test_spm.sh checks real models against spm_encode.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/spm.h"

#define SP "\xe2\x96\x81" /* U+2581 */

/* ---- a protobuf writer ---------------------------------------------------------- */

static void put_varint(tfm_buf *b, uint64_t v)
{
    do {
        unsigned char c = v & 0x7f;
        v >>= 7;
        if (v) c |= 0x80;
        tfm_buf_putc(b, (char)c);
    } while (v);
}

static void put_tag(tfm_buf *b, unsigned field, unsigned wire) { put_varint(b, field << 3 | wire); }

static void put_bytes(tfm_buf *b, unsigned field, const void *data, size_t len)
{
    put_tag(b, field, 2);
    put_varint(b, len);
    tfm_buf_append(b, data, len);
}

static void put_str(tfm_buf *b, unsigned field, const char *s) { put_bytes(b, field, s, strlen(s)); }

static void put_int(tfm_buf *b, unsigned field, int64_t v)
{
    put_tag(b, field, 0);
    put_varint(b, (uint64_t)v);
}

static void put_float(tfm_buf *b, unsigned field, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_tag(b, field, 5);
    for (int i = 0; i < 4; i++) tfm_buf_putc(b, (char)(u >> (8 * i)));
}

static void put_piece(tfm_buf *b, const char *text, float score, int type)
{
    tfm_buf p;
    tfm_buf_init(&p);
    put_str(&p, 1, text);
    put_float(&p, 2, score);
    if (type != 1) put_int(&p, 3, type);
    put_bytes(b, 1, p.data, p.len);
    tfm_buf_free(&p);
}

/* trainer_spec with model_type and byte_fallback; normalizer_spec with
 * the given map (NULL: identity) and defaults otherwise. */
static void put_specs(tfm_buf *b, int model_type, bool byte_fallback, const tfm_buf *map)
{
    tfm_buf t;
    tfm_buf_init(&t);
    put_int(&t, 3, model_type);
    if (byte_fallback) put_int(&t, 35, 1);
    put_int(&t, 43, -1); /* pad_id, a ten-byte varint */
    put_bytes(b, 2, t.data, t.len);
    tfm_buf_clear(&t);
    put_str(&t, 1, map ? "custom" : "identity");
    if (map) put_bytes(&t, 2, map->data, map->len);
    put_bytes(b, 3, t.data, t.len);
    tfm_buf_free(&t);
}

/* The tiny unigram model:
 *   0 <unk>  1 <s>  2 </s>  3 ▁ -2  4 a -3  5 b -3  6 ab -2  7 ▁ab -3
 *   8 c -4   9 <u> (user)  10 abc -100 (unused) */
static void tiny_unigram(tfm_buf *b, const tfm_buf *map)
{
    tfm_buf_clear(b);
    put_piece(b, "<unk>", 0, 2);
    put_piece(b, "<s>", 0, 3);
    put_piece(b, "</s>", 0, 3);
    put_piece(b, SP, -2, 1);
    put_piece(b, "a", -3, 1);
    put_piece(b, "b", -3, 1);
    put_piece(b, "ab", -2, 1);
    put_piece(b, SP "ab", -3, 1);
    put_piece(b, "c", -4, 1);
    put_piece(b, "<u>", 0, 4);
    put_piece(b, "abc", -100, 5);
    put_specs(b, 1, false, map);
}

static tfm_spm *parse_ok(const tfm_buf *b)
{
    tfm_spm *m = NULL;
    tfm_error err = {0};
    tfm_status s = tfm_spm_parse(b->data, b->len, &m, &err);
    CHECK_MSG(s == TFM_OK, "%s", err.msg);
    return m;
}

/* Parsing fails with status want and a message containing `words`. */
static void parse_fails(const void *data, size_t len, tfm_status want, const char *words)
{
    tfm_spm *m = (tfm_spm *)1;
    tfm_error err = {0};
    tfm_status s = tfm_spm_parse(data, len, &m, &err);
    CHECK_MSG(s == want, "status %d, want %d (%s)", s, want, err.msg);
    CHECK(m == NULL);
    CHECK_MSG(strstr(err.msg, words) != NULL, "'%s' lacks '%s'", err.msg, words);
}

static void encode_is(tfm_spm_encoder *e, const char *text, const char *ids, const char *pieces)
{
    tfm_ids out;
    tfm_ids_init(&out);
    tfm_buf got, p;
    tfm_buf_init(&got);
    tfm_buf_init(&p);
    tfm_error err = {0};
    CHECK_MSG(tfm_spm_encode(e, text, strlen(text), &out, NULL, &err) == TFM_OK, "%s", err.msg);
    tfm_ids_format(out.data, out.len, &got);
    tfm_buf_append(&got, "", 0);
    CHECK_MSG(strcmp(got.data, ids) == 0, "'%s': ids '%s', want '%s'", text, got.data, ids);
    CHECK(tfm_spm_encode_pieces(e, text, strlen(text), &p, NULL, &err) == TFM_OK);
    CHECK_MSG(strcmp(p.data, pieces) == 0, "'%s': pieces '%s', want '%s'", text, p.data, pieces);
    tfm_ids_free(&out);
    tfm_buf_free(&got);
    tfm_buf_free(&p);
}

static void decode_is(const tfm_spm *m, const int32_t *ids, size_t n, const char *want)
{
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_error err = {0};
    CHECK_MSG(tfm_spm_decode(m, ids, n, &out, &err) == TFM_OK, "%s", err.msg);
    CHECK_MSG(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,
              "decoded '%.*s', want '%s'", (int)out.len, out.data ? out.data : "", want);
    tfm_buf_free(&out);
}

/* ---- the tests ------------------------------------------------------------------ */

static void test_tiny_unigram(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    tiny_unigram(&b, NULL);
    CHECK(tfm_spm_sniff(b.data, b.len));
    tfm_spm *m = parse_ok(&b);
    if (!m) return;
    CHECK(tfm_spm_type(m) == TFM_SPM_UNIGRAM);
    CHECK(tfm_spm_size(m) == 11);
    CHECK(tfm_spm_unk_id(m) == 0 && tfm_spm_bos_id(m) == 1 && tfm_spm_eos_id(m) == 2);
    CHECK(tfm_spm_pad_id(m) == -1);
    CHECK(tfm_spm_find(m, "ab", 2) == 6 && tfm_spm_find(m, "zz", 2) == -1);
    CHECK(tfm_spm_piece_type_of(m, 9) == TFM_SPM_USER_DEFINED);
    CHECK(tfm_spm_score(m, 7) == -3.0f);
    size_t len;
    CHECK(strcmp(tfm_spm_piece(m, 7, &len), SP "ab") == 0 && len == 5);
    CHECK(tfm_spm_piece(m, 11, NULL) == NULL && tfm_spm_piece(m, -1, NULL) == NULL);
    size_t size;
    CHECK(tfm_spm_bytes(m, &size) != NULL && size == b.len);
    tfm_spm_encoder *e;
    tfm_error err;
    CHECK(tfm_spm_encoder_create(m, &e, &err) == TFM_OK);
    /* "▁ab" -3 beats "▁"+"ab" -4; "abc": "ab"+"c" -6 (abc is unused); x is
     * unknown: min normal score -4 minus 10; two unknowns in a row are one. */
    encode_is(e, "ab", "7", SP "ab");
    encode_is(e, "  ab   abc ", "7 7 8", SP "ab " SP "ab c");
    encode_is(e, "axyb", "3 4 0 5", SP " a xy b");
    encode_is(e, "a<u>b", "3 4 9 5", SP " a <u> b");
    encode_is(e, "", "", "");
    encode_is(e, "   ", "", "");
    /* invalid UTF-8: a byte is U+FFFD to the normalizer, unknown here */
    tfm_ids ids;
    tfm_ids_init(&ids);
    size_t bad = 0;
    CHECK(tfm_spm_encode(e, "a\xff\xfe", 3, &ids, &bad, &err) == TFM_OK);
    CHECK(bad == 2 && ids.len == 3 && ids.data[2] == 0);
    tfm_buf norm;
    tfm_buf_init(&norm);
    CHECK(tfm_spm_normalize(e, " a  b ", 6, &norm, &err) == TFM_OK);
    CHECK(strcmp(norm.data, SP "a" SP "b") == 0);
    /* decoding: the dummy prefix goes, unknown is " ⁇ ", controls vanish */
    decode_is(m, (const int32_t[]){7, 7, 8}, 3, "ab abc");
    decode_is(m, (const int32_t[]){1, 3, 4, 0, 5, 2}, 6, "a \xE2\x81\x87 b");
    decode_is(m, (const int32_t[]){3, 3, 4}, 3, "a");
    decode_is(m, NULL, 0, "");
    tfm_buf out;
    tfm_buf_init(&out);
    CHECK(tfm_spm_decode(m, (const int32_t[]){3, 11}, 2, &out, &err) == TFM_ERR_RANGE);
    CHECK(strstr(err.msg, "id 11") != NULL);
    CHECK(tfm_spm_decode(m, (const int32_t[]){-1}, 1, &out, &err) == TFM_ERR_RANGE);
    /* pieces <-> ids; an unknown piece in a piece line is written as it is */
    CHECK(tfm_spm_pieces_to_ids(m, SP "ab  c <s>", strlen(SP "ab  c <s>"), &ids, &err) == TFM_OK);
    CHECK(ids.len == 3 && ids.data[0] == 7 && ids.data[1] == 8 && ids.data[2] == 1);
    CHECK(tfm_spm_pieces_to_ids(m, SP "ab zz", strlen(SP "ab zz"), &ids, &err) == TFM_ERR_FORMAT);
    CHECK(strstr(err.msg, "'zz'") != NULL);
    CHECK(tfm_spm_ids_to_pieces(m, (const int32_t[]){7, 0, 2}, 3, &out, &err) == TFM_OK);
    CHECK(strcmp(out.data, SP "ab <unk> </s>") == 0);
    const char *pl = SP " a xy " SP "ab <unk> " SP "zz";
    CHECK(tfm_spm_decode_pieces(m, pl, strlen(pl), &out, &err) == TFM_OK);
    CHECK_MSG(strcmp(out.data, "axy ab \xE2\x81\x87 " SP "zz") == 0, "%s", out.data);
    tfm_buf_free(&out);
    tfm_buf_free(&norm);
    tfm_ids_free(&ids);
    tfm_spm_encoder_free(e);
    tfm_spm_free(m);
    tfm_buf_free(&b);
}

/* A BPE model: merges by score; "▁ab" is reached through "ab". The unused
 * piece "bc" is merged and then split back. */
static void test_tiny_bpe(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_piece(&b, "ab", -1, 1);      /* 1 */
    put_piece(&b, SP "ab", -2, 1);   /* 2 */
    put_piece(&b, "bc", -0.5f, 5);   /* 3, unused */
    put_piece(&b, SP, -3, 1);        /* 4 */
    put_piece(&b, "a", -4, 1);       /* 5 */
    put_piece(&b, "b", -5, 1);       /* 6 */
    put_piece(&b, "c", -6, 1);       /* 7 */
    put_specs(&b, 2, false, NULL);
    tfm_spm *m = parse_ok(&b);
    tfm_spm_encoder *e;
    tfm_error err;
    if (!m || tfm_spm_encoder_create(m, &e, &err) != TFM_OK) return;
    CHECK(tfm_spm_type(m) == TFM_SPM_BPE);
    encode_is(e, "ab", "2", SP "ab");
    encode_is(e, "ab ba", "2 4 6 5", SP "ab " SP " b a");
    /* b+c -> bc (unused, best score) first, so a and bc stay apart, then bc
     * splits back into b c */
    encode_is(e, "abc", "4 5 6 7", SP " a b c");
    encode_is(e, "x ab", "4 0 2", SP " x " SP "ab");
    tfm_spm_encoder_free(e);
    tfm_spm_free(m);
    tfm_buf_free(&b);
}

/* A precompiled map built unit by unit: "A" -> "x", "AB" -> "yz". */
static void tiny_map(tfm_buf *map)
{
    uint32_t units[0x44] = {0};
    units[0] = 1u << 10;                              /* root: children at 1 ^ c */
    units[0x40] = 1u << 10 | 1u << 8 | 0x41;          /* 'A', a leaf, children at 0x41 ^ c */
    units[0x41] = 1u << 31 | 0;                       /* value: "x" */
    units[0x03] = 1u << 10 | 1u << 8 | 0x42;          /* 'B' under 'A', children at 2 ^ c */
    units[0x02] = 1u << 31 | 2;                       /* value: "yz" */
    tfm_buf_clear(map);
    uint32_t size = sizeof units;
    for (int i = 0; i < 4; i++) tfm_buf_putc(map, (char)(size >> (8 * i)));
    for (size_t u = 0; u < sizeof units / 4; u++)
        for (int i = 0; i < 4; i++) tfm_buf_putc(map, (char)(units[u] >> (8 * i)));
    tfm_buf_append(map, "x\0yz\0", 5);
}

static void test_charsmap(void)
{
    tfm_buf map, b, norm;
    tfm_buf_init(&map);
    tfm_buf_init(&b);
    tfm_buf_init(&norm);
    tiny_map(&map);
    tiny_unigram(&b, &map);
    tfm_spm *m = parse_ok(&b);
    tfm_spm_encoder *e;
    tfm_error err;
    if (!m || tfm_spm_encoder_create(m, &e, &err) != TFM_OK) return;
    CHECK(tfm_spm_normalize(e, "AAB C A", 7, &norm, &err) == TFM_OK);
    CHECK_MSG(strcmp(norm.data, SP "xyz" SP "C" SP "x") == 0, "%s", norm.data);
    CHECK(tfm_spm_normalize(e, "<u>A", 4, &norm, &err) == TFM_OK); /* user symbols pass */
    CHECK_MSG(strcmp(norm.data, SP "<u>x") == 0, "%s", norm.data);
    CHECK(tfm_spm_normalize(e, "BA", 2, &norm, &err) == TFM_OK);
    CHECK_MSG(strcmp(norm.data, SP "Bx") == 0, "%s", norm.data);
    tfm_spm_encoder_free(e);
    tfm_spm_free(m);
    /* broken maps */
    tfm_buf bad;
    tfm_buf_init(&bad);
    tfm_buf_append(&bad, "\x10\0\0\0abc", 7); /* trie of 16 bytes in 3 */
    tiny_unigram(&b, &bad);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "precompiled_charsmap");
    tfm_buf_clear(&bad);
    tfm_buf_append(&bad, "\0\0", 2);
    tiny_unigram(&b, &bad);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "too short");
    /* a map whose offsets point anywhere is safe: every unit 0xFFFFFFFF */
    tfm_buf_clear(&bad);
    tfm_buf_append(&bad, "\x08\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff", 12);
    tiny_unigram(&b, &bad);
    m = parse_ok(&b);
    if (m && tfm_spm_encoder_create(m, &e, &err) == TFM_OK) {
        CHECK(tfm_spm_normalize(e, "ab\xff", 3, &norm, &err) == TFM_OK);
        tfm_spm_encoder_free(e);
    }
    tfm_spm_free(m);
    tfm_buf_free(&bad);
    tfm_buf_free(&map);
    tfm_buf_free(&b);
    tfm_buf_free(&norm);
}

/* Decode(Encode(x)) == the normalized x (U+2581 as space, the dummy
 * prefix gone), for any bytes, with a byte-fallback model.  (Not for a line
 * that starts with U+2581 itself: SentencePiece's decoder drops a leading
 * U+2581 of every piece until some text is written.) */
static void test_round_trip(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_piece(&b, "<s>", 0, 3);
    for (int i = 0; i < 256; i++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", i);
        put_piece(&b, t, 0, 6);
    }
    const char *normal[] = {SP, "a", "b", "th", SP "the", "e", "\xc3\xa9", "h", "t"};
    for (size_t i = 0; i < sizeof normal / sizeof *normal; i++)
        put_piece(&b, normal[i], -(float)i - 1, 1);
    put_specs(&b, 1, true, NULL);
    tfm_spm *m = parse_ok(&b);
    tfm_spm_encoder *e;
    tfm_error err;
    if (!m || tfm_spm_encoder_create(m, &e, &err) != TFM_OK) return;
    static const char *const lines[] = {
        "the bath", "  caf\xc3\xa9  th\xc3\xa9 ", "\xff\xfe\x80 zz \xe2\x96", "x \xe2\x96\x81\xe2\x96\x81 y",
        "\xf0\x9f\x98\x80 emoji", "tab\there", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong", "a",
    };
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_buf norm, dec, want;
    tfm_buf_init(&norm);
    tfm_buf_init(&dec);
    tfm_buf_init(&want);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        const char *x = lines[i];
        CHECK(tfm_spm_encode(e, x, strlen(x), &ids, NULL, &err) == TFM_OK);
        for (size_t k = 0; k < ids.len; k++) CHECK(ids.data[k] >= 0 && ids.data[k] < tfm_spm_size(m));
        CHECK(tfm_spm_decode(m, ids.data, ids.len, &dec, &err) == TFM_OK);
        CHECK(tfm_spm_normalize(e, x, strlen(x), &norm, &err) == TFM_OK);
        tfm_buf_clear(&want);
        tfm_buf_append(&want, "", 0);
        const char *p = norm.data, *end = norm.data + norm.len;
        if (norm.len >= 3 && memcmp(p, SP, 3) == 0) p += 3;
        while (p < end) {
            if (end - p >= 3 && memcmp(p, SP, 3) == 0) {
                tfm_buf_putc(&want, ' ');
                p += 3;
            } else {
                tfm_buf_putc(&want, *p++);
            }
        }
        CHECK_MSG(dec.len == want.len && memcmp(dec.data, want.data, dec.len) == 0,
                  "line %zu: '%s' came back as '%s'", i, want.data, dec.data);
    }
    tfm_ids_free(&ids);
    tfm_buf_free(&norm);
    tfm_buf_free(&dec);
    tfm_buf_free(&want);
    tfm_spm_encoder_free(e);
    tfm_spm_free(m);
    tfm_buf_free(&b);
}

/* Every corrupt file a clear error. */
static void test_corrupt(void)
{
    tfm_buf b, t;
    tfm_buf_init(&b);
    tfm_buf_init(&t);
    parse_fails("", 0, TFM_ERR_FORMAT, "empty");
    /* a tfm vocabulary, a safetensors header */
    const char *vocab = "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=4\n<pad>\t0\tcontrol\n";
    CHECK(!tfm_spm_sniff(vocab, strlen(vocab)));
    parse_fails(vocab, strlen(vocab), TFM_ERR_FORMAT, "not a SentencePiece model");
    const char st[] = "\x20\0\0\0\0\0\0\0{\"__metadata__\":{\"a\":\"b\"}}      ";
    CHECK(!tfm_spm_sniff(st, sizeof st - 1));
    tfm_spm *m = NULL;
    tfm_error err = {0};
    CHECK(tfm_spm_parse(st, sizeof st - 1, &m, &err) != TFM_OK && m == NULL && err.msg[0]);
    /* every truncation of a valid model fails cleanly or parses */
    tiny_unigram(&b, NULL);
    for (size_t n = 0; n < b.len; n++) {
        err.msg[0] = 0;
        tfm_status s = tfm_spm_parse(b.data, n, &m, &err);
        CHECK(s == TFM_OK ? m != NULL : (m == NULL && err.msg[0] != 0));
        tfm_spm_free(m);
    }
    /* a piece whose score is a varint */
    tfm_buf_clear(&b);
    tfm_buf_clear(&t);
    put_str(&t, 1, "<unk>");
    put_int(&t, 2, 5);
    put_bytes(&b, 1, t.data, t.len);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "piece 0: score");
    /* a length past the end */
    tfm_buf_clear(&b);
    put_tag(&b, 1, 2);
    put_varint(&b, 1000);
    tfm_buf_append(&b, "\x0a\x01x", 3);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "past the end");
    /* a varint of eleven bytes; a group */
    parse_fails("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, TFM_ERR_FORMAT, "varint");
    parse_fails("\x0b\x0c", 2, TFM_ERR_FORMAT, "group");
    parse_fails("\x00\x01", 2, TFM_ERR_FORMAT, "field number");
    /* pieces: invalid UTF-8, NaN and infinite scores, empty, NUL, bad type */
    struct {
        const char *text;
        size_t len;
        float score;
        int type;
        const char *words;
    } bad[] = {
        {"a\xff", 2, 0, 1, "not valid UTF-8"},
        {"a", 1, NAN, 1, "NaN"},
        {"a", 1, INFINITY, 1, "infinite"},
        {"", 0, 0, 1, "empty"},
        {"a\0b", 3, 0, 1, "NUL"},
        {"a", 1, 0, 9, "type 9"},
        {"<unk>", 5, 0, 1, "already defined"},
        {"<0x41>", 6, 0, 6, "byte_fallback is off"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tfm_buf_clear(&b);
        put_piece(&b, "<unk>", 0, 2);
        tfm_buf_clear(&t);
        put_bytes(&t, 1, bad[i].text, bad[i].len);
        put_float(&t, 2, bad[i].score);
        put_int(&t, 3, bad[i].type);
        if (i == 6) {
            tfm_buf_clear(&t);
            put_str(&t, 1, "<unk>");
            put_int(&t, 3, 3); /* control: reserved map, as the unknown one */
        }
        put_bytes(&b, 1, t.data, t.len);
        put_specs(&b, 1, false, NULL);
        parse_fails(b.data, b.len, TFM_ERR_FORMAT, bad[i].words);
    }
    /* no unknown piece, two of them; byte_fallback without its pieces */
    tfm_buf_clear(&b);
    put_piece(&b, "a", 0, 1);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "no unknown piece");
    put_piece(&b, "<unk>", 0, 2);
    put_piece(&b, "<unk2>", 0, 2);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "second unknown");
    tfm_buf_clear(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_specs(&b, 1, true, NULL);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "<0x00> is missing");
    /* word and char models are refused by name; an unknown type */
    tfm_buf_clear(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_specs(&b, 3, false, NULL);
    parse_fails(b.data, b.len, TFM_ERR_UNSUPPORTED, "word model");
    tfm_buf_clear(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_specs(&b, 7, false, NULL);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "model_type 7");
    /* trainer_spec as a varint */
    tfm_buf_clear(&b);
    put_piece(&b, "<unk>", 0, 2);
    put_int(&b, 2, 1);
    parse_fails(b.data, b.len, TFM_ERR_FORMAT, "trainer_spec");
    /* unknown fields of every wire type are skipped */
    tfm_buf_clear(&b);
    put_int(&b, 99, 12345);
    put_tag(&b, 98, 1);
    tfm_buf_append(&b, "12345678", 8);
    put_str(&b, 97, "skip me");
    put_float(&b, 96, 1.5f);
    put_piece(&b, "<unk>", 0, 2);
    put_specs(&b, 1, false, NULL);
    m = parse_ok(&b);
    CHECK(m && tfm_spm_size(m) == 1);
    tfm_spm_free(m);
    /* a file that cannot be read */
    CHECK(tfm_spm_load("/nonexistent/x.model", &m, &err) == TFM_ERR_IO && m == NULL);
    tfm_buf_free(&b);
    tfm_buf_free(&t);
}

/* A model parsed with the trie another parse built segments as that one,
 * and a trie unsafe to walk is refused, naming its unit. */
static void test_trie_kept(void)
{
    const char *root = getenv("ROOT");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/opus-mt/postnorm-swish-tiedall/source.spm",
             root ? root : ".");
    tfm_spm *m = NULL;
    tfm_error err;
    CHECK_MSG(tfm_spm_load(path, &m, &err) == TFM_OK, "%s", err.msg);
    if (!m) return;
    size_t size, n_units;
    const void *bytes = tfm_spm_bytes(m, &size);
    const int32_t *trie = tfm_spm_trie(m, &n_units);
    CHECK(n_units > 256);
    int32_t *units = malloc(n_units * 3 * sizeof *units);
    memcpy(units, trie, n_units * 3 * sizeof *units);
    tfm_spm *kept = NULL;
    CHECK_MSG(tfm_spm_parse_with_trie(bytes, size, units, n_units, &kept, &err) == TFM_OK, "%s",
              err.msg);
    tfm_spm_encoder *e0 = NULL, *e1 = NULL;
    CHECK(tfm_spm_encoder_create(m, &e0, &err) == TFM_OK);
    CHECK(kept && tfm_spm_encoder_create(kept, &e1, &err) == TFM_OK);
    static const char *const lines[] = {"Open the file", "  caf\xc3\xa9 -- %s files ",
                                        "\xf0\x9f\x98\x80 x", ""};
    tfm_ids a, b;
    tfm_ids_init(&a);
    tfm_ids_init(&b);
    for (size_t i = 0; e0 && e1 && i < sizeof lines / sizeof *lines; i++) {
        CHECK(tfm_spm_encode(e0, lines[i], strlen(lines[i]), &a, NULL, &err) == TFM_OK);
        CHECK(tfm_spm_encode(e1, lines[i], strlen(lines[i]), &b, NULL, &err) == TFM_OK);
        CHECK_MSG(a.len == b.len && memcmp(a.data, b.data, a.len * sizeof *a.data) == 0,
                  "line %zu segmented otherwise", i);
    }
    tfm_ids_free(&a);
    tfm_ids_free(&b);
    tfm_spm_encoder_free(e0);
    tfm_spm_encoder_free(e1);
    tfm_spm_free(kept);

    /* a base that would walk before the array, a check and a value out of
     * range: each refused with its unit */
    static const struct { size_t unit; int field; int32_t value; } bad[] = {
        {7, 0, -3}, {9, 1, INT32_MAX}, {11, 2, 1 << 30}, {0, 0, INT32_MAX - 10}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memcpy(units, trie, n_units * 3 * sizeof *units);
        units[3 * bad[k].unit + (size_t)bad[k].field] = bad[k].value;
        tfm_spm *x = (tfm_spm *)1;
        char want[64];
        snprintf(want, sizeof want, "the piece trie: unit %zu (", bad[k].unit);
        CHECK(tfm_spm_parse_with_trie(bytes, size, units, n_units, &x, &err) == TFM_ERR_FORMAT);
        CHECK_MSG(x == NULL && strstr(err.msg, want), "case %zu: %s", k, err.msg);
    }
    free(units);
    tfm_spm_free(m);
}

int main(void)
{
    RUN(test_tiny_unigram);
    RUN(test_tiny_bpe);
    RUN(test_charsmap);
    RUN(test_round_trip);
    RUN(test_corrupt);
    RUN(test_trie_kept);
    CHECK_DONE();
}
