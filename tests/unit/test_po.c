/* test_po.c - PO catalogs (lib/io/po_read.c, lib/text/po_write.c): escapes
 * read and written back (a round trip over many strings), segments and
 * their rebuilding, msgstr lines wrapped as gettext 0.21's msgcat wraps
 * them (the expected texts are msgcat's output), plural forms, the fuzzy
 * mark, every other byte kept (LF and CR LF), the entries left untranslated
 * and why, and hostile catalogs refused with their line. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tfm/po.h"

#define HEADER                                                  \
    "msgid \"\"\n"                                              \
    "msgstr \"\"\n"                                             \
    "\"Content-Type: text/plain; charset=UTF-8\\n\"\n"          \
    "\"Plural-Forms: nplurals=2; plural=(n != 1);\\n\"\n"

static tfm_po *parse(const char *text)
{
    tfm_po *po = NULL;
    tfm_error err;
    tfm_status s = tfm_po_parse(text, strlen(text), &po, &err);
    CHECK_MSG(s == TFM_OK, "%s", err.msg);
    return po;
}

/* What keyword s becomes, as written by tfm_po_write_string. */
static char *written(const char *keyword, const char *s)
{
    tfm_buf b;
    tfm_buf_init(&b);
    CHECK(tfm_po_write_string(&b, keyword, s, strlen(s), "\n") == TFM_OK);
    return b.data;
}

#define CHECK_WRAP(kw, s, want)                                                        \
    do {                                                                               \
        char *got_ = written(kw, s);                                                   \
        CHECK_MSG(strcmp(got_, want) == 0, "got\n%s\nwant\n%s", got_, want);           \
        free(got_);                                                                    \
    } while (0)

static void test_escapes(void)
{
    tfm_po *po = parse(HEADER "\nmsgid \"a\\n\\t\\\"\\\\\\a\\b\\f\\v\\r\\'\\?\\101\\x42\\7z\"\n"
                              "\"\" \"more\"\nmsgstr \"\"\n");
    if (!po) return;
    CHECK(po->n_entries == 2 && po->header == 0 && po->nplurals == 2);
    const tfm_po_string *id = &po->entries[1].msgid;
    static const char want[] = "a\n\t\"\\\a\b\f\v\r'?AB\az" "more";
    CHECK(id->len == sizeof want - 1 && memcmp(id->text, want, id->len) == 0);
    CHECK(id->line == 6);
    tfm_po_free(po);

    /* written then read: the same bytes, for strings of every byte but NUL */
    tfm_rng rng;
    tfm_rng_seed(&rng, 7);
    static const char alphabet[] = "ab \n\t\"\\\a\b\f\v\r'?%{-/.,:";
    for (int round = 0; round < 300; round++) {
        char s[1000];
        size_t n = tfm_rng_below(&rng, 300), len = 0;
        for (size_t i = 0; i < n; i++) {
            size_t k = tfm_rng_below(&rng, sizeof alphabet + 1);
            const char *add = k == sizeof alphabet ? "é" : k == sizeof alphabet - 1 ? "日" : NULL;
            if (add) {
                memcpy(s + len, add, strlen(add));
                len += strlen(add);
            } else {
                s[len++] = alphabet[k];
            }
        }
        s[len] = 0;
        tfm_buf b;
        tfm_buf_init(&b);
        tfm_buf_append(&b, "msgid \"x\"\n", 10);
        CHECK(tfm_po_write_string(&b, "msgstr", s, len, "\n") == TFM_OK);
        po = parse(b.data);
        CHECK_MSG(po && po->entries[0].msgstr[0].len == len &&
                  memcmp(po->entries[0].msgstr[0].text, s, len) == 0, "round %d", round);
        /* no line longer than 79 columns unless a word is */
        for (const char *p = b.data; *p;) {
            const char *e = strchr(p, '\n');
            size_t cols = 0;
            for (const char *q = p; q < e; q++) cols += ((unsigned char)*q & 0xc0) != 0x80;
            bool has_space = memchr(p + 1, ' ', (size_t)(e - p) - 1) != NULL;
            CHECK_MSG(cols <= 79 || !has_space || strncmp(p, "msgid", 5) == 0, "line of %zu", cols);
            p = e + 1;
        }
        tfm_po_free(po);
        tfm_buf_free(&b);
    }
}

