/* test_metrics.c - BLEU, chrF and TER against the numbers sacreBLEU itself
 * publishes: the cases of its test suite (mjpost/sacrebleu: test/test_bleu.py,
 * test/test_sentence_bleu.py, test/test_chrf.py, test/test_ter.py,
 * test/test_tokenizer_ter.py) and the worked example of its README, each
 * cited beside it; hand-computed cases for the tokenizers' rules (13a,
 * intl, zh, char), Python's whitespace and lowercasing, and the edges
 * (empty lines, very short and very long hypotheses); random segments, bad
 * parameters and bytes that are not UTF-8.  The text and JSON sacreBLEU
 * prints, n-best lines and the bootstrap: test_metrics_output.c. */
#include <string.h>

#include "check.h"
#include "testmetric.h"
#include "tfm.h"

static void check_tok(tfm_bleu_tok tok, const char *in, const char *want)
{
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_error err;
    CHECK(tfm_bleu_tokenize(tok, in, strlen(in), &out, &err) == TFM_OK);
    CHECK_MSG(out.data && strcmp(out.data, want) == 0, "%s(\"%s\"): got \"%s\", want \"%s\"",
              tfm_bleu_tok_name(tok), in, out.data ? out.data : "(null)", want);
    tfm_buf_free(&out);
}

/* ---- BLEU ----------------------------------------------------------------------------- */

/* README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17
 * ref_len = 18), signature nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp. */
static void test_bleu_readme(void)
{
    CHECK_NEAR(score_of(bleu(), &readme), 48.530827, 1e-6);
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_score_format f = tfm_score_format_default();
    f.width = 2;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 48.53 "
                      "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
    /* sacreBLEU's command line prints one decimal by default. */
    f.width = 1;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 48.5 "
                      "82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
    f.score_only = true;
    format_of(bleu(), &readme, f, &b);
    CHECK_STR(b.data, "48.5");
    tfm_buf_free(&b);
}

/* test/test_bleu.py, test_corpus_bleu_cases. */
static void test_bleu_corpus_cases(void)
{
    static const char *const empty[] = {"", "", ""};
    corpus no_hyps = {3, 2, empty, {readme_ref1, readme_ref2}};
    CHECK_NEAR(score_of(bleu(), &no_hyps), 0.0, 1e-8); /* empty hypotheses are not removed */
    tfm_metric_params p = bleu();
    p.tokenize = TFM_BLEU_TOK_NONE;
    CHECK_NEAR(score_of(p, &readme), 49.1919566, 1e-6);
    p.tokenize = TFM_BLEU_TOK_13A;
    CHECK_NEAR(score_of(p, &readme), 48.530827, 1e-6);
    p.tokenize = TFM_BLEU_TOK_INTL;
    CHECK_NEAR(score_of(p, &readme), 43.91623493, 1e-6);
    p = bleu();
    p.smooth = TFM_BLEU_SMOOTH_NONE;
    CHECK_NEAR(score_of(p, &readme), 48.530827, 1e-6);
}

/* README, "Variable Number of References", with the first reference of the
 * first sentence '': BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio =
 * 0.895 hyp_len = 17 ref_len = 19).  The README shows nrefs:var, which
 * sacreBLEU 2.3.1 prints for None only: its code keeps '' as a reference of
 * no words (Metric._cache_references), so for '' it prints nrefs:2, as run
 * here, through the API and the command line alike. */
static void test_bleu_variable_refs(void)
{
    static const char *const ref1[] = {"", "It was not unexpected.", "The man bit him first."};
    corpus c = {3, 2, readme_hyps, {ref1, readme_ref2}};
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_score_format f = tfm_score_format_default();
    f.width = 2;
    format_of(bleu(), &c, f, &b);
    CHECK_STR(b.data, "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.3.1 = 29.44 "
                      "82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 ref_len = 19)");
    tfm_buf_free(&b);
}

/* sacrebleu.compat.raw_corpus_bleu: floor smoothing, no tokenization,
 * effective order. */
static tfm_metric_params raw_bleu(double floor_value)
{
    tfm_metric_params p = bleu();
    p.smooth = TFM_BLEU_SMOOTH_FLOOR;
    p.smooth_value = floor_value;
    p.tokenize = TFM_BLEU_TOK_NONE;
    p.effective_order = true;
    return p;
}

/* test/test_bleu.py: test_raw_bleu_cases, test_case_effective_order,
 * test_case_statistics, test_case_offset, test_bleu_max_order. */
