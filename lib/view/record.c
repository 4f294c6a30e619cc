/* record.c - one record per sentence pair, as inspect-attn writes them:
 * the ids each row and column of a pair's weights stand for, their labels,
 * and the record in the chosen format (a cropped and titled picture, a TSV
 * table, an .npy record with its labels line, or an alignment line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfm/view.h"

struct tfm_viewer {
    const tfm_config *config;
    const tfm_vocab *src_vocab, *tgt_vocab; /* the model's sides', or NULL: labels are
                                               then ids */
    tfm_view_params p;      /* p.layer a number or TFM_VIEW_ALL */
    tfm_ids row_ids, col_ids;
    tfm_labels rows, cols;
    tfm_tensor cropped;
    float *mean; /* [mean_cap] */
    size_t mean_cap;
};

/* In the order of tfm_attention_kind. */
static const char *const kind_titles[] = {"encoder self-attention", "decoder self-attention",
                                          "cross-attention"};

const char *tfm_attention_kind_title(tfm_attention_kind kind)
{
    return (int)kind >= 0 && (int)kind <= TFM_ATTENTION_CROSS ? kind_titles[kind] : "attention";
}

tfm_view_params tfm_view_default_params(void)
{
    return (tfm_view_params){.format = TFM_VIEW_TERM, .kind = TFM_ATTENTION_CROSS,
                             .layer = TFM_VIEW_LAST, .head = TFM_VIEW_MEAN, .max_tokens = 100,
                             .label_width = 16, .colors = TFM_TERM_PLAIN, .source_eos = true};
}

tfm_status tfm_viewer_create(const tfm_model *m, const tfm_view_params *p, tfm_viewer **out,
                             tfm_error *err)
{
    *out = NULL;
    const tfm_config *c = &m->config;
    if ((int)p->kind < TFM_ATTENTION_ENCODER || (int)p->kind > TFM_ATTENTION_CROSS ||
        (int)p->format < TFM_VIEW_TERM || (int)p->format > TFM_VIEW_SOFT)
        return tfm_error_set(err, TFM_ERR_ARG, "view: no such kind or format");
    if ((p->format == TFM_VIEW_ALIGN || p->format == TFM_VIEW_SOFT) &&
        p->kind != TFM_ATTENTION_CROSS)
        return tfm_error_set(err, TFM_ERR_ARG, "view: alignments are read off cross-attention");
    if (p->max_tokens < 0 || p->label_width < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "view: a negative size");
    tfm_status st = tfm_view_check_selection(m, p->kind, p->layer, p->head, err);
    if (st != TFM_OK) return st;
    const int depth = p->kind == TFM_ATTENTION_ENCODER ? c->n_encoder_layers : c->n_decoder_layers;
    const int layer = p->layer == TFM_VIEW_LAST ? depth - 1 : p->layer;
    tfm_viewer *v = calloc(1, sizeof *v);
    if (!v) return tfm_error_set(err, TFM_ERR_NOMEM, "view: out of memory");
    v->config = c;
    v->src_vocab = tfm_model_vocab(m, TFM_SOURCE);
    v->tgt_vocab = tfm_model_vocab(m, TFM_TARGET);
    v->p = *p;
    v->p.layer = layer;
    tfm_ids_init(&v->row_ids);
    tfm_ids_init(&v->col_ids);
    tfm_labels_init(&v->rows);
    tfm_labels_init(&v->cols);
    tfm_tensor_init(&v->cropped);
    *out = v;
    return TFM_OK;
}

void tfm_viewer_free(tfm_viewer *v)
{
    if (!v) return;
    tfm_ids_free(&v->row_ids);
    tfm_ids_free(&v->col_ids);
    tfm_labels_free(&v->rows);
    tfm_labels_free(&v->cols);
    tfm_tensor_free(&v->cropped);
    free(v->mean);
    free(v);
}

/* ids[0..n) with one id in front (first >= 0) or behind (last >= 0), into out. */
static tfm_status ids_with(tfm_ids *out, int32_t first, const int32_t *ids, int n, int32_t last)
{
    tfm_ids_clear(out);
    tfm_status st = first >= 0 ? tfm_ids_push(out, first) : TFM_OK;
    for (int i = 0; st == TFM_OK && i < n; i++) st = tfm_ids_push(out, ids[i]);
    if (st == TFM_OK && last >= 0) st = tfm_ids_push(out, last);
    return st;
}

