/* test_normalize.c - Unicode normalisation, UTF-8 repair, UTF-8 decoding and
 * encoding, and character classes (lib/text/normalize.c, charclass.c). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/text.h"

static tfm_norm_params params(tfm_norm_form form, bool fold)
{
    tfm_norm_params p = tfm_norm_default_params();
    p.form = form;
    p.case_fold = fold;
    return p;
}

/* Normalises in (n bytes) and checks the result is want (wn bytes) and the
 * number of repairs is repaired. */
static void expect_n(tfm_norm_form form, bool fold, const char *in, size_t n, const char *want,
                     size_t wn, size_t repaired)
{
    tfm_norm_params p = params(form, fold);
    tfm_buf out;
    tfm_buf_init(&out);
    size_t nr = 99;
    tfm_error err = {0};
    tfm_status st = tfm_normalize(&p, in, n, &out, &nr, &err);
    CHECK_MSG(st == TFM_OK, "status %d: %s", st, err.msg);
    CHECK_MSG(out.len == wn && memcmp(out.data ? out.data : "", want, wn) == 0,
              "form %d fold %d: '%.*s' gave '%.*s' (%zu bytes), want '%.*s' (%zu bytes)", form,
              fold, (int)n, in, (int)out.len, out.data ? out.data : "", out.len, (int)wn, want,
              wn);
    CHECK_MSG(nr == repaired, "'%.*s': %zu repaired, want %zu", (int)n, in, nr, repaired);
    tfm_buf_free(&out);
}

static void expect(tfm_norm_form form, bool fold, const char *in, const char *want,
                   size_t repaired)
{
    expect_n(form, fold, in, strlen(in), want, strlen(want), repaired);
}

static void test_params(void)
{
    tfm_norm_params p = tfm_norm_default_params();
    CHECK(p.form == TFM_NORM_NFKC && !p.case_fold && !p.strict);
    tfm_norm_form f = TFM_NORM_NONE;
    CHECK(tfm_norm_form_parse("nfc", &f) && f == TFM_NORM_NFC);
    CHECK(tfm_norm_form_parse("nfkc", &f) && f == TFM_NORM_NFKC);
    CHECK(tfm_norm_form_parse("none", &f) && f == TFM_NORM_NONE);
    CHECK(!tfm_norm_form_parse("NFKD", &f));
    CHECK(strcmp(tfm_norm_form_name(TFM_NORM_NFKC), "nfkc") == 0);
    CHECK(strcmp(tfm_norm_form_name(TFM_NORM_NONE), "none") == 0);
}

static void test_nfkc_nfc(void)
{
    expect(TFM_NORM_NFKC, false, "\xEF\xAC\x81nd", "find", 0);              /* U+FB01 ligature */
    expect(TFM_NORM_NFC, false, "\xEF\xAC\x81nd", "\xEF\xAC\x81nd", 0);     /* NFC keeps it */
    expect(TFM_NORM_NFKC, false, "\xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\x91", "AB1", 0); /* full-width */
    expect(TFM_NORM_NFKC, false, "x\xC2\xB2", "x2", 0);                     /* superscript two */
    /* e + combining acute composes to U+00E9 under NFC and NFKC, not under none. */
    expect(TFM_NORM_NFC, false, "caf" "e\xCC\x81", "caf\xC3\xA9", 0);
    expect(TFM_NORM_NFKC, false, "e\xCC\x81t\xC3\xA9", "\xC3\xA9t\xC3\xA9", 0);
    expect(TFM_NORM_NONE, false, "e\xCC\x81", "e\xCC\x81", 0);
    expect(TFM_NORM_NONE, false, "\xEF\xAC\x81", "\xEF\xAC\x81", 0);
    /* Canonical reordering of two marks: dot below (220) before acute (230). */
    expect(TFM_NORM_NFC, false, "q\xCC\x81\xCC\xA3", "q\xCC\xA3\xCC\x81", 0);
    /* Hangul jamo compose into a syllable. */
    expect(TFM_NORM_NFC, false, "\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80", 0);
    /* Pure ASCII is untouched by every form. */
    expect(TFM_NORM_NFKC, false, "Hello, World! 123", "Hello, World! 123", 0);
}

