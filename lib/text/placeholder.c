/* placeholder.c - finding the placeholders of a line (printf conversions,
 * %(name)s, %1, {name}, ${var}, XML tags, entities) and numbering them, so
 * that a translation carries them over whole as the reserved pieces
 * <ph1> .. <ph32> (tfm/text.h, "placeholders"; tokenize(1), PLACEHOLDERS).
 *
 * The scanning rules.  The line is read left to right; at each byte every
 * class asked for is tried, and the longest match wins (on equal lengths,
 * the first class in the order below).  A match never holds a tab or a
 * newline, and a line is never read past its end.
 *
 *   printf    '%' [digits '$'] [flags -+#0'] [width: digits or '*']
 *             ['.' precision: digits or '*'] [length hh h ll l L q j z Z t]
 *             conversion d i o u x X e E f F g G a A c s p n C S; or 'q' and
 *             a letter (GCC's %qs %qE %qD ...); or "%%".  No space flag:
 *             "50% of" is text.  A '%' at the end of the line, or followed
 *             by anything else, is text.  "%N$..." is positional; "%%" and
 *             positional ones are not "ordered", the others are.
 *   python    '%(' name ')' [flags] [width] ['.' precision] conversion
 *             d i o u x X e E f F g G c r s a; name: letters, digits, '_'.
 *   qt        '%' 1..99 (one or two digits, the first not 0), where printf
 *             does not match longer ("%1$s" is printf).
 *   braces    '{' [letters, digits, '_'] [':' format spec: printable ASCII
 *             but space and braces] '}'.  "{{" and "}}" are escapes: text,
 *             and the scan goes on after them.
 *   dollar    '${' identifier '}'.
 *   tags      '<' ['/'] letter [letters digits - : _] [attributes] ['/'] '>'
 *             where the attributes start with a space or '/', hold neither
 *             '<' nor '>' nor a control character, are valid UTF-8 and are at
 *             most 200 bytes.  Unbalanced tags are tags all the same, and so
 *             is a literal "<ph3>" in the text: nothing in a line can pass for
 *             a placeholder token.
 *   entities  '&' letter [letters digits] ';' (at most 32 letters),
 *             '&#' digits ';', '&#x' hex digits ';' (at most 8 digits).
 *
 * Every placeholder's text is valid UTF-8 without control characters, so a
 * text restored from it keeps the output valid.
 *
 * Numbering: the distinct texts of the line, sorted bytewise (memcmp, the
 * shorter first on a common prefix), are numbered 1, 2, ...; each
 * placeholder takes its text's number, or 0 (kept as text) above
 * TFM_PH_TOKENS.  The number depends only on the set of texts, so a line and
 * its translation number the same placeholders alike without seeing each
 * other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/encode_internal.h"
#include "tfm/text.h"

enum { TAG_ATTR_MAX = 200, ENTITY_NAME_MAX = 32, ENTITY_DIGITS_MAX = 8 };

static const struct {
    const char *name;
    unsigned bit;
} class_names[] = {
    {"printf", TFM_PH_PRINTF}, {"python", TFM_PH_PYTHON}, {"qt", TFM_PH_QT},
    {"braces", TFM_PH_BRACES}, {"dollar", TFM_PH_DOLLAR}, {"tags", TFM_PH_TAGS},
    {"entities", TFM_PH_ENTITIES},
};
enum { N_CLASSES = sizeof class_names / sizeof class_names[0] };

void tfm_placeholders_init(tfm_placeholders *p)
{
    p->items = NULL;
    p->n = p->cap = 0;
    p->n_distinct = 0;
}

void tfm_placeholders_free(tfm_placeholders *p)
{
    if (!p) return;
    free(p->items);
    tfm_placeholders_init(p);
}

tfm_status tfm_placeholder_classes_parse(const char *list, unsigned *classes, tfm_error *err)
{
    *classes = 0;
    if (strcmp(list, "all") == 0) {
        *classes = TFM_PH_ALL;
        return TFM_OK;
    }
    if (strcmp(list, "none") == 0) return TFM_OK;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int k = 0;
        while (k < N_CLASSES &&
               !(strlen(class_names[k].name) == len && memcmp(class_names[k].name, p, len) == 0))
            k++;
        if (k == N_CLASSES) {
            *classes = 0;
            return tfm_error_set(err, TFM_ERR_ARG,
                                 "unknown placeholder class '%.*s' (known: printf, python, qt, "
                                 "braces, dollar, tags, entities, or all, or none)",
                                 (int)(len > 64 ? 64 : len), p);
        }
        *classes |= class_names[k].bit;
        if (!end) break;
        p = end + 1;
    }
    return TFM_OK;
}

/* ---- the classes: each returns the length of its match at s[i..n), or 0 ---------- */

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_alnum(unsigned char c) { return is_digit(c) || is_alpha(c); }
static bool is_ident(unsigned char c) { return is_alnum(c) || c == '_'; }
static bool is_hex(unsigned char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

/* digits or '*' (printf's width and precision) from s[j]; returns the end. */
static size_t skip_width(const unsigned char *s, size_t n, size_t j)
{
    if (j < n && s[j] == '*') return j + 1;
    while (j < n && is_digit(s[j])) j++;
    return j;
}

/* The flags, width and precision of a conversion from s[j]; returns the end. */
static size_t skip_flags_width_precision(const unsigned char *s, size_t n, size_t j)
{
    while (j < n && s[j] && strchr("-+#0'", s[j])) j++;
    j = skip_width(s, n, j);
    if (j < n && s[j] == '.') j = skip_width(s, n, j + 1);
    return j;
}

/* printf; *positional tells "%N$" and "%%" apart from ordered conversions. */
static size_t match_printf(const unsigned char *s, size_t n, size_t i, bool *ordered)
{
    *ordered = false;
    size_t j = i + 1;
    if (j >= n) return 0;
    if (s[j] == '%') return 2;
    bool positional = false;
    size_t k = j;
    while (k < n && is_digit(s[k])) k++;
    if (k > j && k < n && s[k] == '$' && s[j] != '0') {
        positional = true;
        j = k + 1;
    }
    j = skip_flags_width_precision(s, n, j);
    if (j >= n) return 0;
    size_t end = 0;
    if (s[j] == 'q' && j + 1 < n && is_alpha(s[j + 1])) {
        end = j + 2; /* GCC's quoting: %qs %qE %qD ... */
    } else {
        if (s[j] == 'h' || s[j] == 'l') {
            j += (j + 1 < n && s[j + 1] == s[j]) ? 2 : 1;
        } else if (s[j] && strchr("LqjzZt", s[j])) {
            j++;
        }
        if (j < n && s[j] && strchr("diouxXeEfFgGaAcspnCS", s[j])) end = j + 1;
    }
    if (end == 0) return 0;
    *ordered = !positional;
    return end - i;
}

static size_t match_python(const unsigned char *s, size_t n, size_t i)
{
    if (i + 1 >= n || s[i + 1] != '(') return 0;
    size_t j = i + 2;
    while (j < n && is_ident(s[j])) j++;
    if (j == i + 2 || j >= n || s[j] != ')') return 0;
    j = skip_flags_width_precision(s, n, j + 1);
    if (j < n && s[j] && strchr("diouxXeEfFgGcrsa", s[j])) return j + 1 - i;
    return 0;
}

static size_t match_qt(const unsigned char *s, size_t n, size_t i)
{
    if (i + 1 >= n || s[i + 1] < '1' || s[i + 1] > '9') return 0;
    return i + 2 < n && is_digit(s[i + 2]) ? 3 : 2;
}

static size_t match_braces(const unsigned char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && is_ident(s[j])) j++;
    if (j < n && s[j] == ':') {
        j++;
        while (j < n && s[j] > ' ' && s[j] < 0x7F && s[j] != '{' && s[j] != '}') j++;
    }
    return j < n && s[j] == '}' ? j + 1 - i : 0;
}

