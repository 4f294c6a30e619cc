/* test_placeholder.c - placeholders (lib/text/placeholder.c and their use in
 * bpe_encode.c, bpe_decode.c, bpe_learn.c): each class found on many strings,
 * hostile ones included (nothing but placeholders, unbalanced tags, "%%", a
 * '%' at the end, "50% of", placeholders inside words, "{{" escapes,
 * positional conversions, invalid UTF-8 around them); the numbering rule
 * (the same set of texts gives the same numbers on both sides, above 32 is
 * text); replacing and finding texts; and encoding then decoding with them:
 * the placeholders come back byte for byte, tokens the source lacks are
 * dropped and counted, only real placeholders give placeholder ids. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/text.h"

/* The placeholders of line as "TEXT=N TEXT=N ...", N their number. */
static char *describe(const char *line, size_t len, unsigned classes)
{
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_error err;
    CHECK(tfm_placeholders_scan(line, len, classes, &p, &err) == TFM_OK);
    tfm_buf b;
    tfm_buf_init(&b);
    tfm_buf_append(&b, "", 0);
    for (size_t k = 0; k < p.n; k++)
        tfm_buf_printf(&b, "%s%.*s=%d", k ? " " : "", (int)p.items[k].len,
                       line + p.items[k].start, p.items[k].index);
    tfm_placeholders_free(&p);
    return b.data;
}

#define CHECK_SCAN(line, classes, want)                                         \
    do {                                                                        \
        char *got_ = describe(line, strlen(line), classes);                     \
        CHECK_MSG(strcmp(got_, want) == 0, "'%s': got '%s', want '%s'", line, got_, want); \
        free(got_);                                                             \
    } while (0)