/* The ids the rows and columns of the pair's matrices stand for. */
static tfm_status label_ids(tfm_viewer *v, const tfm_view_pair *pair)
{
    const tfm_config *c = v->config;
    tfm_status st;
    switch (v->p.kind) {
    case TFM_ATTENTION_ENCODER:
        st = ids_with(&v->row_ids, -1, pair->src, pair->src_len, -1);
        break;
    case TFM_ATTENTION_DECODER:
        st = ids_with(&v->row_ids, c->bos_id, pair->tgt, pair->tgt_len, -1);
        break;
    default: /* each query is labelled by the token it predicts */
        st = ids_with(&v->row_ids, -1, pair->tgt, pair->tgt_len, c->eos_id);
        break;
    }
    if (st != TFM_OK) return st;
    if (v->p.kind == TFM_ATTENTION_DECODER)
        return ids_with(&v->col_ids, -1, v->row_ids.data, (int)v->row_ids.len, -1);
    return ids_with(&v->col_ids, -1, pair->src, pair->src_len, -1);
}

/* The labels of the rows (l == &v->rows) or the columns, each axis from
 * its side's vocabulary: the queries are the source's in the encoder, the
 * keys the target's in the decoder's self-attention. */
static tfm_status set_labels(tfm_viewer *v, tfm_labels *l, const int32_t *ids, size_t n,
                             int max_chars, tfm_error *err)
{
    const bool rows = l == &v->rows;
    const bool source = rows ? v->p.kind == TFM_ATTENTION_ENCODER
                             : v->p.kind != TFM_ATTENTION_DECODER;
    return tfm_labels_set(l, source ? v->src_vocab : v->tgt_vocab, ids, (int)n, max_chars, err);
}

/* The labels of l separated by spaces, appended to out. */
static tfm_status append_pieces(const tfm_labels *l, tfm_buf *out)
{
    tfm_status st = TFM_OK;
    for (int i = 0; i < l->n && st == TFM_OK; i++) {
        if (i > 0) st = tfm_buf_putc(out, ' ');
        if (st == TFM_OK) st = tfm_buf_append(out, l->text[i], strlen(l->text[i]));
    }
    return st;
}

/* npy: the weights, and the labels line "rows TAB columns". */
static tfm_status write_npy(tfm_viewer *v, const tfm_tensor *w, FILE *npy, tfm_buf *out,
                            tfm_error *err)
{
    tfm_status st = npy ? tfm_npy_write(npy, w, err) : TFM_OK;
    if (st != TFM_OK || !v->p.tokens) return st;
    st = set_labels(v, &v->rows, v->row_ids.data, v->row_ids.len, 0, err);
    if (st == TFM_OK) st = set_labels(v, &v->cols, v->col_ids.data, v->col_ids.len, 0, err);
    if (st != TFM_OK) return st;
    st = append_pieces(&v->rows, out);
    if (st == TFM_OK) st = tfm_buf_putc(out, '\t');
    if (st == TFM_OK) st = append_pieces(&v->cols, out);
    if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "view: out of memory");
}

/* align and soft: one line from the mean matrix of the chosen layers and heads. */
static tfm_status write_alignment(tfm_viewer *v, const tfm_tensor *w, const tfm_view_pair *pair,
                                  tfm_buf *out, tfm_error *err)
{
    const int n_q = (int)w->shape[2], n_k = (int)w->shape[3];
    const size_t need = (size_t)n_q * (size_t)n_k;
    if (need > v->mean_cap || !v->mean) {
        float *mean = malloc((need ? need : 1) * sizeof(float));
        if (!mean) return tfm_error_set(err, TFM_ERR_NOMEM, "view: out of memory");
        free(v->mean);
        v->mean = mean;
        v->mean_cap = need;
    }
    tfm_attention_mean(w, v->mean);
    tfm_status st;
    if (v->p.format == TFM_VIEW_ALIGN) {
        /* the source's words: its </s> is not one; nor is the final </s> query a target word */
        const int words = n_k - (v->p.source_eos && n_k > 0 ? 1 : 0);
        st = tfm_align_hard(v->mean, n_q - 1, n_k, words, out);
    } else {
        st = set_labels(v, &v->rows, pair->tgt, (size_t)pair->tgt_len, 0, err);
        if (st != TFM_OK) return st;
        st = append_pieces(&v->rows, out);
        if (st == TFM_OK) st = tfm_buf_append(out, " ||| ", 5);
        if (st == TFM_OK) st = tfm_align_soft(v->mean, n_q, n_k, out);
    }
    if (st == TFM_OK) st = tfm_buf_putc(out, '\n');
    return st == TFM_OK ? TFM_OK : tfm_error_set(err, st, "view: out of memory");
}

