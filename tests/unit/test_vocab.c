/* test_vocab.c - the vocabulary: building, lookups, the file round trip, and
 * every parser error naming its line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testspm.h"
#include "tfm/spm.h"
#include "tfm/text.h"

/* A valid file: specials, user symbols (n_user of them), bytes, then extra
 * normal pieces.  The line of piece id i is i + 2. */
static void valid_file(tfm_buf *b, int n_user, const char *const *extra, int n_extra)
{
    tfm_buf_clear(b);
    tfm_buf_printf(b, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=%d\n",
                   4 + n_user + 256 + n_extra);
    tfm_buf_printf(b, "<pad>\t0\tcontrol\n<unk>\t0\tcontrol\n<s>\t0\tcontrol\n</s>\t0\tcontrol\n");
    for (int i = 0; i < n_user; i++) tfm_buf_printf(b, "<user%d>\t0\tuser\n", i);
    for (int i = 0; i < 256; i++) tfm_buf_printf(b, "<0x%02X>\t0\tbyte\n", i);
    for (int i = 0; i < n_extra; i++) tfm_buf_printf(b, "%s\t%d\tnormal\n", extra[i], -i);
}

/* Replaces line number lineno (1-based) of b with text (which holds its own
 * '\n' or not). */
static void replace_line(tfm_buf *b, int lineno, const char *text, size_t tlen)
{
    size_t start = 0;
    for (int l = 1; l < lineno; l++) start = (size_t)(strchr(b->data + start, '\n') - b->data) + 1;
    size_t end = (size_t)(strchr(b->data + start, '\n') - b->data) + 1;
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_buf_append(&out, b->data, start);
    tfm_buf_append(&out, text, tlen);
    tfm_buf_append(&out, b->data + end, b->len - end);
    tfm_buf_free(b);
    *b = out;
}

/* Parses data and checks that it fails with TFM_ERR_FORMAT and a message
 * holding want. */
static void expect_error(const char *data, size_t len, const char *want, int line)
{
    tfm_vocab *v = (tfm_vocab *)1;
    tfm_error err = {0};
    tfm_status st = tfm_vocab_parse(data, len, &v, &err);
    CHECK_MSG(st == TFM_ERR_FORMAT, "test line %d: status %d", line, (int)st);
    CHECK_MSG(v == NULL, "test line %d: out not NULL on failure", line);
    CHECK_MSG(strstr(err.msg, want) != NULL, "test line %d: message '%s' lacks '%s'", line,
              err.msg, want);
    if (st == TFM_OK) tfm_vocab_free(v);
}
/* Literal text, embedded NULs included. */
#define REPLACE(buf, lineno, lit) replace_line(&(buf), lineno, lit, sizeof(lit) - 1)
#define EXPECT_ERROR(buf, want) expect_error((buf).data, (buf).len, want, __LINE__)