static void test_wrap_as_msgcat(void)
{
    CHECK_WRAP("msgstr", "", "msgstr \"\"\n");
    CHECK_WRAP("msgstr", "short\n", "msgstr \"short\\n\"\n");
    CHECK_WRAP("msgstr", "line one\nline two\n",
               "msgstr \"\"\n\"line one\\n\"\n\"line two\\n\"\n");
    CHECK_WRAP("msgstr", "aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa "
                         "aaaa aaaa aaaa aaaa aaaa aaaa",
               "msgstr \"\"\n"
               "\"aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa aaaa \"\n"
               "\"aaaa aaaa aaaa aaaa aaaa\"\n");
    CHECK_WRAP("msgstr", "exactly seventy-two columns of text here xxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
               "msgstr \"exactly seventy-two columns of text here xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n");
    CHECK_WRAP("msgstr", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy-"
                         "zzzzzzzzzzzzzzzzzzzzzz/aaaaaaaaaaaaaaaaaaaaaaaa/"
                         "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
               "msgstr \"\"\n"
               "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-\"\n"
               "\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy-zzzzzzzzzzzzzzzzzzzzzz/\"\n"
               "\"aaaaaaaaaaaaaaaaaaaaaaaa/\"\n"
               "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n");
    CHECK_WRAP("msgstr", "tab\there\\back and \a bell and a long line that goes past the end of "
                         "the line ok\n\n",
               "msgstr \"\"\n"
               "\"tab\\there\\\\back and \\a bell and a long line that goes past the end of the \"\n"
               "\"line ok\\n\"\n\"\\n\"\n");
    CHECK_WRAP("msgstr[0]", "Ouvrir le fichier « %s » dans une nouvelle fenêtre et l'afficher à "
                            "l'écran",
               "msgstr[0] \"\"\n"
               "\"Ouvrir le fichier « %s » dans une nouvelle fenêtre et l'afficher à l'écran\"\n");
    CHECK_WRAP("msgstr[1]", " yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
               "msgstr[1] \" yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"\n");
    CHECK_WRAP("msgstr", "日本語のテキストを長く書いてみます。日本語のテキストを長く書いてみます。"
                         "日本語のテキストです。",
               "msgstr \"\"\n"
               "\"日本語のテキストを長く書いてみます。日本語のテキストを長く書いてみます。日本\"\n"
               "\"語のテキストです。\"\n");
    CHECK_WRAP("msgstr", "Usage: prog [OPTION]... (see the manual) [FILE]... and more text here to "
                         "wrap it\n\tIndented\n",
               "msgstr \"\"\n"
               "\"Usage: prog [OPTION]... (see the manual) [FILE]... and more text here to \"\n"
               "\"wrap it\\n\"\n\"\\tIndented\\n\"\n");
}

typedef struct collected {
    char text[2048];
} collected;

static void collect(void *ctx, const char *seg, size_t n)
{
    collected *c = ctx;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "[%.*s]", (int)n, seg);
}

