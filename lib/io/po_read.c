/* po_read.c - reading a gettext PO catalog (tfm/po.h) into entries that
 * remember where their lines are, so that a merge rewrites only the msgstr
 * lines of the entries it translates and copies every other byte.
 *
 * The grammar (GNU gettext manual, "The Format of PO Files"), a line at a
 * time, each line ending in LF or CR LF:
 *
 *     [comments]  "# ...", "#. ...", "#: ...", "#, flags", "#| ...", "#~ ..."
 *     [msgctxt STRING]
 *     msgid STRING
 *     msgstr STRING                  or   msgid_plural STRING
 *                                         msgstr[0] STRING ... msgstr[N] STRING
 *
 * where STRING is one or more "..." (on the keyword's line, and on lines of
 * their own after it: continuations), joined.  Blank lines separate entries; obsolete "#~"
 * entries are comments to this reader, kept as they are.  The escapes are
 * C's, as gettext's lexer takes them: \n \t \r \a \b \f \v \\ \" \' \?,
 * octal \N, \NN, \NNN and hexadecimal \xH, \xHH.
 *
 * After the entries, the header (the first entry with an empty msgid and no
 * msgctxt) is read for its charset (UTF-8, or a template's CHARSET; any
 * other is refused) and its Plural-Forms (nplurals), and the file and every
 * unescaped string are checked to be valid UTF-8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tfm/core.h"
#include "tfm/po.h"

#define NONE ((size_t)-1)

/* Where the parser is in an entry: after which keyword. */
typedef enum { IN_NONE, IN_CONTEXT, IN_MSGID, IN_PLURAL, IN_MSGSTR } entry_state;

typedef struct parser {
    tfm_po *po;
    size_t cap;             /* of po->entries */
    size_t line;            /* 1-based number of the current line */
    size_t line_start, line_end; /* the current line's bytes, its '\n' included */
    entry_state state;
    tfm_po_entry cur;       /* the entry being read, when state != IN_NONE */
    size_t str_cap;         /* of cur.msgstr */
    tfm_po_string *str;     /* the string continuation lines go to, or NULL */
    tfm_buf buf;            /* its text so far */
    /* the comment block before the next keyword */
    size_t flags_start, flags_end; /* its first "#," line, or NONE */
    bool fuzzy, format;     /* what its "#," lines say */
    size_t previous_start;  /* the first of the "#|" lines just before, or NONE */
} parser;

static void string_free(tfm_po_string *s)
{
    free(s->text);
    s->text = NULL;
}

static void entry_free(tfm_po_entry *e)
{
    string_free(&e->context);
    string_free(&e->msgid);
    string_free(&e->msgid_plural);
    for (size_t i = 0; i < e->n_msgstr; i++) string_free(&e->msgstr[i]);
    free(e->msgstr);
}

void tfm_po_free(tfm_po *po)
{
    if (!po) return;
    for (size_t i = 0; i < po->n_entries; i++) entry_free(&po->entries[i]);
    free(po->entries);
    free(po->data);
    free(po);
}

static tfm_status nomem(tfm_error *err)
{
    return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* The array items (*cap elements of size bytes) with room for one more
 * after its n: doubled when full, from `first`; NULL when memory runs out
 * (items is then as it was). */
static void *grow(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap) return items;
    size_t want = *cap ? 2 * *cap : first;
    void *p = realloc(items, want * size);
    if (p) *cap = want;
    return p;
}

/* Ends the string being read: its text moves from the buffer to it. */
static tfm_status finish_string(parser *ps, tfm_error *err)
{
    if (!ps->str) return TFM_OK;
    if (!ps->buf.data && tfm_buf_reserve(&ps->buf, 0) != TFM_OK) return nomem(err);
    ps->buf.data[ps->buf.len] = 0;
    ps->str->text = ps->buf.data;
    ps->str->len = ps->buf.len;
    tfm_buf_init(&ps->buf);
    ps->str = NULL;
    return TFM_OK;
}

static void reset_comments(parser *ps)
{
    ps->flags_start = ps->flags_end = ps->previous_start = NONE;
    ps->fuzzy = ps->format = false;
}

/* Ends the entry being read (its msgstr read) and adds it to the catalog. */
static tfm_status finish_entry(parser *ps, tfm_error *err)
{
    if (finish_string(ps, err) != TFM_OK) return err ? err->status : TFM_ERR_NOMEM;
    tfm_po *po = ps->po;
    tfm_po_entry *entries = grow(po->entries, &ps->cap, po->n_entries, sizeof *entries, 64);
    if (!entries) return nomem(err);
    po->entries = entries;
    po->entries[po->n_entries++] = ps->cur;
    memset(&ps->cur, 0, sizeof ps->cur);
    ps->str_cap = 0;
    ps->state = IN_NONE;
    return TFM_OK;
}

