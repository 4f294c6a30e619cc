/* test_glossary.c - a glossary's terms found in encoded lines and turned into
 * constraints lines (lib/text/glossary.c, and its use in text_filter.c):
 * whole words only (at the start, middle and end of a line, before
 * punctuation, never inside a longer word), case-sensitive; several targets
 * as alternatives, each as a word of its own;
 * longer terms first and overlapping matches skipped; a term found twice
 * gives one constraint; at most TFM_GLOSSARY_MAX_CONSTRAINTS a line; terms
 * with placeholders; malformed files naming their line; and a filter that
 * hands each line's constraints over in order, the same for any thread
 * count. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tfm/search.h"
#include "tfm/text.h"

_Static_assert((int)TFM_GLOSSARY_MAX_CONSTRAINTS == (int)TFM_MAX_CONSTRAINTS,
               "a glossary gives at most as many constraints as decode takes");

/* Words repeated often enough that each is learnt whole. */
static const char *const corpus_words[] = {
    "the", "file", "files", "profile", "user", "interface", "graphical", "design", "open",
    "and", "a", "at", "end", "fichier", "dossier", "utilisateur", "le", "la", "of", "data",
};
enum { N_CORPUS_WORDS = sizeof corpus_words / sizeof corpus_words[0] };

static tfm_vocab *learn_vocab(bool placeholders)
{
    tfm_bpe_learn_params p = tfm_bpe_learn_default_params();
    p.vocab_size = 700;
    p.n_threads = 1;
    p.soft_vocab_limit = true;
    p.placeholders = placeholders;
    tfm_bpe_learner *l;
    tfm_error err;
    CHECK(tfm_bpe_learner_create(&p, &l, &err) == TFM_OK);
    tfm_buf line;
    tfm_buf_init(&line);
    for (int rep = 0; rep < 50; rep++) {
        for (int i = 0; i < N_CORPUS_WORDS; i++) {
            tfm_buf_clear(&line);
            tfm_buf_printf(&line, "%s %s, l'%s (%s) %s.", corpus_words[i],
                           corpus_words[(i + rep) % N_CORPUS_WORDS], corpus_words[i],
                           corpus_words[(i * 7 + rep) % N_CORPUS_WORDS], corpus_words[i]);
            CHECK(tfm_bpe_learner_add(l, line.data, line.len, NULL, &err) == TFM_OK);
        }
    }
    tfm_buf_free(&line);
    tfm_vocab *v = NULL;
    CHECK_MSG(tfm_bpe_learner_finish(l, &v, &err) == TFM_OK, "%s", err.msg);
    tfm_bpe_learner_free(l);
    return v;
}

static tfm_vocab *vocab, *ph_vocab;
static tfm_bpe *bpe, *ph_bpe;

static tfm_glossary *glossary(const char *text)
{
    tfm_glossary *g = NULL;
    tfm_error err;
    CHECK_MSG(tfm_glossary_parse(text, strlen(text), vocab, NULL, &g, &err) == TFM_OK, "%s", err.msg);
    return g;
}

/* The source terms found in line, in order, joined by ',' (a static buffer). */
static const char *found_in(const tfm_glossary *g, tfm_bpe *b, const char *line,
                            bool placeholders)
{
    static char out[4096];
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    if (placeholders) {
        tfm_placeholders ph;
        tfm_placeholders_init(&ph);
        CHECK(tfm_placeholders_scan(line, strlen(line), TFM_PH_ALL, &ph, &err) == TFM_OK);
        CHECK(tfm_bpe_encode_placeholders(b, NULL, line, strlen(line), &ph, &ids, NULL, &err) ==
              TFM_OK);
        tfm_placeholders_free(&ph);
    } else {
        CHECK(tfm_bpe_encode(b, NULL, line, strlen(line), &ids, NULL, &err) == TFM_OK);
    }
    tfm_term_matches m;
    tfm_term_matches_init(&m);
    CHECK_MSG(tfm_glossary_match(g, ids.data, ids.len, &m, &err) == TFM_OK, "%s", err.msg);
    out[0] = 0;
    for (size_t k = 0; k < m.n_found; k++) {
        size_t len;
        const char *t = tfm_glossary_term(g, m.found[k].term, &len);
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%.*s", k ? "," : "", (int)len, t);
        CHECK(m.found[k].start + m.found[k].len <= ids.len);
    }
    tfm_term_matches_free(&m);
    tfm_ids_free(&ids);
    return out;
}

