/* normalize.c - Unicode normalisation of one line (NFC or NFKC, optional
 * case folding) with utf8proc, after repairing invalid UTF-8 (lib/core/utf8.c).
 *
 * Normalisation changes only what NFC/NFKC and case folding change: tabs,
 * newlines, control characters, NUL bytes and spaces pass through as they
 * are, because the encoder promises decode(encode(x)) == normalize(x) and a
 * normaliser that ate whitespace would make that promise useless.
 *
 * Speed: most lines of most corpora are largely ASCII, and ASCII is already
 * NFC and NFKC.  So only the runs of non-ASCII characters go through
 * utf8proc, each with the one ASCII character before it (a starter such as
 * 'e' may compose with a combining accent that follows it).  This gives the
 * same result as normalising the whole line: no ASCII character is a
 * non-starter or the second half of a composition, so an ASCII character
 * blocks every composition and reordering across it. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/encode_internal.h"
#include "tfm/text.h"

tfm_norm_params tfm_norm_default_params(void)
{
    tfm_norm_params p = {.form = TFM_NORM_NFKC, .case_fold = false, .strict = false};
    return p;
}

static const char *const form_names[] = {
    [TFM_NORM_NONE] = "none",
    [TFM_NORM_NFC] = "nfc",
    [TFM_NORM_NFKC] = "nfkc",
};

bool tfm_norm_form_parse(const char *name, tfm_norm_form *form)
{
    for (int f = TFM_NORM_NONE; f <= TFM_NORM_NFKC; f++) {
        if (strcmp(name, form_names[f]) == 0) {
            *form = (tfm_norm_form)f;
            return true;
        }
    }
    return false;
}

const char *tfm_norm_form_name(tfm_norm_form form)
{
    if ((unsigned)form > TFM_NORM_NFKC) return "unknown";
    return form_names[form];
}

/* ---- normalisation ---------------------------------------------------------- */

static inline char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

static tfm_status append_ascii(tfm_buf *out, const char *s, size_t len, bool fold)
{
    if (!fold) return tfm_buf_append(out, s, len);
    if (tfm_buf_reserve(out, len) != TFM_OK) return TFM_ERR_NOMEM;
    for (size_t i = 0; i < len; i++) out->data[out->len + i] = ascii_lower(s[i]);
    out->len += len;
    out->data[out->len] = 0;
    return TFM_OK;
}

/* The code point buffer utf8proc decomposes into, grown on demand and kept
 * for the length of one tfm_normalize call. */
typedef struct cp_buffer {
    utf8proc_int32_t *data;
    utf8proc_ssize_t cap;
} cp_buffer;

/* Normalises one segment (valid UTF-8) with utf8proc and appends it. */
/* UAX #15's Stream-Safe Text Format: after 30 non-starters in a row, a
 * COMBINING GRAPHEME JOINER (U+034F, a starter) is put in.  utf8proc sorts a
 * run of combining marks by swapping neighbours, which takes quadratic time,
 * so a megabyte of stacked accents would otherwise take minutes.  Text that
 * is already stream-safe (all real text) is left as it is, and the result is
 * stream-safe, so normalising stays idempotent. */
#define STREAM_SAFE_MAX_NONSTARTERS 30
#define COMBINING_GRAPHEME_JOINER 0x034F

/* Returns true when s[0..len) (valid UTF-8) has more than the allowed
 * non-starters in a row; then *safe holds a copy with joiners put in. */
static bool make_stream_safe(const unsigned char *s, size_t len, tfm_buf *safe, bool *nomem)
{
    size_t run = 0;
    bool needed = false;
    for (size_t i = 0; i < len && !needed;) {
        int32_t cp;
        int n = tfm_utf8_scan(s + i, len - i, &cp);
        i += n > 0 ? (size_t)n : 1;
        run = utf8proc_get_property(cp)->combining_class ? run + 1 : 0;
        needed = run > STREAM_SAFE_MAX_NONSTARTERS;
    }
    if (!needed) return false;
    tfm_buf_clear(safe);
    run = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int n = tfm_utf8_scan(s + i, len - i, &cp);
        if (n <= 0) n = 1;
        run = utf8proc_get_property(cp)->combining_class ? run + 1 : 0;
        if (run > STREAM_SAFE_MAX_NONSTARTERS) {
            char cgj[4];
            int k = tfm_utf8_encode(COMBINING_GRAPHEME_JOINER, cgj);
            if (tfm_buf_append(safe, cgj, (size_t)k) != TFM_OK) *nomem = true;
            run = 1;
        }
        if (tfm_buf_append(safe, s + i, (size_t)n) != TFM_OK) *nomem = true;
        i += (size_t)n;
    }
    return true;
}

