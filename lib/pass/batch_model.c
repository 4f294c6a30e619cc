/* batch_model.c - the whole model over a packed batch of sentence pairs
 * with teacher forcing: the forward pass, keeping every activation the
 * backward pass needs, and the label-smoothed loss; the backward pass into
 * a gradient buffer laid out as the parameters (see tfm/model.h); and the
 * public functions over them: tfm_model_loss (training's validation,
 * score -m, inspect-attn), tfm_model_forward_backward (a training step) and
 * tfm_model_attention.  Each layer kind's forward and backward live in its
 * own batch_*.c; this file runs them in order.  See nn/batch.h. */
#include "pass/batch.h"

/* ---- the forward pass ---------------------------------------------------------------- */

/* The whole forward pass, the loss per prediction included, for the batch
 * batch_pack() packed.  Dropout sites draw their seeds in a fixed order:
 * source embeddings, then each encoder layer's sublayers, then the target
 * side. */
static void forward(tfm_pass_workspace *ws, tfm_rng *rng)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    const packing *pk = &ws->pk;
    acts *a = &ws->a;
    const int D = c->d_model, V = c->tgt_vocab_size, Ns = pk->Ns, Nt = pk->Nt;
    const bool pre = c->pre_norm;

    /* the encoder */
    batch_embed_forward(ws, a->src_x, a->src_keep, &a->src_emb_norm, &p->encoder_embedding_norm,
                        pk->src_ids, p->src_embed, ws->src_pos, pk->src_off, pk->src_len, Ns,
                        -1, rng);
    const attention_geometry enc_geo = batch_encoder_geometry(ws);
    const float *x = a->src_x;
    for (int l = 0; l < c->n_encoder_layers; l++) {
        const tfm_encoder_layer *W = &p->encoder_layers[l];
        encoder_layer_acts *A = &a->enc[l];
        const tfm_layer_norm *ln = &W->self_attn_layer_norm;
        const float *in = batch_residual_forward_begin(ws, &A->r_attn, x, ln, Ns);
        batch_self_attention_forward(ws, &A->attn, &W->self_attn, in, Ns, &enc_geo, a->sub, rng);
        batch_residual_forward_end(ws, &A->r_attn, x, a->sub, ln, Ns, rng);
        x = A->r_attn.out;

        ln = &W->final_layer_norm;
        in = batch_residual_forward_begin(ws, &A->r_ffn, x, ln, Ns);
        batch_ffn_forward(ws, a->sub, A->hidden, A->act_keep, in, &W->fc1, &W->fc2, Ns, rng);
        batch_residual_forward_end(ws, &A->r_ffn, x, a->sub, ln, Ns, rng);
        x = A->r_ffn.out;
    }
    if (pre) {
        batch_layer_norm_forward(ws, a->enc_norm.out, a->enc_norm.mean, a->enc_norm.rstd, x,
                                 &p->encoder_layer_norm, Ns);
        x = a->enc_norm.out;
    }
    a->enc_out = x;

    /* the decoder, reading <s> + target */
    batch_embed_forward(ws, a->tgt_x, a->tgt_keep, &a->tgt_emb_norm, &p->decoder_embedding_norm,
                        pk->dec_in, p->tgt_embed, ws->tgt_pos, pk->tgt_off, pk->tgt_len, Nt,
                        embedding_zero_id(c), rng);
    const attention_geometry dec_geo = batch_decoder_geometry(ws);
    x = a->tgt_x;
    for (int l = 0; l < c->n_decoder_layers; l++) {
        const tfm_decoder_layer *W = &p->decoder_layers[l];
        decoder_layer_acts *A = &a->dec[l];
        const tfm_layer_norm *ln = &W->self_attn_layer_norm;
        const float *in = batch_residual_forward_begin(ws, &A->r_self, x, ln, Nt);
        batch_self_attention_forward(ws, &A->self, &W->self_attn, in, Nt, &dec_geo, a->sub, rng);
        batch_residual_forward_end(ws, &A->r_self, x, a->sub, ln, Nt, rng);
        x = A->r_self.out;

        ln = &W->encoder_attn_layer_norm;
        in = batch_residual_forward_begin(ws, &A->r_cross, x, ln, Nt);
        batch_cross_attention_forward(ws, &A->cross, &W->encoder_attn, in, a->sub, rng);
        batch_residual_forward_end(ws, &A->r_cross, x, a->sub, ln, Nt, rng);
        x = A->r_cross.out;

        ln = &W->final_layer_norm;
        in = batch_residual_forward_begin(ws, &A->r_ffn, x, ln, Nt);
        batch_ffn_forward(ws, a->sub, A->hidden, A->act_keep, in, &W->fc1, &W->fc2, Nt, rng);
        batch_residual_forward_end(ws, &A->r_ffn, x, a->sub, ln, Nt, rng);
        x = A->r_ffn.out;
    }
    if (pre) {
        batch_layer_norm_forward(ws, a->dec_norm.out, a->dec_norm.mean, a->dec_norm.rstd, x,
                                 &p->decoder_layer_norm, Nt);
        x = a->dec_norm.out;
    }
    a->dec_out = x;

    /* the output projection over all rows in one GEMM, then the loss */
    linear_forward(a->logits, a->dec_out, p->output_proj, p->output_bias, Nt, D, V);
    batch_loss_forward(ws);
}

