/* params.c - where every parameter lives: one contiguous float buffer, and
 * the struct of named pointers into it (tfm_params).  Gradients and Adam
 * moments use the same layout over buffers of their own, so zeroing them is
 * one memset and the optimizer one flat loop.
 *
 * One function, walk(), decides the order and the size of every tensor;
 * counting is a walk without a buffer, so the count and the layout cannot
 * disagree.  The order (which is also the order of tfm_params_visit, and so
 * of the tensors in a model file):
 *
 *   encoder.embed_tokens.weight          [V_src, D]  (shared: also the target
 *                                                     embedding and output projection)
 *   decoder.embed_tokens.weight          [V_tgt, D]  (not shared only)
 *   decoder.output_projection.weight     [V_tgt, D]  (not shared only)
 *   encoder.embed_positions.weight       [P, D]      (learned positions only)
 *   decoder.embed_positions.weight       [P, D]      (learned positions only)
 *   encoder.layers.i  for each encoder layer:
 *       self_attn  q,k,v weights [3D, D] together, then q,k,v biases [3D],
 *                  then out_proj weight [D, D] and bias [D], then (relative
 *                  positions only) relative_keys and relative_values [2K+1, Dh]
 *       self_attn_layer_norm  weight [D], bias [D]
 *       fc1 weight [F, D], bias [F];  fc2 weight [D, F], bias [D]
 *       final_layer_norm
 *   decoder.layers.i  for each decoder layer: self_attn, self_attn_layer_norm,
 *       encoder_attn (laid out as self_attn, never with relative tables),
 *       encoder_attn_layer_norm, fc1, fc2, final_layer_norm
 *   encoder.layer_norm, decoder.layer_norm  (pre-norm only)
 *
 * Tensors are packed without padding: tfm_params_count is exactly the sum of
 * the tensors' sizes.  When D and F are multiples of 16 (every preset) each
 * tensor starts 64 bytes after a 64-byte boundary anyway, so a buffer
 * allocated 64-byte aligned (as tfm_model_create does) gives aligned tensors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h" /* attention_relative_rows */
#include "tfm/model.h"

/* ---- the layout -------------------------------------------------------------- */

/* Hands out consecutive pieces of the buffer.  Without a buffer (base NULL)
 * it only counts, and every piece is NULL. */
typedef struct cursor {
    float *base;
    size_t used;
} cursor;

static float *take(cursor *k, size_t n)
{
    float *at = k->base ? k->base + k->used : NULL;
    k->used += n;
    return at;
}

/* p + n, keeping NULL for a layout without a buffer. */
static float *advance(float *p, size_t n) { return p ? p + n : NULL; }

static void place_linear(cursor *k, tfm_linear *l, size_t out, size_t in)
{
    l->weight = take(k, out * in);
    l->bias = take(k, out);
}

static void place_norm(cursor *k, tfm_layer_norm *n, size_t D)
{
    n->weight = take(k, D);
    n->bias = take(k, D);
}

/* q, k, v weights as one [3D, D] block and their biases as one [3D] block,
 * so that one GEMM projects all three (see tfm_attention); then the
 * relative tables, rel_rows x Dh each (rel_rows 0: none). */
static void place_attention(cursor *k, tfm_attention *a, size_t D, size_t rel_rows, size_t Dh)
{
    float *w = take(k, 3 * D * D);
    float *b = take(k, 3 * D);
    a->q_proj.weight = w;
    a->k_proj.weight = advance(w, D * D);
    a->v_proj.weight = advance(w, 2 * D * D);
    a->q_proj.bias = b;
    a->k_proj.bias = advance(b, D);
    a->v_proj.bias = advance(b, 2 * D);
    place_linear(k, &a->out_proj, D, D);
    a->relative_keys = rel_rows ? take(k, rel_rows * Dh) : NULL;
    a->relative_values = rel_rows ? take(k, rel_rows * Dh) : NULL;
}

/* Points p's members into base (may be NULL) and returns the number of
 * floats used.  The layer arrays of p may be NULL: the layers are then laid
 * out into a scratch struct, which is how counting works. */