static void test_segments(void)
{
    collected c = {""};
    const char *s = "\nHello\n  World  \n \t\n\n";
    tfm_po_segments(s, strlen(s), collect, &c);
    CHECK_MSG(strcmp(c.text, "[Hello][World]") == 0, "%s", c.text);
    tfm_po_line lines[] = {{"Bonjour", 7}, {" Monde\r", 7}, {"", 0}};
    tfm_buf out;
    tfm_buf_init(&out);
    size_t next = 0;
    CHECK(tfm_po_rebuild(s, strlen(s), lines, 2, &next, &out) && next == 2);
    CHECK(out.data && strcmp(out.data, "\nBonjour\n  Monde  \n \t\n\n") == 0);
    tfm_buf_clear(&out);
    next = 1; /* a line missing: out unchanged, next past what there is */
    CHECK(!tfm_po_rebuild(s, strlen(s), lines, 2, &next, &out) && out.len == 0 && next == 2);
    next = 1; /* an empty line */
    CHECK(!tfm_po_rebuild(s, strlen(s), lines + 1, 2, &next, &out) && out.len == 0);
    next = 0; /* whitespace only: nothing taken, kept */
    CHECK(tfm_po_rebuild(" \n", 2, lines, 2, &next, &out) && next == 0 && strcmp(out.data, " \n") == 0);
    tfm_buf_free(&out);
}

typedef struct failures {
    size_t n, lines[16];
    char last[512];
} failures;

static void failed(void *ctx, size_t line, const char *why)
{
    failures *f = ctx;
    if (f->n < 16) f->lines[f->n] = line;
    f->n++;
    snprintf(f->last, sizeof f->last, "%s", why);
}

/* The catalog text merged with translations; failures into f. */
static char *merge(const char *catalog, const char *translations, bool all, bool fuzzy,
                   failures *f, tfm_status *status)
{
    tfm_po *po = parse(catalog);
    if (!po) return NULL;
    tfm_po_merge_params p = tfm_po_merge_default_params();
    p.all = all;
    p.fuzzy = fuzzy;
    p.failed = failed;
    p.ctx = f;
    memset(f, 0, sizeof *f);
    tfm_buf out;
    tfm_buf_init(&out);
    size_t n_failed;
    tfm_error err;
    *status = tfm_po_merge(po, &p, translations, strlen(translations), &out, &n_failed, &err);
    CHECK(*status != TFM_OK || n_failed == f->n);
    tfm_po_free(po);
    return out.data;
}

static const char catalog[] =
    HEADER
    "\n"
    "# translator\n"
    "#. extracted\n"
    "#: src/a.c:12\n"
    "#, c-format\n"
    "msgid \"Open %s\"\n"
    "msgstr \"\"\n"
    "\n"
    "#, fuzzy\n"
    "#| msgid \"Old\"\n"
    "msgctxt \"menu\"\n"
    "msgid \"File\"\n"
    "msgstr \"\"\n"
    "\n"
    "#| msgid \"Older\"\n"
    "msgid \"\"\n"
    "\"Two\\n\"\n"
    "\"  lines\\n\"\n"
    "msgstr \"\"\n"
    "\n"
    "msgid \"%d file\"\n"
    "msgid_plural \"%d files\"\n"
    "msgstr[0] \"\"\n"
    "msgstr[1] \"\"\n"
    "\n"
    "msgid \"Done\"\n"
    "msgstr \"Fait\"\n"
    "\n"
    "#~ msgid \"Gone\"\n"
    "#~ msgstr \"Parti\"\n";

