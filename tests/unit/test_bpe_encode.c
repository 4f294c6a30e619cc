/* test_bpe_encode.c - BPE encoding and decoding (lib/text/bpe_encode.c,
 * bpe_decode.c) with small vocabularies built by hand, whose segmentations
 * were worked out on paper; the round trip decode(encode(x)) ==
 * normalize(x) over many scripts; BPE-dropout; long lines. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tfm/text.h"

#define M "\xE2\x96\x81" /* '▁' */

/* A vocabulary of the specials, the bytes, then the given pieces: a NULL
 * text ends the list.  Characters score 0, merges -1, -2, ... in order. */
typedef struct piece_spec {
    const char *text;
    float score;
    tfm_piece_type type;
} piece_spec;

static tfm_vocab *make_vocab(const piece_spec *pieces, tfm_norm_form form, bool fold)
{
    tfm_norm_params norm = tfm_norm_default_params();
    norm.form = form;
    norm.case_fold = fold;
    tfm_vocab *v = tfm_vocab_create(&norm);
    CHECK(v != NULL);
    for (int i = 0; v && pieces[i].text; i++) {
        int32_t id = tfm_vocab_add(v, pieces[i].text, strlen(pieces[i].text), pieces[i].score,
                                   pieces[i].type);
        CHECK_MSG(id >= 0, "adding '%s'", pieces[i].text);
    }
    return v;
}

/* Encodes line and checks its pieces, joined by spaces, are want; then
 * checks the round trip. */
static void expect_pieces(tfm_bpe *b, const tfm_vocab *v, const char *line, size_t len,
                          const char *want)
{
    tfm_ids ids;
    tfm_buf pieces, text, norm;
    tfm_ids_init(&ids);
    tfm_buf_init(&pieces);
    tfm_buf_init(&text);
    tfm_buf_init(&norm);
    tfm_error err = {0};
    CHECK_MSG(tfm_bpe_encode(b, NULL, line, len, &ids, NULL, &err) == TFM_OK, "%s", err.msg);
    CHECK(tfm_bpe_ids_to_pieces(v, ids.data, ids.len, &pieces, &err) == TFM_OK);
    CHECK_MSG(strcmp(pieces.data ? pieces.data : "", want) == 0, "'%.*s' gave '%s', want '%s'",
              (int)len, line, pieces.data ? pieces.data : "", want);
    CHECK(tfm_bpe_decode(v, ids.data, ids.len, &text, &err) == TFM_OK);
    CHECK(tfm_normalize(tfm_vocab_norm(v), line, len, &norm, NULL, NULL) == TFM_OK);
    CHECK_MSG(text.len == norm.len &&
                  (norm.len == 0 || memcmp(text.data, norm.data, norm.len) == 0),
              "'%.*s' came back as '%.*s'", (int)len, line, (int)text.len, text.data);
    tfm_ids_free(&ids);
    tfm_buf_free(&pieces);
    tfm_buf_free(&text);
    tfm_buf_free(&norm);
}

#define EXPECT(b, v, line, want) expect_pieces(b, v, line, strlen(line), want)

static const piece_spec abc_pieces[] = {
    {M, 0, TFM_PIECE_NORMAL}, {"a", 0, TFM_PIECE_NORMAL}, {"b", 0, TFM_PIECE_NORMAL},
    {"c", 0, TFM_PIECE_NORMAL}, {"ab", -1, TFM_PIECE_NORMAL}, {M "a", -2, TFM_PIECE_NORMAL},
    {M "ab", -3, TFM_PIECE_NORMAL}, {"bc", -4, TFM_PIECE_NORMAL},
    {"abc", -5, TFM_PIECE_NORMAL}, {NULL, 0, 0},
};

/* Segmentations worked out by hand: the best-scoring pair first, the
 * leftmost among equals, until no adjacent pair is a piece. */
