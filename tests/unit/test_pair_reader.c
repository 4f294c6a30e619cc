/* test_pair_reader.c - sentence pairs read in step (lib/text/pair_reader.c),
 * as score -m and inspect-attn read them: id lines and text, ids checked
 * against the vocabulary sizes, sources cropped and ended with </s> (an
 * empty one kept empty), targets cropped or flagged, pairs read past
 * unparsed, files of different lengths, a bad id, a line that cannot be
 * read, and the warnings a failure leaves for the side parsed before it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/text.h"

/* An open file holding data, read from its start. */
static FILE *file_with(const char *data)
{
    FILE *fp = tmpfile();
    CHECK(fp != NULL);
    if (!fp) exit(1);
    fputs(data, fp);
    fflush(fp);
    CHECK(lseek(fileno(fp), 0, SEEK_SET) == 0);
    return fp;
}

/* A pair reader over the lines of src and (when not NULL) tgt. */
typedef struct fixture {
    FILE *fp[2];
    tfm_line_reader *lines[2];
    tfm_pair_reader *pr;
    tfm_pair pair;
    tfm_error err;
} fixture;

static void open_fixture(fixture *f, const char *src, const char *tgt, const tfm_pair_params *p)
{
    memset(f, 0, sizeof *f);
    const char *data[2] = {src, tgt};
    for (int k = 0; k < 2; k++) {
        if (!data[k]) continue;
        f->fp[k] = file_with(data[k]);
        f->lines[k] = tfm_lines_create(fileno(f->fp[k]));
        CHECK(f->lines[k] != NULL);
    }
    CHECK_MSG(tfm_pair_reader_create(f->lines[0], f->lines[1], p, &f->pr, &f->err) == TFM_OK, "%s",
              f->err.msg);
    tfm_pair_init(&f->pair);
}

static void close_fixture(fixture *f)
{
    tfm_pair_reader_free(f->pr);
    tfm_pair_free(&f->pair);
    for (int k = 0; k < 2; k++) {
        tfm_lines_free(f->lines[k]);
        if (f->fp[k]) fclose(f->fp[k]);
    }
}

/* ids holds the n values of want. */
static bool ids_are(const tfm_ids *ids, const int32_t *want, size_t n)
{
    if (ids->len != n) return false;
    return n == 0 || memcmp(ids->data, want, n * sizeof *want) == 0;
}

/* ids is the ids of want followed by </s>. */
static bool is_source(const tfm_ids *ids, const tfm_ids *want)
{
    return ids->len == want->len + 1 && ids->data[want->len] == TFM_ID_EOS &&
           (want->len == 0 || memcmp(ids->data, want->data, want->len * sizeof *want->data) == 0);
}

static tfm_status next(fixture *f)
{
    return tfm_pair_reader_next(f->pr, &f->pair, &f->err);
}

static void test_ids(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    p.src_vocab_size = p.tgt_vocab_size = 100;
    fixture f;
    open_fixture(&f, "5 6\n7\n", "8\n9 10\n", &p);
    CHECK(tfm_pair_reader_ready(f.pr));
    CHECK_MSG(next(&f) == TFM_OK, "%s", f.err.msg);
    CHECK(f.pair.line == 1);
    CHECK(ids_are(&f.pair.src.ids, (int32_t[]){5, 6, TFM_ID_EOS}, 3));
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){8}, 1));
    CHECK(f.pair.src.done && f.pair.tgt.done && f.pair.src.length == 2 && f.pair.tgt.length == 1);
    CHECK(!f.pair.src.cropped && !f.pair.tgt.cropped && !f.pair.tgt.too_long);
    CHECK(f.pair.src.repaired == 0);
    CHECK(next(&f) == TFM_OK && f.pair.line == 2);
    CHECK(ids_are(&f.pair.src.ids, (int32_t[]){7, TFM_ID_EOS}, 2));
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){9, 10}, 2));
    CHECK(next(&f) == TFM_EOF);
    CHECK(next(&f) == TFM_EOF); /* and stays there */
    close_fixture(&f);

    /* another eos id; no </s> */
    p.eos_id = 42;
    open_fixture(&f, "5\n", "8\n", &p);
    CHECK(next(&f) == TFM_OK && ids_are(&f.pair.src.ids, (int32_t[]){5, 42}, 2));
    close_fixture(&f);
    p.source_eos = false;
    open_fixture(&f, "5\n", "8\n", &p);
    CHECK(next(&f) == TFM_OK && ids_are(&f.pair.src.ids, (int32_t[]){5}, 1));
    close_fixture(&f);
}