static void test_create_layout(void)
{
    tfm_norm_params np = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&np);
    CHECK(v != NULL);
    CHECK(tfm_vocab_size(v) == 260);
    size_t len;
    CHECK(strcmp(tfm_vocab_piece(v, TFM_ID_PAD, &len), "<pad>") == 0 && len == 5);
    CHECK(strcmp(tfm_vocab_piece(v, TFM_ID_UNK, NULL), "<unk>") == 0);
    CHECK(strcmp(tfm_vocab_piece(v, TFM_ID_BOS, NULL), "<s>") == 0);
    CHECK(strcmp(tfm_vocab_piece(v, TFM_ID_EOS, NULL), "</s>") == 0);
    for (int i = 0; i < 4; i++) CHECK(tfm_vocab_type(v, i) == TFM_PIECE_CONTROL);
    CHECK(tfm_vocab_byte_id(v, 0) == 4);
    CHECK(tfm_vocab_byte_id(v, 0xAB) == 4 + 0xAB);
    CHECK(strcmp(tfm_vocab_piece(v, tfm_vocab_byte_id(v, 0xAB), NULL), "<0xAB>") == 0);
    CHECK(tfm_vocab_type(v, 4 + 0xFF) == TFM_PIECE_BYTE);
    CHECK(tfm_vocab_find(v, "<0xFF>", 6) == 259);
    CHECK(tfm_vocab_find(v, "<0xff>", 6) == -1); /* upper-case hex only */
    CHECK(tfm_vocab_piece(v, 260, NULL) == NULL);
    CHECK(tfm_vocab_piece(v, -1, NULL) == NULL);

    int32_t id = tfm_vocab_add(v, "\xE2\x96\x81th", 5, -1.0f, TFM_PIECE_NORMAL);
    CHECK(id == 260);
    CHECK(tfm_vocab_find(v, "\xE2\x96\x81th", 5) == 260);
    CHECK(tfm_vocab_score(v, id) == -1.0f);
    CHECK(tfm_vocab_add(v, "\xE2\x96\x81th", 5, -2.0f, TFM_PIECE_NORMAL) == -1); /* duplicate */
    CHECK(tfm_vocab_add(v, "a\tb", 3, 0, TFM_PIECE_NORMAL) == -1);  /* tab */
    CHECK(tfm_vocab_add(v, "a b", 3, 0, TFM_PIECE_NORMAL) == -1);   /* space */
    CHECK(tfm_vocab_add(v, "", 0, 0, TFM_PIECE_NORMAL) == -1);      /* empty */
    CHECK(tfm_vocab_add(v, "\xC3", 1, 0, TFM_PIECE_NORMAL) == -1);  /* bad UTF-8 */
    /* The layout holds whatever is added, so the file always loads back. */
    CHECK(tfm_vocab_add(v, "<mask>", 6, 0, TFM_PIECE_CONTROL) == -1); /* specials only */
    CHECK(tfm_vocab_add(v, "<0x41>", 6, 0, TFM_PIECE_BYTE) == -1);    /* all there */
    CHECK(tfm_vocab_add(v, "q", 1, NAN, TFM_PIECE_NORMAL) == -1);     /* no NaN score */
    CHECK(tfm_vocab_size(v) == 261);
    CHECK(tfm_vocab_add(v, "<sep>", 5, 0, TFM_PIECE_USER) == 261);    /* after the bytes */
    CHECK(tfm_vocab_type(v, 261) == TFM_PIECE_USER);
    tfm_vocab_free(v);
    tfm_vocab_free(NULL);
}

static void test_round_trip(void)
{
    tfm_norm_params np = {.form = TFM_NORM_NFC, .case_fold = true};
    tfm_vocab *v = tfm_vocab_create(&np);
    const char *pieces[] = {"a", "b", "\xE2\x96\x81", "\xC3\xA9", ("\xE2\x96\x81" "ab"), "<0x41"};
    for (int i = 0; i < 6; i++)
        CHECK(tfm_vocab_add(v, pieces[i], strlen(pieces[i]), i < 4 ? 0.0f : -(float)i * 1.5f,
                            TFM_PIECE_NORMAL) == 260 + i);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_vocab.%d.vocab", (int)getpid());
    tfm_error err = {0};
    CHECK_MSG(tfm_vocab_save(v, path, &err) == TFM_OK, "%s", err.msg);
    tfm_vocab *w = NULL;
    CHECK_MSG(tfm_vocab_load(path, &w, &err) == TFM_OK, "%s", err.msg);
    if (w) {
        CHECK(tfm_vocab_size(w) == tfm_vocab_size(v));
        for (int32_t i = 0; i < tfm_vocab_size(v); i++) {
            size_t la, lb;
            const char *a = tfm_vocab_piece(v, i, &la), *b = tfm_vocab_piece(w, i, &lb);
            CHECK_MSG(la == lb && memcmp(a, b, la) == 0, "piece %d", (int)i);
            CHECK(tfm_vocab_score(v, i) == tfm_vocab_score(w, i));
            CHECK(tfm_vocab_type(v, i) == tfm_vocab_type(w, i));
        }
        CHECK(tfm_vocab_norm(w)->form == TFM_NORM_NFC);
        CHECK(tfm_vocab_norm(w)->case_fold == true);
        CHECK(tfm_vocab_byte_id(w, 7) == 11);
    }
    /* The file is plain text: the header and a piece line as documented. */
    FILE *fp = fopen(path, "rb");
    char line[128];
    CHECK(fp && fgets(line, sizeof line, fp));
    CHECK(strcmp(line, "#tfm-vocab 1 normalize=nfc case-fold=yes pieces=266\n") == 0);
    if (fp) fclose(fp);
    remove(path);
    char tmp[96];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    CHECK(access(tmp, F_OK) != 0); /* no temporary left behind */
    tfm_vocab *gone = NULL;
    CHECK(tfm_vocab_load(path, &gone, &err) == TFM_ERR_IO); /* removed above */
    CHECK(gone == NULL);
    tfm_vocab_free(w);
    tfm_vocab_free(v);
}

