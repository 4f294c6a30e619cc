/* test_decode_batch.c - the decoding of a stream of encoder states in
 * batches (lib/search/decode_batch.c), on a tiny random model: records read
 * from an .npy stream and checked (width, dtype, shape), cropped to
 * max_input; an output line per record equal to tfm_search_run's best for
 * the same sentence decoded alone (batched = single, over slices and
 * workers); scores and Marian's n-best form; forced prefixes, and the
 * prefix file's failures located (a bad line, </s>, too few and too many
 * lines); the rules between options; and the pair reader's parameters of
 * a model (tfm_pair_params_from_model). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "testmodel.h"
#include "tfm/io.h"
#include "tfm/metrics.h"
#include "tfm/search.h"

enum { N = 6, MAX_SRC = 9 };

typedef struct fixture {
    tfm_model *m;
    int lens[N];
    float *states[N];     /* lens[i] x D each */
    FILE *stream;         /* the records, from the start */
} fixture;

/* n random sources of lengths 0 .. MAX_SRC (the first empty), encoded,
 * written as a stream of records. */
static bool fixture_make(fixture *f)
{
    memset(f, 0, sizeof *f);
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = 40;
    f->m = test_nudged_model(&c, 7);
    if (!f->m) return false;
    tfm_rng rng;
    tfm_rng_seed(&rng, 3);
    tfm_error err;
    tfm_encoder *enc = NULL;
    if (tfm_encoder_create(f->m, &enc, &err) != TFM_OK) return false;
    f->stream = tmpfile();
    tfm_npy_stream out = {.fp = f->stream};
    bool ok = f->stream != NULL;
    for (int i = 0; i < N && ok; i++) {
        int32_t ids[MAX_SRC];
        f->lens[i] = i == 0 ? 0 : 1 + (int)tfm_rng_below(&rng, MAX_SRC);
        for (int j = 0; j < f->lens[i]; j++) ids[j] = 4 + (int32_t)tfm_rng_below(&rng, 36);
        const int32_t *idp = ids;
        f->states[i] = malloc(((size_t)f->lens[i] + 1) * (size_t)c.d_model * sizeof(float));
        tfm_tensor t = {.dtype = TFM_F32, .ndim = 2, .shape = {f->lens[i], c.d_model},
                        .data = f->states[i]};
        ok = f->states[i] && tfm_encoder_forward(enc, 1, &idp, &f->lens[i], f->states[i], &err) ==
                                 TFM_OK &&
             tfm_npy_stream_write(&out, &t, &err) == TFM_OK;
    }
    tfm_encoder_free(enc);
    if (ok) rewind(f->stream);
    CHECK_MSG(ok, "fixture: %s", err.msg);
    return ok;
}

static void fixture_free(fixture *f)
{
    for (int i = 0; i < N; i++) free(f->states[i]);
    if (f->stream) fclose(f->stream);
    tfm_model_free(f->m);
}

/* A line reader over text (a pipe written in full, then closed). */
static tfm_line_reader *lines_of(const char *text, int *fd)
{
    int p[2];
    if (pipe(p) != 0) return NULL;
    size_t len = strlen(text);
    if (write(p[1], text, len) != (ssize_t)len) return NULL;
    close(p[1]);
    *fd = p[0];
    return tfm_lines_create(p[0]);
}

/* The parameters of the tests: a batch of N records, 2 workers. */
static tfm_decode_params params_of(int beam, int max_length)
{
    tfm_decode_params p = tfm_decode_default_params();
    p.capacity = N;
    p.workers = 2;
    p.search.beam = beam;
    p.search.max_length = max_length;
    return p;
}

/* Reads every record of f into b (capacity N, 2 workers), decodes them in
 * slices of `slice` on alternating workers; false on any failure. */
