/* tfm/po.h - gettext PO catalogs: the strings to translate out of a
 * catalog, and their translations merged back in, every other byte kept.
 *
 * A catalog is read whole (tfm_po_parse) into entries that remember where
 * their lines are in the file; nothing is rebuilt from the entries, so
 * writing a catalog copies its bytes and replaces only the msgstr lines of
 * the entries translated (and adds their fuzzy mark).
 *
 *     tfm_po *po;
 *     if (tfm_po_parse(data, size, &po, &err) != TFM_OK) ...   // "line 12: ..."
 *     tfm_po_strings(po, false, &lines, NULL, &err); // one segment per line
 *     ... translate the lines ...
 *     tfm_po_merge_params p = tfm_po_merge_default_params();
 *     tfm_po_merge(po, &p, translated, translated_len, &out, &n_failed, &err);
 *     tfm_po_free(po);
 *
 * Segments.  A string to translate (a msgid, then a msgid_plural) is split
 * at each '\n' into segments, the text between newlines.  A segment with
 * something else than spaces, tabs, CR, VT and FF in it is printed, without
 * its leading and trailing whitespace, as one line; the others (empty, or
 * whitespace only) are not printed, and the translation keeps them as they
 * are.  Merging walks the same segments in the same order, takes a line of
 * the translations for each printed one, and puts the source segment's
 * leading and trailing whitespace and the newlines back around it.
 *
 * Which entries.  The header (the first entry with an empty msgid and no
 * msgctxt) never; entries with an empty msgid otherwise never (they are
 * kept as they are); obsolete "#~" entries never (to the reader they are
 * comments).  The others when untranslated (msgstr "" or every msgstr[N]
 * ""), or, with `all`, every one.
 *
 * Errors of the catalog are TFM_ERR_FORMAT (TFM_ERR_UTF8 for invalid UTF-8,
 * TFM_ERR_UNSUPPORTED for another charset than UTF-8) with a message that
 * begins "line N: ", N the 1-based line of the file. */
#ifndef TFM_PO_H
#define TFM_PO_H

#include "tfm/core.h"

/* A string of an entry, unescaped. */
typedef struct tfm_po_string {
    char *text;             /* NUL-terminated (no NUL inside), "" when empty */
    size_t len;
    size_t line;            /* 1-based line of its keyword */
} tfm_po_string;

/* One entry; the offsets are bytes of tfm_po.data. */
typedef struct tfm_po_entry {
    size_t line;            /* the line of its msgid */
    bool has_context;
    tfm_po_string context;  /* msgctxt, when has_context */
    tfm_po_string msgid;
    bool plural;
    tfm_po_string msgid_plural; /* when plural */
    tfm_po_string *msgstr;  /* msgstr, or msgstr[0 .. n_msgstr) */
    size_t n_msgstr;
    bool fuzzy;             /* its flags hold "fuzzy" */
    bool format;            /* its flags hold an "X-format" flag (not "no-X-format") */
    size_t flags_start, flags_end; /* its first "#," line, from the "#" (equal: none) */
    size_t fuzzy_at;        /* where a new "#, fuzzy" line goes: before its "#|" lines,
                               else before msgctxt or msgid */
    size_t msgstr_start, msgstr_end; /* its msgstr lines, replaced by a merge */
    bool crlf;              /* its msgid line ends in CR LF: so do the lines written */
} tfm_po_entry;

typedef struct tfm_po {
    char *data;             /* the file as read (owned) */
    size_t size;
    tfm_po_entry *entries;
    size_t n_entries;
    long header;            /* the index of the header entry, or -1 */
    int nplurals;           /* the header's Plural-Forms nplurals, or 0 (see below) */
    size_t plural_forms_line; /* the file line of Plural-Forms, 0 when it has none */
    char plural_forms_error[160]; /* why nplurals is 0, when it has a Plural-Forms line */
    bool charset_template;  /* the header says charset=CHARSET (a .pot): read as UTF-8 */
} tfm_po;

