/* aligner.c - the decoder's teacher-forced pass over targets already chosen
 * (a search's hypotheses), for the encoder-decoder attention of one layer:
 * what decode --alignment reads its word alignments from.
 *
 * inspect-attn reads alignments off the training forward pass
 * (tfm_model_loss, then tfm_model_attention), which needs the source ids;
 * decode has only the encoder's states.  This pass starts from them: each
 * target is the sequence <s> y1 .. yn run through the decoder's layers all
 * positions at once, as tfm_decoder_forward_full and training do (causal
 * self-attention and encoder-decoder attention through attention_forward,
 * which keeps the weights), with the linear layers of the incremental
 * decoder (packed when the model is packed for decoding).  It stops at the
 * chosen layer's weights: neither the layers above, nor that layer's
 * attention output and feed-forward, nor the output projection are computed.
 *
 * The targets of a call are packed one after another without padding, as
 * in training: every linear layer is one product over all their positions,
 * attention runs target by target.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "tfm/pass.h"

struct tfm_aligner {
    const tfm_model *m;
    tfm_buf sinusoids;      /* the decoder's position table (positions_table) */
    int n_sinusoids;
    tfm_buf act;            /* floats: activations of all positions, attention scratch */
    tfm_buf tokens;         /* int32 [N]: the decoder's inputs, <s> y1 .. yn per target */
    tfm_buf row_off;        /* int [n]: each target's first position */
    tfm_buf src_off;        /* int [n_sentences]: each source's first state */
    tfm_buf sources;        /* [total_src, D]: the sources, one after another */
    tfm_buf kv;             /* [total_src, 2D]: one layer's encoder-attention k and v */
    tfm_buf quant;          /* the packed products' scratch (int8, bf16) */
    tfm_buf weights;        /* floats: each target's [T, S] mean weights, one after another */
    tfm_buf weight_off;     /* size_t [n]: where each target's weights start */
    int n;                  /* targets of the last successful run */
    int head;               /* the head whose weights are kept, or -1: the mean */
};

tfm_status tfm_aligner_create(const tfm_model *m, tfm_aligner **out, tfm_error *err)
{
    *out = NULL;
    tfm_aligner *a = calloc(1, sizeof *a);
    if (!a) return tfm_error_set(err, TFM_ERR_NOMEM, "aligner: out of memory");
    a->m = m;
    a->head = -1;
    tfm_buf_init(&a->sinusoids);
    tfm_buf_init(&a->act);
    tfm_buf_init(&a->tokens);
    tfm_buf_init(&a->row_off);
    tfm_buf_init(&a->src_off);
    tfm_buf_init(&a->sources);
    tfm_buf_init(&a->kv);
    tfm_buf_init(&a->quant);
    tfm_buf_init(&a->weights);
    tfm_buf_init(&a->weight_off);
    *out = a;
    return TFM_OK;
}

void tfm_aligner_free(tfm_aligner *a)
{
    if (!a) return;
    tfm_buf_free(&a->sinusoids);
    tfm_buf_free(&a->act);
    tfm_buf_free(&a->tokens);
    tfm_buf_free(&a->row_off);
    tfm_buf_free(&a->src_off);
    tfm_buf_free(&a->sources);
    tfm_buf_free(&a->kv);
    tfm_buf_free(&a->quant);
    tfm_buf_free(&a->weights);
    tfm_buf_free(&a->weight_off);
    free(a);
}

