/* model.c - a whole model's life: a configuration, one parameter buffer and
 * the vocabulary, created with the reference initialisation and freed.  The
 * model file (saving and loading) is model_file.c. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h" /* tfm_packed_model_free, attention_relative_rows */
#include "model/model_internal.h"

/* Tensors start on cache lines (see params.c). */
#define PARAM_ALIGN 64

/* ---- the vocabulary as text ------------------------------------------------------ */

tfm_status tfm_model_vocab_text(const tfm_vocab *v, char **text, size_t *len, tfm_error *err)
{
    *text = NULL;
    *len = 0;
    FILE *fp = open_memstream(text, len);
    if (!fp) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    tfm_status st = tfm_vocab_write(v, fp, err);
    if (fclose(fp) != 0 && st == TFM_OK)
        st = tfm_error_set(err, TFM_ERR_NOMEM, "out of memory writing the vocabulary");
    if (st != TFM_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

static tfm_status vocab_copy(const tfm_vocab *v, tfm_vocab **out, tfm_error *err)
{
    char *text;
    size_t len;
    tfm_status st = tfm_model_vocab_text(v, &text, &len, err);
    if (st != TFM_OK) return st;
    st = tfm_vocab_parse(text, len, out, err);
    free(text);
    return st;
}

tfm_status tfm_model_check_vocab(const tfm_config *c, const tfm_vocab *v, tfm_error *err)
{
    int32_t n = tfm_vocab_size(v);
    if (n != c->src_vocab_size || n != c->tgt_vocab_size)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "the vocabulary holds %d pieces, but src_vocab_size is %d and "
                             "tgt_vocab_size is %d",
                             (int)n, (int)c->src_vocab_size, (int)c->tgt_vocab_size);
    return tfm_model_check_side_vocab(c, TFM_TARGET, v, err);
}

tfm_status tfm_model_check_side_vocab(const tfm_config *c, tfm_side side, const tfm_vocab *v,
                                      tfm_error *err)
{
    const char *name = side == TFM_SOURCE ? "source" : "target";
    int32_t n = tfm_vocab_size(v);
    int32_t want = side == TFM_SOURCE ? c->src_vocab_size : c->tgt_vocab_size;
    if (n != want)
        return tfm_error_set(err, TFM_ERR_RANGE,
                             "the %s vocabulary holds %d pieces, but %s_vocab_size is %d", name,
                             (int)n, side == TFM_SOURCE ? "src" : "tgt", (int)want);
    const char *names[4] = {"pad_id", "unk_id", "bos_id", "eos_id"};
    const int32_t ids[4] = {c->pad_id, c->unk_id, c->bos_id, c->eos_id};
    const int32_t fixed[4] = {TFM_ID_PAD, TFM_ID_UNK, TFM_ID_BOS, TFM_ID_EOS};
    /* a model from elsewhere has its specials where it has them: control
     * pieces, at the ids the configuration names */
    for (int i = 0; i < 4 && tfm_vocab_is_foreign(v); i++)
        if (tfm_vocab_type(v, ids[i]) != TFM_PIECE_CONTROL)
            return tfm_error_set(err, TFM_ERR_RANGE, "%s is %d, but the %s vocabulary's piece "
                                 "%d is not a control piece", names[i], (int)ids[i], name,
                                 (int)ids[i]);
    for (int i = 0; i < 4 && !tfm_vocab_is_foreign(v); i++)
        if (ids[i] != fixed[i])
            return tfm_error_set(err, TFM_ERR_RANGE,
                                 "%s is %d, but the vocabulary's %s is id %d", names[i],
                                 (int)ids[i], tfm_vocab_piece(v, fixed[i], NULL), (int)fixed[i]);
    return TFM_OK;
}

/* ---- creating and freeing ----------------------------------------------------------- */

void tfm_model_free(tfm_model *m)
{
    if (!m) return;
    tfm_packed_model_free(m->packed);
    tfm_file_panels_free(m->file_panels); /* after the packs that read it */
    tfm_quantized_free(m->quantized);
    tfm_params_free_layout(&m->params);
    free(m->data);
    tfm_vocab_free(m->vocab);
    tfm_vocab_free(m->src_vocab);
    free(m);
}

tfm_status tfm_model_alloc(const tfm_config *c, bool untouched, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_model *m = calloc(1, sizeof *m);
    if (!m) return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory creating a model");
    m->config = *c;
    m->source_eos = true;
    m->float_weights = true;
    m->compute = TFM_COMPUTE_FLOAT32;
    size_t n = tfm_params_count(c);
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t bytes = (n * sizeof(float) + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN;
    /* untouched: calloc maps fresh zero pages for a buffer this large and
     * leaves them alone, so the pages never written are never resident */
    m->data = untouched ? calloc(bytes, 1) : aligned_alloc(PARAM_ALIGN, bytes);
    if (!m->data || tfm_params_layout(c, m->data, &m->params) != TFM_OK) {
        tfm_model_free(m);
        return tfm_error_set(err, TFM_ERR_NOMEM, "out of memory for %zu parameters", n);
    }
    if (!untouched) {
        tfm_advise_huge_pages(m->data, bytes);
        memset(m->data, 0, bytes);
    }
    *out = m;
    return TFM_OK;
}

/* A draw from N(0, 1) by Box-Muller (one value per pair of uniforms: the
 * simplest way to keep the stream of draws easy to reason about). */
static double normal(tfm_rng *r)
{
    double u1 = 1.0 - tfm_rng_double(r); /* in (0, 1], so the log is finite */
    double u2 = tfm_rng_double(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Xavier/Glorot uniform (Glorot & Bengio 2010; PyTorch's xavier_uniform_
 * with gain 1): U(-a, a), a = sqrt(6 / (fan_in + fan_out)). */
static void init_xavier(tfm_rng *r, float *w, size_t out, size_t in)
{
    double a = sqrt(6.0 / (double)(in + out));
    for (size_t i = 0; i < out * in; i++) w[i] = (float)((2.0 * tfm_rng_double(r) - 1.0) * a);
}

/* N(0, D^-0.5) for every row but the pad row, which stays zero (fairseq's
 * Embedding), so that <pad> adds nothing whatever it is multiplied by. */
static void init_embedding(tfm_rng *r, float *w, size_t rows, size_t D, int32_t pad_row)
{
    double std = 1.0 / sqrt((double)D);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < D; j++)
            w[i * D + j] = (int32_t)i == pad_row ? 0.0f : (float)(normal(r) * std);
}

/* Biases are already zero (tfm_model_alloc). */
static void init_linear(tfm_rng *r, const tfm_linear *l, size_t out, size_t in)
{
    init_xavier(r, l->weight, out, in);
}

static void init_norm(const tfm_layer_norm *n, size_t D)
{
    for (size_t i = 0; i < D; i++) n->weight[i] = 1.0f; /* bias stays 0 */
}

/* q, k and v are drawn as one fused [3D, D] Xavier matrix (they are
 * contiguous, tfm/model.h), U(+-sqrt(6 / 4D)): PyTorch's nn.MultiheadAttention
 * initialises its in_proj_weight so, and fairseq's separate D x D blocks get
 * the same bound through gain 1/sqrt(2).  tensor2tensor, and tfm before,
 * used plain Xavier per D x D block, sqrt(2) larger: the attention logits
 * then start with a random part twice the variance, which the learned part
 * takes longer to outgrow.  Measured on English-French with the small preset
 * (tests/bench/quality.sh): the larger start lags the reference's valid
 * perplexity from about update 200 on; the fused bound matches it.  The
 * relative positions' tables, when there are, are Xavier uniform too, as
 * [2K+1, Dh] matrices (tensor2tensor draws them uniform at a similar
 * scale; an nn.Embedding's N(0, 1) would swamp the keys they add to). */
static void init_attention(tfm_rng *r, const tfm_attention *a, size_t D, size_t rel_rows,
                           size_t Dh)
{
    init_xavier(r, a->q_proj.weight, 3 * D, D); /* q, k and v */
    init_linear(r, &a->out_proj, D, D);
    if (rel_rows) {
        init_xavier(r, a->relative_keys, rel_rows, Dh);
        init_xavier(r, a->relative_values, rel_rows, Dh);
    }
}

/* The initialisation of the reference implementations: Xavier uniform for
 * every linear weight (PyTorch's nn.Transformer and fairseq), with q, k and
 * v as one [3D, D] matrix (init_attention), zero biases, LayerNorm 1 and 0, token
 * embeddings and the unshared output projection N(0, D^-0.5) as fairseq
 * (the projection's pad row is not zeroed: it is an output, not an input),
 * learned positions N(0, D^-0.5), relative tables as init_attention says.
 * Draws follow the layout order. */
static void init_params(tfm_model *m, uint64_t seed)
{
    const tfm_config *c = &m->config;
    const tfm_params *p = &m->params;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, Dh = D / (size_t)c->n_heads;
    const size_t rel = (size_t)attention_relative_rows(c->relative_positions);
    tfm_rng rng;
    tfm_rng_seed(&rng, seed);

    init_embedding(&rng, p->src_embed, (size_t)c->src_vocab_size, D, c->pad_id);
    if (!c->shared_embeddings) {
        init_embedding(&rng, p->tgt_embed, (size_t)c->tgt_vocab_size, D, c->pad_id);
        if (!c->shared_decoder_embeddings)
            init_embedding(&rng, p->output_proj, (size_t)c->tgt_vocab_size, D, -1);
    }
    if (c->positions == TFM_POS_LEARNED) {
        init_embedding(&rng, p->src_positions, (size_t)c->max_positions, D, -1);
        init_embedding(&rng, p->tgt_positions, (size_t)c->max_positions, D, -1);
    }
    for (int i = 0; i < c->n_encoder_layers; i++) {
        const tfm_encoder_layer *L = &p->encoder_layers[i];
        init_attention(&rng, &L->self_attn, D, rel, Dh);
        init_norm(&L->self_attn_layer_norm, D);
        init_linear(&rng, &L->fc1, F, D);
        init_linear(&rng, &L->fc2, D, F);
        init_norm(&L->final_layer_norm, D);
    }
    for (int i = 0; i < c->n_decoder_layers; i++) {
        const tfm_decoder_layer *L = &p->decoder_layers[i];
        init_attention(&rng, &L->self_attn, D, rel, Dh);
        init_norm(&L->self_attn_layer_norm, D);
        init_attention(&rng, &L->encoder_attn, D, 0, Dh);
        init_norm(&L->encoder_attn_layer_norm, D);
        init_linear(&rng, &L->fc1, F, D);
        init_linear(&rng, &L->fc2, D, F);
        init_norm(&L->final_layer_norm, D);
    }
    if (c->pre_norm) {
        init_norm(&p->encoder_layer_norm, D);
        init_norm(&p->decoder_layer_norm, D);
    }
    /* the output bias starts at 0 (the buffer's zeros) */
    if (c->embedding_layer_norm) {
        init_norm(&p->encoder_embedding_norm, D);
        init_norm(&p->decoder_embedding_norm, D);
    }
}

/* A new model with copies of the vocabularies: src NULL for a joint one
 * (tgt, which may be NULL too). */
static tfm_status create(const tfm_config *c, const tfm_vocab *src, const tfm_vocab *tgt,
                         uint64_t seed, tfm_model **out, tfm_error *err)
{
    *out = NULL;
    tfm_status st = tfm_config_validate(c, err);
    if (st == TFM_OK && !src && tgt) st = tfm_model_check_vocab(c, tgt, err);
    if (st == TFM_OK && src && c->shared_embeddings &&
        !(tfm_vocab_is_foreign(src) && tfm_vocab_is_foreign(tgt)))
        st = tfm_error_set(err, TFM_ERR_ARG,
                           "a vocabulary per side cannot go with shared_embeddings: the "
                           "source's pieces are not the target's");
    if (st == TFM_OK && src) st = tfm_model_check_side_vocab(c, TFM_SOURCE, src, err);
    if (st == TFM_OK && src) st = tfm_model_check_side_vocab(c, TFM_TARGET, tgt, err);
    tfm_model *m = NULL;
    if (st == TFM_OK) st = tfm_model_alloc(c, false, &m, err);
    if (st == TFM_OK && tgt) st = vocab_copy(tgt, &m->vocab, err);
    if (st == TFM_OK && src) st = vocab_copy(src, &m->src_vocab, err);
    if (st != TFM_OK) {
        tfm_model_free(m);
        return st;
    }
    init_params(m, seed);
    *out = m;
    return TFM_OK;
}

tfm_status tfm_model_create(const tfm_config *c, const tfm_vocab *vocab, uint64_t seed,
                            tfm_model **out, tfm_error *err)
{
    return create(c, NULL, vocab, seed, out, err);
}

tfm_status tfm_model_create_sides(const tfm_config *c, const tfm_vocab *src_vocab,
                                  const tfm_vocab *tgt_vocab, uint64_t seed, tfm_model **out,
                                  tfm_error *err)
{
    if (!src_vocab || !tgt_vocab) {
        *out = NULL;
        return tfm_error_set(err, TFM_ERR_ARG, "a vocabulary per side needs both");
    }
    return create(c, src_vocab, tgt_vocab, seed, out, err);
}

const tfm_vocab *tfm_model_vocab(const tfm_model *m, tfm_side side)
{
    return side == TFM_SOURCE && m->src_vocab ? m->src_vocab : m->vocab;
}

tfm_status tfm_model_text_encoders(const tfm_model *m, tfm_bpe **bpe, tfm_bpe **src_bpe,
                                   tfm_error *err)
{
    *bpe = *src_bpe = NULL;
    if (!m->vocab)
        return tfm_error_set(err, TFM_ERR_ARG, "the model holds no vocabulary to tokenize text "
                             "with: give id lines");
    tfm_status st = tfm_bpe_create(m->vocab, bpe, err);
    if (st == TFM_OK && m->src_vocab) st = tfm_bpe_create(m->src_vocab, src_bpe, err);
    if (st != TFM_OK) {
        tfm_bpe_free(*bpe);
        *bpe = NULL;
    }
    return st;
}


bool tfm_model_source_eos(const tfm_model *m)
{
    return m->source_eos;
}

tfm_pair_params tfm_pair_params_from_model(const tfm_model *m)
{
    const tfm_config *c = &m->config;
    tfm_pair_params p = tfm_pair_default_params();
    p.src_vocab_size = c->src_vocab_size;
    p.tgt_vocab_size = c->tgt_vocab_size;
    p.max_source = (size_t)c->max_positions;
    p.max_target = (size_t)c->max_positions - 1; /* the decoder's input starts with <s> */
    p.source_eos = m->source_eos;
    p.eos_id = c->eos_id;
    return p;
}
