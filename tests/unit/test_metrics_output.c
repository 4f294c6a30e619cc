/* test_metrics_output.c - what is made of the metrics' statistics besides
 * a score, against sacreBLEU: the exact text and JSON it prints, for one
 * system and for paired systems; decode --nbest's lines, written and read
 * back; the bootstrap (deterministic, independent of threads, p-values that
 * behave); and statistics gathered elsewhere and added, which score as
 * those gathered in place.  The scores themselves: test_metrics.c. */
#include <string.h>

#include "check.h"
#include "testmetric.h"
#include "tfm.h"

/* ---- formats ---------------------------------------------------------------------------------- */

static void test_json(void)
{
    tfm_buf b;
    tfm_buf_init(&b);
    const struct { double x; int w; const char *want; } nums[] = {
        {34.123, 1, "34.1"}, {0.0, 1, "0.0"}, {100.0, 2, "100.0"}, {48.530827, 2, "48.53"},
        {12.0, 0, "12.0"}, {0.05, 4, "0.05"}, {2.5, 0, "2.0"},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        tfm_buf_clear(&b);
        CHECK(tfm_json_number(nums[i].x, nums[i].w, &b) == TFM_OK);
        CHECK_STR(b.data, nums[i].want);
    }
    tfm_score_format f = tfm_score_format_default();
    f.json = true;
    f.has_ci = true;
    f.mean = 48.4;
    f.ci = 1.25;
    f.n_bootstrap = 1000;
    f.seed = 12345;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "{\n"
                      " \"name\": \"BLEU\",\n"
                      " \"score\": 48.5,\n"
                      " \"signature\": \"nrefs:2|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1\",\n"
                      " \"confidence_mean\": 48.4,\n"
                      " \"confidence_var\": 1.2,\n"
                      " \"confidence\": \"μ = 48.4 ± 1.2\",\n"
                      " \"verbose_score\": \"82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\",\n"
                      " \"nrefs\": \"2\",\n"
                      " \"bs\": \"1000\",\n"
                      " \"seed\": \"12345\",\n"
                      " \"case\": \"mixed\",\n"
                      " \"eff\": \"no\",\n"
                      " \"tok\": \"13a\",\n"
                      " \"smooth\": \"exp\",\n"
                      " \"version\": \"2.3.1\"\n"
                      "}");
    f.json = false;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "BLEU|nrefs:2|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 "
                      "= 48.5 (μ = 48.4 ± 1.2) 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
    f.score_only = true;
    f.json = true;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "48.5 (μ = 48.4 ± 1.2)"); /* sacreBLEU: -b wins over -f json */
    f.score_only = false;
    f.compact = true;
    f.json = true;
    f.has_ci = false;
    f.n_bootstrap = 0;
    format_of(ter(), &readme, f, &b);
    CHECK_STR(b.data, "{\"name\": \"TER\", \"score\": 40.0, \"signature\": \"nrefs:2|case:lc|tok:tercom|"
                      "norm:no|punct:yes|asian:no|version:2.3.1\", \"nrefs\": \"2\", \"case\": \"lc\", "
                      "\"tok\": \"tercom\", \"norm\": \"no\", \"punct\": \"yes\", \"asian\": \"no\", "
                      "\"version\": \"2.3.1\"}");
    tfm_buf_free(&b);
}