/* tsv, svg, term: the view with labels (and for pictures, cropped, the
 * labels shortened). */
static tfm_status write_view(tfm_viewer *v, const tfm_tensor *w, const tfm_view_pair *pair,
                             tfm_buf *out, tfm_error *err)
{
    const bool picture = v->p.format == TFM_VIEW_SVG || v->p.format == TFM_VIEW_TERM;
    const int n_q = (int)w->shape[2], n_k = (int)w->shape[3];
    const int max = picture ? v->p.max_tokens : 0;
    size_t rows = v->row_ids.len, cols = v->col_ids.len;
    char note[200] = "";
    if (max > 0 && (n_q > max || n_k > max)) {
        tfm_status st = tfm_attention_crop(w, max, max, &v->cropped, err);
        if (st != TFM_OK) return st;
        w = &v->cropped;
        snprintf(note, sizeof note, "(truncated to %d tokens for legibility: showing %d of %d "
                 "queries and %d of %d keys)", max, n_q < max ? n_q : max, n_q,
                 n_k < max ? n_k : max, n_k);
        rows = rows < (size_t)max ? rows : (size_t)max;
        cols = cols < (size_t)max ? cols : (size_t)max;
    }
    const int width = picture ? v->p.label_width : 0;
    tfm_status st = set_labels(v, &v->rows, v->row_ids.data, rows, width, err);
    if (st == TFM_OK) st = set_labels(v, &v->cols, v->col_ids.data, cols, width, err);
    if (st != TFM_OK) return st;
    char title[160];
    snprintf(title, sizeof title, "sentence %zu: %s", pair->number,
             tfm_attention_kind_title(v->p.kind));
    tfm_attention_view view = {
        .weights = w, .rows = v->rows.text, .cols = v->cols.text,
        .first_layer = v->p.layer == TFM_VIEW_ALL ? 0 : v->p.layer,
        .first_head = v->p.head == TFM_VIEW_ALL ? 0 : v->p.head,
        .n_model_heads = v->config->n_heads, .title = title, .note = note[0] ? note : NULL};
    switch (v->p.format) {
    case TFM_VIEW_SVG: return tfm_view_svg(&view, out, err);
    case TFM_VIEW_TERM: return tfm_view_term(&view, v->p.colors, out, err);
    default: return tfm_view_tsv(&view, out, err);
    }
}

tfm_status tfm_viewer_record(tfm_viewer *v, const tfm_tensor *w, const tfm_view_pair *pair,
                             FILE *npy, tfm_buf *out, tfm_error *err)
{
    if (label_ids(v, pair) != TFM_OK) return tfm_error_set(err, TFM_ERR_NOMEM, "view: out of memory");
    if (!w || w->ndim != 4 || w->dtype != TFM_F32 || w->shape[2] != (int64_t)v->row_ids.len ||
        w->shape[3] != (int64_t)v->col_ids.len)
        return tfm_error_set(err, TFM_ERR_ARG, "view: the weights are not those of the pair "
                             "(%zu queries and %zu keys, a float32 [L, H, queries, keys] tensor)",
                             v->row_ids.len, v->col_ids.len);
    switch (v->p.format) {
    case TFM_VIEW_NPY: return write_npy(v, w, npy, out, err);
    case TFM_VIEW_ALIGN:
    case TFM_VIEW_SOFT: return write_alignment(v, w, pair, out, err);
    default: return write_view(v, w, pair, out, err);
    }
}
