/* batch_workspace.c - the training workspace (tfm/model.h): its life
 * (create, free, threads), the helpers that run a pass over its rows or its
 * sentences on those threads, and the arena that carves its buffers into
 * the saved activations and their gradients.  See nn/batch.h. */
#include <stdlib.h>
#include <string.h>

#include "core/blas.h"
#include "core/chunks.h"
#include "pass/batch.h"

/* Floats per chunk of a pass over rows: ~10 us of elementwise work, worth
 * a thread start, and small enough to stay in the cache between the steps
 * of a fused pass. */
enum { ROW_FLOATS = 1 << 14 };

/* ---- threads ------------------------------------------------------------------------- */

size_t batch_row_chunk(size_t width)
{
    return width >= ROW_FLOATS ? 1 : (ROW_FLOATS + width - 1) / width;
}

void batch_for_rows(const tfm_pass_workspace *ws, int N, size_t width,
                    void (*fn)(void *ctx, size_t c, size_t lo, size_t hi), void *ctx)
{
    const size_t rows = batch_row_chunk(width);
    int nt = tfm_chunk_count((size_t)N, rows) >= 4 ? ws->n_threads : 1;
    tfm_parallel_chunks(nt, (size_t)N, rows, fn, ctx);
}

/* The BLAS is held to one thread meanwhile (one level of threads at a
 * time), in a section of core/blas.h: other workspaces may hold it too. */
void batch_for_sentences(const tfm_pass_workspace *ws,
                         void (*fn)(void *ctx, int slot, size_t b), void *ctx)
{
    const size_t B = (size_t)ws->pk.B;
    if (ws->n_threads < 2 || B < 2) {
        tfm_parallel_slots(1, B, fn, ctx);
        return;
    }
    tfm_blas_one_thread_begin();
    tfm_parallel_slots(ws->n_threads, B, fn, ctx);
    tfm_blas_one_thread_end();
}

/* ---- carving a buffer into pieces ---------------------------------------------------- */

void *batch_carve(batch_arena *k, size_t n, size_t size)
{
    k->used = (k->used + 63) & ~(size_t)63;
    void *at = k->base ? k->base + k->used : NULL;
    k->used += n * size;
    return at;
}

bool batch_arena_build(tfm_buf *b, void (*layout)(tfm_pass_workspace *, batch_arena *),
                       tfm_pass_workspace *ws)
{
    batch_arena k = {NULL, 0};
    layout(ws, &k);
    char *base = tfm_buf_array(b, k.used, 1);
    if (!base) return false;
    k = (batch_arena){base, 0};
    layout(ws, &k);
    return true;
}

static void place_residual(batch_arena *k, residual_acts *r, size_t N, size_t D, bool pre,
                           bool drop)
{
    r->norm = pre ? BATCH_CARVE(k, N * D, float) : NULL;
    r->sum = pre ? NULL : BATCH_CARVE(k, N * D, float);
    r->mean = BATCH_CARVE(k, N, float);
    r->rstd = BATCH_CARVE(k, N, float);
    r->keep = drop ? BATCH_CARVE(k, N * D, uint8_t) : NULL;
    r->out = BATCH_CARVE(k, N * D, float);
}

/* n_q query rows; n_kv > 0 rows of a separate key/value source (cross) */
static void place_attention(batch_arena *k, attention_acts *a, size_t n_q, size_t n_kv,
                            size_t n_att, size_t D, bool drop)
{
    a->q = BATCH_CARVE(k, n_q * (n_kv ? D : 3 * D), float);
    a->kv = n_kv ? BATCH_CARVE(k, n_kv * 2 * D, float) : NULL;
    a->att = BATCH_CARVE(k, n_att, float);
    a->keep = drop ? BATCH_CARVE(k, n_att, uint8_t) : NULL;
    a->ctx = BATCH_CARVE(k, n_q * D, float);
}

static void place_norm(batch_arena *k, norm_acts *n, size_t N, size_t D, bool pre)
{
    n->out = pre ? BATCH_CARVE(k, N * D, float) : NULL;
    n->mean = pre ? BATCH_CARVE(k, N, float) : NULL;
    n->rstd = pre ? BATCH_CARVE(k, N, float) : NULL;
}

static void place_embed_norm(batch_arena *k, embed_norm_acts *n, size_t N, size_t D, bool on)
{
    n->in = on ? BATCH_CARVE(k, N * D, float) : NULL;
    n->mean = on ? BATCH_CARVE(k, N, float) : NULL;
    n->rstd = on ? BATCH_CARVE(k, N, float) : NULL;
}