static void test_case_fold(void)
{
    expect(TFM_NORM_NFKC, true, "HeLLo WORLD", "hello world", 0);           /* ASCII path */
    expect(TFM_NORM_NFKC, true, "Stra\xC3\x9F" "e", "strasse", 0);          /* ß -> ss */
    expect(TFM_NORM_NFC, true, "\xE1\xBA\x9E", "ss", 0);                     /* capital ẞ */
    /* Greek: capital and final sigma both fold to σ. */
    expect(TFM_NORM_NFKC, true, "\xCE\xA3\xCE\x9F\xCE\xA6\xCE\x9F\xCE\xA3",
           "\xCF\x83\xCE\xBF\xCF\x86\xCE\xBF\xCF\x83", 0);
    expect(TFM_NORM_NFKC, true, "\xCF\x82", "\xCF\x83", 0);
    expect(TFM_NORM_NFC, true, "\xC3\x89T\xC3\x89", "\xC3\xA9t\xC3\xA9", 0); /* ÉTÉ -> été */
    expect(TFM_NORM_NFKC, false, "\xC3\x89T\xC3\x89", "\xC3\x89T\xC3\x89", 0); /* no folding */
    /* ПРИ */
    expect(TFM_NORM_NONE, true, "\xD0\x9F\xD0\xA0\xD0\x98", "\xD0\xBF\xD1\x80\xD0\xB8", 0);
}