/* The table of a paired test, in its three forms, with numbers set by hand. */
static void test_paired_format(void)
{
    tfm_metric *m = make(bleu());
    tfm_paired_row rows[3] = {
        {.file = "-", .label = "standard input"},
        {.file = "b\"\t.txt", .r = {.base_score = 30.04, .base_mean = 30.01, .base_ci = 1.26,
                                     .sys_score = 33.14, .sys_mean = 33.09, .sys_ci = 1.05,
                                     .p_value = 0.000999}},
        {.file = "c.txt", .r = {.base_score = 30.04, .base_mean = 30.01, .base_ci = 1.26,
                                .sys_score = 30.0, .sys_mean = 0, .sys_ci = 0, .p_value = 0.5}},
    };
    tfm_score_format f = tfm_score_format_default();
    f.n_bootstrap = 1000;
    f.seed = 12345;
    tfm_buf b;
    tfm_buf_init(&b);
    const char *sig = "nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1";
    CHECK(tfm_paired_format(m, rows, 3, &f, &b) == TFM_OK);
    char want[1024];
    snprintf(want, sizeof want, "BLEU|%s\n"
             "baseline\t30.0 (μ = 30.0 ± 1.3)\t\tstandard input\n"
             "system\t33.1 (μ = 33.1 ± 1.1)\t(p = 0.0010)*\tb\"\t.txt\n"
             "system\t30.0\t(p = 0.5000)\tc.txt", sig); /* no interval when the mean is 0 */
    CHECK_STR(b.data, want);
    /* JSON: the file as given, escaped by cJSON; numbers as sacreBLEU's JSON shows them. */
    tfm_buf_clear(&b);
    f.json = true;
    CHECK(tfm_paired_format(m, rows, 3, &f, &b) == TFM_OK);
    snprintf(want, sizeof want, "{\n"
             " \"name\": \"BLEU\",\n"
             " \"signature\": \"%s\",\n"
             " \"test\": \"paired-bs\",\n"
             " \"n_samples\": 1000,\n"
             " \"seed\": 12345,\n"
             " \"systems\": [\n"
             "  {\"file\": \"-\", \"baseline\": true, \"score\": 30.0, \"confidence_mean\": 30.0, "
             "\"confidence_var\": 1.3},\n"
             "  {\"file\": \"b\\\"\\t.txt\", \"baseline\": false, \"score\": 33.1, "
             "\"confidence_mean\": 33.1, \"confidence_var\": 1.1, \"p_value\": 0.001},\n"
             "  {\"file\": \"c.txt\", \"baseline\": false, \"score\": 30.0, "
             "\"confidence_mean\": 0.0, \"confidence_var\": 0.0, \"p_value\": 0.5}\n"
             " ]\n"
             "}", sig);
    CHECK_STR(b.data, want);
    /* -b: the numbers alone, even with JSON asked for. */
    tfm_buf_clear(&b);
    f.score_only = true;
    f.width = 2;
    CHECK(tfm_paired_format(m, rows, 3, &f, &b) == TFM_OK);
    CHECK_STR(b.data, "30.04\n33.14\t0.0010\n30.00\t0.5000");
    CHECK(tfm_paired_format(m, rows, 1, &f, &b) == TFM_ERR_ARG);
    tfm_buf_free(&b);
    tfm_metric_free(m);
}

/* ---- n-best lists ------------------------------------------------------------------------------ */

/* The fields of e as "index|hyp|features|rest", rest from the score's "|||". */
static const char *nbest_fields(const tfm_nbest_entry *e, char *out, size_t size)
{
    snprintf(out, size, "%zu|%.*s|%.*s|%.*s", e->index, (int)e->hyp_len, e->hyp,
             (int)e->features_len, e->features, (int)(e->len - e->score_at), e->line + e->score_at);
    return out;
}

/* decode --nbest's line: the fields as the parser reads them back. */
static void test_nbest_format(void)
{
    tfm_buf out;
    tfm_buf_init(&out);
    const int32_t ids[3] = {17, 9, 4};
    CHECK(tfm_nbest_format(3, ids, 3, -2.5, -2.484, &out) == TFM_OK);
    CHECK_MSG(strcmp(out.data, "3 ||| 17 9 4 ||| F0= -2.500000 ||| -2.484000\n") == 0, "%s", out.data);
    tfm_nbest_entry e;
    tfm_error err;
    CHECK(tfm_nbest_parse(out.data, out.len - 1, &e, &err) == TFM_OK);
    CHECK(e.index == 3 && e.hyp_len == 6 && memcmp(e.hyp, "17 9 4", 6) == 0);
    CHECK(e.features_len == 13 && memcmp(e.features, "F0= -2.500000", 13) == 0);
    tfm_buf_clear(&out);
    CHECK(tfm_nbest_format(0, NULL, 0, 0.0, 0.0, &out) == TFM_OK); /* the empty hypothesis */
    CHECK_MSG(strcmp(out.data, "0 |||  ||| F0= 0.000000 ||| 0.000000\n") == 0, "%s", out.data);
    CHECK(tfm_nbest_parse(out.data, out.len - 1, &e, &err) == TFM_OK && e.hyp_len == 0);
    tfm_buf_free(&out);
}

