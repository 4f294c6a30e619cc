/* test_score_pairs.c - sentence pairs scored under a model
 * (lib/train/score_pairs.c), as 'score -m' scores them: each line is the
 * pair's log-probability from tfm_model_loss on the pair alone, the same
 * whatever the batch size, in input order; per-token log-probs sum to it;
 * sources and targets of different lengths are named with both counts
 * after the pairs before are written; a bad line in the middle stops the
 * run at its file and line after the lines before it; a target too long
 * gets an empty line and a warning; n-best lines get the feature, and a
 * list out of the sources' order, or short of them, is an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testfiles.h"
#include "testmodel.h"
#include "tfm/view.h"

#define V 40 /* the vocabulary of the tiny test model */

/* What a run wrote: its lines, and its warnings. */
typedef struct sink {
    char lines[16][512];
    size_t n_lines;
    char warnings[4][600];
    size_t n_warnings;
    size_t flushes;
} sink;

static void sink_line(void *ctx, const char *text, size_t len)
{
    sink *s = ctx;
    if (s->n_lines < 16) snprintf(s->lines[s->n_lines], sizeof s->lines[0], "%.*s", (int)len, text);
    s->n_lines++;
}

static void sink_warning(void *ctx, const char *file, size_t line, const char *msg)
{
    sink *s = ctx;
    if (s->n_warnings < 4)
        snprintf(s->warnings[s->n_warnings], sizeof s->warnings[0], "%s:%zu: %s", file, line, msg);
    s->n_warnings++;
}

static void sink_flush(void *ctx)
{
    ((sink *)ctx)->flushes++;
}

typedef struct run {
    tfm_status status;
    tfm_score_failure at;
    tfm_error err;
    tfm_pair_scores totals;
    sink out;
} run;

/* Scores the lines of src and tgt ("src" and "tgt" in messages). */
static void score(run *r, const tfm_model *m, const tfm_pair_scorer_params *p, const char *src,
                  const char *tgt)
{
    memset(r, 0, sizeof *r);
    FILE *fp[2] = {file_with(src), file_with(tgt)};
    tfm_line_reader *lines[2] = {tfm_lines_create(fileno(fp[0])), tfm_lines_create(fileno(fp[1]))};
    tfm_score_input in[2] = {{.name = "src", .lines = lines[0]}, {.name = "tgt", .lines = lines[1]}};
    tfm_score_output o = {&r->out, sink_line, sink_warning, sink_flush};
    r->status = tfm_score_pairs(m, p, &in[0], &in[1], &o, &r->totals, &r->at, &r->err);
    for (int k = 0; k < 2; k++) {
        tfm_lines_free(lines[k]);
        fclose(fp[k]);
    }
}

static tfm_model *tiny_model(int max_positions)
{
    tfm_config c;
    tfm_config_preset("tiny", &c, NULL);
    c.src_vocab_size = c.tgt_vocab_size = V;
    if (max_positions) c.max_positions = max_positions;
    return test_nudged_model(&c, 7);
}

/* log p(tgt + </s> | src + </s>) from the forward pass on the pair alone. */
static double pair_logprob(const tfm_model *m, const int32_t *src, int ns, const int32_t *tgt,
                           int nt)
{
    int32_t s[16];
    memcpy(s, src, (size_t)ns * sizeof *s);
    s[ns++] = m->config.eos_id;
    const int32_t *sp[1] = {s}, *tp[1] = {tgt};
    int sl[1] = {ns}, tl[1] = {nt};
    tfm_pair_batch b = {.B = 1, .src = sp, .src_lens = sl, .tgt = tp, .tgt_lens = tl};
    tfm_pass_workspace *ws;
    tfm_error err;
    double lp = 0;
    CHECK(tfm_pass_workspace_create(m, &ws, &err) == TFM_OK);
    CHECK_MSG(tfm_model_loss(ws, &b, false, NULL, NULL, &lp, NULL, &err) == TFM_OK, "%s", err.msg);
    tfm_pass_workspace_free(ws);
    return lp;
}

static const char src4[] = "5 6 7\n8\n9 10 11 12\n13 14\n";
static const char tgt4[] = "20 21\n22 23 24\n25\n26 27 28\n";

