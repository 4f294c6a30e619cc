/* view_internal.h - what the writers of lib/view share: the colour scale,
 * the check of a view's shape, and a matrix's place in the tensor. */
#ifndef TFM_VIEW_INTERNAL_H
#define TFM_VIEW_INTERNAL_H

#include "tfm/view.h"

/* The colour of weight w (clamped to [0, 1]) on the viridis scale. */
void view_color(float w, unsigned char rgb[3]);

/* Checks that v->weights is a float32 [L, H, n_q, n_k] tensor with labels
 * for its rows and columns; TFM_ERR_ARG otherwise. */
tfm_status view_check(const tfm_attention_view *v, tfm_error *err);

/* Matrix (l, h) of the view: [n_q, n_k] floats. */
const float *view_matrix(const tfm_attention_view *v, int l, int h);

#endif
