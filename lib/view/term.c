/* term.c - attention heatmaps for a terminal: key labels written
 * vertically above the columns, query labels on the left, one cell of two
 * columns per weight, in xterm's 256 colours, in 24-bit colour, or as a
 * plain character ramp where escape sequences are not wanted (NO_COLOR, a
 * file, a pipe); and the choice among them, from the environment. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "view_internal.h"

/* Ten levels, blank for ~0 up to '@' for ~1. */
static const char ramp[] = " .:-=+*#%@";

/* The nearest of xterm's 256 colours to rgb: the 6x6x6 cube (16..231,
 * levels 0, 95, 135, ..., 255) or the grey ramp (232..255, 8 + 10k). */
static int xterm256(const unsigned char rgb[3])
{
    static const int level[6] = {0, 95, 135, 175, 215, 255};
    int idx[3], cube_dist = 0;
    for (int c = 0; c < 3; c++) {
        int best = 0;
        for (int k = 1; k < 6; k++)
            if (abs(level[k] - rgb[c]) < abs(level[best] - rgb[c])) best = k;
        idx[c] = best;
        cube_dist += (level[best] - rgb[c]) * (level[best] - rgb[c]);
    }
    int mean = (rgb[0] + rgb[1] + rgb[2]) / 3;
    int g = (mean - 8 + 5) / 10;
    if (g < 0) g = 0;
    if (g > 23) g = 23;
    int grey = 8 + 10 * g, grey_dist = 0;
    for (int c = 0; c < 3; c++) grey_dist += (grey - rgb[c]) * (grey - rgb[c]);
    if (grey_dist < cube_dist) return 232 + g;
    return 16 + 36 * idx[0] + 6 * idx[1] + idx[2];
}

/* One cell of weight w: two columns. */
static tfm_status cell(tfm_buf *out, float w, tfm_term_colors colors)
{
    if (colors == TFM_TERM_PLAIN) {
        int k = (int)(w * 10.0f);
        if (!(w > 0.0f)) k = 0;
        if (k > 9) k = 9;
        char two[2] = {ramp[k], ramp[k]};
        return tfm_buf_append(out, two, 2);
    }
    unsigned char rgb[3];
    view_color(w, rgb);
    if (colors == TFM_TERM_256) return tfm_buf_printf(out, "\033[48;5;%dm  ", xterm256(rgb));
    return tfm_buf_printf(out, "\033[48;2;%d;%d;%dm  ", rgb[0], rgb[1], rgb[2]);
}

static tfm_status reset(tfm_buf *out, tfm_term_colors colors)
{
    return colors == TFM_TERM_PLAIN ? TFM_OK : tfm_buf_append(out, "\033[0m", 4);
}

static tfm_status spaces(tfm_buf *out, int n)
{
    tfm_status st = TFM_OK;
    for (int i = 0; i < n && st == TFM_OK; i++) st = tfm_buf_putc(out, ' ');
    return st;
}

/* The next glyph of s at *i: a code point and the zero-width ones after it
 * (combining marks), so that a vertical label keeps accents on their
 * letters.  Sets *len (bytes) and *width (columns, 1 or 2).  Control
 * characters, which could move the cursor, are shown as U+FFFD. */
static const char *next_glyph(const char *s, size_t n, size_t *i, size_t *len, int *width)
{
    static const char replacement[] = "\xef\xbf\xbd";
    const size_t start = *i;
    int32_t cp;
    int k = tfm_utf8_decode((const unsigned char *)s + start, n - start, &cp);
    if (k <= 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
        *i = start + (k > 0 ? (size_t)k : 1);
        *len = 3;
        *width = 1;
        return replacement;
    }
    int w = utf8proc_charwidth(cp);
    size_t end = start + (size_t)k;
    while (end < n) {
        int32_t next;
        int m = tfm_utf8_decode((const unsigned char *)s + end, n - end, &next);
        if (m <= 0 || next < 0x20 || utf8proc_charwidth(next) != 0) break;
        end += (size_t)m;
    }
    *i = end;
    *len = end - start;
    *width = w >= 2 ? 2 : 1;
    return s + start;
}

/* A label, control characters replaced; its width in columns in *width. */
static tfm_status label(tfm_buf *out, const char *s, int *width)
{
    tfm_status st = TFM_OK;
    size_t n = strlen(s);
    *width = 0;
    for (size_t i = 0; i < n && st == TFM_OK;) {
        size_t len;
        int w;
        const char *g = next_glyph(s, n, &i, &len, &w);
        st = tfm_buf_append(out, g, len);
        *width += w;
    }
    return st;
}