static bool decode_all(fixture *f, tfm_decode_batch *b, tfm_line_reader *prefixes, int slice,
                       tfm_error *err)
{
    rewind(f->stream);
    tfm_npy_stream in = tfm_decode_batch_stream(b, f->stream);
    tfm_decode_record rec;
    for (size_t i = 0; i < N; i++)
        if (tfm_decode_batch_read(b, i, &in, prefixes, &rec, err) != TFM_OK) return false;
    if (tfm_decode_batch_read(b, 0, &in, prefixes, &rec, err) != TFM_EOF) return false;
    for (int lo = 0, w = 0; lo < N; lo += slice, w ^= 1) {
        int hi = lo + slice < N ? lo + slice : N;
        if (tfm_decode_batch_run(b, w, (size_t)lo, (size_t)hi, err) != TFM_OK) return false;
    }
    return true;
}

/* Each output line is the best hypothesis of the sentence decoded alone. */
static void test_batched_equals_single(void)
{
    fixture f;
    if (!fixture_make(&f)) return;
    tfm_decode_params p = params_of(3, 6);
    tfm_decode_batch *b;
    tfm_error err;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    CHECK_MSG(decode_all(&f, b, NULL, 4, &err), "%s", err.msg);
    CHECK(tfm_decode_batch_records(b) == N);
    tfm_search *s;
    tfm_decoder *d;
    CHECK(tfm_search_create(f.m, &s, &err) == TFM_OK && tfm_decoder_create(f.m, &d, &err) == TFM_OK);
    tfm_buf want;
    tfm_buf_init(&want);
    for (int i = 0; i < N; i++) {
        const float *st = f.states[i];
        tfm_search_input in = {.n_sentences = 1, .states = &st, .src_lens = &f.lens[i]};
        CHECK(tfm_search_run(s, d, &p.search, &in, &err) == TFM_OK);
        tfm_nbest nb = tfm_search_result(s, 0);
        tfm_buf_clear(&want);
        tfm_ids_format(nb.hyps[0].ids, (size_t)nb.hyps[0].len, &want);
        tfm_buf_putc(&want, '\n');
        int best_len = -1;
        const tfm_buf *got = tfm_decode_batch_output(b, (size_t)i, &best_len);
        CHECK_MSG(got->len == want.len && memcmp(got->data, want.data, want.len) == 0,
                  "record %d: '%.*s' vs '%.*s'", i, (int)got->len, got->data, (int)want.len,
                  want.data);
        CHECK(best_len == nb.hyps[0].len);
        if (i == 0) CHECK(got->len == 1 && got->data[0] == '\n'); /* the empty source */
    }
    tfm_buf_free(&want);
    tfm_search_free(s);
    tfm_decoder_free(d);
    tfm_decode_batch_free(b);
    fixture_free(&f);
}

/* --scores ends a line with a TAB and the score; n-best lines count up. */
static void test_scores_and_nbest(void)
{
    fixture f;
    if (!fixture_make(&f)) return;
    tfm_error err;
    tfm_decode_params p = params_of(4, 5);
    p.scores = true;
    tfm_decode_batch *b;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    CHECK_MSG(decode_all(&f, b, NULL, N, &err), "%s", err.msg);
    const tfm_buf *o = tfm_decode_batch_output(b, 2, NULL);
    const char *tab = memchr(o->data, '\t', o->len);
    CHECK(tab && o->data[o->len - 1] == '\n' && strtod(tab + 1, NULL) < 0);
    tfm_decode_batch_free(b);

    p.scores = false;
    p.search.nbest = 3;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    CHECK_MSG(decode_all(&f, b, NULL, 2, &err), "%s", err.msg);
    for (size_t i = 0; i < N; i++) {
        o = tfm_decode_batch_output(b, i, NULL);
        char head[32];
        int n = snprintf(head, sizeof head, "%zu ||| ", i);
        size_t lines = 0;
        for (size_t k = 0; k < o->len; k++) lines += o->data[k] == '\n';
        CHECK_MSG(lines >= 1 && lines <= 3 && (i == 0 || lines == 3) && o->len > (size_t)n && memcmp(o->data, head, (size_t)n) == 0,
                  "record %zu: %.*s", i, (int)o->len, o->data);
    }
    tfm_decode_batch_free(b);
    fixture_free(&f);
}