static void test_nbest(void)
{
    static const struct { const char *line, *fields, *scored; } good[] = {
        /* decode --nbest's lines */
        {"0 ||| 5 6 7 ||| F0= -1.500000 ||| -1.500000", "0|5 6 7|F0= -1.500000|||| -1.500000",
         "0 ||| 5 6 7 ||| F0= -1.500000 Score= -2.250000 ||| -1.500000"},
        /* tabs and extra spaces around the fields; text hypotheses */
        {"\t12\t|||\t the cat \t|||  a= 1 b= 2  |||-3", "12|the cat|a= 1 b= 2||||-3",
         "\t12\t|||\t the cat \t||| a= 1 b= 2 Score= -2.250000 |||-3"},
        /* an empty hypothesis and empty features */
        {"3 |||  |||  ||| -1", "3|||||| -1", "3 |||  ||| Score= -2.250000 ||| -1"},
        {"3||||||", "3|||", "3|||||| Score= -2.250000"},
        /* no score field, or not even features */
        {"1 ||| 8 ||| F0= 2", "1|8|F0= 2|", "1 ||| 8 ||| F0= 2 Score= -2.250000"},
        {"1 ||| 8 |||", "1|8||", "1 ||| 8 ||| Score= -2.250000"},
        /* more fields than four: the rest is kept as it is */
        {"7 ||| 1 ||| f= 1 ||| -1 ||| extra", "7|1|f= 1|||| -1 ||| extra",
         "7 ||| 1 ||| f= 1 Score= -2.250000 ||| -1 ||| extra"},
        /* the largest index */
        {"18446744073709551615 ||| 1 |||", "18446744073709551615|1||",
         "18446744073709551615 ||| 1 ||| Score= -2.250000"},
    };
    tfm_nbest_entry e;
    tfm_error err;
    tfm_buf b;
    tfm_buf_init(&b);
    char got[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        tfm_status s = tfm_nbest_parse(good[i].line, strlen(good[i].line), &e, &err);
        CHECK_MSG(s == TFM_OK, "%s: %s", good[i].line, err.msg);
        if (s != TFM_OK) continue;
        CHECK_STR(nbest_fields(&e, got, sizeof got), good[i].fields);
        tfm_buf_clear(&b);
        CHECK(tfm_nbest_add_feature(&e, TFM_NBEST_FEATURE, -2.25, &b, &err) == TFM_OK);
        CHECK_STR(b.data, good[i].scored);
    }
    /* Each malformed case: fewer than two "|||", a first field that is not a
     * number (or too large for one). */
    static const struct { const char *line, *msg; } bad[] = {
        {"", "not an n-best line"},
        {"0 5 6", "not an n-best line"},
        {"0 ||| 5 6", "not an n-best line"},
        {"0 || 5 || F0= 1", "not an n-best line"},
        {"zero ||| 5 |||", "the first field of an n-best line must be the 0-based number of its "
                           "source line, not 'zero '"},
        {" ||| 5 |||", "the first field of an n-best line must be"},
        {"-1 ||| 5 |||", "the first field"},
        {"1 2 ||| 5 |||", "the first field"},
        {"+1 ||| 5 |||", "the first field"},
        {"18446744073709551616 ||| 5 |||", "not '18446744073709551616'"},
        {"123456789012345678901234567890 ||| 5 |||", "not '12345678901234567890'"}, /* 20 shown */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        CHECK_MSG(tfm_nbest_parse(bad[i].line, strlen(bad[i].line), &e, &err) == TFM_ERR_FORMAT, "'%s'",
                  bad[i].line);
        CHECK_MSG(strstr(err.msg, bad[i].msg) != NULL, "'%s': %s", bad[i].line, err.msg);
    }
    /* NUL bytes are bytes: a line is its length, not a C string. */
    CHECK(tfm_nbest_parse("2 ||| a\0b ||| f= 1", 18, &e, &err) == TFM_OK && e.index == 2 &&
          e.hyp_len == 3 && memcmp(e.hyp, "a\0b", 3) == 0);
    CHECK(tfm_nbest_parse("2 ||| a\0||| f= 1", 16, &e, &err) == TFM_OK && e.hyp_len == 2);
    /* Huge fields: a megabyte of hypothesis and of features. */
    size_t big = 1u << 20;
    tfm_buf line;
    tfm_buf_init(&line);
    bool ok = tfm_buf_append(&line, "42 ||| ", 7) == TFM_OK;
    for (size_t i = 0; i < big / 2 && ok; i++) ok = tfm_buf_append(&line, "7 ", 2) == TFM_OK;
    ok = ok && tfm_buf_append(&line, "||| ", 4) == TFM_OK;
    for (size_t i = 0; i < big / 8 && ok; i++) ok = tfm_buf_append(&line, "F0= -1.5 ", 9) == TFM_OK;
    CHECK(ok && tfm_buf_append(&line, "||| -1", 6) == TFM_OK);
    CHECK(tfm_nbest_parse(line.data, line.len, &e, &err) == TFM_OK);
    CHECK(e.index == 42 && e.hyp_len == big - 1 && e.features_len == big / 8 * 9 - 1);
    tfm_buf_clear(&b);
    CHECK(tfm_nbest_add_feature(&e, "LM", 0.5, &b, &err) == TFM_OK);
    CHECK(b.len == line.len + strlen(" LM= 0.500000"));
    CHECK(b.len > 20 && memcmp(b.data + b.len - 20, " LM= 0.500000 ||| -1", 20) == 0);
    tfm_buf_free(&line);
    /* Feature names: a word without spaces, '|' or '='. */
    CHECK(tfm_nbest_feature_name_ok("Score") && tfm_nbest_feature_name_ok("LM0"));
    const char *bad_names[] = {"", "a b", "a\tb", "a|b", "a=", "|||"};
    CHECK(tfm_nbest_parse("0 ||| 1 |||", 11, &e, &err) == TFM_OK);
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        CHECK_MSG(!tfm_nbest_feature_name_ok(bad_names[i]), "'%s'", bad_names[i]);
        CHECK(tfm_nbest_add_feature(&e, bad_names[i], 1, &b, &err) == TFM_ERR_ARG);
    }
    tfm_buf_free(&b);
}