static void test_merge(void)
{
    tfm_po *po = parse(catalog);
    if (!po) return;
    tfm_buf lines;
    tfm_buf_init(&lines);
    size_t n;
    CHECK(tfm_po_strings(po, false, &lines, &n, NULL) == TFM_OK && n == 6);
    CHECK(strcmp(lines.data, "Open %s\nFile\nTwo\nlines\n%d file\n%d files\n") == 0);
    tfm_buf_clear(&lines);
    CHECK(tfm_po_strings(po, true, &lines, &n, NULL) == TFM_OK && n == 7);
    tfm_buf_free(&lines);
    tfm_po_free(po);

    failures f;
    tfm_status st;
    char *out = merge(catalog, "Ouvrir %s\nFichier\nDeux\nlignes\n%d fichier\n%d fichiers\n",
                      false, true, &f, &st);
    CHECK(st == TFM_OK && f.n == 0);
    static const char want[] =
        HEADER
        "\n"
        "# translator\n"
        "#. extracted\n"
        "#: src/a.c:12\n"
        "#, fuzzy, c-format\n"
        "msgid \"Open %s\"\n"
        "msgstr \"Ouvrir %s\"\n"
        "\n"
        "#, fuzzy\n"
        "#| msgid \"Old\"\n"
        "msgctxt \"menu\"\n"
        "msgid \"File\"\n"
        "msgstr \"Fichier\"\n"
        "\n"
        "#, fuzzy\n"
        "#| msgid \"Older\"\n"
        "msgid \"\"\n"
        "\"Two\\n\"\n"
        "\"  lines\\n\"\n"
        "msgstr \"\"\n"
        "\"Deux\\n\"\n"
        "\"  lignes\\n\"\n"
        "\n"
        "#, fuzzy\n"
        "msgid \"%d file\"\n"
        "msgid_plural \"%d files\"\n"
        "msgstr[0] \"%d fichier\"\n"
        "msgstr[1] \"%d fichiers\"\n"
        "\n"
        "msgid \"Done\"\n"
        "msgstr \"Fait\"\n"
        "\n"
        "#~ msgid \"Gone\"\n"
        "#~ msgstr \"Parti\"\n";
    CHECK_MSG(out && strcmp(out, want) == 0, "got\n%s", out ? out : "(null)");
    free(out);

    /* nothing translated: the same bytes; failures named by their msgid line */
    out = merge(catalog, "", false, true, &f, &st);
    CHECK(st == TFM_OK && out && strcmp(out, catalog) == 0);
    CHECK(f.n == 4 && f.lines[0] == 10 && f.lines[1] == 16 && f.lines[2] == 20 && f.lines[3] == 25);
    CHECK(strstr(f.last, "the translations end at line 0") != NULL);
    free(out);

    /* an empty line, a lost placeholder (c-format), --no-fuzzy, --all */
    out = merge(catalog, "Ouvrir\nFichier\n\nlignes\n%d fichier\n%d fichiers\nFINI\n", true,
                false, &f, &st);
    CHECK(st == TFM_OK && f.n == 2 && f.lines[0] == 10 && f.lines[1] == 20);
    CHECK(strstr(f.last, "line 3 of the translations is empty") != NULL);
    CHECK(out && strstr(out, "msgstr \"FINI\"") && !strstr(out, "fuzzy, c-format"));
    CHECK(out && strstr(out, "msgstr[1] \"%d fichiers\"") && !strstr(out, "Ouvrir"));
    free(out);

    /* a control character the msgid has not: a model's stray byte */
    out = merge(catalog, "Ouvrir %s\nFic\ahier\nDeux\nlignes\n%d fichier\n%d fichiers\n", false,
                true, &f, &st);
    CHECK(st == TFM_OK && f.n == 1 && f.lines[0] == 16 && strstr(f.last, "control character (U+0007)"));
    free(out);

    /* too many lines: an error, nothing written */
    out = merge(catalog, "1\n2\n3\n4\n5\n6\n7\n", false, true, &f, &st);
    CHECK(st == TFM_ERR_RANGE);
    free(out);
}