/* A "#," line's flags: fuzzy, and the X-format ones. */
static void read_flags(parser *ps, const char *s, size_t n)
{
    for (size_t i = 2; i < n;) {
        while (i < n && (s[i] == ',' || s[i] == ' ' || s[i] == '\t')) i++;
        size_t w = i;
        while (i < n && s[i] != ',' && s[i] != ' ' && s[i] != '\t') i++;
        size_t len = i - w;
        if (len == 5 && memcmp(s + w, "fuzzy", 5) == 0) ps->fuzzy = true;
        if (len > 7 && memcmp(s + i - 7, "-format", 7) == 0 && memcmp(s + w, "no-", 3) != 0)
            ps->format = true;
    }
}

/* A comment line s[0..n) (it starts with '#'). */
static tfm_status read_comment(parser *ps, const char *s, size_t n, tfm_error *err)
{
    if (ps->state != IN_NONE && ps->state != IN_MSGSTR)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a comment inside the entry of "
                             "line %zu, before its msgstr", ps->line, ps->cur.line ? ps->cur.line
                             : ps->cur.context.line);
    if (ps->state == IN_MSGSTR && finish_entry(ps, err) != TFM_OK) return err->status;
    char kind = n > 1 ? s[1] : ' ';
    if (kind == '~') { /* an obsolete entry: its comments are its own */
        reset_comments(ps);
        return TFM_OK;
    }
    if (kind == ',') {
        if (ps->flags_start == NONE) {
            ps->flags_start = (size_t)(s - ps->po->data); /* its "#," (after blanks) */
            ps->flags_end = ps->line_end;
        }
        read_flags(ps, s, n);
    }
    if (kind == '|' && ps->previous_start == NONE) ps->previous_start = ps->line_start;
    if (kind != '|') ps->previous_start = NONE;
    return TFM_OK;
}

/* The quoted strings of s[0..n) (s[0] is '"'): their text unescaped onto
 * ps->buf, nothing but blanks after them. */
static tfm_status read_quoted(parser *ps, const char *s, size_t n, tfm_error *err)
{
    size_t i = 1;
    for (;;) {
        if (i >= n)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: the string has no closing "
                                 "quote", ps->line);
        unsigned char c = (unsigned char)s[i++];
        if (c == '"') { /* the end, or another string on the line: "a" "b" is "ab" */
            while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
            if (i < n && s[i] == '"') {
                i++;
                continue;
            }
            break;
        }
        if (c == '\\') {
            if (i >= n)
                return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: the string has no "
                                     "closing quote", ps->line);
            char e = s[i++];
            static const char from[] = "ntrabfv\\\"'?", to[] = "\n\t\r\a\b\f\v\\\"'?";
            const char *k = strchr(from, e);
            int v = -1;
            if (k && e) {
                v = (unsigned char)to[k - from];
            } else if (e >= '0' && e <= '7') {
                v = e - '0';
                for (int d = 0; d < 2 && i < n && s[i] >= '0' && s[i] <= '7'; d++)
                    v = v * 8 + (s[i++] - '0');
            } else if (e == 'x' && i < n && tfm_hex_digit(s[i]) >= 0) {
                v = tfm_hex_digit(s[i++]);
                if (i < n && tfm_hex_digit(s[i]) >= 0) v = v * 16 + tfm_hex_digit(s[i++]);
            } else {
                return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: unknown escape '\\%c'",
                                     ps->line, e >= 0x20 && e < 0x7f ? e : '?');
            }
            c = (unsigned char)(v & 0xff);
        }
        if (c == 0)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a NUL character in a string",
                                 ps->line);
        if (tfm_buf_putc(&ps->buf, (char)c) != TFM_OK) return nomem(err);
    }
    if (i < n)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: text after the closing quote",
                             ps->line);
    return TFM_OK;
}

/* Starts the string of a keyword; its text follows on the line. */
static tfm_status begin_string(parser *ps, tfm_po_string *str, const char *s, size_t n,
                               tfm_error *err)
{
    if (finish_string(ps, err) != TFM_OK) return err->status;
    str->line = ps->line;
    ps->str = str;
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i == 0 || i >= n || s[i] != '"')
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a string (\"...\") expected after "
                             "the keyword", ps->line);
    return read_quoted(ps, s + i, n - i, err);
}