static void test_pairs(void)
{
    tfm_model *m = tiny_model(0);
    if (!m) return;
    tfm_pair_scorer_params p = tfm_pair_scorer_default_params();
    run one, all;
    p.batch_size = 1;
    score(&one, m, &p, src4, tgt4);
    p.batch_size = 64;
    score(&all, m, &p, src4, tgt4);
    CHECK_MSG(one.status == TFM_OK && all.status == TFM_OK, "%s %s", one.err.msg, all.err.msg);
    CHECK(one.out.n_lines == 4 && all.out.n_lines == 4 && all.out.n_warnings == 0);
    double total, average;
    CHECK(sscanf(all.out.lines[2], "%lf\t%lf", &total, &average) == 2);
    const int32_t s3[] = {9, 10, 11, 12}, t3[] = {25};
    CHECK_NEAR(total, pair_logprob(m, s3, 4, t3, 1), 1e-4);
    CHECK_NEAR(average, total / 2, 1e-6);
    for (int i = 0; i < 4; i++) { /* batched = one at a time, in order */
        double a, b;
        CHECK(sscanf(one.out.lines[i], "%lf", &a) == 1 && sscanf(all.out.lines[i], "%lf", &b) == 1);
        CHECK_NEAR(a, b, 1e-4);
    }
    CHECK(all.totals.n_pairs == 4 && all.totals.n_tokens == 3 + 4 + 2 + 4);

    /* per token: the labels' log-probs, </s> last, summing to the total */
    p.per_token = true;
    score(&one, m, &p, src4, tgt4);
    const char *tab = strchr(one.out.lines[1], '\t');
    tab = tab ? strchr(tab + 1, '\t') : NULL;
    double sum = 0, x;
    int n = 0, used;
    for (const char *q = tab ? tab + 1 : ""; sscanf(q, "%lf%n", &x, &used) == 1; q += used, n++)
        sum += x;
    CHECK(n == 4);
    CHECK(sscanf(one.out.lines[1], "%lf", &total) == 1);
    CHECK_NEAR(sum, total, 1e-4);
    tfm_model_free(m);
}

/* Different lengths, and a bad line in the middle: the lines before are
 * written, then the run stops saying where. */
static void test_failures(void)
{
    tfm_model *m = tiny_model(0);
    if (!m) return;
    tfm_pair_scorer_params p = tfm_pair_scorer_default_params();
    p.batch_size = 2;
    run r;
    score(&r, m, &p, src4, "20 21\n22 23 24\n25\n");
    CHECK(r.status == TFM_ERR_FORMAT && r.out.n_lines == 3);
    CHECK_MSG(strcmp(r.err.msg, "sources in src have 4 lines but targets in tgt have 3 lines") == 0,
              "%s", r.err.msg);
    CHECK(r.at.file == NULL && r.at.line == 0);
    CHECK(r.out.flushes >= 1); /* before the rest is counted */

    score(&r, m, &p, src4, "20 21\n22 23 24\n25 x\n26\n");
    CHECK(r.status == TFM_ERR_FORMAT && r.out.n_lines == 2);
    CHECK(r.at.file && strcmp(r.at.file, "tgt") == 0 && r.at.line == 3);
    CHECK_MSG(strstr(r.err.msg, "'x'") != NULL, "%s", r.err.msg);

    score(&r, m, &p, src4, "20 21\n22 0 24\n25\n26\n"); /* <pad> cannot be scored */
    CHECK(r.status == TFM_ERR_FORMAT && r.out.n_lines == 1);
    CHECK(r.at.file && strcmp(r.at.file, "tgt") == 0 && r.at.line == 2);
    CHECK(strstr(r.err.msg, "is <pad>") != NULL);

    score(&r, m, &p, "5\n99\n", "20\n21\n"); /* an id beyond the vocabulary */
    CHECK(r.status != TFM_OK && r.out.n_lines == 1);
    CHECK(r.at.file && strcmp(r.at.file, "src") == 0 && r.at.line == 2);
    tfm_model_free(m);

    /* a target longer than the model takes: an empty line and a warning */
    m = tiny_model(4);
    if (!m) return;
    score(&r, m, &p, "5\n6\n7\n", "20\n21 22 23 24 25\n26\n");
    CHECK(r.status == TFM_OK && r.out.n_lines == 3 && r.out.lines[1][0] == 0);
    CHECK(r.out.lines[0][0] && r.out.lines[2][0]);
    CHECK(r.totals.n_unusable == 1 && r.totals.n_pairs == 2);
    CHECK(r.out.n_warnings == 1 && strncmp(r.out.warnings[0], "tgt:2: the target has 5 ids", 27) == 0);
    tfm_model_free(m);
}