/* A score reads as the float strtof makes of it, by the integer fast path
 * ("0", "-0", up to 7 digits) or by strtof; a sign alone is no score. */
static void test_parse_scores(void)
{
    const char *scores[] = {"0",        "-0",      "+7",  "-1234567", "0012",
                            "12345678", "-2.25e1", "0.1", "-.5",      "9999999"};
    const char *bad[] = {"-", "+", "--1", "1-", "12345678901234567890123456789012345678901234567"};
    const char *extra[] = {"x", "\xE2\x96\x81x"};
    tfm_buf b, line;
    tfm_buf_init(&b);
    tfm_buf_init(&line);
    for (size_t i = 0; i < sizeof scores / sizeof *scores; i++) {
        valid_file(&b, 0, extra, 2);
        tfm_buf_clear(&line);
        tfm_buf_printf(&line, "x\t%s\tnormal\n", scores[i]);
        replace_line(&b, 262, line.data, line.len);
        tfm_vocab *v = NULL;
        tfm_error err = {0};
        CHECK_MSG(tfm_vocab_parse(b.data, b.len, &v, &err) == TFM_OK, "%s: %s", scores[i], err.msg);
        float want = strtof(scores[i], NULL), got = v ? tfm_vocab_score(v, 260) : NAN;
        CHECK_MSG(memcmp(&got, &want, sizeof got) == 0, "score '%s' read as %g, strtof %g",
                  scores[i], (double)got, (double)want);
        tfm_vocab_free(v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        valid_file(&b, 0, extra, 2);
        tfm_buf_clear(&line);
        tfm_buf_printf(&line, "x\t%s\tnormal\n", bad[i]);
        replace_line(&b, 262, line.data, line.len);
        expect_error(b.data, b.len, "line 262: bad score", __LINE__);
    }
    tfm_buf_free(&line);
    tfm_buf_free(&b);
}

static void test_parse_valid_variants(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    const char *extra[] = {"x", "\xE2\x96\x81x"};
    valid_file(&b, 2, extra, 2);
    tfm_vocab *v = NULL;
    tfm_error err = {0};
    CHECK_MSG(tfm_vocab_parse(b.data, b.len, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v && tfm_vocab_size(v) == 264);
    CHECK(v && tfm_vocab_type(v, 4) == TFM_PIECE_USER);
    CHECK(v && tfm_vocab_byte_id(v, 0) == 6);
    CHECK(v && tfm_vocab_score(v, 263) == -1.0f);
    tfm_vocab_free(v);
    /* User symbols may also follow the byte pieces. */
    valid_file(&b, 0, extra, 2);
    tfm_buf_printf(&b, "<sep>\t0\tuser\n");
    REPLACE(b, 1, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=263\n");
    v = NULL;
    CHECK_MSG(tfm_vocab_parse(b.data, b.len, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v && tfm_vocab_type(v, 262) == TFM_PIECE_USER);
    tfm_vocab_free(v);
    valid_file(&b, 2, extra, 2);
    /* A missing final newline is fine. */
    v = NULL;
    CHECK_MSG(tfm_vocab_parse(b.data, b.len - 1, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v && tfm_vocab_size(v) == 264);
    tfm_vocab_free(v);
    tfm_buf_free(&b);
}

/* Regression (fuzz_vocab): the parser read a byte piece with sscanf, which
 * ran past the end of input that is not NUL-terminated. */
static void test_parse_unterminated(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    valid_file(&b, 1, NULL, 0);
    char *exact = malloc(b.len); /* no room for a NUL: ASan sees any over-read */
    memcpy(exact, b.data, b.len);
    tfm_vocab *v = NULL;
    tfm_error err = {0};
    CHECK_MSG(tfm_vocab_parse(exact, b.len, &v, &err) == TFM_OK, "%s", err.msg);
    CHECK(v && tfm_vocab_byte_id(v, 0xFF) == 5 + 0xFF);
    tfm_vocab_free(v);
    free(exact);
    tfm_buf_free(&b);
}

static void test_parse_errors(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    const char *extra[] = {"ab", "c", "d"};

    expect_error("", 0, "line 1:", __LINE__);
    expect_error("hello\n", 6, "line 1: not a vocabulary file", __LINE__);

    /* Header fields. */
    const char *bad_headers[][2] = {
        {"#tfm-vocab 2 normalize=nfkc case-fold=no pieces=263\n", "version"},
        {"#tfm-vocab 1 normalize=xyz case-fold=no pieces=263\n", "normalize=xyz"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=maybe pieces=263\n", "case-fold=maybe"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no pieces=12x\n", "pieces=12x"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no pieces=10\n", "pieces=10"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no pieces=263 color=red\n",
         "unknown header key 'color'"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no\n", "lacks pieces="},
        {"#tfm-vocab 1 normalize=nfkc normalize=nfc case-fold=no pieces=263\n", "twice"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no pieces=263 \n", "trailing space"},
        {"#tfm-vocab 1 normalize=nfkc  case-fold=no pieces=263\n", "single spaces"},
        {"#tfm-vocab 1 normalize=nfkc case-fold=no pieces=263\r\n",
         "line 1: the line ends with CR LF"},
    };
    for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
        valid_file(&b, 0, extra, 3);
        replace_line(&b, 1, bad_headers[i][0], strlen(bad_headers[i][0]));
        expect_error(b.data, b.len, bad_headers[i][1], (int)i * 1000 + __LINE__);
    }

    /* Each piece-line error, with its line number. */
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 12, "no tabs here\n");
    EXPECT_ERROR(b, "line 12: expected PIECE<TAB>SCORE<TAB>TYPE");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 12, "a\t0\tbyte\textra\n");
    EXPECT_ERROR(b, "line 12: expected PIECE<TAB>SCORE<TAB>TYPE");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 12, "\n");
    EXPECT_ERROR(b, "line 12: expected PIECE<TAB>SCORE<TAB>TYPE");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 263, "ab\t-5\tnormal\n"); /* line 262 already holds "ab" */
    EXPECT_ERROR(b, "line 263: duplicate piece 'ab' (first on line 262)");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 3, "<s>\t0\tcontrol\n");
    EXPECT_ERROR(b, "line 3: the special pieces must come first: expected '<unk>' with type "
                    "control");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 5, "</s>\t0\tnormal\n");
    EXPECT_ERROR(b, "line 5: the special pieces must come first: expected '</s>' with type "
                    "control");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 1, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=264\n");
    EXPECT_ERROR(b, "line 264: the file ends after 263 pieces but the header says pieces=264");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 1, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=262\n");
    EXPECT_ERROR(b, "line 264: the header says pieces=262 but the file has more lines");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "ab\t1.5x\tnormal\n");
    EXPECT_ERROR(b, "line 262: bad score '1.5x'");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "ab\tnan\tnormal\n");
    EXPECT_ERROR(b, "line 262: bad score 'nan'");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "ab\t\tnormal\n");
    EXPECT_ERROR(b, "line 262: bad score");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "ab\t1e99\tnormal\n");
    EXPECT_ERROR(b, "line 262: bad score '1e99'");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "ab\t0\tweird\n");
    EXPECT_ERROR(b, "line 262: unknown type 'weird'");

    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "\t0\tnormal\n");
    EXPECT_ERROR(b, "line 262: the piece is empty");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "a\xC3(\t0\tnormal\n");
    EXPECT_ERROR(b, "line 262: the piece has invalid UTF-8 at byte 1");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "a\x01" "b\t0\tnormal\n");
    EXPECT_ERROR(b, "line 262: the piece contains the control character U+0001");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "a\0b\t0\tnormal\n");
    EXPECT_ERROR(b, "line 262: the piece contains the control character U+0000");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "a b\t0\tnormal\n");
    EXPECT_ERROR(b, "line 262: the piece contains a space");

    /* Byte pieces out of place. */
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 7, "<0x03>\t0\tbyte\n"); /* expected <0x01> */
    EXPECT_ERROR(b, "line 7: byte piece out of place: expected '<0x01>'");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 7, "q\t0\tnormal\n");
    EXPECT_ERROR(b, "line 7: byte piece out of place: expected '<0x01>'");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "<0x41>\t0\tbyte\n");
    EXPECT_ERROR(b, "line 262: byte piece out of place");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 6, "<0x00>\t0\tnormal\n");
    EXPECT_ERROR(b, "line 6: byte piece out of place: expected '<0x00>' with type byte");
    /* User symbols after the bytes, and controls after the specials. */
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 100, "<sep>\t0\tuser\n");
    EXPECT_ERROR(b, "line 100: byte piece out of place: expected '<0x5E>'");
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 262, "<mask>\t0\tcontrol\n");
    EXPECT_ERROR(b, "line 262: control piece '<mask>'");

    /* CRLF on a piece line says so. */
    valid_file(&b, 0, extra, 3);
    REPLACE(b, 100, "<0x5E>\t0\tbyte\r\n");
    EXPECT_ERROR(b, "line 100: the line ends with CR LF");

    /* All lines present but no byte pieces (many user symbols instead). */
    valid_file(&b, 300, NULL, 0);
    REPLACE(b, 1, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=304\n");
    b.len = (size_t)(strstr(b.data, "<0x00>") - b.data);
    EXPECT_ERROR(b, "the file has 0 of the 256 byte pieces");
    tfm_buf_free(&b);
}