/* Parses the catalog data[0..size) (copied).  Refused, with the line: a
 * string without its closing quote, an unknown escape, a line that is
 * neither a keyword, a string nor a comment, keywords out of order, a file
 * that ends inside an entry, a NUL in a string, invalid UTF-8 (anywhere in
 * the file, and in the unescaped strings), a header charset other than
 * UTF-8 (or CHARSET).  Lines may end in LF or CR LF.  A Plural-Forms that
 * does not parse is not an error here: nplurals is 0 and
 * plural_forms_error says why (tfm_po_merge refuses plural entries then). */
tfm_status tfm_po_parse(const char *data, size_t size, tfm_po **out, tfm_error *err);
void tfm_po_free(tfm_po *po);

/* Whether entry i is one to translate (see "Which entries"). */
bool tfm_po_selected(const tfm_po *po, size_t i, bool all);

/* Appends to out the printed segments of the entries selected, in order,
 * each as a line ending in '\n'; *n_lines (may be NULL) their number. */
tfm_status tfm_po_strings(const tfm_po *po, bool all, tfm_buf *out, size_t *n_lines,
                          tfm_error *err);

/* Calls fn(ctx, seg, n) for each printed segment of s[0..len), trimmed. */
void tfm_po_segments(const char *s, size_t len, void (*fn)(void *ctx, const char *seg, size_t n),
                     void *ctx);

/* Appends to out the translation of src[0..len): src's segments with each
 * printed one replaced by the next line of lines[*next] (trimmed; *next is
 * advanced), and the rest as in src.  Returns false (out unchanged past its
 * old length) when a line is missing (*next reaches n_lines) or empty;
 * *next still moves past every line src takes. */
typedef struct tfm_po_line {
    const char *text;
    size_t len;
} tfm_po_line;
bool tfm_po_rebuild(const char *src, size_t len, const tfm_po_line *lines, size_t n_lines,
                    size_t *next, tfm_buf *out);

/* Appends to out the string s[0..len) as gettext's msgcat writes it after
 * keyword ("msgstr", "msgstr[1]"): escaped (\n \t \" \\ and the other C
 * escapes), on one line when it fits in 79 columns and holds no newline
 * but at its end, else as keyword "" and continuation lines broken after
 * each "\n" and, to fit, after spaces, hyphens and slashes; each line ends
 * in eol ("\n" or "\r\n"). */
tfm_status tfm_po_write_string(tfm_buf *out, const char *keyword, const char *s, size_t len,
                               const char *eol);

typedef struct tfm_po_merge_params {
    bool all;               /* translate every entry, not only untranslated ones */
    bool fuzzy;             /* mark the entries translated fuzzy (default) */
    /* Called for each selected entry that stays untranslated: line is its
     * msgid's, why says why ("the translations end at line 12", "line 7 of
     * the translations is empty", ...).  NULL: not told. */
    void (*failed)(void *ctx, size_t line, const char *why);
    void *ctx;
} tfm_po_merge_params;

tfm_po_merge_params tfm_po_merge_default_params(void);

/* Writes to out (appended) the catalog with the translations merged in:
 * translations[0..len) holds a line per line of tfm_po_strings (same
 * `all`).  Each selected entry gets its msgstr (a plural one msgstr[0] from
 * the msgid's translation and msgstr[1 .. nplurals-1] from the
 * msgid_plural's; with nplurals 1, msgstr[0] from the msgid_plural's) and,
 * with fuzzy, the fuzzy flag; every other byte of the catalog is kept.  An
 * entry whose translation is missing or unusable (an empty line, invalid
 * UTF-8, or, for an entry with a format flag, other placeholders than its
 * msgid's, printf conversions out of order) is left as it is, counted in
 * *n_failed and told to p->failed.  Errors: TFM_ERR_FORMAT ("line N: ...")
 * for a plural entry to translate without a usable Plural-Forms (N: the
 * header's Plural-Forms line, or the entry's); TFM_ERR_RANGE when
 * translations has more lines than the catalog takes; out is then
 * unspecified. */
tfm_status tfm_po_merge(const tfm_po *po, const tfm_po_merge_params *p, const char *translations,
                        size_t len, tfm_buf *out, size_t *n_failed, tfm_error *err);

#endif
