/* common.c - what every attention writer needs: the colour scale, the
 * check of a view, and the names of its matrices. */
#include "view_internal.h"

/* viridis (matplotlib's default map: perceptually uniform, readable in
 * grey and by most colour-blind readers) at nine evenly spaced stops,
 * interpolated linearly between them. */
static const unsigned char viridis[9][3] = {
    {68, 1, 84},    {71, 45, 123},  {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
    {40, 174, 128}, {94, 201, 98},  {173, 220, 48}, {253, 231, 37},
};

void view_color(float w, unsigned char rgb[3])
{
    if (!(w > 0.0f)) w = 0.0f; /* NaN too */
    if (w > 1.0f) w = 1.0f;
    float x = w * 8.0f;
    int i = (int)x;
    if (i > 7) i = 7;
    float f = x - (float)i;
    for (int c = 0; c < 3; c++)
        rgb[c] = (unsigned char)(viridis[i][c] + f * (viridis[i + 1][c] - viridis[i][c]) + 0.5f);
}

tfm_status view_check(const tfm_attention_view *v, tfm_error *err)
{
    const tfm_tensor *t = v->weights;
    if (!t || t->ndim != 4 || t->dtype != TFM_F32)
        return tfm_error_set(err, TFM_ERR_ARG, "view: the weights must be a float32 tensor "
                                               "[layers, heads, queries, keys]");
    if ((t->shape[2] > 0 && !v->rows) || (t->shape[3] > 0 && !v->cols))
        return tfm_error_set(err, TFM_ERR_ARG, "view: labels are missing");
    if (v->first_head == TFM_VIEW_MEAN && t->shape[1] != 1)
        return tfm_error_set(err, TFM_ERR_ARG, "view: a mean of heads is one matrix per layer");
    return TFM_OK;
}

const float *view_matrix(const tfm_attention_view *v, int l, int h)
{
    const tfm_tensor *t = v->weights;
    const size_t per = (size_t)(t->shape[2] * t->shape[3]);
    return (const float *)t->data + ((size_t)l * (size_t)t->shape[1] + (size_t)h) * per;
}

tfm_status tfm_view_matrix_name(const tfm_attention_view *v, int l, int h, tfm_buf *out)
{
    if (v->first_head == TFM_VIEW_MEAN)
        return tfm_buf_printf(out, "layer %d, mean of %d heads", v->first_layer + l,
                              v->n_model_heads);
    return tfm_buf_printf(out, "layer %d, head %d", v->first_layer + l, v->first_head + h);
}
