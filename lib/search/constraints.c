/* constraints.c - what a constrained search must obey for one sentence:
 * constraints (sequences of ids, with alternatives, that must appear),
 * limits (tokens that may appear at most so often) and an order (tokens
 * that must appear in a given order), and the line format of decode's
 * --constraints file.  The search itself is constrained.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "search/search_internal.h"
#include "tfm/spm.h"
#include "tfm/text.h"

tfm_constraints *tfm_constraints_create(void)
{
    tfm_constraints *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    tfm_ids_init(&c->ids);
    tfm_ids_init(&c->banned);
    tfm_ids_init(&c->ordered);
    tfm_ids_init(&c->enclosed);
    tfm_ids_init(&c->after_con);
    tfm_ids_init(&c->after_tok);
    tfm_ids_init(&c->pair_first);
    tfm_ids_init(&c->pair_second);
    c->pad = TFM_ID_PAD;
    c->bos = TFM_ID_BOS;
    c->eos = TFM_ID_EOS;
    return c;
}

void tfm_constraints_set_specials(tfm_constraints *c, int32_t pad, int32_t bos, int32_t eos)
{
    c->pad = pad;
    c->bos = bos;
    c->eos = eos;
}

void tfm_constraints_free(tfm_constraints *c)
{
    if (!c) return;
    tfm_ids_free(&c->ids);
    tfm_ids_free(&c->banned);
    tfm_ids_free(&c->ordered);
    tfm_ids_free(&c->enclosed);
    tfm_ids_free(&c->after_con);
    tfm_ids_free(&c->after_tok);
    tfm_ids_free(&c->pair_first);
    tfm_ids_free(&c->pair_second);
    free(c->alt_start);
    free(c->alt_len);
    free(c->alt_of);
    free(c->limited);
    free(c->limit);
    free(c);
}

void tfm_constraints_clear(tfm_constraints *c)
{
    c->n = 0;
    c->n_alts = 0;
    c->n_limited = 0;
    tfm_ids_clear(&c->ids);
    tfm_ids_clear(&c->banned);
    tfm_ids_clear(&c->ordered);
    tfm_ids_clear(&c->enclosed);
    tfm_ids_clear(&c->after_con);
    tfm_ids_clear(&c->after_tok);
    tfm_ids_clear(&c->pair_first);
    tfm_ids_clear(&c->pair_second);
    memset(c->needs, 0, sizeof c->needs);
}

bool tfm_constraints_empty(const tfm_constraints *c)
{
    return !c || (c->n == 0 && c->n_limited == 0 && c->banned.len == 0 && c->ordered.len == 0 &&
                  c->enclosed.len == 0 && c->after_tok.len == 0 && c->pair_first.len == 0);
}

int tfm_constraints_count(const tfm_constraints *c)
{
    return c ? c->n : 0;
}

void search_constraints_vocab(const tfm_constraints *c, tfm_vocab_set *set)
{
    if (!c) return;
    for (size_t i = 0; i < c->ids.len; i++) tfm_vocab_set_add(set, c->ids.data[i]);
    for (int i = 0; i < c->n_limited; i++)
        if (c->limit[i] > 0) tfm_vocab_set_add(set, c->limited[i]);
    for (size_t i = 0; i < c->ordered.len; i++) tfm_vocab_set_add(set, c->ordered.data[i]);
}

/* Makes room for one more alternative. */
static bool alts_reserve(tfm_constraints *c)
{
    if (c->n_alts < c->alt_cap) return true;
    int cap = c->alt_cap ? 2 * c->alt_cap : 8;
    int *start = realloc(c->alt_start, (size_t)cap * sizeof *start);
    if (start) c->alt_start = start;
    int *len = realloc(c->alt_len, (size_t)cap * sizeof *len);
    if (len) c->alt_len = len;
    int *of = realloc(c->alt_of, (size_t)cap * sizeof *of);
    if (of) c->alt_of = of;
    if (!start || !len || !of) return false;
    c->alt_cap = cap;
    return true;
}

