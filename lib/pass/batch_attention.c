/* batch_attention.c - multi-head self-attention and encoder-decoder
 * attention over a packed batch, forward and backward: the q, k, v and
 * output projections as GEMMs over all rows, and scaled dot-product
 * attention sentence by sentence on the workspace's threads, each sentence
 * over its own rows only (so no padding and no mask but the causal one and
 * a window), its attention-dropout mask from a generator of its own, its
 * part of the relative position tables' gradients in a buffer of its own.
 * The kernels are attention.c's, relative.c's and linear.c's; see nn/batch.h. */
#include "pass/batch.h"

/* One kind of attention over the batch, sentence by sentence: the forward
 * pass reads q, k, v and writes A's ctx, att and keep; the backward pass
 * reads them and ws->g.ctx and accumulates into dq, dk, dv (laid out as q,
 * k, v), and sentence b's part of the relative tables' gradients into its
 * own g.rel_partials.  q rows ldq apart, k and v rows ldk apart.  Sentence
 * b touches only its own rows, weights, mask and partials, so sentences
 * run on any thread. */
typedef struct attend_job {
    const tfm_pass_workspace *ws;
    const attention_geometry *geo;
    const attention_acts *A;
    const attention_relative *rel; /* NULL: no relative positions */
    const float *q, *k, *v;
    int ldq, ldk;
    float *dq, *dk, *dv;
    uint64_t seed; /* of the attention-dropout masks: sentence b's from generator b */
} attend_job;

/* Floats of one sentence's relative partials: the two tables. */
static size_t relative_partial_size(const tfm_pass_workspace *ws)
{
    const tfm_config *c = &ws->m->config;
    return 2 * (size_t)attention_relative_rows(c->relative_positions) *
           (size_t)(c->d_model / c->n_heads);
}

static void attend_forward_sentence(void *ctx, int slot, size_t i)
{
    const attend_job *j = ctx;
    const tfm_pass_workspace *ws = j->ws;
    const attention_geometry *geo = j->geo;
    const attention_acts *A = j->A;
    const int D = ws->m->config.d_model, H = ws->m->config.n_heads, Dh = D / H, b = (int)i;
    const int nq = geo->q_len[b], nk = geo->k_len[b];
    float *ctx_b = A->ctx + (size_t)geo->q_off[b] * D;
    const float *qb = j->q + (size_t)geo->q_off[b] * j->ldq;
    const float *kb = j->k + (size_t)geo->k_off[b] * j->ldk;
    const float *vb = j->v + (size_t)geo->k_off[b] * j->ldk;
    float *att = A->att + geo->att_off[b];
    float *scratch = ws->a.scratch + (size_t)slot * ws->pk.fwd_stride;
    attention_forward(ctx_b, D, qb, j->ldq, kb, j->ldk, vb, j->ldk, nq, nk, H, Dh, geo->mask,
                      j->rel, scratch, att);
    if (A->keep) {
        tfm_rng rng;
        dropout_stream(&rng, j->seed, (uint64_t)b);
        attention_dropout_forward(ctx_b, D, vb, j->ldk, att, A->keep + geo->att_off[b], nq, nk, H,
                                  Dh, geo->mask, j->rel, ws->p_att, &rng, scratch);
    }
}

/* Every sentence's attention: q rows ldq apart, k and v rows ldk apart;
 * rel: the relative tables, or NULL. */
static void attend_forward(const tfm_pass_workspace *ws, const attention_geometry *geo,
                           attention_acts *A, const attention_relative *rel, const float *q,
                           int ldq, const float *k, const float *v, int ldk, tfm_rng *rng)
{
    attend_job job = {.ws = ws, .geo = geo, .A = A, .rel = rel, .q = q, .k = k, .v = v,
                      .ldq = ldq, .ldk = ldk,
                      .seed = A->keep ? batch_site_seed(rng, ws->p_att) : 0};
    batch_for_sentences(ws, attend_forward_sentence, &job);
}

static void attend_backward_sentence(void *ctx, int slot, size_t i)
{
    const attend_job *j = ctx;
    const tfm_pass_workspace *ws = j->ws;
    const attention_geometry *geo = j->geo;
    const attention_acts *A = j->A;
    const int D = ws->m->config.d_model, H = ws->m->config.n_heads, Dh = D / H, b = (int)i;
    const size_t qo = (size_t)geo->q_off[b] * j->ldq, ko = (size_t)geo->k_off[b] * j->ldk;
    attention_relative_grad drel = {NULL, NULL};
    if (j->rel) { /* this sentence's own part, zeroed: it is added to the rest after */
        const size_t n = relative_partial_size(ws);
        drel.keys = ws->g.rel_partials + (size_t)b * n;
        drel.values = drel.keys + n / 2;
        memset(drel.keys, 0, n * sizeof(float));
    }
    attention_backward(j->dq + qo, j->dk + ko, j->dv + ko, &drel,
                       ws->g.ctx + (size_t)geo->q_off[b] * D, D, j->q + qo, j->ldq, j->k + ko,
                       j->ldk, j->v + ko, j->ldk, A->att + geo->att_off[b],
                       A->keep ? A->keep + geo->att_off[b] : NULL, ws->p_att, geo->q_len[b],
                       geo->k_len[b], H, Dh, geo->mask, j->rel,
                       ws->g.scratch + (size_t)slot * ws->pk.bwd_stride);
}

/* The backward of attend_forward: dq, dk, dv laid out as q, k, v; gw's
 * relative tables (when rel is not NULL) gather every sentence's part, in
 * sentence order. */
