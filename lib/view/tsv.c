/* tsv.c - attention as tab-separated tables with token labels, for
 * spreadsheets, pandas (read_csv(sep="\t", index_col=0)) and awk. */
#include "view_internal.h"

/* A label as one TSV cell: a tab or newline would break the table. */
static tfm_status append_cell(tfm_buf *out, const char *label)
{
    tfm_status st = TFM_OK;
    for (const char *p = label; *p && st == TFM_OK; p++)
        st = tfm_buf_putc(out, *p == '\t' || *p == '\n' || *p == '\r' ? ' ' : *p);
    return st;
}

tfm_status tfm_view_tsv(const tfm_attention_view *v, tfm_buf *out, tfm_error *err)
{
    tfm_status st = view_check(v, err);
    if (st != TFM_OK) return st;
    const tfm_tensor *t = v->weights;
    const int L = (int)t->shape[0], H = (int)t->shape[1];
    const int n_q = (int)t->shape[2], n_k = (int)t->shape[3];
    for (int l = 0; l < L && st == TFM_OK; l++)
        for (int h = 0; h < H && st == TFM_OK; h++) {
            /* the corner cell names the table */
            if (v->title) {
                st = append_cell(out, v->title);
                if (st == TFM_OK) st = tfm_buf_append(out, ": ", 2);
            }
            if (st == TFM_OK) st = tfm_view_matrix_name(v, l, h, out);
            for (int j = 0; j < n_k && st == TFM_OK; j++) {
                st = tfm_buf_putc(out, '\t');
                if (st == TFM_OK) st = append_cell(out, v->cols[j]);
            }
            if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
            const float *w = view_matrix(v, l, h);
            for (int i = 0; i < n_q && st == TFM_OK; i++) {
                st = append_cell(out, v->rows[i]);
                for (int j = 0; j < n_k && st == TFM_OK; j++)
                    st = tfm_buf_printf(out, "\t%.6g", (double)w[(size_t)i * n_k + j]);
                if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
            }
            if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
        }
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "tsv: out of memory");
}
