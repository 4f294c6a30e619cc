/* test_text_filter.c - line filters and feeding a learner from a stream
 * (lib/text/text_filter.c, learn_lines.c), as tokenize runs them: each line
 * encoded, decoded or normalised as the one-line functions do it, in order,
 * with its number; the same output for any thread count with dropout, the
 * line count going on from one run to the next; a bad line reported after
 * the lines before it; a learner fed from a stream learning what it learns
 * line by line; the merges of a vocabulary counted. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/text.h"

/* The read end of a pipe that holds data and then ends (the data fits in
 * the pipe's buffer: 64 KiB on Linux). */
static int pipe_with(const char *data)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    size_t len = strlen(data);
    CHECK(len < 65536);
    CHECK(write(fd[1], data, len) == (ssize_t)len);
    close(fd[1]);
    return fd[0];
}

/* A corpus of n lines of a few words, some of them repeated. */
static char *make_corpus(int n)
{
    static const char *const words[] = {"the", "cat", "sat", "on", "mat", "a", "dog", "ran",
                                        "über", "Straße", "naïve", "café", "42", "x"};
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_rng rng;
    tfm_rng_seed(&rng, 7);
    for (int i = 0; i < n; i++) {
        int k = 1 + (int)(tfm_rng_u64(&rng) % 8);
        for (int j = 0; j < k; j++)
            tfm_buf_printf(&b, "%s%s", j ? " " : "", words[tfm_rng_u64(&rng) % 14]);
        tfm_buf_putc(&b, '\n');
    }
    return b.data;
}

static tfm_vocab *learn_vocab(const char *corpus, int32_t size)
{
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = size;
    p.n_threads = 2;
    p.soft_vocab_limit = true;
    tfm_bpe_learner *l;
    tfm_error err;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    for (const char *s = corpus; *s;) {
        const char *end = strchr(s, '\n');
        CHECK(tfm_bpe_learner_add(l, s, (size_t)(end - s), NULL, &err) == TFM_OK);
        s = end + 1;
    }
    tfm_vocab *v = NULL;
    CHECK_MSG(tfm_bpe_learner_finish(l, &v, &err) == TFM_OK, "%s", err.msg);
    tfm_bpe_learner_free(l);
    return v;
}

/* What a run wrote: the lines joined by '\n', their numbers, repairs. */
typedef struct written {
    tfm_buf text;
    size_t lines[64];
    size_t repaired[64];
    size_t n;
    int flushes;
} written;

static tfm_status write_line(void *ctx, size_t line, const char *text, size_t len,
                             size_t repaired, tfm_error *err)
{
    written *w = ctx;
    if (w->n < 64) {
        w->lines[w->n] = line;
        w->repaired[w->n] = repaired;
    }
    w->n++;
    tfm_buf_append(&w->text, text, len);
    tfm_buf_putc(&w->text, '\n');
    return TFM_OK;
}

static void count_flush(void *ctx)
{
    ((written *)ctx)->flushes++;
}

/* Runs f over data; returns the run's status, its output in *w. */
static tfm_status run_on(tfm_text_filter *f, const char *data, written *w, tfm_batch_failure *fail)
{
    int fd = pipe_with(data);
    tfm_line_reader *r = tfm_lines_create(fd);
    tfm_status s = tfm_text_filter_run(f, r, write_line, count_flush, w, fail);
    tfm_lines_free(r);
    close(fd);
    return s;
}

static tfm_text_filter *make_filter(const tfm_vocab *v, const tfm_filter_params *p)
{
    tfm_text_filter *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_text_filter_create(v, p, &f, &err) == TFM_OK, "%s", err.msg);
    if (!f) exit(1);
    return f;
}

/* Each output line is what tfm_bpe_encode and tfm_ids_format (or pieces)
 * give the input line, with the line's number. */