static void test_bleu_raw_cases(void)
{
    static const char *const h1[] = {"this is a test", "another test"}, *const r1[] = {"ref1", "ref2"};
    corpus c1 = {2, 1, h1, {r1}};
    /* "This now returns 0.0 score (#141)": no match at all, no smoothing
     * (sacreBLEU 1.x gave 0.003799178428257963). */
    CHECK_NEAR(score_of(raw_bleu(0.01), &c1) / 100, 0.0, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.01), "this is a test", "this is a test") / 100, 1.0, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.01), "this is a fest", "this is a test") / 100, 0.223606797749979,
               1e-8);
    CHECK_NEAR(score1(raw_bleu(0.01), "test", "a test") / 100, 0.3678794411714425, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.01), "a test", "a test") / 100, 1.0, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.01), "a little test", "a test") / 100, 0.03218297948685433, 1e-8);
    /* The default floor is 0.1; a floor of 0 leaves the zero precision. */
    const char *hyp = "am I am a character sequence", *ref = "I am a symbol string sequence a a";
    CHECK_NEAR(score1(raw_bleu(-1), hyp, ref) / 100, 0.1555722182, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.1), hyp, ref) / 100, 0.1555722182, 1e-8);
    CHECK_NEAR(score1(raw_bleu(0.0), hyp, ref) / 100, 0.0, 1e-8);

    /* max_ngram_order 1..6 on the README example, printed with 2 decimals. */
    static const char *const by_order[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
    for (int order = 1; order <= 6; order++) {
        tfm_metric_params p = bleu();
        p.max_order = order;
        char got[32];
        snprintf(got, sizeof got, "%.2f", score_of(p, &readme));
        CHECK_MSG(strcmp(got, by_order[order - 1]) == 0, "order %d: %s", order, got);
    }

    /* Statistics: common [4, 2, 1, 0], total [6, 5, 4, 3]. */
    tfm_metric *m = make(raw_bleu(0.01));
    double st[10];
    const char *refs[1] = {ref};
    size_t lens[1] = {strlen(ref)};
    int used = 0;
    tfm_error err;
    CHECK(tfm_metric_segment(m, hyp, strlen(hyp), refs, lens, 1, st, &used, &err) == TFM_OK);
    CHECK(used == 1);
    const double want[10] = {6, 8, 4, 2, 1, 0, 6, 5, 4, 3};
    for (int k = 0; k < 10; k++) CHECK_MSG(st[k] == want[k], "stat %d: %g, want %g", k, st[k], want[k]);
    tfm_metric_free(m);
}

/* test/test_bleu.py: test_case_scoring and test_case_degenerate_stats (the
 * score from given statistics: hyp_len, ref_len, matches, totals). */
static void test_bleu_from_stats(void)
{
    tfm_metric_params p = bleu();
    p.smooth = TFM_BLEU_SMOOTH_NONE;
    tfm_metric *m = make(p);
    tfm_score s;
    double a[10] = {11, 11, 9, 7, 5, 3, 10, 8, 6, 4};
    tfm_metric_compute(m, a, &s);
    CHECK_NEAR(s.score / 100, 0.8375922397, 1e-8);
    tfm_metric_free(m);

    static const double cases[][11] = {
        /* hyp_len, ref_len, matches[4], totals[4], floor */
        {0, 1, 0, 0, 0, 0, 4, 4, 2, 1, 0.0},  {14, 10, 0, 0, 0, 0, 10, 11, 12, 0, 0.0},
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0},  {6, 6, 6, 5, 4, 0, 6, 5, 4, 3, 0.0},
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.1},  {1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0.01},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        p = bleu();
        p.smooth = TFM_BLEU_SMOOTH_FLOOR;
        p.smooth_value = cases[i][10];
        m = make(p);
        tfm_metric_compute(m, cases[i], &s);
        CHECK_MSG(s.score == 0.0, "case %zu: %g", i, s.score);
        tfm_metric_free(m);
    }
}

/* test/test_sentence_bleu.py (example from sacreBLEU issue #98): sentence
 * BLEU with effective order under every smoothing and tokenizer. */
static void test_sentence_bleu(void)
{
    const char *ref = "producţia de zahăr brut se exprimă în zahăr alb;";
    const char *sys = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
    static const struct {
        tfm_bleu_smooth smooth;
        double value;
        bool lowercase;
        tfm_bleu_tok tok;
        double want;
    } cases[] = {
        {TFM_BLEU_SMOOTH_EXP, -1, false, TFM_BLEU_TOK_13A, 8.493},
        {TFM_BLEU_SMOOTH_NONE, -1, false, TFM_BLEU_TOK_13A, 0.0},
        {TFM_BLEU_SMOOTH_FLOOR, -1, false, TFM_BLEU_TOK_13A, 4.51688},
        {TFM_BLEU_SMOOTH_FLOOR, 0.1, false, TFM_BLEU_TOK_13A, 4.51688},
        {TFM_BLEU_SMOOTH_FLOOR, 0.5, false, TFM_BLEU_TOK_13A, 10.10},
        {TFM_BLEU_SMOOTH_ADD_K, -1, false, TFM_BLEU_TOK_13A, 14.882},
        {TFM_BLEU_SMOOTH_ADD_K, 1, false, TFM_BLEU_TOK_13A, 14.882},
        {TFM_BLEU_SMOOTH_ADD_K, 2, false, TFM_BLEU_TOK_13A, 21.389},
        {TFM_BLEU_SMOOTH_EXP, -1, false, TFM_BLEU_TOK_NONE, 7.347},
        {TFM_BLEU_SMOOTH_EXP, -1, false, TFM_BLEU_TOK_INTL, 8.493},
        {TFM_BLEU_SMOOTH_EXP, -1, false, TFM_BLEU_TOK_CHAR, 40.8759},
        {TFM_BLEU_SMOOTH_EXP, -1, true, TFM_BLEU_TOK_CHAR, 42.0267},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfm_metric_params p = bleu();
        p.smooth = cases[i].smooth;
        p.smooth_value = cases[i].value;
        p.lowercase = cases[i].lowercase;
        p.tokenize = cases[i].tok;
        p.effective_order = true;
        double got = score1(p, sys, ref);
        CHECK_MSG(fabs(got - cases[i].want) < 1e-3, "case %zu: %.6f, want %.6f", i, got, cases[i].want);
    }
    /* test_cases_zero_bleu (sacreBLEU issue #141): no match at all is 0
     * whatever the smoothing. */
    for (int smooth = 0; smooth < 4; smooth++) {
        tfm_metric_params p = bleu();
        p.smooth = (tfm_bleu_smooth)smooth;
        p.effective_order = true;
        CHECK(score1(p, "this is a cat", "okay thanks") == 0.0);
    }
}