static void test_merge_order(void)
{
    tfm_vocab *v = make_vocab(abc_pieces, TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    tfm_error err = {0};
    CHECK_MSG(tfm_bpe_create(v, &b, &err) == TFM_OK, "%s", err.msg);
    if (!b) return;
    /* ▁ a b a b: ab(-1) at 1, ab at 3, then ▁+ab (-3): "▁ab ab". */
    EXPECT(b, v, "abab c", M "ab ab " M " c");
    /* ▁ a b c: ab first (-1), then ▁ab (-3) beats ab+c (abc, -5). */
    EXPECT(b, v, "abc", M "ab c");
    /* b c alone merges to bc; a b c with a marker-less start (after a byte piece). */
    EXPECT(b, v, "bc", M " bc");
    EXPECT(b, v, "\tabc", M " <0x09> abc");
    EXPECT(b, v, "a", M "a");
    EXPECT(b, v, "", "");
    /* Spaces: leading, trailing, several. */
    EXPECT(b, v, " a", M " " M "a");
    EXPECT(b, v, "a  b ", M "a " M " " M " b " M);
    EXPECT(b, v, " ", M " " M);
    tfm_bpe_free(b);
    tfm_vocab_free(v);

    /* The order follows the scores: the same pieces with ▁a ranked first. */
    static const piece_spec first[] = {
        {M, 0, TFM_PIECE_NORMAL}, {"a", 0, TFM_PIECE_NORMAL}, {M "a", -1, TFM_PIECE_NORMAL},
        {"aa", -2, TFM_PIECE_NORMAL}, {NULL, 0, 0},
    };
    static const piece_spec second[] = {
        {M, 0, TFM_PIECE_NORMAL}, {"a", 0, TFM_PIECE_NORMAL}, {"aa", -1, TFM_PIECE_NORMAL},
        {M "a", -2, TFM_PIECE_NORMAL}, {NULL, 0, 0},
    };
    v = make_vocab(first, TFM_NORM_NFKC, false);
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    EXPECT(b, v, "aaa", M "a aa");     /* ▁a, then a+a */
    EXPECT(b, v, "aaaa", M "a aa a");  /* leftmost a+a first */
    tfm_bpe_free(b);
    tfm_vocab_free(v);
    v = make_vocab(second, TFM_NORM_NFKC, false);
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    EXPECT(b, v, "aaa", M " aa a");    /* a+a at 1 (leftmost), then nothing joins */
    EXPECT(b, v, "aaaa", M " aa aa");
    EXPECT(b, v, "aaaaa", M " aa aa a");
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

/* Characters outside the vocabulary, and those never allowed in a piece,
 * are spelled with byte pieces and never become <unk>. */
static void test_byte_fallback(void)
{
    tfm_vocab *v = make_vocab(abc_pieces, TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    EXPECT(b, v, "a\xC3\xA9" "b", M "a <0xC3> <0xA9> b");           /* é unknown */
    EXPECT(b, v, "\xC3\xA9" "ab", M " <0xC3> <0xA9> ab");
    EXPECT(b, v, "a" M "b", M "a <0xE2> <0x96> <0x81> b");          /* literal ▁ */
    expect_pieces(b, v, "a\0b", 3, M "a <0x00> b");                   /* NUL */
    EXPECT(b, v, "a\xFF", M "a <0xEF> <0xBF> <0xBD>");               /* repaired to U+FFFD */
    EXPECT(b, v, "<s>", M " <0x3C> <0x73> <0x3E>");                  /* not the control <s> */
    EXPECT(b, v, "<0x41>", M " <0x3C> <0x30> <0x78> <0x34> <0x31> <0x3E>");
    EXPECT(b, v, "a\xC2\xA0" "b", M "a " M " b");                    /* NFKC: no-break space */
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

static void test_user_symbols(void)
{
    static const piece_spec pieces[] = {
        {"<sep>", 0, TFM_PIECE_USER}, {"<se>", 0, TFM_PIECE_USER}, {M "<x>", 0, TFM_PIECE_USER},
        {M, 0, TFM_PIECE_NORMAL}, {"a", 0, TFM_PIECE_NORMAL}, {"b", 0, TFM_PIECE_NORMAL},
        {"<", 0, TFM_PIECE_NORMAL}, {"s", 0, TFM_PIECE_NORMAL}, {"e", 0, TFM_PIECE_NORMAL},
        {M "a", -1, TFM_PIECE_NORMAL}, {"se", -2, TFM_PIECE_NORMAL}, {NULL, 0, 0},
    };
    tfm_vocab *v = make_vocab(pieces, TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    /* Longest match first; a symbol splits words; its '▁' matches a space. */
    EXPECT(b, v, "a<sep>b <se>", M "a <sep> b " M " <se>");
    EXPECT(b, v, "<sep>", M " <sep>");
    EXPECT(b, v, "a <x>b", M "a " M "<x> b");
    EXPECT(b, v, "<x>", M "<x>");          /* the dummy prefix is part of the symbol */
    EXPECT(b, v, "<se", M " < se");
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

/* ---- the round trip over many scripts ---------------------------------------- */

static const char *const mixed_lines[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Caf\xC3\xA9 cre\xCC\x80me br\xC3\xBBl\xC3\xA9" "e, na\xC3\xAFve fa\xC3\xA7" "ade \xC3"
        "\x85ngstr\xC3\xB6m",
    "\xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1 \xCE\xBA\xCF\x8C\xCF\x83"
        "\xCE\xBC\xCE\xB5",
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! \xD0\xBF\xD1"
        "\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
    "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82\xE3\x81\x93\xE3\x82\x93\xE3"
        "\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE3\x83\xBC",
    "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84"
        "\xD9\x85 \xD9\xA1\xD9\xA2\xD9\xA3",
    "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD7\xA2\xD7\x95\xD7\x9C\xD7\x9D",
    "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 \xE0\xA4\xA6\xE0"
        "\xA5\x81\xE0\xA4\xA8\xE0\xA4\xBF\xE0\xA4\xAF\xE0\xA4\xBE",
    "\xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD\xE2\x80\x8D\xF0\x9F\x92\xBB \xF0\x9F\x91\x8D\xF0\x9F\x8F"
        "\xBF \xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
    "a\xCC\x81\xCC\xA3 q\xCC\x81\xCC\xA3 \xCC\x81lone mark",
    "tab\there\tand\x01\x02\x7F controls \xC2\x85 NEL",
    "literal " M " marker and " M M " twice",
    "<0x41> <s> </s> <unk> <pad>",
    "   leading and trailing   ",
    "",
    " ",
    "\xEF\xAC\x81 \xEF\xBC\xA1\xEF\xBC\xA2 \xE2\x91\xA0 \xE2\x84\x96",
    "bad \xFF\xFE utf8 \xC3 here \xED\xA0\x80 \xF0\x9F\x98",
    "\xE1\x83\xA5\xE1\x83\x90\xE1\x83\xA0\xE1\x83\x97\xE1\x83\xA3\xE1\x83\x9A\xE1\x83\x98 \xEA"
        "\xB0\x80\xEB\x82\x98\xEB\x8B\xA4",
    "\xEE\x80\x80 private \xEF\xBF\xBF nonchar \xE2\x80\xA8 linesep \xE3\x80\x80 ideo",
};

/* Collects the pieceable characters of the lines as pieces (skipping every
 * seventh, so some must fall back to bytes), then a few merges. */
static tfm_vocab *mixed_vocab(tfm_norm_form form, bool fold)
{
    tfm_norm_params norm = tfm_norm_default_params();
    norm.form = form;
    norm.case_fold = fold;
    tfm_vocab *v = tfm_vocab_create(&norm);
    tfm_vocab_add(v, M, 3, 0, TFM_PIECE_NORMAL);
    tfm_buf t;
    tfm_buf_init(&t);
    int n_seen = 0;
    for (size_t i = 0; i < sizeof mixed_lines / sizeof mixed_lines[0]; i++) {
        tfm_normalize(&norm, mixed_lines[i], strlen(mixed_lines[i]), &t, NULL, NULL);
        for (size_t k = 0; k < t.len;) {
            int32_t cp;
            int n = tfm_utf8_decode((const unsigned char *)t.data + k, t.len - k, &cp);
            if (n == 0) n = 1;
            else if (tfm_char_pieceable(cp) && tfm_vocab_find(v, t.data + k, (size_t)n) < 0 &&
                     n_seen++ % 7 != 3)
                tfm_vocab_add(v, t.data + k, (size_t)n, 0, TFM_PIECE_NORMAL);
            k += (size_t)n;
        }
    }
    tfm_buf_free(&t);
    static const char *const merges[] = {
        "th", M "th", M "the", "he", "er", M "o", "ov", M "ov", M "over", "ve", "ver",
        "\xD0\xBF\xD1\x80", M "\xD0\xBF\xD1\x80", "\xD0\xB8\xD0\xB2", M "\xD0\xBF\xD1\x80\xD0\xB8",
        "\xE4\xBD\xA0\xE5\xA5\xBD", "\xD8\xA8\xD8\xA7", M "\xD8\xA8\xD8\xA7",
        "\xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD", "\xE2\x80\x8D\xF0\x9F\x92\xBB", "<0", "x4", "<0x4",
        NULL,
    };
    float score = -1;
    for (int i = 0; merges[i]; i++) {
        if (tfm_vocab_add(v, merges[i], strlen(merges[i]), score, TFM_PIECE_NORMAL) >= 0)
            score -= 1;
    }
    return v;
}

/* decode(encode(x)) == normalize(x), byte for byte; and never <unk>. */
static void round_trip_all(tfm_bpe *b, const tfm_vocab *v, const tfm_bpe_encode_params *p,
                           size_t *total_ids)
{
    tfm_ids ids;
    tfm_buf text, norm, pieces;
    tfm_ids_init(&ids);
    tfm_buf_init(&text);
    tfm_buf_init(&norm);
    tfm_buf_init(&pieces);
    tfm_ids back;
    tfm_ids_init(&back);
    for (size_t i = 0; i < sizeof mixed_lines / sizeof mixed_lines[0]; i++) {
        const char *line = mixed_lines[i];
        size_t len = strlen(line);
        tfm_error err = {0};
        CHECK_MSG(tfm_bpe_encode(b, p, line, len, &ids, NULL, &err) == TFM_OK, "%s", err.msg);
        CHECK(tfm_bpe_decode(v, ids.data, ids.len, &text, &err) == TFM_OK);
        CHECK(tfm_normalize(tfm_vocab_norm(v), line, len, &norm, NULL, NULL) == TFM_OK);
        CHECK_MSG(text.len == norm.len &&
                      (norm.len == 0 || memcmp(text.data, norm.data, norm.len) == 0),
                  "line %zu: '%s' came back as '%.*s'", i, norm.data, (int)text.len, text.data);
        for (size_t k = 0; k < ids.len; k++) CHECK(ids.data[k] != TFM_ID_UNK);
        CHECK((len == 0) == (ids.len == 0));
        /* pieces <-> ids */
        CHECK(tfm_bpe_ids_to_pieces(v, ids.data, ids.len, &pieces, &err) == TFM_OK);
        CHECK(tfm_bpe_pieces_to_ids(v, pieces.data, pieces.len, &back, &err) == TFM_OK);
        CHECK(back.len == ids.len &&
              (ids.len == 0 || memcmp(back.data, ids.data, ids.len * sizeof *ids.data) == 0));
        if (total_ids) *total_ids += ids.len;
    }
    tfm_ids_free(&ids);
    tfm_ids_free(&back);
    tfm_buf_free(&text);
    tfm_buf_free(&norm);
    tfm_buf_free(&pieces);
}

static void test_round_trip(void)
{
    for (int form = TFM_NORM_NONE; form <= TFM_NORM_NFKC; form++) {
        for (int fold = 0; fold < 2; fold++) {
            tfm_vocab *v = mixed_vocab((tfm_norm_form)form, fold);
            tfm_bpe *b = NULL;
            tfm_error err = {0};
            CHECK_MSG(tfm_bpe_create(v, &b, &err) == TFM_OK, "%s", err.msg);
            if (!b) continue;
            /* Twice: the second time the words come from the cache. */
            size_t first = 0, second = 0;
            round_trip_all(b, v, NULL, &first);
            round_trip_all(b, v, NULL, &second);
            CHECK(first == second);
            tfm_bpe_free(b);
            tfm_vocab_free(v);
        }
    }
}

/* Some characters the mixed vocabulary left out come out as bytes. */
static void test_unknown_as_bytes(void)
{
    tfm_vocab *v = mixed_vocab(TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    tfm_ids ids;
    tfm_ids_init(&ids);
    size_t n_byte = 0;
    for (size_t i = 0; i < sizeof mixed_lines / sizeof mixed_lines[0]; i++) {
        CHECK(tfm_bpe_encode(b, NULL, mixed_lines[i], strlen(mixed_lines[i]), &ids, NULL, NULL) ==
              TFM_OK);
        for (size_t k = 0; k < ids.len; k++)
            n_byte += tfm_vocab_type(v, ids.data[k]) == TFM_PIECE_BYTE;
    }
    CHECK(n_byte > 20);
    tfm_ids_free(&ids);
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

static void test_dropout(void)
{
    tfm_vocab *v = mixed_vocab(TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    size_t plain = 0;
    round_trip_all(b, v, NULL, &plain);
    tfm_bpe_encode_params zero = {.dropout = 0, .rng = NULL};
    size_t again = 0;
    round_trip_all(b, v, &zero, &again);
    CHECK(plain == again);

    /* With dropout: still a round trip, more pieces on average. */
    tfm_rng rng;
    tfm_rng_seed(&rng, 42);
    tfm_bpe_encode_params drop = {.dropout = 0.5f, .rng = &rng};
    size_t dropped = 0;
    for (int rep = 0; rep < 20; rep++) round_trip_all(b, v, &drop, &dropped);
    CHECK_MSG(dropped > plain * 20, "%zu pieces with dropout vs %zu without", dropped, plain * 20);

    /* Dropout 1: no merge at all, every character alone. */
    tfm_bpe_encode_params all = {.dropout = 1.0f, .rng = &rng};
    tfm_ids ids;
    tfm_ids_init(&ids);
    const char *line = "the over \xD0\xBF\xD1\x80\xD0\xB8";
    CHECK(tfm_bpe_encode(b, &all, line, strlen(line), &ids, NULL, NULL) == TFM_OK);
    for (size_t k = 0; k < ids.len; k++) {
        size_t len;
        const char *text = tfm_vocab_piece(v, ids.data[k], &len);
        int32_t cp;
        CHECK_MSG(tfm_vocab_type(v, ids.data[k]) == TFM_PIECE_BYTE ||
                      tfm_utf8_decode((const unsigned char *)text, len, &cp) == (int)len,
                  "piece '%s' is a merge", text);
    }

    /* The same seed gives the same segmentation; another seed usually not. */
    tfm_ids a1, a2;
    tfm_ids_init(&a1);
    tfm_ids_init(&a2);
    tfm_rng r1, r2;
    tfm_rng_seed(&r1, 7);
    tfm_rng_seed(&r2, 7);
    tfm_bpe_encode_params p1 = {.dropout = 0.3f, .rng = &r1}, p2 = {.dropout = 0.3f, .rng = &r2};
    const char *line0 = mixed_lines[0];
    for (int rep = 0; rep < 10; rep++) {
        CHECK(tfm_bpe_encode(b, &p1, line0, strlen(line0), &a1, NULL, NULL) == TFM_OK);
        CHECK(tfm_bpe_encode(b, &p2, line0, strlen(line0), &a2, NULL, NULL) == TFM_OK);
        CHECK(a1.len == a2.len && memcmp(a1.data, a2.data, a1.len * sizeof *a1.data) == 0);
    }

    /* Bad parameters are errors, not crashes. */
    tfm_error err = {0};
    tfm_bpe_encode_params norng = {.dropout = 0.1f, .rng = NULL};
    CHECK(tfm_bpe_encode(b, &norng, "a", 1, &ids, NULL, &err) == TFM_ERR_ARG);
    tfm_bpe_encode_params big = {.dropout = 1.5f, .rng = &rng};
    CHECK(tfm_bpe_encode(b, &big, "a", 1, &ids, NULL, &err) == TFM_ERR_ARG);
    tfm_ids_free(&ids);
    tfm_ids_free(&a1);
    tfm_ids_free(&a2);
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

static void test_strict_and_repairs(void)
{
    tfm_vocab *v = make_vocab(abc_pieces, TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    tfm_ids ids;
    tfm_ids_init(&ids);
    size_t nr = 0;
    CHECK(tfm_bpe_encode(b, NULL, "a\xFF\xC3", 3, &ids, &nr, NULL) == TFM_OK);
    CHECK(nr == 2);
    tfm_bpe_encode_params strict = {.strict = true};
    tfm_error err = {0};
    CHECK(tfm_bpe_encode(b, &strict, "ab\xFF", 3, &ids, &nr, &err) == TFM_ERR_UTF8);
    CHECK_MSG(strstr(err.msg, "byte 2") != NULL, "%s", err.msg);
    CHECK(tfm_bpe_encode(b, &strict, "ab", 2, &ids, &nr, &err) == TFM_OK && ids.len == 1);
    tfm_ids_free(&ids);
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

static void test_decode(void)
{
    tfm_vocab *v = make_vocab(abc_pieces, TFM_NORM_NFKC, false);
    int32_t marker = tfm_vocab_find(v, M, 3), a = tfm_vocab_find(v, "a", 1);
    int32_t ma = tfm_vocab_find(v, M "a", 4);
    int32_t x41 = tfm_vocab_byte_id(v, 0x41), xc3 = tfm_vocab_byte_id(v, 0xC3);
    int32_t xa9 = tfm_vocab_byte_id(v, 0xA9), xff = tfm_vocab_byte_id(v, 0xFF);
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_error err = {0};
#define DECODE(want, ...)                                                                    \
    do {                                                                                     \
        int32_t ids_[] = {__VA_ARGS__};                                                      \
        CHECK(tfm_bpe_decode(v, ids_, sizeof ids_ / sizeof ids_[0], &out, &err) == TFM_OK);  \
        CHECK_MSG(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,           \
                  "got '%.*s' want '%s'", (int)out.len, out.data, want);                     \
    } while (0)
    DECODE("a a", ma, ma);
    DECODE("a", TFM_ID_BOS, ma, TFM_ID_EOS, TFM_ID_PAD);        /* specials dropped */
    DECODE("\xE2\x81\x87 a", TFM_ID_UNK, ma);                   /* <unk> is U+2047 */
    DECODE("Aa a", x41, a, ma);                                 /* no marker first: no drop */
    DECODE("\xC3\xA9 ", xc3, xa9, marker);
    DECODE("\xEF\xBF\xBD" "a", xc3, a);                         /* truncated: U+FFFD */
    DECODE("\xEF\xBF\xBD\xEF\xBF\xBD", xff, xc3);
    DECODE("  ", marker, marker, marker);
    int32_t none[1] = {0};
    CHECK(tfm_bpe_decode(v, none, 0, &out, &err) == TFM_OK && out.len == 0);
    int32_t bad[] = {ma, 99999};
    CHECK(tfm_bpe_decode(v, bad, 2, &out, &err) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(err.msg, "99999") && strstr(err.msg, "269"), "%s", err.msg);
    int32_t neg[] = {-1};
    CHECK(tfm_bpe_decode(v, neg, 1, &out, &err) == TFM_ERR_RANGE);
    CHECK(tfm_bpe_ids_to_pieces(v, bad, 2, &out, &err) == TFM_ERR_RANGE);

    /* pieces -> ids: unknown pieces are named. */
    tfm_ids ids;
    tfm_ids_init(&ids);
    const char *line = M "a  <0x41> <unk> ab";
    CHECK(tfm_bpe_pieces_to_ids(v, line, strlen(line), &ids, &err) == TFM_OK);
    CHECK(ids.len == 4 && ids.data[0] == ma && ids.data[1] == x41 && ids.data[2] == TFM_ID_UNK);
    CHECK(tfm_bpe_pieces_to_ids(v, "a zz b", 6, &ids, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "'zz'") != NULL, "%s", err.msg);
    CHECK(tfm_bpe_pieces_to_ids(v, "", 0, &ids, &err) == TFM_OK && ids.len == 0);
    tfm_ids_free(&ids);
    tfm_buf_free(&out);
    tfm_vocab_free(v);
#undef DECODE
}

static void test_create_errors(void)
{
    /* No '▁' piece: every line needs one, so the encoder refuses. */
    tfm_vocab *v = tfm_vocab_create(NULL);
    tfm_vocab_add(v, "a", 1, 0, TFM_PIECE_NORMAL);
    tfm_bpe *b = (tfm_bpe *)1;
    tfm_error err = {0};
    CHECK(tfm_bpe_create(v, &b, &err) == TFM_ERR_FORMAT);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "U+2581") != NULL);
    tfm_vocab_free(v);
    tfm_bpe_free(NULL);
}

/* A 1 MB word: merges in O(n log n), so it takes well under a second. */
static void test_long_word(void)
{
    static const piece_spec pieces[] = {
        {M, 0, TFM_PIECE_NORMAL}, {"a", 0, TFM_PIECE_NORMAL}, {"b", 0, TFM_PIECE_NORMAL},
        {"ab", -1, TFM_PIECE_NORMAL}, {"abab", -2, TFM_PIECE_NORMAL},
        {"abababab", -3, TFM_PIECE_NORMAL}, {NULL, 0, 0},
    };
    tfm_vocab *v = make_vocab(pieces, TFM_NORM_NFKC, false);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    size_t n = 1 << 20;
    char *line = malloc(n);
    for (size_t i = 0; i < n; i++) line[i] = i % 2 ? 'b' : 'a';
    tfm_ids ids;
    tfm_ids_init(&ids);
    clock_t t0 = clock();
    CHECK(tfm_bpe_encode(b, NULL, line, n, &ids, NULL, NULL) == TFM_OK);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    int32_t a8 = tfm_vocab_find(v, "abababab", 8);
    CHECK(ids.len == 1 + n / 8);
    bool all = ids.len == 1 + n / 8 && ids.data[0] == tfm_vocab_find(v, M, 3);
    for (size_t i = 1; all && i < ids.len; i++) all = ids.data[i] == a8;
    CHECK(all);
    CHECK_MSG(secs < 5.0, "%.2f s for a 1 MB word", secs);
    /* And with dropout, the same line still round-trips. */
    tfm_rng rng;
    tfm_rng_seed(&rng, 1);
    tfm_bpe_encode_params p = {.dropout = 0.2f, .rng = &rng};
    CHECK(tfm_bpe_encode(b, &p, line, n, &ids, NULL, NULL) == TFM_OK);
    tfm_buf text;
    tfm_buf_init(&text);
    CHECK(tfm_bpe_decode(v, ids.data, ids.len, &text, NULL) == TFM_OK);
    CHECK(text.len == n && memcmp(text.data, line, n) == 0);
    CHECK(ids.len > 1 + n / 8);
    tfm_buf_free(&text);
    free(line);
    tfm_ids_free(&ids);
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

/* The vocabulary's normalisation is applied before encoding. */
static void test_vocab_normalisation(void)
{
    static const piece_spec pieces[] = {
        {M, 0, TFM_PIECE_NORMAL}, {"f", 0, TFM_PIECE_NORMAL}, {"i", 0, TFM_PIECE_NORMAL},
        {"s", 0, TFM_PIECE_NORMAL}, {"fi", -1, TFM_PIECE_NORMAL}, {"ss", -2, TFM_PIECE_NORMAL},
        {NULL, 0, 0},
    };
    tfm_vocab *v = make_vocab(pieces, TFM_NORM_NFKC, true);
    tfm_bpe *b = NULL;
    CHECK(tfm_bpe_create(v, &b, NULL) == TFM_OK);
    if (!b) return;
    EXPECT(b, v, "\xEF\xAC\x81 FI \xC3\x9F", M " fi " M " fi " M " ss"); /* ﬁ FI ß */
    tfm_bpe_free(b);
    tfm_vocab_free(v);
}

int main(void)
{
    RUN(test_merge_order);
    RUN(test_byte_fallback);
    RUN(test_user_symbols);
    RUN(test_round_trip);
    RUN(test_unknown_as_bytes);
    RUN(test_dropout);
    RUN(test_strict_and_repairs);
    RUN(test_decode);
    RUN(test_create_errors);
    RUN(test_long_word);
    RUN(test_vocab_normalisation);
    CHECK_DONE();
}
