/* align.c - word alignments read off a cross-attention matrix: hard pairs
 * "i-j" as fast_align and Marian print them, and soft distributions in
 * Marian's --alignment soft form. */
#include "tfm/view.h"

tfm_status tfm_align_hard(const float *w, int n_rows, int n_cols, int n_words, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    bool first = true;
    for (int t = 0; t < n_rows && st == TFM_OK; t++) {
        if (n_cols == 0) break;
        const float *row = w + (size_t)t * n_cols;
        int best = 0;
        for (int i = 1; i < n_cols; i++)
            if (row[i] > row[best]) best = i;
        if (best >= n_words) continue; /* attends mostly to </s>: unaligned */
        st = tfm_buf_printf(out, "%s%d-%d", first ? "" : " ", best, t);
        first = false;
    }
    return st;
}

tfm_status tfm_align_soft(const float *w, int n_rows, int n_cols, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    for (int t = 0; t < n_rows && st == TFM_OK; t++) {
        if (t > 0) st = tfm_buf_putc(out, ' ');
        for (int i = 0; i < n_cols && st == TFM_OK; i++)
            st = tfm_buf_printf(out, "%s%.6g", i ? "," : "", (double)w[(size_t)t * n_cols + i]);
    }
    return st;
}