static void attend_backward(const tfm_pass_workspace *ws, const attention_geometry *geo,
                            const attention_acts *A, const attention_relative *rel,
                            tfm_attention *gw, float *dq, float *dk, float *dv, const float *q,
                            int ldq, const float *k, const float *v, int ldk)
{
    attend_job job = {.ws = ws, .geo = geo, .A = A, .rel = rel, .q = q, .k = k, .v = v,
                      .ldq = ldq, .ldk = ldk, .dq = dq, .dk = dk, .dv = dv};
    batch_for_sentences(ws, attend_backward_sentence, &job);
    if (!rel) return;
    const size_t n = relative_partial_size(ws);
    for (int b = 0; b < ws->pk.B; b++) {
        const float *part = ws->g.rel_partials + (size_t)b * n;
        /* the keys' table, then the values' (contiguous in the partial, not in gw) */
        for (size_t i = 0; i < n / 2; i++) gw->relative_keys[i] += part[i];
        for (size_t i = 0; i < n / 2; i++) gw->relative_values[i] += part[n / 2 + i];
    }
}

/* ---- self-attention ------------------------------------------------------------------ */

/* Self-attention of the rows in (the sublayer's input) into out [N, D]. */
void batch_self_attention_forward(const tfm_pass_workspace *ws, attention_acts *A,
                                  const tfm_attention *w, const float *in, int N,
                                  const attention_geometry *geo, float *out, tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    attention_relative tables;
    const attention_relative *rel =
        attention_relative_of(&tables, w, ws->m->config.relative_positions);
    linear_forward(A->q, in, w->q_proj.weight, w->q_proj.bias, N, D, 3 * D);
    attend_forward(ws, geo, A, rel, A->q, 3 * D, A->q + D, A->q + 2 * D, 3 * D, rng);
    linear_forward(out, A->ctx, w->out_proj.weight, w->out_proj.bias, N, D, D);
}

/* dsub: dLoss/d(out) [N, D]; din accumulates dLoss/d(in). */
void batch_self_attention_backward(const tfm_pass_workspace *ws, const attention_acts *A,
                                   const tfm_attention *w, tfm_attention *gw, const float *in,
                                   float *din, const float *dsub, int N,
                                   const attention_geometry *geo)
{
    const grad_acts *g = &ws->g;
    const int D = ws->m->config.d_model;
    batch_zero_rows(g->ctx, N, (size_t)D);
    linear_backward(g->ctx, gw->out_proj.weight, gw->out_proj.bias, dsub, A->ctx,
                    w->out_proj.weight, N, D, D);
    batch_zero_rows(g->qkv, N, 3 * (size_t)D);
    attention_relative tables;
    const attention_relative *rel =
        attention_relative_of(&tables, w, ws->m->config.relative_positions);
    attend_backward(ws, geo, A, rel, gw, g->qkv, g->qkv + D, g->qkv + 2 * D, A->q, 3 * D,
                    A->q + D, A->q + 2 * D, 3 * D);
    /* the fused [3D, D] gradient: q_proj's, k_proj's and v_proj's lie in a row */
    linear_backward(din, gw->q_proj.weight, gw->q_proj.bias, g->qkv, in, w->q_proj.weight, N, D,
                    3 * D);
}

/* ---- encoder-decoder attention ------------------------------------------------------- */

/* Encoder-decoder attention of the decoder rows in [Nt, D] over the
 * encoder's output, into out [Nt, D]. */
void batch_cross_attention_forward(const tfm_pass_workspace *ws, attention_acts *A,
                                   const tfm_attention *w, const float *in, float *out,
                                   tfm_rng *rng)
{
    const int D = ws->m->config.d_model;
    const attention_geometry geo = batch_cross_geometry(ws);
    linear_forward(A->q, in, w->q_proj.weight, w->q_proj.bias, ws->pk.Nt, D, D);
    /* k and v: one GEMM with the [2D, D] weight (k_proj then v_proj) */
    linear_forward(A->kv, ws->a.enc_out, w->k_proj.weight, w->k_proj.bias, ws->pk.Ns, D, 2 * D);
    attend_forward(ws, &geo, A, NULL, A->q, D, A->kv, A->kv + D, 2 * D, rng);
    linear_forward(out, A->ctx, w->out_proj.weight, w->out_proj.bias, ws->pk.Nt, D, D);
}

/* As batch_self_attention_backward; the keys' and values' part goes into
 * g->enc_out, the gradient of the encoder's output. */
void batch_cross_attention_backward(const tfm_pass_workspace *ws, const attention_acts *A,
                                    const tfm_attention *w, tfm_attention *gw, const float *in,
                                    float *din, const float *dsub)
{
    const grad_acts *g = &ws->g;
    const int D = ws->m->config.d_model, Ns = ws->pk.Ns, Nt = ws->pk.Nt;
    const attention_geometry geo = batch_cross_geometry(ws);
    batch_zero_rows(g->ctx, Nt, (size_t)D);
    linear_backward(g->ctx, gw->out_proj.weight, gw->out_proj.bias, dsub, A->ctx,
                    w->out_proj.weight, Nt, D, D);
    batch_zero_rows(g->qkv, Nt, (size_t)D);
    batch_zero_rows(g->kv, Ns, 2 * (size_t)D);
    attend_backward(ws, &geo, A, NULL, gw, g->qkv, g->kv, g->kv + D, A->q, D, A->kv, A->kv + D,
                    2 * D);
    linear_backward(din, gw->q_proj.weight, gw->q_proj.bias, g->qkv, in, w->q_proj.weight, Nt, D,
                    D);
    linear_backward(g->enc_out, gw->k_proj.weight, gw->k_proj.bias, g->kv, ws->a.enc_out,
                    w->k_proj.weight, Ns, D, 2 * D);
}

