/* svg.c - attention as an SVG heatmap: a grid of panels (one row per
 * layer, one column per head), each with the query labels on the left and
 * the key labels above it, rotated; a tooltip (<title>) on every cell; a
 * colour legend.  Sizes are estimated from the labels' widths in columns of
 * a monospace font, so no font metrics are needed. */
#include <stdio.h>
#include <string.h>

#include "view_internal.h"

enum {
    CELL = 16,    /* a weight's square, px */
    FONT = 11,    /* font size, px */
    CHAR_W = 7,   /* the width of one column of text in a FONT px monospace font */
    MARGIN = 10,
    GAP = 24,     /* between panels */
    NAME_H = 18,  /* a panel's name line */
    LEGEND_W = 200,
    LEGEND_H = 40,
};

static tfm_status put(tfm_buf *out, const char *s)
{
    return tfm_buf_append(out, s, strlen(s));
}

static tfm_status text_element(tfm_buf *out, const char *attrs, const char *text)
{
    tfm_status st = tfm_buf_printf(out, "<text %s>", attrs);
    if (st == TFM_OK) st = tfm_xml_escape(out, text, strlen(text));
    return st == TFM_OK ? put(out, "</text>\n") : st;
}

/* One panel with its top-left corner at (x0, y0). */
static tfm_status panel(const tfm_attention_view *v, int l, int h, int x0, int y0, int row_w,
                        int col_h, tfm_buf *out)
{
    const tfm_tensor *t = v->weights;
    const int n_q = (int)t->shape[2], n_k = (int)t->shape[3];
    const int gx = x0 + row_w, gy = y0 + NAME_H + col_h; /* the grid's corner */
    tfm_buf name;
    tfm_buf_init(&name);
    tfm_status st = tfm_view_matrix_name(v, l, h, &name);
    char attrs[160];
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\" font-weight=\"bold\"", x0, y0 + FONT + 2);
    if (st == TFM_OK) st = text_element(out, attrs, name.data ? name.data : "");
    tfm_buf_free(&name);

    for (int j = 0; j < n_k && st == TFM_OK; j++) {
        snprintf(attrs, sizeof attrs, "transform=\"translate(%d,%d) rotate(-90)\"",
                 gx + j * CELL + CELL / 2 + FONT / 3, gy - 4);
        st = text_element(out, attrs, v->cols[j]);
    }
    for (int i = 0; i < n_q && st == TFM_OK; i++) {
        snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\" text-anchor=\"end\"", gx - 4,
                 gy + i * CELL + CELL / 2 + FONT / 3);
        st = text_element(out, attrs, v->rows[i]);
    }
    const float *w = view_matrix(v, l, h);
    if (st == TFM_OK) st = put(out, "<g shape-rendering=\"crispEdges\">\n");
    for (int i = 0; i < n_q && st == TFM_OK; i++)
        for (int j = 0; j < n_k && st == TFM_OK; j++) {
            const float x = w[(size_t)i * n_k + j];
            unsigned char rgb[3];
            view_color(x, rgb);
            st = tfm_buf_printf(out,
                                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                                "fill=\"#%02x%02x%02x\"><title>",
                                gx + j * CELL, gy + i * CELL, CELL, CELL, rgb[0], rgb[1], rgb[2]);
            if (st == TFM_OK) st = tfm_xml_escape(out, v->rows[i], strlen(v->rows[i]));
            if (st == TFM_OK) st = put(out, " \xe2\x86\x92 "); /* → */
            if (st == TFM_OK) st = tfm_xml_escape(out, v->cols[j], strlen(v->cols[j]));
            if (st == TFM_OK) st = tfm_buf_printf(out, ": %.4f</title></rect>\n", (double)x);
        }
    return st == TFM_OK ? put(out, "</g>\n") : st;
}