static void test_repair(void)
{
    const char *fffd = "\xEF\xBF\xBD";
    char want[64];
    /* One U+FFFD per maximal subpart (Unicode 15, table 3-8 practice). */
    /* overlong */
    expect(TFM_NORM_NFKC, false, "a\xC0\xAF" "b", "a\xEF\xBF\xBD\xEF\xBF\xBD" "b", 2);
    expect(TFM_NORM_NFKC, false, "\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3);
    /* surrogate */
    expect(TFM_NORM_NFKC, false, "\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3);
    /* truncated emoji */
    expect(TFM_NORM_NFKC, false, "a\xF0\x9F\x98" "b", "a\xEF\xBF\xBD" "b", 1);
    /* truncated at end */
    expect(TFM_NORM_NFKC, false, "\xE2\x82", "\xEF\xBF\xBD", 1);
    expect(TFM_NORM_NFKC, false, "\x80\xBF" "x", "\xEF\xBF\xBD\xEF\xBF\xBD" "x", 2); /* stray */
    expect(TFM_NORM_NFKC, false, "\xFF", "\xEF\xBF\xBD", 1);
    expect(TFM_NORM_NFKC, false, "\xFE\xFFz", "\xEF\xBF\xBD\xEF\xBF\xBDz", 2);
    expect(TFM_NORM_NFKC, false, "\xF4\x90\x80\x80",
           "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 4);
    snprintf(want, sizeof want, "%s\xE2\x82\xAC", fffd);
    expect(TFM_NORM_NFKC, false, "\xE2\x82\xE2\x82\xAC", want, 1); /* broken then a whole € */
    /* An existing U+FFFD is valid text and is not counted. */
    expect(TFM_NORM_NFKC, false, "\xEF\xBF\xBD", "\xEF\xBF\xBD", 0);
    /* Repair then normalise: the accent composes with the letter after it. */
    expect(TFM_NORM_NFC, false, "\xFF" "e\xCC\x81", "\xEF\xBF\xBD\xC3\xA9", 1);
    /* Repair happens even without normalisation. */
    expect(TFM_NORM_NONE, false, "\xC3", "\xEF\xBF\xBD", 1);

    /* Strict: the first bad byte is an error naming its offset. */
    tfm_norm_params p = params(TFM_NORM_NFKC, false);
    p.strict = true;
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_error err = {0};
    CHECK(tfm_normalize(&p, "abc\xC3(x\xFF", 8, &out, NULL, &err) == TFM_ERR_UTF8);
    CHECK_MSG(strstr(err.msg, "byte 3") != NULL, "message: %s", err.msg);
    CHECK(tfm_normalize(&p, "caf\xC3\xA9", 5, &out, NULL, &err) == TFM_OK);
    CHECK(out.len == 5);
    tfm_buf_free(&out);
}

static void test_controls_kept(void)
{
    /* NUL, tabs, newlines, CR, DEL, C1 controls, line separator, ZWJ and
     * runs of spaces all pass through every form. */
    static const char in[] = "a\0b\tc\n\r  d\x7F\xC2\x85\xE2\x80\xA8\xE2\x80\x8D\0e\xCC\x81\0";
    static const char nfc[] = "a\0b\tc\n\r  d\x7F\xC2\x85\xE2\x80\xA8\xE2\x80\x8D\0\xC3\xA9\0";
    size_t n = sizeof in - 1, m = sizeof nfc - 1;
    expect_n(TFM_NORM_NFKC, false, in, n, nfc, m, 0);
    expect_n(TFM_NORM_NFC, true, in, n, nfc, m, 0);
    expect_n(TFM_NORM_NONE, false, in, n, in, n, 0);
    /* A NUL between letter and accent stops the composition, and survives. */
    expect_n(TFM_NORM_NFC, false, "e\0\xCC\x81", 4, "e\0\xCC\x81", 4, 0);
    expect_n(TFM_NORM_NFKC, false, "\0\0", 2, "\0\0", 2, 0);
    expect(TFM_NORM_NFKC, false, "", "", 0);
    expect(TFM_NORM_NFKC, false, "\t \t", "\t \t", 0);
}

/* normalize(normalize(x)) == normalize(x) for a mix of scripts and tricky
 * sequences, in every form. */
static void test_idempotent(void)
{
    static const char *const lines[] = {
        "caf\xC3\xA9 e\xCC\x81 \xEF\xAC\x81 \xEF\xBC\xA1",
        /* Greek, ypogegrammeni */
        "\xCE\x8A\xCE\xA3\xCF\x82 \xE1\xBE\xB3 \xCE\x91\xCD\x85 \xE1\xBE\xBC",
        "\xC7\xB0 J\xCC\x8C \xC4\xB0stanbul \xE1\xBA\x9E",
        "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 \xEA\xB0\x80",                     /* Hangul */
        /* Devanagari nukta */
        "\xE0\xA4\x95\xE0\xA4\xBC \xE0\xA5\x98",
        "\xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD\xE2\x80\x8D\xF0\x9F\x92\xBB \xEF\xBC\x8E", /* emoji */
        /* compat oddities */
        "\xE2\x91\xB4 \xE3\x8D\xBF \xEF\xB7\xBA \xE2\x84\xAA \xE2\x84\xAB",
        "a\xCC\x81\xCC\xA3\xCC\x87 \xCC\x81 \xE2\x80\x83x\xC2\xA0y",
        "\xFF\xC0\x80\xED\xBF\xBF\xF0\x90",
    };
    tfm_buf a, b;
    tfm_buf_init(&a);
    tfm_buf_init(&b);
    for (int form = TFM_NORM_NONE; form <= TFM_NORM_NFKC; form++) {
        for (int fold = 0; fold < 2; fold++) {
            tfm_norm_params p = params((tfm_norm_form)form, fold);
            for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
                CHECK(tfm_normalize(&p, lines[i], strlen(lines[i]), &a, NULL, NULL) == TFM_OK);
                size_t nr = 99;
                CHECK(tfm_normalize(&p, a.data, a.len, &b, &nr, NULL) == TFM_OK);
                CHECK_MSG(a.len == b.len && memcmp(a.data, b.data, a.len) == 0,
                          "form %d fold %d line %zu not idempotent", form, fold, i);
                CHECK(nr == 0);
            }
        }
    }
    tfm_buf_free(&a);
    tfm_buf_free(&b);
}

/* A line longer than 1 MB, ASCII and not, normalises whole. */
static void test_long_line(void)
{
    size_t reps = 300000; /* "Ab e" + U+0301 ... 7 bytes each: 2.1 MB */
    size_t n = reps * 7;
    char *in = malloc(n);
    for (size_t i = 0; i < reps; i++) memcpy(in + 7 * i, "Ab e\xCC\x81 ", 7);
    tfm_norm_params p = params(TFM_NORM_NFKC, true);
    tfm_buf out;
    tfm_buf_init(&out);
    CHECK(tfm_normalize(&p, in, n, &out, NULL, NULL) == TFM_OK);
    CHECK(out.len == reps * 6);
    bool same = out.len == reps * 6;
    for (size_t i = 0; same && i < reps; i++)
        same = memcmp(out.data + 6 * i, "ab \xC3\xA9 ", 6) == 0;
    CHECK(same);
    /* ASCII only, with a single invalid byte at the very end. */
    memset(in, 'x', n);
    in[n - 1] = (char)0x80;
    size_t nr = 0;
    CHECK(tfm_normalize(&p, in, n, &out, &nr, NULL) == TFM_OK);
    CHECK(nr == 1 && out.len == n + 2);
    free(in);
    tfm_buf_free(&out);
}

static void test_utf8_codec(void)
{
    /* Every scalar value encodes and decodes back to itself. */
    bool ok = true;
    for (int32_t cp = 0; cp <= 0x10FFFF && ok; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        char buf[4];
        int n = tfm_utf8_encode(cp, buf);
        int32_t back = -1;
        int m = tfm_utf8_decode((const unsigned char *)buf, (size_t)n, &back);
        ok = m == n && back == cp && n == (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
        if (!ok) CHECK_MSG(ok, "U+%04X", (unsigned)cp);
    }
    int32_t cp;
    CHECK(tfm_utf8_decode((const unsigned char *)"\xC0\x80", 2, &cp) == 0);     /* overlong NUL */
    CHECK(tfm_utf8_decode((const unsigned char *)"\xED\xA0\x80", 3, &cp) == 0); /* surrogate */
    CHECK(tfm_utf8_decode((const unsigned char *)"\xE2\x82\xAC", 2, &cp) == 0); /* truncated */
    CHECK(tfm_utf8_decode((const unsigned char *)"\xF4\x90\x80\x80", 4, &cp) == 0);
    CHECK(tfm_utf8_decode((const unsigned char *)"", 0, &cp) == 0);
    CHECK(tfm_utf8_decode((const unsigned char *)"\0", 1, &cp) == 1 && cp == 0);
}

static void test_classes(void)
{
    CHECK(tfm_char_class_of('a') == TFM_CLASS_LATIN);
    CHECK(tfm_char_class_of('Z') == TFM_CLASS_LATIN);
    CHECK(tfm_char_class_of(0xE9) == TFM_CLASS_LATIN);     /* é */
    CHECK(tfm_char_class_of(0x1EA1) == TFM_CLASS_LATIN);   /* ạ, Latin Extended Additional */
    CHECK(tfm_char_class_of(0x0259) == TFM_CLASS_LATIN);   /* ə, IPA */
    CHECK(tfm_char_class_of('7') == TFM_CLASS_NUMBER);
    CHECK(tfm_char_class_of(0x0663) == TFM_CLASS_NUMBER);  /* Arabic-Indic three */
    CHECK(tfm_char_class_of(0x0967) == TFM_CLASS_NUMBER);  /* Devanagari one */
    CHECK(tfm_char_class_of(0x2167) == TFM_CLASS_NUMBER);  /* Roman numeral eight (Nl) */
    CHECK(tfm_char_class_of(',') == TFM_CLASS_COMMON);
    CHECK(tfm_char_class_of(0x060C) == TFM_CLASS_COMMON);  /* Arabic comma */
    CHECK(tfm_char_class_of(0x1F600) == TFM_CLASS_COMMON); /* emoji */
    CHECK(tfm_char_class_of(0x1F3FD) == TFM_CLASS_COMMON); /* skin tone */
    CHECK(tfm_char_class_of(0x200D) == TFM_CLASS_ANY);     /* ZWJ */
    CHECK(tfm_char_class_of(0x2581) == TFM_CLASS_ANY);
    CHECK(tfm_char_class_of(0x0301) == TFM_CLASS_ANY);     /* combining acute */
    CHECK(tfm_char_class_of(0x03B1) == TFM_CLASS_GREEK);
    CHECK(tfm_char_class_of(0x1F70) == TFM_CLASS_GREEK);
    CHECK(tfm_char_class_of(0x0436) == TFM_CLASS_CYRILLIC);
    CHECK(tfm_char_class_of(0x0561) == TFM_CLASS_ARMENIAN);
    CHECK(tfm_char_class_of(0x05D0) == TFM_CLASS_HEBREW);
    CHECK(tfm_char_class_of(0x05B8) == TFM_CLASS_HEBREW);  /* qamats, a mark */
    CHECK(tfm_char_class_of(0x0628) == TFM_CLASS_ARABIC);
    CHECK(tfm_char_class_of(0xFEB3) == TFM_CLASS_ARABIC);  /* presentation form */
    CHECK(tfm_char_class_of(0x0915) == TFM_CLASS_INDIC);   /* क */
    CHECK(tfm_char_class_of(0x093F) == TFM_CLASS_INDIC);   /* vowel sign i (Mc) */
    CHECK(tfm_char_class_of(0x0B95) == TFM_CLASS_INDIC);   /* Tamil */
    CHECK(tfm_char_class_of(0x0E01) == TFM_CLASS_THAI);
    CHECK(tfm_char_class_of(0x4E2D) == TFM_CLASS_HAN);
    CHECK(tfm_char_class_of(0x3042) == TFM_CLASS_HAN);     /* Hiragana あ */
    CHECK(tfm_char_class_of(0x30AB) == TFM_CLASS_HAN);     /* Katakana カ */
    CHECK(tfm_char_class_of(0x30FC) == TFM_CLASS_HAN);     /* prolonged sound mark */
    CHECK(tfm_char_class_of(0x20B9F) == TFM_CLASS_HAN);    /* CJK extension B */
    CHECK(tfm_char_class_of(0xD55C) == TFM_CLASS_HANGUL);
    CHECK(tfm_char_class_of(0x10D3) == TFM_CLASS_OTHER_SCRIPT); /* Georgian */
    CHECK(tfm_char_class_of(0x1200) == TFM_CLASS_OTHER_SCRIPT); /* Ethiopic */

    /* Keys: same script joins; different Indic blocks and different scripts do not. */
    CHECK(tfm_char_script_key('a') == tfm_char_script_key(0x1EA1));
    CHECK(tfm_char_script_key('a') != tfm_char_script_key(0x03B1));
    CHECK(tfm_char_script_key(0x0915) == tfm_char_script_key(0x093F));
    CHECK(tfm_char_script_key(0x0915) != tfm_char_script_key(0x0995)); /* Devanagari vs Bengali */
    CHECK(tfm_char_script_key(0x10D3) == tfm_char_script_key(0x10D0));
    CHECK(tfm_char_script_key(0x10D3) != tfm_char_script_key(0x1200));
    CHECK(tfm_char_script_key('1') == tfm_char_script_key('2'));
    CHECK(tfm_char_script_key('1') != tfm_char_script_key('a'));
    CHECK(tfm_char_script_key(0x3042) == tfm_char_script_key(0x4E2D));
    CHECK(tfm_char_script_key(0x2581) >> 24 == TFM_CLASS_ANY);
    CHECK(tfm_char_script_key(',') >> 24 == TFM_CLASS_COMMON);
}

static void test_pieceable(void)
{
    CHECK(tfm_char_pieceable('a'));
    CHECK(tfm_char_pieceable('!'));
    CHECK(tfm_char_pieceable(0x4E2D));
    CHECK(tfm_char_pieceable(0x1F600));
    CHECK(tfm_char_pieceable(0x200D));   /* ZWJ (Cf) stays: emoji sequences need it */
    CHECK(tfm_char_pieceable(0x0301));
    CHECK(!tfm_char_pieceable(' '));
    CHECK(!tfm_char_pieceable('\t'));
    CHECK(!tfm_char_pieceable('\n'));
    CHECK(!tfm_char_pieceable(0));
    CHECK(!tfm_char_pieceable(0x7F));
    CHECK(!tfm_char_pieceable(0x85));    /* NEL */
    CHECK(!tfm_char_pieceable(0xA0));    /* no-break space */
    CHECK(!tfm_char_pieceable(0x3000));  /* ideographic space */
    CHECK(!tfm_char_pieceable(0x2028));  /* line separator */
    CHECK(!tfm_char_pieceable(0x2029));
    CHECK(!tfm_char_pieceable(0x2581));  /* a literal '▁' is spelled with bytes */
    CHECK(!tfm_char_pieceable(0xFFFD));
    CHECK(!tfm_char_pieceable(0xE000));  /* private use */
    CHECK(!tfm_char_pieceable(0x0378));  /* unassigned */
    CHECK(!tfm_char_pieceable(0xFFFF));  /* noncharacter */
    CHECK(!tfm_char_pieceable(0xD800));  /* surrogate */
}

/* A long run of combining marks out of canonical order: the result is
 * stream-safe (a U+034F joiner after every 30 marks), keeps every mark, is
 * idempotent, and reorders within each run of 30 (U+0316, class 220, before
 * U+0301, class 230). */
static void test_stream_safe(void)
{
    tfm_buf in, out, again;
    tfm_buf_init(&in);
    tfm_buf_init(&out);
    tfm_buf_init(&again);
    tfm_buf_append(&in, "x", 1); /* no precomposed x with these accents */
    for (int i = 0; i < 5000; i++) tfm_buf_append(&in, "\xCC\x81\xCC\x96", 4);
    tfm_norm_params p = params(TFM_NORM_NFC, false);
    CHECK(tfm_normalize(&p, in.data, in.len, &out, NULL, NULL) == TFM_OK);
    int marks = 0, joiners = 0, run = 0, longest = 0;
    for (size_t i = 0; i + 1 < out.len; i++) {
        if (!memcmp(out.data + i, "\xCD\x8F", 2)) { joiners++; run = 0; }
        if (!memcmp(out.data + i, "\xCC\x81", 2) || !memcmp(out.data + i, "\xCC\x96", 2)) {
            marks++;
            if (++run > longest) longest = run;
        }
    }
    CHECK_MSG(marks == 10000, "%d marks", marks);
    CHECK_MSG(longest <= 30, "a run of %d marks", longest);
    CHECK_MSG(joiners >= 10000 / 30, "%d joiners", joiners);
    CHECK(memcmp(out.data + 1, "\xCC\x96", 2) == 0); /* reordered inside the first run */
    CHECK(tfm_normalize(&p, out.data, out.len, &again, NULL, NULL) == TFM_OK);
    CHECK(again.len == out.len && memcmp(again.data, out.data, out.len) == 0);
    tfm_buf_free(&in);
    tfm_buf_free(&out);
    tfm_buf_free(&again);
}

int main(void)
{
    RUN(test_params);
    RUN(test_nfkc_nfc);
    RUN(test_case_fold);
    RUN(test_repair);
    RUN(test_controls_kept);
    RUN(test_idempotent);
    RUN(test_long_line);
    RUN(test_stream_safe);
    RUN(test_utf8_codec);
    RUN(test_classes);
    RUN(test_pieceable);
    CHECK_DONE();
}