/* A file without end (a device, an endless pipe) is read no further than
 * a vocabulary can be long. */
static void test_load_bounded(void)
{
    tfm_vocab *v = NULL;
    tfm_error err;
    CHECK(tfm_vocab_load("/dev/zero", &v, &err) == TFM_ERR_FORMAT && !v);
    CHECK_MSG(strstr(err.msg, "more than 16777216 bytes: too large for a vocabulary"), "%s",
              err.msg);
    CHECK(tfm_vocab_load("/nonexistent/v.vocab", &v, &err) == TFM_ERR_IO && !v);
}

/* ---- the arrays of a packed model file ----------------------------------------------- */

static int releases; /* how many times release_count ran */
static void release_count(void *ctx)
{
    (void)ctx;
    releases++;
}

/* The arrays of v, made by tfm_vocab_to_arrays, in buffers the test may
 * damage. */
typedef tfm_vocab_arrays_made arrays;

static void arrays_of(const tfm_vocab *v, arrays *a)
{
    tfm_error err;
    CHECK_MSG(tfm_vocab_to_arrays(v, a, &err) == TFM_OK, "%s", err.msg);
}

static void arrays_free(arrays *a)
{
    tfm_vocab_arrays_made_free(a);
}

/* Reading a's arrays fails with TFM_ERR_FORMAT, a message holding want and
 * release not run; kind names the damage in a failure. */
