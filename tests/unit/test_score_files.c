/* test_score_files.c - hypotheses and references scored in step
 * (lib/metrics/score_files.c), as 'score METRIC' scores them: the corpus
 * score equals the one of tfm_metric_add line by line; sentence lines come
 * one per row, in order, the same at any thread count and across batches;
 * files of different lengths are named with both counts; a line that cannot
 * be taken (invalid UTF-8 with strict) is reported with its file and line
 * after the rows before it are written, and an empty reference is scored;
 * warnings carry the file's label and line; the paired test and the metric
 * names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testfiles.h"
#include "tfm/metrics.h"

/* What a run wrote: its lines joined by '\n', and its warnings. */
typedef struct sink {
    tfm_buf lines;
    size_t n_lines;
    char warnings[8][600];
    size_t n_warnings;
} sink;

static void sink_line(void *ctx, const char *text, size_t len)
{
    sink *s = ctx;
    tfm_buf_append(&s->lines, text, len);
    tfm_buf_append(&s->lines, "\n", 1);
    s->n_lines++;
}

static void sink_warning(void *ctx, const char *file, size_t line, const char *msg)
{
    sink *s = ctx;
    if (s->n_warnings < 8)
        snprintf(s->warnings[s->n_warnings], sizeof s->warnings[0], "%s:%zu: %s", file, line, msg);
    s->n_warnings++;
}

/* A scorer over files holding data[0..n_sys + n_refs), labelled "h0".. and
 * "r0"..; run with p, its lines and warnings in *out. */
typedef struct run {
    FILE *fp[8];
    tfm_line_reader *lines[8];
    tfm_score_input in[8];
    char names[8][16];
    int n;
    tfm_file_scorer *s;
    tfm_status status;
    tfm_score_failure at;
    tfm_error err;
    sink out;
} run;

static void run_scorer(run *r, const tfm_file_scorer_params *p, const char *const *data,
                       int n_sys, int n_refs)
{
    memset(r, 0, sizeof *r);
    r->n = n_sys + n_refs;
    for (int k = 0; k < r->n; k++) {
        snprintf(r->names[k], sizeof r->names[k], "%c%d", k < n_sys ? 'h' : 'r',
                 k < n_sys ? k : k - n_sys);
        r->fp[k] = file_with(data[k]);
        r->lines[k] = tfm_lines_create(fileno(r->fp[k]));
        r->in[k] = (tfm_score_input){.name = r->names[k], .lines = r->lines[k]};
    }
    tfm_buf_init(&r->out.lines);
    CHECK_MSG(tfm_file_scorer_create(p, r->in, n_sys, n_refs, &r->s, &r->err) == TFM_OK, "%s",
              r->err.msg);
    if (!r->s) return;
    tfm_score_output o = {&r->out, sink_line, sink_warning, NULL};
    r->status = tfm_file_scorer_run(r->s, &o, &r->at, &r->err);
}

static void run_free(run *r)
{
    tfm_file_scorer_free(r->s);
    for (int k = 0; k < r->n; k++) {
        tfm_lines_free(r->lines[k]);
        fclose(r->fp[k]);
    }
    tfm_buf_free(&r->out.lines);
}

static const char *text_of(const tfm_buf *b)
{
    return b->data ? b->data : "";
}

static const char *const hyps[] = {"The dog bit the man.", "It wasn't surprising.",
                                   "The man had just bitten him."};
static const char *const refs[] = {"The dog bit the man.", "It was not unexpected.",
                                   "The man bit him first."};

/* The corpus is the one tfm_metric_add makes line by line, and its
 * formatted result is sacreBLEU's line. */
static void test_corpus_in_step(void)
{
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    char hyp[256], ref[256];
    snprintf(hyp, sizeof hyp, "%s\n%s  \n%s\n", hyps[0], hyps[1], hyps[2]); /* stripped */
    snprintf(ref, sizeof ref, "%s\n%s\n%s", refs[0], refs[1], refs[2]);   /* no final \n */
    const char *data[] = {hyp, ref};
    run r;
    run_scorer(&r, &p, data, 1, 1);
    CHECK_MSG(r.status == TFM_OK, "%s", r.err.msg);
    CHECK(r.out.n_lines == 0 && r.out.n_warnings == 0);
    CHECK(tfm_file_scorer_lines(r.s) == 3);

    tfm_metric *m;
    tfm_error err;
    CHECK(tfm_metric_create(&p.metric, &m, &err) == TFM_OK);
    for (int i = 0; i < 3; i++) {
        const char *rp[1] = {refs[i]};
        size_t rl[1] = {strlen(refs[i])};
        CHECK(tfm_metric_add(m, hyps[i], strlen(hyps[i]), rp, rl, 1, &err) == TFM_OK);
    }
    const tfm_metric *got = tfm_file_scorer_metric(r.s, 0);
    CHECK(tfm_metric_count(got) == 3);
    for (size_t i = 0; i < tfm_metric_n_stats(m); i++)
        CHECK(tfm_metric_totals(got)[i] == tfm_metric_totals(m)[i]);
    tfm_buf text;
    tfm_buf_init(&text);
    CHECK(tfm_file_scorer_format(r.s, &text, &err) == TFM_OK);
    CHECK_MSG(strncmp(text_of(&text), "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|"
                      "version:2.3.1 = ", 64) == 0, "%s", text_of(&text));
    tfm_metric_free(m);
    tfm_buf_free(&text);
    run_free(&r);
}