static void test_sources_alone(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    fixture f;
    open_fixture(&f, "1 2\n3", NULL, &p); /* a last line without '\n' is a line */
    CHECK(next(&f) == TFM_OK && ids_are(&f.pair.src.ids, (int32_t[]){1, 2, TFM_ID_EOS}, 3));
    CHECK(!f.pair.tgt.done && f.pair.tgt.ids.len == 0);
    CHECK(next(&f) == TFM_OK && f.pair.line == 2);
    CHECK(next(&f) == TFM_EOF);
    size_t n_src = 9, n_tgt = 9;
    CHECK(tfm_pair_reader_count(f.pr, &n_src, &n_tgt, &f.err) == TFM_OK);
    CHECK(n_src == 2 && n_tgt == 0);
    close_fixture(&f);
    CHECK(tfm_pair_reader_create(NULL, NULL, &p, &f.pr, &f.err) == TFM_ERR_ARG && f.pr == NULL);
}

static void test_empty_lines(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    fixture f;
    open_fixture(&f, "\n  \n4\n", "5\n\n \t\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(f.pair.src.done && f.pair.src.length == 0 && f.pair.src.ids.len == 0); /* no </s> */
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){5}, 1));
    CHECK(next(&f) == TFM_OK && f.pair.src.ids.len == 0 && f.pair.tgt.ids.len == 0);
    CHECK(f.pair.tgt.done && f.pair.tgt.length == 0);
    CHECK(next(&f) == TFM_OK && ids_are(&f.pair.src.ids, (int32_t[]){4, TFM_ID_EOS}, 2));
    CHECK(f.pair.tgt.ids.len == 0);
    CHECK(next(&f) == TFM_EOF);
    close_fixture(&f);
    open_fixture(&f, "", "", &p); /* empty files: no pairs */
    CHECK(next(&f) == TFM_EOF);
    close_fixture(&f);
}

static void test_cropping(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    p.max_source = 4; /* three ids and </s> */
    p.max_target = 2;
    fixture f;
    open_fixture(&f, "1 2 3 4 5\n1 2 3\n1 2\n", "6 7 8\n6 7\n6\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(ids_are(&f.pair.src.ids, (int32_t[]){1, 2, 3, TFM_ID_EOS}, 4));
    CHECK(f.pair.src.cropped && f.pair.src.length == 5);
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){6, 7}, 2));
    CHECK(f.pair.tgt.cropped && !f.pair.tgt.too_long && f.pair.tgt.length == 3);
    CHECK(next(&f) == TFM_OK); /* exactly what fits */
    CHECK(ids_are(&f.pair.src.ids, (int32_t[]){1, 2, 3, TFM_ID_EOS}, 4) && !f.pair.src.cropped);
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){6, 7}, 2) && !f.pair.tgt.cropped);
    CHECK(next(&f) == TFM_OK && !f.pair.src.cropped && !f.pair.tgt.cropped); /* flags cleared */
    close_fixture(&f);

    /* without </s> the source has one more id of room; a target kept whole */
    p.source_eos = false;
    p.crop_target = false;
    open_fixture(&f, "1 2 3 4 5\n", "6 7 8\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(ids_are(&f.pair.src.ids, (int32_t[]){1, 2, 3, 4}, 4) && f.pair.src.cropped);
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){6, 7, 8}, 3));
    CHECK(f.pair.tgt.too_long && !f.pair.tgt.cropped && f.pair.tgt.length == 3);
    close_fixture(&f);

    /* one position: the source is its </s> alone */
    p = tfm_pair_default_params();
    p.max_source = 1;
    open_fixture(&f, "1 2\n", NULL, &p);
    CHECK(next(&f) == TFM_OK && ids_are(&f.pair.src.ids, (int32_t[]){TFM_ID_EOS}, 1));
    CHECK(f.pair.src.cropped && f.pair.src.length == 2);
    close_fixture(&f);
}