/* Starts an entry at its first keyword (msgctxt or msgid). */
static void begin_entry(parser *ps)
{
    memset(&ps->cur, 0, sizeof ps->cur);
    ps->cur.flags_start = ps->cur.flags_end = ps->line_start;
    if (ps->flags_start != NONE) {
        ps->cur.flags_start = ps->flags_start;
        ps->cur.flags_end = ps->flags_end;
    }
    ps->cur.fuzzy = ps->fuzzy;
    ps->cur.format = ps->format;
    ps->cur.fuzzy_at = ps->previous_start != NONE ? ps->previous_start : ps->line_start;
    reset_comments(ps);
}

/* The msgstr (index -1) or msgstr[index] keyword. */
static tfm_status read_msgstr(parser *ps, long index, const char *s, size_t n, tfm_error *err)
{
    tfm_po_entry *e = &ps->cur;
    bool ok = index < 0 ? ps->state == IN_MSGID
                        : (index == 0 && ps->state == IN_PLURAL) ||
                              (ps->state == IN_MSGSTR && e->plural && (size_t)index == e->n_msgstr);
    if (!ok)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: %s out of place (expected %s)",
                             ps->line, index < 0 ? "msgstr" : "msgstr[N]",
                             ps->state == IN_NONE || ps->state == IN_CONTEXT ? "msgid"
                             : ps->state == IN_MSGID ? "msgid_plural or msgstr"
                             : ps->state == IN_PLURAL ? "msgstr[0]" : "the next entry");
    if (e->n_msgstr == 0) e->msgstr_start = ps->line_start;
    /* the string before may be one of msgstr[], which moves */
    if (finish_string(ps, err) != TFM_OK) return err->status;
    tfm_po_string *msgstr = grow(e->msgstr, &ps->str_cap, e->n_msgstr, sizeof *msgstr, 2);
    if (!msgstr) return nomem(err);
    e->msgstr = msgstr;
    tfm_po_string *str = &e->msgstr[e->n_msgstr++];
    memset(str, 0, sizeof *str);
    ps->state = IN_MSGSTR;
    return begin_string(ps, str, s, n, err);
}

/* A keyword line s[0..n). */
static tfm_status read_keyword(parser *ps, const char *s, size_t n, tfm_error *err)
{
    size_t w = 0;
    while (w < n && s[w] != ' ' && s[w] != '\t' && s[w] != '"') w++;
    const char *rest = s + w;
    size_t rest_n = n - w;
    bool is_ctxt = w == 7 && memcmp(s, "msgctxt", 7) == 0;
    bool is_msgid = w == 5 && memcmp(s, "msgid", 5) == 0;
    if ((is_ctxt || is_msgid) && ps->state == IN_MSGSTR && finish_entry(ps, err) != TFM_OK)
        return err->status;
    if (is_ctxt || (is_msgid && ps->state == IN_NONE)) {
        if (ps->state != IN_NONE)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: msgctxt out of place (inside "
                                 "the entry of line %zu)", ps->line,
                                 ps->cur.line ? ps->cur.line : ps->cur.context.line);
        begin_entry(ps);
    }
    if (is_ctxt) {
        ps->state = IN_CONTEXT;
        ps->cur.has_context = true;
        return begin_string(ps, &ps->cur.context, rest, rest_n, err);
    }
    if (is_msgid) {
        if (ps->state != IN_NONE && ps->state != IN_CONTEXT)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: msgid out of place (the msgid "
                                 "of line %zu has no msgstr)", ps->line, ps->cur.line);
        ps->state = IN_MSGID;
        ps->cur.line = ps->line;
        ps->cur.crlf = ps->line_end - ps->line_start >= 2 &&
                       ps->po->data[ps->line_end - 2] == '\r' &&
                       ps->po->data[ps->line_end - 1] == '\n';
        return begin_string(ps, &ps->cur.msgid, rest, rest_n, err);
    }
    if (w == 12 && memcmp(s, "msgid_plural", 12) == 0) {
        if (ps->state != IN_MSGID)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: msgid_plural out of place "
                                 "(not after a msgid)", ps->line);
        ps->state = IN_PLURAL;
        ps->cur.plural = true;
        return begin_string(ps, &ps->cur.msgid_plural, rest, rest_n, err);
    }
    if (w == 6 && memcmp(s, "msgstr", 6) == 0) {
        if (ps->cur.plural && ps->state != IN_NONE)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: msgstr in a plural entry "
                                 "(msgstr[0], msgstr[1], ... expected)", ps->line);
        return read_msgstr(ps, -1, rest, rest_n, err);
    }
    if (w > 8 && memcmp(s, "msgstr[", 7) == 0 && s[w - 1] == ']') {
        long index = 0;
        for (size_t i = 7; i + 1 < w; i++) {
            if (s[i] < '0' || s[i] > '9' || index > 1000)
                return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a bad msgstr index",
                                     ps->line);
            index = index * 10 + (s[i] - '0');
        }
        return read_msgstr(ps, index, rest, rest_n, err);
    }
    return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: neither a keyword (msgctxt, msgid, "
                         "msgid_plural, msgstr), a string nor a comment", ps->line);
}