/* ---- the backward pass --------------------------------------------------------------- */

/* The whole backward pass of the forward just run, accumulating
 * grad_scale * dLoss/d(params) into gp.  Destroys the log-probabilities. */
static void backward(tfm_pass_workspace *ws, tfm_params *gp, float grad_scale)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    const packing *pk = &ws->pk;
    const acts *a = &ws->a;
    const grad_acts *g = &ws->g;
    const int D = c->d_model, V = c->tgt_vocab_size, Ns = pk->Ns, Nt = pk->Nt;
    const bool pre = c->pre_norm;
    float *din;

    /* the loss and the output projection (a shared matrix gathers this too) */
    batch_loss_backward(ws, grad_scale);
    float *dx = g->dec_x;
    batch_zero_rows(dx, Nt, (size_t)D);
    if (pre) {
        batch_zero_rows(g->sum, Nt, (size_t)D);
        linear_backward(g->sum, gp->output_proj, gp->output_bias, a->logits, a->dec_out,
                        p->output_proj, Nt, D, V);
        const float *x_last =
            c->n_decoder_layers ? a->dec[c->n_decoder_layers - 1].r_ffn.out : a->tgt_x;
        batch_layer_norm_backward(ws, dx, &gp->decoder_layer_norm, g->sum, x_last,
                                  a->dec_norm.mean, a->dec_norm.rstd, &p->decoder_layer_norm, Nt);
    } else {
        linear_backward(dx, gp->output_proj, gp->output_bias, a->logits, a->dec_out,
                        p->output_proj, Nt, D, V);
    }

    /* the decoder, last layer first; encoder-attention gathers into g->enc_out */
    batch_zero_rows(g->enc_out, Ns, (size_t)D);
    const attention_geometry dec_geo = batch_decoder_geometry(ws);
    for (int l = c->n_decoder_layers - 1; l >= 0; l--) {
        const tfm_decoder_layer *W = &p->decoder_layers[l];
        tfm_decoder_layer *G = &gp->decoder_layers[l];
        const decoder_layer_acts *A = &a->dec[l];
        const float *x0 = l > 0 ? a->dec[l - 1].r_ffn.out : a->tgt_x; /* the layer's input */

        const float *x = A->r_cross.out;
        const float *dsub = batch_residual_backward_begin(
            ws, &A->r_ffn, dx, &din, &W->final_layer_norm, &G->final_layer_norm, Nt);
        batch_ffn_backward(ws, din, &G->fc1, &G->fc2, dsub, batch_sublayer_in(&A->r_ffn, x),
                           A->hidden, A->act_keep, &W->fc1, &W->fc2, Nt);
        batch_residual_backward_end(ws, &A->r_ffn, dx, x, &W->final_layer_norm,
                                    &G->final_layer_norm, Nt);

        x = A->r_self.out;
        dsub =
            batch_residual_backward_begin(ws, &A->r_cross, dx, &din, &W->encoder_attn_layer_norm,
                                          &G->encoder_attn_layer_norm, Nt);
        batch_cross_attention_backward(ws, &A->cross, &W->encoder_attn, &G->encoder_attn,
                                       batch_sublayer_in(&A->r_cross, x), din, dsub);
        batch_residual_backward_end(ws, &A->r_cross, dx, x, &W->encoder_attn_layer_norm,
                                    &G->encoder_attn_layer_norm, Nt);

        x = x0;
        dsub = batch_residual_backward_begin(ws, &A->r_self, dx, &din, &W->self_attn_layer_norm,
                                             &G->self_attn_layer_norm, Nt);
        batch_self_attention_backward(ws, &A->self, &W->self_attn, &G->self_attn,
                                      batch_sublayer_in(&A->r_self, x), din, dsub, Nt, &dec_geo);
        batch_residual_backward_end(ws, &A->r_self, dx, x, &W->self_attn_layer_norm,
                                    &G->self_attn_layer_norm, Nt);
    }
    batch_embed_backward(ws, dx, a->tgt_keep, &a->tgt_emb_norm, &p->decoder_embedding_norm,
                         &gp->decoder_embedding_norm, pk->dec_in, gp->tgt_embed,
                         gp->tgt_positions, pk->tgt_off, pk->tgt_len, Nt, embedding_zero_id(c));

    /* the encoder, from the gradient of its output */
    if (pre) {
        dx = g->enc_x;
        batch_zero_rows(dx, Ns, (size_t)D);
        const float *x_last =
            c->n_encoder_layers ? a->enc[c->n_encoder_layers - 1].r_ffn.out : a->src_x;
        batch_layer_norm_backward(ws, dx, &gp->encoder_layer_norm, g->enc_out, x_last,
                                  a->enc_norm.mean, a->enc_norm.rstd, &p->encoder_layer_norm, Ns);
    } else {
        dx = g->enc_out;
    }
    const attention_geometry enc_geo = batch_encoder_geometry(ws);
    for (int l = c->n_encoder_layers - 1; l >= 0; l--) {
        const tfm_encoder_layer *W = &p->encoder_layers[l];
        tfm_encoder_layer *G = &gp->encoder_layers[l];
        const encoder_layer_acts *A = &a->enc[l];
        const float *x0 = l > 0 ? a->enc[l - 1].r_ffn.out : a->src_x;

        const float *x = A->r_attn.out;
        const float *dsub = batch_residual_backward_begin(
            ws, &A->r_ffn, dx, &din, &W->final_layer_norm, &G->final_layer_norm, Ns);
        batch_ffn_backward(ws, din, &G->fc1, &G->fc2, dsub, batch_sublayer_in(&A->r_ffn, x),
                           A->hidden, A->act_keep, &W->fc1, &W->fc2, Ns);
        batch_residual_backward_end(ws, &A->r_ffn, dx, x, &W->final_layer_norm,
                                    &G->final_layer_norm, Ns);

        x = x0;
        dsub = batch_residual_backward_begin(ws, &A->r_attn, dx, &din, &W->self_attn_layer_norm,
                                             &G->self_attn_layer_norm, Ns);
        batch_self_attention_backward(ws, &A->attn, &W->self_attn, &G->self_attn,
                                      batch_sublayer_in(&A->r_attn, x), din, dsub, Ns, &enc_geo);
        batch_residual_backward_end(ws, &A->r_attn, dx, x, &W->self_attn_layer_norm,
                                    &G->self_attn_layer_norm, Ns);
    }
    batch_embed_backward(ws, dx, a->src_keep, &a->src_emb_norm, &p->encoder_embedding_norm,
                         &gp->encoder_embedding_norm, pk->src_ids, gp->src_embed,
                         gp->src_positions, pk->src_off, pk->src_len, Ns, -1);
}