/* Checks a run's arguments against the model. */
static tfm_status check_input(const tfm_aligner *a, int n_sentences, const int *src_lens, int n,
                              const int *sentence, const int32_t *const *tgt,
                              const int *tgt_lens, int layer, tfm_error *err)
{
    const tfm_config *c = &a->m->config;
    if (n_sentences < 0 || n < 0)
        return tfm_error_set(err, TFM_ERR_ARG, "aligner: %d sentences, %d targets", n_sentences, n);
    if (layer < 0 || layer >= c->n_decoder_layers)
        return tfm_error_set(err, TFM_ERR_RANGE, "aligner: layer %d; the decoder has layers 0 "
                             "to %d", layer, c->n_decoder_layers - 1);
    if (!a->m->float_weights && !(a->m->packed && a->m->packed->decoder))
        return tfm_error_set(err, TFM_ERR_ARG, "aligner: the model holds its weights in %s "
                             "only: pack it for decoding first",
                             tfm_compute_type_name(a->m->compute));
    size_t total = 0;
    for (int s = 0; s < n_sentences; s++) {
        if (src_lens[s] < 0 || src_lens[s] > c->max_positions)
            return tfm_error_set(err, TFM_ERR_RANGE, "aligner: source %d has %d states; the "
                                 "model takes 0 to %d", s, src_lens[s], c->max_positions);
        total += (size_t)src_lens[s];
    }
    if (total > INT32_MAX / (size_t)(2 * c->d_model))
        return tfm_error_set(err, TFM_ERR_RANGE, "aligner: %zu source states are too many", total);
    size_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (sentence[i] < 0 || sentence[i] >= n_sentences)
            return tfm_error_set(err, TFM_ERR_ARG, "aligner: target %d is of sentence %d of %d",
                                 i, sentence[i], n_sentences);
        if (tgt_lens[i] < 0 || tgt_lens[i] > c->max_positions - 1)
            return tfm_error_set(err, TFM_ERR_RANGE, "aligner: target %d has %d ids; the model "
                                 "takes 0 to %d", i, tgt_lens[i], c->max_positions - 1);
        for (int t = 0; t < tgt_lens[i]; t++)
            if (tgt[i][t] < 0 || tgt[i][t] >= c->tgt_vocab_size)
                return tfm_error_set(err, TFM_ERR_RANGE, "aligner: target %d, token %d: id %d "
                                     "is outside the target vocabulary [0, %d)", i, t,
                                     (int)tgt[i][t], c->tgt_vocab_size);
        rows += (size_t)tgt_lens[i] + 1;
    }
    if (rows > INT32_MAX / (size_t)(3 * c->d_model + c->d_ff))
        return tfm_error_set(err, TFM_ERR_RANGE, "aligner: %zu target positions are too many",
                             rows);
    return TFM_OK;
}

tfm_status tfm_aligner_set_head(tfm_aligner *a, int head, tfm_error *err)
{
    if (head < -1 || head >= a->m->config.n_heads)
        return tfm_error_set(err, TFM_ERR_RANGE, "aligner: head %d, expected -1 (the mean) or "
                             "0 to %d", head, a->m->config.n_heads - 1);
    a->head = head;
    return TFM_OK;
}

/* The mean over H heads of att [H, T, S] into out [T, S], in double as
 * tfm_attention_gather's TFM_VIEW_MEAN takes it (the same floats from the
 * same weights); or head's weights alone (head >= 0). */
static void mean_of_heads(float *out, const float *att, int H, int T, int S, int head)
{
    if (head >= 0) {
        memcpy(out, att + (size_t)head * T * S, (size_t)T * S * sizeof *out);
        return;
    }
    const size_t per_head = (size_t)T * (size_t)S;
    for (size_t k = 0; k < per_head; k++) {
        double sum = 0.0;
        for (int h = 0; h < H; h++) sum += att[(size_t)h * per_head + k];
        out[k] = (float)(sum / H);
    }
}

/* states[s]: [src_lens[s], D]; tgt[i]: [tgt_lens[i]]; the weights of target
 * i: [tgt_lens[i] + 1, src_lens[sentence[i]]] */