static void test_printf(void)
{
    CHECK_SCAN("Open %s of %d files", TFM_PH_ALL, "%s=2 %d=1");
    CHECK_SCAN("%s and %s", TFM_PH_ALL, "%s=1 %s=1");
    CHECK_SCAN("%1$s %2$s", TFM_PH_ALL, "%1$s=1 %2$s=2");
    CHECK_SCAN("%2$s %1$s", TFM_PH_ALL, "%2$s=2 %1$s=1");
    CHECK_SCAN("%.2f %08x %-10lu %lld %hhd %zu %jd %Lf %'d %*d %.*s", TFM_PH_PRINTF,
               "%.2f=5 %08x=6 %-10lu=3 %lld=10 %hhd=8 %zu=11 %jd=9 %Lf=7 %'d=1 %*d=2 %.*s=4");
    CHECK_SCAN("%qs %qE %qD", TFM_PH_ALL, "%qs=3 %qE=2 %qD=1");
    CHECK_SCAN("100%% sure", TFM_PH_ALL, "%%=1");
    CHECK_SCAN("50% of them", TFM_PH_ALL, "");
    CHECK_SCAN("ends with %", TFM_PH_ALL, "");
    CHECK_SCAN("%", TFM_PH_ALL, "");
    CHECK_SCAN("% d", TFM_PH_ALL, "");           /* no space flag */
    CHECK_SCAN("%y %!", TFM_PH_ALL, "");
    CHECK_SCAN("file%sname", TFM_PH_ALL, "%s=1");
    CHECK_SCAN("%%s", TFM_PH_ALL, "%%=1");       /* "%%" then the text "s" */
    CHECK_SCAN("%%%s", TFM_PH_ALL, "%%=1 %s=2");
    CHECK_SCAN("%ls %S %C %p %n", TFM_PH_ALL, "%ls=3 %S=2 %C=1 %p=5 %n=4");

    /* ordered: in-order conversions, not positional ones and not "%%". */
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_error err;
    const char *line = "%s %1$d %% %d";
    CHECK(tfm_placeholders_scan(line, strlen(line), TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(p.n == 4);
    if (p.n == 4) {
        CHECK(p.items[0].ordered && !p.items[1].ordered && !p.items[2].ordered &&
              p.items[3].ordered);
        for (size_t k = 0; k < 4; k++) CHECK(p.items[k].kind == TFM_PH_PRINTF);
        CHECK(p.items[1].start == 3 && p.items[1].len == 4);
    }
    tfm_placeholders_free(&p);
}

static void test_other_classes(void)
{
    CHECK_SCAN("%(name)s has %(count)d", TFM_PH_ALL, "%(name)s=2 %(count)d=1");
    CHECK_SCAN("%(name)-10s %(x)5.2f", TFM_PH_ALL, "%(name)-10s=1 %(x)5.2f=2");
    CHECK_SCAN("%() %(a b)s %(x)", TFM_PH_ALL, "");
    CHECK_SCAN("%1 of %2, %10 and %99", TFM_PH_ALL, "%1=1 %2=3 %10=2 %99=4");
    CHECK_SCAN("%1 %0", TFM_PH_QT, "%1=1");
    CHECK_SCAN("%1$s", TFM_PH_QT, "%1=1");       /* printf not asked for */
    CHECK_SCAN("%1$s", TFM_PH_ALL, "%1$s=1");
    CHECK_SCAN("{name} {0} {} {name:fmt} {x:>10}", TFM_PH_ALL,
               "{name}=3 {0}=1 {}=5 {name:fmt}=2 {x:>10}=4");
    CHECK_SCAN("a{0}b", TFM_PH_ALL, "{0}=1");
    CHECK_SCAN("{{escaped}} {{0}}", TFM_PH_ALL, "");
    CHECK_SCAN("{{{0}}}", TFM_PH_ALL, "{0}=1");
    CHECK_SCAN("{ } {a b} {x:a b} {unclosed", TFM_PH_ALL, "");
    /* "${1x}" is no ${var}, but "{1x}" is a brace placeholder. */
    CHECK_SCAN("${HOME} ${1x} ${} $HOME", TFM_PH_ALL, "${HOME}=1 {1x}=2 {}=3");
    CHECK_SCAN("${HOME}", TFM_PH_BRACES, "{HOME}=1");
    CHECK_SCAN("<b>bold</b> <br/> <br /> <a href=\"x\">", TFM_PH_ALL,
               "<b>=3 </b>=1 <br/>=5 <br />=4 <a href=\"x\">=2");
    CHECK_SCAN("<b>text", TFM_PH_ALL, "<b>=1");    /* unbalanced: a tag all the same */
    CHECK_SCAN("</i> only", TFM_PH_ALL, "</i>=1");
    CHECK_SCAN("a < b > c <1> <> </> <-x>", TFM_PH_ALL, "");
    CHECK_SCAN("<svg:rect x-y=\"1\"/>", TFM_PH_ALL, "<svg:rect x-y=\"1\"/>=1");
    CHECK_SCAN("<ph3> is a tag", TFM_PH_ALL, "<ph3>=1");
    CHECK_SCAN("<a\thref=x>", TFM_PH_ALL, "");     /* a tab is never in a placeholder */
    CHECK_SCAN("&amp; &#123; &#x1F; &#X1f;", TFM_PH_ALL, "&amp;=4 &#123;=1 &#x1F;=3 &#X1f;=2");
    CHECK_SCAN("& amp; &; &#; &#x; &#12a; AT&T", TFM_PH_ALL, "");
    CHECK_SCAN("<b>&amp;</b>", TFM_PH_TAGS, "<b>=2 </b>=1");
    CHECK_SCAN("<b>&amp;</b>", TFM_PH_ENTITIES, "&amp;=1");
    CHECK_SCAN("%s {0} <b>", 0, "");

    /* A tag's attributes are bounded: a long run is text. */
    char long_tag[300];
    memset(long_tag, 'x', sizeof long_tag);
    memcpy(long_tag, "<a ", 3);
    long_tag[sizeof long_tag - 2] = '>';
    long_tag[sizeof long_tag - 1] = 0;
    CHECK_SCAN(long_tag, TFM_PH_ALL, "");
}

static void test_hostile(void)
{
    /* Nothing but placeholders. */
    CHECK_SCAN("%s%d{0}<b></b>&amp;${x}%1", TFM_PH_ALL,
               "%s=4 %d=3 {0}=8 <b>=7 </b>=6 &amp;=5 ${x}=1 %1=2");
    /* Invalid UTF-8 around placeholders; inside a tag it stops the tag. */
    const char bad[] = "\xff%s\xc3 <b>\x80</b> <a title=\"\xe2\x82\">";
    CHECK_SCAN(bad, TFM_PH_ALL, "%s=1 <b>=3 </b>=2");
    /* NUL bytes and controls. */
    const char nul[] = "a\0%s\0<b\x01>";
    char *got = describe(nul, sizeof nul - 1, TFM_PH_ALL);
    CHECK_MSG(strcmp(got, "%s=1") == 0, "got '%s'", got);
    free(got);
    /* Every placeholder text is valid UTF-8 without controls. */
    const char mixed[] = "<a title=\"caf\xc3\xa9\"> <a title=\"\xc2\x85\"> %s\t%d";
    CHECK_SCAN(mixed, TFM_PH_ALL, "<a title=\"caf\xc3\xa9\">=3 %s=2 %d=1");
    /* A huge line of placeholders. */
    size_t n = 200000;
    char *big = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) memcpy(big + 2 * i, i % 2 ? "%d" : "%s", 2);
    big[2 * n] = 0;
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_error err;
    CHECK(tfm_placeholders_scan(big, 2 * n, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(p.n == n && p.n_distinct == 2);
    tfm_placeholders_free(&p);
    free(big);
}

static void test_numbering(void)
{
    /* The same set of texts gives the same numbers, whatever the order and
     * the words around them: a source and its translation agree. */
    CHECK_SCAN("Copy %s to %d", TFM_PH_ALL, "%s=2 %d=1");
    CHECK_SCAN("Nach %d %s kopieren", TFM_PH_ALL, "%d=1 %s=2");
    CHECK_SCAN("<b>%s</b>", TFM_PH_ALL, "<b>=3 %s=1 </b>=2");
    CHECK_SCAN("</b>%s<b>", TFM_PH_ALL, "</b>=2 %s=1 <b>=3");
    /* Shorter first on a common prefix. */
    CHECK_SCAN("%10 %1", TFM_PH_ALL, "%10=2 %1=1");

    /* Above TFM_PH_TOKENS distinct texts: the rest is text (number 0). */
    tfm_buf b;
    tfm_buf_init(&b);
    for (int i = 40; i >= 1; i--) tfm_buf_printf(&b, "{%02d} ", i);
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_error err;
    CHECK(tfm_placeholders_scan(b.data, b.len, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(p.n == 40 && p.n_distinct == 40);
    for (size_t k = 0; k < p.n; k++) {
        int value = 40 - (int)k; /* {40} first */
        CHECK(p.items[k].index == (value <= TFM_PH_TOKENS ? value : 0));
    }
    size_t len;
    const char *t = tfm_placeholders_text(b.data, &p, 32, &len);
    CHECK(t && len == 4 && memcmp(t, "{32}", 4) == 0);
    CHECK(tfm_placeholders_text(b.data, &p, 33, &len) == NULL && len == 0);
    CHECK(tfm_placeholders_text(b.data, &p, 0, NULL) == NULL);
    tfm_buf out;
    tfm_buf_init(&out);
    CHECK(tfm_placeholders_replace(b.data, b.len, &p, &out, &err) == TFM_OK);
    CHECK(strncmp(out.data, "{40} {39} {38} {37} {36} {35} {34} {33} <ph32> <ph31>", 52) == 0);
    tfm_buf_free(&out);
    tfm_buf_free(&b);
    tfm_placeholders_free(&p);
}

static void test_replace_and_parse(void)
{
    const char *line = "Open %s of %d files: <b>%s</b>";
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    tfm_error err;
    tfm_buf out;
    tfm_buf_init(&out);
    CHECK(tfm_placeholders_scan(line, strlen(line), TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(tfm_placeholders_replace(line, strlen(line), &p, &out, &err) == TFM_OK);
    CHECK(strcmp(out.data, "Open <ph2> of <ph1> files: <ph4><ph2><ph3>") == 0);
    size_t len;
    const char *t = tfm_placeholders_text(line, &p, 4, &len);
    CHECK(t == line + 21 && len == 3);
    CHECK(tfm_placeholders_scan("", 0, TFM_PH_ALL, &p, &err) == TFM_OK && p.n == 0);
    CHECK(tfm_placeholders_replace("", 0, &p, &out, &err) == TFM_OK && out.len == 0);

    unsigned c;
    CHECK(tfm_placeholder_classes_parse("all", &c, &err) == TFM_OK && c == TFM_PH_ALL);
    CHECK(tfm_placeholder_classes_parse("none", &c, &err) == TFM_OK && c == 0);
    CHECK(tfm_placeholder_classes_parse("printf,tags", &c, &err) == TFM_OK &&
          c == (TFM_PH_PRINTF | TFM_PH_TAGS));
    CHECK(tfm_placeholder_classes_parse("printf,python,qt,braces,dollar,tags,entities", &c,
                                        &err) == TFM_OK && c == TFM_PH_ALL);
    CHECK(tfm_placeholder_classes_parse("printf,xml", &c, &err) == TFM_ERR_ARG);
    CHECK(strstr(err.msg, "'xml'") != NULL);
    CHECK(tfm_placeholder_classes_parse("", &c, &err) == TFM_ERR_ARG);
    CHECK(tfm_placeholder_classes_parse("tags,", &c, &err) == TFM_ERR_ARG);
    tfm_buf_free(&out);
    tfm_placeholders_free(&p);
}

/* ---- with a vocabulary ------------------------------------------------------------ */

static const char *const corpus[] = {
    "Open %s of %d files",
    "Saved <b>%s</b> to {0}",
    "the cat sat on the mat and the dog ran",
    "Delete &amp; close ${HOME} %(name)s now",
    "a file with a name and more files",
    "%1 copied to %2",
};
enum { N_CORPUS = sizeof corpus / sizeof corpus[0] };

static tfm_vocab *learn(bool placeholders)
{
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = 400;
    p.n_threads = 2;
    p.soft_vocab_limit = true;
    p.placeholders = placeholders;
    tfm_bpe_learner *l;
    tfm_error err;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    const char *lines[N_CORPUS];
    size_t lens[N_CORPUS];
    for (int i = 0; i < N_CORPUS; i++) {
        lines[i] = corpus[i];
        lens[i] = strlen(corpus[i]);
    }
    CHECK(tfm_bpe_learner_add_batch(l, lines, lens, N_CORPUS, NULL, &err) == TFM_OK);
    CHECK(tfm_bpe_learner_add(l, "50% of %s", 9, NULL, &err) == TFM_OK);
    tfm_vocab *v = NULL;
    CHECK(tfm_bpe_learner_finish(l, &v, &err) == TFM_OK);
    tfm_bpe_learner_free(l);
    return v;
}

/* Encodes line with its placeholders and decodes it against src. */
static char *round_trip(tfm_bpe *b, const tfm_vocab *v, const char *line, size_t len,
                        const char *src, size_t src_len, size_t *dropped, tfm_ids *ids)
{
    tfm_placeholders p, q;
    tfm_placeholders_init(&p);
    tfm_placeholders_init(&q);
    tfm_error err;
    tfm_buf out;
    tfm_buf_init(&out);
    tfm_buf_append(&out, "", 0);
    CHECK(tfm_placeholders_scan(line, len, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(tfm_bpe_encode_placeholders(b, NULL, line, len, &p, ids, NULL, &err) == TFM_OK);
    CHECK(tfm_placeholders_scan(src, src_len, TFM_PH_ALL, &q, &err) == TFM_OK);
    CHECK(tfm_bpe_decode_placeholders(v, ids->data, ids->len, src, src_len, &q, &out, dropped,
                                      &err) == TFM_OK);
    tfm_placeholders_free(&p);
    tfm_placeholders_free(&q);
    return out.data;
}

static void test_encode_decode(void)
{
    tfm_vocab *v = learn(true);
    tfm_vocab *plain = learn(false);
    if (!v || !plain) return;
    for (int i = 1; i <= TFM_PH_TOKENS; i++) {
        int32_t id = tfm_vocab_placeholder_id(v, i);
        CHECK(id >= 4 && tfm_vocab_type(v, id) == TFM_PIECE_USER);
    }
    CHECK(tfm_vocab_placeholder_id(v, 0) == -1 && tfm_vocab_placeholder_id(v, 33) == -1);
    CHECK(tfm_vocab_placeholder_id(plain, 1) == -1);
    /* No merge was spent on a placeholder: "%s" is no piece. */
    CHECK(tfm_vocab_find(v, "%s", 2) < 0);

    tfm_bpe *b;
    tfm_error err;
    CHECK(tfm_bpe_create(v, &b, &err) == TFM_OK);
    tfm_ids ids, ref;
    tfm_ids_init(&ids);
    tfm_ids_init(&ref);
    tfm_buf norm, replaced;
    tfm_buf_init(&norm);
    tfm_buf_init(&replaced);
    tfm_norm_params np = *tfm_vocab_norm(v);
    static const char *const lines[] = {
        "Open %s of %d files", "%s", "%s%d{0}<b></b>&amp;${x}%1", "", " %s ", "file%sname",
        "a{0}b {{escaped}}", "50% of them %", "<b>text", "  two  spaces %s  ",
        "%2$s %1$s", "Straße %s café",
    };
    size_t dropped;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const char *x = lines[i];
        size_t len = strlen(x);
        char *got = round_trip(b, v, x, len, x, len, &dropped, &ids);
        CHECK(tfm_normalize(&np, x, len, &norm, NULL, &err) == TFM_OK);
        CHECK_MSG(strcmp(got, norm.data ? norm.data : "") == 0, "'%s' gave '%s'", x, got);
        CHECK(dropped == 0);
        /* The ids are those of the text with the tokens written in. */
        tfm_placeholders p;
        tfm_placeholders_init(&p);
        CHECK(tfm_placeholders_scan(x, len, TFM_PH_ALL, &p, &err) == TFM_OK);
        CHECK(tfm_placeholders_replace(x, len, &p, &replaced, &err) == TFM_OK);
        CHECK(tfm_bpe_encode(b, NULL, replaced.data, replaced.len, &ref, NULL, &err) == TFM_OK);
        CHECK_MSG(ref.len == ids.len &&
                      (ids.len == 0 || memcmp(ref.data, ids.data, ids.len * sizeof *ids.data) == 0),
                  "'%s'", x);
        tfm_placeholders_free(&p);
        free(got);
    }

    /* Invalid UTF-8 around placeholders: repaired around them, they come back. */
    const char bad[] = "\xff%s\xc3<b>";
    char *got = round_trip(b, v, bad, sizeof bad - 1, bad, sizeof bad - 1, &dropped, &ids);
    CHECK_MSG(strcmp(got, "\xef\xbf\xbd%s\xef\xbf\xbd<b>") == 0, "got '%s'", got);
    free(got);

    /* Decoded against another source line: its texts, and the tokens it
     * lacks dropped and counted. */
    const char *src = "Copy %d";
    got = round_trip(b, v, "Open %s of %d files", 19, src, strlen(src), &dropped, &ids);
    CHECK_MSG(strcmp(got, "Open of %d files") == 0 || strcmp(got, "Open  of %d files") == 0,
              "got '%s'", got);
    CHECK(dropped == 1);
    free(got);

    /* A placeholder next to a character normalisation would join to it:
     * '>' + U+0338 composes to U+226F, yet the tag comes back whole. */
    const char comb[] = "<b>\xcc\xb8 x";
    got = round_trip(b, v, comb, sizeof comb - 1, comb, sizeof comb - 1, &dropped, &ids);
    CHECK_MSG(strcmp(got, comb) == 0, "got '%s'", got);
    free(got);

    /* Only placeholders give placeholder ids: "＜ph1＞" normalises to
     * "<ph1>" but is text. */
    const char wide[] = "\xef\xbc\x9cph1\xef\xbc\x9e %s";
    tfm_placeholders p;
    tfm_placeholders_init(&p);
    CHECK(tfm_placeholders_scan(wide, sizeof wide - 1, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(p.n == 1);
    CHECK(tfm_bpe_encode_placeholders(b, NULL, wide, sizeof wide - 1, &p, &ids, NULL, &err) ==
          TFM_OK);
    int n_ph = 0;
    for (size_t k = 0; k < ids.len; k++) n_ph += ids.data[k] == tfm_vocab_placeholder_id(v, 1);
    CHECK(n_ph == 1);
    got = round_trip(b, v, wide, sizeof wide - 1, wide, sizeof wide - 1, &dropped, &ids);
    CHECK_MSG(strcmp(got, "<ph1> %s") == 0, "got '%s'", got);
    free(got);

    /* Strict: the offset of invalid UTF-8 is the line's. */
    tfm_bpe_encode_params ep = {.strict = true};
    const char strict[] = "ab %s c\xff";
    CHECK(tfm_placeholders_scan(strict, sizeof strict - 1, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(tfm_bpe_encode_placeholders(b, &ep, strict, sizeof strict - 1, &p, &ids, NULL, &err) ==
          TFM_ERR_UTF8);
    CHECK_MSG(strstr(err.msg, "byte 8") != NULL || strstr(err.msg, "byte 7") != NULL, "%s",
              err.msg);

    /* A vocabulary without the tokens. */
    tfm_bpe *bp;
    CHECK(tfm_bpe_create(plain, &bp, &err) == TFM_OK);
    CHECK(tfm_placeholders_scan("%s", 2, TFM_PH_ALL, &p, &err) == TFM_OK);
    CHECK(tfm_bpe_encode_placeholders(bp, NULL, "%s", 2, &p, &ids, NULL, &err) == TFM_ERR_FORMAT);
    CHECK(strstr(err.msg, "placeholder") != NULL);
    /* Without placeholders, a vocabulary with them encodes as before. */
    CHECK(tfm_bpe_encode(b, NULL, "<ph2> x", 7, &ids, NULL, &err) == TFM_OK);
    CHECK(ids.len >= 2 && ids.data[1] == tfm_vocab_placeholder_id(v, 2)); /* after "▁" */

    tfm_bpe_free(bp);
    tfm_placeholders_free(&p);
    tfm_buf_free(&norm);
    tfm_buf_free(&replaced);
    tfm_ids_free(&ids);
    tfm_ids_free(&ref);
    tfm_bpe_free(b);
    tfm_vocab_free(v);
    tfm_vocab_free(plain);
}

static void test_learner_symbols(void)
{
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = 300;
    p.placeholders = true;
    const char *const user[] = {"<ph3>"};
    p.user_symbols = user;
    p.n_user_symbols = 1;
    tfm_bpe_learner *l;
    tfm_error err;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_ERR_ARG); /* given twice */
    const char *const other[] = {"@@"};
    p.user_symbols = other;
    p.vocab_size = 4 + 1 + 32 + 256; /* one short */
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_ERR_RANGE);
    p.vocab_size = 400;
    p.soft_vocab_limit = true;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    CHECK(tfm_bpe_learner_add(l, "a @@ %s b", 9, NULL, &err) == TFM_OK);
    tfm_vocab *v = NULL;
    CHECK(tfm_bpe_learner_finish(l, &v, &err) == TFM_OK);
    if (v) {
        CHECK(tfm_vocab_find(v, "@@", 2) == 4);
        CHECK(tfm_vocab_placeholder_id(v, 1) == 5 && tfm_vocab_placeholder_id(v, 32) == 36);
    }
    tfm_vocab_free(v);
    tfm_bpe_learner_free(l);
}

int main(void)
{
    RUN(test_printf);
    RUN(test_other_classes);
    RUN(test_hostile);
    RUN(test_numbering);
    RUN(test_replace_and_parse);
    RUN(test_encode_decode);
    RUN(test_learner_symbols);
    CHECK_DONE();
}
