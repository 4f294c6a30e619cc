/* glossary.c - a glossary's source terms found in encoded lines, and the
 * constraints that ask a translation to use their target terms, in the
 * format of decode --constraints (tfm/text.h, "glossaries"; tokenize(1),
 * GLOSSARIES).
 *
 * A term is found in the ids of a line, not in its text, so that it is
 * found exactly where the encoder sees a whole word: the source term is
 * encoded on its own, as a line, and its ids must stand in the line's ids
 *   - starting at a piece that begins with the word marker '▁' ("plain"
 *     form), or right after a piece that ends in punctuation, a symbol or a
 *     placeholder token ("glued" form: the term's pieces without the marker,
 *     as in "(file" or "l'interface");
 *   - ending at the end of the line, or before a piece that begins with '▁'
 *     or with a character that is not a letter, digit or mark: "file," and
 *     "file." hold "file", "files" and "file2" do not.
 * This is sound because a piece never joins a letter to punctuation
 * (charclass.c): the pieces of a word next to a punctuation mark are those
 * of the word alone.
 *
 * The glued form of a source term is found by encoding "'" + term and
 * dropping the leading pieces that hold "▁'"; a term that does not start
 * with a letter, digit or mark has none.  Target terms are asked for in
 * their plain form alone: a glued form, free to follow any piece, let a
 * search glue the term to the word before it ("laeffet" for "la" + "effet"):
 * on the enfr test (a 583-update model, each line's annotated terms), the
 * term use rate was 93.2% with glued alternatives and 99.0% without, chrF
 * 27.1 and 27.3.  After an elision the plain form reads "l' interface".
 *
 * Matching a line: every occurrence of every form is listed, then taken in
 * the order of their terms' priority (more ids first, then longer text, then
 * the earlier line of the file) and from left to right; an occurrence that
 * overlaps one taken already is skipped.  Each term taken gives one
 * constraint, whatever the number of its occurrences. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/encode_internal.h"
#include "tfm/text.h"

/* A glossary file larger than this is not a glossary (/dev/zero, a wrong file). */
#define GLOSSARY_MAX_BYTES (1ull << 30)

/* What matching needs to know of each piece, computed once. */
enum {
    PIECE_MARKER = 1,     /* its text begins with '▁' */
    PIECE_WORD_FIRST = 2, /* its first character is a letter, digit or mark */
    PIECE_WORD_LAST = 4,  /* its last character is a letter, digit, mark or '▁' */
    PIECE_BYTE = 8,       /* a byte piece: the character is found from its neighbours */
};

typedef struct span {
    size_t off, n; /* ids pool[off .. off + n) */
} span;

/* One line of the file, encoded. */
typedef struct entry {
    span src, tgt;
    const int32_t *key;       /* the source ids, for sorting (the pool is complete then) */
    size_t line;              /* 1-based */
    size_t text_off, text_len; /* the source term as written, in g->text */
} entry;

typedef struct gloss_term {
    span src, src_glued;
    size_t line;              /* the first line that has it */
    size_t text_off, text_len;
    size_t first_alt, n_alts; /* its alternatives: g->alts[first_alt ..] */
    int rank;                 /* 0: matched first */
} gloss_term;

/* A form of a term to look for, sorted by first id then by rank. */
typedef struct form {
    int32_t first;
    int rank;
    int term;
    span ids;
    bool glued;
} form;

struct tfm_glossary {
    const tfm_vocab *vocab;
    unsigned char *flags;     /* [vocab size] PIECE_* */
    tfm_ids pool;             /* every id sequence */
    tfm_buf text;             /* the source terms as written */
    gloss_term *terms;
    int n_terms;
    span *alts;
    size_t n_alts;
    form *forms;
    size_t n_forms;
};

/* ---- pieces ------------------------------------------------------------------------- */

static bool is_word_char(int32_t cp)
{
    return tfm_char_class_of(cp) != TFM_CLASS_COMMON;
}