/* n rows "w<i> ..." of hypotheses and references, some of them alike. */
static char *rows_text(int n, bool ref)
{
    char *s = malloc((size_t)n * 64 + 1);
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(s + len, ref ? "a b c w%d d e\n" : "a b w%d d %s\n", i % 7,
                               i % 3 ? "e" : "f g");
    s[len] = 0;
    return s;
}

/* A line per row, in order, the same at 1 and 4 threads. */
static void test_sentences_in_order(void)
{
    enum { N = 5000 }; /* more than a batch */
    char *hyp = rows_text(N, false), *ref = rows_text(N, true);
    const char *data[] = {hyp, ref};
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    p.metric = tfm_metric_default_params(TFM_METRIC_CHRF);
    p.sentence = true;
    run one, four;
    run_scorer(&one, &p, data, 1, 1);
    p.threads = 4;
    run_scorer(&four, &p, data, 1, 1);
    CHECK(one.status == TFM_OK && four.status == TFM_OK);
    CHECK(one.out.n_lines == N && four.out.n_lines == N);
    CHECK(one.out.lines.len == four.out.lines.len &&
          memcmp(text_of(&one.out.lines), text_of(&four.out.lines), one.out.lines.len) == 0);
    /* row 0's line is that row's own score */
    tfm_metric *m;
    tfm_error err;
    p.metric = tfm_metric_default_params(TFM_METRIC_CHRF);
    CHECK(tfm_metric_create(&p.metric, &m, &err) == TFM_OK);
    const char *rp[1] = {"a b c w0 d e"};
    size_t rl[1] = {strlen(rp[0])};
    CHECK(tfm_metric_add(m, "a b w0 d f g", 12, rp, rl, 1, &err) == TFM_OK);
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    tfm_score_format f = tfm_score_format_default();
    f.compact = true;
    f.nrefs = 1;
    tfm_buf want;
    tfm_buf_init(&want);
    tfm_metric_format(m, &s, &f, &want);
    CHECK_MSG(strncmp(text_of(&one.out.lines), text_of(&want), want.len) == 0 &&
              one.out.lines.data[want.len] == '\n', "%s", text_of(&want));
    tfm_buf_free(&want);
    tfm_metric_free(m);
    run_free(&one);
    run_free(&four);
    free(hyp);
    free(ref);
}

/* Files of different lengths: both counts named, whichever is shorter,
 * after each file is read to its end. */
static void test_length_mismatch(void)
{
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    const char *shorter_ref[] = {"a\nb\nc\n", "a\nb\n"};
    run r;
    run_scorer(&r, &p, shorter_ref, 1, 1);
    CHECK(r.status == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(r.err.msg, "hypotheses in h0 have 3 lines but r0 has 2 lines") == 0, "%s",
              r.err.msg);
    CHECK(r.at.file == NULL && r.at.line == 0);
    run_free(&r);

    const char *longer_second_ref[] = {"a\n", "a\n", "a\nb\nc\nd\n"};
    run_scorer(&r, &p, longer_second_ref, 1, 2);
    CHECK(r.status == TFM_ERR_FORMAT);
    CHECK_MSG(strcmp(r.err.msg, "hypotheses in h0 have 1 line but r1 has 4 lines") == 0, "%s",
              r.err.msg);
    run_free(&r);

    const char *empty[] = {"", ""};
    run_scorer(&r, &p, empty, 1, 1);
    CHECK(r.status == TFM_ERR_FORMAT && strstr(r.err.msg, "no lines to score") != NULL);
    run_free(&r);
}

/* A bad line in the middle: the rows before it are written, then the run
 * stops at its file and line. */