static void expect_arrays_error(const arrays *a, const char *want, int kind)
{
    tfm_vocab_arrays av = tfm_vocab_arrays_of(a);
    tfm_vocab *v = (tfm_vocab *)1;
    tfm_error err = {0};
    releases = 0;
    tfm_status st = tfm_vocab_from_arrays(&av, release_count, NULL, &v, &err);
    CHECK_MSG(st == TFM_ERR_FORMAT && v == NULL, "damage %d: status %d", kind, (int)st);
    CHECK_MSG(strstr(err.msg, want) != NULL, "damage %d: message '%s' lacks '%s'", kind, err.msg,
              want);
    CHECK_MSG(releases == 0, "damage %d: a failure released the arrays", kind);
    if (st == TFM_OK) tfm_vocab_free(v);
}

/* Damages the arrays of the vocabulary test_arrays makes in one way of
 * N_DAMAGES; returns what the message of reading them must say (NULL when
 * the damage could not be made). */
#define N_DAMAGES 12
static const char *damage(arrays *d, int kind)
{
    char *at;
    switch (kind) {
    case 0: d->types.len--; return "the header says pieces=268 but the arrays hold 267";
    case 1: d->texts.len--; return "piece 267: the texts end before it"; /* its NUL lost */
    case 2: tfm_buf_append(&d->texts, "x", 2); return "the texts hold 2 bytes after the last";
    case 3: ((uint8_t *)d->types.data)[266] = 7; return "piece 266: unknown type 7";
    case 4: ((uint8_t *)d->types.data)[266] = 1; return "piece 266: control piece";
    case 5: ((float *)d->scores.data)[263] = NAN; return "piece 263: the score nan is not";
    case 6: ((float *)d->scores.data)[263] = 1e-40f; /* subnormal: the text cannot hold it */
        return "piece 263: the score 9.99995e-41 is not a finite normal number";
    case 7: /* "ab" (piece 265) becomes "a", as piece 263 is, then an empty piece */
        if (!(at = memmem(d->texts.data, d->texts.len, "ab", 3))) return NULL;
        memcpy(at, "a\0", 2);
        return "piece 265: duplicate piece 'a' (first on piece 263)";
    case 8:
        if (!(at = memmem(d->texts.data, d->texts.len, "\xC3\xA9", 2))) return NULL;
        at[1] = 'x';
        return "piece 266: the piece has invalid UTF-8 at byte 0";
    case 9:
        if (!(at = memmem(d->texts.data, d->texts.len, "<0x03>", 7))) return NULL;
        at[4] = '4';
        return "piece 9: byte piece out of place: expected '<0x03>'";
    case 10: tfm_buf_free(&d->texts); return "piece 0: the texts end before it"; /* NULL, 0 */
    default:
        strcpy(d->header, "#tfm-vocab 2 normalize=nfkc case-fold=no pieces=268");
        return "unsupported vocabulary version '2'";
    }
}