static tfm_status piece_flags(const tfm_vocab *v, unsigned char **out, tfm_error *err)
{
    int32_t size = tfm_vocab_size(v);
    unsigned char *flags = calloc((size_t)size, 1);
    if (!flags) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < size; id++) {
        if (tfm_vocab_type(v, id) == TFM_PIECE_BYTE) {
            flags[id] = PIECE_BYTE;
            continue;
        }
        size_t len;
        const unsigned char *s = (const unsigned char *)tfm_vocab_piece(v, id, &len);
        if (len == 0) continue;
        int32_t cp;
        if (len >= TFM_MARKER_LEN && memcmp(s, TFM_MARKER, TFM_MARKER_LEN) == 0)
            flags[id] |= PIECE_MARKER;
        else if (tfm_utf8_decode(s, len, &cp) > 0 && is_word_char(cp))
            flags[id] |= PIECE_WORD_FIRST;
        size_t last = len - 1;
        while (last > 0 && (s[last] & 0xC0) == 0x80) last--;
        if (tfm_utf8_decode(s + last, len - last, &cp) > 0 && is_word_char(cp))
            flags[id] |= PIECE_WORD_LAST; /* '▁' is TFM_CLASS_ANY: a word char here */
    }
    *out = flags;
    return TFM_OK;
}

/* The character that the byte pieces from ids[j] spell, or -1. */
static int32_t byte_char(const tfm_glossary *g, const int32_t *ids, size_t n, size_t j)
{
    unsigned char bytes[4];
    size_t k = 0;
    while (k < 4 && j + k < n && (g->flags[ids[j + k]] & PIECE_BYTE)) {
        bytes[k] = (unsigned char)tfm_vocab_byte_value(g->vocab, ids[j + k]);
        if (k > 0 && (bytes[k] & 0xC0) != 0x80) break;
        k++;
    }
    int32_t cp;
    return k > 0 && tfm_utf8_decode(bytes, k, &cp) > 0 ? cp : -1;
}

/* True when piece k of the line starts with a letter, digit or mark (not
 * with '▁'): a term cannot end before it. */
static bool word_goes_on(const tfm_glossary *g, const int32_t *ids, size_t n, size_t k)
{
    if (k >= n) return false;
    unsigned f = g->flags[ids[k]];
    if (!(f & PIECE_BYTE)) return (f & PIECE_WORD_FIRST) != 0;
    int v = tfm_vocab_byte_value(g->vocab, ids[k]);
    if ((v & 0xC0) == 0x80) return true; /* inside a character: never a boundary */
    int32_t cp = byte_char(g, ids, n, k);
    return cp >= 0 && is_word_char(cp);
}

/* True when the pieces before k end in punctuation, a symbol or a
 * placeholder token: a glued form may start at k. */
static bool glue_before(const tfm_glossary *g, const int32_t *ids, size_t n, size_t k)
{
    if (k == 0) return false;
    unsigned f = g->flags[ids[k - 1]];
    if (!(f & PIECE_BYTE)) return !(f & PIECE_WORD_LAST);
    /* Back to the byte piece that starts the character. */
    size_t j = k - 1;
    while (j > 0 && k - j < 4 && (g->flags[ids[j]] & PIECE_BYTE) &&
           (tfm_vocab_byte_value(g->vocab, ids[j]) & 0xC0) == 0x80)
        j--;
    int32_t cp = byte_char(g, ids, n, j);
    return cp >= 0 && !is_word_char(cp);
}

/* ---- reading the file --------------------------------------------------------------- */

static bool is_blank(char c)
{
    return c == ' ' || c == '\r';
}