static tfm_status normalize_segment(const unsigned char *s, size_t len,
                                    utf8proc_option_t options, cp_buffer *cps, tfm_buf *out,
                                    tfm_error *err)
{
    tfm_buf safe;
    tfm_buf_init(&safe);
    bool nomem = false;
    if (make_stream_safe(s, len, &safe, &nomem)) {
        if (nomem) {
            tfm_buf_free(&safe);
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory normalising a line");
        }
        tfm_status st = normalize_segment(safe.data ? (const unsigned char *)safe.data
                                                    : (const unsigned char *)"",
                                          safe.len, options, cps, out, err);
        tfm_buf_free(&safe);
        return st;
    }
    utf8proc_ssize_t n;
    for (;;) {
        n = utf8proc_decompose_custom(s, (utf8proc_ssize_t)len, cps->data, cps->cap, options,
                                      NULL, NULL);
        if (n < 0)
            return tfm_error_set(err, n == UTF8PROC_ERROR_NOMEM ? TFM_ERR_NOMEM : TFM_ERR_ARG,
                                 "utf8proc: %s", utf8proc_errmsg(n));
        if (n <= cps->cap) break;
        /* Too small: utf8proc told us how much it needs; ask again. */
        utf8proc_ssize_t cap = n + n / 2 + 16;
        utf8proc_int32_t *p = realloc(cps->data, (size_t)cap * sizeof *p);
        if (!p) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory normalising a line");
        cps->data = p;
        cps->cap = cap;
    }
    n = utf8proc_normalize_utf32(cps->data, n, options);
    if (n < 0) return tfm_error_set(err, TFM_ERR_ARG, "utf8proc: %s", utf8proc_errmsg(n));
    if (tfm_buf_reserve(out, (size_t)n * 4) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory normalising a line");
    char *o = out->data + out->len;
    for (utf8proc_ssize_t i = 0; i < n; i++) o += tfm_utf8_encode(cps->data[i], o);
    out->len = (size_t)(o - out->data);
    out->data[out->len] = 0;
    return TFM_OK;
}

static utf8proc_option_t options_for(const tfm_norm_params *p)
{
    utf8proc_option_t o = 0;
    if (p->form == TFM_NORM_NFC) o = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    if (p->form == TFM_NORM_NFKC) o = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    if (p->case_fold) o |= UTF8PROC_CASEFOLD;
    return o;
}

/* Normalises valid UTF-8 s[0..len) and appends it to out. */
static tfm_status normalize_valid(const tfm_norm_params *p, const char *s, size_t len,
                                  tfm_buf *out, tfm_error *err)
{
    utf8proc_option_t options = options_for(p);
    if (options == 0) return tfm_buf_append(out, s, len) == TFM_OK
                                 ? TFM_OK
                                 : tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    const unsigned char *u = (const unsigned char *)s;
    cp_buffer cps = {NULL, 0};
    tfm_status st = TFM_OK;
    size_t i = 0;
    while (i < len && st == TFM_OK) {
        /* The ASCII run up to the next non-ASCII byte. */
        size_t j = i;
        while (j < len && u[j] < 0x80) j++;
        if (append_ascii(out, s + i, j - i, p->case_fold) != TFM_OK) {
            st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
            break;
        }
        if (j == len) break;
        /* The non-ASCII run, with the ASCII character before it, which we
         * take back from out to normalise it again with the run. */
        size_t start = j;
        if (j > i) {
            start = j - 1;
            out->len--;
        }
        size_t k = j;
        while (k < len && u[k] >= 0x80) k++;
        st = normalize_segment(u + start, k - start, options, &cps, out, err);
        i = k;
    }
    free(cps.data);
    return st;
}

tfm_status tfm_normalize_append(const tfm_norm_params *p, const char *in, size_t len,
                                tfm_buf *out, size_t *n_repaired, tfm_error *err)
{
    if (n_repaired) *n_repaired = 0;
    if (tfm_buf_reserve(out, len) != TFM_OK)
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for a line of %zu bytes", len);
    /* The fast path: pure ASCII is valid and already NFC and NFKC. */
    const unsigned char *u = (const unsigned char *)in;
    size_t i = 0;
    while (i < len && u[i] < 0x80) i++;
    if (i == len) return append_ascii(out, in, len, p->case_fold); /* cannot fail: reserved */

    /* Most lines are valid: check first, and copy only to repair. */
    for (; i < len; i++) {
        if (u[i] < 0x80) continue;
        int32_t cp;
        int n = tfm_utf8_scan(u + i, len - i, &cp);
        if (n < 0) break;
        i += (size_t)n - 1;
    }
    if (i == len) return normalize_valid(p, in, len, out, err);

    /* Repair invalid UTF-8 first, so utf8proc sees only valid text. */
    tfm_buf fixed;
    tfm_buf_init(&fixed);
    size_t n_bad = 0, first_bad = 0;
    if (tfm_utf8_repair_append(&fixed, in, len, &n_bad, &first_bad) != TFM_OK) {
        tfm_buf_free(&fixed);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for a line of %zu bytes", len);
    }
    if (n_bad > 0 && p->strict) {
        tfm_buf_free(&fixed);
        return tfm_error_set(err, TFM_ERR_UTF8, "invalid UTF-8 at byte %zu (0x%02X)", first_bad,
                             u[first_bad]);
    }
    if (n_repaired) *n_repaired = n_bad;
    tfm_status st = normalize_valid(p, fixed.data, fixed.len, out, err);
    tfm_buf_free(&fixed);
    return st;
}

tfm_status tfm_normalize(const tfm_norm_params *p, const char *in, size_t len, tfm_buf *out,
                         size_t *n_repaired, tfm_error *err)
{
    tfm_buf_clear(out);
    return tfm_normalize_append(p, in, len, out, n_repaired, err);
}