/* Hand-computed: brevity penalty and lengths at the edges. */
static void test_bleu_edges(void)
{
    tfm_metric_params p = bleu();
    tfm_metric *m = make(p);
    tfm_error err;
    double st[10];
    const char *refs[3] = {"a b c d e f g h", "", "a b c"};
    size_t lens[3] = {15, 0, 5};
    int used = -1;
    /* The empty reference is a reference of no words (sacreBLEU 2.3.1 leaves
     * out None only); of 8, 0 and 3 words the closest to 4 is 3. */
    CHECK(tfm_metric_segment(m, "a b c d", 7, refs, lens, 3, st, &used, &err) == TFM_OK);
    CHECK(used == 3 && st[0] == 4 && st[1] == 3);
    /* A tie goes to the shorter reference: 4 words, references of 2 and 6. */
    const char *tie[2] = {"x y z w v u", "x y"};
    size_t tie_lens[2] = {11, 3};
    CHECK(tfm_metric_segment(m, "x y z w", 7, tie, tie_lens, 2, st, &used, &err) == TFM_OK);
    CHECK(st[1] == 2);
    /* Every reference empty: scored against no words, as sacreBLEU does. */
    const char *none[2] = {"", ""};
    size_t zero[2] = {0, 0};
    CHECK(tfm_metric_segment(m, "a", 1, none, zero, 2, st, &used, &err) == TFM_OK);
    CHECK(used == 2 && st[0] == 1 && st[1] == 0);
    tfm_metric_free(m);

    /* A hypothesis much shorter than its reference: BP = exp(1 - 8/1). */
    m = make(p);
    const char *r8[1] = {"a b c d e f g h"};
    size_t l8[1] = {15};
    CHECK(tfm_metric_add(m, "a", 1, r8, l8, 1, &err) == TFM_OK);
    tfm_score s;
    tfm_metric_corpus_score(m, &s);
    CHECK_NEAR(s.bp, exp(1.0 - 8.0), 1e-12);
    CHECK_NEAR(s.ratio, 0.125, 1e-12);
    /* Only unigrams exist: without effective order the score is 0. */
    CHECK(s.score == 0.0);
    tfm_metric_free(m);

    /* Much longer than the reference: BP = 1, ratio 4, precisions fall. */
    m = make(p);
    const char *r2[1] = {"a b"};
    size_t l2[1] = {3};
    CHECK(tfm_metric_add(m, "a b a b a b a b", 15, r2, l2, 1, &err) == TFM_OK);
    tfm_metric_corpus_score(m, &s);
    CHECK(s.bp == 1.0 && s.ratio == 4.0 && s.hyp_len == 8 && s.ref_len == 2);
    CHECK_NEAR(s.precisions[0], 25.0, 1e-12); /* "a" and "b" clipped to 1 each */
    CHECK_NEAR(s.precisions[1], 100.0 / 7, 1e-12);
    tfm_metric_free(m);

    /* An empty hypothesis: BP 0, score 0, hyp_len 0. */
    CHECK(score1(p, "", "a b c") == 0.0);
    /* Identical lines score 100 exactly. */
    CHECK_NEAR(score1(p, "The cat sat on the mat.", "The cat sat on the mat."), 100.0, 1e-12);
}

/* Signatures of the other BLEU settings. */
static void test_bleu_signature(void)
{
    tfm_metric_params p = bleu();
    p.smooth = TFM_BLEU_SMOOTH_FLOOR;
    p.lowercase = true;
    p.tokenize = TFM_BLEU_TOK_INTL;
    p.effective_order = true;
    tfm_metric *m = make(p);
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_score_format f = tfm_score_format_default();
    f.n_bootstrap = 1000;
    f.seed = 12345;
    CHECK(tfm_metric_signature(m, &f, &b) == TFM_OK);
    CHECK_STR(b.data, "nrefs:1|bs:1000|seed:12345|case:lc|eff:yes|tok:intl|smooth:floor[0.10]|version:2.3.1");
    tfm_metric_free(m);
    p = bleu();
    p.smooth = TFM_BLEU_SMOOTH_ADD_K;
    p.smooth_value = 2;
    m = make(p);
    tfm_buf_clear(&b);
    f = tfm_score_format_default();
    f.nrefs = -1;
    CHECK(tfm_metric_signature(m, &f, &b) == TFM_OK);
    CHECK_STR(b.data, "nrefs:var|case:mixed|eff:no|tok:13a|smooth:add-k[2.00]|version:2.3.1");
    tfm_metric_free(m);
    tfm_buf_free(&b);
}

