/* batch_pack.c - packing a batch of sentence pairs into the workspace: the
 * checks of lengths and ids, the rows of each sentence one after another
 * with no padding, the decoder's input (<s> + target) and labels (target +
 * </s>), the offsets of each sentence's attention weights, and which rows
 * each kind of attention reads (attention_geometry).  See nn/batch.h. */
#include <string.h>

#include "pass/batch.h"

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* Floats of scratch the forward pass of one attention needs (rel_clip: the
 * relative tables' K, or 0), with attention dropout or without. */
static size_t forward_scratch(int n_q, int n_k, attention_mask mask, int rel_clip, bool dropout)
{
    size_t n = attention_scratch_size(n_q, n_k, mask, rel_clip);
    return dropout ? zmax(n, attention_dropout_scratch_size(n_q, n_k, mask, rel_clip)) : n;
}

static void layout_index(tfm_pass_workspace *ws, batch_arena *k)
{
    packing *pk = &ws->pk;
    const size_t B = (size_t)pk->B;
    pk->src_off = BATCH_CARVE(k, B, int);
    pk->src_len = BATCH_CARVE(k, B, int);
    pk->tgt_off = BATCH_CARVE(k, B, int);
    pk->tgt_len = BATCH_CARVE(k, B, int);
    pk->enc_att = BATCH_CARVE(k, B, size_t);
    pk->dec_att = BATCH_CARVE(k, B, size_t);
    pk->cross_att = BATCH_CARVE(k, B, size_t);
    pk->src_ids = BATCH_CARVE(k, (size_t)pk->Ns, int32_t);
    pk->dec_in = BATCH_CARVE(k, (size_t)pk->Nt, int32_t);
    pk->labels = BATCH_CARVE(k, (size_t)pk->Nt, int32_t);
}

tfm_status batch_pack(tfm_pass_workspace *ws, const tfm_pair_batch *batch, tfm_error *err)
{
    const tfm_config *c = &ws->m->config;
    const tfm_params *p = &ws->m->params;
    packing *pk = &ws->pk;
    const int P = c->max_positions, H = c->n_heads, D = c->d_model;

    if (!batch || batch->B < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "training batch: %d pairs",
                             batch ? batch->B : -1);
    const int B = batch->B;
    if (B > 0 && (!batch->src || !batch->src_lens || !batch->tgt || !batch->tgt_lens))
        return tfm_error_set(err, TFM_ERR_ARG, "training batch: missing ids or lengths");
    size_t Ns = 0, Nt = 0;
    int max_src = 0, max_tgt = 0;
    for (int b = 0; b < B; b++) {
        int sl = batch->src_lens[b], tl = batch->tgt_lens[b];
        if (sl < 0 || sl > P)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "pair %d: the source has %d tokens; the model takes 0 to %d", b,
                                 sl, P);
        if (tl < 0 || tl > P - 1)
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "pair %d: the target has %d tokens; the model takes 0 to %d "
                                 "(and <s>)",
                                 b, tl, P - 1);
        if ((sl > 0 && !batch->src[b]) || (tl > 0 && !batch->tgt[b]))
            return tfm_error_set(err, TFM_ERR_ARG, "pair %d: ids missing", b);
        for (int i = 0; i < sl; i++)
            if (batch->src[b][i] < 0 || batch->src[b][i] >= c->src_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "pair %d, source token %d: id %d is outside the source "
                                     "vocabulary [0, %d)",
                                     b, i, (int)batch->src[b][i], (int)c->src_vocab_size);
        for (int i = 0; i < tl; i++)
            if (batch->tgt[b][i] < 0 || batch->tgt[b][i] >= c->tgt_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE,
                                     "pair %d, target token %d: id %d is outside the target "
                                     "vocabulary [0, %d)",
                                     b, i, (int)batch->tgt[b][i], (int)c->tgt_vocab_size);
        Ns += (size_t)sl;
        Nt += (size_t)tl + 1;
        if (sl > max_src) max_src = sl;
        if (tl + 1 > max_tgt) max_tgt = tl + 1;
    }
    /* every row count times any width must stay an int for the BLAS */
    size_t widest = zmax(zmax(3 * (size_t)D, (size_t)c->d_ff), (size_t)c->tgt_vocab_size);
    if (zmax(Ns, Nt) > INT32_MAX / widest)
        return tfm_error_set(err, TFM_ERR_RANGE, "training batch of %zu + %zu rows is too large",
                             Ns, Nt);

    pk->B = B;
    pk->Ns = (int)Ns;
    pk->Nt = (int)Nt;
    pk->max_src = max_src;
    pk->max_tgt = max_tgt;
    if (!batch_arena_build(&ws->index, layout_index, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory for %d pairs", B);

    const attention_mask enc_mask = batch_encoder_geometry(ws).mask;
    const attention_mask dec_mask = batch_decoder_geometry(ws).mask;
    const attention_mask cross_mask = batch_cross_geometry(ws).mask;
    const int K = c->relative_positions;
    const bool att_drop = ws->p_att > 0;
    size_t so = 0, to = 0, ea = 0, da = 0, ca = 0, fwd = 1, bwd = 1;
    for (int b = 0; b < B; b++) {
        const int s = batch->src_lens[b], t = batch->tgt_lens[b] + 1;
        pk->src_off[b] = (int)so;
        pk->src_len[b] = s;
        pk->tgt_off[b] = (int)to;
        pk->tgt_len[b] = t;
        pk->enc_att[b] = ea;
        pk->dec_att[b] = da;
        pk->cross_att[b] = ca;
        if (s > 0) memcpy(pk->src_ids + so, batch->src[b], (size_t)s * sizeof(int32_t));
        pk->dec_in[to] = c->bos_id;
        if (t > 1) {
            memcpy(pk->dec_in + to + 1, batch->tgt[b], (size_t)(t - 1) * sizeof(int32_t));
            memcpy(pk->labels + to, batch->tgt[b], (size_t)(t - 1) * sizeof(int32_t));
        }
        pk->labels[to + t - 1] = c->eos_id;
        so += (size_t)s;
        to += (size_t)t;
        ea += attention_weights_size(s, s, H, enc_mask);
        da += attention_weights_size(t, t, H, dec_mask);
        ca += attention_weights_size(t, s, H, cross_mask);
        fwd = zmax(fwd, forward_scratch(s, s, enc_mask, K, att_drop));
        fwd = zmax(fwd, forward_scratch(t, t, dec_mask, K, att_drop));
        fwd = zmax(fwd, forward_scratch(t, s, cross_mask, 0, att_drop));
        bwd = zmax(bwd, attention_backward_scratch_size(s, s, enc_mask, K));
        bwd = zmax(bwd, attention_backward_scratch_size(t, t, dec_mask, K));
        bwd = zmax(bwd, attention_backward_scratch_size(t, s, cross_mask, 0));
    }
    pk->n_enc_att = ea;
    pk->n_dec_att = da;
    pk->n_cross_att = ca;
    /* whole cache lines per thread */
    pk->fwd_stride = (fwd + 15) & ~(size_t)15;
    pk->bwd_stride = (bwd + 15) & ~(size_t)15;

    /* Both tables at once: sinusoids share one cache, which may move when
     * it grows, so it grows to cover both before either pointer is taken. */
    int n_pos = max_src > max_tgt ? max_src : max_tgt;
    if (!positions_table(c->positions, p->src_positions, &ws->sinusoids, &ws->n_sinusoids, n_pos, D,
                         &ws->src_pos) ||
        !positions_table(c->positions, p->tgt_positions, &ws->sinusoids, &ws->n_sinusoids, n_pos, D,
                         &ws->tgt_pos) ||
        !batch_arena_build(&ws->act, batch_layout_acts, ws))
        return tfm_error_set(err, TFM_ERR_NOMEM,
                             "training: out of memory for the activations of %zu + %zu rows", Ns,
                             Nt);
    return TFM_OK;
}

attention_geometry batch_encoder_geometry(const tfm_pass_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->src_off, pk->src_len, pk->src_off, pk->src_len, pk->enc_att,
                                {0, false, ws->m->config.attention_window}};
}

attention_geometry batch_decoder_geometry(const tfm_pass_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->tgt_off, pk->tgt_len, pk->tgt_off, pk->tgt_len, pk->dec_att,
                                {0, true, ws->m->config.attention_window}};
}

attention_geometry batch_cross_geometry(const tfm_pass_workspace *ws)
{
    const packing *pk = &ws->pk;
    return (attention_geometry){pk->tgt_off, pk->tgt_len, pk->src_off, pk->src_len,
                                pk->cross_att, {0, false, 0}};
}