static void test_mismatch(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    fixture f;
    open_fixture(&f, "1\n2\n3\n", "4\n", &p); /* the targets end first */
    CHECK(next(&f) == TFM_OK);
    CHECK(next(&f) == TFM_ERR_FORMAT);
    const tfm_pair_failure *fl = tfm_pair_reader_failure(f.pr);
    CHECK(fl->mismatch && fl->side == TFM_TARGET && fl->line == 0);
    CHECK_MSG(strstr(f.err.msg, "targets end after 1 lines") != NULL, "%s", f.err.msg);
    CHECK(!f.pair.src.done && !f.pair.tgt.done);
    size_t n_src, n_tgt;
    CHECK(tfm_pair_reader_count(f.pr, &n_src, &n_tgt, &f.err) == TFM_OK);
    CHECK(n_src == 3 && n_tgt == 1);
    close_fixture(&f);

    open_fixture(&f, "1\n", "4\n5\n6\n", &p); /* the sources end first */
    CHECK(next(&f) == TFM_OK);
    CHECK(next(&f) == TFM_ERR_FORMAT);
    fl = tfm_pair_reader_failure(f.pr);
    CHECK(fl->mismatch && fl->side == TFM_SOURCE && fl->line == 0);
    CHECK(tfm_pair_reader_count(f.pr, &n_src, &n_tgt, &f.err) == TFM_OK);
    CHECK(n_src == 1 && n_tgt == 3);
    close_fixture(&f);

    /* the lengths are said before a bad last line is parsed */
    open_fixture(&f, "1\nx\n", "4\n", &p);
    CHECK(next(&f) == TFM_OK && next(&f) == TFM_ERR_FORMAT);
    CHECK(tfm_pair_reader_failure(f.pr)->mismatch);
    close_fixture(&f);
}