/* ---- tokenizers -------------------------------------------------------------------------- */

/* Hand-derived from the regular expressions of tokenizer_re.py and
 * tokenizer_13a.py (see lib/metrics/tokenize.c). */
static void test_tokenize_13a(void)
{
    check_tok(TFM_BLEU_TOK_13A, "Hello, world!", "Hello , world !");
    check_tok(TFM_BLEU_TOK_13A, "It costs $3.14 or 1,000.5 yen.", "It costs $ 3.14 or 1,000.5 yen .");
    check_tok(TFM_BLEU_TOK_13A, "It's 5-6 p.m.", "It's 5 - 6 p . m .");
    check_tok(TFM_BLEU_TOK_13A, "a-b x--y", "a-b x--y");
    /* One pass per entity, &quot; first: "&amp;quot;" ends as "&quot;",
     * which step 1 then splits. */
    check_tok(TFM_BLEU_TOK_13A, "a &amp; b &lt;c&gt; &quot;d&quot; &amp;quot;",
              "a & b < c > \" d \" & quot ;");
    check_tok(TFM_BLEU_TOK_13A, "<skipped> ok", "ok");
    check_tok(TFM_BLEU_TOK_13A, "(a){b}[c]/d\\e@f^g_h`i|j~k", "( a ) { b } [ c ] / d \\ e @ f ^ g _ h ` i | j ~ k");
    /* Non-overlapping scans: "a.,b" -> "a . ,b" after one pass, then the
     * next pass splits ",b". */
    check_tok(TFM_BLEU_TOK_13A, "a.,b", "a . , b");
    check_tok(TFM_BLEU_TOK_13A, "end.", "end .");
    check_tok(TFM_BLEU_TOK_13A, "2019.", "2019 .");
    /* Unicode punctuation and symbols are not split by 13a. */
    check_tok(TFM_BLEU_TOK_13A, "naïve — «test» 5€", "naïve — «test» 5€");
    /* Python's whitespace: NBSP, ideographic space, U+2003 and U+001F
     * separate words; U+200B (a format character) does not. */
    check_tok(TFM_BLEU_TOK_13A, "a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\x83" "d\x1f" "e\xe2\x80\x8b" "f",
              "a b c d e\xe2\x80\x8b" "f");
    check_tok(TFM_BLEU_TOK_13A, "", "");
    check_tok(TFM_BLEU_TOK_13A, "   ", "");
}

static void test_tokenize_intl(void)
{
    check_tok(TFM_BLEU_TOK_INTL, "Hello, world!", "Hello , world !");
    check_tok(TFM_BLEU_TOK_INTL, "3.14 and 1,000", "3.14 and 1,000");
    /* mteval-v14's quirk, kept by sacreBLEU: a number's final period stays. */
    check_tok(TFM_BLEU_TOK_INTL, "in 2019.", "in 2019.");
    check_tok(TFM_BLEU_TOK_INTL, "«test» — ok", "« test » — ok");
    check_tok(TFM_BLEU_TOK_INTL, "5€ and $5 and x+y", "5 € and $ 5 and x + y");
    check_tok(TFM_BLEU_TOK_INTL, "日本語、テスト。", "日本語 、 テスト 。");
    check_tok(TFM_BLEU_TOK_INTL, "it's", "it ' s");
}

static void test_tokenize_zh_char(void)
{
    check_tok(TFM_BLEU_TOK_ZH, "我爱北京。", "我 爱 北 京 。");
    check_tok(TFM_BLEU_TOK_ZH, "  AI是3.5倍, ok.  ", "AI 是 3.5 倍 , ok .");
    /* tokenizer_zh.py's ranges as Python reads them include U+2001..U+2A6D:
     * the em dash and curly quotes are split off too. */
    check_tok(TFM_BLEU_TOK_ZH, "a\xe2\x80\x94" "b \xe2\x80\x9cq\xe2\x80\x9d", "a — b “ q ”");
    /* ... but not the characters of Extension B (U+20000), which the table
     * meant and missed. */
    check_tok(TFM_BLEU_TOK_ZH, "x\xf0\xa0\x80\x80y", "x\xf0\xa0\x80\x80y");
    check_tok(TFM_BLEU_TOK_CHAR, "ab c", "a b   c");
    check_tok(TFM_BLEU_TOK_CHAR, "é!", "é !");
    check_tok(TFM_BLEU_TOK_NONE, " a  b ", " a  b ");
}

/* Python's str.lower() and str.rstrip(). */
static void test_python_text(void)
{
    /* U+0130 lowercases to "i" + U+0307; a word-final capital sigma to ς. */
    tfm_metric_params p = bleu();
    p.lowercase = true;
    p.tokenize = TFM_BLEU_TOK_NONE;
    p.effective_order = true;
    CHECK_NEAR(score1(p, "\xc4\xb0stanbul", "i\xcc\x87stanbul"), 100.0, 1e-9);
    CHECK_NEAR(score1(p, "ΟΔΟΣ ΣΑΣ", "οδος σας"), 100.0, 1e-9);
    CHECK_NEAR(score1(p, "ΟΔΟΣ", "οδοσ"), 0.0, 1e-9);
    CHECK(tfm_utf8_rstrip("ab \t\r", 5) == 2);
    CHECK(tfm_utf8_rstrip("ab\xc2\xa0\xe3\x80\x80", 7) == 2);
    CHECK(tfm_utf8_rstrip("ab\xe2\x80\x8b", 5) == 5);
    CHECK(tfm_utf8_rstrip("   ", 3) == 0);
    CHECK(tfm_utf8_rstrip("a\xc3", 2) == 2); /* a truncated sequence is not whitespace */
}

