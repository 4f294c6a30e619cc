/* po_write.c - the strings of a PO catalog to translate, one segment per
 * line, and the catalog written back with their translations merged in
 * (tfm/po.h): every byte of the file kept but the msgstr lines of the
 * entries translated, which are written as msgcat writes them, and their
 * fuzzy mark.
 *
 * msgcat's layout (GNU gettext, write-po.c, wrap()): the string is escaped
 * and cut after each "\n" into portions; each portion is broken into lines
 * of at most 79 columns, the quotes included, at the places Unicode's line
 * breaking algorithm (UAX #14) allows, greedily (libunistring's
 * ulc_width_linebreaks).  When the first portion does not fit after the
 * keyword, or more portions follow, the keyword gets "" and the text
 * starts on the next line.  The break places here (may_break) are those
 * libunistring gives in text: after spaces (not after leading ones or an
 * opening bracket), after hyphens, slashes and other joining punctuation
 * before a letter, around wide (East Asian) characters; never before
 * closing punctuation, around quotes and no-break spaces, inside a
 * grapheme.  A character counts its display width (2 for wide ones, 0 for
 * marks and control characters).  Checked against gettext 0.21's msgcat on
 * Latin, Greek, Cyrillic and CJK text (tests/cli/test_po.sh); scripts with
 * rules of their own (Thai, Indic) and kana may break elsewhere than
 * msgcat's, into lines just as valid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tfm/po.h"
#include "tfm/text.h"

enum { PAGE_WIDTH = 79 };

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* s[0..n) without its leading and trailing blanks: *start, and the length. */
static size_t trim(const char *s, size_t n, size_t *start)
{
    size_t a = 0, b = n;
    while (a < b && is_blank(s[a])) a++;
    while (b > a && is_blank(s[b - 1])) b--;
    *start = a;
    return b - a;
}

void tfm_po_segments(const char *s, size_t len, void (*fn)(void *ctx, const char *seg, size_t n),
                     void *ctx)
{
    for (size_t pos = 0; pos <= len;) {
        const char *nl = memchr(s + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - s) : len, a;
        size_t n = trim(s + pos, end - pos, &a);
        if (n > 0) fn(ctx, s + pos + a, n);
        pos = end + 1;
    }
}

bool tfm_po_rebuild(const char *src, size_t len, const tfm_po_line *lines, size_t n_lines,
                    size_t *next, tfm_buf *out)
{
    size_t old = out->len;
    bool ok = true;
    for (size_t pos = 0; pos <= len;) {
        const char *nl = memchr(src + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - src) : len, a;
        size_t n = trim(src + pos, end - pos, &a);
        if (n == 0) { /* copied */
            ok = ok && tfm_buf_append(out, src + pos, end - pos) == TFM_OK;
        } else if (*next >= n_lines) {
            ok = false;
        } else {
            const tfm_po_line *t = &lines[(*next)++];
            size_t ta, tn = trim(t->text, t->len, &ta);
            ok = ok && tn > 0 && tfm_buf_append(out, src + pos, a) == TFM_OK &&
                 tfm_buf_append(out, t->text + ta, tn) == TFM_OK &&
                 tfm_buf_append(out, src + pos + a + n, end - pos - a - n) == TFM_OK;
        }
        if (nl) ok = ok && tfm_buf_putc(out, '\n') == TFM_OK;
        pos = end + 1;
    }
    if (!ok) out->len = old;
    if (out->data) out->data[out->len] = 0;
    return ok;
}

/* ---- escaping and wrapping as msgcat ------------------------------------------ */

/* The display width of a code point, as libunistring's uc_width: 0 for
 * control characters and non-spacing marks, 2 for wide East Asian ones. */
static int cp_width(int32_t c)
{
    if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c == 0xad || (c >= 0x1160 && c <= 0x11ff)) return 0;
    int w = utf8proc_charwidth(c);
    /* utf8proc gives spacing marks (Devanagari's vowel signs) no width */
    return w == 0 && utf8proc_category(c) == UTF8PROC_CATEGORY_MC ? 1 : w;
}

/* Characters no line may begin with: UAX #14's closing punctuation (CL,
 * CP), EX, IS, SY, and the ideographic full stops and commas. */