tfm_status tfm_constraints_add(tfm_constraints *c, const int32_t *const *alts, const int *lens,
                               int n_alts, tfm_error *err)
{
    if (c->n >= TFM_MAX_CONSTRAINTS)
        return tfm_error_set(err, TFM_ERR_RANGE, "more than %d constraints for one sentence",
                             TFM_MAX_CONSTRAINTS);
    if (n_alts < 1) return tfm_error_set(err, TFM_ERR_ARG, "a constraint without ids");
    for (int a = 0; a < n_alts; a++) {
        if (lens[a] < 1) return tfm_error_set(err, TFM_ERR_ARG, "a constraint without ids");
        if (!alts_reserve(c)) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        c->alt_start[c->n_alts] = (int)c->ids.len;
        c->alt_len[c->n_alts] = lens[a];
        c->alt_of[c->n_alts] = c->n;
        for (int j = 0; j < lens[a]; j++)
            if (tfm_ids_push(&c->ids, alts[a][j]) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        c->n_alts++;
    }
    c->n++;
    return TFM_OK;
}

tfm_status tfm_constraints_limit(tfm_constraints *c, int32_t tok, int max, tfm_error *err)
{
    if (max < 0) return tfm_error_set(err, TFM_ERR_ARG, "a limit of %d", max);
    /* never: no occurrences to count at every step */
    if (max == 0) return tfm_constraints_ban(c, tok, err);
    for (int i = 0; i < c->n_limited; i++)
        if (c->limited[i] == tok) {
            c->limit[i] = max;
            return TFM_OK;
        }
    if (c->n_limited == c->limited_cap) {
        int cap = c->limited_cap ? 2 * c->limited_cap : 8;
        int32_t *t = realloc(c->limited, (size_t)cap * sizeof *t);
        if (t) c->limited = t;
        int *m = realloc(c->limit, (size_t)cap * sizeof *m);
        if (m) c->limit = m;
        if (!t || !m) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        c->limited_cap = cap;
    }
    c->limited[c->n_limited] = tok;
    c->limit[c->n_limited] = max;
    c->n_limited++;
    return TFM_OK;
}

tfm_status tfm_constraints_ban(tfm_constraints *c, int32_t tok, tfm_error *err)
{
    if (tfm_ids_push(&c->banned, tok) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

tfm_status tfm_constraints_order(tfm_constraints *c, const int32_t *seq, int n, tfm_error *err)
{
    tfm_ids_clear(&c->ordered);
    for (int i = 0; i < n; i++)
        if (tfm_ids_push(&c->ordered, seq[i]) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

tfm_status tfm_constraints_order_constraints(tfm_constraints *c, const int *idx, int n,
                                             tfm_error *err)
{
    uint64_t before = 0; /* the constraints ahead in idx */
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= c->n)
            return tfm_error_set(err, TFM_ERR_RANGE, "constraint %d of an order of %d: there "
                                 "are %d constraints", idx[i], n, c->n);
        c->needs[idx[i]] |= before;
        before |= (uint64_t)1 << idx[i];
    }
    return TFM_OK;
}

tfm_status tfm_constraints_enclose(tfm_constraints *c, int32_t tok, tfm_error *err)
{
    for (size_t i = 0; i < c->enclosed.len; i++)
        if (c->enclosed.data[i] == tok) return TFM_OK;
    if (tfm_ids_push(&c->enclosed, tok) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

tfm_status tfm_constraints_ban_after(tfm_constraints *c, int con, int32_t tok, tfm_error *err)
{
    if (con < 0 || con >= c->n)
        return tfm_error_set(err, TFM_ERR_RANGE, "constraint %d: there are %d", con, c->n);
    if (tfm_ids_push(&c->after_con, con) != TFM_OK || tfm_ids_push(&c->after_tok, tok) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

tfm_status tfm_constraints_ban_pair(tfm_constraints *c, int32_t first, int32_t second,
                                    tfm_error *err)
{
    if (tfm_ids_push(&c->pair_first, first) != TFM_OK ||
        tfm_ids_push(&c->pair_second, second) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

/* ---- the --constraints line format ------------------------------------------------------ */

/* Whether id may be asked for: a real token, not one the search never makes. */
static bool id_allowed(const tfm_constraints *c, int32_t id)
{
    return id != c->pad && id != c->bos && id != c->eos;
}

/* Parses the constraint field [line, end) (alternatives separated by '|'). */
static tfm_status parse_field(tfm_constraints *c, const char *line, const char *end,
                              int32_t vocab_size, int number, tfm_ids *all, tfm_error *err)
{
    enum { MAX_ALTS = 64 };
    int starts[MAX_ALTS], lens[MAX_ALTS], n_alts = 0;
    tfm_ids one;
    tfm_ids_init(&one);
    tfm_ids_clear(all);
    tfm_status st = TFM_OK;
    for (const char *p = line; p <= end && st == TFM_OK;) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        const char *stop = bar ? bar : end;
        st = tfm_ids_parse(p, (size_t)(stop - p), vocab_size, &one, err);
        if (st != TFM_OK) break;
        if (one.len == 0) {
            st = tfm_error_set(err, TFM_ERR_FORMAT, "an empty alternative");
            break;
        }
        if (n_alts == MAX_ALTS) {
            st = tfm_error_set(err, TFM_ERR_RANGE, "more than %d alternatives", MAX_ALTS);
            break;
        }
        for (size_t j = 0; j < one.len && st == TFM_OK; j++) {
            if (!id_allowed(c, one.data[j]))
                st = tfm_error_set(err, TFM_ERR_RANGE, "id %d is <pad>, <s> or </s>, which no "
                                   "output holds", (int)one.data[j]);
            else if (tfm_ids_push(all, one.data[j]) != TFM_OK)
                st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
        }
        starts[n_alts] = (int)(all->len - one.len);
        lens[n_alts] = (int)one.len;
        n_alts++;
        if (!bar) break;
        p = bar + 1;
    }
    if (st == TFM_OK) {
        const int32_t *alts[MAX_ALTS];
        for (int a = 0; a < n_alts; a++) alts[a] = all->data + starts[a];
        st = tfm_constraints_add(c, alts, lens, n_alts, err);
    }
    if (st != TFM_OK && st != TFM_ERR_NOMEM) tfm_error_prefix(err, "constraint %d", number);
    tfm_ids_free(&one);
    return st;
}

tfm_status tfm_constraints_parse(tfm_constraints *c, const char *line, size_t len,
                                 int32_t vocab_size, tfm_error *err)
{
    tfm_ids all;
    tfm_ids_init(&all);
    tfm_status st = TFM_OK;
    const char *end = line + len;
    int number = 1;
    for (const char *p = line; len > 0 && st == TFM_OK; number++) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const char *stop = tab ? tab : end;
        st = parse_field(c, p, stop, vocab_size, number, &all, err);
        if (!tab) break;
        p = tab + 1;
    }
    tfm_ids_free(&all);
    return st;
}

/* ---- placeholders ---------------------------------------------------------------------- */

/* The characters that start or end a placeholder of the classes. */
static void placeholder_marks(unsigned classes, bool mark[128])
{
    memset(mark, 0, 128 * sizeof *mark);
    if (classes & (TFM_PH_PRINTF | TFM_PH_PYTHON | TFM_PH_QT)) mark['%'] = true;
    if (classes & (TFM_PH_BRACES | TFM_PH_DOLLAR)) mark['{'] = mark['}'] = true;
    if (classes & TFM_PH_DOLLAR) mark['$'] = true;
    if (classes & TFM_PH_TAGS) mark['<'] = mark['>'] = true;
    if (classes & TFM_PH_ENTITIES) mark['&'] = true;
}

/* The ids of v's placeholder tokens lie in [*first, *last] (empty when it
 * has none); the user pieces there are they. */
static void placeholder_token_range(const tfm_vocab *v, int32_t *first, int32_t *last)
{
    *first = INT32_MAX;
    *last = -1;
    for (int k = 1; k <= TFM_PH_TOKENS; k++) {
        int32_t id = tfm_vocab_placeholder_id(v, k);
        if (id >= 0 && id < *first) *first = id;
        if (id > *last) *last = id;
    }
}

/* The marks of the classes that the source line has in its text, outside
 * its placeholders ph, in in_text; the others in elsewhere. */
static void marks_of_text(const char *line, size_t len, unsigned classes,
                          const tfm_placeholders *ph, bool in_text[128], bool elsewhere[128])
{
    placeholder_marks(classes, elsewhere);
    memset(in_text, 0, 128 * sizeof *in_text);
    size_t next = 0; /* the next placeholder of ph (they come in order) */
    for (size_t i = 0; i < len; i++) {
        if (next < ph->n && i == ph->items[next].start) {
            i += ph->items[next++].len - 1;
            continue;
        }
        unsigned char ch = (unsigned char)line[i];
        if (ch < 128 && elsewhere[ch]) {
            elsewhere[ch] = false;
            in_text[ch] = true;
        }
    }
}

/* The text of piece id of v in *len bytes: its byte (in *byte), or its
 * piece; NULL for a control piece or a placeholder token. */
static const char *piece_text(const tfm_vocab *v, int32_t id, int32_t first_ph, int32_t last_ph,
                              char *byte, size_t *len)
{
    const tfm_piece_type type = tfm_vocab_type(v, id);
    if (type == TFM_PIECE_CONTROL) return NULL;
    if (id >= first_ph && id <= last_ph && type == TFM_PIECE_USER) return NULL;
    const int b = tfm_vocab_byte_value(v, id);
    if (b >= 0) {
        *byte = (char)b;
        *len = 1;
        return byte;
    }
    return tfm_vocab_piece(v, id, len);
}

/* Whether text[0..n) (NULL: none) holds a character of mark. */
static bool holds_mark(const char *text, size_t n, const bool mark[128])
{
    for (size_t j = 0; text && j < n; j++)
        if ((unsigned char)text[j] < 128 && mark[(unsigned char)text[j]]) return true;
    return false;
}

/* Bans every piece of v (normal, user or byte; not a placeholder token)
 * holding a mark that the source line has nowhere outside its
 * placeholders ph: the output then cannot spell a placeholder the source
 * does not have out of ordinary pieces. */
static tfm_status ban_placeholder_marks(tfm_constraints *c, const tfm_vocab *v, const char *line,
                                        size_t len, unsigned classes, const tfm_placeholders *ph,
                                        const int32_t *allowed, int n_allowed, tfm_error *err)
{
    bool mark[128], in_text[128];
    marks_of_text(line, len, classes, ph, in_text, mark);
    bool any = false;
    for (int ch = 0; ch < 128; ch++) any = any || mark[ch];
    if (!any) return TFM_OK;
    int32_t first_ph, last_ph;
    placeholder_token_range(v, &first_ph, &last_ph);
    const int32_t size = tfm_vocab_size(v);
    for (int32_t id = 0; id < size; id++) {
        char byte;
        size_t plen;
        const char *piece = piece_text(v, id, first_ph, last_ph, &byte, &plen);
        if (!piece) continue;
        bool spells_one = false; /* a piece of the placeholders' own spellings */
        for (int k = 0; k < n_allowed && !spells_one; k++) spells_one = allowed[k] == id;
        if (spells_one) continue;
        if (holds_mark(piece, plen, mark)) {
            tfm_status st = tfm_constraints_ban(c, id, err);
            if (st != TFM_OK) return st;
        }
    }
    return TFM_OK;
}

static tfm_status add_placeholders_as_pieces(tfm_constraints *c, const tfm_vocab *v,
                                             const char *line, size_t len, unsigned classes,
                                             tfm_error *err);
static tfm_status ban_lengthening(tfm_constraints *c, const tfm_vocab *v, int con, const char *t,
                                  size_t n, unsigned classes, tfm_error *err);
static tfm_status ban_joining(tfm_constraints *c, const tfm_vocab *v, int32_t tok, const char *t,
                              size_t n, unsigned classes, tfm_error *err);
static tfm_status ban_spelled_across(tfm_constraints *c, const tfm_vocab *v, const char *line,
                                     size_t len, unsigned classes, const tfm_placeholders *ph,
                                     tfm_error *err);

tfm_status tfm_constraints_add_placeholders(tfm_constraints *c, const tfm_vocab *v,
                                            const char *line, size_t len, unsigned classes,
                                            tfm_error *err)
{
    if (tfm_vocab_placeholder_id(v, 1) < 0 && tfm_vocab_spm(v))
        return add_placeholders_as_pieces(c, v, line, len, classes, err);
    if (tfm_vocab_placeholder_id(v, 1) < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "the model's vocabulary has no placeholder tokens "
                             "(<ph1> ...): learn it with 'tokenize learn --placeholders'");
    tfm_placeholders ph;
    tfm_placeholders_init(&ph);
    tfm_status st = tfm_placeholders_scan(line, len, classes, &ph, err);
    int count[TFM_PH_TOKENS + 1] = {0};
    int32_t ordered[TFM_MAX_CONSTRAINTS];
    int n_ordered = 0;
    for (size_t i = 0; i < ph.n && st == TFM_OK; i++) {
        const tfm_placeholder *p = &ph.items[i];
        int32_t id = p->index > 0 ? tfm_vocab_placeholder_id(v, p->index) : -1;
        if (id < 0) continue; /* kept as text: nothing to steer */
        count[p->index]++;
        /* beyond TFM_MAX_CONSTRAINTS the limits alone keep what they can */
        if (c->n == TFM_MAX_CONSTRAINTS) continue;
        const int32_t *alt = &id;
        const int one = 1;
        st = tfm_constraints_add(c, &alt, &one, 1, err);
        if (p->ordered) ordered[n_ordered++] = id;
        /* "%1" then the piece "8" would read "%18"; the piece "%" then
         * "%C" would read "%%C" */
        if (st == TFM_OK)
            st = ban_lengthening(c, v, c->n - 1, line + p->start, p->len, classes, err);
        if (st == TFM_OK) st = ban_joining(c, v, id, line + p->start, p->len, classes, err);
    }
    for (int k = 1; k <= TFM_PH_TOKENS && st == TFM_OK; k++) {
        int32_t id = tfm_vocab_placeholder_id(v, k);
        if (id >= 0) st = tfm_constraints_limit(c, id, count[k], err);
    }
    if (st == TFM_OK && n_ordered > 1) st = tfm_constraints_order(c, ordered, n_ordered, err);
    if (st == TFM_OK) st = ban_placeholder_marks(c, v, line, len, classes, &ph, NULL, 0, err);
    if (st == TFM_OK) st = ban_spelled_across(c, v, line, len, classes, &ph, err);
    tfm_placeholders_free(&ph);
    return st;
}

/* out = a[0..na) b[0..nb) and the string tail. */
static tfm_status join_texts(tfm_buf *out, const char *a, size_t na, const char *b, size_t nb,
                             const char *tail, tfm_error *err)
{
    out->len = 0;
    if (tfm_buf_append(out, a, na) != TFM_OK || tfm_buf_append(out, b, nb) != TFM_OK ||
        tfm_buf_append(out, tail, strlen(tail)) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    return TFM_OK;
}

/* Whether text[0..n) holds a placeholder that starts before byte cut and
 * ends after it (cut 0: any placeholder). */
static bool spells_across(const char *text, size_t n, size_t cut, unsigned classes,
                          tfm_placeholders *scan)
{
    tfm_error ignored;
    if (tfm_placeholders_scan(text, n, classes, scan, &ignored) != TFM_OK) return false;
    for (size_t i = 0; i < scan->n; i++)
        if (cut == 0 || (scan->items[i].start < cut && scan->items[i].start + scan->items[i].len > cut))
            return true;
    return false;
}

/* Where the source's text has a mark outside its placeholders ("%O" is no
 * placeholder, "%C" is), ban_placeholder_marks lets the pieces that hold it
 * be, and two of them in a row could still spell a placeholder the source
 * does not have: "%" then "%" reads "%%", "%" then "d" "%d".  So this bans
 * each such piece that spells a placeholder by itself, and, right after
 * each, every piece that spells one across the two.  The source's own text
 * stays possible ("%" then "L" of "at %L": no placeholder), and so does a
 * placeholder spelled across three pieces ("%", "1", "$s"), which a model
 * hardly ever writes.  Each pair is scanned whole: a pair that starts a
 * placeholder only with its second piece's later characters ("&" then
 * "#38;") is found as surely as "%" then "s". */
static tfm_status ban_spelled_across(tfm_constraints *c, const tfm_vocab *v, const char *line,
                                     size_t len, unsigned classes, const tfm_placeholders *ph,
                                     tfm_error *err)
{
    bool in_text[128], elsewhere[128], any = false;
    marks_of_text(line, len, classes, ph, in_text, elsewhere);
    for (int ch = 0; ch < 128; ch++) any = any || in_text[ch];
    if (!any) return TFM_OK;
    int32_t first_ph, last_ph;
    placeholder_token_range(v, &first_ph, &last_ph);
    tfm_placeholders scan;
    tfm_placeholders_init(&scan);
    tfm_buf text;
    tfm_buf_init(&text);
    tfm_status st = TFM_OK;
    const int32_t size = tfm_vocab_size(v);
    for (int32_t a = 0; a < size && st == TFM_OK; a++) {
        char a_byte;
        size_t a_len;
        const char *a_text = piece_text(v, a, first_ph, last_ph, &a_byte, &a_len);
        if (!holds_mark(a_text, a_len, in_text)) continue;
        if (spells_across(a_text, a_len, 0, classes, &scan)) {
            st = tfm_constraints_ban(c, a, err);
            continue;
        }
        for (int32_t b = 0; b < size && st == TFM_OK; b++) {
            char b_byte;
            size_t b_len;
            const char *b_text = piece_text(v, b, first_ph, last_ph, &b_byte, &b_len);
            /* a piece that starts with a space ("▁") or another non-ASCII
             * character continues no placeholder */
            if (!b_text || b_len == 0 || (unsigned char)b_text[0] >= 128) continue;
            if ((st = join_texts(&text, a_text, a_len, b_text, b_len, "", err)) != TFM_OK) break;
            if (spells_across(text.data, text.len, a_len, classes, &scan))
                st = tfm_constraints_ban_pair(c, a, b, err);
        }
    }
    tfm_buf_free(&text);
    tfm_placeholders_free(&scan);
    return st;
}

/* ---- placeholders in a model's own pieces -------------------------------------------------- */

/* A placeholder's text t in the pieces of v's SentencePiece model, as ids
 * of v, into out: with the dummy prefix (t after a space: "▁%s") or
 * without (t glued to the word before it).  False when a piece is not in
 * v (it would be <unk>: no output spells t so). */
static bool spell(tfm_spm_encoder *e, const tfm_vocab *v, const char *t, size_t n, bool prefix,
                  tfm_buf *pieces, tfm_ids *out)
{
    tfm_ids_clear(out);
    tfm_spm_encoder_set_dummy_prefix(e, prefix);
    if (tfm_spm_encode_pieces(e, t, n, pieces, NULL, NULL) != TFM_OK) return false;
    const char *p = pieces->data ? pieces->data : "", *end = p + pieces->len;
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const size_t k = sp ? (size_t)(sp - p) : (size_t)(end - p);
        const int32_t id = k ? tfm_vocab_find(v, p, k) : -1;
        if (k && (id < 0 || tfm_ids_push(out, id) != TFM_OK)) return false;
        p += k + 1;
    }
    return out->len > 0;
}

/* Whether piece id holds a character that starts or ends a placeholder. */
static bool has_mark(const tfm_vocab *v, int32_t id, const bool mark[128])
{
    size_t n;
    const char *t = tfm_vocab_piece(v, id, &n);
    return holds_mark(t, n, mark);
}

/* Whether the first placeholder of text[0..n) is longer than m bytes. */
static bool first_longer(const char *text, size_t n, size_t m, unsigned classes,
                         tfm_placeholders *scan)
{
    tfm_error err;
    if (tfm_placeholders_scan(text, n, classes, scan, &err) != TFM_OK || scan->n == 0) return false;
    return scan->items[0].start == 0 && scan->items[0].len > m;
}

/* Bans right after constraint con (the spelling of placeholder t[0..n))
 * every piece of v whose first character would lengthen it: "%1" followed
 * by "s" reads "%1s", by "2" "%12", by "$" then "s" "%1$s".  A character
 * lengthens t when the first placeholder of t + ch, or of t + ch + "s", is
 * longer than t.  Pieces that start with a space ("▁...") never do. */
static tfm_status ban_lengthening(tfm_constraints *c, const tfm_vocab *v, int con, const char *t,
                                  size_t n, unsigned classes, tfm_error *err)
{
    bool bad[128] = {false}, any = false;
    char *text = malloc(n + 2);
    if (!text) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    tfm_placeholders scan;
    tfm_placeholders_init(&scan);
    memcpy(text, t, n);
    for (int ch = 1; ch < 128; ch++) {
        text[n] = (char)ch;
        text[n + 1] = 's';
        bad[ch] = first_longer(text, n + 1, n, classes, &scan) ||
                  first_longer(text, n + 2, n, classes, &scan);
        any = any || bad[ch];
    }
    tfm_placeholders_free(&scan);
    free(text);
    const int32_t size = tfm_vocab_size(v);
    tfm_status st = TFM_OK;
    for (int32_t id = 0; any && id < size && st == TFM_OK; id++) {
        if (tfm_vocab_type(v, id) == TFM_PIECE_CONTROL) continue;
        int first = tfm_vocab_byte_value(v, id);
        if (first < 0) {
            size_t len;
            const char *piece = tfm_vocab_piece(v, id, &len);
            first = piece && len > 0 ? (unsigned char)piece[0] : -1;
        }
        if (first >= 0 && first < 128 && bad[first]) st = tfm_constraints_ban_after(c, con, id, err);
    }
    return st;
}

/* Bans every piece of v that would change the reading of the placeholder
 * t[0..n) (token tok) if it came right before it: a piece that ends in one
 * of the classes' marks, after which t is no longer read as a placeholder
 * of n bytes at its place ("%" then "%C" reads "%%C", a literal percent
 * sign and a C). */
static tfm_status ban_joining(tfm_constraints *c, const tfm_vocab *v, int32_t tok, const char *t,
                              size_t n, unsigned classes, tfm_error *err)
{
    bool mark[128];
    placeholder_marks(classes, mark);
    tfm_placeholders scan;
    tfm_placeholders_init(&scan);
    tfm_buf joined;
    tfm_buf_init(&joined);
    int32_t first_ph, last_ph;
    placeholder_token_range(v, &first_ph, &last_ph);
    tfm_status st = TFM_OK;
    const int32_t size = tfm_vocab_size(v);
    for (int32_t id = 0; id < size && st == TFM_OK; id++) {
        /* (a placeholder token is skipped: another placeholder after it is read apart) */
        char byte_text;
        size_t len;
        const char *piece = piece_text(v, id, first_ph, last_ph, &byte_text, &len);
        const unsigned char last = piece && len > 0 ? (unsigned char)piece[len - 1] : 0;
        if (last == 0 || last >= 128 || !mark[last]) continue;
        if ((st = join_texts(&joined, piece, len, t, n, "", err)) != TFM_OK) break;
        tfm_error ignored;
        bool kept = false; /* t still read at its place, whole */
        if (tfm_placeholders_scan(joined.data, joined.len, classes, &scan, &ignored) == TFM_OK)
            for (size_t i = 0; i < scan.n && !kept; i++)
                kept = scan.items[i].start == len && scan.items[i].len == n;
        if (!kept) st = tfm_constraints_ban_pair(c, id, tok, err);
    }
    tfm_buf_free(&joined);
    tfm_placeholders_free(&scan);
    return st;
}

/* ph (the placeholders of line[0..len)) with the line's stray marks among
 * them, in order, into all: each '%', '{', '<', ... (of the classes) that no
 * placeholder holds, with the character after it when that is visible ASCII
 * and starts no placeholder ("%P", "%<", "%L" of GCC's diagnostics; a lone
 * "%" before a space; the "$" of "${1}" when "{1}" is the placeholder).  A
 * stray is spelled and enclosed as a placeholder is, so that the pieces
 * holding its mark cannot make a placeholder the source does not have
 * ("%" + "s"); it is not ordered. */
static tfm_status with_strays(const char *line, size_t len, unsigned classes,
                              const tfm_placeholders *ph, tfm_placeholders *all, tfm_error *err)
{
    bool mark[128];
    placeholder_marks(classes, mark);
    size_t next = 0; /* the next placeholder of ph */
    all->n = 0;
    for (size_t i = 0; i < len; i++) {
        tfm_placeholder item;
        if (next < ph->n && i == ph->items[next].start) {
            item = ph->items[next++];
        } else {
            const unsigned char ch = (unsigned char)line[i];
            if (ch >= 128 || !mark[ch]) continue;
            const bool two = i + 1 < len && line[i + 1] > ' ' && line[i + 1] < 127 &&
                             !(next < ph->n && ph->items[next].start == i + 1);
            item = (tfm_placeholder){.start = i, .len = two ? 2 : 1};
        }
        if (all->n == all->cap) {
            size_t cap = all->cap ? 2 * all->cap : 8;
            tfm_placeholder *items = realloc(all->items, cap * sizeof *items);
            if (!items) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            all->items = items;
            all->cap = cap;
        }
        all->items[all->n++] = item;
        i = item.start + item.len - 1;
    }
    return TFM_OK;
}

/* For a model whose vocabulary has no placeholder tokens but a SentencePiece
 * model (an imported OPUS-MT model): each placeholder occurrence is a
 * constraint, its text in the model's pieces (spelled after a space or glued
 * to the word before, as the source has it); each piece of those spellings
 * that holds a placeholder's mark ('%', '{', '<', ...) may appear exactly as
 * often as the spellings use it, and only inside a spelling (enclosed:
 * once produced, the spelling is finished); the source's stray marks ("%P",
 * a lone "%") are spelled so too (with_strays), and every other piece
 * holding a mark is banned.  The constraints of printf's conversions
 * without a position ("%s", "%d") are met in the source's order, and no
 * piece that would lengthen a placeholder ("%1" + "s") comes right after
 * its spelling.  So the output spells each placeholder as often as the
 * source, the conversions in their order, and makes no other out of
 * marks. */
static tfm_status add_placeholders_as_pieces(tfm_constraints *c, const tfm_vocab *v,
                                             const char *line, size_t len, unsigned classes,
                                             tfm_error *err)
{
    tfm_placeholders ph, all; /* the placeholders; with the stray marks */
    tfm_placeholders_init(&ph);
    tfm_placeholders_init(&all);
    tfm_spm_encoder *e = NULL;
    tfm_buf pieces;
    tfm_buf_init(&pieces);
    tfm_ids spelled; /* one placeholder's spelling */
    tfm_ids_init(&spelled);
    tfm_ids allowed, count; /* mark-holding pieces of the spellings, and how often */
    int ordered[TFM_MAX_CONSTRAINTS]; /* the constraints of printf's conversions */
    int n_ordered = 0;
    tfm_ids_init(&allowed);
    tfm_ids_init(&count);
    bool mark[128];
    placeholder_marks(classes, mark);
    tfm_status st = tfm_placeholders_scan(line, len, classes, &ph, err);
    if (st == TFM_OK) st = with_strays(line, len, classes, &ph, &all, err);
    if (st == TFM_OK) st = tfm_spm_encoder_create(tfm_vocab_spm(v), &e, err);
    for (size_t i = 0; i < all.n && st == TFM_OK; i++) {
        const tfm_placeholder *p = &all.items[i];
        /* one spelling, as the source has it: after a space (or first), or
         * glued to the word before; the other when that one cannot be had.
         * One spelling makes the limits exact: each mark-holding piece as
         * often as the placeholders use it, so none is spelled twice. */
        const bool after_space = p->start == 0 || line[p->start - 1] == ' ' ||
                                 line[p->start - 1] == '\t';
        bool spelled_ok = false;
        for (int k = 0; k < 2 && !spelled_ok; k++)
            spelled_ok = spell(e, v, line + p->start, p->len, k == 0 ? after_space : !after_space,
                               &pieces, &spelled);
        if (!spelled_ok) continue; /* no spelling in the model's pieces: nothing to steer */
        const int32_t *alt = spelled.data;
        const int n_ids = (int)spelled.len;
        if (c->n < TFM_MAX_CONSTRAINTS) {
            const int con = c->n;
            if (p->ordered) ordered[n_ordered++] = con;
            st = tfm_constraints_add(c, &alt, &n_ids, 1, err);
            if (st == TFM_OK)
                st = ban_lengthening(c, v, con, line + p->start, p->len, classes, err);
        }
        /* each mark-holding piece of the spelling, once per use, added to
         * the piece's limit */
        for (int j = 0; j < n_ids && st == TFM_OK; j++) {
            const int32_t id = alt[j];
            if (!has_mark(v, id, mark)) continue;
            size_t at = 0;
            while (at < allowed.len && allowed.data[at] != id) at++;
            if (at == allowed.len && (tfm_ids_push(&allowed, id) != TFM_OK ||
                                      tfm_ids_push(&count, 0) != TFM_OK))
                st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            else
                count.data[at]++;
        }
    }
    for (size_t k = 0; k < allowed.len && st == TFM_OK; k++) {
        st = tfm_constraints_limit(c, allowed.data[k], count.data[k], err);
        if (st == TFM_OK) st = tfm_constraints_enclose(c, allowed.data[k], err);
    }
    if (st == TFM_OK && n_ordered > 1)
        st = tfm_constraints_order_constraints(c, ordered, n_ordered, err);
    if (st == TFM_OK)
        st = ban_placeholder_marks(c, v, line, len, classes, &all, allowed.data,
                                   (int)allowed.len, err);
    tfm_spm_encoder_free(e);
    tfm_buf_free(&pieces);
    tfm_ids_free(&spelled);
    tfm_ids_free(&allowed);
    tfm_ids_free(&count);
    tfm_placeholders_free(&ph);
    tfm_placeholders_free(&all);
    return st;
}