/* test/test_tokenizer_ter.py */
static void test_tokenize_ter(void)
{
    static const struct {
        bool normalized, no_punct;
        const char *in, *want;
    } cases[] = {
        {false, false, "a b c d", "a b c d"},
        {false, false, "", ""},
        {false, false, "a b c d.", "a b c d."},
        {false, false, "A B C D.", "a b c d."},
        {false, true, "a b c d.", "a b c d"},
        {false, true, "A ; B ) C : D.", "a b c d"},
        {true, false, "a b (c) d.", "a b ( c ) d ."},
        {true, false, "Jim's car.", "jim 's car ."},
        {true, false, "4.2", "4.2"},
    };
    tfm_buf out;
    tfm_buf_init(&out);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfm_metric_params p = ter();
        p.normalized = cases[i].normalized;
        p.no_punct = cases[i].no_punct;
        tfm_error err;
        CHECK(tfm_ter_tokenize(&p, cases[i].in, strlen(cases[i].in), &out, &err) == TFM_OK);
        CHECK_MSG(strcmp(out.data, cases[i].want) == 0, "\"%s\": got \"%s\", want \"%s\"",
                  cases[i].in, out.data, cases[i].want);
    }
    tfm_buf_free(&out);
}

/* ---- chrF ------------------------------------------------------------------------------------ */

static tfm_metric_params chrf_beta3(bool eps)
{
    tfm_metric_params p = chrf();
    p.beta = 3;
    p.eps_smoothing = eps;
    return p;
}

/* test/test_chrf.py: test_cases (beta 3, epsilon smoothing),
 * test_cases_effective_order (beta 3), test_cases_keep_whitespace. */
static void test_chrf_cases(void)
{
    static const struct {
        const char *hyp, *ref;
        double want;
    } eps[] = {
        {"abcdefg", "hijklmnop", 0.0},
        {"a", "b", 0.0},
        {"", "b", 0.0},
        {"", "ref", 0.0},
        {"", "reference", 0.0},
        {"aa", "ab", 8.3333},
        {"a", "a", 16.6667},
        {"a b c", "a b c", 50.0},
        {"a b c", "abc", 50.0},
        {" risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists .",
         "risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists .",
         63.361730},
        {" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. ",
         "Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich.", 64.1302698},
        {"Niemand hat die Absicht, eine Mauer zu errichten", "Niemand hat die Absicht, eine Mauer zu errichten", 100.0},
    };
    for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) {
        double got = score1(chrf_beta3(true), eps[i].hyp, eps[i].ref);
        CHECK_MSG(fabs(got - eps[i].want) < 1e-4, "eps case %zu: %.7f, want %.7f", i, got, eps[i].want);
    }
    static const char *const h2[] = {"a", "b"}, *const r2[] = {"a", "c"};
    corpus two = {2, 1, h2, {r2}};
    CHECK_NEAR(score_of(chrf_beta3(true), &two), 8.3333, 1e-4);
    CHECK_NEAR(score_of(chrf_beta3(false), &two), 50.0, 1e-4);

    static const struct {
        const char *hyp, *ref;
        double want;
    } eff[] = {
        {"a", "a", 100.0}, {"", "reference", 0.0}, {"a b c", "a b c", 100.0},
        {"a b c", "abc", 100.0}, {"", "c", 0.0}, {"aa", "ab", 25.0},
    };
    for (size_t i = 0; i < sizeof eff / sizeof eff[0]; i++) {
        double got = score1(chrf_beta3(false), eff[i].hyp, eff[i].ref);
        CHECK_MSG(fabs(got - eff[i].want) < 1e-4, "effective-order case %zu: %.7f", i, got);
    }

    tfm_metric_params ws = chrf_beta3(false);
    ws.whitespace = true;
    CHECK_NEAR(score1(ws, "Die Beziehung zwischen Obama und Netanjahu ist nicht gerade freundlich.",
                      "Das Verhältnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."),
               67.3481606, 1e-4);
    CHECK_NEAR(score1(ws, "risk assessment must be made of those who are qualified and expertise in the sector - these are the scientists .",
                      "risk assessment has to be undertaken by those who are qualified and expert in that area - that is the scientists ."),
               65.2414427, 1e-4);
}

/* test/test_chrf.py: test_sentence_level_chrf (beta 2, epsilon smoothing),
 * and the README's corpus chrF2 = 59.73 with two references. */