#define CHECK_FOUND(g, line, want)                                                       \
    do {                                                                                 \
        const char *got_ = found_in(g, bpe, line, false);                                \
        CHECK_MSG(strcmp(got_, want) == 0, "'%s': found '%s', want '%s'", line, got_, want); \
    } while (0)

/* The constraints line of line, into out. */
static void constraints_of(const tfm_glossary *g, const char *line, tfm_buf *out)
{
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    CHECK(tfm_bpe_encode(bpe, NULL, line, strlen(line), &ids, NULL, &err) == TFM_OK);
    tfm_term_matches m;
    tfm_term_matches_init(&m);
    CHECK(tfm_glossary_match(g, ids.data, ids.len, &m, &err) == TFM_OK);
    CHECK(tfm_glossary_constraints(g, &m, out, &err) == TFM_OK);
    tfm_term_matches_free(&m);
    tfm_ids_free(&ids);
}

/* The ids of text as an id line. */
static void id_line(const char *text, tfm_buf *out)
{
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    CHECK(tfm_bpe_encode(bpe, NULL, text, strlen(text), &ids, NULL, &err) == TFM_OK);
    tfm_buf_clear(out);
    tfm_ids_format(ids.data, ids.len, out);
    tfm_ids_free(&ids);
}

static void test_vocabulary(void)
{
    /* The tests below rely on whole-word pieces for these. */
    static const char *const words[] = {"file", "interface", "user", "graphical", "design"};
    for (int i = 0; i < 5; i++) {
        tfm_ids ids;
        tfm_ids_init(&ids);
        tfm_error err;
        CHECK(tfm_bpe_encode(bpe, NULL, words[i], strlen(words[i]), &ids, NULL, &err) == TFM_OK);
        CHECK_MSG(ids.len == 1, "'%s' is %zu pieces", words[i], ids.len);
        tfm_ids_free(&ids);
    }
}

static void test_whole_words(void)
{
    tfm_glossary *g = glossary("file\tfichier\n");
    CHECK(tfm_glossary_size(g) == 1);
    CHECK_FOUND(g, "file", "file");
    CHECK_FOUND(g, "file at the end", "file");
    CHECK_FOUND(g, "open a file and", "file");
    CHECK_FOUND(g, "at the end file", "file");
    CHECK_FOUND(g, "the file, and", "file");
    CHECK_FOUND(g, "the file.", "file");
    CHECK_FOUND(g, "(file)", "file");
    CHECK_FOUND(g, "l'file", "file");
    CHECK_FOUND(g, "a  file  here", "file");
    CHECK_FOUND(g, "\"file\"", "file");
    CHECK_FOUND(g, "files", "");
    CHECK_FOUND(g, "the files, and", "");
    CHECK_FOUND(g, "profile", "");
    CHECK_FOUND(g, "file2", "");
    CHECK_FOUND(g, "fileé", "");
    CHECK_FOUND(g, "file\xe4\xb8\xad", "");     /* a letter the vocabulary spells in bytes */
    CHECK_FOUND(g, "file\xc2\xa9", "file");     /* a symbol spelled in bytes */
    CHECK_FOUND(g, "\xc2\xa9" "file", "file");
    CHECK_FOUND(g, "\xe4\xb8\xad" "file", "");
    CHECK_FOUND(g, "File", "");                 /* case-sensitive */
    CHECK_FOUND(g, "FILE", "");
    CHECK_FOUND(g, "", "");
    /* Normalisation applies to the terms too: a fullwidth term (NFKC). */
    tfm_glossary_free(g);
    g = glossary("\xef\xbd\x86ile\tfichier\n");
    CHECK_FOUND(g, "the file", "\xef\xbd\x86ile");
    CHECK_FOUND(g, "the \xef\xbd\x86ile", "\xef\xbd\x86ile");
    tfm_glossary_free(g);
}

/* Splits a constraints line's first constraint into its alternatives. */
static int alternatives(const char *line, char alts[][256], int max)
{
    int n = 0;
    const char *end = strchr(line, '\t');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    for (size_t at = 0; at < len && n < max;) {
        const char *bar = strstr(line + at, " | ");
        size_t stop = bar && (size_t)(bar - line) < len ? (size_t)(bar - line) : len;
        snprintf(alts[n++], 256, "%.*s", (int)(stop - at), line + at);
        at = stop + 3;
    }
    return n;
}

