/* fuzz_po.c - libFuzzer target for PO catalogs (tfm/po.h): parses the input
 * and, when it is a catalog, checks that
 *   - nothing reads out of bounds, leaks or overflows (the sanitizers watch),
 *   - a failure carries its status and a message that names a line,
 *   - the entries keep their promises: strings NUL-terminated at their
 *     length with no NUL inside, lines from 1, the byte spans in order and
 *     inside the file,
 *   - a merge that translates nothing writes the same bytes (when no entry
 *     to translate is blank, which a merge copies),
 *   - its strings merged back as their own translations (every entry, each
 *     marked fuzzy) give a catalog that parses, with the same entries, each
 *     msgstr the text of its msgid (msgid_plural for the plural forms), and
 *     the same strings to translate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/po.h"

#define FUZZ_TARGET "fuzz_po"
#include "require.h"

static void check_string(const tfm_po_string *s)
{
    require(s->text != NULL && s->text[s->len] == 0 && strlen(s->text) == s->len,
            "a string not NUL-terminated at its length");
    require(s->line >= 1, "a string's line from 0");
}

static bool same(const tfm_po_string *a, const tfm_po_string *b)
{
    return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

static void check_entries(const tfm_po *po)
{
    for (size_t i = 0; i < po->n_entries; i++) {
        const tfm_po_entry *e = &po->entries[i];
        check_string(&e->msgid);
        if (e->has_context) check_string(&e->context);
        if (e->plural) check_string(&e->msgid_plural);
        require(e->n_msgstr >= 1, "an entry without msgstr");
        for (size_t k = 0; k < e->n_msgstr; k++) check_string(&e->msgstr[k]);
        require(e->flags_start <= e->flags_end && e->flags_end <= e->msgstr_start &&
                    e->fuzzy_at <= e->msgstr_start && e->msgstr_start < e->msgstr_end &&
                    e->msgstr_end <= po->size,
                "byte spans out of order");
        require(i == 0 || po->entries[i - 1].msgstr_end <= e->fuzzy_at, "entries overlap");
    }
}

/* Whether an entry to translate has no line to take (blank: copied). */
static bool has_blank(const tfm_po *po, bool all)
{
    for (size_t i = 0; i < po->n_entries; i++) {
        if (!tfm_po_selected(po, i, all)) continue;
        const tfm_po_entry *e = &po->entries[i];
        tfm_buf b;
        tfm_buf_init(&b);
        size_t n = 0;
        tfm_po tmp = *po;
        tmp.entries = (tfm_po_entry *)e;
        tmp.n_entries = 1;
        tfm_po_strings(&tmp, all, &b, &n, NULL);
        tfm_buf_free(&b);
        if (n == 0) return true;
    }
    return false;
}

/* The catalog merged with its own strings: every msgstr its msgid's text. */
static void check_identity(const tfm_po *po, const tfm_buf *lines)
{
    tfm_po_merge_params p = tfm_po_merge_default_params();
    p.all = true;
    tfm_buf out;
    tfm_buf_init(&out);
    size_t n_failed;
    tfm_error err;
    tfm_status st = tfm_po_merge(po, &p, lines->data ? lines->data : "", lines->len, &out,
                                 &n_failed, &err);
    if (st == TFM_ERR_FORMAT) { /* a plural entry without nplurals */
        require(po->nplurals == 0 && strncmp(err.msg, "line ", 5) == 0, "a merge refused for no reason");
        tfm_buf_free(&out);
        return;
    }
    require(st == TFM_OK && n_failed == 0, "its own strings do not translate it");
    tfm_po *back = NULL;
    st = tfm_po_parse(out.data, out.len, &back, &err);
    if (st != TFM_OK) fprintf(stderr, "fuzz_po: %s\n", err.msg);
    require(st == TFM_OK, "the merged catalog does not parse");
    require(back->n_entries == po->n_entries, "the merged catalog has other entries");
    check_entries(back);
    for (size_t i = 0; i < po->n_entries; i++) {
        const tfm_po_entry *a = &po->entries[i], *b = &back->entries[i];
        require(same(&a->msgid, &b->msgid) && a->plural == b->plural &&
                    (!a->plural || same(&a->msgid_plural, &b->msgid_plural)) &&
                    a->has_context == b->has_context && (!a->has_context || same(&a->context, &b->context)),
                "a msgid changed");
        if (!tfm_po_selected(po, i, true)) {
            require(a->n_msgstr == b->n_msgstr, "an entry not translated changed");
            for (size_t k = 0; k < a->n_msgstr; k++)
                require(same(&a->msgstr[k], &b->msgstr[k]), "an entry not translated changed");
            continue;
        }
        require(b->fuzzy, "an entry translated is not fuzzy");
        if (!a->plural) {
            require(b->n_msgstr == 1 && same(&b->msgstr[0], &a->msgid), "a msgstr not its msgid");
            continue;
        }
        require(b->n_msgstr == (size_t)po->nplurals, "not every plural form");
        for (size_t k = 0; k < b->n_msgstr; k++)
            require(same(&b->msgstr[k], k == 0 && po->nplurals > 1 ? &a->msgid : &a->msgid_plural),
                    "a plural form not its msgid's");
    }
    tfm_buf again;
    tfm_buf_init(&again);
    tfm_po_strings(back, true, &again, NULL, NULL);
    require(again.len == lines->len && (again.len == 0 || memcmp(again.data, lines->data, again.len) == 0),
            "the merged catalog has other strings");
    tfm_buf_free(&again);
    tfm_po_free(back);
    tfm_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    tfm_po *po = NULL;
    tfm_error err;
    tfm_status st = tfm_po_parse((const char *)data, size, &po, &err);
    if (st != TFM_OK) {
        require(po == NULL, "a failed parse returned a catalog");
        require(err.status == st && strncmp(err.msg, "line ", 5) == 0, "a message that names no line");
        return 0;
    }
    check_entries(po);

    /* nothing translated: the same bytes */
    tfm_po_merge_params p = tfm_po_merge_default_params();
    tfm_buf out;
    tfm_buf_init(&out);
    size_t n_failed;
    st = tfm_po_merge(po, &p, "", 0, &out, &n_failed, &err);
    if (st == TFM_OK && !has_blank(po, false))
        require(out.len == size && memcmp(out.data, data, size) == 0,
                "a merge that translates nothing changed the catalog");
    tfm_buf_free(&out);

    tfm_buf lines;
    tfm_buf_init(&lines);
    require(tfm_po_strings(po, true, &lines, NULL, &err) == TFM_OK, "po-strings failed");
    check_identity(po, &lines);
    tfm_buf_free(&lines);
    tfm_po_free(po);
    return 0;
}