static tfm_status legend(tfm_buf *out, int x, int y)
{
    tfm_status st = put(out, "<defs><linearGradient id=\"scale\">");
    for (int k = 0; k <= 8 && st == TFM_OK; k++) {
        unsigned char rgb[3];
        view_color((float)k / 8.0f, rgb);
        st = tfm_buf_printf(out, "<stop offset=\"%.1f%%\" stop-color=\"#%02x%02x%02x\"/>",
                            k * 100.0 / 8, rgb[0], rgb[1], rgb[2]);
    }
    if (st == TFM_OK) st = put(out, "</linearGradient></defs>\n");
    if (st == TFM_OK)
        st = tfm_buf_printf(out,
                            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"12\" "
                            "fill=\"url(#scale)\"/>\n"
                            "<text x=\"%d\" y=\"%d\">0</text>\n"
                            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">1</text>\n"
                            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">attention weight"
                            "</text>\n",
                            x, y, LEGEND_W, x, y + 12 + FONT + 2, x + LEGEND_W,
                            y + 12 + FONT + 2, x + LEGEND_W / 2, y + 12 + FONT + 2);
    return st;
}

tfm_status tfm_view_svg(const tfm_attention_view *v, tfm_buf *out, tfm_error *err)
{
    tfm_status st = view_check(v, err);
    if (st != TFM_OK) return st;
    const tfm_tensor *t = v->weights;
    const int L = (int)t->shape[0], H = (int)t->shape[1];
    const int n_q = (int)t->shape[2], n_k = (int)t->shape[3];
    int row_cols = 0, col_cols = 0;
    for (int i = 0; i < n_q; i++) {
        int w = tfm_text_width(v->rows[i], strlen(v->rows[i]));
        if (w > row_cols) row_cols = w;
    }
    for (int j = 0; j < n_k; j++) {
        int w = tfm_text_width(v->cols[j], strlen(v->cols[j]));
        if (w > col_cols) col_cols = w;
    }
    const int row_w = row_cols * CHAR_W + 8, col_h = col_cols * CHAR_W + 8;
    int panel_w = row_w + n_k * CELL, panel_h = NAME_H + col_h + n_q * CELL;
    if (panel_w < 200) panel_w = 200; /* room for the panel's name */
    const int head_h = (v->title ? 22 : 0) + (v->note ? 18 : 0);
    int width = 2 * MARGIN + H * panel_w + (H - 1) * GAP;
    if (width < 2 * MARGIN + LEGEND_W + 20) width = 2 * MARGIN + LEGEND_W + 20;
    /* wide enough for the title (14 px, ~9 px a column) and the note */
    int title_w = v->title ? tfm_text_width(v->title, strlen(v->title)) * 9 : 0;
    int note_w = v->note ? tfm_text_width(v->note, strlen(v->note)) * CHAR_W : 0;
    if (width < 2 * MARGIN + title_w) width = 2 * MARGIN + title_w;
    if (width < 2 * MARGIN + note_w) width = 2 * MARGIN + note_w;
    const int grid_h = L * panel_h + (L - 1) * GAP;
    const int height = 2 * MARGIN + head_h + grid_h + 12 + LEGEND_H;

    st = tfm_buf_printf(out,
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                        "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"%d\">\n"
                        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                        width, height, width, height, FONT);
    int y = MARGIN;
    char attrs[128];
    if (st == TFM_OK && v->title) {
        snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\"",
                 MARGIN, y + 14);
        st = text_element(out, attrs, v->title);
        y += 22;
    }
    if (st == TFM_OK && v->note) {
        snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\" font-style=\"italic\"", MARGIN, y + 12);
        st = text_element(out, attrs, v->note);
        y += 18;
    }
    for (int l = 0; l < L && st == TFM_OK; l++)
        for (int h = 0; h < H && st == TFM_OK; h++)
            st = panel(v, l, h, MARGIN + h * (panel_w + GAP), y + l * (panel_h + GAP), row_w,
                       col_h, out);
    if (st == TFM_OK) st = legend(out, MARGIN + 10, y + grid_h + 12);
    if (st == TFM_OK) st = put(out, "</svg>\n");
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "svg: out of memory");
}