/* Records are checked against the model and cropped to max_input. */
static void test_records_checked_and_cropped(void)
{
    fixture f;
    if (!fixture_make(&f)) return;
    tfm_error err;
    tfm_decode_params p = params_of(4, 0);
    p.max_input = 2;
    tfm_decode_batch *b;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    tfm_npy_stream in = tfm_decode_batch_stream(b, f.stream);
    tfm_decode_record rec;
    for (size_t i = 0; i < N; i++) {
        CHECK(tfm_decode_batch_read(b, i, &in, NULL, &rec, &err) == TFM_OK);
        CHECK(rec.number == i + 1 && rec.rows_in_file == f.lens[i]);
        CHECK(rec.rows == (f.lens[i] < 2 ? f.lens[i] : 2));
    }
    tfm_decode_batch_free(b);

    /* A record of the wrong width, and one of int32. */
    FILE *fp = tmpfile();
    tfm_npy_stream out = {.fp = fp};
    float x[6] = {0};
    int32_t ids[2] = {0};
    tfm_tensor wide = {.dtype = TFM_F32, .ndim = 2, .shape = {2, 3}, .data = x};
    tfm_tensor ints = {.dtype = TFM_I32, .ndim = 1, .shape = {2}, .data = ids};
    CHECK(tfm_npy_stream_write(&out, &wide, &err) == TFM_OK);
    CHECK(tfm_npy_stream_write(&out, &ints, &err) == TFM_OK);
    rewind(fp);
    p.max_input = 0;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    in = tfm_decode_batch_stream(b, fp);
    CHECK(tfm_decode_batch_read(b, 0, &in, NULL, &rec, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "record 1: states have width 3") && !rec.in_prefixes, "%s", err.msg);
    CHECK(tfm_decode_batch_read(b, 0, &in, NULL, &rec, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "record 2: states must be float32"), "%s", err.msg);
    CHECK(tfm_decode_batch_records(b) == 0);
    tfm_decode_batch_free(b);
    fclose(fp);
    fixture_free(&f);
}