static size_t walk(const tfm_config *c, float *base, tfm_params *p)
{
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    const size_t Vs = (size_t)c->src_vocab_size, Vt = (size_t)c->tgt_vocab_size;
    const size_t P = (size_t)c->max_positions;
    const size_t Dh = D / (size_t)c->n_heads;
    const size_t rel = (size_t)attention_relative_rows(c->relative_positions);
    cursor k = {base, 0};

    p->src_embed = take(&k, Vs * D);
    if (c->shared_embeddings) {
        p->tgt_embed = p->src_embed;
        p->output_proj = p->src_embed;
    } else {
        p->tgt_embed = take(&k, Vt * D);
        p->output_proj = c->shared_decoder_embeddings ? p->tgt_embed : take(&k, Vt * D);
    }
    p->src_positions = NULL;
    p->tgt_positions = NULL;
    if (c->positions == TFM_POS_LEARNED) {
        p->src_positions = take(&k, P * D);
        p->tgt_positions = take(&k, P * D);
    }

    tfm_encoder_layer scratch_enc;
    for (int i = 0; i < c->n_encoder_layers; i++) {
        tfm_encoder_layer *L = p->encoder_layers ? &p->encoder_layers[i] : &scratch_enc;
        place_attention(&k, &L->self_attn, D, rel, Dh);
        place_norm(&k, &L->self_attn_layer_norm, D);
        place_linear(&k, &L->fc1, F, D);
        place_linear(&k, &L->fc2, D, F);
        place_norm(&k, &L->final_layer_norm, D);
    }
    tfm_decoder_layer scratch_dec;
    for (int i = 0; i < c->n_decoder_layers; i++) {
        tfm_decoder_layer *L = p->decoder_layers ? &p->decoder_layers[i] : &scratch_dec;
        place_attention(&k, &L->self_attn, D, rel, Dh);
        place_norm(&k, &L->self_attn_layer_norm, D);
        place_attention(&k, &L->encoder_attn, D, 0, Dh);
        place_norm(&k, &L->encoder_attn_layer_norm, D);
        place_linear(&k, &L->fc1, F, D);
        place_linear(&k, &L->fc2, D, F);
        place_norm(&k, &L->final_layer_norm, D);
    }

    memset(&p->encoder_layer_norm, 0, sizeof p->encoder_layer_norm);
    memset(&p->decoder_layer_norm, 0, sizeof p->decoder_layer_norm);
    if (c->pre_norm) {
        place_norm(&k, &p->encoder_layer_norm, D);
        place_norm(&k, &p->decoder_layer_norm, D);
    }
    /* The variants of models from elsewhere come last, so that the layout
     * of the paper's model is the same with or without them. */
    p->output_bias = c->output_bias ? take(&k, Vt) : NULL;
    memset(&p->encoder_embedding_norm, 0, sizeof p->encoder_embedding_norm);
    memset(&p->decoder_embedding_norm, 0, sizeof p->decoder_embedding_norm);
    if (c->embedding_layer_norm) {
        place_norm(&k, &p->encoder_embedding_norm, D);
        place_norm(&k, &p->decoder_embedding_norm, D);
    }
    return k.used;
}

size_t tfm_params_count(const tfm_config *c)
{
    tfm_params scratch = {0};
    return walk(c, NULL, &scratch);
}

tfm_status tfm_params_layout(const tfm_config *c, float *base, tfm_params *p)
{
    memset(p, 0, sizeof *p);
    /* A bad configuration would make the sizes meaningless. */
    if (tfm_config_validate(c, NULL) != TFM_OK) return TFM_ERR_ARG;
    p->encoder_layers = calloc((size_t)c->n_encoder_layers, sizeof *p->encoder_layers);
    p->decoder_layers = calloc((size_t)c->n_decoder_layers, sizeof *p->decoder_layers);
    if (!p->encoder_layers || !p->decoder_layers) {
        tfm_params_free_layout(p);
        return TFM_ERR_NOMEM;
    }
    walk(c, base, p);
    return TFM_OK;
}

void tfm_params_free_layout(tfm_params *p)
{
    if (!p) return;
    free(p->encoder_layers);
    free(p->decoder_layers);
    memset(p, 0, sizeof *p);
}

/* ---- visiting ---------------------------------------------------------------- */

typedef struct visitor {
    tfm_params_visit_fn fn;
    void *ctx;
} visitor;

/* Reports one tensor called "prefix.suffix" of shape [d0] (d1 == 0) or [d0, d1]. */
static void emit(const visitor *v, const char *prefix, const char *suffix, float *data,
                 int64_t d0, int64_t d1)
{
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    int64_t shape[2] = {d0, d1};
    v->fn(v->ctx, name, d1 ? 2 : 1, shape, data);
}

static void visit_linear(const visitor *v, const char *prefix, const tfm_linear *l, int64_t out,
                         int64_t in)
{
    emit(v, prefix, "weight", l->weight, out, in);
    emit(v, prefix, "bias", l->bias, out, 0);
}

static void visit_norm(const visitor *v, const char *prefix, const tfm_layer_norm *n, int64_t D)
{
    emit(v, prefix, "weight", n->weight, D, 0);
    emit(v, prefix, "bias", n->bias, D, 0);
}

/* In memory order: the three weights, the three biases, out_proj, then the
 * relative tables when there are (rel_rows x Dh each). */
static void visit_attention(const visitor *v, const char *prefix, const tfm_attention *a,
                            int64_t D, int64_t rel_rows, int64_t Dh)
{
    const char *names[3] = {"q_proj", "k_proj", "v_proj"};
    const tfm_linear *lin[3] = {&a->q_proj, &a->k_proj, &a->v_proj};
    char sub[128];
    for (int i = 0; i < 3; i++) {
        snprintf(sub, sizeof sub, "%s.weight", names[i]);
        emit(v, prefix, sub, lin[i]->weight, D, D);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(sub, sizeof sub, "%s.bias", names[i]);
        emit(v, prefix, sub, lin[i]->bias, D, 0);
    }
    snprintf(sub, sizeof sub, "%s.out_proj", prefix);
    visit_linear(v, sub, &a->out_proj, D, D);
    if (rel_rows) {
        emit(v, prefix, "relative_keys.weight", a->relative_keys, rel_rows, Dh);
        emit(v, prefix, "relative_values.weight", a->relative_values, rel_rows, Dh);
    }
}