tfm_status tfm_aligner_run(tfm_aligner *a, int n_sentences, const float *const *states,
                           const int *src_lens, int n, const int *sentence,
                           const int32_t *const *tgt, const int *tgt_lens, int layer,
                           tfm_error *err)
{
    const tfm_model *m = a->m;
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const int D = c->d_model, F = c->d_ff, H = c->n_heads, Dh = D / H;
    const float eps = c->layer_norm_eps;
    a->n = 0;
    tfm_status st = check_input(a, n_sentences, src_lens, n, sentence, tgt, tgt_lens, layer, err);
    if (st != TFM_OK) return st;

    const attention_mask self_mask = {.q_pos = 0, .causal = true, .window = c->attention_window};
    const attention_mask cross_mask = {.q_pos = 0, .causal = false, .window = 0};
    /* the sizes: positions N, the longest target T_max and source S_max,
     * attention scratch for the largest target, the weights of all */
    size_t N = 0, total_src = 0, n_scratch = 1, n_weights = 0;
    int T_max = 1, S_max = 0;
    for (int s = 0; s < n_sentences; s++) {
        total_src += (size_t)src_lens[s];
        if (src_lens[s] > S_max) S_max = src_lens[s];
    }
    for (int i = 0; i < n; i++) {
        const int T = tgt_lens[i] + 1, S = src_lens[sentence[i]];
        size_t self = attention_scratch_size(T, T, self_mask, c->relative_positions);
        size_t cross = attention_scratch_size(T, S, cross_mask, 0);
        if (self > n_scratch) n_scratch = self;
        if (cross > n_scratch) n_scratch = cross;
        if (T > T_max) T_max = T;
        N += (size_t)T;
        n_weights += (size_t)T * (size_t)S;
    }
    const size_t n_att = (size_t)H * (size_t)T_max * (size_t)S_max;
    float *x = tfm_buf_array(&a->act, N * (7 * (size_t)D + F) + n_scratch + n_att, sizeof(float));
    int32_t *tokens = tfm_buf_array(&a->tokens, N, sizeof(int32_t));
    int *row_off = tfm_buf_array(&a->row_off, (size_t)n, sizeof(int));
    int *src_off = tfm_buf_array(&a->src_off, (size_t)n_sentences, sizeof(int));
    float *sources = tfm_buf_array(&a->sources, total_src * D, sizeof(float));
    float *kv = tfm_buf_array(&a->kv, total_src * 2 * D, sizeof(float));
    float *weights = tfm_buf_array(&a->weights, n_weights, sizeof(float));
    size_t *weight_off = tfm_buf_array(&a->weight_off, (size_t)n, sizeof(size_t));
    const tfm_packed_model *pm = m->packed;
    const nn_packed_layer *pd = pm ? pm->decoder : NULL;
    void *qs = pd && pm->scratch_bytes ? tfm_buf_array(&a->quant, pm->scratch_bytes, 1) : NULL;
    const float *positions = NULL;
    if (!x || !tokens || !row_off || !src_off || !sources || !kv || !weights || !weight_off ||
        (pd && pm->scratch_bytes && !qs) ||
        !positions_table(c->positions, p->tgt_positions, &a->sinusoids, &a->n_sinusoids, T_max,
                         D, &positions))
        return tfm_error_set(err, TFM_ERR_NOMEM, "aligner: out of memory for %zu positions", N);
    float *y = x + N * D;            /* [N, D] */
    float *qkv = y + N * D;          /* [N, 3D] */
    float *attn = qkv + N * 3 * D;   /* [N, D] */
    float *tmp = attn + N * D;       /* [N, D] */
    float *hidden = tmp + N * D;     /* [N, F] */
    float *scratch = hidden + N * F; /* [n_scratch] */
    float *att = scratch + n_scratch; /* [H, T_max, S_max]: one target's weights */

    /* the sources one after another, so each layer's k and v are one product */
    for (int s = 0, off = 0; s < n_sentences; off += src_lens[s], s++) {
        src_off[s] = off;
        if (src_lens[s] > 0)
            memcpy(sources + (size_t)off * D, states[s], (size_t)src_lens[s] * D * sizeof(float));
    }
    /* the decoder's inputs and their embeddings, target by target */
    for (int i = 0, off = 0; i < n; off += tgt_lens[i] + 1, i++) {
        row_off[i] = off;
        tokens[off] = c->bos_id;
        if (tgt_lens[i] > 0) memcpy(tokens + off + 1, tgt[i], (size_t)tgt_lens[i] * sizeof *tokens);
        embedding_forward(x + (size_t)off * D, tokens + off, p->tgt_embed, positions, 0, 1,
                          tgt_lens[i] + 1, D, embedding_zero_id(c));
    }
    if (c->embedding_layer_norm)
        layer_norm_forward(x, NULL, NULL, x, p->decoder_embedding_norm.weight,
                           p->decoder_embedding_norm.bias, (int)N, D, c->layer_norm_eps);
    const int rows = (int)N;
    for (int l = 0; l <= layer; l++) {
        const tfm_decoder_layer *L = &p->decoder_layers[l];
        const nn_packed_layer *P = pd ? &pd[l] : NULL;

        /* causal self-attention over each target's own positions */
        const tfm_layer_norm *ln = &L->self_attn_layer_norm;
        const float *in = sublayer_input(y, x, ln->weight, ln->bias, rows, D, eps, c->pre_norm);
        packed_or_linear_forward(qkv, in, P ? &P->self_qkv : NULL, qs, L->self_attn.q_proj.weight,
                                 L->self_attn.q_proj.bias, rows, D, 3 * D);
        attention_relative rel_tables;
        const attention_relative *rel =
            attention_relative_of(&rel_tables, &L->self_attn, c->relative_positions);
        for (int i = 0; i < n; i++) {
            const size_t o = (size_t)row_off[i];
            const int T = tgt_lens[i] + 1;
            attention_forward(attn + o * D, D, qkv + o * 3 * D, 3 * D, qkv + o * 3 * D + D, 3 * D,
                              qkv + o * 3 * D + 2 * D, 3 * D, T, T, H, Dh, self_mask, rel, scratch,
                              NULL);
        }
        packed_or_linear_forward(tmp, attn, P ? &P->self_out : NULL, qs,
                                 L->self_attn.out_proj.weight, L->self_attn.out_proj.bias, rows, D,
                                 D);
        sublayer_output(x, tmp, ln->weight, ln->bias, rows, D, eps, c->pre_norm);

        /* encoder-decoder attention: q of every position, k and v of every source */
        const tfm_attention *A = &L->encoder_attn;
        ln = &L->encoder_attn_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, rows, D, eps, c->pre_norm);
        float *q = qkv; /* [N, D] */
        packed_or_linear_forward(q, in, P ? &P->cross_q : NULL, qs, A->q_proj.weight,
                                 A->q_proj.bias, rows, D, D);
        /* [total_src, 2D] = sources x [k; v]^T: k_proj and v_proj lie one after the
         * other (tfm_attention) */
        if (total_src > 0)
            packed_or_linear_forward(kv, sources, P ? &P->cross_kv : NULL, qs, A->k_proj.weight,
                                     A->k_proj.bias, (int)total_src, D, 2 * D);
        size_t w_at = 0;
        for (int i = 0; i < n; i++) {
            const size_t o = (size_t)row_off[i];
            const int T = tgt_lens[i] + 1, s = sentence[i], S = src_lens[s];
            const float *k = kv + (size_t)src_off[s] * 2 * D;
            attention_forward(attn + o * D, D, q + o * D, D, k, 2 * D, k + D, 2 * D, T, S, H, Dh,
                              cross_mask, NULL, scratch, l == layer ? att : NULL);
            if (l == layer) {
                weight_off[i] = w_at;
                mean_of_heads(weights + w_at, att, H, T, S, a->head);
                w_at += (size_t)T * (size_t)S;
            }
        }
        if (l == layer) break; /* what comes after the weights is not wanted */
        packed_or_linear_forward(tmp, attn, P ? &P->cross_out : NULL, qs, A->out_proj.weight,
                                 A->out_proj.bias, rows, D, D);
        sublayer_output(x, tmp, ln->weight, ln->bias, rows, D, eps, c->pre_norm);

        /* feed-forward */
        ln = &L->final_layer_norm;
        in = sublayer_input(y, x, ln->weight, ln->bias, rows, D, eps, c->pre_norm);
        packed_ffn_forward(tmp, hidden, in, P, qs, &L->fc1, &L->fc2, rows, D, F,
                           c->activation);
        sublayer_output(x, tmp, ln->weight, ln->bias, rows, D, eps, c->pre_norm);
    }
    a->n = n;
    return TFM_OK;
}

const float *tfm_aligner_weights(const tfm_aligner *a, int i)
{
    if (i < 0 || i >= a->n) return NULL;
    const size_t *off = (const size_t *)(const void *)a->weight_off.data;
    return (const float *)(const void *)a->weights.data + off[i];
}