static size_t match_dollar(const unsigned char *s, size_t n, size_t i)
{
    if (i + 2 >= n || s[i + 1] != '{' || !(is_alpha(s[i + 2]) || s[i + 2] == '_')) return 0;
    size_t j = i + 3;
    while (j < n && is_ident(s[j])) j++;
    return j < n && s[j] == '}' ? j + 1 - i : 0;
}

static size_t match_tag(const unsigned char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    if (j < n && s[j] == '/') j++;
    if (j >= n || !is_alpha(s[j])) return 0;
    while (j < n && (is_alnum(s[j]) || s[j] == '-' || s[j] == ':' || s[j] == '_')) j++;
    if (j < n && s[j] == '>') return j + 1 - i;
    if (j >= n || (s[j] != ' ' && s[j] != '/')) return 0;
    /* Attributes: up to the '>', valid UTF-8 without controls, bounded. */
    size_t start = j;
    while (j < n && s[j] != '>') {
        if (j - start >= TAG_ATTR_MAX || s[j] == '<' || s[j] < 0x20 || s[j] == 0x7F) return 0;
        if (s[j] < 0x80) {
            j++;
            continue;
        }
        int32_t cp;
        int k = tfm_utf8_scan(s + j, n - j, &cp);
        if (k <= 0 || (cp >= 0x80 && cp < 0xA0)) return 0; /* invalid, or a C1 control */
        j += (size_t)k;
    }
    if (j >= n || j - start > TAG_ATTR_MAX) return 0;
    return j + 1 - i;
}

