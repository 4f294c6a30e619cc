/* pytext.c - Python's string semantics on arrays of code points.
 *
 * sacreBLEU is written in Python, and its scores depend on Python's idea of
 * whitespace (str.split(), str.strip(), str.rstrip()) and of lowercase
 * (str.lower()).  These are the same here: whitespace is exactly what
 * str.isspace() accepts (Unicode category Zs and the bidirectional classes
 * WS, B and S, which brings in U+001C..U+001F and U+0085), and lowercasing
 * is Unicode's full mapping (U+0130 becomes "i" + U+0307) with the
 * Final_Sigma rule, over utf8proc's character tables. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "metrics_internal.h"

tfm_status tfm_py_decode(const char *s, size_t len, tfm_ids *out)
{
    tfm_ids_clear(out);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        int32_t cp;
        int n;
        if (u[i] < 0x80) {
            cp = u[i];
            n = 1;
        } else {
            n = tfm_utf8_decode(u + i, len - i, &cp);
            if (n == 0) { /* an invalid byte: one replacement character */
                cp = 0xFFFD;
                n = 1;
            }
        }
        if (tfm_cp_push(out, cp) != TFM_OK) return TFM_ERR_NOMEM;
        i += (size_t)n;
    }
    return TFM_OK;
}

tfm_status tfm_py_encode(const int32_t *cp, size_t n, tfm_buf *out)
{
    if (tfm_buf_reserve(out, 4 * n) != TFM_OK) return TFM_ERR_NOMEM;
    char *o = out->data + out->len;
    for (size_t i = 0; i < n; i++) o += tfm_utf8_encode(cp[i], o);
    out->len = (size_t)(o - out->data);
    out->data[out->len] = 0;
    return TFM_OK;
}

size_t tfm_py_rstrip(const int32_t *cp, size_t n)
{
    while (n > 0 && tfm_py_isspace(cp[n - 1])) n--;
    return n;
}

tfm_status tfm_py_strip(const tfm_ids *in, tfm_ids *out)
{
    size_t end = tfm_py_rstrip(in->data, in->len), start = 0;
    while (start < end && tfm_py_isspace(in->data[start])) start++;
    tfm_ids_clear(out);
    for (size_t i = start; i < end; i++)
        if (tfm_cp_push(out, in->data[i]) != TFM_OK) return TFM_ERR_NOMEM;
    return TFM_OK;
}

void tfm_py_words_free(tfm_py_words *w)
{
    free(w->start);
    free(w->len);
    memset(w, 0, sizeof *w);
}

tfm_status tfm_py_split(const int32_t *cp, size_t n, tfm_py_words *out)
{
    out->n = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && tfm_py_isspace(cp[i])) i++;
        if (i == n) break;
        size_t start = i;
        while (i < n && !tfm_py_isspace(cp[i])) i++;
        if (out->n == out->cap) {
            size_t cap = out->cap ? 2 * out->cap : 64;
            size_t *s = realloc(out->start, cap * sizeof *s);
            if (!s) return TFM_ERR_NOMEM;
            out->start = s;
            size_t *l = realloc(out->len, cap * sizeof *l);
            if (!l) return TFM_ERR_NOMEM;
            out->len = l;
            out->cap = cap;
        }
        out->start[out->n] = start;
        out->len[out->n] = i - start;
        out->n++;
    }
    return TFM_OK;
}

/* ---- lowercasing ------------------------------------------------------------------ */

/* Unicode's Cased property: letters with case, and the Other_Lowercase /
 * Other_Uppercase characters (modifier letters such as U+02B0) that matter
 * in text. */
static bool is_cased(int32_t c)
{
    utf8proc_category_t cat = utf8proc_category(c);
    if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT)
        return true;
    if (utf8proc_tolower(c) != c || utf8proc_toupper(c) != c) return true;
    return c == 0xAA || c == 0xBA || (c >= 0x2B0 && c <= 0x2B8) || (c >= 0x2C0 && c <= 0x2C1) ||
           (c >= 0x2E0 && c <= 0x2E4) || c == 0x345 || c == 0x37A ||
           (c >= 0x1D2C && c <= 0x1D6A) || c == 0x1D78 || (c >= 0x1D9B && c <= 0x1DBF) ||
           c == 0x2071 || c == 0x207F || (c >= 0x2090 && c <= 0x209C) ||
           (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9);
}

/* Unicode's Case_Ignorable property: marks, format characters, modifier
 * letters and symbols, and the apostrophes and dots that may sit inside a
 * word (Word_Break MidLetter, MidNumLet, Single_Quote). */
static bool is_case_ignorable(int32_t c)
{
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK:
        return true;
    default:
        break;
    }
    switch (c) {
    case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4:
    case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52:
    case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
        return true;
    default:
        return false;
    }
}

/* Python's handle_capital_sigma: U+03A3 lowercases to final sigma U+03C2 when
 * a cased letter comes before it and none after it (skipping case-ignorable
 * characters both ways). */
static int32_t lower_sigma(const int32_t *s, size_t n, size_t i)
{
    size_t j = i;
    while (j > 0 && is_case_ignorable(s[j - 1])) j--;
    if (j == 0 || !is_cased(s[j - 1])) return 0x3C3;
    for (j = i + 1; j < n && is_case_ignorable(s[j]); j++) {}
    return j == n || !is_cased(s[j]) ? 0x3C2 : 0x3C3;
}

tfm_status tfm_py_lower(const tfm_ids *in, tfm_ids *out)
{
    tfm_ids_clear(out);
    for (size_t i = 0; i < in->len; i++) {
        int32_t c = in->data[i], l;
        if (c < 0x80) l = (c >= 'A' && c <= 'Z') ? c + 32 : c;
        else if (c == 0x130) { /* the one unconditional full mapping: "i" + combining dot */
            if (tfm_cp_push(out, 'i') != TFM_OK) return TFM_ERR_NOMEM;
            l = 0x307;
        } else if (c == 0x3A3) l = lower_sigma(in->data, in->len, i);
        else l = utf8proc_tolower(c);
        if (tfm_cp_push(out, l) != TFM_OK) return TFM_ERR_NOMEM;
    }
    return TFM_OK;
}