static void test_clean_prefix(void)
{
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    p.sentence = true;
    p.strict = true;
    const char *bad_utf8[] = {"a b\nc d\ne \xff f\ng\n", "a b\nc d\ne f\ng\n"};
    run r;
    run_scorer(&r, &p, bad_utf8, 1, 1);
    CHECK(r.status == TFM_ERR_UTF8);
    CHECK(r.out.n_lines == 2);
    CHECK(r.at.file && strcmp(r.at.file, "h0") == 0 && r.at.line == 3);
    CHECK_MSG(strcmp(r.err.msg, "invalid UTF-8 at byte 3") == 0, "%s", r.err.msg);
    run_free(&r);

    /* not strict: repaired, with a warning naming the file and line */
    p.strict = false;
    run_scorer(&r, &p, bad_utf8, 1, 1);
    CHECK(r.status == TFM_OK && r.out.n_lines == 4);
    CHECK(r.out.n_warnings == 1);
    CHECK_MSG(strcmp(r.out.warnings[0], "h0:3: invalid UTF-8 replaced by U+FFFD (1 sequence)") == 0,
              "%s", r.out.warnings[0]);
    run_free(&r);

    /* a reference line that is empty, or of spaces (emptied by the strip):
     * a reference of no words, scored as sacreBLEU 2.3.1 scores it (TER:
     * 100 for that line, even against an empty hypothesis) */
    p.metric = tfm_metric_default_params(TFM_METRIC_TER);
    const char *empty_ref[] = {"a b\nc d\n\ng\n", "a b\nc d\n   \ng\n"};
    run_scorer(&r, &p, empty_ref, 1, 1);
    CHECK_MSG(r.status == TFM_OK && r.out.n_lines == 4 && r.out.n_warnings == 0, "%s",
              r.err.msg);
    const char *third = text_of(&r.out.lines);
    for (int i = 0; i < 2 && third; i++) third = strchr(third, '\n') + 1;
    const char *eq = third ? strchr(third, '=') : NULL;
    CHECK(eq && strncmp(eq, "= 100.0\n", 8) == 0);
    run_free(&r);
    p.sentence = false;
    run_scorer(&r, &p, empty_ref, 1, 1);
    CHECK(r.status == TFM_OK && tfm_metric_count(tfm_file_scorer_metric(r.s, 0)) == 4);
    run_free(&r);
}

/* Two systems: the paired test's table names them by label. */
static void test_paired(void)
{
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    p.paired = true;
    p.bootstrap.n_samples = 20;
    char *base = rows_text(40, false), *ref = rows_text(40, true);
    const char *data[] = {base, ref, ref};
    run r;
    run_scorer(&r, &p, data, 2, 1);
    CHECK(r.status == TFM_OK);
    tfm_buf text;
    tfm_buf_init(&text);
    tfm_error err;
    CHECK(tfm_file_scorer_format(r.s, &text, &err) == TFM_OK);
    CHECK_MSG(strstr(text_of(&text), "baseline") && strstr(text_of(&text), "h0") &&
              strstr(text_of(&text), "h1") && strstr(text_of(&text), "(p = "), "%s",
              text_of(&text));
    tfm_buf_free(&text);
    run_free(&r);
    free(base);
    free(ref);

    /* a paired test needs two systems */
    tfm_file_scorer *s;
    tfm_score_input in[2] = {{.name = "a"}, {.name = "b"}};
    CHECK(tfm_file_scorer_create(&p, in, 1, 1, &s, &err) == TFM_ERR_ARG && s == NULL);
}

static void test_metric_names(void)
{
    tfm_metric_params p;
    CHECK(tfm_metric_parse_name("chrf++", &p) && p.kind == TFM_METRIC_CHRF && p.word_order == 2);
    CHECK(tfm_metric_parse_name("chrf", &p) && p.kind == TFM_METRIC_CHRF && p.word_order == 0);
    CHECK(tfm_metric_parse_name("ter", &p) && p.kind == TFM_METRIC_TER);
    CHECK(tfm_metric_parse_name("bleu", &p) && p.kind == TFM_METRIC_BLEU && p.max_order == 4);
    CHECK(!tfm_metric_parse_name("BLEU", &p) && !tfm_metric_parse_name("chrf+", &p));
}

/* Each rule between the parameters refuses its case and names an option;
 * what the rules allow passes. */