static void test_plurals(void)
{
    static const char three[] =
        "msgid \"\"\nmsgstr \"\"\n\"Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 ? 1 : 2);\\n\"\n"
        "\nmsgid \"a file\"\nmsgid_plural \"files\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n";
    failures f;
    tfm_status st;
    char *out = merge(three, "plik\npliki\n", false, false, &f, &st);
    CHECK(st == TFM_OK && out &&
          strstr(out, "msgstr[0] \"plik\"\nmsgstr[1] \"pliki\"\nmsgstr[2] \"pliki\"\n") != NULL);
    free(out);
    static const char one[] =
        "msgid \"\"\nmsgstr \"\"\n\"Plural-Forms: nplurals=1; plural=0;\\n\"\n"
        "\nmsgid \"a file\"\nmsgid_plural \"files\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n";
    out = merge(one, "ファイル1\nファイル\n", false, false, &f, &st);
    CHECK(st == TFM_OK && out && strstr(out, "msgstr[0] \"ファイル\"\n\n") == NULL &&
          strstr(out, "msgstr[0] \"ファイル\"\n") != NULL && strstr(out, "msgstr[1]") == NULL);
    free(out);
    /* a template's Plural-Forms, or none: refused with the line */
    tfm_error err;
    const char *bad[] = {
        "msgid \"\"\nmsgstr \"\"\n\"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n\"\n"
        "\nmsgid \"a\"\nmsgid_plural \"b\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n",
        "msgid \"a\"\nmsgid_plural \"b\"\nmsgstr[0] \"\"\nmsgstr[1] \"\"\n"};
    const char *want[] = {"line 3: the header's Plural-Forms is broken", "line 1: a plural entry"};
    for (int k = 0; k < 2; k++) {
        tfm_po *po = parse(bad[k]);
        if (!po) continue;
        tfm_buf b;
        tfm_buf_init(&b);
        size_t n_failed;
        tfm_po_merge_params p = tfm_po_merge_default_params();
        CHECK(tfm_po_merge(po, &p, "x\ny\n", 4, &b, &n_failed, &err) == TFM_ERR_FORMAT);
        CHECK_MSG(strncmp(err.msg, want[k], strlen(want[k])) == 0, "%s", err.msg);
        tfm_buf_free(&b);
        tfm_po_free(po);
    }
}

static void test_crlf(void)
{
    static const char crlf[] = "msgid \"\"\r\nmsgstr \"\"\r\n\"Content-Type: text/plain; "
                               "charset=UTF-8\\n\"\r\n\r\n#, c-format\r\nmsgid \"Hi %s\"\r\n"
                               "msgstr \"\"\r\n\r\nmsgid \"A\\n\"\r\n\"B\"\r\nmsgstr \"\"\r\n";
    failures f;
    tfm_status st;
    char *out = merge(crlf, "Salut %s\nA2\nB2\n", false, true, &f, &st);
    static const char want[] = "msgid \"\"\r\nmsgstr \"\"\r\n\"Content-Type: text/plain; "
                               "charset=UTF-8\\n\"\r\n\r\n#, fuzzy, c-format\r\nmsgid \"Hi %s\"\r\n"
                               "msgstr \"Salut %s\"\r\n\r\n#, fuzzy\r\nmsgid \"A\\n\"\r\n\"B\"\r\n"
                               "msgstr \"\"\r\n\"A2\\n\"\r\n\"B2\"\r\n";
    CHECK_MSG(st == TFM_OK && out && strcmp(out, want) == 0, "got\n%s", out ? out : "(null)");
    free(out);
}

static void test_flags_after_blanks(void)
{
    failures f;
    tfm_status st;
    char *out = merge("  #, c-format\nmsgid \"%s a\"\nmsgstr \"\"\n", "%s b\n", false, true, &f, &st);
    CHECK(st == TFM_OK && out && strncmp(out, "  #, fuzzy, c-format\n", 21) == 0);
    free(out);
}