static size_t match_entity(const unsigned char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    if (j < n && s[j] == '#') {
        j++;
        bool hex = j < n && (s[j] == 'x' || s[j] == 'X');
        if (hex) j++;
        size_t d = j;
        while (j < n && j - d < ENTITY_DIGITS_MAX && (hex ? is_hex(s[j]) : is_digit(s[j]))) j++;
        if (j == d) return 0;
    } else {
        if (j >= n || !is_alpha(s[j])) return 0;
        while (j < n && j - (i + 1) < ENTITY_NAME_MAX && is_alnum(s[j])) j++;
    }
    return j < n && s[j] == ';' ? j + 1 - i : 0;
}

/* The longest placeholder at s[i..n) among classes, or 0; its class in *kind. */
static size_t match_at(const unsigned char *s, size_t n, size_t i, unsigned classes,
                       unsigned *kind, bool *ordered)
{
    size_t best = 0, m;
    bool ord = false;
    *ordered = false;
#define TRY(bit, expr)                                    \
    if ((classes & (bit)) && (m = (expr)) > best) {       \
        best = m;                                         \
        *kind = (bit);                                    \
        *ordered = (bit) == TFM_PH_PRINTF ? ord : false;  \
    }
    switch (s[i]) {
    case '%':
        TRY(TFM_PH_PRINTF, match_printf(s, n, i, &ord));
        TRY(TFM_PH_PYTHON, match_python(s, n, i));
        TRY(TFM_PH_QT, match_qt(s, n, i));
        break;
    case '{': TRY(TFM_PH_BRACES, match_braces(s, n, i)); break;
    case '$': TRY(TFM_PH_DOLLAR, match_dollar(s, n, i)); break;
    case '<': TRY(TFM_PH_TAGS, match_tag(s, n, i)); break;
    case '&': TRY(TFM_PH_ENTITIES, match_entity(s, n, i)); break;
    default: break;
    }
#undef TRY
    return best;
}

/* ---- scanning and numbering ------------------------------------------------------ */

static int cmp_text(const char *a, size_t la, const char *b, size_t lb)
{
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c != 0) return c;
    return la < lb ? -1 : la > lb;
}

/* qsort has no context argument in C11: the line being numbered. */
typedef struct sort_item {
    const char *text;
    size_t len;
    size_t item;
} sort_item;

static int cmp_sort_item(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    int c = cmp_text(x->text, x->len, y->text, y->len);
    if (c != 0) return c;
    return x->item < y->item ? -1 : x->item > y->item;
}

static tfm_status number_placeholders(const char *line, tfm_placeholders *p, tfm_error *err)
{
    p->n_distinct = 0;
    if (p->n == 0) return TFM_OK;
    sort_item *order = malloc(p->n * sizeof *order);
    if (!order) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory numbering placeholders");
    for (size_t k = 0; k < p->n; k++)
        order[k] = (sort_item){line + p->items[k].start, p->items[k].len, k};
    qsort(order, p->n, sizeof *order, cmp_sort_item);
    int rank = 0;
    for (size_t k = 0; k < p->n; k++) {
        if (k == 0 || cmp_text(order[k - 1].text, order[k - 1].len, order[k].text,
                               order[k].len) != 0)
            rank++;
        p->items[order[k].item].index = rank <= TFM_PH_TOKENS ? rank : 0;
    }
    p->n_distinct = rank;
    free(order);
    return TFM_OK;
}

