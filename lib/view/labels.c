/* labels.c - the text beside the weights: token labels from the
 * vocabulary (shortened with an ellipsis for drawing), XML escaping for
 * SVG, and the width of a label in terminal columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tfm/view.h"

void tfm_labels_init(tfm_labels *l)
{
    l->n = 0;
    l->text = NULL;
    l->off = NULL;
    l->cap = 0;
    tfm_buf_init(&l->buf);
}

void tfm_labels_free(tfm_labels *l)
{
    free(l->text);
    free(l->off);
    tfm_buf_free(&l->buf);
    tfm_labels_init(l);
}

/* Appends s[0..len) cut to max_chars code points, the last an ellipsis. */
static tfm_status append_shortened(tfm_buf *out, const char *s, size_t len, int max_chars)
{
    if (max_chars <= 0) return tfm_buf_append(out, s, len);
    size_t chars = 0, cut = len; /* cut: the byte offset where max_chars - 1 characters end */
    for (size_t i = 0; i < len;) {
        if (chars == (size_t)max_chars - 1) cut = i;
        int32_t cp;
        int n = tfm_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        i += n > 0 ? (size_t)n : 1;
        chars++;
    }
    if (chars <= (size_t)max_chars) return tfm_buf_append(out, s, len);
    tfm_status st = tfm_buf_append(out, s, cut);
    return st != TFM_OK ? st : tfm_buf_append(out, "\xe2\x80\xa6", 3); /* U+2026 */
}

tfm_status tfm_labels_set(tfm_labels *l, const tfm_vocab *v, const int32_t *ids, int n,
                          int max_chars, tfm_error *err)
{
    if (n > l->cap) {
        const char **text = realloc(l->text, (size_t)n * sizeof *text);
        if (text) l->text = text;
        size_t *off = realloc(l->off, (size_t)n * sizeof *off);
        if (off) l->off = off;
        if (!text || !off) return tfm_error_set(err, TFM_ERR_NOMEM, "labels: out of memory");
        l->cap = n;
    }
    tfm_buf_clear(&l->buf);
    tfm_status st = TFM_OK;
    for (int i = 0; i < n && st == TFM_OK; i++) {
        l->off[i] = l->buf.len;
        size_t len;
        const char *piece = v ? tfm_vocab_piece(v, ids[i], &len) : NULL;
        if (piece) {
            st = append_shortened(&l->buf, piece, len, max_chars);
        } else {
            char number[16];
            int k = snprintf(number, sizeof number, "%d", (int)ids[i]);
            st = append_shortened(&l->buf, number, (size_t)k, max_chars);
        }
        if (st == TFM_OK) st = tfm_buf_putc(&l->buf, 0);
    }
    if (st != TFM_OK) return tfm_error_set(err, st, "labels: out of memory");
    /* Pointers only now: the buffer may have moved while it grew. */
    for (int i = 0; i < n; i++) l->text[i] = l->buf.data + l->off[i];
    l->n = n;
    return TFM_OK;
}

/* XML 1.0's Char production: tab, newline, carriage return, and the code
 * points from U+0020 on except the surrogates, U+FFFE and U+FFFF.  A
 * carriage return is replaced too: a parser would turn it into a newline. */
static bool xml_char(int32_t cp)
{
    if (cp < 0x20) return cp == '\t' || cp == '\n';
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    return cp != 0xFFFE && cp != 0xFFFF;
}

tfm_status tfm_xml_escape(tfm_buf *out, const char *s, size_t len)
{
    tfm_status st = TFM_OK;
    for (size_t i = 0; i < len && st == TFM_OK;) {
        int32_t cp;
        int n = tfm_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        const char *entity = NULL;
        switch (n > 0 ? cp : -1) {
        case '&': entity = "&amp;"; break;
        case '<': entity = "&lt;"; break;
        case '>': entity = "&gt;"; break;
        case '"': entity = "&quot;"; break;
        case '\'': entity = "&apos;"; break;
        default: break;
        }
        if (entity) st = tfm_buf_append(out, entity, strlen(entity));
        else if (n > 0 && xml_char(cp)) st = tfm_buf_append(out, s + i, (size_t)n);
        else st = tfm_buf_append(out, "\xef\xbf\xbd", 3); /* U+FFFD */
        i += n > 0 ? (size_t)n : 1;
    }
    return st;
}

int tfm_text_width(const char *s, size_t len)
{
    int width = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int n = tfm_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        if (n <= 0) {
            width++;
            i++;
            continue;
        }
        int w = utf8proc_charwidth(cp);
        width += w > 0 ? w : 0;
        i += (size_t)n;
    }
    return width;
}