static void test_arrays(void)
{
    const char *extra[] = {"\xE2\x96\x81", "a", "b", "ab", "\xC3\xA9t\xC3\xA9",
                           "\xE2\x96\x81" "ab"};
    tfm_buf text;
    tfm_buf_init(&text);
    valid_file(&text, 2, extra, 6);
    tfm_error err;
    tfm_vocab *v = NULL;
    CHECK_MSG(tfm_vocab_parse(text.data, text.len, &v, &err) == TFM_OK, "%s", err.msg);
    arrays a;
    arrays_of(v, &a);
    CHECK(strcmp(a.header, "#tfm-vocab 1 normalize=nfkc case-fold=no pieces=268") == 0);
    CHECK(a.types.len == 268 && a.scores.len == 268 * sizeof(float));

    /* read back: every piece, score and type, the texts in place */
    tfm_vocab_arrays av = tfm_vocab_arrays_of(&a);
    tfm_vocab *back = NULL;
    releases = 0;
    CHECK_MSG(tfm_vocab_from_arrays(&av, release_count, NULL, &back, &err) == TFM_OK, "%s",
              err.msg);
    CHECK(back && tfm_vocab_size(back) == tfm_vocab_size(v));
    for (int32_t id = 0; back && id < tfm_vocab_size(v); id++) {
        size_t n0, n1;
        const char *t0 = tfm_vocab_piece(v, id, &n0), *t1 = tfm_vocab_piece(back, id, &n1);
        CHECK_MSG(n0 == n1 && memcmp(t0, t1, n0) == 0 && t1[n1] == 0, "piece %d", (int)id);
        CHECK(t1 >= a.texts.data && t1 < a.texts.data + a.texts.len);
        CHECK(tfm_vocab_score(back, id) == tfm_vocab_score(v, id));
        CHECK(tfm_vocab_type(back, id) == tfm_vocab_type(v, id));
        CHECK(tfm_vocab_find(back, t0, n0) == id);
    }
    CHECK(tfm_vocab_byte_id(back, 0xE9) == tfm_vocab_byte_id(v, 0xE9));
    /* a piece added after is a copy of its own, freed with the vocabulary */
    CHECK(tfm_vocab_add(back, "ba", 2, -9.0f, TFM_PIECE_NORMAL) == 268);
    CHECK(releases == 0);
    tfm_vocab_free(back);
    CHECK(releases == 1);

    /* damage, one kind at a time, each named */
    for (int kind = 0; kind < N_DAMAGES; kind++) {
        arrays d;
        arrays_of(v, &d);
        const char *want = damage(&d, kind);
        CHECK_MSG(want != NULL, "damage %d could not be made", kind);
        if (want) expect_arrays_error(&d, want, kind);
        arrays_free(&d);
    }

    arrays_free(&a);
    tfm_vocab_free(v);
    tfm_buf_free(&text);
}