/* One line s[0..n) without its line end. */
static tfm_status read_line(parser *ps, const char *s, size_t n, tfm_error *err)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i == n) { /* blank: the comments before belong to no entry */
        reset_comments(ps);
        return TFM_OK;
    }
    if (s[i] == '#') return read_comment(ps, s + i, n - i, err);
    tfm_status st;
    if (s[i] == '"') {
        if (!ps->str)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a string continues, but no "
                                 "keyword is before it", ps->line);
        st = read_quoted(ps, s + i, n - i, err);
    } else {
        st = read_keyword(ps, s + i, n - i, err);
    }
    if (st == TFM_OK && ps->state == IN_MSGSTR) ps->cur.msgstr_end = ps->line_end;
    return st;
}

/* The 1-based line of the first occurrence of needle in data[from..to),
 * or the line of from when none. */
static size_t line_of(const tfm_po *po, size_t from, size_t to, const char *needle)
{
    size_t n = strlen(needle), at = from;
    for (size_t i = from; i + n <= to; i++)
        if (memcmp(po->data + i, needle, n) == 0) {
            at = i;
            break;
        }
    size_t line = 1;
    for (size_t i = 0; i < at; i++) line += po->data[i] == '\n';
    return line;
}

/* The value of the header field name ("charset=", "Plural-Forms:") in the
 * header's text, *len bytes up to the end of its line, or NULL. */
static const char *header_field(const char *h, const char *name, size_t *len)
{
    const char *p = strstr(h, name);
    if (!p) return NULL;
    p += strlen(name);
    while (*p == ' ') p++;
    *len = strcspn(p, "\n");
    return p;
}

/* The header's charset: UTF-8, or CHARSET (a template's). */
static tfm_status check_charset(tfm_po *po, const tfm_po_entry *h, tfm_error *err)
{
    size_t n;
    const char *cs = header_field(h->msgstr[0].text, "charset=", &n);
    if (!cs) return TFM_OK;
    n = strcspn(cs, " \t;\n");
    if ((n == 5 && strncasecmp(cs, "utf-8", 5) == 0) || (n == 4 && strncasecmp(cs, "utf8", 4) == 0))
        return TFM_OK;
    if (n == 7 && memcmp(cs, "CHARSET", 7) == 0) {
        po->charset_template = true;
        return TFM_OK;
    }
    return tfm_error_set(err, TFM_ERR_UNSUPPORTED, "line %zu: the header's charset is %.*s: "
                         "only UTF-8 catalogs are read (msgconv --to-code=UTF-8 converts one)",
                         line_of(po, h->msgstr_start, h->msgstr_end, "charset="), (int)(n > 40 ? 40 : n), cs);
}

/* The header's Plural-Forms: "nplurals=N; plural=EXPRESSION;". */
static void read_plural_forms(tfm_po *po, const tfm_po_entry *h)
{
    size_t n;
    const char *pf = header_field(h->msgstr[0].text, "Plural-Forms:", &n);
    if (!pf) return;
    po->plural_forms_line = line_of(po, h->msgstr_start, h->msgstr_end, "Plural-Forms:");
    const char *np = strstr(pf, "nplurals=");
    const char *pl = strstr(pf, "plural=");
    long v = 0;
    const char *d = np ? np + 9 : NULL;
    for (; d && *d >= '0' && *d <= '9' && v <= 1000; d++) v = v * 10 + (*d - '0');
    const char *why = NULL;
    if (!np || np >= pf + n) why = "it has no nplurals=N";
    else if (d == np + 9) why = "nplurals is not a number (a template's INTEGER: set the target "
                                "language's, as msginit does)";
    else if (v < 1 || v > 100) why = "nplurals is not between 1 and 100";
    else if (!pl || pl >= pf + n || pl[7] == ';' || pl[7] == '\n' || pl[7] == 0)
        why = "it has no plural=EXPRESSION";
    else if (strncmp(pl + 7, "EXPRESSION", 10) == 0)
        why = "plural= is a template's EXPRESSION (set the target language's, as msginit does)";
    if (why) {
        snprintf(po->plural_forms_error, sizeof po->plural_forms_error,
                 "the header's Plural-Forms is broken: %s", why);
        return;
    }
    po->nplurals = (int)v;
}