static void trim(const char **s, size_t *len)
{
    while (*len > 0 && is_blank(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_blank((*s)[*len - 1])) (*len)--;
}

/* Appends the ids of text, encoded as a line, to the pool: *sp. */
static tfm_status encode_span(tfm_glossary *g, tfm_bpe *b, tfm_ids *tmp, const char *text,
                              size_t len, span *sp, tfm_error *err)
{
    tfm_bpe_encode_params ep = {.strict = true};
    tfm_status s = tfm_bpe_encode(b, &ep, text, len, tmp, NULL, err);
    if (s != TFM_OK) return s;
    sp->off = g->pool.len;
    sp->n = tmp->len;
    for (size_t i = 0; i < tmp->len; i++)
        if (tfm_ids_push(&g->pool, tmp->data[i]) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

/* The glued form of text (see the top of the file) into the pool: *sp, n 0
 * when it has none. */
static tfm_status encode_glued(tfm_glossary *g, tfm_bpe *b, tfm_ids *tmp, tfm_buf *scratch,
                               const char *text, size_t len, span *sp, tfm_error *err)
{
    sp->off = g->pool.len;
    sp->n = 0;
    tfm_buf_clear(scratch);
    if (tfm_buf_putc(scratch, '\'') != TFM_OK || tfm_buf_append(scratch, text, len) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_bpe_encode_params ep = {.strict = true};
    tfm_status s = tfm_bpe_encode(b, &ep, scratch->data, scratch->len, tmp, NULL, err);
    if (s != TFM_OK) return s;
    /* Drop the pieces of "▁'": TFM_MARKER_LEN + 1 bytes, a byte piece counting 1. */
    const size_t prefix = TFM_MARKER_LEN + 1;
    size_t k = 0, bytes = 0;
    while (k < tmp->len && bytes < prefix) {
        size_t plen = 1;
        if (!(g->flags[tmp->data[k]] & PIECE_BYTE)) tfm_vocab_piece(g->vocab, tmp->data[k], &plen);
        bytes += plen;
        k++;
    }
    if (bytes != prefix || k == tmp->len || !word_goes_on(g, tmp->data, tmp->len, k))
        return TFM_OK; /* the term does not start a word, or the pieces do not part there */
    for (size_t i = k; i < tmp->len; i++)
        if (tfm_ids_push(&g->pool, tmp->data[i]) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    sp->n = tmp->len - k;
    return TFM_OK;
}

static bool same_ids(const tfm_glossary *g, span a, span b)
{
    return a.n == b.n && memcmp(g->pool.data + a.off, g->pool.data + b.off,
                                a.n * sizeof(int32_t)) == 0;
}

/* Entries by source ids, then by line: equal terms side by side. */
static int cmp_entry(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    for (size_t i = 0; i < a->src.n && i < b->src.n; i++)
        if (a->key[i] != b->key[i]) return a->key[i] < b->key[i] ? -1 : 1;
    if (a->src.n != b->src.n) return a->src.n < b->src.n ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

static int cmp_term_line(const void *pa, const void *pb)
{
    const gloss_term *a = pa, *b = pb;
    return a->line < b->line ? -1 : a->line > b->line;
}

/* Priority: more ids first, then the longer text, then the earlier line. */
static int cmp_term_priority(const void *pa, const void *pb)
{
    const gloss_term *a = *(const gloss_term *const *)pa, *b = *(const gloss_term *const *)pb;
    if (a->src.n != b->src.n) return a->src.n > b->src.n ? -1 : 1;
    if (a->text_len != b->text_len) return a->text_len > b->text_len ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

static int cmp_form(const void *pa, const void *pb)
{
    const form *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (int)a->glued - (int)b->glued;
}

/* Groups the entries into terms, their alternatives, ranks and forms. */
static tfm_status build_terms(tfm_glossary *g, entry *entries, size_t n, tfm_error *err)
{
    for (size_t i = 0; i < n; i++) entries[i].key = g->pool.data + entries[i].src.off;
    if (n > 1) qsort(entries, n, sizeof *entries, cmp_entry);
    g->terms = calloc(n ? n : 1, sizeof *g->terms);
    g->alts = calloc(n ? 2 * n : 1, sizeof *g->alts);
    g->forms = calloc(n ? 2 * n : 1, sizeof *g->forms);
    gloss_term **order = calloc(n ? n : 1, sizeof *order);
    if (!g->terms || !g->alts || !g->forms || !order) {
        free(order);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && same_ids(g, entries[j].src, entries[i].src)) j++;
        gloss_term *t = &g->terms[g->n_terms++];
        *t = (gloss_term){.src = entries[i].src, .line = entries[i].line,
                    .text_off = entries[i].text_off, .text_len = entries[i].text_len,
                    .first_alt = g->n_alts};
        for (size_t e = i; e < j; e++) {
            bool seen = false;
            for (size_t a = t->first_alt; a < g->n_alts && !seen; a++)
                seen = same_ids(g, g->alts[a], entries[e].tgt);
            if (!seen) g->alts[g->n_alts++] = entries[e].tgt;
        }
        t->n_alts = g->n_alts - t->first_alt;
        i = j;
    }
    /* Terms numbered in the order of the file. */
    qsort(g->terms, (size_t)g->n_terms, sizeof *g->terms, cmp_term_line);
    for (int k = 0; k < g->n_terms; k++) order[k] = &g->terms[k];
    qsort(order, (size_t)g->n_terms, sizeof *order, cmp_term_priority);
    for (int r = 0; r < g->n_terms; r++) order[r]->rank = r;
    free(order);
    return TFM_OK;
}

static tfm_status build_forms(tfm_glossary *g, tfm_bpe *b, tfm_error *err)
{
    tfm_ids tmp;
    tfm_buf scratch;
    tfm_ids_init(&tmp);
    tfm_buf_init(&scratch);
    tfm_status s = TFM_OK;
    for (int k = 0; k < g->n_terms && s == TFM_OK; k++) {
        gloss_term *t = &g->terms[k];
        s = encode_glued(g, b, &tmp, &scratch, g->text.data + t->text_off, t->text_len,
                         &t->src_glued, err);
        if (s != TFM_OK) break;
        g->forms[g->n_forms++] = (form){.first = g->pool.data[t->src.off], .rank = t->rank,
                                        .term = k, .ids = t->src};
        if (t->src_glued.n > 0 && !same_ids(g, t->src_glued, t->src))
            g->forms[g->n_forms++] = (form){.first = g->pool.data[t->src_glued.off],
                                            .rank = t->rank, .term = k, .ids = t->src_glued,
                                            .glued = true};
    }
    tfm_ids_free(&tmp);
    tfm_buf_free(&scratch);
    if (s != TFM_OK) return s;
    qsort(g->forms, g->n_forms, sizeof *g->forms, cmp_form);
    return TFM_OK;
}

/* Encodes one side of a line; errors name the line and the side. */
static tfm_status encode_side(tfm_glossary *g, tfm_bpe *b, tfm_ids *tmp, size_t line,
                              const char *side, const char *text, size_t len, span *sp,
                              tfm_error *err)
{
    tfm_error e;
    if (encode_span(g, b, tmp, text, len, sp, &e) != TFM_OK)
        return tfm_error_set(err, e.status == TFM_ERR_NOMEM ? e.status : TFM_ERR_FORMAT,
                             "line %zu: %s term: %s", line, side, e.msg);
    if (sp->n == 0)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: the %s term is empty once normalised",
                             line, side);
    return TFM_OK;
}

static tfm_status parse_lines(tfm_glossary *g, const char *data, size_t size, tfm_bpe *b,
                              tfm_bpe *tgt_b, entry **out, size_t *n_out, tfm_error *err)
{
    entry *entries = NULL;
    size_t n = 0, cap = 0, line = 0;
    tfm_ids tmp;
    tfm_buf scratch;
    tfm_ids_init(&tmp);
    tfm_buf_init(&scratch);
    tfm_status s = TFM_OK;
    for (size_t at = 0; at < size && s == TFM_OK;) {
        const char *p = data + at;
        const char *nl = memchr(p, '\n', size - at);
        size_t len = nl ? (size_t)(nl - p) : size - at;
        at += len + 1;
        line++;
        const char *blank = p;
        size_t blank_len = len;
        trim(&blank, &blank_len);
        if (blank_len == 0 || p[0] == '#') continue;
        const char *tab = memchr(p, '\t', len);
        if (!tab) {
            s = tfm_error_set(err, TFM_ERR_FORMAT,
                              "line %zu: no TAB: a glossary line is SOURCE<TAB>TARGET", line);
            break;
        }
        const char *src = p, *tgt = tab + 1;
        size_t src_len = (size_t)(tab - p), tgt_len = len - src_len - 1;
        if (memchr(tgt, '\t', tgt_len)) {
            s = tfm_error_set(err, TFM_ERR_FORMAT,
                              "line %zu: more than one TAB: a glossary line is "
                              "SOURCE<TAB>TARGET", line);
            break;
        }
        trim(&src, &src_len);
        trim(&tgt, &tgt_len);
        if (src_len == 0 || tgt_len == 0) {
            s = tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: empty %s term", line,
                              src_len == 0 ? "source" : "target");
            break;
        }
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            entry *e = realloc(entries, c * sizeof *e);
            if (!e) {
                s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
                break;
            }
            entries = e;
            cap = c;
        }
        entry *e = &entries[n];
        *e = (entry){.line = line, .text_off = g->text.len, .text_len = src_len};
        if (tfm_buf_append(&g->text, src, src_len) != TFM_OK) {
            s = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            break;
        }
        s = encode_side(g, b, &tmp, line, "source", src, src_len, &e->src, err);
        if (s == TFM_OK)
            s = encode_side(g, tgt_b, &tmp, line, "target", tgt, tgt_len, &e->tgt, err);
        n++;
    }
    tfm_ids_free(&tmp);
    tfm_buf_free(&scratch);
    if (s != TFM_OK) {
        free(entries);
        return s;
    }
    *out = entries;
    *n_out = n;
    return TFM_OK;
}

tfm_status tfm_glossary_parse(const char *data, size_t size, const tfm_vocab *v,
                              const tfm_vocab *tgt_v, tfm_glossary **out, tfm_error *err)
{
    *out = NULL;
    if (!v) return tfm_error_set(err, TFM_ERR_ARG, "glossary: a vocabulary is required");
    tfm_glossary *g = calloc(1, sizeof *g);
    if (!g) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    g->vocab = v;
    tfm_ids_init(&g->pool);
    tfm_buf_init(&g->text);
    tfm_bpe *b = NULL, *tgt_b = NULL;
    entry *entries = NULL;
    size_t n = 0;
    tfm_status s = piece_flags(v, &g->flags, err);
    if (s == TFM_OK) s = tfm_bpe_create(v, &b, err);
    if (s == TFM_OK && tgt_v) s = tfm_bpe_create(tgt_v, &tgt_b, err);
    if (s == TFM_OK) s = parse_lines(g, data, size, b, tgt_b ? tgt_b : b, &entries, &n, err);
    if (s == TFM_OK) s = build_terms(g, entries, n, err);
    if (s == TFM_OK) s = build_forms(g, b, err);
    free(entries);
    tfm_bpe_free(b);
    tfm_bpe_free(tgt_b);
    if (s != TFM_OK) {
        tfm_glossary_free(g);
        return s;
    }
    *out = g;
    return TFM_OK;
}

tfm_status tfm_glossary_read_fd(int fd, const tfm_vocab *v, const tfm_vocab *tgt_v,
                                tfm_glossary **out, tfm_error *err)
{
    *out = NULL;
    tfm_buf data;
    tfm_buf_init(&data);
    tfm_status s = tfm_read_upto(fd, &data, GLOSSARY_MAX_BYTES + 1, err);
    if (s == TFM_OK && data.len > GLOSSARY_MAX_BYTES)
        s = tfm_error_set(err, TFM_ERR_FORMAT, "larger than %llu bytes: not a glossary",
                          (unsigned long long)GLOSSARY_MAX_BYTES);
    if (s == TFM_OK)
        s = tfm_glossary_parse(data.data ? data.data : "", data.len, v, tgt_v, out, err);
    tfm_buf_free(&data);
    return s;
}

tfm_status tfm_glossary_load(const char *path, const tfm_vocab *v, const tfm_vocab *tgt_v,
                             tfm_glossary **out, tfm_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfm_error_set(err, TFM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    tfm_status s = tfm_glossary_read_fd(fd, v, tgt_v, out, err);
    close(fd);
    return s;
}

void tfm_glossary_free(tfm_glossary *g)
{
    if (!g) return;
    free(g->flags);
    tfm_ids_free(&g->pool);
    tfm_buf_free(&g->text);
    free(g->terms);
    free(g->alts);
    free(g->forms);
    free(g);
}

int tfm_glossary_size(const tfm_glossary *g)
{
    return g->n_terms;
}

const char *tfm_glossary_term(const tfm_glossary *g, int term, size_t *len)
{
    if (term < 0 || term >= g->n_terms) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = g->terms[term].text_len;
    return g->text.data + g->terms[term].text_off;
}

const tfm_vocab *tfm_glossary_vocab(const tfm_glossary *g)
{
    return g->vocab;
}

/* ---- matching ------------------------------------------------------------------------ */

void tfm_term_matches_init(tfm_term_matches *m)
{
    memset(m, 0, sizeof *m);
}

void tfm_term_matches_free(tfm_term_matches *m)
{
    if (!m) return;
    free(m->cand);
    free(m->found);
    free(m->covered);
    tfm_term_matches_init(m);
}

static bool push_match(tfm_term_match **items, size_t *n, size_t *cap, tfm_term_match x)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        tfm_term_match *p = realloc(*items, c * sizeof *p);
        if (!p) return false;
        *items = p;
        *cap = c;
    }
    (*items)[(*n)++] = x;
    return true;
}

/* Candidates in the order they are taken: by rank, then from the left. */
static int cmp_candidate(const void *pa, const void *pb)
{
    const tfm_term_match *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static int cmp_start(const void *pa, const void *pb)
{
    const tfm_term_match *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* The first form whose first id is id, or g->n_forms. */
static size_t first_form(const tfm_glossary *g, int32_t id)
{
    size_t lo = 0, hi = g->n_forms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->forms[mid].first < id) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

tfm_status tfm_glossary_match(const tfm_glossary *g, const int32_t *ids, size_t n,
                              tfm_term_matches *m, tfm_error *err)
{
    m->n_cand = 0;
    m->n_found = 0;
    m->n_dropped = 0;
    const int32_t vocab_size = tfm_vocab_size(g->vocab);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return tfm_error_set(err, TFM_ERR_RANGE, "glossary: id %d outside the vocabulary",
                                 (int)ids[i]);
    /* Every occurrence of every form. */
    for (size_t k = 0; k < n; k++) {
        bool at_word = k == 0 || (g->flags[ids[k]] & PIECE_MARKER);
        bool glue = !at_word && glue_before(g, ids, n, k);
        if (!at_word && !glue) continue;
        for (size_t f = first_form(g, ids[k]); f < g->n_forms && g->forms[f].first == ids[k];
             f++) {
            const form *fm = &g->forms[f];
            if (fm->glued != glue || fm->ids.n > n - k) continue;
            if (memcmp(ids + k, g->pool.data + fm->ids.off, fm->ids.n * sizeof *ids) != 0) continue;
            if (word_goes_on(g, ids, n, k + fm->ids.n)) continue;
            tfm_term_match x = {.term = fm->term, .rank = fm->rank, .start = k, .len = fm->ids.n};
            if (!push_match(&m->cand, &m->n_cand, &m->cand_cap, x))
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
    }
    /* Taken by priority, skipping overlaps; a term's first occurrence taken is kept. */
    if (n > m->covered_cap) {
        unsigned char *c = realloc(m->covered, n);
        if (!c) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        m->covered = c;
        m->covered_cap = n;
    }
    if (n > 0) memset(m->covered, 0, n);
    if (m->n_cand > 1) qsort(m->cand, m->n_cand, sizeof *m->cand, cmp_candidate);
    int last_taken = -1; /* the candidates of a term are side by side */
    for (size_t c = 0; c < m->n_cand; c++) {
        tfm_term_match x = m->cand[c];
        bool free_span = true;
        for (size_t i = x.start; i < x.start + x.len && free_span; i++) free_span = !m->covered[i];
        if (!free_span) continue;
        memset(m->covered + x.start, 1, x.len);
        if (x.term == last_taken) continue;
        last_taken = x.term;
        if (m->n_found == TFM_GLOSSARY_MAX_CONSTRAINTS) {
            m->n_dropped++;
            continue;
        }
        if (!push_match(&m->found, &m->n_found, &m->found_cap, x))
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    if (m->n_found > 1) qsort(m->found, m->n_found, sizeof *m->found, cmp_start);
    return TFM_OK;
}

tfm_status tfm_glossary_constraints(const tfm_glossary *g, const tfm_term_matches *m,
                                    tfm_buf *out, tfm_error *err)
{
    tfm_buf_clear(out);
    tfm_status s = tfm_buf_append(out, "", 0);
    for (size_t k = 0; k < m->n_found && s == TFM_OK; k++) {
        const gloss_term *t = &g->terms[m->found[k].term];
        if (k > 0) s = tfm_buf_putc(out, '\t');
        for (size_t a = 0; a < t->n_alts && s == TFM_OK; a++) {
            const span *sp = &g->alts[t->first_alt + a];
            if (a > 0) s = tfm_buf_append(out, " | ", 3);
            if (s == TFM_OK) s = tfm_ids_format(g->pool.data + sp->off, sp->n, out);
        }
    }
    if (s != TFM_OK) return tfm_error_set(err, s, "out of memory writing constraints");
    return TFM_OK;
}