static void decode_id_line(const char *line, tfm_buf *out)
{
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    CHECK(tfm_ids_parse(line, strlen(line), tfm_vocab_size(vocab), &ids, &err) == TFM_OK);
    CHECK(tfm_bpe_decode(vocab, ids.data, ids.len, out, &err) == TFM_OK);
    tfm_ids_free(&ids);
}

static void test_alternatives(void)
{
    tfm_glossary *g = glossary("file\tfichier\nfile\tdossier\nfile\tfichier\n");
    CHECK(tfm_glossary_size(g) == 1);
    tfm_buf line, text, want;
    tfm_buf_init(&line);
    tfm_buf_init(&text);
    tfm_buf_init(&want);
    constraints_of(g, "open the file", &line);
    CHECK_MSG(strchr(line.data, '\t') == NULL, "one constraint: '%s'", line.data);
    char alts[8][256];
    int n = alternatives(line.data, alts, 8);
    CHECK_MSG(n == 2, "'%s': %d alternatives", line.data, n); /* each target once */
    id_line("fichier", &want);
    CHECK(n > 0 && strcmp(alts[0], want.data) == 0);
    id_line("dossier", &want);
    bool has_dossier = false;
    for (int a = 0; a < n; a++) {
        has_dossier |= strcmp(alts[a], want.data) == 0;
        decode_id_line(alts[a], &text);
        CHECK_MSG(strcmp(text.data, "fichier") == 0 || strcmp(text.data, "dossier") == 0,
                  "alternative '%s' is '%s'", alts[a], text.data);
        for (int b = 0; b < a; b++) CHECK(strcmp(alts[a], alts[b]) != 0); /* no duplicates */
    }
    CHECK(has_dossier);
    /* No term: an empty line. */
    constraints_of(g, "open the files", &line);
    CHECK(line.len == 0 && line.data && line.data[0] == 0);
    tfm_buf_free(&line);
    tfm_buf_free(&text);
    tfm_buf_free(&want);
    tfm_glossary_free(g);
}

/* After an apostrophe the source term is found glued; the target is asked
 * for as a word of its own only. */
static void test_apostrophe(void)
{
    tfm_glossary *g = glossary("interface\tinterface\n");
    CHECK_FOUND(g, "l'interface", "interface");
    CHECK_FOUND(g, "l\xe2\x80\x99interface", "interface"); /* a typographic apostrophe */
    CHECK_FOUND(g, "d'interfaces", "");
    tfm_buf line, want;
    tfm_buf_init(&line);
    tfm_buf_init(&want);
    constraints_of(g, "the interface", &line);
    char alts[4][256];
    int n = alternatives(line.data, alts, 4);
    id_line("interface", &want);
    CHECK_MSG(n == 1 && strcmp(alts[0], want.data) == 0, "'%s'", line.data);
    tfm_ids ids;
    tfm_ids_init(&ids);
    tfm_error err;
    CHECK(tfm_ids_parse(alts[0], strlen(alts[0]), tfm_vocab_size(vocab), &ids, &err) == TFM_OK);
    const char *first = ids.len ? tfm_vocab_piece(vocab, ids.data[0], NULL) : "";
    CHECK(strncmp(first, "\xe2\x96\x81", 3) == 0);
    tfm_ids_free(&ids);
    tfm_buf_free(&line);
    tfm_buf_free(&want);
    tfm_glossary_free(g);
}

static void test_longest_first(void)
{
    tfm_glossary *g = glossary("interface\tinterface\n"
                               "user interface\tinterface utilisateur\n"
                               "user\tutilisateur\n"
                               "graphical user interface\tinterface graphique\n"
                               "interface design\tconception d'interface\n");
    CHECK(tfm_glossary_size(g) == 5);
    CHECK_FOUND(g, "the user interface", "user interface");
    CHECK_FOUND(g, "the user interface and the interface", "user interface,interface");
    CHECK_FOUND(g, "the interface and the user interface", "interface,user interface");
    CHECK_FOUND(g, "a graphical user interface", "graphical user interface");
    CHECK_FOUND(g, "the user and the interface", "user,interface");
    /* Overlapping: the longer wins, the other is skipped. */
    CHECK_FOUND(g, "graphical user interface design", "graphical user interface");
    CHECK_FOUND(g, "user interface design", "user,interface design"); /* equal ids: longer text */
    CHECK_FOUND(g, "the interface design", "interface design");
    CHECK_FOUND(g, "user interfaces", "user");
    tfm_glossary_free(g);
}