/* Invalid UTF-8 in the file (a line) or in an unescaped string. */
static tfm_status check_utf8(const tfm_po *po, tfm_error *err)
{
    size_t line = 1;
    for (size_t i = 0; i < po->size;) {
        int32_t cp;
        int k = tfm_utf8_scan((const unsigned char *)po->data + i, po->size - i, &cp);
        if (k <= 0)
            return tfm_error_set(err, TFM_ERR_UTF8, "line %zu: invalid UTF-8 (byte 0x%02x)", line,
                                 (unsigned char)po->data[i]);
        line += po->data[i] == '\n';
        i += (size_t)k;
    }
    for (size_t e = 0; e < po->n_entries; e++) {
        const tfm_po_entry *en = &po->entries[e];
        const tfm_po_string *s[3] = {&en->context, &en->msgid, &en->msgid_plural};
        for (size_t k = 0; k < 3 + en->n_msgstr; k++) {
            const tfm_po_string *str = k < 3 ? s[k] : &en->msgstr[k - 3];
            for (size_t i = 0; i < str->len;) {
                int32_t cp;
                int m = tfm_utf8_scan((const unsigned char *)str->text + i, str->len - i, &cp);
                if (m <= 0)
                    return tfm_error_set(err, TFM_ERR_UTF8, "line %zu: invalid UTF-8 in the "
                                         "string (an escape gives byte 0x%02x)", str->line,
                                         (unsigned char)str->text[i]);
                i += (size_t)m;
            }
        }
    }
    return TFM_OK;
}

/* The entries, then the checks of the whole. */
static tfm_status parse(parser *ps, tfm_error *err)
{
    tfm_po *po = ps->po;
    for (size_t pos = 0; pos < po->size; ps->line++) {
        const char *nl = memchr(po->data + pos, '\n', po->size - pos);
        size_t end = nl ? (size_t)(nl - po->data) : po->size;
        ps->line_start = pos;
        ps->line_end = nl ? end + 1 : end;
        size_t n = end - pos;
        if (n > 0 && po->data[end - 1] == '\r') n--;
        if (read_line(ps, po->data + pos, n, err) != TFM_OK) return err ? err->status : TFM_ERR_FORMAT;
        pos = ps->line_end;
    }
    if (ps->state == IN_MSGSTR && finish_entry(ps, err) != TFM_OK) return err->status;
    if (ps->state != IN_NONE)
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: the file ends inside the entry of "
                             "line %zu (its msgstr is missing)", ps->line - 1,
                             ps->cur.line ? ps->cur.line : ps->cur.context.line);
    po->header = -1;
    for (size_t i = 0; i < po->n_entries && po->header < 0; i++)
        if (po->entries[i].msgid.len == 0 && !po->entries[i].has_context) po->header = (long)i;
    if (po->header >= 0) {
        const tfm_po_entry *h = &po->entries[po->header];
        if (h->n_msgstr > 0 && check_charset(po, h, err) != TFM_OK) return err->status;
        if (h->n_msgstr > 0) read_plural_forms(po, h);
    }
    return check_utf8(po, err);
}

tfm_status tfm_po_parse(const char *data, size_t size, tfm_po **out, tfm_error *err)
{
    *out = NULL;
    tfm_error local;
    if (!err) err = &local; /* the parser reads err->status back */
    parser ps = {.line = 1};
    tfm_buf_init(&ps.buf);
    reset_comments(&ps);
    ps.po = calloc(1, sizeof *ps.po);
    if (!ps.po) return nomem(err);
    ps.po->data = malloc(size + 1);
    if (!ps.po->data) {
        free(ps.po);
        return nomem(err);
    }
    memcpy(ps.po->data, data, size);
    ps.po->data[size] = 0;
    ps.po->size = size;
    tfm_status st = parse(&ps, err);
    if (ps.str) finish_string(&ps, NULL);
    tfm_buf_free(&ps.buf);
    if (st != TFM_OK) {
        entry_free(&ps.cur);
        tfm_po_free(ps.po);
        return st;
    }
    *out = ps.po;
    return TFM_OK;
}

bool tfm_po_selected(const tfm_po *po, size_t i, bool all)
{
    const tfm_po_entry *e = &po->entries[i];
    if (e->msgid.len == 0) return false; /* the header, or an entry with nothing to translate */
    if (all) return true;
    for (size_t k = 0; k < e->n_msgstr; k++)
        if (e->msgstr[k].len > 0) return false;
    return true;
}