/* ---- the public functions ------------------------------------------------------------ */

/* Sets the dropout rates, checks rng, packs the batch and runs the forward
 * pass; fills sums. */
static tfm_status run_forward(tfm_pass_workspace *ws, const tfm_pair_batch *batch, bool dropout,
                              tfm_rng *rng, tfm_loss_sums *sums, tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    ws->have_forward = false;
    ws->p_drop = dropout ? c->dropout : 0.0f;
    ws->p_att = dropout ? c->attention_dropout : 0.0f;
    ws->p_act = dropout ? c->activation_dropout : 0.0f;
    if ((ws->p_drop > 0 || ws->p_att > 0 || ws->p_act > 0) && !rng)
        return tfm_error_set(err, TFM_ERR_ARG, "training: dropout needs a random generator");
    tfm_status st = batch_pack(ws, batch, err);
    if (st != TFM_OK) return st;
    forward(ws, rng);
    ws->have_forward = true;
    tfm_loss_sums s = {0, 0, 0};
    for (int r = 0; r < ws->pk.Nt; r++) {
        if (ws->pk.labels[r] == c->pad_id) continue;
        s.loss += ws->a.row_loss[r];
        s.nll += ws->a.row_nll[r];
        s.n_tokens++;
    }
    if (sums) *sums = s;
    return TFM_OK;
}