static void test_hostile(void)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {HEADER "\nmsgid \"abc\nmsgstr \"\"\n", "line 6: the string has no closing quote"},
        {HEADER "\nmsgid \"abc\"\n", "line 6: the file ends inside the entry of line 6"},
        {HEADER "\nmsgctxt \"c\"\n", "line 6: the file ends inside the entry of line 6"},
        {HEADER "\nmsgid \"a\xff\"\nmsgstr \"\"\n", "line 6: invalid UTF-8"},
        {HEADER "\nmsgid \"a\\xff\"\nmsgstr \"\"\n", "line 6: invalid UTF-8 in the string"},
        {HEADER "\nmsgid \"a\\qb\"\nmsgstr \"\"\n", "line 6: unknown escape"},
        {HEADER "\nmsgid \"a\\0\"\nmsgstr \"\"\n", "line 6: a NUL character"},
        {HEADER "\nhello\n", "line 6: neither a keyword"},
        {HEADER "\nmsgid \"a\" b\nmsgstr \"\"\n", "line 6: text after the closing quote"},
        {"\n\"a\"\n", "line 2: a string continues"},
        {HEADER "\nmsgstr \"a\"\n", "line 6: msgstr out of place"},
        {HEADER "\nmsgid \"a\"\nmsgid \"b\"\n", "line 7: msgid out of place"},
        {HEADER "\nmsgid \"a\"\n# c\nmsgstr \"\"\n", "line 7: a comment inside the entry"},
        {HEADER "\nmsgid \"a\"\nmsgid_plural \"b\"\nmsgstr \"\"\n", "line 8: msgstr in a plural"},
        {HEADER "\nmsgid \"a\"\nmsgid_plural \"b\"\nmsgstr[1] \"\"\n", "line 8: msgstr[N] out"},
        {"msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=ISO-8859-1\\n\"\n",
         "line 2: the header's charset is ISO-8859-1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tfm_po *po = NULL;
        tfm_error err;
        tfm_status s = tfm_po_parse(cases[i].text, strlen(cases[i].text), &po, &err);
        CHECK_MSG(s != TFM_OK && po == NULL && strncmp(err.msg, cases[i].want, strlen(cases[i].want)) == 0,
                  "case %zu: %s", i, s == TFM_OK ? "accepted" : err.msg);
        tfm_po_free(po);
    }
    /* handled: an empty msgid outside the header (skipped), placeholders
     * only, whitespace only (copied), a duplicate, a template's charset */
    static const char odd[] =
        "msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=CHARSET\\n\"\n\n"
        "msgctxt \"x\"\nmsgid \"\"\nmsgstr \"\"\n\nmsgid \"\"\nmsgstr \"\"\n\n"
        "#, c-format\nmsgid \"%s\"\nmsgstr \"\"\n\nmsgid \"  \\n\"\nmsgstr \"\"\n\n"
        "msgid \"%s\"\nmsgstr \"\"\n";
    tfm_po *po = parse(odd);
    if (!po) return;
    CHECK(po->charset_template && po->header == 0 && po->nplurals == 0);
    tfm_buf b;
    tfm_buf_init(&b);
    size_t n;
    CHECK(tfm_po_strings(po, false, &b, &n, NULL) == TFM_OK && n == 2 && strcmp(b.data, "%s\n%s\n") == 0);
    tfm_buf_free(&b);
    tfm_po_free(po);
    failures f;
    tfm_status st;
    char *out = merge(odd, "%s\n%s\n", false, false, &f, &st);
    CHECK(st == TFM_OK && f.n == 0 && out && strstr(out, "msgid \"  \\n\"\nmsgstr \"  \\n\"\n"));
    free(out);
    /* a 100 KB entry */
    size_t big = 100000;
    char *text = malloc(big + 200);
    strcpy(text, "msgid \"");
    size_t len = strlen(text);
    for (size_t i = 0; i < big; i++) text[len++] = i % 7 == 6 ? ' ' : 'a';
    strcpy(text + len, "\"\nmsgstr \"\"\n");
    char *lines = malloc(big + 2);
    memcpy(lines, text + 7, big);
    lines[big] = '\n';
    lines[big + 1] = 0;
    out = merge(text, lines, false, false, &f, &st);
    po = out ? parse(out) : NULL;
    CHECK(st == TFM_OK && po && po->entries[0].msgstr[0].len == big);
    tfm_po_free(po);
    free(out);
    free(lines);
    free(text);
}

int main(void)
{
    RUN(test_escapes);
    RUN(test_wrap_as_msgcat);
    RUN(test_segments);
    RUN(test_merge);
    RUN(test_plurals);
    RUN(test_crlf);
    RUN(test_flags_after_blanks);
    RUN(test_hostile);
    CHECK_DONE();
}