void batch_layout_acts(tfm_pass_workspace *ws, batch_arena *k)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    acts *a = &ws->a;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff, V = (size_t)c->tgt_vocab_size;
    const size_t Ns = (size_t)pk->Ns, Nt = (size_t)pk->Nt, N = Ns > Nt ? Ns : Nt;
    const bool pre = c->pre_norm, drop = ws->p_drop > 0, att_drop = ws->p_att > 0;
    const bool emb_norm = c->embedding_layer_norm;
    /* a gated activation's backward needs each layer's activation-dropout mask */
    const bool keep_act = ws->p_act > 0 && c->activation != TFM_ACT_RELU;

    place_embed_norm(k, &a->src_emb_norm, Ns, D, emb_norm);
    a->src_x = BATCH_CARVE(k, Ns * D, float);
    a->src_keep = drop ? BATCH_CARVE(k, Ns * D, uint8_t) : NULL;
    a->enc = ws->enc;
    for (int l = 0; l < c->n_encoder_layers; l++) {
        encoder_layer_acts *L = &a->enc[l];
        place_attention(k, &L->attn, Ns, 0, pk->n_enc_att, D, att_drop);
        place_residual(k, &L->r_attn, Ns, D, pre, drop);
        L->hidden = BATCH_CARVE(k, Ns * F, float);
        L->act_keep = keep_act ? BATCH_CARVE(k, Ns * F, uint8_t) : NULL;
        place_residual(k, &L->r_ffn, Ns, D, pre, drop);
    }
    place_norm(k, &a->enc_norm, Ns, D, pre);
    place_embed_norm(k, &a->tgt_emb_norm, Nt, D, emb_norm);
    a->tgt_x = BATCH_CARVE(k, Nt * D, float);
    a->tgt_keep = drop ? BATCH_CARVE(k, Nt * D, uint8_t) : NULL;
    a->dec = ws->dec;
    for (int l = 0; l < c->n_decoder_layers; l++) {
        decoder_layer_acts *L = &a->dec[l];
        place_attention(k, &L->self, Nt, 0, pk->n_dec_att, D, att_drop);
        place_residual(k, &L->r_self, Nt, D, pre, drop);
        place_attention(k, &L->cross, Nt, Ns, pk->n_cross_att, D, att_drop);
        place_residual(k, &L->r_cross, Nt, D, pre, drop);
        L->hidden = BATCH_CARVE(k, Nt * F, float);
        L->act_keep = keep_act ? BATCH_CARVE(k, Nt * F, uint8_t) : NULL;
        place_residual(k, &L->r_ffn, Nt, D, pre, drop);
    }
    place_norm(k, &a->dec_norm, Nt, D, pre);
    a->logits = BATCH_CARVE(k, Nt * V, float);
    a->row_loss = BATCH_CARVE(k, Nt, double);
    a->row_nll = BATCH_CARVE(k, Nt, double);
    a->sub = BATCH_CARVE(k, N * D, float);
    a->act_keep = ws->p_act > 0 && !keep_act ? BATCH_CARVE(k, N * F, uint8_t) : NULL;
    a->act = c->activation != TFM_ACT_RELU ? BATCH_CARVE(k, N * F, float) : NULL;
    a->scratch = BATCH_CARVE(k, pk->fwd_stride * (size_t)ws->n_threads, float);
}

void batch_layout_grads(tfm_pass_workspace *ws, batch_arena *k)
{
    const tfm_config *c = &ws->m->config;
    const packing *pk = &ws->pk;
    grad_acts *g = &ws->g;
    const size_t D = (size_t)c->d_model, F = (size_t)c->d_ff;
    const size_t Ns = (size_t)pk->Ns, Nt = (size_t)pk->Nt, N = Ns > Nt ? Ns : Nt;

    g->enc_x = c->pre_norm ? BATCH_CARVE(k, Ns * D, float) : NULL;
    g->enc_out = BATCH_CARVE(k, Ns * D, float);
    g->dec_x = BATCH_CARVE(k, Nt * D, float);
    g->sum = BATCH_CARVE(k, N * D, float);
    g->sub = BATCH_CARVE(k, N * D, float);
    g->norm = BATCH_CARVE(k, N * D, float);
    g->ctx = BATCH_CARVE(k, N * D, float);
    g->qkv = BATCH_CARVE(k, N * 3 * D, float);
    g->kv = BATCH_CARVE(k, Ns * 2 * D, float);
    g->hidden = BATCH_CARVE(k, N * F, float);
    g->scratch = BATCH_CARVE(k, pk->bwd_stride * (size_t)ws->n_threads, float);
    const size_t rel = (size_t)attention_relative_rows(c->relative_positions);
    const size_t Dh = D / (size_t)c->n_heads;
    g->rel_partials = rel ? BATCH_CARVE(k, (size_t)pk->B * 2 * rel * Dh, float) : NULL;
    g->ln_partials = BATCH_CARVE(k, tfm_chunk_count(N, batch_row_chunk(D)) * 2 * D, float);
}

/* ---- the workspace's life ------------------------------------------------------------ */

tfm_status tfm_pass_workspace_create(const tfm_model *m, tfm_pass_workspace **out,
                                      tfm_error *err)
{
    *out = NULL;
    if (!m->float_weights)
        return tfm_error_set(err, TFM_ERR_ARG, "the model holds its weights in %s only (loaded "
                             "for inference): load it with tfm_model_load",
                             tfm_compute_type_name(m->compute));
    tfm_pass_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
    ws->m = m;
    ws->n_threads = 1;
    ws->enc = calloc((size_t)m->config.n_encoder_layers, sizeof *ws->enc);
    ws->dec = calloc((size_t)m->config.n_decoder_layers, sizeof *ws->dec);
    tfm_buf_init(&ws->index);
    tfm_buf_init(&ws->act);
    tfm_buf_init(&ws->grad);
    tfm_buf_init(&ws->sinusoids);
    if (!ws->enc || !ws->dec) {
        tfm_pass_workspace_free(ws);
        return tfm_error_set(err, TFM_ERR_NOMEM, "training: out of memory");
    }
    *out = ws;
    return TFM_OK;
}

void tfm_pass_workspace_free(tfm_pass_workspace *ws)
{
    if (!ws) return;
    free(ws->enc);
    free(ws->dec);
    tfm_buf_free(&ws->index);
    tfm_buf_free(&ws->act);
    tfm_buf_free(&ws->grad);
    tfm_buf_free(&ws->sinusoids);
    tfm_params_free_layout(&ws->gp);
    free(ws);
}

void tfm_pass_workspace_set_threads(tfm_pass_workspace *ws, int n_threads)
{
    ws->n_threads = n_threads < 1 ? 1
                    : n_threads > BATCH_MAX_THREADS ? BATCH_MAX_THREADS
                                                    : n_threads;
}