static void test_encode(void)
{
    char *corpus = make_corpus(200);
    tfm_vocab *v = learn_vocab(corpus, 330);
    tfm_bpe *bpe;
    tfm_error err;
    CHECK(tfm_bpe_create(v, &bpe, &err) == TFM_OK);
    for (int pieces = 0; pieces < 2; pieces++) {
        tfm_filter_params p = tfm_filter_default_params();
        p.output = pieces ? TFM_LINE_PIECES : TFM_LINE_IDS;
        p.threads = 3;
        tfm_text_filter *f = make_filter(v, &p);
        written w = {0};
        CHECK(run_on(f, corpus, &w, NULL) == TFM_OK);
        CHECK(w.n == 200);
        tfm_buf want;
        tfm_buf_init(&want);
        tfm_ids ids;
        tfm_ids_init(&ids);
        tfm_buf line;
        tfm_buf_init(&line);
        size_t k = 0;
        for (const char *s = corpus; *s; k++) {
            const char *end = strchr(s, '\n');
            CHECK(tfm_bpe_encode(bpe, NULL, s, (size_t)(end - s), &ids, NULL, &err) == TFM_OK);
            if (pieces) {
                CHECK(tfm_bpe_ids_to_pieces(v, ids.data, ids.len, &line, &err) == TFM_OK);
                tfm_buf_append(&want, line.data, line.len);
            } else {
                CHECK(tfm_ids_format(ids.data, ids.len, &want) == TFM_OK);
            }
            tfm_buf_putc(&want, '\n');
            if (k < 64) CHECK(w.lines[k] == k + 1);
            s = end + 1;
        }
        CHECK(w.text.len == want.len && memcmp(w.text.data, want.data, want.len) == 0);
        tfm_buf_free(&want);
        tfm_buf_free(&line);
        tfm_ids_free(&ids);
        tfm_buf_free(&w.text);
        tfm_text_filter_free(f);
    }
    tfm_bpe_free(bpe);
    tfm_vocab_free(v);
    free(corpus);
}

/* With dropout, the output is the same on 1 and 4 threads, differs with
 * another seed, and a second run (the next file) goes on counting lines:
 * two runs give what one run over both gives. */
static void test_dropout_threads_and_runs(void)
{
    char *corpus = make_corpus(300);
    tfm_vocab *v = learn_vocab(corpus, 330);
    tfm_filter_params p = tfm_filter_default_params();
    p.dropout = 0.5f;
    p.seed = 11;
    tfm_buf out[3];
    for (int t = 0; t < 3; t++) {
        p.threads = t == 1 ? 4 : 1;
        p.seed = t == 2 ? 12 : 11;
        tfm_text_filter *f = make_filter(v, &p);
        written w = {0};
        CHECK(run_on(f, corpus, &w, NULL) == TFM_OK);
        out[t] = w.text;
        tfm_text_filter_free(f);
    }
    CHECK(out[0].len == out[1].len && memcmp(out[0].data, out[1].data, out[0].len) == 0);
    CHECK(out[0].len != out[2].len || memcmp(out[0].data, out[2].data, out[0].len) != 0);

    /* the corpus in two halves, one run each */
    const char *half = corpus;
    for (int i = 0; i < 150; i++) half = strchr(half, '\n') + 1;
    char *first = strndup(corpus, (size_t)(half - corpus));
    p.threads = 2;
    p.seed = 11;
    tfm_text_filter *f = make_filter(v, &p);
    written w = {0};
    CHECK(run_on(f, first, &w, NULL) == TFM_OK);
    CHECK(run_on(f, half, &w, NULL) == TFM_OK);
    CHECK(w.n == 300);
    CHECK(w.lines[0] == 1); /* numbers in each file */
    CHECK(w.text.len == out[0].len && memcmp(w.text.data, out[0].data, w.text.len) == 0);
    tfm_text_filter_free(f);
    tfm_buf_free(&w.text);
    free(first);
    for (int t = 0; t < 3; t++) tfm_buf_free(&out[t]);
    tfm_vocab_free(v);
    free(corpus);
}

/* Decoding: id lines and piece lines (auto), back to the normalised text;
 * a bad id fails at its line after the lines before it are written. */