tfm_status tfm_model_loss(tfm_pass_workspace *ws, const tfm_pair_batch *batch, bool dropout,
                          tfm_rng *rng, tfm_loss_sums *sums, double *sentence_logprob,
                          float *token_logprob, tfm_error *err)
{
    tfm_status st = run_forward(ws, batch, dropout, rng, sums, err);
    if (st != TFM_OK) return st;
    const packing *pk = &ws->pk;
    for (int b = 0; b < pk->B; b++) {
        double sum = 0.0;
        for (int t = 0; t < pk->tgt_len[b]; t++) {
            double lp = -ws->a.row_nll[pk->tgt_off[b] + t]; /* 0 for a <pad> label */
            sum += lp;
            if (token_logprob) token_logprob[pk->tgt_off[b] + t] = (float)lp;
        }
        if (sentence_logprob) sentence_logprob[b] = sum;
    }
    return TFM_OK;
}

tfm_status tfm_model_forward_backward(tfm_pass_workspace *ws, const tfm_pair_batch *batch,
                                      tfm_rng *rng, float grad_scale, float *grads,
                                      tfm_loss_sums *sums, tfm_error *err)
{
    if (!grads) return tfm_error_set(err, TFM_ERR_ARG, "training: no gradient buffer");
    if (grads != ws->grads_base) {
        tfm_params_free_layout(&ws->gp);
        ws->grads_base = NULL;
        if (tfm_params_layout(&ws->m->config, grads, &ws->gp) != TFM_OK)
            return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
        ws->grads_base = grads;
    }
    tfm_status st = run_forward(ws, batch, true, rng, sums, err);
    if (st != TFM_OK) return st;
    if (!batch_arena_build(&ws->grad, batch_layout_grads, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM,
                             "training: out of memory for the gradients of %d + %d rows",
                             ws->pk.Ns, ws->pk.Nt);
    backward(ws, &ws->gp, grad_scale);
    return TFM_OK;
}

/* The weights are read where the forward pass saved them for the backward
 * pass (attention_acts.att), so inspection sees exactly what training and
 * scoring compute, with no second code path to keep in step; a window's
 * band becomes a whole matrix here, for this sentence only. */
tfm_status tfm_model_attention(const tfm_pass_workspace *ws, int b, tfm_attention_kind kind,
                               int layer, float *weights, int *n_q, int *n_k, tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    if (!ws->have_forward)
        return tfm_error_set(err, TFM_ERR_ARG, "attention: no forward pass has run");
    if (b < 0 || b >= pk->B)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: pair %d of a batch of %d", b, pk->B);
    if (kind < TFM_ATTENTION_ENCODER || kind > TFM_ATTENTION_CROSS)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: unknown kind %d", (int)kind);
    int layers = kind == TFM_ATTENTION_ENCODER ? c->n_encoder_layers : c->n_decoder_layers;
    if (layer < 0 || layer >= layers)
        return tfm_error_set(err, TFM_ERR_RANGE, "attention: layer %d; the stack has 0 to %d",
                             layer, layers - 1);
    attention_geometry geo;
    const float *att;
    switch (kind) {
    case TFM_ATTENTION_ENCODER:
        geo = batch_encoder_geometry(ws);
        att = ws->a.enc[layer].attn.att;
        break;
    case TFM_ATTENTION_DECODER:
        geo = batch_decoder_geometry(ws);
        att = ws->a.dec[layer].self.att;
        break;
    default:
        geo = batch_cross_geometry(ws);
        att = ws->a.dec[layer].cross.att;
        break;
    }
    *n_q = geo.q_len[b];
    *n_k = geo.k_len[b];
    if (weights)
        attention_weights_expand(weights, att + geo.att_off[b], *n_q, *n_k, c->n_heads, geo.mask);
    return TFM_OK;
}