/* ---- bootstrap -------------------------------------------------------------------------------- */

/* Statistics of a synthetic corpus: segment i of the system is the
 * reference with about one word in `every` changed; the segments whose
 * number is a multiple of `other` (when > 0) have their errors elsewhere. */
static tfm_metric *synthetic(int n, int every, int other)
{
    tfm_metric_params p = bleu();
    p.keep_segments = true;
    tfm_metric *m = make(p);
    char hyp[256], ref[256];
    for (int i = 0; i < n; i++) {
        unsigned salt = other > 0 && i % other == 0 ? 1u : 0u;
        size_t nh = 0, nr = 0;
        for (int w = 0; w < 12; w++) {
            int word = (i * 7 + w * 13) % 50;
            nr += (size_t)snprintf(ref + nr, sizeof ref - nr, "%sw%d", w ? " " : "", word);
            bool wrong = ((unsigned)(i * 12 + w) * 2654435761u >> 7 ^ salt * 0x9e37u) % (unsigned)every == 0;
            nh += (size_t)snprintf(hyp + nh, sizeof hyp - nh, "%s%s%d", w ? " " : "", wrong ? "x" : "w", word);
        }
        const char *refs[1] = {ref};
        size_t lens[1] = {nr};
        tfm_error err;
        CHECK(tfm_metric_add(m, hyp, nh, refs, lens, 1, &err) == TFM_OK);
    }
    return m;
}

static void test_bootstrap(void)
{
    tfm_metric *m = synthetic(300, 4, 0);
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    tfm_bootstrap_params bp = tfm_bootstrap_default_params();
    double mean1, ci1, mean2, ci2;
    tfm_error err;
    CHECK(tfm_metric_bootstrap(m, tfm_metric_segments(m), tfm_metric_count(m), &bp, &mean1, &ci1, &err) == TFM_OK);
    CHECK_MSG(fabs(mean1 - s.score) < 1.0 && ci1 > 0.1 && ci1 < 5, "score %g mean %g ci %g", s.score, mean1, ci1);
    CHECK_MSG(fabs(mean1 - s.score) < ci1, "the interval holds the score");
    /* The same seed gives the same numbers, whatever the thread count. */
    bp.n_threads = 3;
    CHECK(tfm_metric_bootstrap(m, tfm_metric_segments(m), tfm_metric_count(m), &bp, &mean2, &ci2, &err) == TFM_OK);
    CHECK(mean1 == mean2 && ci1 == ci2);
    /* Another seed gives other resamples. */
    bp.seed = 7;
    CHECK(tfm_metric_bootstrap(m, tfm_metric_segments(m), tfm_metric_count(m), &bp, &mean2, &ci2, &err) == TFM_OK);
    CHECK(mean1 != mean2);
    CHECK(tfm_metric_bootstrap(m, NULL, 0, &bp, &mean2, &ci2, &err) == TFM_ERR_ARG);
    tfm_metric_free(m);
}