static void test_decode(void)
{
    char *corpus = make_corpus(50);
    tfm_vocab *v = learn_vocab(corpus, 330);
    tfm_filter_params p = tfm_filter_default_params();
    p.output = TFM_LINE_PIECES;
    tfm_text_filter *enc = make_filter(v, &p);
    written pieces = {0};
    CHECK(run_on(enc, "the cat\nnaïve café 42\n", &pieces, NULL) == TFM_OK);
    p.output = TFM_LINE_IDS;
    tfm_text_filter_free(enc);
    enc = make_filter(v, &p);
    written ids = {0};
    CHECK(run_on(enc, "the cat\nnaïve café 42\n", &ids, NULL) == TFM_OK);
    tfm_text_filter_free(enc);

    p.op = TFM_FILTER_DECODE;
    tfm_text_filter *dec = make_filter(v, &p);
    written back = {0};
    CHECK(run_on(dec, pieces.text.data, &back, NULL) == TFM_OK);
    CHECK(run_on(dec, ids.text.data, &back, NULL) == TFM_OK);
    CHECK(strcmp(back.text.data, "the cat\nnaïve café 42\nthe cat\nnaïve café 42\n") == 0);

    /* ids forced: a piece line is not an id line */
    tfm_text_filter_free(dec);
    p.input = TFM_LINE_IDS;
    dec = make_filter(v, &p);
    written w = {0};
    tfm_batch_failure fail;
    CHECK(run_on(dec, pieces.text.data, &w, &fail) == TFM_ERR_FORMAT);
    CHECK(w.n == 0 && fail.stage == TFM_BATCH_WRITE && fail.item == 0);

    /* an id outside the vocabulary, on line 2 of 3 */
    written w2 = {0};
    char bad[64];
    snprintf(bad, sizeof bad, "4 5\n%d\n6\n", tfm_vocab_size(v));
    CHECK(run_on(dec, bad, &w2, &fail) == TFM_ERR_RANGE);
    CHECK(w2.n == 1 && fail.stage == TFM_BATCH_WRITE && fail.item == 1);
    CHECK(strlen(fail.err.msg) > 0);
    tfm_text_filter_free(dec);

    /* no vocabulary, no decoding */
    tfm_error err;
    tfm_text_filter *none = NULL;
    CHECK(tfm_text_filter_create(NULL, &p, &none, &err) == TFM_ERR_ARG && none == NULL);

    tfm_buf_free(&pieces.text);
    tfm_buf_free(&ids.text);
    tfm_buf_free(&back.text);
    tfm_buf_free(&w.text);
    tfm_buf_free(&w2.text);
    tfm_vocab_free(v);
    free(corpus);
}

/* Normalising: the given form, or the vocabulary's; repairs counted per
 * line; strict fails at the bad line. */
static void test_normalize(void)
{
    tfm_filter_params p = tfm_filter_default_params();
    p.op = TFM_FILTER_NORMALIZE;
    p.norm.form = TFM_NORM_NFKC;
    p.norm.case_fold = true;
    tfm_text_filter *f = make_filter(NULL, &p);
    written w = {0};
    CHECK(run_on(f, "Ｆｕｌｌ\nok \xff\xfe x\n", &w, NULL) == TFM_OK);
    CHECK(strcmp(w.text.data, "full\nok \xEF\xBF\xBD\xEF\xBF\xBD x\n") == 0);
    CHECK(w.n == 2 && w.repaired[0] == 0 && w.repaired[1] == 2 && w.lines[1] == 2);
    tfm_text_filter_free(f);

    /* the vocabulary's normalisation wins over p.norm */
    tfm_norm_params none = tfm_norm_default_params();
    none.form = TFM_NORM_NONE;
    tfm_vocab *v = tfm_vocab_create(&none);
    f = make_filter(v, &p);
    written w2 = {0};
    CHECK(run_on(f, "Ｆｕｌｌ\n", &w2, NULL) == TFM_OK);
    CHECK(strcmp(w2.text.data, "Ｆｕｌｌ\n") == 0);
    tfm_text_filter_free(f);

    /* strict: the second line fails, after the first is written */
    p.strict = true;
    f = make_filter(v, &p);
    written w3 = {0};
    tfm_batch_failure fail;
    CHECK(run_on(f, "good\nbad \xff\n", &w3, &fail) == TFM_ERR_UTF8);
    CHECK(w3.n == 1 && fail.stage == TFM_BATCH_WRITE && fail.item == 1);
    tfm_text_filter_free(f);
    tfm_vocab_free(v);
    tfm_buf_free(&w.text);
    tfm_buf_free(&w2.text);
    tfm_buf_free(&w3.text);
}

