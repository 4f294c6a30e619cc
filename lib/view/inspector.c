/* inspector.c - the attention of batches of sentence pairs, as inspect-attn
 * shows it (tfm/view.h): sources that come alone translated first (their
 * best hypotheses become the targets), the teacher-forced forward pass
 * without dropout over the batch, and each pair's weights gathered and
 * written as a record by a tfm_viewer. */
#include <stdlib.h>

#include "tfm/search.h"
#include "tfm/view.h"

struct tfm_inspector {
    const tfm_model *model;
    tfm_inspect_params p;
    tfm_pass_workspace *ws;
    tfm_viewer *viewer;
    tfm_encoder *encoder;    /* translating */
    tfm_decoder *decoder;
    tfm_search *search;
    float *states;           /* [states_cap] the batch's encoder states */
    size_t states_cap;
    int n;                   /* pairs of the last forward pass */
    tfm_pair *pairs;         /* [max_pairs] */
    const int32_t **src, **tgt;
    int *src_len, *tgt_len;
    const float **state_of;  /* [max_pairs] each source's states */
    tfm_tensor weights;
};

tfm_inspect_params tfm_inspect_default_params(void)
{
    return (tfm_inspect_params){.view = tfm_view_default_params(), .beam = 1, .max_pairs = 16};
}

tfm_status tfm_inspector_create(const tfm_model *m, const tfm_inspect_params *p,
                                tfm_inspector **out, tfm_error *err)
{
    *out = NULL;
    if (p->beam < 1 || p->max_pairs < 1)
        return tfm_error_set(err, TFM_ERR_ARG, "inspect: beam %d and max_pairs %d must be 1 "
                             "or more", p->beam, p->max_pairs);
    tfm_inspector *in = calloc(1, sizeof *in);
    if (!in) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    in->model = m;
    in->p = *p;
    tfm_tensor_init(&in->weights);
    const size_t n = (size_t)p->max_pairs;
    in->pairs = calloc(n, sizeof *in->pairs);
    in->src = calloc(n, sizeof *in->src);
    in->tgt = calloc(n, sizeof *in->tgt);
    in->src_len = calloc(n, sizeof *in->src_len);
    in->tgt_len = calloc(n, sizeof *in->tgt_len);
    in->state_of = calloc(n, sizeof *in->state_of);
    if (!in->pairs || !in->src || !in->tgt || !in->src_len || !in->tgt_len || !in->state_of) {
        tfm_inspector_free(in);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) tfm_pair_init(&in->pairs[i]);
    tfm_status s = tfm_viewer_create(m, &p->view, &in->viewer, err);
    if (s == TFM_OK && p->translate) s = tfm_encoder_create(m, &in->encoder, err);
    if (s == TFM_OK && p->translate) s = tfm_decoder_create(m, &in->decoder, err);
    if (s == TFM_OK && p->translate) s = tfm_search_create(m, &in->search, err);
    if (s == TFM_OK) s = tfm_pass_workspace_create(m, &in->ws, err);
    if (s != TFM_OK) {
        tfm_inspector_free(in);
        return s;
    }
    *out = in;
    return TFM_OK;
}

void tfm_inspector_free(tfm_inspector *in)
{
    if (!in) return;
    for (int i = 0; in->pairs && i < in->p.max_pairs; i++) tfm_pair_free(&in->pairs[i]);
    free(in->pairs);
    free(in->src);
    free(in->tgt);
    free(in->src_len);
    free(in->tgt_len);
    free(in->state_of);
    free(in->states);
    tfm_tensor_free(&in->weights);
    tfm_pass_workspace_free(in->ws);
    tfm_search_free(in->search);
    tfm_decoder_free(in->decoder);
    tfm_encoder_free(in->encoder);
    tfm_viewer_free(in->viewer);
    free(in);
}

tfm_pair *tfm_inspector_pair(tfm_inspector *in, int i)
{
    return i >= 0 && i < in->p.max_pairs ? &in->pairs[i] : NULL;
}

/* Decodes the batch's sources (src, src_len) and takes each best
 * hypothesis as its target. */
static tfm_status translate(tfm_inspector *in, tfm_error *err)
{
    const int D = in->model->config.d_model;
    size_t rows = 0;
    for (int i = 0; i < in->n; i++) rows += (size_t)in->src_len[i];
    if (rows * D > in->states_cap || !in->states) {
        free(in->states);
        in->states_cap = rows * D;
        in->states = malloc((in->states_cap ? in->states_cap : 1) * sizeof(float));
        if (!in->states)
            return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu encoder states", rows);
    }
    tfm_status s = tfm_encoder_forward(in->encoder, in->n, in->src, in->src_len, in->states, err);
    if (s != TFM_OK) return s;
    for (int i = 0, off = 0; i < in->n; off += in->src_len[i], i++)
        in->state_of[i] = in->states + (size_t)off * D;
    tfm_search_params sp = tfm_search_default_params();
    sp.beam = in->p.beam;
    tfm_search_input input = {.n_sentences = in->n, .states = in->state_of,
                              .src_lens = in->src_len};
    s = tfm_search_run(in->search, in->decoder, &sp, &input, err);
    if (s != TFM_OK) return s;
    for (int i = 0; i < in->n; i++) {
        tfm_hypothesis h = tfm_search_result(in->search, i).hyps[0];
        tfm_ids *t = &in->pairs[i].tgt.ids;
        tfm_ids_clear(t);
        for (int k = 0; k < h.len; k++)
            if (tfm_ids_push(t, h.ids[k]) != TFM_OK)
                return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory");
    }
    return TFM_OK;
}

tfm_status tfm_inspector_forward(tfm_inspector *in, int n, tfm_error *err)
{
    if (n < 0 || n > in->p.max_pairs)
        return tfm_error_set(err, TFM_ERR_ARG, "inspect: %d pairs in a batch of %d", n,
                             in->p.max_pairs);
    in->n = n;
    for (int i = 0; i < n; i++) {
        in->src[i] = in->pairs[i].src.ids.data;
        in->src_len[i] = (int)in->pairs[i].src.ids.len;
    }
    tfm_status s = in->p.translate ? translate(in, err) : TFM_OK;
    if (s != TFM_OK) return s;
    for (int i = 0; i < n; i++) {
        in->tgt[i] = in->pairs[i].tgt.ids.data;
        in->tgt_len[i] = (int)in->pairs[i].tgt.ids.len;
    }
    tfm_pair_batch tb = {n, in->src, in->src_len, in->tgt, in->tgt_len};
    return tfm_model_loss(in->ws, &tb, false, NULL, NULL, NULL, NULL, err);
}

tfm_status tfm_inspector_record(tfm_inspector *in, int i, FILE *npy, tfm_buf *out,
                                tfm_error *err)
{
    if (i < 0 || i >= in->n)
        return tfm_error_set(err, TFM_ERR_ARG, "inspect: no pair %d in the batch", i);
    const tfm_view_params *vp = &in->p.view;
    tfm_status s = tfm_attention_gather(in->model, in->ws, i, vp->kind, vp->layer, vp->head,
                                        &in->weights, err);
    if (s != TFM_OK) return s;
    const tfm_pair *p = &in->pairs[i];
    tfm_view_pair vpair = {p->src.ids.data, (int)p->src.ids.len, p->tgt.ids.data,
                           (int)p->tgt.ids.len, p->line};
    return tfm_viewer_record(in->viewer, &in->weights, &vpair, npy, out, err);
}