/* A record's prefix is forced; the prefix file's failures are located. */
static void test_prefixes(void)
{
    fixture f;
    if (!fixture_make(&f)) return;
    tfm_error err;
    tfm_decode_params p = params_of(1, 4);
    tfm_decode_batch *b;
    CHECK(tfm_decode_batch_create(f.m, &p, &b, &err) == TFM_OK);
    int fd;
    tfm_line_reader *pre = lines_of("\n5 6\n7\n\n8 9 10\n11\n12\n", &fd);
    CHECK_MSG(decode_all(&f, b, pre, 3, &err), "%s", err.msg);
    CHECK(strncmp(tfm_decode_batch_output(b, 1, NULL)->data, "5 6", 3) == 0);
    CHECK(strncmp(tfm_decode_batch_output(b, 4, NULL)->data, "8 9 10", 6) == 0);
    CHECK(strcmp(tfm_decode_batch_output(b, 0, NULL)->data, "\n") == 0); /* empty source */
    size_t line = 0;
    CHECK(tfm_decode_batch_finish(b, pre, &line, &err) == TFM_ERR_FORMAT && line == 7);
    CHECK_MSG(strstr(err.msg, "more lines than the input has records (6)"), "%s", err.msg);
    tfm_lines_free(pre);
    close(fd);
    CHECK(tfm_decode_batch_finish(b, NULL, &line, &err) == TFM_OK && line == 0);

    /* </s> in a prefix, at line 2; then a file that ends too soon. */
    char text[64];
    snprintf(text, sizeof text, "4\n5 %d\n", (int)f.m->config.eos_id);
    pre = lines_of(text, &fd);
    rewind(f.stream);
    tfm_npy_stream in = tfm_decode_batch_stream(b, f.stream);
    tfm_decode_record rec;
    CHECK(tfm_decode_batch_read(b, 0, &in, pre, &rec, &err) == TFM_OK);
    CHECK(tfm_decode_batch_read(b, 1, &in, pre, &rec, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(rec.in_prefixes && rec.line == 2 && strstr(err.msg, "is </s>"), "%s", err.msg);
    CHECK(tfm_decode_batch_read(b, 1, &in, pre, &rec, &err) == TFM_ERR_FORMAT);
    CHECK_MSG(rec.in_prefixes && rec.line == 0 && strstr(err.msg, "has 2 lines"), "%s", err.msg);
    tfm_lines_free(pre);
    close(fd);
    tfm_decode_batch_free(b);
    fixture_free(&f);
}

static void test_params_rules(void)
{
    tfm_error err;
    tfm_decode_params p = tfm_decode_default_params();
    CHECK(p.search.seed == 1 && p.search.beam == 4 && tfm_decode_params_validate(&p, false, &err) == TFM_OK);
    p.search.sampling = true;
    CHECK(tfm_decode_params_validate(&p, false, &err) == TFM_OK); /* the default beam is no choice */
    CHECK(tfm_decode_params_validate(&p, true, &err) == TFM_ERR_ARG);
    CHECK_MSG(strstr(err.msg, "--beam 4 and sampling exclude each other"), "%s", err.msg);
    p.search.sampling = false;
    p.search.nbest = 5;
    CHECK(tfm_decode_params_validate(&p, true, &err) == TFM_ERR_ARG);
    CHECK_MSG(strstr(err.msg, "give --beam 5"), "%s", err.msg);
    p.search.nbest = 1;
    p.search.temperature = -1;
    CHECK(tfm_decode_params_validate(&p, false, &err) != TFM_OK);
}

/* The pair reader as the model reads: its vocabularies, positions, </s>. */
static void test_pair_params_from_model(void)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = 40;
    c.tgt_vocab_size = 30;
    c.shared_embeddings = false;
    c.max_positions = 4;
    tfm_model *m = test_nudged_model(&c, 1);
    if (!m) return;
    tfm_pair_params p = tfm_pair_params_from_model(m);
    CHECK(p.src_vocab_size == 40 && p.tgt_vocab_size == 30);
    CHECK(p.max_source == 4 && p.max_target == 3 && p.eos_id == c.eos_id);
    CHECK(p.source_eos && p.crop_target && !p.bpe && !p.strict);
    m->source_eos = false; /* as a model trained with --no-eos loads */
    CHECK(!tfm_pair_params_from_model(m).source_eos);
    m->source_eos = true;

    /* Read through it: a source of 5 ids keeps 3 and </s>; an id of 35 is
     * fine as a source, outside the targets' vocabulary. */
    int sfd, tfd;
    tfm_line_reader *src = lines_of("4 5 6 7 8\n35\n", &sfd);
    tfm_line_reader *tgt = lines_of("9 10 11 12\n35\n", &tfd);
    tfm_pair_reader *pr;
    tfm_error err;
    CHECK(tfm_pair_reader_create(src, tgt, &p, &pr, &err) == TFM_OK);
    tfm_pair pair;
    tfm_pair_init(&pair);
    CHECK(tfm_pair_reader_next(pr, &pair, &err) == TFM_OK);
    CHECK(pair.src.ids.len == 4 && pair.src.cropped && pair.src.ids.data[3] == c.eos_id);
    CHECK(pair.tgt.ids.len == 3 && pair.tgt.cropped);
    CHECK(tfm_pair_reader_next(pr, &pair, &err) == TFM_ERR_RANGE);
    CHECK(tfm_pair_reader_failure(pr)->side == TFM_TARGET);
    tfm_pair_free(&pair);
    tfm_pair_reader_free(pr);
    tfm_lines_free(src);
    tfm_lines_free(tgt);
    close(sfd);
    close(tfd);
    tfm_model_free(m);
}

int main(void)
{
    RUN(test_batched_equals_single);
    RUN(test_scores_and_nbest);
    RUN(test_records_checked_and_cropped);
    RUN(test_prefixes);
    RUN(test_params_rules);
    RUN(test_pair_params_from_model);
    CHECK_DONE();
}