static bool closes(int32_t c)
{
    return (c < 0x80 && strchr("!),./:;?]}", (int)c) != NULL) || c == 0x3001 || c == 0x3002 ||
           c == 0xff0c || c == 0xff0e || c == 0xff1a || c == 0xff1b || c == 0xff01 ||
           c == 0xff1f || c == 0xff09 || c == 0x300d || c == 0x300f;
}

/* Characters no line may end with: opening punctuation (OP). */
static bool opens(int32_t c)
{
    return (c < 0x80 && strchr("([{", (int)c) != NULL) || c == 0xff08 || c == 0xff3b || c == 0xff5b ||
           (c >= 0x3008 && c <= 0x3010 && c % 2 == 0) || c == 0x3014;
}

/* Quotation marks (UAX #14's QU). */
static bool is_quote(int32_t c)
{
    return c == '"' || c == '\'' || c == 0xab || c == 0xbb || (c >= 0x2018 && c <= 0x201f);
}

/* Whether a line may break between code points a and b, where `before` is
 * the last code point before a that is not a space (-1: none): where
 * libunistring's u8_possible_linebreaks (gettext 0.21's) allows one. */
static bool may_break(int32_t before, int32_t a, int32_t b)
{
    bool ascii_b = b < 0x80;
    if (b == ' ' || closes(b) || opens(a)) return false;
    /* not after leading spaces, nor after OP SP* or before OP after QU SP* */
    if (a == ' ') return before >= 0 && !opens(before) && !(is_quote(before) && opens(b));
    /* not inside a grapheme: before a mark or an emoji modifier, after a joiner */
    if ((cp_width(b) == 0 && b >= 0x300) || (b >= 0x1f3fb && b <= 0x1f3ff) || a == 0x200d)
        return false;
    /* no-break spaces and hyphens (GL) */
    if (a == 0xa0 || a == 0x202f || a == 0x2007 || a == 0x2011 || b == 0xa0 || b == 0x202f ||
        b == 0x2007 || b == 0x2011)
        return false;
    if (b == 0x2010 || b == 0x2013 || b == 0x2026) return false; /* hyphens, ellipsis */
    if (is_quote(a) || is_quote(b)) return false;
    if (a == ')' || a == ']') return b == '(' || b == '[' || b == '{';
    if (a < 0x80 && strchr("$%+\\", (int)a)) return ascii_b && strchr("$%+\\", (int)b);
    /* after an exclamation or question mark, a bar, a brace, punctuation
     * that joins (IS, SY, HY) or a dash or ellipsis: before a letter */
    if ((a < 0x80 && strchr("!?|},-./:;", (int)a)) || a == 0x2010 || a == 0x2013 || a == 0x2014 ||
        a == 0x2026) {
        if (ascii_b && strchr("\"'-|", (int)b)) return false;
        if (b >= '0' && b <= '9') return strchr("!?|}", (int)a) != NULL;
        return !(a == '}' && ascii_b && strchr("$%+\\", (int)b));
    }
    if (cp_width(a) == 2) return !(ascii_b && strchr("\"'%-|", (int)b));
    if (cp_width(b) == 2) return !(a < 0x80 && strchr("([{\\$'\"", (int)a));
    return false;
}

/* One escaped portion p[0..n) (ending after its "\n", if any) broken
 * greedily for a line of `width` columns that starts at column `col`:
 * brk[i] set where a line break goes before p[i].  nobreak[i]: no break
 * before p[i] (the second byte of an escape).  Returns whether any break. */
static bool break_portion(const char *p, size_t n, const unsigned char *nobreak, int width,
                          int col, unsigned char *brk)
{
    memset(brk, 0, n);
    size_t last = (size_t)-1;
    int last_col = col, piece = 0;
    bool any = false;
    int32_t prev = -1, before = -1; /* the last code point, the last not a space before it */
    for (size_t i = 0; i < n;) {
        int32_t c;
        int k = tfm_utf8_scan((const unsigned char *)p + i, n - i, &c);
        if (k <= 0) { /* a stray byte: one column, no break around it */
            c = 0xfffd;
            k = k < 0 ? -k : 1;
        }
        if (prev >= 0 && !nobreak[i] && may_break(before, prev, c)) {
            if (last != (size_t)-1 && last_col + piece > width) {
                brk[last] = 1;
                any = true;
                last_col = 0;
            }
            last = i;
            last_col += piece;
            piece = 0;
        }
        piece += cp_width(c);
        if (prev != ' ') before = prev;
        prev = c;
        i += (size_t)k;
    }
    if (last != (size_t)-1 && last_col + piece > width) {
        brk[last] = 1;
        any = true;
    }
    return any;
}