tfm_status tfm_placeholders_scan(const char *line, size_t len, unsigned classes,
                                 tfm_placeholders *out, tfm_error *err)
{
    out->n = 0;
    out->n_distinct = 0;
    const unsigned char *s = (const unsigned char *)line;
    for (size_t i = 0; i < len;) {
        if ((classes & TFM_PH_BRACES) && i + 1 < len &&
            ((s[i] == '{' && s[i + 1] == '{') || (s[i] == '}' && s[i + 1] == '}'))) {
            i += 2; /* an escaped brace: text */
            continue;
        }
        unsigned kind = 0;
        bool ordered;
        size_t m = match_at(s, len, i, classes, &kind, &ordered);
        if (m == 0) {
            i++;
            continue;
        }
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            tfm_placeholder *items = realloc(out->items, cap * sizeof *items);
            if (!items) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory scanning placeholders");
            out->items = items;
            out->cap = cap;
        }
        out->items[out->n++] =
            (tfm_placeholder){.start = i, .len = m, .kind = kind, .index = 0, .ordered = ordered};
        i += m;
    }
    return number_placeholders(line, out, err);
}

/* ---- tokens ---------------------------------------------------------------------- */

int tfm_placeholder_piece_index(const char *text, size_t len)
{
    if (len < 5 || len > 6 || memcmp(text, "<ph", 3) != 0 || text[len - 1] != '>') return 0;
    if (text[3] < '1' || text[3] > '9') return 0;
    int index = text[3] - '0';
    if (len == 6) {
        if (!is_digit((unsigned char)text[4])) return 0;
        index = index * 10 + (text[4] - '0');
    }
    return index <= TFM_PH_TOKENS ? index : 0;
}

int32_t tfm_vocab_placeholder_id(const tfm_vocab *v, int index)
{
    if (index < 1 || index > TFM_PH_TOKENS) return -1;
    char text[16];
    int len = snprintf(text, sizeof text, "<ph%d>", index);
    int32_t id = tfm_vocab_find(v, text, (size_t)len);
    return id >= 0 && tfm_vocab_type(v, id) == TFM_PIECE_USER ? id : -1;
}

tfm_status tfm_placeholders_replace(const char *line, size_t len, const tfm_placeholders *p,
                                    tfm_buf *out, tfm_error *err)
{
    tfm_buf_clear(out);
    size_t at = 0;
    tfm_status st = TFM_OK;
    for (size_t k = 0; k < p->n && st == TFM_OK; k++) {
        const tfm_placeholder *ph = &p->items[k];
        if (ph->index == 0) continue;
        st = tfm_buf_append(out, line + at, ph->start - at);
        if (st == TFM_OK) st = tfm_buf_printf(out, "<ph%d>", ph->index);
        at = ph->start + ph->len;
    }
    if (st == TFM_OK) st = tfm_buf_append(out, line + at, len - at);
    if (st != TFM_OK) return tfm_error_set(err, st, "out of memory replacing placeholders");
    return TFM_OK;
}

const char *tfm_placeholders_text(const char *line, const tfm_placeholders *p, int index,
                                  size_t *len)
{
    for (size_t k = 0; index > 0 && k < p->n; k++) {
        if (p->items[k].index == index) {
            if (len) *len = p->items[k].len;
            return line + p->items[k].start;
        }
    }
    if (len) *len = 0;
    return NULL;
}

tfm_status tfm_normalize_placeholders(const tfm_norm_params *norm, const char *line, size_t len,
                                      const tfm_placeholders *p, tfm_buf *out, size_t *at,
                                      size_t *n_repaired, tfm_error *err)
{
    size_t from = 0, repaired = 0, total = 0;
    tfm_status st = TFM_OK;
    for (size_t k = 0; k <= p->n && st == TFM_OK; k++) {
        const tfm_placeholder *ph = k < p->n ? &p->items[k] : NULL;
        if (ph && ph->index == 0) continue;
        size_t to = ph ? ph->start : len;
        st = tfm_normalize_append(norm, line + from, to - from, out, &repaired, err);
        total += repaired;
        if (st != TFM_OK) {
            /* Say where in the line, not in the piece of it. */
            if (st == TFM_ERR_UTF8) {
                tfm_buf scratch;
                tfm_buf_init(&scratch);
                tfm_normalize_append(norm, line, to, &scratch, NULL, err);
                tfm_buf_free(&scratch);
            }
            break;
        }
        if (!ph) break;
        if (at) {
            at[k] = out->len;
        } else {
            st = tfm_buf_printf(out, "<ph%d>", ph->index);
            if (st != TFM_OK) tfm_error_set(err, st, "out of memory normalising a line");
        }
        from = ph->start + ph->len;
    }
    if (n_repaired) *n_repaired = total;
    return st;
}