static void test_chrf_sentence_and_readme(void)
{
    tfm_metric_params p = chrf();
    p.eps_smoothing = true;
    CHECK_NEAR(score1(p, "Co nás nejvíc trápí, protože lékaři si vybírají, kdo bude žít a kdo zemře.",
                      "Nejvíce smutní jsme z toho, že musíme rozhodovat o tom, kdo bude žít a kdo zemře."),
               39.14078509, 1e-4);
    CHECK_NEAR(score1(p, "Nebo prostě nemají vybavení, které by jim pomohlo, uvedli lékaři.",
                      "A někdy nemáme ani potřebný materiál, abychom jim pomohli, popsali lékaři."),
               31.22557079, 1e-4);
    CHECK_NEAR(score1(p, "Lapali po dechu, jejich životy skončily dřív, než skutečně začaly.",
                      "Lapali po dechu a pak jejich život skončil - dřív, než skutečně mohl začít, připomněli."),
               57.15704367, 1e-4);

    tfm_buf b;
    tfm_buf_init(&b);
    tfm_score_format f = tfm_score_format_default();
    f.width = 2;
    format_of(chrf(), &readme, f, &b);
    CHECK_STR(b.data, "chrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.3.1 = 59.73");
    tfm_buf_free(&b);
}

/* chrF++: word n-grams with punctuation split off as sacreBLEU does;
 * hand-computed.  "a b." against "a b .": words a, b, . on both sides. */
static void test_chrf_plus_plus(void)
{
    tfm_metric_params p = chrf();
    p.word_order = 2;
    CHECK_NEAR(score1(p, "a b.", "a b ."), 100.0, 1e-9);
    /* "(hi)" splits as "(hi" + ")" (sacreBLEU issue #124), so it does not
     * equal "( hi )" at word level, while the characters are all equal:
     * character orders 1-4 all match (5 and 6 have no n-grams and do not
     * count), word unigrams "(hi" ")" vs "(" "hi" ")" match 1 of 2 hyp / 1
     * of 3 ref, word bigrams 0 of 1 / 0 of 2: six effective orders. */
    double prec = (4 * 1.0 + 0.5 + 0.0) / 6, rec = (4 * 1.0 + 1.0 / 3 + 0.0) / 6;
    double want = 100 * ((1 + 4) * prec * rec / (4 * prec + rec));
    CHECK_NEAR(score1(p, "(hi)", "( hi )"), want, 1e-9);
    tfm_metric *m = make(p);
    char name[16];
    tfm_metric_name(m, name, sizeof name);
    CHECK_STR(name, "chrF2++");
    tfm_metric_free(m);
    /* Lowercasing changes the signature and the score. */
    p = chrf();
    p.lowercase = true;
    CHECK_NEAR(score1(p, "ABC", "abc"), 100.0, 1e-9);
    CHECK_NEAR(score1(chrf(), "ABC", "abc"), 0.0, 1e-9);
}

/* Several references: the best-scoring one counts, per segment. */
static void test_chrf_best_ref(void)
{
    static const char *const h[] = {"the cat"}, *const r1[] = {"a dog"}, *const r2[] = {"the cat"};
    corpus c = {1, 2, h, {r1, r2}};
    CHECK_NEAR(score_of(chrf(), &c), 100.0, 1e-9);
    corpus d = {1, 2, h, {r2, r1}};
    CHECK_NEAR(score_of(chrf(), &d), 100.0, 1e-9);
}

/* ---- TER ------------------------------------------------------------------------------------ */

/* test/test_ter.py */
static void test_ter_cases(void)
{
    CHECK_NEAR(score1(ter(), "aaaa bbbb cccc dddd", "aaaa bbbb cccc dddd"), 0.0, 1e-3);
    CHECK_NEAR(score1(ter(), "dddd eeee ffff", "aaaa bbbb cccc"), 100.0, 1e-3);
    CHECK_NEAR(score1(ter(), "", "a"), 100.0, 1e-3);
    CHECK_NEAR(score1(ter(), "d e f g h a b c", "a b c d e f g h"), 100.0 / 8, 1e-3);
    static const char *const hyps[] = {
        "wählen Sie \" Bild neu berechnen , \" um beim Ändern der Bildgröße Pixel hinzuzufügen oder zu entfernen , damit das Bild ungefähr dieselbe Größe aufweist wie die andere Größe .",
        "wenn Sie alle Aufgaben im aktuellen Dokument aktualisieren möchten , wählen Sie im Menü des Aufgabenbedienfelds die Option \" Alle Aufgaben aktualisieren . \"",
        "klicken Sie auf der Registerkarte \" Optionen \" auf die Schaltfläche \" Benutzerdefiniert \" und geben Sie Werte für \" Fehlerkorrektur-Level \" und \" Y / X-Verhältnis \" ein .",
        "Sie können beispielsweise ein Dokument erstellen , das ein Auto über die Bühne enthält .",
        "wählen Sie im Dialogfeld \" Neu aus Vorlage \" eine Vorlage aus und klicken Sie auf \" Neu . \"",
    };
    static const char *const refs[] = {
        "wählen Sie \" Bild neu berechnen , \" um beim Ändern der Bildgröße Pixel hinzuzufügen oder zu entfernen , damit die Darstellung des Bildes in einer anderen Größe beibehalten wird .",
        "wenn Sie alle Aufgaben im aktuellen Dokument aktualisieren möchten , wählen Sie im Menü des Aufgabenbedienfelds die Option \" Alle Aufgaben aktualisieren . \"",
        "klicken Sie auf der Registerkarte \" Optionen \" auf die Schaltfläche \" Benutzerdefiniert \" und geben Sie für \" Fehlerkorrektur-Level \" und \" Y / X-Verhältnis \" niedrigere Werte ein .",
        "Sie können beispielsweise ein Dokument erstellen , das ein Auto enthalt , das sich über die Bühne bewegt .",
        "wählen Sie im Dialogfeld \" Neu aus Vorlage \" eine Vorlage aus und klicken Sie auf \" Neu . \"",
    };
    corpus c = {5, 1, hyps, {refs}};
    CHECK_NEAR(score_of(ter(), &c), 13.6, 1e-3); /* "0.136": 17 edits / 125 words */
    /* Hand-computed on the README example: 6 edits over mean reference
     * lengths 5.5 + 4 + 5.5. */
    CHECK_NEAR(score_of(ter(), &readme), 40.0, 1e-9);
}