/* s escaped as msgcat does into e, with nobreak marks. */
static tfm_status escape(const char *s, size_t len, tfm_buf *e, tfm_buf *marks)
{
    static const char from[] = "\a\b\f\n\r\t\v\\\"", to[] = "abfnrtv\\\"";
    for (size_t i = 0; i < len; i++) {
        const char *k = s[i] ? strchr(from, s[i]) : NULL;
        bool esc = k != NULL;
        if (esc && (tfm_buf_putc(e, '\\') != TFM_OK || tfm_buf_putc(marks, 0) != TFM_OK))
            return TFM_ERR_NOMEM;
        if (tfm_buf_putc(e, esc ? to[k - from] : s[i]) != TFM_OK ||
            tfm_buf_putc(marks, (char)esc) != TFM_OK)
            return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

tfm_status tfm_po_write_string(tfm_buf *out, const char *keyword, const char *s, size_t len,
                               const char *eol)
{
    tfm_buf e, marks, brk;
    tfm_buf_init(&e);
    tfm_buf_init(&marks);
    tfm_buf_init(&brk);
    tfm_status st = escape(s, len, &e, &marks);
    if (st == TFM_OK && tfm_buf_reserve(&brk, e.len + 1) != TFM_OK) st = TFM_ERR_NOMEM;
    const int width = PAGE_WIDTH - 2; /* the two quotes */
    bool first = true;
    if (st == TFM_OK && e.len == 0) st = tfm_buf_printf(out, "%s \"\"%s", keyword, eol);
    for (size_t pos = 0; st == TFM_OK && pos < e.len;) {
        /* the portion: up to and with the next escaped newline */
        size_t end = pos;
        while (end < e.len && !(e.data[end] == 'n' && marks.data[end])) end++;
        end = end < e.len ? end + 1 : end;
        unsigned char *nobreak = (unsigned char *)marks.data + pos, *b = (unsigned char *)brk.data;
        bool final_nl = end - pos >= 2 && e.data[end - 1] == 'n' && nobreak[end - pos - 1];
        if (final_nl) nobreak[end - pos - 2] = 1; /* no break before a final "\n" */
        if (first) {
            int col = (int)strlen(keyword) + 1;
            bool broken = break_portion(e.data + pos, end - pos, nobreak, width, col, b);
            if (end < e.len || col > width || broken) {
                st = tfm_buf_printf(out, "%s \"\"%s", keyword, eol);
                first = false;
            } else {
                st = tfm_buf_printf(out, "%s ", keyword);
            }
        }
        if (!first) break_portion(e.data + pos, end - pos, nobreak, width, 0, b);
        first = false;
        st = st == TFM_OK ? tfm_buf_putc(out, '"') : st;
        for (size_t i = pos; i < end && st == TFM_OK; i++) {
            if (b[i - pos]) st = tfm_buf_printf(out, "\"%s\"", eol);
            if (st == TFM_OK) st = tfm_buf_putc(out, e.data[i]);
        }
        if (st == TFM_OK) st = tfm_buf_printf(out, "\"%s", eol);
        pos = end;
    }
    tfm_buf_free(&e);
    tfm_buf_free(&marks);
    tfm_buf_free(&brk);
    return st == TFM_OK ? TFM_OK : TFM_ERR_NOMEM;
}

/* ---- the strings to translate ------------------------------------------------------ */

typedef struct strings_ctx {
    tfm_buf *out;
    size_t n;
    bool ok;
} strings_ctx;

static void add_line(void *ctx, const char *seg, size_t n)
{
    strings_ctx *c = ctx;
    c->ok = c->ok && tfm_buf_append(c->out, seg, n) == TFM_OK && tfm_buf_putc(c->out, '\n') == TFM_OK;
    c->n++;
}

static void count_line(void *ctx, const char *seg, size_t n)
{
    (*(size_t *)ctx)++;
}

tfm_status tfm_po_strings(const tfm_po *po, bool all, tfm_buf *out, size_t *n_lines,
                          tfm_error *err)
{
    strings_ctx c = {.out = out, .ok = true};
    for (size_t i = 0; i < po->n_entries; i++) {
        if (!tfm_po_selected(po, i, all)) continue;
        const tfm_po_entry *e = &po->entries[i];
        tfm_po_segments(e->msgid.text, e->msgid.len, add_line, &c);
        if (e->plural) tfm_po_segments(e->msgid_plural.text, e->msgid_plural.len, add_line, &c);
    }
    if (n_lines) *n_lines = c.n;
    return c.ok ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}

/* ---- merging ------------------------------------------------------------------------- */

tfm_po_merge_params tfm_po_merge_default_params(void)
{
    return (tfm_po_merge_params){.all = false, .fuzzy = true};
}

/* The lines of text[0..len) (a last one without '\n' too). */
static tfm_po_line *split_lines(const char *text, size_t len, size_t *n)
{
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += text[i] == '\n';
    if (len > 0 && text[len - 1] != '\n') count++;
    tfm_po_line *lines = malloc((count + 1) * sizeof *lines);
    if (!lines) return NULL;
    size_t k = 0;
    for (size_t pos = 0; pos < len; k++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        lines[k] = (tfm_po_line){text + pos, end - pos};
        pos = end + 1;
    }
    *n = count;
    return lines;
}

/* Why lines [from, from + count) cannot translate entry e, into why; or
 * false when they can.  A control character (a model's stray byte piece)
 * is unusable unless the msgid has it too. */
static bool lines_unusable(const tfm_po_entry *e, const tfm_po_line *lines, size_t n,
                           size_t from, size_t count, char *why, size_t size)
{
    for (size_t j = from; j < from + count; j++) {
        size_t a;
        if (j >= n) {
            snprintf(why, size, "not translated: the translations end at line %zu (it needs "
                     "lines %zu-%zu)", n, from + 1, from + count);
            return true;
        }
        if (trim(lines[j].text, lines[j].len, &a) == 0) {
            snprintf(why, size, "not translated: line %zu of the translations is empty", j + 1);
            return true;
        }
        size_t bad = 0;
        for (size_t i = 0; i < lines[j].len && !bad;) {
            int32_t cp;
            int k = tfm_utf8_scan((const unsigned char *)lines[j].text + i, lines[j].len - i, &cp);
            if (k <= 0 || cp == 0) bad = i + 1;
            bool control = k > 0 && (cp < 0x20 || cp == 0x7f) && !is_blank((char)cp);
            if (!bad && control && !memchr(e->msgid.text, cp, e->msgid.len) &&
                !(e->plural && memchr(e->msgid_plural.text, cp, e->msgid_plural.len))) {
                snprintf(why, size, "not translated: line %zu of the translations holds a "
                         "control character (U+%04X) that the msgid has not", j + 1, (unsigned)cp);
                return true;
            }
            i += k > 0 ? (size_t)k : 1;
        }
        if (bad) {
            snprintf(why, size, "not translated: line %zu of the translations is not valid UTF-8 "
                     "text (byte %zu)", j + 1, bad);
            return true;
        }
    }
    return false;
}

/* The placeholders of a string with a format flag: kinds a translation must keep. */
enum { FORMAT_CLASSES = TFM_PH_PRINTF | TFM_PH_PYTHON | TFM_PH_QT | TFM_PH_BRACES | TFM_PH_DOLLAR };

typedef struct ph_text {
    const char *s;
    size_t len;
} ph_text;

static int ph_cmp(const void *a, const void *b)
{
    const ph_text *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Whether t keeps the placeholders of s: the same texts as often, and the
 * printf conversions taken in order in the same order.  Else why says. */
static bool same_placeholders(const char *s, size_t sn, const char *t, size_t tn, char *why,
                              size_t size)
{
    tfm_placeholders ps, pt;
    tfm_placeholders_init(&ps);
    tfm_placeholders_init(&pt);
    bool same = tfm_placeholders_scan(s, sn, FORMAT_CLASSES, &ps, NULL) == TFM_OK &&
                tfm_placeholders_scan(t, tn, FORMAT_CLASSES, &pt, NULL) == TFM_OK &&
                ps.n == pt.n;
    ph_text *a = same ? calloc(2 * ps.n + 1, sizeof *a) : NULL;
    same = same && a;
    for (size_t i = 0, k = 0; same && i < ps.n; i++) { /* the ordered ones, in order */
        a[i] = (ph_text){s + ps.items[i].start, ps.items[i].len};
        a[ps.n + i] = (ph_text){t + pt.items[i].start, pt.items[i].len};
        if (!ps.items[i].ordered) continue;
        while (k < pt.n && !pt.items[k].ordered) k++;
        same = k < pt.n && ps.items[i].len == pt.items[k].len &&
               memcmp(s + ps.items[i].start, t + pt.items[k].start, ps.items[i].len) == 0;
        k++;
    }
    if (same) { /* all of them, as multisets */
        qsort(a, ps.n, sizeof *a, ph_cmp);
        qsort(a + ps.n, ps.n, sizeof *a, ph_cmp);
        for (size_t i = 0; same && i < ps.n; i++) same = ph_cmp(&a[i], &a[ps.n + i]) == 0;
    }
    if (!same) {
        int w = snprintf(why, size, "not translated: the translation does not keep the "
                         "placeholders of this format string (");
        for (size_t i = 0; i < ps.n && w > 0 && (size_t)w < size; i++)
            w += snprintf(why + w, size - (size_t)w, "%s%.*s", i ? " " : "",
                          (int)ps.items[i].len, s + ps.items[i].start);
        if (w > 0 && (size_t)w < size)
            snprintf(why + w, size - (size_t)w, "; printf's in this order)");
    }
    free(a);
    tfm_placeholders_free(&ps);
    tfm_placeholders_free(&pt);
    return same;
}

/* Appends the entry's new msgstr lines for its translations sing (of the
 * msgid) and plur (of the msgid_plural). */
static tfm_status write_msgstr(const tfm_po *po, const tfm_po_entry *e, const tfm_buf *sing,
                               const tfm_buf *plur, tfm_buf *out)
{
    const char *eol = e->crlf ? "\r\n" : "\n";
    if (!e->plural) return tfm_po_write_string(out, "msgstr", sing->data, sing->len, eol);
    for (int k = 0; k < po->nplurals; k++) {
        char kw[32];
        snprintf(kw, sizeof kw, "msgstr[%d]", k);
        const tfm_buf *t = k == 0 && po->nplurals > 1 ? sing : plur;
        if (tfm_po_write_string(out, kw, t->data, t->len, eol) != TFM_OK) return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}

/* Appends the translated entry e: the bytes from *pos to its msgstr with
 * the fuzzy mark added, its new msgstr lines; *pos moves past its old ones. */
static tfm_status write_entry(const tfm_po *po, const tfm_po_entry *e, bool fuzzy,
                              const tfm_buf *sing, const tfm_buf *plur, size_t *pos, tfm_buf *out)
{
    const char *d = po->data;
    tfm_status st = TFM_OK;
    if (fuzzy && !e->fuzzy && e->flags_end > e->flags_start) { /* "#, fuzzy, c-format" */
        size_t after = e->flags_start + 2, a;
        bool empty = trim(d + after, e->flags_end - after, &a) == 0;
        st = tfm_buf_append(out, d + *pos, after - *pos);
        if (st == TFM_OK) st = tfm_buf_append(out, empty ? " fuzzy" : " fuzzy,", empty ? 6 : 7);
        *pos = after;
    } else if (fuzzy && !e->fuzzy) {
        st = tfm_buf_append(out, d + *pos, e->fuzzy_at - *pos);
        if (st == TFM_OK) st = tfm_buf_printf(out, "#, fuzzy%s", e->crlf ? "\r\n" : "\n");
        *pos = e->fuzzy_at;
    }
    if (st == TFM_OK) st = tfm_buf_append(out, d + *pos, e->msgstr_start - *pos);
    if (st == TFM_OK) st = write_msgstr(po, e, sing, plur, out);
    *pos = e->msgstr_end;
    return st;
}

/* Refuses a plural entry to translate when the header has no nplurals. */
static tfm_status check_plural_forms(const tfm_po *po, bool all, tfm_error *err)
{
    if (po->nplurals > 0) return TFM_OK;
    for (size_t i = 0; i < po->n_entries; i++) {
        if (!po->entries[i].plural || !tfm_po_selected(po, i, all)) continue;
        if (po->plural_forms_line)
            return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: %s (the plural entry of line "
                                 "%zu needs it)", po->plural_forms_line, po->plural_forms_error,
                                 po->entries[i].line);
        return tfm_error_set(err, TFM_ERR_FORMAT, "line %zu: a plural entry, but the header has "
                             "no Plural-Forms (\"nplurals=N; plural=EXPRESSION;\") to say how "
                             "many forms", po->entries[i].line);
    }
    return TFM_OK;
}

/* Counts the printed segments of entry e. */
static size_t entry_lines(const tfm_po_entry *e)
{
    size_t n = 0;
    tfm_po_segments(e->msgid.text, e->msgid.len, count_line, &n);
    if (e->plural) tfm_po_segments(e->msgid_plural.text, e->msgid_plural.len, count_line, &n);
    return n;
}

/* Translates entry e from lines[*next ..]: true with sing and plur set, or
 * false with why. */
static bool translate_entry(const tfm_po_entry *e, const tfm_po_line *lines, size_t n,
                            size_t *next, tfm_buf *sing, tfm_buf *plur, char *why, size_t size)
{
    size_t count = entry_lines(e), from = *next;
    *next += count;
    tfm_buf_clear(sing);
    tfm_buf_clear(plur);
    if (lines_unusable(e, lines, n, from, count, why, size)) return false;
    size_t k = from;
    if (!tfm_po_rebuild(e->msgid.text, e->msgid.len, lines, n, &k, sing) ||
        (e->plural && !tfm_po_rebuild(e->msgid_plural.text, e->msgid_plural.len, lines, n, &k, plur)) ||
        tfm_buf_reserve(sing, 0) != TFM_OK || tfm_buf_reserve(plur, 0) != TFM_OK) {
        snprintf(why, size, "not translated: out of memory");
        return false;
    }
    if (e->format && (!same_placeholders(e->msgid.text, e->msgid.len, sing->data, sing->len, why, size) ||
                      (e->plural && !same_placeholders(e->msgid_plural.text, e->msgid_plural.len,
                                                       plur->data, plur->len, why, size))))
        return false;
    return true;
}

tfm_status tfm_po_merge(const tfm_po *po, const tfm_po_merge_params *p, const char *translations,
                        size_t len, tfm_buf *out, size_t *n_failed, tfm_error *err)
{
    *n_failed = 0;
    if (check_plural_forms(po, p->all, err) != TFM_OK) return TFM_ERR_FORMAT;
    size_t needed = 0, n = 0;
    for (size_t i = 0; i < po->n_entries; i++)
        if (tfm_po_selected(po, i, p->all)) needed += entry_lines(&po->entries[i]);
    tfm_po_line *lines = split_lines(translations, len, &n);
    if (!lines) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    if (n > needed) {
        free(lines);
        return tfm_error_set(err, TFM_ERR_RANGE, "has %zu lines, but the catalog has %zu strings "
                             "to translate (tokenize po-strings%s prints them)", n, needed,
                             p->all ? " --all" : "");
    }
    tfm_buf sing, plur;
    tfm_buf_init(&sing);
    tfm_buf_init(&plur);
    tfm_status st = TFM_OK;
    size_t pos = 0, next = 0;
    for (size_t i = 0; i < po->n_entries && st == TFM_OK; i++) {
        if (!tfm_po_selected(po, i, p->all)) continue;
        const tfm_po_entry *e = &po->entries[i];
        char why[400];
        if (!translate_entry(e, lines, n, &next, &sing, &plur, why, sizeof why)) {
            (*n_failed)++;
            if (p->failed) p->failed(p->ctx, e->line, why);
            continue;
        }
        st = write_entry(po, e, p->fuzzy, &sing, &plur, &pos, out);
    }
    if (st == TFM_OK) st = tfm_buf_append(out, po->data + pos, po->size - pos);
    if (st == TFM_OK) st = tfm_buf_reserve(out, 0);
    tfm_buf_free(&sing);
    tfm_buf_free(&plur);
    free(lines);
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
}