static void test_twice(void)
{
    tfm_glossary *g = glossary("file\tfichier\nuser\tutilisateur\n");
    CHECK_FOUND(g, "the file and the file, file", "file");
    CHECK_FOUND(g, "user file user file", "user,file");
    tfm_buf line, once;
    tfm_buf_init(&line);
    tfm_buf_init(&once);
    constraints_of(g, "the file and the file", &line);
    constraints_of(g, "the file", &once);
    CHECK(strcmp(line.data, once.data) == 0);
    tfm_buf_free(&line);
    tfm_buf_free(&once);
    tfm_glossary_free(g);
}

static void test_limit(void)
{
    /* 70 distinct terms in one line: 64 constraints, 6 dropped. */
    tfm_buf gl, line, out;
    tfm_buf_init(&gl);
    tfm_buf_init(&line);
    tfm_buf_init(&out);
    for (int i = 1; i <= 70; i++) {
        tfm_buf_printf(&gl, "w%d\tv%d\n", i, i);
        tfm_buf_printf(&line, "%sw%d", i > 1 ? " " : "", i);
    }
    tfm_glossary *g = NULL;
    tfm_error err;
    CHECK(tfm_glossary_parse(gl.data, gl.len, vocab, NULL, &g, &err) == TFM_OK);
    CHECK(tfm_glossary_size(g) == 70);
    tfm_ids ids;
    tfm_ids_init(&ids);
    CHECK(tfm_bpe_encode(bpe, NULL, line.data, line.len, &ids, NULL, &err) == TFM_OK);
    tfm_term_matches m;
    tfm_term_matches_init(&m);
    CHECK(tfm_glossary_match(g, ids.data, ids.len, &m, &err) == TFM_OK);
    CHECK_MSG(m.n_found == 64 && m.n_dropped == 6, "%zu found, %zu dropped", m.n_found,
              m.n_dropped);
    for (size_t k = 1; k < m.n_found; k++) CHECK(m.found[k - 1].start < m.found[k].start);
    CHECK(tfm_glossary_constraints(g, &m, &out, &err) == TFM_OK);
    size_t tabs = 0;
    for (size_t i = 0; i < out.len; i++) tabs += out.data[i] == '\t';
    CHECK(tabs == 63);
    /* "w1" is not found inside "w10". */
    CHECK_FOUND(g, "w10", "w10");
    tfm_term_matches_free(&m);
    tfm_ids_free(&ids);
    tfm_glossary_free(g);
    tfm_buf_free(&gl);
    tfm_buf_free(&line);
    tfm_buf_free(&out);
}

static void test_placeholders(void)
{
    tfm_glossary *g = NULL;
    tfm_error err;
    const char *text = "file\tfichier\nopen %s\touvrir %s\n";
    CHECK(tfm_glossary_parse(text, strlen(text), ph_vocab, NULL, &g, &err) == TFM_OK);
    const char *got = found_in(g, ph_bpe, "<b>file</b> and %s file", true);
    CHECK_MSG(strcmp(got, "file") == 0, "got '%s'", got);
    got = found_in(g, ph_bpe, "%sfile", true);
    CHECK_MSG(strcmp(got, "file") == 0, "got '%s'", got);
    got = found_in(g, ph_bpe, "{0}files", true);
    CHECK_MSG(strcmp(got, "") == 0, "got '%s'", got);
    /* A term never matches across a placeholder token... */
    got = found_in(g, ph_bpe, "open %s", true);
    CHECK_MSG(strcmp(got, "") == 0, "got '%s'", got);
    /* ...but it is text without placeholders. */
    got = found_in(g, ph_bpe, "open %s", false);
    CHECK_MSG(strcmp(got, "open %s") == 0, "got '%s'", got);
    tfm_glossary_free(g);
}