/* Shifts, case, and the edges of TER. */
static void test_ter_edges(void)
{
    /* One shift of a block of two words fixes it: 1 edit over 4 words. */
    CHECK_NEAR(score1(ter(), "c d a b", "a b c d"), 25.0, 1e-9);
    /* Case-insensitive by default. */
    CHECK_NEAR(score1(ter(), "THE Cat", "the cat"), 0.0, 1e-9);
    tfm_metric_params p = ter();
    p.case_sensitive = true;
    CHECK_NEAR(score1(p, "THE Cat", "the cat"), 100.0, 1e-9);
    /* A hypothesis far longer than its reference: every extra word is an
     * edit, so TER passes 100. */
    CHECK_NEAR(score1(ter(), "a b c d e f", "a"), 500.0, 1e-9);
    /* A reference of no words (empty, or whitespace only) scores 100,
     * whatever the hypothesis, the empty one too (TER._compute_score_from_stats:
     * 1 when the reference length is 0; sacreBLEU 2.3.1 gives 100 for all
     * three). */
    CHECK_NEAR(score1(ter(), "x", " "), 100.0, 1e-9);
    CHECK_NEAR(score1(ter(), "", " "), 100.0, 1e-9);
    CHECK_NEAR(score1(ter(), "", ""), 100.0, 1e-9);
    /* A long sentence (beyond the beam width and the 50-word shift limit). */
    char hyp[4096], ref[4096];
    size_t nh = 0, nr = 0;
    for (int i = 0; i < 120; i++) {
        nr += (size_t)snprintf(ref + nr, sizeof ref - nr, "w%d ", i);
        nh += (size_t)snprintf(hyp + nh, sizeof hyp - nh, "w%d ", (i + 60) % 120);
    }
    double s = score1(ter(), hyp, ref);
    CHECK_MSG(s > 0 && s <= 100, "rotated sentence: %g", s);
    /* Signature. */
    tfm_metric *m = make(ter());
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_score_format f = tfm_score_format_default();
    CHECK(tfm_metric_signature(m, &f, &b) == TFM_OK);
    CHECK_STR(b.data, "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.3.1");
    tfm_metric_free(m);
    tfm_buf_free(&b);
}

/* ---- random segments, bad parameters --------------------------------------------------------- */

/* Random segments of a small vocabulary (so that blocks repeat and shifts
 * happen), lengths 0 to 45 words: every metric stays in range, TER never
 * counts more edits than the plain word edit distance (each shift it takes
 * saves at least one edit), and a line against itself is perfect. */
static size_t word_edit_distance(const int *a, size_t na, const int *b, size_t nb)
{
    size_t row[80], prev[80];
    for (size_t j = 0; j <= nb; j++) prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < c) c = prev[j] + 1;
            if (row[j - 1] + 1 < c) c = row[j - 1] + 1;
            row[j] = c;
        }
        memcpy(prev, row, (nb + 1) * sizeof *row);
    }
    return prev[nb];
}