void tfm_params_visit(const tfm_config *c, const tfm_params *p, tfm_params_visit_fn fn, void *ctx)
{
    const visitor v = {fn, ctx};
    const int64_t D = c->d_model, F = c->d_ff;
    const int64_t Vs = c->src_vocab_size, Vt = c->tgt_vocab_size, P = c->max_positions;
    const int64_t Dh = D / c->n_heads, rel = attention_relative_rows(c->relative_positions);

    /* A shared matrix is one tensor, reported once, under the first name:
     * the encoder's, or the decoder's input embedding's. */
    emit(&v, "encoder.embed_tokens", "weight", p->src_embed, Vs, D);
    if (!c->shared_embeddings) {
        emit(&v, "decoder.embed_tokens", "weight", p->tgt_embed, Vt, D);
        if (!c->shared_decoder_embeddings)
            emit(&v, "decoder.output_projection", "weight", p->output_proj, Vt, D);
    }
    if (c->positions == TFM_POS_LEARNED) {
        emit(&v, "encoder.embed_positions", "weight", p->src_positions, P, D);
        emit(&v, "decoder.embed_positions", "weight", p->tgt_positions, P, D);
    }

    char prefix[96];
    for (int i = 0; i < c->n_encoder_layers; i++) {
        const tfm_encoder_layer *L = &p->encoder_layers[i];
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.self_attn", i);
        visit_attention(&v, prefix, &L->self_attn, D, rel, Dh);
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.self_attn_layer_norm", i);
        visit_norm(&v, prefix, &L->self_attn_layer_norm, D);
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.fc1", i);
        visit_linear(&v, prefix, &L->fc1, F, D);
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.fc2", i);
        visit_linear(&v, prefix, &L->fc2, D, F);
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.final_layer_norm", i);
        visit_norm(&v, prefix, &L->final_layer_norm, D);
    }
    for (int i = 0; i < c->n_decoder_layers; i++) {
        const tfm_decoder_layer *L = &p->decoder_layers[i];
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.self_attn", i);
        visit_attention(&v, prefix, &L->self_attn, D, rel, Dh);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.self_attn_layer_norm", i);
        visit_norm(&v, prefix, &L->self_attn_layer_norm, D);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.encoder_attn", i);
        visit_attention(&v, prefix, &L->encoder_attn, D, 0, Dh);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.encoder_attn_layer_norm", i);
        visit_norm(&v, prefix, &L->encoder_attn_layer_norm, D);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.fc1", i);
        visit_linear(&v, prefix, &L->fc1, F, D);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.fc2", i);
        visit_linear(&v, prefix, &L->fc2, D, F);
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.final_layer_norm", i);
        visit_norm(&v, prefix, &L->final_layer_norm, D);
    }
    if (c->pre_norm) {
        visit_norm(&v, "encoder.layer_norm", &p->encoder_layer_norm, D);
        visit_norm(&v, "decoder.layer_norm", &p->decoder_layer_norm, D);
    }
    if (c->output_bias) emit(&v, "decoder.output_projection", "bias", p->output_bias, Vt, 0);
    if (c->embedding_layer_norm) {
        visit_norm(&v, "encoder.layernorm_embedding", &p->encoder_embedding_norm, D);
        visit_norm(&v, "decoder.layernorm_embedding", &p->decoder_embedding_norm, D);
    }
}

/* The configuration in one line, with the parameter count it makes (here,
 * beside tfm_params_count, so that config.c needs nothing of this file). */
tfm_status tfm_config_describe(const tfm_config *c, tfm_buf *out)
{
    static const char *const absolute[] = {"sinusoidal", "learned", "", "sinusoidal (concatenated)"};
    static const char *const activation[] = {"", ", swish", ", gelu-sigmoid"};
    char positions[80], vocab[32];
    if (c->relative_positions && c->positions == TFM_POS_NONE)
        snprintf(positions, sizeof positions, "relative positions (clipped at %d)",
                 c->relative_positions);
    else if (c->relative_positions)
        snprintf(positions, sizeof positions, "%s and relative positions (clipped at %d)",
                 absolute[c->positions], c->relative_positions);
    else
        snprintf(positions, sizeof positions, "%s positions", absolute[c->positions]);
    if (c->src_vocab_size == c->tgt_vocab_size)
        snprintf(vocab, sizeof vocab, "%d", (int)c->tgt_vocab_size);
    else
        snprintf(vocab, sizeof vocab, "%d/%d", (int)c->src_vocab_size, (int)c->tgt_vocab_size);
    return tfm_buf_printf(out, "d_model %d, d_ff %d, %d heads, %d+%d layers, %s-norm%s, %s, "
                               "vocabulary %s, %zu parameters",
                          c->d_model, c->d_ff, c->n_heads, c->n_encoder_layers,
                          c->n_decoder_layers, c->pre_norm ? "pre" : "post",
                          activation[c->activation], positions, vocab, tfm_params_count(c));
}