#define CHECK_BAD(text, want)                                                            \
    do {                                                                                 \
        tfm_glossary *g_ = NULL;                                                         \
        tfm_error e_;                                                                    \
        tfm_status s_ = tfm_glossary_parse(text, sizeof(text) - 1, vocab, NULL, &g_, &e_);     \
        CHECK_MSG(s_ == TFM_ERR_FORMAT && g_ == NULL && strstr(e_.msg, want) != NULL,    \
                  "'%s': status %d, '%s'", #text, (int)s_, s_ == TFM_OK ? "" : e_.msg);  \
        tfm_glossary_free(g_);                                                           \
    } while (0)

static void test_malformed(void)
{
    CHECK_BAD("file\n", "line 1: no TAB");
    CHECK_BAD("# terms\n\nfile\tfichier\nuser utilisateur\n", "line 4: no TAB");
    CHECK_BAD("file\tfichier\n\tfichier\n", "line 2: empty source term");
    CHECK_BAD("file\t  \n", "line 1: empty target term");
    CHECK_BAD("  \tfichier\n", "line 1: empty source term");
    CHECK_BAD("file\tfichier\tnote\n", "line 1: more than one TAB");
    CHECK_BAD("fi\xffle\tfichier\n", "line 1: source term: ");
    CHECK_BAD("file\tfich\xc3(ier\n", "line 1: target term: ");
    /* Comments, blank lines, CRLF and spaces around the sides are fine. */
    const char ok[] = "# a comment\r\n\r\n  \n file \t fichier \r\n#\tnot a term\nuser\tutilisateur";
    tfm_glossary *g = NULL;
    tfm_error err;
    CHECK_MSG(tfm_glossary_parse(ok, sizeof ok - 1, vocab, NULL, &g, &err) == TFM_OK, "%s", err.msg);
    CHECK(g && tfm_glossary_size(g) == 2);
    size_t len = 0;
    const char *t = g ? tfm_glossary_term(g, 0, &len) : NULL;
    CHECK(t && len == 4 && memcmp(t, "file", 4) == 0);
    CHECK(g && tfm_glossary_term(g, 2, &len) == NULL && len == 0);
    if (g) CHECK_FOUND(g, "the user file", "user,file");
    tfm_glossary_free(g);
    /* An empty glossary finds nothing. */
    CHECK(tfm_glossary_parse("", 0, vocab, NULL, &g, &err) == TFM_OK);
    CHECK(g && tfm_glossary_size(g) == 0);
    if (g) CHECK_FOUND(g, "the file", "");
    tfm_glossary_free(g);
    /* A file that is not there. */
    CHECK(tfm_glossary_load("/nonexistent/terms.tsv", vocab, NULL, &g, &err) == TFM_ERR_IO);
    CHECK(g == NULL && strstr(err.msg, "/nonexistent/terms.tsv") != NULL);
    tfm_glossary_free(NULL);
}

/* ---- the filter ----------------------------------------------------------------------- */

typedef struct collected {
    tfm_buf ids, cons;
    size_t lines, order_errors, dropped;
} collected;

static tfm_status on_constraints(void *ctx, size_t line, const char *text, size_t len,
                                 size_t n_dropped, tfm_error *err)
{
    collected *c = ctx;
    if (line != c->lines + 1) c->order_errors++; /* before its own line, after the one before */
    tfm_buf_append(&c->cons, text, len);
    tfm_buf_putc(&c->cons, '\n');
    c->dropped += n_dropped;
    return TFM_OK;
}

static tfm_status on_line(void *ctx, size_t line, const char *text, size_t len, size_t repaired,
                          tfm_error *err)
{
    collected *c = ctx;
    if (line != ++c->lines) c->order_errors++;
    tfm_buf_append(&c->ids, text, len);
    tfm_buf_putc(&c->ids, '\n');
    return TFM_OK;
}

static void run_filter(const tfm_glossary *g, int threads, const char *path, collected *c)
{
    tfm_filter_params p = tfm_filter_default_params();
    p.threads = threads;
    p.glossary = g;
    p.constraints = on_constraints;
    tfm_text_filter *f = NULL;
    tfm_error err;
    CHECK_MSG(tfm_text_filter_create(vocab, &p, &f, &err) == TFM_OK, "%s", err.msg);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    tfm_line_reader *r = fp ? tfm_lines_create(fileno(fp)) : NULL;
    memset(c, 0, sizeof *c);
    tfm_buf_init(&c->ids);
    tfm_buf_init(&c->cons);
    tfm_batch_failure fail;
    if (f && r) CHECK(tfm_text_filter_run(f, r, on_line, NULL, c, &fail) == TFM_OK);
    tfm_lines_free(r);
    if (fp) fclose(fp);
    tfm_text_filter_free(f);
}

static void test_filter(void)
{
    tfm_glossary *g = glossary("file\tfichier\nuser interface\tinterface utilisateur\n"
                               "interface\tinterface\n");
    /* Enough lines for several threads and batches. */
    char path[] = "/tmp/tfm-test-glossary-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    for (int i = 0; i < 3000; i++) {
        switch (i % 5) {
        case 0: fprintf(fp, "the file %d\n", i); break;
        case 1: fprintf(fp, "\n"); break;
        case 2: fprintf(fp, "a user interface, l'interface and files\n"); break;
        case 3: fprintf(fp, "nothing here %d\n", i); break;
        default: fprintf(fp, "interface file\n");
        }
    }
    fclose(fp);
    collected one, two;
    run_filter(g, 1, path, &one);
    run_filter(g, 3, path, &two);
    CHECK(one.lines == 3000 && two.lines == 3000);
    CHECK(one.order_errors == 0 && two.order_errors == 0);
    CHECK(one.ids.len == two.ids.len && memcmp(one.ids.data, two.ids.data, one.ids.len) == 0);
    CHECK(one.cons.len == two.cons.len && memcmp(one.cons.data, two.cons.data, one.cons.len) == 0);
    /* Line by line: what the glossary gives for each line. */
    tfm_buf want;
    tfm_buf_init(&want);
    const char *lines[] = {"the file 0", "", "a user interface, l'interface and files",
                           "nothing here 3", "interface file"};
    const char *at = one.cons.data;
    for (int k = 0; k < 5 && at; k++) {
        constraints_of(g, lines[k], &want);
        const char *nl = strchr(at, '\n');
        CHECK(nl && (size_t)(nl - at) == want.len && memcmp(at, want.data, want.len) == 0);
        CHECK((want.len == 0) == (k == 1 || k == 3));
        at = nl ? nl + 1 : NULL;
    }
    /* The one-line call keeps the constraints of its worker. */
    tfm_filter_params p = tfm_filter_default_params();
    p.threads = 1;
    p.glossary = g;
    tfm_text_filter *f = NULL;
    tfm_error err;
    CHECK(tfm_text_filter_create(vocab, &p, &f, &err) == TFM_OK);
    tfm_buf out;
    tfm_buf_init(&out);
    CHECK(f && tfm_text_filter_line(f, 0, 0, "the file", 8, &out, NULL, &err) == TFM_OK);
    size_t len, dropped = 9;
    const char *c = f ? tfm_text_filter_constraints(f, 0, &len, &dropped) : NULL;
    constraints_of(g, "the file", &want);
    CHECK(c && len == want.len && strcmp(c, want.data) == 0 && dropped == 0);
    tfm_text_filter_free(f);
    /* A glossary is for encoding, of the filter's vocabulary, without dropout. */
    p.op = TFM_FILTER_DECODE;
    CHECK(tfm_text_filter_create(vocab, &p, &f, &err) == TFM_ERR_ARG);
    p.op = TFM_FILTER_ENCODE;
    CHECK(tfm_text_filter_create(ph_vocab, &p, &f, &err) == TFM_ERR_ARG);
    p.dropout = 0.1f;
    CHECK(tfm_text_filter_create(vocab, &p, &f, &err) == TFM_ERR_ARG);
    tfm_buf_free(&out);
    tfm_buf_free(&want);
    tfm_buf_free(&one.ids);
    tfm_buf_free(&one.cons);
    tfm_buf_free(&two.ids);
    tfm_buf_free(&two.cons);
    unlink(path);
    tfm_glossary_free(g);
}

int main(void)
{
    tfm_error err;
    vocab = learn_vocab(false);
    ph_vocab = learn_vocab(true);
    if (!vocab || !ph_vocab || tfm_bpe_create(vocab, &bpe, &err) != TFM_OK ||
        tfm_bpe_create(ph_vocab, &ph_bpe, &err) != TFM_OK) {
        printf("FAIL: main: no vocabulary\n");
        return 1;
    }
    RUN(test_vocabulary);
    RUN(test_whole_words);
    RUN(test_alternatives);
    RUN(test_apostrophe);
    RUN(test_longest_first);
    RUN(test_twice);
    RUN(test_limit);
    RUN(test_placeholders);
    RUN(test_malformed);
    RUN(test_filter);
    tfm_bpe_free(bpe);
    tfm_bpe_free(ph_bpe);
    tfm_vocab_free(vocab);
    tfm_vocab_free(ph_vocab);
    CHECK_DONE();
}