static void test_bad_ids(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    p.src_vocab_size = 10;
    p.tgt_vocab_size = 20;
    fixture f;
    /* 15 is a good target id but a bad source id */
    open_fixture(&f, "1 2\n3 15\n", "15\n4\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(next(&f) == TFM_ERR_RANGE);
    const tfm_pair_failure *fl = tfm_pair_reader_failure(f.pr);
    CHECK(!fl->mismatch && fl->side == TFM_SOURCE && fl->line == 2);
    CHECK_MSG(strstr(f.err.msg, "column 3") != NULL, "%s", f.err.msg);
    close_fixture(&f);

    /* a bad target: the source was parsed first, its warnings stand */
    p.max_source = 2;
    open_fixture(&f, "1 2 3\n", "4 x\n", &p);
    CHECK(next(&f) == TFM_ERR_FORMAT);
    fl = tfm_pair_reader_failure(f.pr);
    CHECK(fl->side == TFM_TARGET && fl->line == 1 && !fl->mismatch);
    CHECK(f.pair.src.done && f.pair.src.cropped && !f.pair.tgt.done);
    close_fixture(&f);

    /* pairs read past are not parsed: a bad line there is no error */
    open_fixture(&f, "x\n1\n", "y\n2\n", &p);
    CHECK(tfm_pair_reader_next(f.pr, NULL, &f.err) == TFM_OK);
    CHECK(next(&f) == TFM_OK && f.pair.line == 2);
    CHECK(ids_are(&f.pair.tgt.ids, (int32_t[]){2}, 1));
    CHECK(tfm_pair_reader_next(f.pr, NULL, &f.err) == TFM_EOF);
    close_fixture(&f);
}

/* Lines 1 and 3 short, line 2 of n digits. */
static char *with_long_line(size_t n)
{
    char *data = malloc(n + 6);
    CHECK(data != NULL);
    if (!data) exit(1);
    memcpy(data, "1\n", 2);
    memset(data + 2, '7', n);
    memcpy(data + 2 + n, "\n3\n", 4); /* and the NUL */
    return data;
}

static void test_read_error(void)
{
    tfm_pair_params p = tfm_pair_default_params();
    char *long_line = with_long_line((size_t)1 << 20);
    fixture f;
    open_fixture(&f, "1\n2\n3\n", long_line, &p);
    tfm_lines_set_max_length(f.lines[TFM_TARGET], 1000); /* line 2 is too long to read */
    CHECK(next(&f) == TFM_OK);
    CHECK(next(&f) == TFM_ERR_RANGE);
    const tfm_pair_failure *fl = tfm_pair_reader_failure(f.pr);
    CHECK(fl->side == TFM_TARGET && fl->line == 2 && !fl->mismatch);
    CHECK(!f.pair.src.done); /* nothing parsed */
    close_fixture(&f);

    /* counting what is left meets it too */
    open_fixture(&f, long_line, NULL, &p);
    tfm_lines_set_max_length(f.lines[TFM_SOURCE], 1000);
    size_t n_src, n_tgt;
    CHECK(tfm_pair_reader_count(f.pr, &n_src, &n_tgt, &f.err) == TFM_ERR_RANGE);
    fl = tfm_pair_reader_failure(f.pr);
    CHECK(fl->side == TFM_SOURCE && fl->line == 2);
    close_fixture(&f);
    free(long_line);

    /* a descriptor that cannot be read: an error at line 1 of the sources */
    tfm_line_reader *bad = tfm_lines_create(-1);
    tfm_pair_reader *pr;
    tfm_error err;
    CHECK(tfm_pair_reader_create(bad, NULL, &p, &pr, &err) == TFM_OK);
    tfm_pair pair;
    tfm_pair_init(&pair);
    CHECK(tfm_pair_reader_next(pr, &pair, &err) == TFM_ERR_IO);
    CHECK(tfm_pair_reader_failure(pr)->side == TFM_SOURCE && tfm_pair_reader_failure(pr)->line == 1);
    tfm_pair_free(&pair);
    tfm_pair_reader_free(pr);
    tfm_lines_free(bad);
}

/* A vocabulary of the specials, the bytes and a few pieces. */
static tfm_vocab *small_vocab(void)
{
    tfm_norm_params norm = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&norm);
    CHECK(v != NULL);
    const char *pieces[] = {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", NULL};
    for (int i = 0; v && pieces[i]; i++)
        CHECK(tfm_vocab_add(v, pieces[i], strlen(pieces[i]), (float)-i, TFM_PIECE_NORMAL) >= 0);
    return v;
}

static void test_text(void)
{
    tfm_vocab *v = small_vocab();
    tfm_bpe *bpe = NULL;
    tfm_error err;
    CHECK(tfm_bpe_create(v, &bpe, &err) == TFM_OK);
    if (!bpe) {
        tfm_vocab_free(v);
        return;
    }
    /* What the encoder gives each line, to compare with. */
    const char *lines[] = {"a b", "b\xFF" "a"};
    tfm_ids want[2];
    size_t repaired[2];
    for (int i = 0; i < 2; i++) {
        tfm_ids_init(&want[i]);
        CHECK(tfm_bpe_encode(bpe, NULL, lines[i], strlen(lines[i]), &want[i], &repaired[i],
                             &err) == TFM_OK);
    }
    CHECK(repaired[0] == 0 && repaired[1] == 1);

    tfm_pair_params p = tfm_pair_default_params();
    p.bpe = bpe;
    p.src_vocab_size = p.tgt_vocab_size = tfm_vocab_size(v);
    fixture f;
    open_fixture(&f, "a b\nb\xFF" "a\n", "b\xFF" "a\na b\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(is_source(&f.pair.src.ids, &want[0]));
    CHECK(ids_are(&f.pair.tgt.ids, want[1].data, want[1].len));
    CHECK(f.pair.src.repaired == 0 && f.pair.tgt.repaired == 1);
    CHECK(next(&f) == TFM_OK && f.pair.src.repaired == 1 && f.pair.tgt.repaired == 0);
    close_fixture(&f);

    /* strict: invalid UTF-8 is an error at its line */
    p.strict = true;
    open_fixture(&f, "a\nb\n", "a\nb\xFF\n", &p);
    CHECK(next(&f) == TFM_OK);
    CHECK(next(&f) == TFM_ERR_UTF8);
    CHECK(tfm_pair_reader_failure(f.pr)->side == TFM_TARGET &&
          tfm_pair_reader_failure(f.pr)->line == 2);
    close_fixture(&f);

    /* ids of a vocabulary larger than the model's are refused */
    p.strict = false;
    p.tgt_vocab_size = TFM_ID_EOS + 1; /* the byte pieces are outside */
    open_fixture(&f, "a\n", "b\n", &p);
    CHECK(next(&f) == TFM_ERR_RANGE);
    CHECK_MSG(strstr(f.err.msg, "outside the model's vocabulary (0..3)") != NULL, "%s", f.err.msg);
    CHECK(tfm_pair_reader_failure(f.pr)->side == TFM_TARGET);
    /* one line parsed alone, as a target: the same check */
    tfm_pair_side side;
    tfm_ids_init(&side.ids);
    CHECK(tfm_pair_reader_parse(f.pr, TFM_TARGET, "a", 1, &side, &err) == TFM_ERR_RANGE);
    CHECK(tfm_pair_reader_parse(f.pr, TFM_SOURCE, "a", 1, &side, &err) == TFM_OK);
    tfm_ids a;
    tfm_ids_init(&a);
    CHECK(tfm_bpe_encode(bpe, NULL, "a", 1, &a, NULL, &err) == TFM_OK);
    CHECK(side.done && is_source(&side.ids, &a));
    tfm_ids_free(&a);
    tfm_ids_free(&side.ids);
    close_fixture(&f);

    for (int i = 0; i < 2; i++) tfm_ids_free(&want[i]);
    tfm_bpe_free(bpe);
    tfm_vocab_free(v);
}

int main(void)
{
    RUN(test_ids);
    RUN(test_sources_alone);
    RUN(test_empty_lines);
    RUN(test_cropping);
    RUN(test_mismatch);
    RUN(test_bad_ids);
    RUN(test_read_error);
    RUN(test_text);
    CHECK_DONE();
}