/* The arrays of an imported model's vocabulary hold its SentencePiece
 * model, which reading them attaches again. */
static void test_arrays_foreign(void)
{
    tfm_vocab *v = test_spm_vocab("postnorm-swish-tiedall/source.spm");
    if (!v) return;
    arrays a;
    arrays_of(v, &a);
    size_t spm_size;
    const void *spm = tfm_spm_bytes(tfm_vocab_spm(v), &spm_size);
    CHECK(strstr(a.header, " layout=sentencepiece") != NULL);
    CHECK(a.spm.len == spm_size && memcmp(a.spm.data, spm, spm_size) == 0);
    tfm_vocab_arrays av = tfm_vocab_arrays_of(&a);
    tfm_vocab *back = NULL;
    tfm_error err;
    CHECK_MSG(tfm_vocab_from_arrays(&av, NULL, NULL, &back, &err) == TFM_OK, "%s", err.msg);
    if (back) {
        CHECK(tfm_vocab_is_foreign(back) && tfm_vocab_spm(back) != NULL);
        CHECK(tfm_vocab_size(back) == tfm_vocab_size(v));
        for (int32_t id = 0; id < tfm_vocab_size(v); id++) {
            size_t n0, n1;
            const char *t0 = tfm_vocab_piece(v, id, &n0), *t1 = tfm_vocab_piece(back, id, &n1);
            CHECK(n0 == n1 && memcmp(t0, t1, n0) == 0);
            CHECK(tfm_vocab_to_spm(back, id) == tfm_vocab_to_spm(v, id));
        }
        tfm_vocab_free(back);
    }
    /* a SentencePiece model cut short is named */
    av.spm_size /= 2;
    back = (tfm_vocab *)1;
    CHECK(tfm_vocab_from_arrays(&av, NULL, NULL, &back, &err) == TFM_ERR_FORMAT && !back);
    CHECK_MSG(strstr(err.msg, "the SentencePiece model") != NULL, "%s", err.msg);
    arrays_free(&a);

    /* and one beside a vocabulary of this toolkit's own is refused */
    tfm_norm_params np = tfm_norm_default_params();
    tfm_vocab *own = tfm_vocab_create(&np);
    CHECK(tfm_vocab_add(own, "\xE2\x96\x81", 3, 0.0f, TFM_PIECE_NORMAL) == 260);
    arrays_of(own, &a);
    av = tfm_vocab_arrays_of(&a);
    av.spm = spm;
    av.spm_size = spm_size;
    back = (tfm_vocab *)1;
    CHECK(tfm_vocab_from_arrays(&av, NULL, NULL, &back, &err) == TFM_ERR_FORMAT && !back);
    CHECK_MSG(strstr(err.msg, "not from elsewhere") != NULL, "%s", err.msg);
    arrays_free(&a);
    tfm_vocab_free(own);
    tfm_vocab_free(v); /* (spm is its model's bytes) */
}

int main(void)
{
    RUN(test_create_layout);
    RUN(test_round_trip);
    RUN(test_parse_scores);
    RUN(test_parse_valid_variants);
    RUN(test_parse_unterminated);
    RUN(test_parse_errors);
    RUN(test_load_bounded);
    RUN(test_arrays);
    RUN(test_arrays_foreign);
    CHECK_DONE();
}
