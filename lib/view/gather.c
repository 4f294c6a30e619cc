/* gather.c - one sentence's attention weights out of the training forward
 * pass's workspace into a tensor [layers, heads, queries, keys], with a
 * chosen layer (or all) and head (or all, or their mean); cropping for
 * drawing; and the mean matrix that alignments are read from. */
#include <stdlib.h>
#include <string.h>

#include "tfm/view.h"

tfm_status tfm_attention_gather(const tfm_model *m, const tfm_pass_workspace *ws, int b,
                                tfm_attention_kind kind, int layer, int head, tfm_tensor *out,
                                tfm_error *err)
{
    const tfm_config *c = &m->config;
    const int H = c->n_heads;
    const int depth = kind == TFM_ATTENTION_ENCODER ? c->n_encoder_layers : c->n_decoder_layers;
    if (depth < 1) return tfm_error_set(err, TFM_ERR_RANGE, "the model has no such layers");
    tfm_status st = tfm_view_check_selection(m, kind, layer, head, err);
    if (st != TFM_OK) return st;
    if (layer == TFM_VIEW_LAST) layer = depth - 1;
    const int first = layer == TFM_VIEW_ALL ? 0 : layer;
    const int L = layer == TFM_VIEW_ALL ? depth : 1;
    const int Hout = head == TFM_VIEW_ALL ? H : 1;

    int n_q, n_k;
    st = tfm_model_attention(ws, b, kind, first, NULL, &n_q, &n_k, err);
    if (st != TFM_OK) return st;
    const int64_t shape[4] = {L, Hout, n_q, n_k};
    const size_t per_head = (size_t)n_q * n_k;
    /* one layer's heads, whole matrices (the workspace may keep bands only) */
    float *w = malloc(((size_t)H * per_head + 1) * sizeof *w);
    if (!w || tfm_tensor_reshape(out, TFM_F32, 4, shape) != TFM_OK) {
        free(w);
        return tfm_error_set(err, TFM_ERR_NOMEM, "attention: out of memory");
    }
    for (int l = 0; l < L; l++) {
        st = tfm_model_attention(ws, b, kind, first + l, w, &n_q, &n_k, err);
        if (st != TFM_OK) break;
        float *dst = (float *)out->data + (size_t)l * Hout * per_head;
        if (head == TFM_VIEW_ALL) {
            memcpy(dst, w, (size_t)H * per_head * sizeof(float));
        } else if (head >= 0) {
            memcpy(dst, w + (size_t)head * per_head, per_head * sizeof(float));
        } else {
            /* The mean in double, so its rows sum to 1 as closely as a
             * single head's do. */
            for (size_t i = 0; i < per_head; i++) {
                double sum = 0.0;
                for (int h = 0; h < H; h++) sum += w[(size_t)h * per_head + i];
                dst[i] = (float)(sum / H);
            }
        }
    }
    free(w);
    return st;
}

tfm_status tfm_attention_crop(const tfm_tensor *in, int n_q, int n_k, tfm_tensor *out,
                              tfm_error *err)
{
    if (in->ndim != 4 || in->dtype != TFM_F32)
        return tfm_error_set(err, TFM_ERR_ARG, "attention: a [L, H, n_q, n_k] float32 tensor "
                                               "is needed");
    const int64_t rows = in->shape[2], cols = in->shape[3];
    const int64_t q = n_q < rows ? n_q : rows, k = n_k < cols ? n_k : cols;
    const int64_t shape[4] = {in->shape[0], in->shape[1], q, k};
    tfm_status s = tfm_tensor_reshape(out, TFM_F32, 4, shape);
    if (s != TFM_OK) return tfm_error_set(err, s, "attention: out of memory");
    const float *src = in->data;
    float *dst = out->data;
    for (int64_t m = 0; m < in->shape[0] * in->shape[1]; m++)
        for (int64_t i = 0; i < q; i++)
            memcpy(dst + (m * q + i) * k, src + (m * rows + i) * cols, (size_t)k * sizeof(float));
    return TFM_OK;
}

void tfm_attention_mean(const tfm_tensor *t, float *out)
{
    const size_t n = (size_t)(t->shape[2] * t->shape[3]);
    const int64_t count = t->shape[0] * t->shape[1];
    const float *w = t->data;
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (int64_t m = 0; m < count; m++) sum += w[(size_t)m * n + i];
        out[i] = count ? (float)(sum / (double)count) : 0.0f;
    }
}