static int label_width(const char *s)
{
    int width = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t len;
        int w;
        next_glyph(s, n, &i, &len, &w);
        width += w;
    }
    return width;
}

static int glyph_count(const char *s)
{
    int count = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; count++) {
        size_t len;
        int w;
        next_glyph(s, n, &i, &len, &w);
    }
    return count;
}

/* The k-th glyph of column label s padded to two columns, or two spaces. */
static tfm_status vertical_glyph(tfm_buf *out, const char *s, int k)
{
    size_t n = strlen(s), i = 0, len = 0;
    int w = 0;
    const char *g = NULL;
    for (int j = 0; j <= k; j++) {
        if (i >= n) return spaces(out, 2);
        g = next_glyph(s, n, &i, &len, &w);
    }
    tfm_status st = tfm_buf_append(out, g, len);
    return st == TFM_OK ? spaces(out, 2 - w) : st;
}

static tfm_status legend(tfm_buf *out, tfm_term_colors colors, int indent)
{
    tfm_status st = spaces(out, indent);
    if (st == TFM_OK) st = tfm_buf_append(out, "0 ", 2);
    if (st == TFM_OK && colors == TFM_TERM_PLAIN) st = tfm_buf_putc(out, '[');
    for (int k = 0; k <= 10 && st == TFM_OK; k++) st = cell(out, (float)k / 10.0f, colors);
    if (st == TFM_OK) st = reset(out, colors);
    if (st == TFM_OK && colors == TFM_TERM_PLAIN) st = tfm_buf_putc(out, ']');
    if (st == TFM_OK) st = tfm_buf_append(out, " 1\n", 3);
    return st;
}

static tfm_status matrix(const tfm_attention_view *v, int l, int h, tfm_term_colors colors,
                         tfm_buf *out)
{
    const tfm_tensor *t = v->weights;
    const int n_q = (int)t->shape[2], n_k = (int)t->shape[3];
    int row_width = 0, height = 0;
    for (int i = 0; i < n_q; i++) {
        int w = label_width(v->rows[i]);
        if (w > row_width) row_width = w;
    }
    for (int j = 0; j < n_k; j++) {
        int g = glyph_count(v->cols[j]);
        if (g > height) height = g;
    }
    tfm_status st = tfm_view_matrix_name(v, l, h, out);
    if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    for (int k = 0; k < height && st == TFM_OK; k++) {
        st = spaces(out, row_width + 1);
        for (int j = 0; j < n_k && st == TFM_OK; j++) st = vertical_glyph(out, v->cols[j], k);
        /* no trailing blanks */
        while (st == TFM_OK && out->len > 0 && out->data[out->len - 1] == ' ') out->len--;
        if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    }
    const float *w = view_matrix(v, l, h);
    for (int i = 0; i < n_q && st == TFM_OK; i++) {
        int width;
        st = spaces(out, row_width - label_width(v->rows[i]));
        if (st == TFM_OK) st = label(out, v->rows[i], &width);
        if (st == TFM_OK) st = tfm_buf_putc(out, ' ');
        for (int j = 0; j < n_k && st == TFM_OK; j++)
            st = cell(out, w[(size_t)i * n_k + j], colors);
        if (st == TFM_OK) st = reset(out, colors);
        if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    }
    return st == TFM_OK ? legend(out, colors, row_width + 1) : st;
}

tfm_status tfm_view_term(const tfm_attention_view *v, tfm_term_colors colors, tfm_buf *out,
                         tfm_error *err)
{
    tfm_status st = view_check(v, err);
    if (st != TFM_OK) return st;
    int width;
    if (v->title) {
        st = label(out, v->title, &width);
        if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    }
    if (v->note && st == TFM_OK) {
        st = label(out, v->note, &width);
        if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    }
    const tfm_tensor *t = v->weights;
    for (int l = 0; l < (int)t->shape[0] && st == TFM_OK; l++)
        for (int h = 0; h < (int)t->shape[1] && st == TFM_OK; h++) {
            st = matrix(v, l, h, colors, out);
            if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
        }
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "terminal view: out of memory");
}

tfm_term_colors tfm_term_choose_colors(tfm_color_when when, bool to_terminal)
{
    if (when == TFM_COLOR_NEVER) return TFM_TERM_PLAIN;
    if (when == TFM_COLOR_AUTO) {
        const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");
        if (!to_terminal || (no_color && *no_color) || (term && strcmp(term, "dumb") == 0))
            return TFM_TERM_PLAIN;
    }
    const char *ct = getenv("COLORTERM");
    if (ct && (strcmp(ct, "truecolor") == 0 || strcmp(ct, "24bit") == 0))
        return TFM_TERM_TRUECOLOR;
    return TFM_TERM_256;
}