typedef struct added_log {
    size_t lines, repaired, bytes, next_first;
    bool in_order;
} added_log;

static void on_added(void *ctx, const tfm_learn_batch *b)
{
    added_log *a = ctx;
    if (b->first_line != a->next_first || b->last_line < b->first_line) a->in_order = false;
    a->next_first = b->last_line + 1;
    a->lines += b->last_line - b->first_line + 1;
    a->repaired += b->repaired;
    a->bytes += b->bytes;
}

/* A learner fed from a stream learns what it learns fed line by line; each
 * batch is told, in order; a strict learner refuses a bad batch. */
static void test_learner_read(void)
{
    char *corpus = make_corpus(500);
    tfm_vocab *want = learn_vocab(corpus, 330);
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = 330;
    p.n_threads = 2;
    p.soft_vocab_limit = true;
    tfm_bpe_learner *l;
    tfm_error err;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    int fd = pipe_with(corpus);
    tfm_line_reader *r = tfm_lines_create(fd);
    added_log a = {.next_first = 1, .in_order = true};
    CHECK(tfm_bpe_learner_read(l, r, on_added, &a, NULL) == TFM_OK);
    CHECK(a.in_order && a.lines == 500 && a.repaired == 0);
    CHECK(a.bytes == strlen(corpus));
    tfm_vocab *got = NULL;
    CHECK(tfm_bpe_learner_finish(l, &got, &err) == TFM_OK);
    CHECK(got && tfm_vocab_size(got) == tfm_vocab_size(want));
    for (int32_t id = 0; got && id < tfm_vocab_size(want); id++)
        CHECK(strcmp(tfm_vocab_piece(got, id, NULL), tfm_vocab_piece(want, id, NULL)) == 0);
    tfm_vocab_free(got);
    tfm_bpe_learner_free(l);
    tfm_lines_free(r);
    close(fd);

    /* repairs are told; strict refuses the batch */
    for (int strict = 0; strict < 2; strict++) {
        p.norm.strict = strict;
        CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
        fd = pipe_with("fine\nbad \xff\xfe\n");
        r = tfm_lines_create(fd);
        added_log b = {.next_first = 1, .in_order = true};
        tfm_batch_failure fail;
        tfm_status s = tfm_bpe_learner_read(l, r, on_added, &b, &fail);
        if (strict) {
            CHECK(s == TFM_ERR_UTF8 && fail.stage == TFM_BATCH_WORK && b.lines == 0);
            CHECK(strncmp(fail.err.msg, "line 2: ", 8) == 0);
        } else {
            CHECK(s == TFM_OK && b.lines == 2 && b.repaired == 2);
        }
        tfm_bpe_learner_free(l);
        tfm_lines_free(r);
        close(fd);
    }
    tfm_vocab_free(want);
    free(corpus);
}

/* Merges: none in a fresh vocabulary; those added with negative scores. */
static void test_vocab_merges(void)
{
    tfm_norm_params norm = tfm_norm_default_params();
    tfm_vocab *v = tfm_vocab_create(&norm);
    CHECK(tfm_vocab_merges(v) == 0);
    CHECK(tfm_vocab_add(v, "a", 1, 0, TFM_PIECE_NORMAL) >= 0);
    CHECK(tfm_vocab_add(v, "b", 1, 0, TFM_PIECE_NORMAL) >= 0);
    CHECK(tfm_vocab_merges(v) == 0);
    CHECK(tfm_vocab_add(v, "ab", 2, -1, TFM_PIECE_NORMAL) >= 0);
    CHECK(tfm_vocab_add(v, "ba", 2, -2, TFM_PIECE_NORMAL) >= 0);
    CHECK(tfm_vocab_merges(v) == 2);
    tfm_vocab_free(v);
}

int main(void)
{
    RUN(test_encode);
    RUN(test_dropout_threads_and_runs);
    RUN(test_decode);
    RUN(test_normalize);
    RUN(test_learner_read);
    RUN(test_vocab_merges);
    CHECK_DONE();
}