static void test_paired_bootstrap(void)
{
    tfm_metric *base = synthetic(300, 4, 0), *same = synthetic(300, 4, 0);
    tfm_metric *better = synthetic(300, 12, 0), *close = synthetic(300, 4, 50);
    tfm_bootstrap_params bp = tfm_bootstrap_default_params();
    tfm_paired_result r;
    tfm_error err;
    size_t n = tfm_metric_count(base);
    /* The same system: every resampled difference is 0, nothing exceeds the
     * real difference of 0, p = 1 / (n + 1) exactly as in sacreBLEU. */
    CHECK(tfm_metric_paired_bootstrap(base, tfm_metric_segments(base), tfm_metric_segments(same), n, &bp, &r, &err) == TFM_OK);
    CHECK_NEAR(r.p_value, 1.0 / 1001, 1e-12);
    CHECK(r.base_score == r.sys_score && r.base_mean == r.sys_mean);
    /* A much better system: significant. */
    CHECK(tfm_metric_paired_bootstrap(base, tfm_metric_segments(base), tfm_metric_segments(better), n, &bp, &r, &err) == TFM_OK);
    CHECK_MSG(r.sys_score > r.base_score + 5 && r.p_value < 0.01, "%g vs %g, p %g", r.sys_score, r.base_score, r.p_value);
    /* The baseline's interval does not depend on the system it is paired with. */
    double base_mean = r.base_mean, base_ci = r.base_ci;
    /* A system that differs in 6 segments of 300: not significant. */
    CHECK(tfm_metric_paired_bootstrap(base, tfm_metric_segments(base), tfm_metric_segments(close), n, &bp, &r, &err) == TFM_OK);
    CHECK_MSG(r.p_value > 0.05, "similar systems: p %g (%g vs %g)", r.p_value, r.base_score, r.sys_score);
    CHECK(r.base_mean == base_mean && r.base_ci == base_ci);
    tfm_metric_free(base);
    tfm_metric_free(same);
    tfm_metric_free(better);
    tfm_metric_free(close);
}

/* Streaming equals batch: statistics gathered by another metric object and
 * added with tfm_metric_add_stats give the same corpus score. */
static void test_add_stats(void)
{
    tfm_metric *a = make(chrf()), *b = make(chrf());
    CHECK(add_corpus(a, &readme) == TFM_OK);
    double st[TFM_CHRF_MAX_ORDER * 3];
    for (int i = 0; i < readme.n; i++) {
        const char *refs[2] = {readme_ref1[i], readme_ref2[i]};
        size_t lens[2] = {strlen(refs[0]), strlen(refs[1])};
        int used;
        tfm_error err;
        CHECK(tfm_metric_segment(a, readme_hyps[i], strlen(readme_hyps[i]), refs, lens, 2, st, &used, &err) == TFM_OK);
        CHECK(tfm_metric_add_stats(b, st, used, &err) == TFM_OK);
    }
    tfm_score sa, sb;
    tfm_metric_corpus_score(a, &sa);
    tfm_metric_corpus_score(b, &sb);
    CHECK(sa.score == sb.score && tfm_metric_count(b) == 3 && tfm_metric_nrefs(b) == 2);
    CHECK(tfm_metric_segments(a) == NULL);
    tfm_metric_free(a);
    tfm_metric_free(b);
}

int main(void)
{
    RUN(test_json);
    RUN(test_paired_format);
    RUN(test_nbest);
    RUN(test_nbest_format);
    RUN(test_bootstrap);
    RUN(test_paired_bootstrap);
    RUN(test_add_stats);
    CHECK_DONE();
}