static void test_nbest(void)
{
    tfm_model *m = tiny_model(0);
    if (!m) return;
    tfm_pair_scorer_params p = tfm_pair_scorer_default_params();
    p.nbest = true;
    p.feature = "LM";
    run r, plain;
    score(&r, m, &p, "5 6\n7\n", "0 ||| 20 21 ||| F0= -1 ||| -1\n0 ||| 22 ||| F0= -2 ||| -2\n"
                                 "1 ||| 23 ||| F0= -3 ||| -3\n");
    CHECK_MSG(r.status == TFM_OK && r.out.n_lines == 3, "%s", r.err.msg);
    double lm;
    CHECK(sscanf(r.out.lines[2], "1 ||| 23 ||| F0= -3 LM= %lf ||| -3", &lm) == 1);
    /* the same number as the pair (7, 23) scored alone */
    tfm_pair_scorer_params pp = tfm_pair_scorer_default_params();
    score(&plain, m, &pp, "7\n", "23\n");
    double total;
    CHECK(sscanf(plain.out.lines[0], "%lf", &total) == 1);
    CHECK_NEAR(lm, total, 1e-5);

    score(&r, m, &p, "5\n6\n", "1 ||| 20 ||| ||| 0\n0 ||| 21 ||| ||| 0\n");
    CHECK(r.status == TFM_ERR_FORMAT && r.out.n_lines == 1);
    CHECK(r.at.file && strcmp(r.at.file, "tgt") == 0 && r.at.line == 2);
    CHECK(strstr(r.err.msg, "must follow the order of the sources") != NULL);

    score(&r, m, &p, "5\n6\n7\n", "0 ||| 20 ||| ||| 0\n1 ||| 21 ||| ||| 0\n");
    CHECK(r.status == TFM_ERR_FORMAT && r.out.n_lines == 2);
    CHECK_MSG(strcmp(r.err.msg, "the n-best list in tgt covers 2 sentences but the sources in "
                     "src have 3 lines") == 0, "%s", r.err.msg);
    tfm_model_free(m);
}

/* per_token refuses an n-best list, a feature name needs one and a name
 * without spaces, '|' or '='. */
static void test_params_validate(void)
{
    tfm_error err;
    tfm_pair_scorer_params p = tfm_pair_scorer_default_params();
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_OK);
    p.per_token = true;
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_OK);
    p.nbest = true;
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_ERR_ARG && strstr(err.msg, "--per-token"));
    p.per_token = false;
    p.feature = "LM0";
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_OK);
    p.feature = "a b";
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_ERR_ARG && strstr(err.msg, "'a b'"));
    p.nbest = false;
    p.feature = "LM0";
    CHECK(tfm_pair_scorer_params_validate(&p, &err) == TFM_ERR_ARG && strstr(err.msg, "--nbest-feature"));
}

/* The corpus summary: exp(-sum / tokens), the counts, the unscored. */
static void test_summary(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_pair_scores t = {.sum_logprob = -2.0 * 10, .n_tokens = 10, .n_pairs = 1};
    CHECK(tfm_pair_scores_format(&t, &b) == TFM_OK);
    CHECK_MSG(strcmp(b.data, "perplexity 7.3891 over 10 target tokens (</s> included) of 1 pair; "
                     "mean log-prob -2.000000 per token") == 0, "%s", b.data);
    b.len = 0;
    t = (tfm_pair_scores){.n_unusable = 2};
    CHECK(tfm_pair_scores_format(&t, &b) == TFM_OK);
    CHECK_MSG(strcmp(b.data, "no pairs scored: no perplexity; 2 targets too long for the model "
                     "had no score") == 0, "%s", b.data);
    tfm_buf_free(&b);
}

int main(void)
{
    RUN(test_summary);
    RUN(test_params_validate);
    RUN(test_pairs);
    RUN(test_failures);
    RUN(test_nbest);
    CHECK_DONE();
}
