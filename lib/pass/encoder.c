/* encoder.c - the encoder stack for inference: a batch of sentences in, their
 * final states out.
 *
 * The sentences of a batch are packed one after another, without padding:
 * every linear layer, norm and FFN runs as one GEMM over all N = sum(lens)
 * rows, and attention runs per sentence over that sentence's own rows only.
 * Padding keys never exist, so nothing needs masking, no work is spent on
 * padding rows, and a sentence's result cannot depend on its companions (up
 * to how the BLAS blocks a product of N rows; not at all with the packed
 * kernel, which computes each row alike: see tests/unit/test_forward.c).
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "tfm/pass.h"

struct tfm_encoder {
    const tfm_model *m;
    tfm_buf sinusoids;      /* [n_sinusoids, D] (see positions_table) */
    int n_sinusoids;
    tfm_buf act;            /* activations, grown to the largest batch */
    tfm_buf quant;          /* the packed products' scratch (int8, bf16) */
};

tfm_status tfm_encoder_create(const tfm_model *m, tfm_encoder **out, tfm_error *err)
{
    *out = NULL;
    tfm_encoder *e = calloc(1, sizeof *e);
    if (!e) return tfm_error_set(err, TFM_ERR_NOMEM, "encoder: out of memory");
    e->m = m;
    tfm_buf_init(&e->sinusoids);
    tfm_buf_init(&e->act);
    tfm_buf_init(&e->quant);
    *out = e;
    return TFM_OK;
}

void tfm_encoder_free(tfm_encoder *e)
{
    if (!e) return;
    tfm_buf_free(&e->sinusoids);
    tfm_buf_free(&e->act);
    tfm_buf_free(&e->quant);
    free(e);
}

/* ids[b]: [lens[b]]; states: [sum(lens), D], which also serves as the
 * residual stream x while the layers run. */
tfm_status tfm_encoder_forward(tfm_encoder *e, int B, const int32_t *const *ids, const int *lens,
                               float *states, tfm_error *err)
{
    const tfm_config *c = &e->m->config;
    const tfm_params *p = &e->m->params;
    const int D = c->d_model, F = c->d_ff, H = c->n_heads, Dh = D / H;
    const float eps = c->layer_norm_eps;

    if (B < 0) return tfm_error_set(err, TFM_ERR_ARG, "encoder: batch of %d sentences", B);
    size_t N = 0;
    int max_len = 0;
    for (int b = 0; b < B; b++) {
        if (lens[b] < 0 || lens[b] > c->max_positions)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "encoder: sentence %d has %d tokens; the model takes 0 to %d",
                                 b, lens[b], c->max_positions);
        for (int i = 0; i < lens[b]; i++)
            if (ids[b][i] < 0 || ids[b][i] >= c->src_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "encoder: sentence %d, token %d: id %d is outside the "
                                     "source vocabulary [0, %d)",
                                     b, i, (int)ids[b][i], (int)c->src_vocab_size);
        N += (size_t)lens[b];
        if (lens[b] > max_len) max_len = lens[b];
    }
    if (N == 0) return TFM_OK;
    if (N > INT32_MAX / (size_t)(3 * D > F ? 3 * D : F))
        return tfm_error_set(err, TFM_ERR_RANGE, "encoder: batch of %zu tokens is too large", N);

    const attention_mask mask = {.q_pos = 0, .causal = false, .window = c->attention_window};
    size_t scratch_n = attention_scratch_size(max_len, max_len, mask, c->relative_positions);
    float *y = tfm_buf_array(&e->act, N * (6 * (size_t)D + F) + scratch_n, sizeof(float));
    const float *positions;
    if (!y || !positions_table(c->positions, p->src_positions, &e->sinusoids, &e->n_sinusoids,
                               max_len, D, &positions))
        return tfm_error_set(err, TFM_ERR_NOMEM, "encoder: out of memory for %zu tokens", N);
    float *qkv = y + N * D;      /* [N, 3D] */
    float *attn = qkv + N * 3 * D; /* [N, D] */
    float *tmp = attn + N * D;   /* [N, D] */
    float *hidden = tmp + N * D; /* [N, F] */
    float *scratch = hidden + N * F;
    float *x = states;           /* [N, D] */
    const int n = (int)N;

    for (int b = 0, off = 0; b < B; off += lens[b], b++)
        embedding_forward(x + (size_t)off * D, ids[b], p->src_embed, positions, 0, 1, lens[b],
                          D, -1);
    if (c->embedding_layer_norm)
        layer_norm_forward(x, NULL, NULL, x, p->encoder_embedding_norm.weight,
                           p->encoder_embedding_norm.bias, n, D, c->layer_norm_eps);

    /* the linear layers with the packed kernel when the model was packed
     * for encoding (packed.c), else sgemm */
    const nn_packed_layer *packed = e->m->packed ? e->m->packed->encoder : NULL;
    void *qs = packed ? tfm_buf_array(&e->quant, e->m->packed->scratch_bytes, 1) : NULL;
    if (packed && e->m->packed->scratch_bytes && !qs)
        return tfm_error_set(err, TFM_ERR_NOMEM, "encoder: out of memory for %zu tokens", N);
    if (!packed && !e->m->float_weights)
        return tfm_error_set(err, TFM_ERR_ARG, "encoder: the model holds its weights in %s only: "
                             "pack it for encoding first", tfm_compute_type_name(e->m->compute));
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *L = &p->encoder_layers[l];
        const nn_packed_layer *P = packed ? &packed[l] : NULL;

        /* self-attention: q, k, v in one GEMM ([3D, D] weight), then each
         * sentence attends over its own rows */
        const tfm_layer_norm *ln = &L->self_attn_layer_norm;
        const float *in = sublayer_input(y, x, ln->weight, ln->bias, n, D, eps, c->pre_norm);
        packed_or_linear_forward(qkv, in, P ? &P->self_qkv : NULL, qs, L->self_attn.q_proj.weight,
                                 L->self_attn.q_proj.bias, n, D, 3 * D);
        attention_relative rel_tables;
        const attention_relative *rel =
            attention_relative_of(&rel_tables, &L->self_attn, c->relative_positions);
        for (int b = 0, off = 0; b < B; off += lens[b], b++) {
            const float *q = qkv + (size_t)off * 3 * D;
            attention_forward(attn + (size_t)off * D, D, q, 3 * D, q + D, 3 * D, q + 2 * D, 3 * D,
                              lens[b], lens[b], H, Dh, mask, rel, scratch, NULL);
        }
        packed_or_linear_forward(tmp, attn, P ? &P->self_out : NULL, qs,
                                 L->self_attn.out_proj.weight, L->self_attn.out_proj.bias, n, D, D);
        sublayer_output(x, tmp, ln->weight, ln->bias, n, D, eps, c->pre_norm);

        /* feed-forward */
        ln = &L->final_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, n, D, eps, c->pre_norm);
        packed_ffn_forward(tmp, hidden, in, P, qs, &L->fc1, &L->fc2, n, D, F,
                           c->activation);
        sublayer_output(x, tmp, ln->weight, ln->bias, n, D, eps, c->pre_norm);
    }
    if (c->pre_norm)
        layer_norm_forward(x, NULL, NULL, x, p->encoder_layer_norm.weight,
                           p->encoder_layer_norm.bias, n, D, eps);
    return TFM_OK;
}