static void test_random_segments(void)
{
    static const char *const vocab[] = {"a", "b", "c", "ä", "Δ", "—", "1.5", "x,", "(y)", "猫"};
    tfm_rng rng;
    tfm_rng_seed(&rng, 2024);
    tfm_metric_params params[6] = {bleu(), bleu(), chrf(), chrf(), ter(), ter()};
    params[1].tokenize = TFM_BLEU_TOK_ZH;
    params[1].effective_order = true;
    params[3].word_order = 2;
    params[3].lowercase = true;
    params[5].normalized = true;
    tfm_metric *m[6];
    for (int k = 0; k < 6; k++) m[k] = make(params[k]);
    char hyp[1024], ref[1024];
    int hw[80], rw[80];
    int bad = 0;
    for (int iter = 0; iter < 150 && bad < 5; iter++) {
        size_t nh = (size_t)tfm_rng_below(&rng, 46), nr = 1 + (size_t)tfm_rng_below(&rng, 45);
        size_t vs = 2 + (size_t)tfm_rng_below(&rng, 9), lh = 0, lr = 0;
        for (size_t i = 0; i < nh; i++) {
            hw[i] = (int)tfm_rng_below(&rng, vs);
            lh += (size_t)snprintf(hyp + lh, sizeof hyp - lh, "%s%s", i ? " " : "", vocab[hw[i]]);
        }
        for (size_t i = 0; i < nr; i++) {
            rw[i] = (int)tfm_rng_below(&rng, vs);
            lr += (size_t)snprintf(ref + lr, sizeof ref - lr, "%s%s", i ? " " : "", vocab[rw[i]]);
        }
        const char *refs[1] = {ref};
        size_t lens[1] = {lr};
        for (int k = 0; k < 6; k++) {
            double st[TFM_CHRF_MAX_ORDER * 3];
            tfm_error err;
            tfm_score s;
            if (tfm_metric_segment(m[k], hyp, lh, refs, lens, 1, st, NULL, &err) != TFM_OK) {
                CHECK_MSG(false, "metric %d: %s", k, err.msg);
                bad++;
                continue;
            }
            tfm_metric_compute(m[k], st, &s);
            bool ok = s.score >= 0 && (k >= 4 || s.score <= 100 + 1e-9);
            if (k == 4) ok = ok && st[0] <= (double)word_edit_distance(hw, nh, rw, nr) && st[1] == (double)nr;
            CHECK_MSG(ok, "metric %d, \"%s\" vs \"%s\": score %g, stats %g %g", k, hyp, ref, s.score, st[0], st[1]);
            bad += !ok;
            /* The reference against itself. */
            CHECK(tfm_metric_segment(m[k], ref, lr, refs, lens, 1, st, NULL, &err) == TFM_OK);
            tfm_metric_compute(m[k], st, &s);
            bool perfect = k >= 4 ? s.score == 0 : k == 0 && nr < 4 ? true : fabs(s.score - 100) < 1e-9;
            CHECK_MSG(perfect, "metric %d, \"%s\" against itself: %g", k, ref, s.score);
            bad += !perfect;
        }
    }
    for (int k = 0; k < 6; k++) tfm_metric_free(m[k]);
}

/* Bad parameters are refused with a message; invalid UTF-8 is a character. */
static void test_params_and_bytes(void)
{
    tfm_metric_params p = bleu();
    p.max_order = 0;
    tfm_metric *m = NULL;
    tfm_error err;
    CHECK(tfm_metric_create(&p, &m, &err) == TFM_ERR_ARG && m == NULL && strstr(err.msg, "order"));
    /* References: TFM_METRIC_MAX_REFS at most. */
    m = make(bleu());
    const char *refs[TFM_METRIC_MAX_REFS + 1];
    size_t lens[TFM_METRIC_MAX_REFS + 1];
    for (int r = 0; r <= TFM_METRIC_MAX_REFS; r++) {
        refs[r] = "a b c d";
        lens[r] = 7;
    }
    CHECK(tfm_metric_add(m, "a b c d", 7, refs, lens, TFM_METRIC_MAX_REFS, &err) == TFM_OK);
    CHECK(tfm_metric_add(m, "a b c d", 7, refs, lens, TFM_METRIC_MAX_REFS + 1, &err) == TFM_ERR_ARG &&
          strstr(err.msg, "at most 64"));
    CHECK(tfm_metric_count(m) == 1);
    tfm_metric_free(m);
    m = NULL;
    p = chrf();
    p.char_order = 0;
    p.word_order = 0;
    CHECK(tfm_metric_create(&p, &m, &err) == TFM_ERR_ARG);
    tfm_bleu_tok tok;
    tfm_bleu_smooth sm;
    CHECK(tfm_bleu_tok_parse("intl", &tok) && tok == TFM_BLEU_TOK_INTL);
    CHECK(!tfm_bleu_tok_parse("13b", &tok));
    CHECK(tfm_bleu_smooth_parse("add-k", &sm) && sm == TFM_BLEU_SMOOTH_ADD_K);
    CHECK(!tfm_bleu_smooth_parse("lin", &sm));
    /* Bytes that are not UTF-8 do not crash and compare as characters. */
    CHECK_NEAR(score1(bleu(), "a\xff\xfe b c d", "a\xff\xfe b c d"), 100.0, 1e-9);
    CHECK_NEAR(score1(bleu(), "a\xff b c d", "a\xfe b c d"), 100.0, 1e-9); /* both U+FFFD */
    CHECK_NEAR(score1(chrf(), "\x80", "\x80"), 100.0, 1e-9);
    tfm_metric_free(NULL);
}

int main(void)
{
    RUN(test_bleu_readme);
    RUN(test_bleu_corpus_cases);
    RUN(test_bleu_variable_refs);
    RUN(test_bleu_raw_cases);
    RUN(test_bleu_from_stats);
    RUN(test_sentence_bleu);
    RUN(test_bleu_edges);
    RUN(test_bleu_signature);
    RUN(test_tokenize_13a);
    RUN(test_tokenize_intl);
    RUN(test_tokenize_zh_char);
    RUN(test_python_text);
    RUN(test_tokenize_ter);
    RUN(test_chrf_cases);
    RUN(test_chrf_sentence_and_readme);
    RUN(test_chrf_plus_plus);
    RUN(test_chrf_best_ref);
    RUN(test_ter_cases);
    RUN(test_ter_edges);
    RUN(test_random_segments);
    RUN(test_params_and_bytes);
    CHECK_DONE();
}