static void test_params_validate(void)
{
    tfm_error err;
    tfm_file_scorer_params p = tfm_file_scorer_default_params();
    CHECK(tfm_file_scorer_params_validate(&p, 0, &err) == TFM_OK);
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_OK);
    CHECK(tfm_file_scorer_params_validate(&p, 2, &err) == TFM_ERR_ARG && strstr(err.msg, "--paired-bs"));
    p.paired = true;
    CHECK(tfm_file_scorer_params_validate(&p, 3, &err) == TFM_OK);
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_ERR_ARG && strstr(err.msg, "BASELINE"));
    p.confidence = true;
    CHECK(tfm_file_scorer_params_validate(&p, 3, &err) == TFM_ERR_ARG && strstr(err.msg, "--confidence"));
    p.paired = false;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_OK);
    p.sentence = true;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_ERR_ARG && strstr(err.msg, "--sentence"));
    p = tfm_file_scorer_default_params();
    CHECK(tfm_metric_parse_name("chrf", &p.metric));
    p.metric.char_order = 0;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_ERR_ARG && strstr(err.msg, "--char-order"));
    p.metric.word_order = 2;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_OK);
    p = tfm_file_scorer_default_params();
    p.metric.smooth_value = 0.5;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_ERR_ARG && strstr(err.msg, "--smooth-value"));
    p.metric.smooth = TFM_BLEU_SMOOTH_ADD_K;
    CHECK(tfm_file_scorer_params_validate(&p, 1, &err) == TFM_OK);
}

/* Options by sacreBLEU's names set their field, and a bad value is refused
 * with the option named and what it takes. */
static void test_metric_options(void)
{
    tfm_error err;
    tfm_metric_params p = tfm_metric_default_params(TFM_METRIC_CHRF);
    CHECK(tfm_metric_params_set(&p, "char-order", "4", &err) == TFM_OK && p.char_order == 4);
    CHECK(tfm_metric_params_set(&p, "beta", "3", &err) == TFM_OK && p.beta == 3);
    CHECK(tfm_metric_params_set(&p, "whitespace", NULL, &err) == TFM_OK && p.whitespace);
    CHECK(tfm_metric_params_set(&p, "tokenize", "intl", &err) == TFM_OK &&
          p.tokenize == TFM_BLEU_TOK_INTL);
    CHECK(tfm_metric_params_set(&p, "smooth", "floor", &err) == TFM_OK &&
          p.smooth == TFM_BLEU_SMOOTH_FLOOR);
    CHECK(tfm_metric_params_set(&p, "smooth-value", "0.25", &err) == TFM_OK && p.smooth_value == 0.25);
    CHECK(tfm_metric_params_set(&p, "no-punct", NULL, &err) == TFM_OK && p.no_punct);
    CHECK(tfm_metric_params_set(&p, "char-order", "11", &err) == TFM_ERR_ARG &&
          strcmp(err.msg, "--char-order: 11 is out of range (0 to 10)") == 0);
    CHECK(tfm_metric_params_set(&p, "beta", "2x", &err) == TFM_ERR_ARG &&
          strcmp(err.msg, "--beta: '2x' is not an integer") == 0);
    CHECK(tfm_metric_params_set(&p, "smooth-value", "nan", &err) == TFM_ERR_ARG &&
          strstr(err.msg, "not a number"));
    CHECK(tfm_metric_params_set(&p, "tokenize", "13b", &err) == TFM_ERR_ARG &&
          strcmp(err.msg, "--tokenize: '13b' is not one of: 13a, intl, zh, char, none") == 0);
    CHECK(tfm_metric_params_set(&p, "tokenize", NULL, &err) == TFM_ERR_ARG);
    CHECK(tfm_metric_params_set(&p, "force", NULL, &err) == TFM_ERR_ARG);
    CHECK(p.char_order == 4 && p.beta == 3); /* a refused value changes nothing */
}

/* A paired test's systems: repeats of the baseline left out and counted,
 * another repeat refused, at least one system left. */
static void test_paired_systems(void)
{
    tfm_error err;
    const char *names[] = {"base", "a", "base", "b", "base"};
    int n = 5, repeats = -1;
    CHECK(tfm_paired_systems(names, &n, &repeats, &err) == TFM_OK && n == 3 && repeats == 2);
    CHECK(strcmp(names[1], "a") == 0 && strcmp(names[2], "b") == 0);
    const char *twice[] = {"base", "a", "a"};
    n = 3;
    CHECK(tfm_paired_systems(twice, &n, &repeats, &err) == TFM_ERR_ARG &&
          strcmp(err.msg, "a is given twice") == 0);
    const char *alone[] = {"base", "base"};
    n = 2;
    CHECK(tfm_paired_systems(alone, &n, &repeats, &err) == TFM_ERR_ARG && strstr(err.msg, "besides"));
}

int main(void)
{
    RUN(test_params_validate);
    RUN(test_metric_options);
    RUN(test_paired_systems);
    RUN(test_corpus_in_step);
    RUN(test_sentences_in_order);
    RUN(test_length_mismatch);
    RUN(test_clean_prefix);
    RUN(test_paired);
    RUN(test_metric_names);
    CHECK_DONE();
}
